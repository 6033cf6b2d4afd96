"""A user's first five minutes: comma lists for train --model, a default --store for --timm / --module,
rollout --timm taking its class count from the weights."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from robustbench_dgsa import store
from robustbench_dgsa.cli import app

TINY_SET = ["--set", "model.dim=16", "--set", "model.depth=1", "--set", "model.heads=2", "--set",
            "model.head_hidden=16", "--set", "data.max_train=32", "--set", "data.max_test=16"]


def test_train_takes_a_comma_list_of_models(tmp_path):
    r = CliRunner().invoke(app, ["train", "--model", "vit,dgvit", "--dataset", "synthetic-vision", "--preset",
                                 "tiny", "--epochs", "1", "--device", "cpu", "--out", str(tmp_path / "runs"),
                                 "--quiet", "--json", *TINY_SET])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [run["model"] for run in doc["runs"]] == ["vit", "dgvit"]
    assert (tmp_path / "runs" / "vit-synthetic-vision-s0" / "checkpoint.safetensors").is_file()
    assert (tmp_path / "runs" / "dgvit-synthetic-vision-s0" / "checkpoint.safetensors").is_file()
    assert set(store.load_results(tmp_path / "runs" / "store").model) == {"vit", "dgvit"}
    r = CliRunner().invoke(app, ["train", "--model", "vit,nosuchmodel", "--dataset", "synthetic-vision",
                                 "--out", str(tmp_path / "r2")])
    assert r.exit_code != 0 and not (tmp_path / "r2").exists()  # every name checked before the first run


def test_timm_store_defaults_like_the_other_commands(tmp_path, monkeypatch):
    pytest.importorskip("timm")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["evaluate", "--timm", "vit_tiny_patch16_224", "--random-init", "--model-args",
                                 "img_size=32,patch_size=8,depth=1,embed_dim=16,num_heads=2", "--dataset",
                                 "synthetic-vision", "--max-examples", "8", "--corruption", "contrast", "--severity",
                                 "1", "--device", "cpu", "--quiet", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["store"] == "runs/store"
    rows = store.load_results(tmp_path / "runs" / "store")
    assert set(rows.model) == {"vit_tiny_patch16_224-random-init-s0"}


def test_rollout_timm_takes_num_classes_from_the_weights(tmp_path):
    timm = pytest.importorskip("timm")
    from PIL import Image
    from safetensors.torch import save_file
    torch.manual_seed(0)
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=7, img_size=32, patch_size=8,
                            depth=1, embed_dim=16, num_heads=2)
    w = tmp_path / "vit.safetensors"
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(w))
    img = tmp_path / "img.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(img)
    r = CliRunner().invoke(app, ["rollout", str(img), "--timm", "vit_tiny_patch16_224", "--weights", str(w),
                                 "--model-args", "img_size=32,patch_size=8,depth=1,embed_dim=16,num_heads=2",
                                 "--out", str(tmp_path / "r.png"), "--json"])
    # timm's default head has 1000 classes: the 7-class weights load only because the count came from them
    assert r.exit_code == 0, r.output
    assert "1000-class head" not in r.output and (tmp_path / "r.png").is_file()
    r = CliRunner().invoke(app, ["rollout", str(img), "--timm", "vit_tiny_patch16_224", "--random-init", "--seed",
                                 "2", "--model-args", "img_size=32,patch_size=8,depth=1,embed_dim=16,num_heads=2",
                                 "--out", str(tmp_path / "r2.png")])
    assert r.exit_code == 0, r.output
    assert "1000-class head" in r.output  # said, not silent
