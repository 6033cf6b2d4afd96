#!/usr/bin/env python
"""Is bf16 training as accurate as fp32, within seed noise? Paired differences between two results stores.

    python benchmarks/bf16_equivalence.py results/evidence/store ../main/runs/bf16-eq/store
    python benchmarks/bf16_equivalence.py FP32_STORE BF16_STORE --dataset cifar10 --margin 1 --keep 1.5 --json
    python benchmarks/bf16_equivalence.py FP32_STORE BF16_EVAL_STORE --measure clean --bf16-train-store SWEEP_STORE

The fp32 arm and the bf16 arm are two stores of the same campaign (same preset, seeds, evaluation) trained in the two
precisions. Runs are paired by (model, seed) on ``--dataset``; for each model found in both stores and each measure
(clean accuracy; mCA = mean accuracy over the 15 benchmark corruptions × severities 1-5, a run counting only when all
75 cells are there) it prints the paired differences d = bf16 − fp32 in percentage points, their mean, SD, 90 % and
95 % t-intervals, and the TOST equivalence test of |d| < ``--margin`` pp (statsmodels' ``ttost_paired``: two one-sided
paired t-tests; equivalent at 5 % when the larger p is below 0.05, which is the 90 % CI lying inside the margin).

The decision rule (issue 30): with 5 seeds TOST may be inconclusive; ``auto`` stays bf16 when the 90 % CI of every
difference lies within ±``--keep`` pp (1.5), else ``auto`` should be fp32. A partial store (a campaign still running)
is fine: only complete pairs count and ``n`` says how many; fewer than 2 pairs cannot be tested.

Each arm's precision is shown as its stores record it: training from the train run records (``precision``; the
config's ``train.amp``), evaluation from the rows' ``precision`` column (rows written before it existed read fp32).
Nothing is pooled across the two stores except as paired differences. ``--measure clean`` (or ``mca``) restricts
the table and the decision to one measure (an arm evaluated clean only); ``--bf16-train-store`` names the store whose
train run records describe the bf16 arm's training when its checkpoints were evaluated into another store.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from robustbench_dgsa import store  # noqa: E402
from robustbench_dgsa.analysis import metrics  # noqa: E402
from robustbench_dgsa.analysis.stats import t_interval  # noqa: E402
from robustbench_dgsa.util.errors import UserError  # noqa: E402

MEASURES = ("clean accuracy", "mCA (15 benchmark corruptions x 5)")


def arm_measures(df: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Per (model, seed) of one store: clean accuracy and complete mCA, in percent (NaN where incomplete)."""
    if not ((df["kind"] == "eval") & (df["dataset"] == dataset)).any():
        return pd.DataFrame(columns=["model", "seed", *MEASURES])
    clean = metrics.clean_accuracy(df, dataset).rename(columns={"value": MEASURES[0]})
    mca = metrics.mean_corrupted_accuracy(df, dataset).rename(columns={"value": MEASURES[1]})
    out = clean[["model", "seed", MEASURES[0]]].merge(mca[["model", "seed", MEASURES[1]]], on=["model", "seed"],
                                                      how="outer")
    for m in MEASURES:
        out[m] = out[m].astype(float) * 100.0
    return out


def arm_precision(store_dir: Path, df: pd.DataFrame, dataset: str) -> dict[str, Any]:
    """What one store says it computed in: training (run records, config train.amp) and evaluation (row column)."""
    train, amp = set(), set()
    for rec in store.load_runs(store_dir).values():
        if rec.get("kind") == "train" and rec.get("dataset") == dataset:
            train.add(str(rec.get("precision") or "fp32 (not recorded)"))
            amp.add(str(((rec.get("config") or {}).get("train") or {}).get("amp", "?")))
    ev = df[(df["kind"] == "eval") & (df["dataset"] == dataset)]
    return {"training": sorted(train), "train.amp": sorted(amp), "evaluation": sorted(set(ev["precision"]))}


def tost(d: np.ndarray, margin: float) -> float:
    """The TOST p-value of |mean d| < margin for paired differences d (the larger one-sided p)."""
    from statsmodels.stats.weightstats import ttost_paired
    p, _, _ = ttost_paired(d, np.zeros_like(d), -margin, margin)
    return float(p)


def compare(fp32: pd.DataFrame, bf16: pd.DataFrame, *, margin: float = 1.0, keep: float = 1.5,
            measures: tuple[str, ...] = MEASURES) -> pd.DataFrame:
    """One row per (model, measure): n pairs, mean/SD of d = bf16 − fp32 (pp), 90 % and 95 % CIs, TOST p, whether
    equivalent at 5 % within ±margin, and whether the 90 % CI lies within ±keep."""
    pairs = fp32.merge(bf16, on=["model", "seed"], suffixes=(" fp32", " bf16"))
    rows = []
    for model in sorted(set(fp32["model"]) & set(bf16["model"])):
        g = pairs[pairs["model"] == model]
        for m in measures:
            ok = g[np.isfinite(g[f"{m} fp32"]) & np.isfinite(g[f"{m} bf16"])]
            d = (ok[f"{m} bf16"] - ok[f"{m} fp32"]).to_numpy(dtype=float)
            mean, sd, lo90, hi90 = t_interval(d, 0.90)
            _, _, lo95, hi95 = t_interval(d, 0.95)
            p = tost(d, margin) if d.size >= 2 and sd > 0 else math.nan
            rows.append({"model": model, "measure": m, "n": int(d.size), "seeds": sorted(int(s) for s in ok["seed"]),
                         "fp32": float(ok[f"{m} fp32"].mean()) if d.size else math.nan,
                         "bf16": float(ok[f"{m} bf16"].mean()) if d.size else math.nan,
                         "mean_diff": mean, "sd": sd, "ci90": (lo90, hi90), "ci95": (lo95, hi95),
                         "tost_p": p, "equivalent": bool(p < 0.05) if math.isfinite(p) else False,
                         "within_keep": bool(math.isfinite(lo90) and -keep <= lo90 and hi90 <= keep)})
    return pd.DataFrame(rows)


def decision(table: pd.DataFrame, keep: float = 1.5) -> str:
    """The rule's verdict in words."""
    if table.empty or (table["n"] < 2).any():
        return "not decidable: fewer than 2 complete pairs for some model and measure"
    if bool(table["within_keep"].all()):
        return f"keep auto = bf16: every 90 % CI of bf16 − fp32 lies within ±{keep:g} pp"
    bad = table[~table["within_keep"]]
    which = "; ".join(f"{r.model} {r.measure}" for r in bad.itertuples())
    return f"set auto = fp32: the 90 % CI is not within ±{keep:g} pp for {which}"


def _fmt(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.2f}"


def render(table: pd.DataFrame, precisions: dict[str, dict[str, Any]], margin: float, keep: float,
           dataset: str) -> str:
    lines = [f"bf16 − fp32 on {dataset}, paired by (model, seed); percentage points",
             *(f"  {arm} arm: training {', '.join(p['training']) or '?'} (train.amp {', '.join(p['train.amp']) or '?'})"
               f", evaluation {', '.join(p['evaluation']) or '?'}" for arm, p in precisions.items()),
             f"{'model':<8} {'measure':<36} {'n':>2} {'fp32':>7} {'bf16':>7} {'mean d':>7} {'SD':>5} "
             f"{'90 % CI':>16} {'95 % CI':>16} {'TOST p':>7}  equivalent (±{margin:g} pp)"]
    for r in table.itertuples():
        ci90 = f"[{_fmt(r.ci90[0])}, {_fmt(r.ci90[1])}]"
        ci95 = f"[{_fmt(r.ci95[0])}, {_fmt(r.ci95[1])}]"
        sd = "n/a" if not math.isfinite(r.sd) else f"{r.sd:.2f}"
        p = "n/a" if not math.isfinite(r.tost_p) else f"{r.tost_p:.3f}"
        eq = "yes" if r.equivalent else ("untestable" if r.n < 2 or not math.isfinite(r.tost_p) else "not shown")
        lines.append(f"{r.model:<8} {r.measure:<36} {r.n:>2} {r.fp32:>7.2f} {r.bf16:>7.2f} {_fmt(r.mean_diff):>7} "
                     f"{sd:>5} {ci90:>16} {ci95:>16} {p:>7}  {eq}")
    if table.empty:
        lines.append("(no model has evaluated runs in both stores yet)")
    lines.append(f"decision (90 % CI within ±{keep:g} pp): {decision(table, keep)}")
    return "\n".join(lines)


MEASURE_CHOICES = {"all": MEASURES, "clean": MEASURES[:1], "mca": MEASURES[1:]}


def run(fp32_store: str | Path, bf16_store: str | Path, *, dataset: str = "cifar10", margin: float = 1.0,
        keep: float = 1.5, measure: str = "all",
        bf16_train_store: str | Path | None = None) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """The comparison table and each arm's recorded precision."""
    arms, precisions = {}, {}
    for arm, path in (("fp32", Path(fp32_store)), ("bf16", Path(bf16_store))):
        df = store.load_results(path)
        arms[arm] = arm_measures(df, dataset)
        precisions[arm] = arm_precision(path, df, dataset)
    if bf16_train_store is not None:
        trained = arm_precision(Path(bf16_train_store), store.load_results(bf16_train_store), dataset)
        precisions["bf16"].update(training=trained["training"], **{"train.amp": trained["train.amp"]})
    return compare(arms["fp32"], arms["bf16"], margin=margin, keep=keep,
                   measures=MEASURE_CHOICES[measure]), precisions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fp32_store")
    p.add_argument("bf16_store")
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--margin", type=float, default=1.0, help="TOST equivalence margin, pp (default 1)")
    p.add_argument("--keep", type=float, default=1.5, help="decision: 90 %% CI within ± this, pp (default 1.5)")
    p.add_argument("--measure", choices=sorted(MEASURE_CHOICES), default="all",
                   help="which measures to compare and decide on (default all)")
    p.add_argument("--bf16-train-store", default=None,
                   help="store holding the bf16 arm's train run records, if it was evaluated into another store")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        table, precisions = run(args.fp32_store, args.bf16_store, dataset=args.dataset, margin=args.margin,
                                keep=args.keep, measure=args.measure, bf16_train_store=args.bf16_train_store)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"rows": table.to_dict(orient="records"), "precision": precisions,
                          "decision": decision(table, args.keep)}, default=str, indent=1))
    else:
        print(render(table, precisions, args.margin, args.keep, args.dataset))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
