"""The zoo and registered image models as timm models (robustbench_dgsa.models.timm_compat), and timm_norm
following timm's whole data config. Skipped where timm is not installed."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

timm = pytest.importorskip("timm")
import timm.data  # noqa: E402

import robustbench_dgsa  # noqa: E402,F401 - registers with timm (already imported here)
from robustbench_dgsa.data.vision import resize_center_crop, to_model_input  # noqa: E402
from robustbench_dgsa.models.external import Preprocess  # noqa: E402
from robustbench_dgsa.models.zoo import ZOO_DIR, load_pretrained  # noqa: E402
from robustbench_dgsa.util.errors import UserError  # noqa: E402

ZOO = "dgvit_zoo_patch4_32"


def test_registration_is_lazy_and_runs_when_timm_is_imported():
    code = ("import robustbench_dgsa, sys, importlib.util; lazy = 'timm' not in sys.modules; "
            "importlib.util.find_spec('timm'); import timm; "
            "print(lazy, sorted(timm.list_models('*_zoo_*')), timm.list_models(pretrained=True, filter='dgvit_zoo*'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ("True ['dgvit_zoo_patch4_32', 'dvit_zoo_patch4_32', 'vit_zoo_patch4_32'] "
                   "['dgvit_zoo_patch4_32']"), out
    # timm imported first: the package registers at once (idempotent)
    robustbench_dgsa._install_timm_hook()
    assert ZOO in timm.list_models("*_zoo_*") and "dgvit_suite_patch4_32" in timm.list_models("*_suite_*")


def test_create_model_pretrained_is_the_shipped_model_offline_with_its_data_config():
    model = timm.create_model(ZOO, pretrained=True).eval()
    ext = load_pretrained("dgvit-cifar10")
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(x), ext.model(x))
    assert model.pretrained_cfg["file"] == str(ZOO_DIR / "dgvit-cifar10.safetensors")
    cfg = timm.data.resolve_model_data_config(model)
    pre = ext.preprocess
    assert cfg["input_size"] == (3, 32, 32) and cfg["crop_pct"] == 1.0 and cfg["interpolation"] == "bilinear"
    assert cfg["mean"] == pytest.approx(pre.mean) and cfg["std"] == pytest.approx(pre.std)
    assert cfg["mean"] != pytest.approx((0.485, 0.456, 0.406))  # not ImageNet's defaults
    assert timm.models.get_pretrained_cfg(ZOO).file == model.pretrained_cfg["file"]
    assert timm.data.resolve_model_data_config(ext.model) == cfg  # load_pretrained's model carries it too
    # timm's own evaluation transform of the data config = the suite's preprocessing of the checkpoint
    from PIL import Image
    img = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    theirs = timm.data.create_transform(**cfg)(Image.fromarray(img))
    ours = to_model_input(img[None], pre.mean, pre.std, image_size=32)[0]
    assert torch.allclose(theirs, ours, atol=1e-6)
    assert Preprocess.from_timm(model) == Preprocess(pre.mean, pre.std, 32, 3, 1.0, "bilinear")


def test_timm_model_protocol():
    model = timm.create_model(ZOO, pretrained=True).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        feats = model.forward_features(x)
        assert feats.shape == (2, 1 + 64, model.num_features) and model.num_features == 96
        assert torch.allclose(model.forward_head(feats), model(x), atol=1e-5)
        assert model.forward_head(feats, pre_logits=True).shape == (2, model.num_features)
    assert model.get_classifier() is model.head
    model.reset_classifier(7)
    assert model(x).shape == (2, 7) and model.num_classes == 7
    model.reset_classifier(0)
    assert model(x).shape == (2, 96) and model.num_classes == 0
    m100 = timm.create_model(ZOO, pretrained=True, num_classes=100)
    assert m100(x).shape == (2, 100) and m100.pretrained_cfg["num_classes"] == 100
    arch = timm.create_model("dgvit_suite_patch4_32", depth=2)
    assert len(arch.blocks) == 2 and arch.pretrained_cfg.get("file") is None
    with pytest.raises(UserError, match="no pretrained weights"):
        timm.create_model("dgvit_suite_patch4_32", pretrained=True)


def test_timm_norm_follows_crop_pct_and_interpolation():
    x = torch.arange(32 * 32, dtype=torch.float32).view(1, 1, 32, 32) / 1024.0
    # crop_pct 0.5: shorter side to 64 (2x), centre 32 crop = the middle 16 px of the original, each doubled
    got = resize_center_crop(x, 32, 0.5, "nearest")
    want = x[..., 8:24, 8:24].repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)
    assert torch.equal(got, want)
    assert Preprocess().to_record() == {"modality": "image", "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
                                        "image_size": None, "in_chans": 3}  # records without a crop unchanged
    rec = Preprocess((0.5,) * 3, (0.25,) * 3, 32, 3, 0.875, "bicubic").to_record()
    assert rec["crop_pct"] == 0.875 and rec["interpolation"] == "bicubic"
    img = np.random.default_rng(1).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    plain = to_model_input(img, (0.5,) * 3, (0.25,) * 3, image_size=32)
    cropped = to_model_input(img, (0.5,) * 3, (0.25,) * 3, image_size=32, crop_pct=0.875, interpolation="bicubic")
    assert cropped.shape == plain.shape and not torch.allclose(cropped, plain)
    with pytest.raises(UserError):
        Preprocess((0.5,) * 3, (0.25,) * 3, 32, 3, 0.9, "lanczos")
