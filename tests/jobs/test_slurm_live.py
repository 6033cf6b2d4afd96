"""The cluster path for real: a tiny sweep submitted to a live SLURM controller, as the generated sbatch array
and through submitit, then the store checked.

Runs only where ``sinfo`` reaches a controller with an idle node (``.ci/slurm-up`` brings up a single-node
cluster on the CI machine); skipped otherwise.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import cluster_ready   # tests/slurm_cluster.py

from robustbench_dgsa import store

TINY = ["model.dim=16", "model.depth=1", "model.heads=2", "model.head_hidden=16", "train.epochs=1",
        "train.batch_size=32", "data.max_train=96", "data.max_test=32", "train.device=cpu"]
WAIT_S = 600


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not cluster_ready(), reason="no live SLURM controller (sinfo/sbatch)")]


def _cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "robustbench_dgsa", *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def _plan(sweep_dir: Path, seeds: str) -> None:
    set_args = [a for kv in TINY for a in ("--set", kv)]
    _cli("sweep", "plan", str(sweep_dir), "--models", "vit,dgvit", "--datasets", "synthetic-vision",
         "--seeds", seeds, "--preset", "tiny", "--corruptions", "contrast", "--severity", "2", *set_args)


def _setup_lines() -> list[str]:
    """What a job needs to find this interpreter's package (and a worktree on PYTHONPATH, where set)."""
    lines = [f"export PATH={Path(sys.executable).parent}:$PATH", "export OMP_NUM_THREADS=1"]
    if os.environ.get("PYTHONPATH"):
        lines.append(f"export PYTHONPATH={os.environ['PYTHONPATH']}")
    return lines


def _wait(job_ids: list[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)], capture_output=True,
                             text=True).stdout
        if not out.strip():
            return
        time.sleep(2)
    subprocess.run(["scancel", *job_ids])
    pytest.fail(f"SLURM jobs {job_ids} still queued/running after {WAIT_S} s")


def _check_store(sweep_dir: Path, n_jobs: int) -> None:
    df = store.load_results(sweep_dir / "store")
    ev = df[(df.kind == "eval") & (df.metric == "accuracy")]
    assert sorted(set(ev.model)) == ["dgvit", "vit"]
    runs = ev.groupby(["model", "seed"])
    assert runs.ngroups == n_jobs
    for _, g in runs:
        assert sorted(set(zip(g.condition, g.severity))) == [("clean", 0), ("contrast", 2)]
    status = _cli("sweep", "status", str(sweep_dir), "--json").stdout
    assert '"pending": []' in status.replace("\n", "").replace("  ", " ") or "pending" not in status


def test_sbatch_array_runs_every_job(tmp_path):
    sweep_dir = tmp_path / "sweep with space"
    _plan(sweep_dir, "0")
    setup = [a for line in _setup_lines() for a in ("--setup", line)]
    _cli("sweep", "slurm", str(sweep_dir), "--gpus", "0", "--cpus", "1", "--mem", "2G", "--time", "10", *setup)
    script = sweep_dir / "slurm" / "sweep.sbatch"
    assert script.is_file()
    out = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    _wait([job])
    logs = sorted((sweep_dir / "slurm").glob("*.out"))
    assert len(logs) == 2, logs
    _check_store(sweep_dir, 2)


def test_submitit_runs_every_job(tmp_path):
    pytest.importorskip("submitit")
    sweep_dir = tmp_path / "sweep"
    _plan(sweep_dir, "0")
    env_path = os.environ.get("PATH", "")
    proc = _cli("sweep", "slurm", str(sweep_dir), "--submitit", "--gpus", "0", "--cpus", "1", "--mem", "2G",
                "--time", "10")
    ids = [tok.strip(",") for tok in proc.stdout.split(":", 1)[1].split()]
    assert len(ids) == 2 and env_path
    _wait(ids)
    _check_store(sweep_dir, 2)
