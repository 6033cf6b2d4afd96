"""Outside models over seeds: ``train(factory, ...)`` / ``train --module`` trains any nn.Module factory with the
suite's engine, and ``benchmark(..., train_seed=s)`` / ``evaluate --train-seed`` keeps an outside model's training
seed, so several trained seeds of one architecture are one model with n seeds in compare."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import robustbench_dgsa as rb
from robustbench_dgsa.util.errors import UserError

REPO = Path(__file__).resolve().parents[2]
SMALL = {"train.epochs": 1, "data.max_train": 64, "data.max_test": 32, "train.batch_size": 32}


def tiny_cnn(num_classes: int = 10, in_chans: int = 3) -> nn.Module:
    """A small outside model (not a ViT, no ModelConfig)."""
    return nn.Sequential(nn.Conv2d(in_chans, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, num_classes))


def test_train_a_factory_over_seeds_and_compare(tmp_path):
    store = tmp_path / "store"
    results = [rb.train(tiny_cnn, s, tmp_path / f"s{s}", store_dir=store, dataset="synthetic-vision",
                        preset="tiny", overrides=SMALL, progress=False) for s in (0, 1)]
    assert results[0].config_hash == results[1].config_hash           # one model, two seeds
    again = rb.train(tiny_cnn, 1, tmp_path / "s1", store_dir=store, dataset="synthetic-vision", preset="tiny",
                     overrides=SMALL, progress=False, resume=True)
    assert again.run_id == results[1].run_id                           # resume: the finished run, not a new one
    for s in (0, 1):
        rb.evaluate(tmp_path / f"s{s}" / "checkpoint.safetensors", corruptions=["fog"], severities=[1],
                    store_dir=store, progress=False)
    rows = rb.load_results(store)
    assert set(rows.model) == {"tiny_cnn"} and set(rows.seed) == {0, 1}
    ck, meta = __import__("robustbench_dgsa.models.checkpoint", fromlist=["x"]).load_checkpoint(
        tmp_path / "s0" / "checkpoint.safetensors")
    assert isinstance(ck, nn.Sequential) and ck.config.module.endswith(":tiny_cnn")
    with pytest.raises(UserError, match="module-level factory"):
        rb.train(lambda **kw: tiny_cnn(), 0, tmp_path / "x", dataset="synthetic-vision")


def test_benchmark_keeps_the_training_seed_of_an_outside_model(tmp_path):
    store = tmp_path / "store"
    for s in (0, 1, 2):
        torch.manual_seed(100 + s)                                      # three "trained" seeds: other weights
        rows = rb.benchmark(tiny_cnn(6), "synthetic-vision", corruption=["fog"], severity=[1], max_examples=24,
                            name="cnn", store=store, device="cpu", train_seed=s)
        assert set(rows.seed) == {s} and rows.config_hash.iloc[0].startswith("arch-")
    cmp = rb.compare(store, reference="cnn", partial=True)
    assert cmp.info["models"] == ["cnn"] and cmp.info["n_seeds"] == {"synthetic-vision": 3}   # one model, 3 seeds
    # without train_seed: seed -1 and the weights hash, as before (another weights hash under the name: refused)
    rows = rb.benchmark(tiny_cnn(6), "synthetic-vision", corruption=None, max_examples=24, name="solo",
                        store=store, device="cpu")
    assert set(rows.seed) == {-1} and rows.config_hash.iloc[0].startswith("weights-")
    with pytest.raises(UserError, match="another model named 'cnn'"):
        rb.benchmark(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 6)), "synthetic-vision", corruption=None,
                     max_examples=24, name="cnn", store=store, device="cpu", train_seed=3)


def test_cli_train_module(tmp_path):
    (tmp_path / "outside_cnn.py").write_text(
        "from torch import nn\n\ndef build(num_classes=10):\n    return nn.Sequential(nn.Conv2d(3, 4, 3), "
        "nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", "train", "--module", "outside_cnn:build", "--name",
                        "ocnn", "--dataset", "synthetic-vision", "--out", str(tmp_path / "run"), "--epochs", "1",
                        "--set", "data.max_train=64", "--set", "data.max_test=32", "--json", "-q"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    assert '"model": "ocnn"' in p.stdout and (tmp_path / "run" / "checkpoint.safetensors").is_file()
    # the same weights as an outside model evaluated with its training seed (evaluate --module ... --train-seed)
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", "evaluate", "--module", "outside_cnn:build",
                        "--weights", str(tmp_path / "run" / "checkpoint.safetensors"), "--train-seed", "4",
                        "--model-args", "num_classes=6", "--name", "ocnn-outside", "--dataset", "synthetic-vision", "--corruption", "fog",
                        "--severity", "1", "--max-examples", "16", "--store", str(tmp_path / "s2"), "-q"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = rb.load_results(tmp_path / "s2")
    assert set(rows.seed) == {4} and set(rows.model) == {"ocnn-outside"}
