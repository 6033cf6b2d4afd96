"""Wall time of an evidence campaign (`dgsa-bench reproduce --preset evidence ...`), per stage and per dataset.

    python benchmarks/campaign_time.py results/evidence            # a finished or running campaign folder
    python benchmarks/campaign_time.py results/evidence --budget 3h --json

Reads what the campaign itself recorded, so it measures the real run rather than a re-run: the phases of
``timings.json`` (corrupt, train_evaluate, rollout, bench, report, total; written when a run ends) and, from the
store's run records, the wall seconds of every train and evaluate run, summed per dataset and kind. The sum of
job seconds divided by the worker processes is the ideal wall time of "train_evaluate"; while the campaign runs,
the jobs not yet finished are projected from the mean of the finished ones of the same model and dataset (or
dataset), and the projected total is compared with the budget (default 3 h: issue 18's limit on a 2-core CPU).
Resumed campaigns have several runs' worth of phases; only the last run's timings.json is kept, so the per-run
sums are the figure to quote. Exit status 1 when the (projected) total exceeds the budget.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path


def _seconds(text: str) -> float:
    text = text.strip().lower()
    for unit, factor in (("h", 3600.0), ("min", 60.0), ("m", 60.0), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def _runs(store: Path) -> list[dict]:
    out = []
    for p in sorted((store / "runs").glob("*.json")):
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and d.get("kind") in ("train", "eval") and d.get("wall_seconds") is not None:
            out.append(d)
    return out


def _jobs(folder: Path) -> list[dict]:
    path = folder / "jobs.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure(folder: Path) -> dict:
    """Per (dataset, kind) seconds and counts, finished / planned jobs and the projection of what is left."""
    runs = _runs(folder / "store")
    per = defaultdict(lambda: {"seconds": 0.0, "runs": 0})
    per_model = defaultdict(list)
    for r in runs:
        key = (str(r.get("dataset")), str(r["kind"]))
        per[key]["seconds"] += float(r["wall_seconds"])
        per[key]["runs"] += 1
        per_model[(str(r.get("model")), str(r.get("dataset")))].append(float(r["wall_seconds"]))
    jobs = _jobs(folder)
    finished = {p.stem for p in (folder / "store" / "finished").glob("*.json") if not p.stem.startswith("rollout-")}
    left = [j for j in jobs if j.get("id") not in finished]
    by_dataset = defaultdict(list)
    for (model, ds), secs in per_model.items():
        by_dataset[ds].extend(secs)
    projected, unknown = 0.0, set()
    for j in left:   # a job = one train + one eval run; mean of the same model+dataset, else of the dataset
        secs = per_model.get((j.get("model"), j.get("dataset"))) or by_dataset.get(j.get("dataset")) or []
        if secs:
            projected += 2 * sum(secs) / len(secs)
        else:
            unknown.add(str(j.get("dataset")))
    timings = {}
    tpath = folder / "timings.json"
    if tpath.is_file():
        timings = json.loads(tpath.read_text(encoding="utf-8"))
    return {"per": {f"{d}/{k}": v for (d, k), v in sorted(per.items())}, "jobs": len(jobs),
            "finished": len(jobs) - len(left), "left_job_seconds": projected, "timings": timings,
            "not_projected": sorted(unknown)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="the campaign folder (reproduce --out)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: timings.json's, else 2)")
    ap.add_argument("--budget", default="3h", help="wall time allowed, e.g. 3h, 170min (default 3h)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args(argv)
    if not (args.folder / "store").is_dir():
        print(f"error: {args.folder} holds no store/ (not a reproduce --out folder)", file=sys.stderr)
        return 2
    m = measure(args.folder)
    workers = args.workers or int(m["timings"].get("workers") or 2)
    total_job = sum(v["seconds"] for v in m["per"].values())
    print(f"campaign {args.folder}: {m['finished']}/{m['jobs']} jobs finished; {workers} worker processes; "
          f"{os.cpu_count()} CPUs here; load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for key, v in m["per"].items():
        print(f"  {key:<28} {v['runs']:>3} runs  {v['seconds'] / 60:8.1f} min of worker time")
    print(f"  all train+evaluate runs        {total_job / 60:8.1f} min of worker time = "
          f"{total_job / workers / 60:.1f} min wall with {workers} workers")
    phases = m["timings"].get("phases") or {}
    if phases:
        print("  last run's phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()))
    wall = total_job / workers + (m["left_job_seconds"] / workers)
    extra = sum(float(phases.get(k, 0.0)) for k in ("corrupt", "bench", "report"))
    budget = _seconds(args.budget)
    label = "projected total" if m["finished"] < m["jobs"] else "total"
    verdict = "OVER" if wall + extra > budget else "so far within" if m["not_projected"] else "within"
    if m["not_projected"]:
        print(f"  not projected (no finished job yet): {', '.join(m['not_projected'])}: the total below omits them")
    print(f"{label}: {(wall + extra) / 60:.1f} min (train+evaluate {wall / 60:.1f} min + corrupt/bench/report "
          f"{extra / 60:.1f} min) — {verdict} the budget of {budget / 60:.0f} min")
    if args.json:
        print(json.dumps({**m, "workers": workers, "wall_seconds": wall + extra, "budget_seconds": budget}))
    return 0 if wall + extra <= budget else 1


if __name__ == "__main__":
    sys.exit(main())
