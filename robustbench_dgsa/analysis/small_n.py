"""Small-n statistics for one claim: n per-seed differences x_1..x_n (points), each a claim's statistic for one
matched seed pair, minus the claim's threshold. Pure functions; formulas in the docstrings.

With n = 5 seeds no distribution-free test reaches p < 0.05 (the exact sign-flip minimum is 2/2^5 = 0.0625), so
the primary test is the t-test and the others sit beside it, never as a gate: the sign count, the exact sign-flip
permutation p with its smallest reachable value, and the two-level bootstrap CI (seeds × test examples).
"""
from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
from scipy import optimize, stats

#: fraction of seeds that must lie in the claimed direction for "supported"
MIN_SIGN_FRACTION = 0.8
BOOT_RESAMPLES = 2000
BOOT_SEED = 20261128
#: more seeds than this needed: reported as this cap (``seeds_needed_capped`` True)
MAX_SEEDS = 10_000


def sign_count(x: Sequence[float], direction: str, margin: float = 0.0) -> int:
    """k: seeds in the claimed direction — x_s > 0 (``greater``), x_s < 0 (``less``), |x_s| < margin
    (``equivalent``)."""
    x = np.asarray(x, float)
    if direction == "equivalent":
        return int((np.abs(x) < margin).sum())
    return int((x > 0).sum() if direction == "greater" else (x < 0).sum())


def _flips(n: int) -> np.ndarray:
    """All 2^n sign vectors (rows)."""
    return np.array(list(itertools.product((1.0, -1.0), repeat=n)))


def sign_flip_p(x: Sequence[float], alternative: str = "two-sided") -> float:
    """Exact sign-flip permutation p of H0: the x_s are symmetric about 0. Statistic T = mean(x); over all 2^n
    sign vectors ε, p = #{ε : T(εx) ≥ T(x)} / 2^n (``greater``), ≤ (``less``), |T(εx)| ≥ |T(x)| (two-sided).
    (``scipy.stats.permutation_test(..., permutation_type="samples")`` enumerates the same set; the enumeration
    here keeps ties exact.) NaN for n = 0; n > 16 is refused (2^n too many)."""
    x = np.asarray(x, float)
    n = x.size
    if n == 0:
        return math.nan
    if n > 16:
        raise ValueError("exact sign-flip enumeration is limited to 16 seeds")
    t = _flips(n) @ x / n
    obs = x.mean()
    eps = 1e-12 * max(1.0, float(np.abs(x).max()))
    if alternative == "greater":
        hits = t >= obs - eps
    elif alternative == "less":
        hits = t <= obs + eps
    else:
        hits = np.abs(t) >= abs(obs) - eps
    return float(hits.mean())


def min_sign_flip_p(n: int, alternative: str = "two-sided") -> float:
    """Smallest p the exact sign-flip test can give with n seeds: 2/2^n two-sided, 1/2^n one-sided."""
    return (2.0 if alternative == "two-sided" else 1.0) / 2 ** n if n > 0 else math.nan


def t_test(x: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean, SD, p, half-width): one-sample t-test of mean(x) = 0, two-sided, df = n − 1 (``scipy.stats.ttest_1samp``;
    = the paired t over matched seeds); half-width = t_{0.975, n−1} · SD / √n."""
    x = np.asarray(x, float)
    n = x.size
    if n < 2:
        return (float(x.mean()) if n else math.nan), math.nan, math.nan, math.nan
    sd = float(x.std(ddof=1))
    p = float(stats.ttest_1samp(x, 0.0).pvalue) if sd > 0 else (0.0 if x.mean() != 0 else 1.0)
    return float(x.mean()), sd, p, float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n))


def tost_p(d: Sequence[float], margin: float) -> float:
    """Two one-sided t-tests of H0: |mean(d)| ≥ margin; p = max(p_low, p_high)
    (``statsmodels.stats.weightstats.ttost_paired`` of d against 0 with bounds ±margin)."""
    from statsmodels.stats.weightstats import ttost_paired

    d = np.asarray(d, float)
    if d.size < 2 or not d.std(ddof=1) > 0:
        return 0.0 if d.size >= 2 and abs(d.mean()) < margin else math.nan
    return float(ttost_paired(d, np.zeros_like(d), -margin, margin)[0])


def sign_flip_tost_p(d: Sequence[float], margin: float) -> float:
    """Exact sign-flip version of TOST: max(p of mean(d + m) > 0, p of mean(d − m) < 0)."""
    d = np.asarray(d, float)
    return max(sign_flip_p(d + margin, "greater"), sign_flip_p(d - margin, "less"))


def holm_alpha(p: Sequence[float], alpha: float = 0.05) -> np.ndarray:
    """The α each test of a Holm family is compared against: α / (m − i + 1) for the test of rank i (1 = smallest
    p; ties in input order); NaN entries are not in the family."""
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    for rank, j in enumerate(ok[np.argsort(p[ok], kind="stable")], 1):
        out[j] = alpha / (m - rank + 1)
    return out


def bootstrap_weights(n_examples: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Multinomial example weights (resamples × n_examples), each row summing to n_examples (counts of n draws with
    replacement, = ``rng.multinomial(n, [1/n]·n)`` in law, faster): one resample of the
    test set, shared by every model, seed and condition (they were all evaluated on the same examples)."""
    draws = rng.integers(0, n_examples, size=(resamples, n_examples))
    draws += (np.arange(resamples) * n_examples)[:, None]
    return np.bincount(draws.ravel(), minlength=resamples * n_examples).reshape(resamples, n_examples
                                                                                ).astype(np.float32)


def percentile_ci(values: np.ndarray, conf: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (NaN-free part)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan
    lo, hi = np.percentile(v, [50 * (1 - conf), 50 * (1 + conf)])
    return float(lo), float(hi)


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
