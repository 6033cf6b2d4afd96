#!/usr/bin/env python
"""Data-parallel scaling on the CPU: training images per second of one process against N gloo processes.

Runs the real command twice on synthetic-vision with the tiny preset (ViT, D=32, 2 layers), the same global batch:

    dgsa-bench train --model vit --dataset synthetic-vision --preset tiny ... --device cpu            # 1 process
    dgsa-bench train ... --nproc N                                                                     # N processes

and reads each epoch's wall time from the run's history (training steps + validation; the first epoch, which pays
the warm-up, is left out). Prints img/s of both, the ratio, and the machine: CPU model, cores, torch version and the
load average before and after (a loaded machine gives each process less than a core; say so when you quote it).

    python benchmarks/ddp_scaling.py                      # ~1-2 minutes on an idle 2-core machine
    python benchmarks/ddp_scaling.py --nproc 2 --max-train 4000 --epochs 4 --json scaling.json

Each process runs one intra-op thread (OMP_NUM_THREADS=1), so N processes use N cores: on a 2-core machine 2
processes is the limit, and the ratio there says how much of a second core data parallelism turns into throughput
(after gloo's all-reduce of the gradients each step).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from robustbench_dgsa.util.provenance import cpu_model  # noqa: E402


def _train(out: Path, args: argparse.Namespace, nproc: int) -> dict:
    cmd = [sys.executable, "-m", "robustbench_dgsa", "train", "--model", "vit", "--dataset", "synthetic-vision",
           "--preset", "tiny", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--device", "cpu",
           "--out", str(out), "--set", f"data.max_train={args.max_train}", "--set", "data.max_test=64",
           "--set", "data.val_fraction=0.02", "-q", "--json"]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        sys.exit(f"train with {nproc} process(es) failed:\n{p.stderr[-2000:]}")
    history = json.loads(p.stdout)["runs"][0]["history"][1:]  # the first epoch pays the warm-up
    images = sum(h["n_train"] for h in history)
    seconds = sum(h["seconds"] for h in history)
    return {"processes": nproc, "images": images, "seconds": round(seconds, 3), "img_per_s": images / seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=2, help="processes of the data-parallel run (default 2)")
    ap.add_argument("--max-train", type=int, default=2000, help="training images per epoch (default 2000)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs; the first is not timed (default 3)")
    ap.add_argument("--batch-size", type=int, default=64, help="global batch (default 64)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if args.epochs < 2:
        ap.error("--epochs must be at least 2 (the first is not timed)")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        one = _train(Path(tmp) / "one", args, 1)
        many = _train(Path(tmp) / "many", args, args.nproc)
    load_after = os.getloadavg()
    import torch
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "torch": torch.__version__,
               "load_average_before": [round(x, 2) for x in load_before],
               "load_average_after": [round(x, 2) for x in load_after]}
    ratio = many["img_per_s"] / one["img_per_s"]
    print(f"machine: {machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}")
    print(f"load average (1/5/15 min): before {machine['load_average_before']}, after {machine['load_average_after']}"
          + ("  <- the machine is busy: other processes took cores" if load_before[0] > (os.cpu_count() or 1) / 2
             else ""))
    print(f"ViT tiny on synthetic-vision, global batch {args.batch_size}, {args.max_train} images/epoch, "
          f"epochs 2..{args.epochs} timed")
    for r in (one, many):
        print(f"  {r['processes']} process(es): {r['img_per_s']:8.1f} img/s  "
              f"({r['images']} images in {r['seconds']} s)")
    print(f"  ratio {args.nproc} / 1: {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "runs": [one, many], "ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
