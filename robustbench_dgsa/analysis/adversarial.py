"""Adversarial robustness statistics from the store's ``kind: adversarial`` rows: accuracy vs eps per model
(mean over seeds, 95 % t-interval), the median minimal perturbation, and paired-over-seeds tests of the primary
measure (robust accuracy at Linf 1/255), with the claim they test.

Claim: the one adversarial claim is kept here as a small data record (:data:`CLAIMS`). Issue 29's registry
(:mod:`robustbench_dgsa.analysis.claims`) landed while this was written, but its statistics read corruption cells
(``kind: eval`` rows by condition x severity) and have no eps axis: registered there, this claim would find no
rows. It is NOT a claim of the paper (``claims.NOT_CLAIMED``: the paper measures common corruptions only) but a
prediction of its premise (gating suppresses attention noise); moving it into the registry needs an eps-aware
statistic there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa.analysis import stats

KIND = "adversarial"
PRIMARY_EPS = 1 / 255
PRIMARY_THREAT = "linf"


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    paper_claims: bool
    measure: str
    dataset: str
    model: str
    baselines: tuple[str, ...]


CLAIMS = (Claim("adv-linf-small", "DGViT is more robust to small Linf perturbations than ViT / DViT",
                paper_claims=False,
                measure="robust accuracy at Linf eps 1/255 (APGD-CE + APGD-T), paired over training seeds",
                dataset="cifar10", model="dgvit", baselines=("vit", "dvit")),)


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


def paired_tests(df: pd.DataFrame, *, eps: float = PRIMARY_EPS, threat_model: str = PRIMARY_THREAT,
                 claims: Sequence[Claim] = CLAIMS) -> pd.DataFrame:
    """For each claim, model vs each baseline at ``eps``: paired t over common seeds, Holm over the claim's
    baselines, and the verdict (:func:`stats.verdict`: fewer than 3 seeds is "not testable")."""
    rows = adversarial_accuracy(df)
    rows = rows[(rows["condition"] == threat_model) & ((rows["eps"] - eps).abs() < 1e-9)]
    out: list[dict[str, Any]] = []
    for c in claims:
        part = rows[rows["dataset"] == c.dataset]
        recs = []
        for base in c.baselines:
            a = part[part["model"] == c.model].groupby("seed")["value"].mean()
            b = part[part["model"] == base].groupby("seed")["value"].mean()
            if a.empty or b.empty:
                continue
            r = stats.compare_two(a.to_numpy(), b.to_numpy(), paired=True, seeds_a=list(a.index),
                                  seeds_b=list(b.index))
            recs.append(dict(claim=c.id, claim_text=c.text, paper_claims=c.paper_claims, dataset=c.dataset,
                             model=c.model, baseline=base, eps=eps, attack=", ".join(sorted(set(part["attack"]))),
                             **{k: r[k] for k in ("n_a", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "t", "p",
                                                  "note")}))
        if recs:
            ps = [x["p"] for x in recs]
            adj = stats.holm([p if p == p else 1.0 for p in ps])
            for x, p_holm in zip(recs, adj):
                better = x["diff"] > 0
                x["p_holm"] = float(p_holm)
                x["verdict"] = stats.verdict(bool(p_holm < 0.05 and better), int(x["n_a"]))
            out += recs
    return pd.DataFrame(out)


def claim_verdict(tests: pd.DataFrame, claim: Claim = CLAIMS[0]) -> str:
    """One line: supported only when DGViT is significantly better than every baseline (Holm)."""
    part = tests[tests["claim"] == claim.id] if len(tests) else tests
    if part.empty or set(part["baseline"]) != set(claim.baselines):
        return "not measured (no adversarial rows of every model at the primary eps)"
    if all(v == stats.SIGNIFICANT for v in part["verdict"]):
        return "supported (significantly higher than every baseline, Holm-adjusted paired t over seeds)"
    if any(v.startswith("not testable") for v in part["verdict"]):
        return f"not testable ({part['verdict'].iloc[0]})"
    return "not supported (not significantly higher than every baseline)"
