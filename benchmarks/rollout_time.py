"""Time to first figure of `dgsa-bench rollout` with the shipped models (the zoo), as a new user runs it.

    python benchmarks/rollout_time.py                 # image (CIFAR-10 test image 0 as a PNG) and text, 3 runs each
    python benchmarks/rollout_time.py --runs 5 --budget 10

Each run is a fresh process (`dgsa-bench rollout IMAGE.png` / `dgsa-bench rollout --text "..."`, no model option:
the three shipped models of that modality), so the time includes Python start-up, imports, loading the three
models, the rollouts and drawing the figure: what a user waits for. Prints the median and range per mode, the
machine, the load average before and after, and a verdict against the budget (default 10 s for the image: issue
17's target on a 2-core CPU). Exit status 1 when the image median exceeds the budget.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEXT = "a gripping, beautifully acted film"


def _image(folder: Path) -> Path:
    """A real 32 x 32 photograph: CIFAR-10 test image 0 from ../shared/data when there, else a synthetic one."""
    import numpy as np
    from PIL import Image
    exact = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10" / "cifar10-test-exact-first1017.npz"
    if exact.is_file():
        with np.load(exact, allow_pickle=False) as z:
            pixels = z[[k for k in z.files if z[k].ndim == 4][0]][0]
    else:
        from robustbench_dgsa.data import load_dataset
        pixels = load_dataset("synthetic-vision", "test").x[0]
    path = folder / "image.png"
    Image.fromarray(pixels).save(path)
    return path


def _cli() -> list[str]:
    exe = shutil.which("dgsa-bench")
    return [exe] if exe else [sys.executable, "-m", "robustbench_dgsa"]


def _time(cmd: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.strip()}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per mode (default 3)")
    ap.add_argument("--budget", type=float, default=10.0, help="seconds allowed for the image (default 10)")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        image = _image(folder)
        runs = {"image": [_time(_cli() + ["rollout", str(image), "-q"], folder) for _ in range(args.runs)],
                "text": [_time(_cli() + ["rollout", "--text", TEXT, "-q"], folder) for _ in range(args.runs)]}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    for mode, times in runs.items():
        print(f"{mode}: time to first figure median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} fresh processes)")
    median = statistics.median(runs["image"])
    verdict = "OK" if median <= args.budget else "OVER"
    print(f"target: image rollout with the shipped models <= {args.budget:g} s: {verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
