"""The example plugin (examples/sigmoid-attention, installed as a package: its entry point) through every route a
built-in model takes, from the CLI: train over 2 seeds -> evaluate under corruptions -> compare with DGViT ->
rollout -> report; a sweep run by worker processes; the SLURM script; a 2-process gloo DDP step.

Every command is a fresh process that finds the plugin only through its installed entry point (no --plugin, no
DGSA_BENCH_PLUGINS), so this is what a user who ran `pip install ./examples/sigmoid-attention` gets. Skips when the
example is not installed (.ci/run installs it). Tiny sizes, synthetic data.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sigmoid_attention") is None,
    reason="the example plugin is not installed: pip install --no-deps --no-build-isolation "
           "./examples/sigmoid-attention (as .ci/run does)")

SMALL = ["--dataset", "synthetic-vision", "--preset", "tiny", "--epochs", "1", "--set", "data.max_train=96",
         "--set", "data.max_test=48", "--set", "train.batch_size=32"]


def _cli(args: list[str], cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DGSA_BENCH_PLUGINS"}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=240)
    if ok:
        assert p.returncode == 0, f"{args}: rc {p.returncode}\n{p.stderr[-2000:]}"
    return p


def test_sigmoid_vit_through_train_evaluate_compare_rollout_report(tmp_path):
    store = tmp_path / "store"
    assert "sigvit" in _cli(["models", "--json"], tmp_path).stdout
    _cli(["train", "--model", "sigvit", "--seed", "0-1", "--out", str(tmp_path / "runs"), "--store", str(store),
          *SMALL, "--set", "model.attention_args.bias=-3.0"], tmp_path)
    _cli(["train", "--model", "dgvit", "--seed", "0-1", "--out", str(tmp_path / "runs"), "--store", str(store),
          *SMALL], tmp_path)
    # the attention's own argument: sigmoid attention declares ``bias``; DGSA declares none (one error line, exit 2)
    bad = _cli(["train", "--model", "dgvit", "--out", str(tmp_path / "no"), *SMALL,
                "--set", "model.attention_args.bias=1"], tmp_path, ok=False)
    assert bad.returncode == 2 and "attention 'dgsa' takes no argument 'bias'" in bad.stderr
    ck = sorted((tmp_path / "runs").glob("sigvit-*/checkpoint.safetensors"))
    assert len(ck) == 2
    for c in ck + sorted((tmp_path / "runs").glob("dgvit-*/checkpoint.safetensors")):
        _cli(["evaluate", "--checkpoint", str(c), "--corruption", "gaussian_noise,fog", "--severity", "2",
              "--max-examples", "32", "--store", str(store), "-q"], tmp_path)
    out = json.loads(_cli(["compare", "--store", str(store), "--reference", "dgvit", "--json"], tmp_path).stdout)
    text = json.dumps(out)
    assert "sigvit" in text and "dgvit" in text
    seeds = {r["model"]: r["n_seeds"] for r in _rows(out, "n_seeds")}
    assert seeds.get("sigvit") == 2 and seeds.get("dgvit") == 2, seeds
    # the run records hold the plugin: module, distribution, version, source hash
    records = [json.loads(p.read_text()) for p in (store / "runs").glob("*.json")]
    plug = [p for r in records for p in r.get("plugins", []) if p["module"] == "sigmoid_attention"]
    assert plug and plug[0]["distribution"] == "dgsa-sigmoid-attention" and len(plug[0]["source_sha256"]) == 64
    # rollout: the registered default mode of sigmoid attention is "positive"; DGViT's stays "signed"
    img = tmp_path / "img.png"
    _write_png(img)
    _cli(["rollout", str(img), "--checkpoint", str(ck[0]), "--compare",
          str(next((tmp_path / "runs").glob("dgvit-*s0/checkpoint.safetensors")))], tmp_path)
    doc = json.loads((tmp_path / "img_rollout.json").read_text())
    modes = {m["model"]: m["spec"] for m in doc["models"]}
    assert modes["sigvit"].startswith("positive|") and modes["dgvit"].startswith("signed|")
    _cli(["report", "--store", str(store), "--out", str(tmp_path / "report")], tmp_path)
    assert "SigViT" in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")


def _rows(obj, key):
    """Every dict with ``key`` anywhere in a JSON document."""
    if isinstance(obj, dict):
        if key in obj and "model" in obj:
            yield obj
        for v in obj.values():
            yield from _rows(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from _rows(v, key)


def _write_png(path: Path) -> None:
    import numpy as np
    from PIL import Image
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), np.uint8)).save(path)


def test_sigmoid_vit_sweep_workers_slurm_script_and_ddp(tmp_path):
    sweep = tmp_path / "sweep"
    _cli(["sweep", "plan", str(sweep), "--model", "sigvit", "--dataset", "synthetic-vision", "--seed", "0-1",
          "--preset", "tiny", "--set", "train.epochs=1", "--set", "data.max_train=64", "--set", "data.max_test=32",
          "--corruption", "fog", "--severity", "1"], tmp_path)
    _cli(["sweep", "run", str(sweep), "--workers", "2"], tmp_path)      # one subprocess per job
    done = list(sweep.rglob("done.json"))
    assert len(done) >= 2, sorted(str(p) for p in sweep.rglob("*"))[:40]
    _cli(["sweep", "slurm", str(sweep)], tmp_path)
    script = (sweep / "slurm" / "sweep.sbatch").read_text()
    assert "export DGSA_BENCH_PLUGINS=" in script and "sigmoid_attention" in script
    # two gloo processes train one sigvit run data-parallel (torchrun's launcher; the ranks find the plugin)
    _cli(["train", "--model", "sigvit", "--out", str(tmp_path / "ddp"), "--nproc", "2", *SMALL,
          "--device", "cpu"], tmp_path)
    assert (tmp_path / "ddp" / "checkpoint.safetensors").is_file()
