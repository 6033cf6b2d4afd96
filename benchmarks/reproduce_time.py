"""Wall time of the main job (`dgsa-bench reproduce`), per phase and in total.

    python benchmarks/reproduce_time.py              # the default main job, from scratch, in a temp folder
    python benchmarks/reproduce_time.py --quick      # the test-suite size
    python benchmarks/reproduce_time.py --out DIR --keep

Prints one line per phase (corrupt, train+evaluate, rollout, bench, report) and the total, the machine (cores,
torch threads, worker processes, CPU), the CPU time of this process and of its child processes (the pool's
workers, the report's figure writers), the load average before and after, and a verdict against the budget
(default 150 s: the main job with 3 seeds must finish within 2.5 minutes on a 2-core CPU). On a machine
shared with other work the wall time is inflated; the CPU time is not (much). A second run on the same --out
measures the resume path (everything is skipped but the report). Exit status 1 when the total exceeds the
budget.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the output folder")
    ap.add_argument("--quick", action="store_true", help="the smallest size (as in the test suite)")
    ap.add_argument("--seeds", default="0,1,2", help="seeds (default 0,1,2)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: reproduce's choice)")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds allowed (default 150)")
    ap.add_argument("--json", action="store_true", help="print the timings as JSON too")
    args = ap.parse_args(argv)

    import torch

    from robustbench_dgsa.jobs.reproduce import reproduce

    out = args.out or Path(tempfile.mkdtemp(prefix="dgsa-reproduce-"))
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__} with {torch.get_num_threads()} threads, "
          f"cuda={'yes' if torch.cuda.is_available() else 'no'}", flush=True)
    t0 = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        reproduce(out, seeds=seeds, quick=args.quick, progress=False, workers=args.workers,
                  on_phase=lambda name, s: print(f"  {name:<16s} {s:8.1f} s", flush=True))
        total = time.monotonic() - t0
        timings = json.loads((out / "timings.json").read_text())
    finally:
        if not args.keep and args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rc = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_self, cpu_children = ru.ru_utime + ru.ru_stime, rc.ru_utime + rc.ru_stime
    cpu = cpu_self + cpu_children
    print(f"  {'total':<16s} {total:8.1f} s   (budget {args.budget:.0f} s: "
          f"{'OK' if total <= args.budget else 'OVER'})")
    print(f"  workers {timings.get('workers')}; CPU time {cpu:.1f} s (this process {cpu_self:.1f} s, child "
          f"processes: pool workers and figure writers {cpu_children:.1f} s); load average {load_before:.1f} "
          f"before, {os.getloadavg()[0]:.1f} after (a load above the core count means other processes shared the "
          f"CPU and the wall time is inflated)")
    if args.keep or args.out is not None:
        print(f"report: {out / 'index.html'}")
    if args.json:
        print(json.dumps({"total_s": round(total, 2), "cpu_s": round(cpu, 2), "cpu_self_s": round(cpu_self, 2),
                          "cpu_children_s": round(cpu_children, 2), **timings}, indent=2))
    return 0 if total <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
