"""Adversarial robustness statistics from the store's ``kind: adversarial`` rows: accuracy vs eps per model
(mean over seeds, 95 % t-interval) and the median minimal perturbation. The adversarial claims (robust accuracy at
a radius, model vs baseline) are registered claims with an ``eps`` (:mod:`robustbench_dgsa.analysis.claims`) and
get their tests and verdicts with every other claim (:mod:`robustbench_dgsa.analysis.verdicts`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from robustbench_dgsa.analysis import stats

KIND = "adversarial"


def adversarial_accuracy(df: pd.DataFrame) -> pd.DataFrame:
    """The ``accuracy`` rows of kind adversarial."""
    return df[(df["kind"] == KIND) & (df["metric"] == "accuracy")]


def accuracy_vs_eps(df: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, threat model, model, eps and attack: seeds, mean, sd, 95 % t-interval of robust accuracy."""
    rows = adversarial_accuracy(df)
    out = []
    for (ds, cond, model, eps, attack), g in rows.groupby(["dataset", "condition", "model", "eps", "attack"]):
        v = g.groupby("seed")["value"].mean().to_numpy(float)
        mean, lo, hi, sd = _interval(v)
        out.append(dict(dataset=ds, threat_model=cond, model=model, eps=float(eps), attack=attack, n_seeds=len(v),
                        n=int(g["n"].max()), mean=mean, sd=sd, ci_lo=lo, ci_hi=hi))
    return pd.DataFrame(out, columns=["dataset", "threat_model", "model", "eps", "attack", "n_seeds", "n", "mean",
                                      "sd", "ci_lo", "ci_hi"])


def _interval(v: np.ndarray) -> tuple[float, float, float, float]:
    if len(v) < 2:
        m = float(v.mean()) if len(v) else float("nan")
        return m, float("nan"), float("nan"), float("nan")
    mean, sd, lo, hi = stats.t_interval(v)
    return float(mean), float(lo), float(hi), float(sd)


def min_norm_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Median minimal perturbation (FAB) per model: mean over seeds and the per-seed values."""
    rows = df[(df["kind"] == KIND) & (df["metric"] == "median_min_norm")]
    out = [dict(dataset=ds, threat_model=c, model=m, n_seeds=g["seed"].nunique(), mean=float(g["value"].mean()),
                values=[float(x) for x in g.sort_values("seed")["value"]])
           for (ds, c, m), g in rows.groupby(["dataset", "condition", "model"])]
    return pd.DataFrame(out, columns=["dataset", "threat_model", "model", "n_seeds", "mean", "values"])
