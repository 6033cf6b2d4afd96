"""One model, one data set, one number on every route: the Python API (rb.benchmark), ``evaluate --timm``,
``evaluate --module`` (imported from the current folder) and the RobustBench-shaped call give the same clean and
per-cell accuracies on a timm ViT (seeded random weights saved to safetensors), with raw [0, 1] input by
default and timm's normalisation only when asked for, on every route alike."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from robustbench_dgsa import store
from robustbench_dgsa.report.export import ROBUSTBENCH_CORRUPTIONS

N = 24
BATCH = 8
VIT = "vit_tiny_patch16_224"
VIT_ARGS = dict(num_classes=10, img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2)
MODEL_ARGS = "num_classes=10,img_size=32,patch_size=8,depth=2,embed_dim=32,num_heads=2"


@pytest.fixture(scope="module")
def cifar_like(tmp_path_factory):
    """RobustBench's parent folder: cifar-10-batches-py/test_batch (N images from the synthetic set, labels
    0..9) and CIFAR-10-C/ regenerated for the 15 corruptions x 5 severities; plus the ViT's weights."""
    timm = pytest.importorskip("timm")
    from safetensors.torch import save_file

    from corruptions.layout import regenerate
    from robustbench_dgsa.data import load_dataset
    root = tmp_path_factory.mktemp("rbdata")
    x = np.asarray(load_dataset("synthetic-vision", "test").x)[:N]
    y = np.asarray(load_dataset("synthetic-vision", "test").y)[:N] % 10  # learnable labels (6 classes)
    batches = root / "cifar-10-batches-py"
    batches.mkdir()
    with open(batches / "test_batch", "wb") as f:
        pickle.dump({b"data": x.transpose(0, 3, 1, 2).reshape(N, 3072), b"labels": list(map(int, y))}, f, protocol=2)
    regenerate(x, y, root / "CIFAR-10-C", list(ROBUSTBENCH_CORRUPTIONS), [1, 2, 3, 4, 5], seed=0)
    torch.manual_seed(7)
    vit = timm.create_model(VIT, pretrained=False, **VIT_ARGS)
    _fit(vit, x, y)  # a model whose predictions vary with the input, so the routes could disagree
    weights = root / "vit.safetensors"
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(weights))
    return root, weights


def _fit(model, x, y, steps=100):
    """A few Adam steps on raw [0, 1] input: predictions spread over classes, and differ under corruption. (A
    learning rate of 5e-3 collapsed this model onto one class on one CPU and not on another; 1e-3 is far from
    that edge.)"""
    xb = torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255.0
    yb = torch.as_tensor(y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        predicted = set(model(xb).argmax(1).tolist())
    assert len(predicted) > 1, "the fitted model predicts one class: the routes could not disagree"


def _module_file(folder):
    (folder / "my_vit_models.py").write_text(
        "import timm\n\n\ndef small_vit(**kw):\n"
        f"    return timm.create_model({VIT!r}, pretrained=False, **kw)\n", encoding="utf-8")


def _cells(rows):
    acc = rows[rows.metric == "accuracy"]
    return {(c, int(s)): float(v) for c, s, v in zip(acc.condition, acc.severity, acc.value)}


def _cli(args):
    from typer.testing import CliRunner
    from robustbench_dgsa.cli import app
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, (r.output, r.exception)


def _summary(cells):
    clean = cells[("clean", 0)]
    corrupted = [v for k, v in cells.items() if k[0] != "clean"]
    assert len(corrupted) == 75
    return clean, float(np.mean(corrupted))


def test_same_number_on_every_route(cifar_like, tmp_path, monkeypatch):
    import robustbench_dgsa as rb
    from robustbench_dgsa.robustbench import benchmark as rb_shaped
    root, weights = cifar_like
    monkeypatch.chdir(tmp_path)
    _module_file(tmp_path)  # --module imports it from the current folder, as `python -m` would
    common = dict(data_root=root, corruption="benchmark", severity="1-5", corruption_dir=root / "CIFAR-10-C",
                  max_examples=N, batch_size=BATCH, device="cpu")
    api = rb.benchmark(rb.load_timm_model(VIT, weights=weights, **VIT_ARGS), "cifar10", store=tmp_path / "api",
                       **common)
    cli = ["evaluate", "--dataset", "cifar10", "--data-root", str(root), "--corruption-dir",
           str(root / "CIFAR-10-C"), "--corruption", "benchmark", "--severity", "1-5", "--max-examples", str(N),
           "--batch-size", str(BATCH), "--device", "cpu", "--quiet", "--weights", str(weights),
           "--model-args", MODEL_ARGS]
    _cli(cli + ["--timm", VIT, "--store", str(tmp_path / "timm")])
    _cli(cli + ["--module", "my_vit_models:small_vit", "--store", str(tmp_path / "module")])
    model = rb.load_timm_model(VIT, weights=weights, **VIT_ARGS).model
    clean_rb, robust_rb = rb_shaped(model, n_examples=N, dataset="cifar10", threat_model="corruptions",
                                    data_dir=str(root), batch_size=BATCH, device="cpu")

    cells = {"api": _cells(api), "timm": _cells(store.load_results(tmp_path / "timm")),
             "module": _cells(store.load_results(tmp_path / "module"))}
    assert cells["api"] == cells["timm"] == cells["module"]          # every cell, every route: same code path
    clean, robust = _summary(cells["api"])
    assert clean == clean_rb  # the mean over 75 cells: summed in another order here, so to rounding
    assert robust == pytest.approx(robust_rb, rel=0, abs=1e-12)
    assert len(set(cells["api"].values())) > 3                          # the numbers say something
    preds = {k: store.load_predictions(tmp_path / k).sort_values(["condition", "severity", "index"])["pred"]
             .to_numpy() for k in ("api", "timm", "module")}
    assert np.array_equal(preds["api"], preds["timm"]) and np.array_equal(preds["api"], preds["module"])
    assert len(np.unique(preds["api"])) > 1
    # every run record says which input convention it used
    for k in ("api", "timm", "module"):
        rec = next(iter(store.load_runs(tmp_path / k).values()))
        assert rec["input_convention"] == "raw" and rec["input"].startswith("raw [0, 1] input")
        assert rec["examples"] == f"all {N}"


def _hand_preds(model, x_uint8, mean, std, crop=None):
    """Independent of the suite: uint8 -> [0, 1] -> (timm's eval resize + centre crop: ``crop`` = (size,
    crop_pct, interpolation)) -> (x - mean) / std -> model -> argmax."""
    xb = torch.from_numpy(np.ascontiguousarray(x_uint8)).permute(0, 3, 1, 2).float() / 255.0
    if crop is not None:
        size, crop_pct, mode = crop
        scale = int(np.floor(size / crop_pct))
        xb = torch.nn.functional.interpolate(xb, size=(scale, scale), mode=mode, antialias=True,
                                             align_corners=False).clamp(0, 1)
        top = int(round((scale - size) / 2.0))
        xb = xb[..., top:top + size, top:top + size]
    xb = (xb - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    with torch.no_grad():
        return torch.cat([model(xb[s:s + BATCH]) for s in range(0, len(xb), BATCH)]).argmax(1).numpy()


def test_timm_normalisation_is_opt_in_and_the_same_on_every_route(cifar_like, tmp_path, monkeypatch):
    import robustbench_dgsa as rb
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.robustbench import benchmark as rb_shaped
    root, weights = cifar_like
    monkeypatch.chdir(tmp_path)
    _module_file(tmp_path)
    vit = rb.load_timm_model(VIT, weights=weights, **VIT_ARGS)
    rb.benchmark(vit.model, "cifar10", data_root=root, corruption=None, max_examples=N, batch_size=BATCH,
                 device="cpu", timm_norm=True, store=tmp_path / "api")
    cli = ["evaluate", "--dataset", "cifar10", "--data-root", str(root), "--max-examples", str(N), "--batch-size",
           str(BATCH), "--device", "cpu", "--quiet", "--weights", str(weights), "--model-args", MODEL_ARGS,
           "--timm-norm", "--corruption", "gaussian_noise", "--severity", "1"]
    _cli(cli + ["--timm", VIT, "--store", str(tmp_path / "timm")])
    _cli(cli + ["--module", "my_vit_models:small_vit", "--store", str(tmp_path / "module")])
    clean_rb, _ = rb_shaped(vit.model, n_examples=N, dataset="cifar10", data_dir=str(root), batch_size=BATCH,
                            timm_norm=True)
    clean_raw_rb, _ = rb_shaped(vit.model, n_examples=N, dataset="cifar10", data_dir=str(root), batch_size=BATCH)

    x = np.asarray(load_dataset("cifar10", "test", data_root=root).x)[:N]
    y = np.asarray(load_dataset("cifar10", "test", data_root=root).y)[:N]
    pre = rb.Preprocess.from_timm(vit.model)
    assert (pre.crop_pct, pre.interpolation) == (0.9, "bicubic")  # timm's data config of this ViT, followed whole
    want_norm = _hand_preds(vit.model, x, pre.mean, pre.std, (pre.image_size, pre.crop_pct, pre.interpolation))
    want_raw = _hand_preds(vit.model, x, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    assert not np.array_equal(want_norm, want_raw)  # the two conventions really differ on this model
    for k in ("api", "timm", "module"):
        preds = store.load_predictions(tmp_path / k)
        got = preds[preds.condition == "clean"].sort_values("index")["pred"].to_numpy()
        assert np.array_equal(got, want_norm), k
        rec = next(iter(store.load_runs(tmp_path / k).values()))
        assert rec["input_convention"] == "timm" and rec["input"].startswith("normalised input")
    assert clean_rb == pytest.approx(float((want_norm == y).mean()), abs=0)
    assert clean_raw_rb == pytest.approx(float((want_raw == y).mean()), abs=0)
