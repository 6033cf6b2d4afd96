"""The resume state is safetensors + JSON: it round-trips exactly, and no pickle is ever loaded."""
from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from robustbench_dgsa.engine.train_state import (LEGACY_STATE_NAME, STATE_NAME, load_state, rng_state, save_state,
                                                 set_rng_state)
from robustbench_dgsa.util.errors import UserError

from robustbench_dgsa.config import resolve_config
from robustbench_dgsa.models import get_model_config

TINY = {"model.dim": 16, "model.depth": 1, "model.heads": 2, "model.head_hidden": 16, "train.epochs": 1,
        "train.batch_size": 32, "train.device": "cpu", "data.max_train": 64, "data.max_test": 32}


def tiny_cfg():
    return resolve_config(get_model_config("vit"), "synthetic-vision", "tiny", overrides=TINY)


def test_state_round_trip_is_exact(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    for _ in range(2):
        model(torch.randn(2, 3)).sum().backward()
        opt.step()
        sched.step()
    random.seed(5), np.random.seed(6), torch.manual_seed(7)
    before = rng_state()
    save_state(tmp_path / STATE_NAME, model, opt, sched, epoch=2, history=[{"val_loss": float("nan")}],
               run_id="r", seed=1, config_hash="h", finished=False)
    expect = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    st = load_state(tmp_path / STATE_NAME)
    set_rng_state(st["rng"])
    assert (random.random(), np.random.rand()) == expect[:2] and torch.equal(torch.rand(1), expect[2])
    assert st["rng"]["python"] == before["python"]
    assert st["epoch"] == 2 and st["run_id"] == "r" and np.isnan(st["history"][0]["val_loss"])
    osd, lsd = opt.state_dict(), st["optimizer"]
    assert lsd["param_groups"][0]["betas"] == (0.9, 0.95) and set(lsd["state"]) == set(osd["state"])
    for i, s in osd["state"].items():
        for k, v in s.items():
            assert torch.equal(v, lsd["state"][i][k]), (i, k)
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt2.load_state_dict(lsd)                                   # loads into a fresh optimizer
    assert st["scheduler"]["last_epoch"] == 2
    for k, v in model.state_dict().items():
        assert torch.equal(v, st["model"][k])


def test_legacy_pickle_state_is_refused_never_loaded(tmp_path, plant_pickle):
    from robustbench_dgsa.engine.train import train
    marker = tmp_path / "PWNED"
    out = tmp_path / "run"
    plant_pickle(out / LEGACY_STATE_NAME, marker)
    for resume in (True, False):
        with pytest.raises(UserError, match="old pickle format") as e:
            train(tiny_cfg(), 0, out, progress=False, resume=resume)
        assert "\n" not in str(e.value)
    assert not marker.exists()


def test_pickle_under_the_new_name_is_refused(tmp_path, plant_pickle):
    from robustbench_dgsa.engine.train import train
    marker = tmp_path / "PWNED"
    out = tmp_path / "run"
    plant_pickle(out / STATE_NAME, marker)
    with pytest.raises(UserError, match="cannot read training state"):
        train(tiny_cfg(), 0, out, progress=False, resume=True)
    assert not marker.exists()


def test_cli_train_resume_with_planted_pickle_is_one_line(tmp_path, plant_pickle):
    marker = tmp_path / "PWNED"
    out = tmp_path / "runs"
    plant_pickle(out / LEGACY_STATE_NAME, marker)  # one seed: the run lives in --out itself
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", "train", "--model", "vit", "--dataset",
                        "synthetic-vision", "--out", str(out), "--resume", "-q", *sets],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "pickle" in err, err
    assert not marker.exists()
