"""Statistics between models (docs/METHODS.md, Statistics). Pure functions: DataFrame in, :class:`StatResult`
(table + warnings) out.

Inputs
    *per-seed measures*: one row per (model, seed[, dataset, condition]) with a ``value`` column — e.g.
    :func:`robustbench_dgsa.analysis.metrics.seed_measures`. *Cells*: one row per (model, seed, block...) — e.g.
    :func:`robustbench_dgsa.analysis.metrics.benchmark_cells`; they are averaged over seeds before cell-level tests.

Over seeds
    * mean, SD (ddof = 1), 95% t-interval ``mean ± t_{n−1, 0.975} SD/√n`` (:func:`seed_summary`).
    * difference of means ``Δ = mean_A − mean_B`` with a 95% CI. Welch (default):
      ``se = √(s_A²/n_A + s_B²/n_B)``, Welch–Satterthwaite
      ``df = se⁴ / ((s_A²/n_A)²/(n_A−1) + (s_B²/n_B)²/(n_B−1))``, CI ``Δ ± t_{df} se``; test =
      ``scipy.stats.ttest_ind(equal_var=False)``. Paired (``paired=True``; seeds matched by seed number):
      ``d = A_s − B_s``, CI ``mean(d) ± t_{n−1} SD(d)/√n``, test = ``scipy.stats.ttest_rel``.
    * Hedges' g. Independent: ``d = Δ / s_p`` with the pooled SD
      ``s_p = √(((n_A−1)s_A² + (n_B−1)s_B²)/(n_A+n_B−2))``, times Hedges' exact small-sample correction
      ``J(ν) = Γ(ν/2) / (√(ν/2) Γ((ν−1)/2))``, ν = n_A+n_B−2 (≈ 1 − 3/(4ν−1)). Paired: ``g_av`` (Cumming 2012;
      Lakens 2013): ``Δ / ((s_A + s_B)/2)`` times J(n−1) — unlike d_z it does not grow with the correlation
      between seeds, so it stays comparable with the independent g.
    * Holm–Bonferroni over the *declared family* = every comparison made in one call (:func:`holm`, tested equal
      to ``statsmodels.stats.multitest.multipletests(method="holm")``); the family is stated in the result.
    * A single seed gives no SD, CI or test: such comparisons are refused (NaN, not in the Holm family) with a
      warning. Fewer than :data:`MIN_TESTABLE_SEEDS` (3) seeds: the numbers are shown, the comparison is
      "not testable: n seeds" (outside the Holm family, never significant). Fewer than 5 seeds is noted.

Over corruption cells
    * Wilcoxon signed-rank over the seed-averaged cells of two models (``scipy.stats.wilcoxon``), with
      wins/ties/losses (``|Δ| ≤ tol`` is a tie; ties are dropped from the test — Wilcoxon's zero method — so
      the tally and the test agree). With n non-zero pairs the smallest attainable two-sided exact p is
      ``2/2ⁿ``; when that is ≥ α the result says so (n = 5 → 0.0625).
    * ≥ 3 models: Friedman test over blocks (cells, or datasets) with average ranks (rank 1 = best), the
      Iman–Davenport F, pairwise Wilcoxon + Holm, and the Nemenyi critical difference
      ``CD = q_α √(k(k+1)/(6N))``, ``q_α = studentized_range.ppf(1−α, k, ∞)/√2`` (Demšar 2006). The
      diagram's bars come from the pairwise Wilcoxon + Holm decisions (:func:`holm_cliques`), not from the CD,
      so the diagram never contradicts the pairwise table beside it.
    * Cells are conditions of the same trained models: these tests say whether a difference is *consistent
      across conditions*, never that it is significant for new training runs; the verdict says so, and with
      fewer than :data:`MIN_TESTABLE_SEEDS` seeds per model it says "not testable: n seeds".

Optional
    * Almost stochastic order (:func:`aso_eps_min`; del Barrio et al. 2018, Dror et al. 2019), our own
      implementation: violation ratio ``ε_W2`` integrated exactly over the step quantile functions,
      σ̂ from a seeded nonparametric bootstrap of both samples at their own sizes,
      ``ε_min = ε − √((n+m)/(nm)) σ̂ Φ⁻¹(α)``, clipped to [0, 1]. ``ε_min < 0.5`` (stricter: < 0.2) means A is
      almost stochastically better than B. Slow-ish (bootstrap); with 5 seeds it is a weak statement.
    * Bootstrap CIs (:func:`bootstrap_ci`, ``scipy.stats.bootstrap``, seeded). With 5 seeds a bootstrap
      interval under-covers; prefer the t-interval.
"""
from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import special, stats


RECOMMENDED_SEEDS = 5
#: fewer seeds per model than this: a comparison is shown with its numbers but never called significant
MIN_TESTABLE_SEEDS = 3
SIGNIFICANT, NOT_SIGNIFICANT = "significant", "not significant"
CONSISTENT, NOT_CONSISTENT = "consistent across conditions", "not consistent across conditions"


def not_testable(n: int) -> str:
    """The verdict of a comparison resting on ``n`` < :data:`MIN_TESTABLE_SEEDS` seeds per model."""
    return f"not testable: {n} seed{'' if n == 1 else 's'}"


def verdict(reject: bool, n_seeds: int, cells: bool = False) -> str:
    """What a Holm decision may claim: "not testable: n seeds" below :data:`MIN_TESTABLE_SEEDS` seeds; over
    cells (conditions of the same trained models) "consistent across conditions" — never significance."""
    if n_seeds < MIN_TESTABLE_SEEDS:
        return not_testable(n_seeds)
    if cells:
        return CONSISTENT if reject else NOT_CONSISTENT
    return SIGNIFICANT if reject else NOT_SIGNIFICANT


@dataclass
class StatResult:
    """A result table, the honest warnings that go with it, the multiple-comparison family and scalars."""
    table: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    family: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def _label(keys: dict[str, Any]) -> str:
    return "/".join(str(v) for v in keys.values() if v is not None and v != "")


def _dedupe(msgs: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(msgs))


# ---------------------------------------------------------------------------------------------- basics
def t_interval(values: Sequence[float] | np.ndarray, conf: float = 0.95) -> tuple[float, float, float, float]:
    """(mean, SD, lower, upper) of the t-interval; SD and bounds are NaN for fewer than 2 values."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n == 0:
        return (math.nan,) * 4
    m = float(x.mean())
    if n < 2:
        return m, math.nan, math.nan, math.nan
    sd = float(x.std(ddof=1))
    h = stats.t.ppf(0.5 + conf / 2, n - 1) * sd / math.sqrt(n)
    return m, sd, m - h, m + h


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom."""
    qa, qb = var_a / n_a, var_b / n_b
    den = qa ** 2 / (n_a - 1) + qb ** 2 / (n_b - 1)
    return (qa + qb) ** 2 / den if den > 0 else math.nan


def hedges_correction(dof: float) -> float:
    """Hedges' exact small-sample factor J(ν) = Γ(ν/2) / (√(ν/2) Γ((ν−1)/2))."""
    if not dof > 1:
        return math.nan
    return float(math.exp(special.gammaln(dof / 2) - special.gammaln((dof - 1) / 2)) / math.sqrt(dof / 2))


def hedges_g(a: Sequence[float], b: Sequence[float], paired: bool = False) -> float:
    """Hedges' g of A − B (pooled SD, or g_av when paired; see the module docstring)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    na, nb = a.size, b.size
    if paired:
        if na != nb or na < 2:
            return math.nan
        s = (a.std(ddof=1) + b.std(ddof=1)) / 2
        dof = na - 1
    else:
        if na < 2 or nb < 2:
            return math.nan
        s = math.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2))
        dof = na + nb - 2
    if not s > 0:
        return math.nan
    return float((a.mean() - b.mean()) / s * hedges_correction(dof))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values; NaN entries stay NaN and are not part of the family.

    Step-down: sort the m finite p-values, p_(i) ↦ max_{j ≤ i} min(1, (m − j + 1) p_(j)). The tests check it
    against ``statsmodels.stats.multitest.multipletests(method="holm")`` (equal to the last bit); it is computed
    here because that function's Holm branch runs a full ``gc.collect()`` on every call, ~0.2 s each in a
    process holding a report's figures (9 calls in the main job's report).
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size:
        finite = p[ok]
        order = np.argsort(finite, kind="stable")
        steps = finite[order] * np.arange(ok.size, 0, -1)
        adjusted = np.empty(ok.size)
        adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
        out[ok] = adjusted
    return out


def compare_two(a: Sequence[float], b: Sequence[float], paired: bool = False, conf: float = 0.95,
                seeds_a: Sequence[int] | None = None, seeds_b: Sequence[int] | None = None) -> dict[str, Any]:
    """Δ = mean(A) − mean(B), its CI, t, p, Hedges' g. Returns a dict (``note`` explains NaNs)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    row: dict[str, Any] = dict(n_a=int(a.size), n_b=int(b.size), mean_a=float(np.mean(a)) if a.size else math.nan,
                               mean_b=float(np.mean(b)) if b.size else math.nan, diff=math.nan, ci_lo=math.nan,
                               ci_hi=math.nan, df=math.nan, t=math.nan, p=math.nan, g=math.nan,
                               test="paired t" if paired else "Welch t", note="")
    row["diff"] = row["mean_a"] - row["mean_b"]
    if paired:
        if seeds_a is None or seeds_b is None:
            if a.size != b.size:
                row["note"] = "paired test needs equal numbers of seeds"
                return row
            common_a, common_b = a, b
        else:
            sa = dict(zip(map(int, seeds_a), a))
            sb = dict(zip(map(int, seeds_b), b))
            common = sorted(set(sa) & set(sb))
            common_a = np.array([sa[s] for s in common])
            common_b = np.array([sb[s] for s in common])
            if len(common) != max(a.size, b.size):
                row["note"] = f"paired on the {len(common)} common seeds"
        n = common_a.size
        row["n_a"] = row["n_b"] = int(n)
        if n < 2:
            row["note"] = "single seed: no CI or test" if n == 1 else "no common seeds"
            return row
        d = common_a - common_b
        row["mean_a"], row["mean_b"], row["diff"] = float(common_a.mean()), float(common_b.mean()), float(d.mean())
        se = float(d.std(ddof=1) / math.sqrt(n))
        row["df"] = float(n - 1)
        row["g"] = hedges_g(common_a, common_b, paired=True)
        if se > 0:
            h = stats.t.ppf(0.5 + conf / 2, n - 1) * se
            row["ci_lo"], row["ci_hi"] = row["diff"] - h, row["diff"] + h
            res = stats.ttest_rel(common_a, common_b)
            row["t"], row["p"] = float(res.statistic), float(res.pvalue)
        else:
            row["ci_lo"] = row["ci_hi"] = row["diff"]
            row["note"] = "identical differences on every seed: t-test undefined"
        return row
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        row["note"] = "single seed: no CI or test" if min(na, nb) == 1 else "no seeds"
        return row
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))
    se = math.sqrt(va / na + vb / nb)
    row["g"] = hedges_g(a, b)
    if se > 0:
        dof = welch_df(va, na, vb, nb)
        h = stats.t.ppf(0.5 + conf / 2, dof) * se
        res = stats.ttest_ind(a, b, equal_var=False)
        row.update(df=dof, ci_lo=row["diff"] - h, ci_hi=row["diff"] + h, t=float(res.statistic),
                   p=float(res.pvalue))
    else:
        row["ci_lo"] = row["ci_hi"] = row["diff"]
        row["note"] = "zero variance in both groups: t-test undefined"
    return row


# ---------------------------------------------------------------------------------------- over seeds
def _group_cols(df: pd.DataFrame, candidates: Sequence[str]) -> list[str]:
    return [c for c in candidates if c in df.columns]


def seed_summary(df: pd.DataFrame, by: Sequence[str] | None = None, value: str = "value",
                 conf: float = 0.95, bounds: tuple[float, float] | None = None) -> StatResult:
    """Mean, SD, t-interval over seeds per (model, dataset, condition[, severity]).

    Table columns: the ``by`` columns, n, mean, sd, se, ci_lo, ci_hi, ci_clipped, min, max, seeds, note.
    Seeds whose value is NaN (e.g. an incomplete mCA) are left out and counted in the note. ``bounds``: the
    range the quantity lives in (accuracy: (0, 1)); a t-interval reaching outside it is clipped to it,
    ``ci_clipped`` says so and the note names the bound (the t-interval is symmetric and knows no bound).
    """
    by = list(by) if by is not None else _group_cols(df, ("model", "dataset", "condition", "severity"))
    recs, warns = [], []
    few: dict[str, set[int]] = {}
    for keys, g in df.groupby(by, sort=False, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        kd = dict(zip(by, keys))
        x = g[value].to_numpy(dtype=float)
        ok = np.isfinite(x)
        seeds = g["seed"].to_numpy()[ok] if "seed" in g else np.arange(ok.sum())
        n = int(ok.sum())
        mean, sd, lo, hi = t_interval(x[ok], conf)
        notes = []
        clipped = False
        if bounds is not None and np.isfinite(lo) and (lo < bounds[0] or hi > bounds[1]):
            lo, hi, clipped = max(lo, bounds[0]), min(hi, bounds[1]), True
            notes.append(f"t-interval clipped to [{bounds[0]:g}, {bounds[1]:g}]")
        if (~ok).any():
            notes.append(f"{int((~ok).sum())} seed(s) without a value")
        if n == 1:
            notes.append("single seed: no SD/CI")
            warns.append(f"{_label(kd)}: a single seed — no SD, CI or test; no claim can rest on it")
        elif 1 < n < RECOMMENDED_SEEDS:
            few.setdefault(str(kd.get("model", _label(kd))), set()).add(n)
        recs.append({**kd, "n": n, "mean": mean, "sd": sd,
                     "se": sd / math.sqrt(n) if n > 1 else math.nan, "ci_lo": lo, "ci_hi": hi,
                     "ci_clipped": clipped, "min": float(np.min(x[ok])) if n else math.nan,
                     "max": float(np.max(x[ok])) if n else math.nan,
                     "seeds": ",".join(str(int(s)) for s in sorted(seeds)), "note": "; ".join(notes)})
    if few:
        desc = ", ".join(f"{m} (n={','.join(map(str, sorted(ns)))})" for m, ns in few.items())
        warns.append(f"fewer than {RECOMMENDED_SEEDS} seeds: {desc} — intervals are wide and tests have "
                     f"little power")
    cols = [*by, "n", "mean", "sd", "se", "ci_lo", "ci_hi", "ci_clipped", "min", "max", "seeds", "note"]
    return StatResult(pd.DataFrame(recs, columns=cols), _dedupe(warns),
                      info={"conf": conf, "interval": "t-interval over seeds"})


def pairwise_tests(df: pd.DataFrame, pairs: Sequence[tuple[str, str]] | None = None,
                   reference: str | None = None, paired: bool = False, alpha: float = 0.05,
                   conf: float = 0.95, family: str | None = None, by: Sequence[str] | None = None,
                   aso: bool = False, aso_kwargs: dict[str, Any] | None = None,
                   higher_is_better: bool | Callable[[dict[str, Any]], bool] = True,
                   min_seeds: int = MIN_TESTABLE_SEEDS) -> StatResult:
    """Model-vs-model tests over seeds for every (dataset, condition) group and model pair.

    Pairs: ``pairs`` if given; else every other model against ``reference``; else all pairs. Δ = A − B.
    Holm is applied over *all* comparisons of this call (the family), which the result states.
    With ``aso`` an ``aso_eps_min`` column (ε_min for "A better than B", α Bonferroni-divided by the
    family size) is added; ``higher_is_better`` (a bool, or a function of the group's keys) sets which
    direction ASO calls "better".
    A comparison with fewer than ``min_seeds`` seeds on either side keeps its numbers (Δ, CI, t, p, g) but is
    left out of the Holm family (``p_holm`` NaN), never rejects, and its ``verdict`` says "not testable: n seeds".
    Table columns: by..., model_a, model_b, n_a, n_b, mean_a, mean_b, diff, ci_lo, ci_hi, df, t, p, p_holm,
    reject, verdict, g, [aso_eps_min], test, note.
    """
    by = list(by) if by is not None else _group_cols(df, ("dataset", "condition"))
    models = list(dict.fromkeys(df["model"]))
    if pairs is None:
        if reference is not None:
            if reference not in models:
                raise ValueError(f"reference {reference!r} not among models {models}")
            pairs = [(m, reference) for m in models if m != reference]
        else:
            pairs = list(combinations(models, 2))
    recs, warns = [], []
    groups = list(df.groupby(by, sort=False)) if by else [((), df)]
    for keys, g in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        kd = dict(zip(by, keys))
        for ma, mb in pairs:
            xa, xb = g[g["model"] == ma], g[g["model"] == mb]
            xa, xb = xa[np.isfinite(xa["value"].astype(float))], xb[np.isfinite(xb["value"].astype(float))]
            if xa.empty or xb.empty:
                continue
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore", RuntimeWarning)
                row = compare_two(xa["value"], xb["value"], paired=paired, conf=conf,
                                  seeds_a=xa["seed"] if "seed" in xa else None,
                                  seeds_b=xb["seed"] if "seed" in xb else None)
            what = f"{ma} vs {mb}" + (f" on {_label(kd)}" if kd else "")
            if row["note"].startswith("single seed"):
                warns.append(f"refusing a claim for {what}: a single seed gives no CI or test")
            elif row["note"]:
                warns.append(f"{what}: {row['note']}")
            recs.append({**kd, "model_a": ma, "model_b": mb, **row})
    base = [*by, "model_a", "model_b", "n_a", "n_b", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "df", "t",
            "p", "g", "test", "note"]
    table = pd.DataFrame(recs, columns=base)
    n_min = np.minimum(table["n_a"].to_numpy(int), table["n_b"].to_numpy(int)) if len(table) else np.zeros(0, int)
    testable = n_min >= min_seeds
    p = np.where(testable, table["p"].astype(float).to_numpy(), math.nan) if len(table) else np.zeros(0)
    m = int(np.isfinite(p).sum())
    table["p_holm"] = holm(p)
    table["reject"] = table["p_holm"] < alpha
    table["verdict"] = [verdict(bool(r), int(n)) for r, n in zip(table["reject"], n_min)]
    if (~testable).any() and len(table):
        warns.append(f"{int((~testable).sum())} comparison(s) with fewer than {min_seeds} seeds per model: "
                     "numbers shown, not testable, left out of the Holm family")
    desc = family or (f"{len(pairs)} model pair(s) × {len(groups)} group(s)"
                      + (f" of ({', '.join(by)})" if by else ""))
    fam = (f"Holm over a family of {m} {'paired' if paired else 'Welch'} t-test(s) over seeds "
           f"(comparisons with ≥ {min_seeds} seeds per model): {desc}")
    cols = [*base[:base.index("p") + 1], "p_holm", "reject", "verdict", "g"]
    if aso and len(table):
        table["aso_eps_min"] = _aso_column(df, table, by, alpha / max(m, 1), aso_kwargs, higher_is_better)
        cols.append("aso_eps_min")
        warns.append(f"ASO ε_min at α = {alpha:g}/{max(m, 1)} (Bonferroni over the family); "
                     f"ε_min < 0.5 reads 'A almost stochastically better than B'")
    table = table[cols + ["test", "note"]]
    return StatResult(table, _dedupe(warns), family=fam, info={"alpha": alpha, "m": m, "conf": conf})


def _aso_column(df: pd.DataFrame, table: pd.DataFrame, by: Sequence[str], a_alpha: float,
                aso_kwargs: dict[str, Any] | None,
                higher_is_better: bool | Callable[[dict[str, Any]], bool]) -> list[float]:
    """ASO ε_min for "A better than B" per row of a pairwise table (NaN with fewer than 2 values a side)."""
    kw = dict(aso_kwargs or {})
    eps = []
    for _, r in table.iterrows():
        sel = np.ones(len(df), bool)
        for c in by:
            sel &= (df[c] == r[c]).to_numpy()
        va = df.loc[sel & (df["model"] == r["model_a"]).to_numpy(), "value"].astype(float).to_numpy()
        vb = df.loc[sel & (df["model"] == r["model_b"]).to_numpy(), "value"].astype(float).to_numpy()
        va, vb = va[np.isfinite(va)], vb[np.isfinite(vb)]
        hib = higher_is_better({c: r[c] for c in by}) if callable(higher_is_better) else higher_is_better
        if not hib:
            va, vb = -va, -vb
        eps.append(aso_eps_min(va, vb, alpha=a_alpha, **kw)["eps_min"] if len(va) > 1 and len(vb) > 1
                   else math.nan)
    return eps


# ------------------------------------------------------------------------------------ over cells/blocks
def min_wilcoxon_p(n: int) -> float:
    """Smallest two-sided exact Wilcoxon signed-rank p with n non-zero pairs: 2 / 2ⁿ (capped at 1)."""
    return min(1.0, 2.0 / 2 ** n) if n > 0 else 1.0


def wilcoxon_small_n_warning(n: int, alpha: float = 0.05, context: str = "") -> str | None:
    """The honest warning when n non-zero pairs cannot reach p < α, else None."""
    mp = min_wilcoxon_p(n)
    if mp < alpha:
        return None
    return (f"Wilcoxon over n={n} pairs cannot reach p<{alpha:g} (minimum two-sided p = {mp:.4g})"
            + (f" [{context}]" if context else ""))


def wilcoxon_paired(x: Sequence[float], y: Sequence[float], tol: float = 0.0, alpha: float = 0.05,
                    context: str = "") -> tuple[dict[str, Any], list[str]]:
    """Wilcoxon signed-rank on paired values with wins/ties/losses (|x − y| ≤ tol is a tie, dropped)."""
    d = np.asarray(x, float) - np.asarray(y, float)
    d = d[np.isfinite(d)]
    zero = np.abs(d) <= max(tol, 1e-12)
    nz = d[~zero]
    n = int(nz.size)
    row: dict[str, Any] = dict(n_pairs=int(d.size), n_nonzero=n, wins=int(((d > 0) & ~zero).sum()),
                               ties=int(zero.sum()), losses=int(((d < 0) & ~zero).sum()),
                               mean_diff=float(d.mean()) if d.size else math.nan,
                               median_diff=float(np.median(d)) if d.size else math.nan,
                               W=math.nan, p=math.nan, min_p=min_wilcoxon_p(n), method="")
    warns = []
    if n == 0:
        warns.append("Wilcoxon: no non-zero differences" + (f" [{context}]" if context else ""))
        return row, warns
    tied = np.unique(np.abs(nz)).size < n
    # scipy's "auto": exact null distribution for n <= 50 without ties; with tied |d| an exhaustive permutation
    # distribution for small n (scipy >= 1.13), else the tie-corrected normal approximation.
    method = "asymptotic" if n > 50 else ("exact" if not tied else "auto (tied |d|)")
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        res = stats.wilcoxon(nz, zero_method="wilcox", alternative="two-sided", method="auto")
    row.update(W=float(res.statistic), p=float(res.pvalue), method=method)
    w = wilcoxon_small_n_warning(n, alpha, context)
    if w:
        warns.append(w)
    return row, warns


def cell_means(df: pd.DataFrame, block_cols: Sequence[str] | None = None, value: str = "value") -> pd.DataFrame:
    """Average over seeds: one row per (model, block). Default blocks: dataset, condition, severity."""
    block_cols = list(block_cols) if block_cols is not None else _group_cols(df, ("dataset", "condition", "severity"))
    return df.groupby(["model", *block_cols], as_index=False, sort=True)[value].mean()


def _block_matrix(df: pd.DataFrame, models: Sequence[str], block_cols: Sequence[str] | None,
                  value: str = "value") -> tuple[pd.DataFrame, int]:
    cm = cell_means(df[df["model"].isin(list(models))], block_cols, value)
    bc = [c for c in cm.columns if c not in ("model", value)]
    wide = cm.pivot_table(index=bc, columns="model", values=value, aggfunc="first") if bc else \
        cm.set_index("model")[value].to_frame().T
    wide = wide.reindex(columns=list(models))
    before = len(wide)
    wide = wide.dropna()
    return wide, before - len(wide)


def wilcoxon_cells(df: pd.DataFrame, a: str, b: str, tol: float = 0.0, alpha: float = 0.05,
                   block_cols: Sequence[str] | None = None) -> StatResult:
    """Wilcoxon signed-rank of A − B over seed-averaged cells present for both; wins/ties/losses for A."""
    wide, dropped = _block_matrix(df, [a, b], block_cols)
    if wide.empty:
        row, warns = wilcoxon_paired([], [], tol=tol, alpha=alpha)
        warns = [f"Wilcoxon {a} vs {b}: no cells in common"]
    else:
        row, warns = wilcoxon_paired(wide[a], wide[b], tol=tol, alpha=alpha, context=f"{a} vs {b}")
    if dropped:
        warns.append(f"{a} vs {b}: {dropped} cell(s) present for only one model were left out")
    table = pd.DataFrame([{"model_a": a, "model_b": b, "n_cells": len(wide), **row}])
    return StatResult(table, warns, info={"tol": tol, "alpha": alpha})


def pairwise_wilcoxon(df: pd.DataFrame, models: Sequence[str] | None = None,
                      pairs: Sequence[tuple[str, str]] | None = None, tol: float = 0.0, alpha: float = 0.05,
                      block_cols: Sequence[str] | None = None, family: str | None = None,
                      n_seeds: int | None = None) -> StatResult:
    """Wilcoxon over blocks for several pairs (default: all pairs of ``models``), Holm over that family.

    Blocks (cells) are conditions of the *same* trained models, so a rejection says the difference is
    consistent across conditions, not that it would hold for newly trained models: the ``verdict`` column
    says "consistent across conditions" (or "not testable: n seeds" when ``n_seeds`` — the fewest seeds
    behind any model's cell means — is below :data:`MIN_TESTABLE_SEEDS`; ``reject`` is then False)."""
    models = list(models) if models is not None else list(dict.fromkeys(df["model"]))
    pairs = list(pairs) if pairs is not None else list(combinations(models, 2))
    rows, warns = [], []
    for a, b in pairs:
        r = wilcoxon_cells(df, a, b, tol=tol, alpha=alpha, block_cols=block_cols)
        rows.append(r.table)
        warns += r.warnings
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["model_a", "model_b", "n_cells", "W", "p"])
    table["p_holm"] = holm(table["p"].astype(float)) if len(table) else []
    table["reject"] = table["p_holm"] < alpha
    ns = MIN_TESTABLE_SEEDS if n_seeds is None else int(n_seeds)
    if ns < MIN_TESTABLE_SEEDS:
        table["reject"] = False
    table["verdict"] = [verdict(bool(r), ns, cells=True) for r in table["reject"]]
    m = int(np.isfinite(table["p"].astype(float)).sum()) if len(table) else 0
    fam = (f"Holm over a family of {m} Wilcoxon test(s) over cells (consistency across conditions of the same "
           f"trained models, not independent evidence): {family or f'{len(pairs)} model pair(s)'}")
    return StatResult(table, _dedupe(warns), family=fam, info={"tol": tol, "alpha": alpha})


def average_ranks(wide: pd.DataFrame, higher_is_better: bool = True) -> pd.Series:
    """Mean rank per column over rows (rank 1 = best; ties get the average rank)."""
    x = wide.to_numpy(dtype=float)
    r = stats.rankdata(-x if higher_is_better else x, axis=1)
    return pd.Series(r.mean(axis=0), index=wide.columns)


def critical_difference(avg_ranks: dict[str, float] | pd.Series | int, n_blocks: int,
                        alpha: float = 0.05) -> float:
    """Nemenyi critical difference ``q_α √(k(k+1)/(6N))`` with ``q_α = q_{studentized range}(1−α; k, ∞)/√2``."""
    k = avg_ranks if isinstance(avg_ranks, int) else len(avg_ranks)
    if k < 2 or n_blocks < 1:
        return math.nan
    q = float(stats.studentized_range.ppf(1 - alpha, k, np.inf)) / math.sqrt(2)
    return q * math.sqrt(k * (k + 1) / (6.0 * n_blocks))


def friedman_test(df: pd.DataFrame, models: Sequence[str] | None = None, block_cols: Sequence[str] | None = None,
                  higher_is_better: bool = True, alpha: float = 0.05) -> StatResult:
    """Friedman test of k ≥ 3 models over blocks (default: seed-averaged cells; pass ``["dataset"]`` for
    datasets), average ranks, Iman–Davenport F and the Nemenyi CD.

    Table: model, avg_rank, mean (over blocks), sorted by rank. ``info``: statistic, p, k, n_blocks,
    iman_davenport_F, iman_davenport_p, cd, alpha, blocks.
    """
    models = list(models) if models is not None else list(dict.fromkeys(df["model"]))
    warns: list[str] = []
    wide, dropped = _block_matrix(df, models, block_cols)
    bc = list(wide.index.names) if wide.index.names != [None] else []
    k, n = len(models), len(wide)
    info: dict[str, Any] = dict(statistic=math.nan, p=math.nan, k=k, n_blocks=n, iman_davenport_F=math.nan,
                                iman_davenport_p=math.nan, cd=math.nan, alpha=alpha, blocks=", ".join(bc))
    if dropped:
        warns.append(f"Friedman: {dropped} block(s) missing for some model were left out")
    if k < 3:
        warns.append("Friedman needs at least 3 models")
    if n < 2:
        warns.append(f"Friedman needs at least 2 complete blocks (have {n})")
    ranks = average_ranks(wide, higher_is_better) if n else pd.Series(math.nan, index=models)
    table = pd.DataFrame({"model": models, "avg_rank": ranks.reindex(models).to_numpy(),
                          "mean": wide.mean(axis=0).reindex(models).to_numpy() if n else math.nan})
    table = table.sort_values("avg_rank", kind="stable").reset_index(drop=True)
    if k >= 3 and n >= 2:
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.friedmanchisquare(*[wide[m].to_numpy(float) for m in models])
        chi2 = float(res.statistic)
        info.update(statistic=chi2, p=float(res.pvalue))
        den = n * (k - 1) - chi2
        if np.isfinite(chi2) and den > 0:
            f = (n - 1) * chi2 / den
            info.update(iman_davenport_F=f, iman_davenport_p=float(stats.f.sf(f, k - 1, (k - 1) * (n - 1))))
        elif np.isfinite(chi2):  # every block ranks the models identically
            info.update(iman_davenport_F=math.inf, iman_davenport_p=0.0)
        info["cd"] = critical_difference(k, n, alpha)
        if n <= 5:
            warns.append(f"Friedman over only N={n} blocks: little power")
    return StatResult(table, warns, info=info)


def holm_cliques(avg_ranks: dict[str, float] | pd.Series, different: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Maximal runs of models (ordered by average rank) in which no pair is in ``different`` — the pairs a
    pairwise test + Holm rejected. Drawn as the CD diagram's bars, so the diagram and the pairwise table beside
    it cannot disagree."""
    items = [m for m, _ in sorted(dict(avg_ranks).items(), key=lambda kv: (kv[1], kv[0]))]
    diff = {frozenset(p) for p in different}
    groups: list[tuple[int, int]] = []
    for i in range(len(items)):
        j = i
        while j + 1 < len(items) and not any(frozenset((items[t], items[j + 1])) in diff for t in range(i, j + 1)):
            j += 1
        if j > i and not any(a <= i and j <= b for a, b in groups):
            groups.append((i, j))
    return [items[a:b + 1] for a, b in groups]


# ------------------------------------------------------------------------------------------ optional
def _quantile_steps(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Empirical quantile function F⁻¹(t) = x_(⌈nt⌉) (sorted x), for t in (0, 1]."""
    n = x.size
    idx = np.clip(np.ceil(n * t).astype(int) - 1, 0, n - 1)
    return x[idx]


def violation_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """ε_W2 for the claim "A is stochastically larger than B": the share of the squared Wasserstein-2
    distance coming from quantiles where A is below B. Exact for empirical distributions; NaN when A and B
    have the same distribution."""
    xa, xb = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    n, m = xa.size, xb.size
    br = np.unique(np.concatenate([np.arange(n + 1) / n, np.arange(m + 1) / m]))
    width = np.diff(br)
    mid = (br[:-1] + br[1:]) / 2
    diff = _quantile_steps(xa, mid) - _quantile_steps(xb, mid)
    total = float(np.sum(width * diff ** 2))
    if total <= 0:
        return math.nan
    return float(np.sum(width * np.where(diff < 0, diff, 0.0) ** 2) / total)


def aso_eps_min(a: Sequence[float], b: Sequence[float], alpha: float = 0.05, n_bootstrap: int = 1000,
                seed: int = 0) -> dict[str, float]:
    """Almost stochastic order, ε_min for "A better than B" (higher scores better). See module docstring.

    Returns eps_min, violation_ratio, sigma_hat, n_valid (bootstrap replicates with a defined ratio).
    """
    xa, xb = np.asarray(a, float), np.asarray(b, float)
    n, m = xa.size, xb.size
    eps = violation_ratio(xa, xb)
    out = dict(eps_min=math.nan, violation_ratio=eps, sigma_hat=math.nan, n_valid=0)
    if not np.isfinite(eps) or n < 2 or m < 2:
        return out
    rng = np.random.default_rng(seed)
    const = math.sqrt(n * m / (n + m))
    boot = np.empty(n_bootstrap)
    for i in range(n_bootstrap):
        boot[i] = violation_ratio(rng.choice(xa, n, replace=True), rng.choice(xb, m, replace=True))
    boot = boot[np.isfinite(boot)]
    if boot.size < 2:
        return out
    sigma = float(np.std(const * (boot - eps)))
    eps_min = eps - sigma / const * float(stats.norm.ppf(alpha))
    out.update(eps_min=float(min(max(eps_min, 0.0), 1.0)), sigma_hat=sigma, n_valid=int(boot.size))
    return out


def bootstrap_ci(a: Sequence[float], b: Sequence[float] | None = None, conf: float = 0.95,
                 n_resamples: int = 9999, seed: int = 0, method: str = "BCa") -> tuple[float, float]:
    """Bootstrap CI of mean(A), or of mean(A) − mean(B) (independent resampling) when ``b`` is given.
    NaN bounds for degenerate data (e.g. all values equal)."""
    data: tuple[np.ndarray, ...]
    if b is None:
        data = (np.asarray(a, float),)

        def stat(x, axis=-1):
            return np.mean(x, axis=axis)
    else:
        data = (np.asarray(a, float), np.asarray(b, float))

        def stat(x, y, axis=-1):
            return np.mean(x, axis=axis) - np.mean(y, axis=axis)
    if any(d.size < 2 for d in data):
        return math.nan, math.nan
    kw: dict[str, Any] = dict(n_resamples=n_resamples, confidence_level=conf, method=method, vectorized=True)
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        try:
            res = stats.bootstrap(data, stat, rng=np.random.default_rng(seed), **kw)
        except TypeError:  # scipy < 1.15
            res = stats.bootstrap(data, stat, random_state=np.random.default_rng(seed), **kw)
    ci = res.confidence_interval
    return float(ci.low), float(ci.high)
