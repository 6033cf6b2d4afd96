"""Models, registry, parameter/FLOP counts (docs/METHODS.md, Models) and `dgsa-bench models`."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from robustbench_dgsa.cli import app
from robustbench_dgsa.config import ModelConfig
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.models.flops import count_flops, count_params
from robustbench_dgsa.models import (MODEL_NAMES, TextTransformer, VisionTransformer, apply_model_overrides,
                                     create_model, get_model_config, model_names, parse_ratio)

# The paper's Table 9 counts (at 224x224 / patch 16, proj x4; the paper's CIFAR-10 ViT cell is its own inconsistency)
TABLE9 = {
    "vit": {10: 6_599_818, 100: 6_611_428, 1000: 6_727_528},
    "dvit": {10: 5_543_818, 100: 5_555_428, 1000: 5_671_528},
    "dgvit": {10: 5_559_754, 100: 5_571_364, 1000: 5_687_464},
}
CIFAR_32_4 = {"vit": 6_381_706, "dvit": 5_325_706, "dgvit": 5_341_642,
              "dgvit_nogate": 5_325_706, "dgvit_noqres": 5_341_642, "dgvit_learnlambda": 5_341_650}  # + λ_init × 8

SMALL = dict(dim=32, depth=2, heads=2, head_hidden=16, num_classes=5)
SMALL_IMAGE = dict(SMALL, image_size=16, patch_size=4)
SMALL_TEXT = dict(SMALL, vocab_size=50, max_len=12)



def _small(name: str, **kw):
    cfg = get_model_config(name)
    return create_model(cfg, **(SMALL_IMAGE if cfg.modality == "image" else SMALL_TEXT), **kw)


def _inputs(model, batch: int = 3):
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    if cfg.modality == "image":
        return torch.randn(batch, cfg.in_chans, cfg.image_size, cfg.image_size, generator=g), None
    ids = torch.randint(1, cfg.vocab_size, (batch, cfg.max_len), generator=g)
    kpm = torch.zeros(batch, cfg.max_len, dtype=torch.bool)
    kpm[1, 8:] = True
    kpm[-1, 3:] = True
    ids[kpm] = 0
    return ids, kpm


@pytest.mark.parametrize("name", ["vit", "dvit", "dgvit"])
def test_param_counts_table9_224(name):
    for classes, expected in TABLE9[name].items():
        model = create_model(name, image_size=224, patch_size=16, num_classes=classes)
        assert model.num_tokens == 197
        assert count_params(model) == expected, (name, classes)


@pytest.mark.parametrize("name", sorted(CIFAR_32_4))
def test_param_counts_32_4(name):
    model = create_model(name)
    assert model.num_tokens == 65
    assert count_params(model) == CIFAR_32_4[name]


def test_registry_configs():
    assert MODEL_NAMES == ("vit", "dvit", "dgvit", "vit_swiglu", "dgvit_nogate", "dgvit_noqres", "dgvit_learnlambda",
                           "transformer", "dt", "dgt", "transformer_swiglu")
    vit, dvit, dgvit = (get_model_config(n) for n in ("vit", "dvit", "dgvit"))
    assert (vit.attention, vit.ffn, vit.ffn_ratio) == ("mhsa", "gelu", 4.0)
    assert (dvit.attention, dvit.ffn, dvit.lambda_init) == ("diff", "swiglu", "layer")
    assert (dgvit.attention, dgvit.lambda_init, dgvit.lambda_init_value, dgvit.q_residual) == \
        ("dgsa", "fixed", 0.8, True)
    assert (vit.dim, vit.depth, vit.heads, vit.dropout, vit.image_size, vit.patch_size) == (256, 8, 8, 0.05, 32, 4)
    dgt = get_model_config("dgt")
    assert (dgt.modality, dgt.attention, dgt.q_residual, dgt.dim, dgt.depth, dgt.heads, dgt.dropout, dgt.max_len) \
        == ("text", "dgsa", False, 256, 6, 8, 0.1, 256)
    assert get_model_config("vit_swiglu").ffn == "swiglu"
    assert get_model_config("transformer_swiglu").attention == "mhsa"
    for name in MODEL_NAMES:
        assert get_model_config(name).name == name
    # a fresh copy each time
    a = get_model_config("dgvit")
    a.dim = 8
    assert get_model_config("dgvit").dim == 256


def test_unknown_model_lists_valid_names():
    with pytest.raises(UserError) as e:
        create_model("dgvitt")
    msg = str(e.value)
    assert "dgvitt" in msg and all(n in msg for n in MODEL_NAMES) and "\n" not in msg
    with pytest.raises(UserError, match="unknown model option 'nope'"):
        create_model("vit", nope=1)


def test_image_size_not_divisible_by_patch():
    with pytest.raises(UserError, match="image size 30 is not divisible by patch size 4"):
        create_model("vit", image_size=30)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_forward_backward(name):
    torch.manual_seed(0)
    model = _small(name)
    assert isinstance(model, VisionTransformer if model.config.modality == "image" else TextTransformer)
    x, kpm = _inputs(model)
    logits = model(x, key_padding_mask=kpm)
    assert logits.shape == (3, 5)
    logits.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_return_attention_and_padding(name):
    torch.manual_seed(0)
    model = _small(name).double().eval()
    x, kpm = _inputs(model)
    if model.config.modality == "image":
        x = x.double()
    logits_fused = model(x, key_padding_mask=kpm)
    logits, maps = model(x, key_padding_mask=kpm, return_attention=True)
    assert (logits - logits_fused).abs().max().item() <= 1e-10
    N = model.num_tokens
    assert len(maps) == model.config.depth
    att = model.config.attention
    for m in maps:
        assert m["attn"].shape == (3, 2, N, N)
        if att in ("diff", "dgsa"):
            assert m["a_pos"].shape == m["a_neg"].shape == (3, 2, N, N)
        if att == "dgsa":
            assert m["gate"].shape == (3, 2, N)
        if att == "diff":
            assert m["lambda"].ndim == 0
        if kpm is not None:
            full = torch.cat([torch.zeros(3, 1, dtype=torch.bool), kpm], 1)[:, None, None, :]
            for key in ("attn", "a_pos", "a_neg"):
                if key in m:
                    assert torch.all(m[key][full.expand_as(m[key])] == 0)


def test_text_padding_inferred_and_invariant():
    torch.manual_seed(0)
    model = _small("dgt").double().eval()
    ids, kpm = _inputs(model)
    assert torch.equal(model(ids), model(ids, key_padding_mask=kpm))        # mask taken from id 0
    # what sits in padded positions does not matter
    ids2 = ids.clone()
    ids2[kpm] = 7
    assert (model(ids2, key_padding_mask=kpm) - model(ids, key_padding_mask=kpm)).abs().max() <= 1e-12
    short = model(ids[:, :4], key_padding_mask=kpm[:, :4])                  # L < max_len is fine
    assert short.shape == (3, 5)
    with pytest.raises(UserError, match="exceeds max_len"):
        model(torch.ones(1, 13, dtype=torch.long))


def test_grayscale_replicated_to_three_channels():
    torch.manual_seed(0)
    model = _small("dgvit").eval()
    gray = torch.randn(2, 1, 16, 16)
    assert torch.equal(model(gray), model(gray.expand(-1, 3, -1, -1)))
    with pytest.raises(UserError, match="built for 16x16"):
        model(torch.randn(2, 3, 32, 32))


def test_ffn_variants():
    m = _small("dvit", ffn_ratio="16/3", ffn_dropout2=True)
    ffn = m.blocks[0].ffn
    assert ffn.fc1.out_features == 2 * round(16 / 3 * 32 / 2) and ffn.fc2.in_features == ffn.fc1.out_features // 2
    assert isinstance(ffn.drop2, torch.nn.Dropout)
    m2 = _small("dvit", ffn_ratio=2)
    assert m2.blocks[0].ffn.fc1.out_features == 64 and isinstance(m2.blocks[0].ffn.drop2, torch.nn.Identity)
    assert _small("vit").blocks[0].ffn.fc1.out_features == 128
    assert parse_ratio("5.333") == parse_ratio("16/3") == 16 / 3
    assert count_params(create_model("dvit", ffn_ratio=2)) < count_params(create_model("dvit"))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_flops_match_flop_counter_explicit_path(name):
    model = _small(name).eval().set_attention_impl("explicit")
    x, kpm = _inputs(model, batch=2)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(x, key_padding_mask=kpm)
    assert fc.get_total_flops() == 2 * count_flops(model.config)


def test_flops_full_size_vit_and_dgvit():
    for name in ("vit", "dgvit"):
        model = create_model(name).eval().set_attention_impl("explicit")
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            model(torch.randn(1, 3, 32, 32))
        assert fc.get_total_flops() == count_flops(model.config)
    # 224/16 multiply-adds land next to the paper's Table 9 "FLOPs" (1.441 / 1.234 / 1.238 G)
    for name, paper in (("vit", 1.441e9), ("dvit", 1.234e9), ("dgvit", 1.238e9)):
        macs = count_flops(apply_model_overrides(get_model_config(name), image_size=224, patch_size=16)) / 2
        assert abs(macs - paper) / paper < 0.005
    text = get_model_config("dt")
    assert count_flops(text, seq_len=10) < count_flops(text)
    with pytest.raises(UserError):
        count_flops(get_model_config("vit"), seq_len=10)


def test_models_cli_json():
    runner = CliRunner()
    res = runner.invoke(app, ["models", "--json", "--image-size", "224", "--patch-size", "16",
                              "--num-classes", "100", "--vocab-size", "1000", "--max-len", "64"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert set(rows) == set(model_names()) and set(MODEL_NAMES) <= set(rows)   # installed plugins' models too
    for name in ("vit", "dvit", "dgvit"):
        assert rows[name]["params"] == TABLE9[name][100]
        assert rows[name]["tokens"] == 197 and rows[name]["modality"] == "image"
        assert rows[name]["flops"] == count_flops(ModelConfig(**rows[name]["config"]))
    assert rows["dgvit"]["attention"] == "dgsa" and rows["transformer"]["tokens"] == 65
    res = runner.invoke(app, ["models", "--json", "-m", "dvit", "--proj", "16/3"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["ffn_ratio"] == 16 / 3 and row["params"] == count_params(create_model("dvit", ffn_ratio=16 / 3))
    res = runner.invoke(app, ["models"])                       # the table renders
    assert res.exit_code == 0 and "6,381,706" in res.stdout and "5,341,642" in res.stdout


# --------------------------------------------------------------------------------- model facts table
def _protan_lab(hex_colour: str) -> np.ndarray:
    """CIELAB of a colour as a protanope sees it (Machado, Oliveira & Fernandes 2009, severity 1.0)."""
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    sim = np.clip(np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]) @ lin, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ sim
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_model_facts_cover_the_registry_and_tell_models_apart():
    from robustbench_dgsa.models import MODEL_FACTS, MODEL_NAMES, display_name, model_order, model_styles
    assert set(MODEL_FACTS) == set(MODEL_NAMES)
    assert sorted(f.order for f in MODEL_FACTS.values()) == list(range(len(MODEL_FACTS)))
    assert model_order(["dgt", "zzz", "vit", "dvit"]) == ["vit", "dvit", "dgt", "zzz"]
    assert display_name("dgvit") == "DGViT" and display_name("custom") == "custom"
    for modality in ("image", "text"):
        fs = [f for f in MODEL_FACTS.values() if f.modality == modality]
        assert len({f.colour for f in fs}) == len({f.marker for f in fs}) == len({f.linestyle for f in fs}) == len(fs)
        # colour-blind safe: every pair stays far apart for a protanope (CIE76 ΔE; the old orange/green: ≈ 7)
        for i, a in enumerate(fs):
            for b in fs[i + 1:]:
                de = float(np.linalg.norm(_protan_lab(a.colour) - _protan_lab(b.colour)))
                assert de > 20, (a.name, b.name, de)
    styles = model_styles(["vit", "mine", "yours"])
    assert styles["vit"] == (MODEL_FACTS["vit"].colour, "o", "-") and styles["mine"] != styles["yours"]
