"""The paper's claims that a results store can test, each with our evidence and a verdict in fixed words.

Claims (the paper's direction: the gated model is better than each baseline on every measure):
DGViT − ViT and DGViT − DViT (images), DGT − Transformer and DGT − DT (text), on every dataset of the store
holding both models. Measures per seed: clean accuracy (the paper's Tables 1 and 3); under corruption, mCA
(images, 15 benchmark corruptions × 5 severities) or mNA (text, noise types × 5 severities); retention (that
mean over clean accuracy, :func:`metrics.robustness_summary`); and the mean corrupted / noisy accuracy at each
severity 1..5 (:func:`metrics.severity_accuracy`). A measure whose cells are incomplete is not tested (listed in
``untested``).

Test: the paired t-test over matched seeds (:func:`stats.pairwise_tests` with ``paired=True``; seed s fixes
the training subset and data order for every model, so seeds pair), Holm-corrected within a declared family:
per dataset, the headline measures (clean, mCA / mNA, retention) × the claims form one family, the five
severities × the claims another. Hedges' g is g_av (see :mod:`stats`).

Verdicts (:func:`verdict`): "supported" = Holm-adjusted p < α and Δ in the paper's direction; "contradicted" =
Holm-adjusted p < α and Δ in the opposite direction; "inconclusive at this scale" otherwise; fewer than
:data:`stats.MIN_TESTABLE_SEEDS` matched seeds: "not testable (n < 3)". A dataset whose name starts with
"synthetic" gets no verdict at all (:data:`NO_CLAIM`): synthetic data supports no claim about the paper.

Minimum detectable difference (MDD): the |Δ| a two-sided paired t-test at α detects with the given power
(default 80 %) with n seeds, for the observed SD of the per-seed differences: ``MDD = d* · SD(d)`` where d*
solves ``power(d*, n) = 0.8`` for the noncentral t (``statsmodels.stats.power.TTestPower``; df = n − 1,
noncentrality d*√n). For an inconclusive claim, ``seeds_needed`` is the smallest n at which the *observed*
effect |Δ| / SD(d) reaches that power (a plug-in estimate: the true SD is unknown); NaN when Δ is ~0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import optimize

from robustbench_dgsa.analysis import metrics, stats
from robustbench_dgsa.models.registry import MODEL_FACTS, display_name

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive at this scale"
NOT_TESTABLE = f"not testable (n < {stats.MIN_TESTABLE_SEEDS})"
NO_CLAIM = "no claim (synthetic data)"
SYNTHETIC_SENTENCE = ("Synthetic data supports no claim about the paper: the synthetic datasets are a pipeline "
                      "check, so their differences get no verdict.")
#: claims (gated model, baseline) per modality, in the paper's order
CLAIMS: tuple[tuple[str, str], ...] = (("dgvit", "vit"), ("dgvit", "dvit"), ("dgt", "transformer"), ("dgt", "dt"))
#: the paper's table of clean accuracy per modality of the gated model
CLEAN_TABLES = {"dgvit": "Table 1", "dgt": "Table 3"}
HEADLINE, PER_SEVERITY = "headline", "per severity"
#: |Δ| below this (in accuracy, 0.005 points) counts as ~0: no number of seeds is computed for it
ZERO_DIFF = 5e-5
#: more seeds than this needed: reported as this cap (``seeds_needed_capped`` True)
MAX_SEEDS = 10_000

COLUMNS = ["dataset", "synthetic", "group", "measure", "model", "baseline", "source", "n", "mean_model",
           "mean_baseline", "diff", "ci_lo", "ci_hi", "test", "family", "family_size", "p", "p_holm", "g",
           "sd_diff", "mdd", "seeds_needed", "seeds_needed_capped", "paper_model", "paper_baseline",
           "paper_diff", "verdict", "note"]


@dataclass
class Findings:
    """The tested claims (``table``, one row per claim × dataset × measure, accuracies as fractions), the Holm
    families (id → what is in it), claims the store cannot test yet (``untested``) and the synthetic datasets."""
    table: pd.DataFrame
    families: dict[str, str] = field(default_factory=dict)
    untested: list[str] = field(default_factory=list)
    synthetic: list[str] = field(default_factory=list)
    alpha: float = 0.05
    power: float = 0.8


def is_synthetic(dataset: str) -> bool:
    return str(dataset).startswith("synthetic")


def verdict(p_holm: float, diff: float, n: int, synthetic: bool = False, alpha: float = 0.05) -> str:
    """The fixed words for one claim (the paper's direction: Δ = gated − baseline > 0)."""
    if synthetic:
        return NO_CLAIM
    if n < stats.MIN_TESTABLE_SEEDS:
        return NOT_TESTABLE
    if np.isfinite(p_holm) and p_holm < alpha and diff != 0:
        return SUPPORTED if diff > 0 else CONTRADICTED
    return INCONCLUSIVE


# ------------------------------------------------------------------------------------------------ power
def _power(effect: float, n: int, alpha: float) -> float:
    """Power of the two-sided one-sample (paired) t-test; statsmodels returns NaN where the noncentral t's tail
    underflows, which happens only where the power is ~1."""
    from statsmodels.stats.power import TTestPower

    p = float(TTestPower().power(effect_size=effect, nobs=n, alpha=alpha, alternative="two-sided"))
    return p if math.isfinite(p) else 1.0


def detectable_effect(n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """d* (in SDs of the paired differences) that a two-sided paired t-test with n pairs detects with ``power``;
    NaN below 2 pairs. Solved to 1e-12 on statsmodels' power function."""
    if n < 2:
        return math.nan
    hi = 0.25
    while _power(hi, n, alpha) < power:
        hi *= 2
    return float(optimize.brentq(lambda d: _power(d, n, alpha) - power, hi / 2 if hi > 0.25 else 1e-9, hi,
                                 xtol=1e-12, rtol=1e-12))


def seeds_needed(effect: float, alpha: float = 0.05, power: float = 0.8) -> tuple[float, bool]:
    """(smallest n with ``power`` for standardised effect |``effect``|, capped) — NaN for a zero effect; the
    bool says n hit :data:`MAX_SEEDS`."""
    effect = abs(float(effect))
    if not effect > 0 or not math.isfinite(effect):
        return math.nan, False
    if _power(effect, MAX_SEEDS, alpha) < power:
        return float(MAX_SEEDS), True
    lo, hi = 1, 2                       # power(lo) < target <= power(hi) once the loop ends
    while _power(effect, hi, alpha) < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _power(effect, mid, alpha) < power else (lo, mid)
    return float(max(hi, 2)), False


# ---------------------------------------------------------------------------------------------- measures
def _measures(rows: pd.DataFrame, ds: str, kinds: set[str]) -> tuple[pd.DataFrame, list[str]]:
    """Per-seed values of every claim measure on ``ds`` (columns dataset, condition, group, model, seed, value)
    and the measures left out: none of their cells measured, or some missing."""
    robust = "mCA" if "benchmark" in kinds else ("mNA" if "text" in kinds else None)
    frames = [metrics.seed_measures(rows, metrics.CLEAN, dataset=ds).assign(group=HEADLINE)]
    skipped: list[str] = []
    if robust:
        frames.append(metrics.seed_measures(rows, robust, dataset=ds).assign(group=HEADLINE))
        rs = metrics.robustness_summary(rows, dataset=ds)
        frames.append(rs[["model", "dataset", "seed"]].assign(condition=f"retention ({robust}/clean)",
                                                               value=rs["retention"], group=HEADLINE,
                                                               n_cells=rs[f"{robust}_cells"]))
        frames += [metrics.severity_accuracy(rows, s, dataset=ds).assign(group=PER_SEVERITY)
                   for s in metrics.SEVERITIES]
    out = pd.concat(frames, ignore_index=True)
    bad = out[out["value"].isna()]
    for what, sel in (("no cells measured", bad["n_cells"] == 0), ("cells incomplete", bad["n_cells"] != 0)):
        if sel.any():
            skipped.append(f"{', '.join(dict.fromkeys(bad.loc[sel, 'condition']))} on {ds}: {what} for "
                           f"{', '.join(display_name(m) for m in sorted(set(bad.loc[sel, 'model'])))}")
    out = out[out["value"].notna()]
    return out[["dataset", "condition", "group", "model", "seed", "value"]], skipped


def _paired_sd(meas: pd.DataFrame, a: str, b: str) -> float:
    """SD (ddof 1) of the per-seed differences A − B over the seeds both have; NaN below 2 seeds."""
    va, vb = ({int(s): float(v) for s, v in zip(g["seed"], g["value"])}
              for g in (meas[meas["model"] == a], meas[meas["model"] == b]))
    d = np.array([va[s] - vb[s] for s in sorted(set(va) & set(vb))])
    return float(d.std(ddof=1)) if d.size >= 2 else math.nan


# ------------------------------------------------------------------------------------------------ entry
def compute_findings(results: pd.DataFrame, paper: Mapping[tuple[str, str], float] | None = None,
                     alpha: float = 0.05, power: float = 0.8) -> Findings:
    """Test every claim of :data:`CLAIMS` the store can test. ``results``: store rows (or an
    :func:`metrics.eval_rows` selection); ``paper``: the paper's clean accuracy (fraction) per (dataset, model)
    for the variant the runs used. Returns :class:`Findings` (columns :data:`COLUMNS`)."""
    rows = metrics.eval_rows(results)
    out = Findings(pd.DataFrame(columns=COLUMNS), alpha=alpha, power=power)
    parts = []
    images = {ds for ds, m in zip(rows["dataset"], rows["model"]) if m in MODEL_FACTS
              and MODEL_FACTS[m].modality == "image"}
    for ds in sorted(set(rows["dataset"]), key=lambda x: (is_synthetic(x), x not in images, x)):
        # real before synthetic, images (Table 1) before text (Table 3)
        d = rows[rows["dataset"] == ds]
        if is_synthetic(ds):
            out.synthetic.append(ds)
        present = set(d["model"])
        pairs = [(a, b) for a, b in CLAIMS if a in present or b in present]
        if not pairs:
            continue
        missing = [(a, b) for a, b in pairs if not {a, b} <= present]
        out.untested += [f"{display_name(a)} − {display_name(b)} on {ds}: no results for "
                         f"{' and '.join(display_name(m) for m in (a, b) if m not in present)}" for a, b in missing]
        pairs = [p for p in pairs if p not in missing]
        if not pairs:
            continue
        meas, skipped = _measures(d, ds, set(d["kind_of_condition"]))
        out.untested += skipped
        for group in (HEADLINE, PER_SEVERITY):
            g = meas[meas["group"] == group]
            if len(g):
                parts.append(_test_family(out, g, ds, group, pairs, paper or {}, alpha, power))
    if parts:
        out.table = pd.concat(parts, ignore_index=True)[COLUMNS]
    return out


def _test_family(out: Findings, meas: pd.DataFrame, ds: str, group: str, pairs: list[tuple[str, str]],
                 paper: Mapping[tuple[str, str], float], alpha: float, power: float) -> pd.DataFrame:
    """One Holm family (one dataset, one group of measures): the paired tests, verdicts, MDD and seeds needed."""
    fam_id = f"{ds} · {group}"
    pw = stats.pairwise_tests(meas[["dataset", "condition", "model", "seed", "value"]], pairs=pairs, paired=True,
                              alpha=alpha, by=["dataset", "condition"], family=fam_id)
    t = pw.table.rename(columns={"model_a": "model", "model_b": "baseline", "n_a": "n", "mean_a": "mean_model",
                                 "mean_b": "mean_baseline", "condition": "measure"})
    size = int(pw.info["m"])
    out.families[fam_id] = (f"{', '.join(dict.fromkeys(t['measure']))} × "
                            f"{', '.join(f'{a} − {b}' for a, b in pairs)} on {ds}: {size} paired t-test(s)")
    synthetic = is_synthetic(ds)
    recs = []
    for r in t.to_dict("records"):
        sub = meas[meas["condition"] == r["measure"]]
        sd = _paired_sd(sub, r["model"], r["baseline"])
        n = int(r["n"])
        mdd = detectable_effect(n, alpha, power) * sd if n >= stats.MIN_TESTABLE_SEEDS else math.nan
        v = verdict(r["p_holm"], r["diff"], n, synthetic, alpha)
        need, capped = math.nan, False
        if v == INCONCLUSIVE and abs(r["diff"]) >= ZERO_DIFF and sd > 0:
            need, capped = seeds_needed(r["diff"] / sd, alpha, power)
        pm, pb = (paper.get((ds, r["model"]), math.nan), paper.get((ds, r["baseline"]), math.nan)) \
            if r["measure"] == metrics.CLEAN else (math.nan, math.nan)
        recs.append({**r, "dataset": ds, "synthetic": synthetic, "group": group,
                     "source": CLEAN_TABLES.get(r["model"], "") if r["measure"] == metrics.CLEAN else "robustness",
                     "family": fam_id, "family_size": size, "sd_diff": sd, "mdd": mdd, "seeds_needed": need,
                     "seeds_needed_capped": capped, "paper_model": pm, "paper_baseline": pb,
                     "paper_diff": pm - pb, "verdict": v})
    return pd.DataFrame(recs, columns=COLUMNS)
