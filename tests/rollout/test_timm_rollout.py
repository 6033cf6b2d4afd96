"""Rollout of timm VisionTransformers: captured maps, fused path restored, one Figure 2 grid with DGViT."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from robustbench_dgsa.util.errors import UserError

timm = pytest.importorskip("timm")


def _vit(**kw):
    torch.manual_seed(0)
    args = dict(num_classes=6, img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2)
    args.update(kw)
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, **args).eval()


def _manual_maps(vit, x):
    """Independent maps: each block's attention input captured by a pre-hook, softmax(q k^T * scale) by hand."""
    inputs = []
    hooks = [b.attn.register_forward_pre_hook(lambda m, a: inputs.append(a[0])) for b in vit.blocks]
    try:
        with torch.no_grad():
            vit(x)
    finally:
        for h in hooks:
            h.remove()
    maps = []
    for blk, inp in zip(vit.blocks, inputs):
        a = blk.attn
        B, N, _ = inp.shape
        qkv = a.qkv(inp).reshape(B, N, 3, a.num_heads, a.head_dim).permute(2, 0, 3, 1, 4)
        q, k = a.q_norm(qkv[0]), a.k_norm(qkv[1])
        maps.append(torch.softmax((q * a.scale) @ k.transpose(-2, -1), dim=-1))
    return maps


def test_capture_matches_manual_maps_and_restores_fused_flag():
    from robustbench_dgsa.rollout.capture import TimmViTAdapter, capture_attention
    vit = _vit()
    for b in vit.blocks:
        b.attn.fused_attn = True
    x = torch.rand(3, 3, 32, 32)
    with torch.no_grad():
        fused_logits = vit(x)
        logits, maps = TimmViTAdapter(vit)(x, return_attention=True)
    assert torch.allclose(logits, fused_logits, atol=1e-5)
    assert len(maps) == 2 and maps[0]["attn"].shape == (3, 2, 17, 17)
    for got, want in zip(maps, _manual_maps(vit, x)):
        assert torch.allclose(got["attn"], want, atol=1e-6)
    assert all(b.attn.fused_attn for b in vit.blocks)  # restored
    with pytest.raises(RuntimeError):
        with capture_attention(vit):
            assert not any(b.attn.fused_attn for b in vit.blocks)
            raise RuntimeError("boom")
    assert all(b.attn.fused_attn for b in vit.blocks)  # restored after a failure too


def test_image_rollout_of_timm_vit_equals_core_rollout():
    from robustbench_dgsa.models.external import Preprocess
    from robustbench_dgsa.rollout.core import image_heatmaps, rollout
    from robustbench_dgsa.rollout.runs import image_rollout_full
    vit = _vit()
    images = (np.random.RandomState(0).rand(4, 32, 32, 3) * 255).astype(np.uint8)
    pre = Preprocess.from_timm(vit).to_record()
    r = image_rollout_full(vit, images, pre, device="cpu")
    assert r.heatmaps.shape == (4, 32, 32) and r.relevance.shape == (4, 4, 4) and r.spec.mode == "positive"
    from robustbench_dgsa.engine.predict import prepare_images
    x = prepare_images(images, {**pre, "crop_pct": None})  # rollout resizes, never crops (heatmaps cover the image)
    want = image_heatmaps(rollout(_manual_maps(vit, x), mode="positive"), 32)
    assert np.allclose(r.heatmaps, want.numpy(), atol=1e-5)
    with torch.no_grad():
        probs = torch.softmax(vit(x), 1).numpy()
    # The rollout's forward (explicit maps) and timm's fused forward round differently: the same probabilities
    # within float32 rounding, and the predicted class is the argmax up to that rounding (a near-tie may flip).
    assert np.allclose(r.probs, probs, atol=1e-5)
    assert np.all(probs[np.arange(len(probs)), r.preds] >= probs.max(1) - 1e-5)


def test_timm_vit_and_dgvit_in_one_figure2(tmp_path):
    from robustbench_dgsa.models import create_model
    from robustbench_dgsa.rollout.plots import render_figure2
    from robustbench_dgsa.rollout.runs import load_rollout_sets, rollout_metrics_run
    sd = tmp_path / "store"
    a = rollout_metrics_run(_vit(), sd, corruptions=["contrast"], severities=[3], max_examples=8, n_figure=4,
                            meta={"model": "timm-vit"})
    torch.manual_seed(0)
    dg = create_model("dgvit", num_classes=6, dim=16, depth=1, heads=2, head_hidden=16)
    pre = {"modality": "image", "mean": [0.5] * 3, "std": [0.25] * 3, "image_size": 32, "in_chans": 3}
    b = rollout_metrics_run(dg, sd, corruptions=["contrast"], severities=[3], max_examples=8, n_figure=4,
                            preprocess=pre)
    assert a["model"] == "timm-vit" and 0.0 <= a["modes"]["positive|mean|d0"]["mass"] <= 1.0
    sets = load_rollout_sets(sd)
    assert {s.model for s in sets} == {"timm-vit", "dgvit"} and len({s.data_key for s in sets}) == 1
    desc = render_figure2(sets, tmp_path / "fig2.png", dataset="synthetic-vision")
    assert set(desc["models"]) == {"timm-vit", "dgvit"} and (tmp_path / "fig2.png").stat().st_size > 0
    assert b["rollout_set"]


def test_unsupported_models_are_refused():
    from robustbench_dgsa.rollout.capture import TimmViTAdapter, as_rollout_model
    with pytest.raises(UserError, match="class token"):
        TimmViTAdapter(_vit(reg_tokens=2))
    with pytest.raises(UserError, match="timm VisionTransformer"):
        as_rollout_model(torch.nn.Linear(3, 3))


def test_cli_rollout_of_a_timm_vit_beside_dgvit(tmp_path):
    """`dgsa-bench rollout IMG --timm NAME --weights W.safetensors --model ...`: one grid, one column per model,
    the timm column in the positive mode and the DGViT column signed."""
    import json

    from PIL import Image
    from safetensors.torch import save_file
    from typer.testing import CliRunner

    from robustbench_dgsa.cli import app
    vit = _vit(num_classes=10, patch_size=4)
    weights = tmp_path / "vit.safetensors"
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, weights)
    img = tmp_path / "img.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 36, 3), dtype=np.uint8)).save(img)
    out = tmp_path / "grid.png"
    args = ["rollout", str(img), "--model", "dgvit", "--timm", "vit_tiny_patch16_224", "--weights", str(weights),
            "--model-args", "img_size=32,patch_size=4,depth=2,embed_dim=32,num_heads=2,num_classes=10",
            "--out", str(out), "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{"):])
    modes = {m["model"]: m["mode"] for m in doc["models"]}
    assert modes["dgvit"].startswith("signed") and modes["vit_tiny_patch16_224"].startswith("positive"), modes
    assert out.is_file() and out.with_suffix(".npy").is_file()
    bad = CliRunner().invoke(app, ["rollout", str(img), "--model", "dgvit", "--weights", str(weights)])
    assert bad.exit_code != 0 and "--timm" in str(bad.exception or bad.output)
