"""Checkpoints: one safetensors file, exact round trip, one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from robustbench_dgsa.models.checkpoint import load_checkpoint, read_checkpoint_meta, save_checkpoint
from robustbench_dgsa.util.errors import CheckpointError
from robustbench_dgsa.models import create_model

SMALL = dict(dim=32, depth=2, heads=2, head_hidden=16, num_classes=4)



def _model(name: str, **kw):
    torch.manual_seed(0)
    extra = dict(image_size=16, patch_size=4) if name in ("vit", "dvit", "dgvit", "vit_swiglu") else \
        dict(vocab_size=60, max_len=10)
    return create_model(name, **SMALL, **extra, **kw)


META = {"dataset": "synthetic-vision", "seed": 3, "epoch": 7, "classes": ["a", "b", "c", "d"],
        "metrics": {"val_accuracy": 0.5}, "run_config": {"train": {"lr": 0.001, "betas": [0.9, 0.999]}},
        "vocab": ["<pad>", "<unk>", "héllo"], "path": Path("/x/y")}


@pytest.mark.parametrize("name,kw", [("dgvit", {}), ("dt", {"ffn_ratio": 16 / 3}), ("vit", {"in_chans": 1})])
def test_round_trip_exact(tmp_path, name, kw):
    model = _model(name, **kw)
    with torch.no_grad():                     # make sure non-default values survive (λ vectors, gates, norms)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-3)
    out = save_checkpoint(tmp_path / "ck" / "model.safetensors", model, META)
    assert out == tmp_path / "ck" / "model.safetensors" and out.is_file()
    assert [p.name for p in out.parent.iterdir()] == ["model.safetensors"]      # no temporary left behind
    loaded, meta = load_checkpoint(out, expect_model=name)
    assert loaded.config == model.config
    assert not loaded.training
    sd, sd2 = model.state_dict(), loaded.state_dict()
    assert sd.keys() == sd2.keys()
    for k in sd:
        assert sd[k].dtype == sd2[k].dtype and torch.equal(sd[k], sd2[k]), k
    assert meta == json.loads(json.dumps({**META, "path": "/x/y"}))
    cfg, meta2 = read_checkpoint_meta(out)
    assert cfg == model.config and meta2 == meta
    model.eval()
    if model.config.modality == "image":
        x = torch.randn(2, model.config.in_chans, 16, 16)
    else:
        x = torch.randint(0, 60, (2, 10))
    assert torch.equal(model(x), loaded(x))


def test_expect_model_mismatch(tmp_path):
    path = save_checkpoint(tmp_path / "dvit.safetensors", _model("dvit"), {})
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path, expect_model="dgvit")
    assert "checkpoint holds 'dvit' but 'dgvit' was requested" in str(e.value)


def test_tampered_shape_names_tensor_and_shapes(tmp_path):
    path = save_checkpoint(tmp_path / "m.safetensors", _model("dgvit"), {"seed": 1})
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    tensors["blocks.1.attn.gate.weight"] = torch.zeros(3, 32)
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    msg = str(e.value)
    assert "'blocks.1.attn.gate.weight'" in msg and "(3, 32)" in msg and "(2, 32)" in msg and "\n" not in msg
    # a tensor gone / an extra tensor
    del tensors["blocks.1.attn.gate.weight"]
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(CheckpointError, match="lacks tensor 'blocks.1.attn.gate.weight'"):
        load_checkpoint(path)
    tensors["blocks.1.attn.gate.weight"] = torch.zeros(2, 32)
    tensors["blocks.1.attn.lambda_q1"] = torch.zeros(8)
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(CheckpointError, match="has tensor 'blocks.1.attn.lambda_q1' that 'dgvit' does not use"):
        load_checkpoint(path)


def test_config_edited_to_other_model_is_refused(tmp_path):
    """A dvit file whose header claims dgvit: the weights do not fit and the message says which tensor."""
    path = save_checkpoint(tmp_path / "m.safetensors", _model("dvit"), {})
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata())
    cfg = json.loads(metadata["model_config"])
    cfg.update(name="dgvit", attention="dgsa")
    metadata["model_config"] = json.dumps(cfg)
    save_file(load_file(str(path)), str(path), metadata=metadata)
    with pytest.raises(CheckpointError, match="lacks tensor 'blocks.0.attn.gate.weight'"):
        load_checkpoint(path, expect_model="dgvit")


def test_bad_files(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"this is not a safetensors file at all")
    with pytest.raises(CheckpointError, match="not a safetensors checkpoint"):
        load_checkpoint(junk)
    bare = tmp_path / "bare.safetensors"
    save_file({"w": torch.zeros(2)}, str(bare))
    with pytest.raises(CheckpointError, match="lacks metadata format_version, model_config, meta"):
        read_checkpoint_meta(bare)
    good = save_checkpoint(tmp_path / "good.safetensors", _model("vit"), {})
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(good.read_bytes()[:-1000])
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(truncated)
    assert "corrupt" in str(e.value) or "truncated" in str(e.value)
    with pytest.raises(CheckpointError, match="not a file"):
        load_checkpoint(tmp_path)
