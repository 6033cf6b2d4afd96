"""A planted pickle in an unfinished job never runs: `sweep run`, `sweep run-one` and a `reproduce` re-run."""
from __future__ import annotations

import subprocess
import sys

import pytest

from robustbench_dgsa.jobs.sweep import job_dir, plan, write_plan
from robustbench_dgsa.util.errors import UserError

TINY = {"model.dim": "16", "model.depth": "1", "model.heads": "2", "model.head_hidden": "16",
        "train.epochs": "1", "train.batch_size": "32", "data.max_train": "64", "data.max_test": "32",
        "train.device": "cpu"}


def plant(folder, marker, plant_pickle) -> None:
    """A live pickle under both state names an unfinished job could have."""
    for name in ("train_state.pt", "train_state.safetensors"):
        plant_pickle(folder / name, marker)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "robustbench_dgsa", *args], capture_output=True, text=True,
                          timeout=120)


def test_sweep_run_and_run_one_never_unpickle(tmp_path, plant_pickle):
    sd, marker = tmp_path / "sw", tmp_path / "PWNED"
    jobs = write_plan(sd, plan(["vit"], [0], ["synthetic-vision"], "tiny", TINY), device="cpu")
    plant(job_dir(sd, jobs[0]), marker, plant_pickle)
    p = _cli("sweep", "run-one", str(sd), "--index", "0")
    err = p.stderr.strip()
    assert p.returncode != 0 and len(err.splitlines()) == 1 and "pickle" in err and "Traceback" not in err, err
    p = _cli("sweep", "run", str(sd))
    assert p.returncode == 1 and "pickle" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not marker.exists()


def test_reproduce_rerun_never_unpickles(tmp_path, plant_pickle):
    from robustbench_dgsa.jobs.reproduce import make_plan, reproduce
    out, marker = tmp_path / "rep", tmp_path / "PWNED"
    kw = dict(quick=True, models="vit", text_dataset="none", seeds=[0, 1], device="cpu")
    job = make_plan(out, **kw).jobs[0]
    plant(job_dir(out, job), marker, plant_pickle)
    with pytest.raises(UserError, match="pickle"):
        reproduce(out, progress=False, workers=2, **kw)      # the pool path: the worker's error comes back
    assert not marker.exists()
