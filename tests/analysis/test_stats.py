"""Statistics against scipy and against hand computations (numbers written out in the tests)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sst

from robustbench_dgsa.analysis import stats as S


# ------------------------------------------------------------------------------------------- Welch / CI
def test_welch_matches_scipy_on_fixed_numbers():
    a = [0.812, 0.830, 0.801, 0.825, 0.840]
    b = [0.790, 0.805, 0.781, 0.812, 0.770]
    row = S.compare_two(a, b)
    ref = sst.ttest_ind(a, b, equal_var=False)
    assert row["t"] == pytest.approx(ref.statistic, rel=1e-12)
    assert row["p"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert row["df"] == pytest.approx(ref.df, rel=1e-12)
    ci = ref.confidence_interval(0.95)
    assert (row["ci_lo"], row["ci_hi"]) == (pytest.approx(ci.low, rel=1e-10), pytest.approx(ci.high, rel=1e-10))
    assert row["test"] == "Welch t"


def test_welch_hand_computed():
    # a: mean 3, var 2.5; b: mean 6, var 10; n = 5 each.
    # se = sqrt(2.5/5 + 10/5) = sqrt(2.5) = 1.5811388; t = -3 / 1.5811388 = -1.8973666
    # df = 2.5^2 / (0.5^2/4 + 2^2/4) = 6.25 / 1.0625 = 5.8823529
    # t_{0.975, 5.8823529} = 2.4588237 -> CI = -3 +- 2.4588237 * 1.5811388 = [-6.8877416, 0.8877416]
    # p = 2 * P(T_{5.88} > 1.8973666) = 0.1075312
    row = S.compare_two([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    assert row["diff"] == pytest.approx(-3.0)
    assert row["t"] == pytest.approx(-1.8973666, abs=1e-6)
    assert row["df"] == pytest.approx(5.8823529, abs=1e-6)
    assert row["ci_lo"] == pytest.approx(-6.8877416, abs=1e-6)
    assert row["ci_hi"] == pytest.approx(0.8877416, abs=1e-6)
    assert row["p"] == pytest.approx(0.1075312, abs=1e-6)
    assert S.welch_df(2.5, 5, 10.0, 5) == pytest.approx(6.25 / 1.0625)


def test_t_interval_hand_computed():
    # mean 0.82, SD 0.02, n = 3: half-width = t_{0.975,2} * 0.02 / sqrt(3) = 4.3026527 * 0.0115470 = 0.0496828
    mean, sd, lo, hi = S.t_interval([0.80, 0.82, 0.84])
    assert mean == pytest.approx(0.82)
    assert sd == pytest.approx(0.02)
    assert lo == pytest.approx(0.82 - 0.0496828, abs=1e-7)
    assert hi == pytest.approx(0.82 + 0.0496828, abs=1e-7)


def test_paired_t_hand_computed_and_scipy():
    # d = a - b = [1, 2, 3]: mean 2, SD 1, se = 1/sqrt(3); t = 2*sqrt(3) = 3.4641016, df = 2
    # CI = 2 +- 4.3026527/sqrt(3) = 2 +- 2.4841377
    a, b = [2.0, 4.0, 6.0], [1.0, 2.0, 3.0]
    row = S.compare_two(a, b, paired=True, seeds_a=[0, 1, 2], seeds_b=[0, 1, 2])
    assert row["t"] == pytest.approx(3.4641016, abs=1e-6)
    assert row["t"] == pytest.approx(sst.ttest_rel(a, b).statistic)
    assert row["p"] == pytest.approx(sst.ttest_rel(a, b).pvalue)
    assert row["df"] == 2
    assert row["ci_lo"] == pytest.approx(2 - 2.4841377, abs=1e-6)
    assert row["ci_hi"] == pytest.approx(2 + 2.4841377, abs=1e-6)
    assert row["test"] == "paired t"


def test_paired_matches_seeds_by_number():
    row = S.compare_two([1.0, 2.0, 3.5], [0.0, 1.0, 9.0], paired=True, seeds_a=[0, 1, 2], seeds_b=[1, 0, 7])
    # common seeds 0 and 1: A = [1, 2], B = [1, 0] -> d = [0, 2]
    assert row["n_a"] == 2 and row["diff"] == pytest.approx(1.0)
    assert "common seeds" in row["note"]


# ------------------------------------------------------------------------------------------- Hedges' g
def test_hedges_g_hand_computed():
    # pooled SD = sqrt((4*2.5 + 4*10)/8) = 2.5; d = -3/2.5 = -1.2
    # J(8) = Gamma(4) / (sqrt(4) Gamma(3.5)) = 6 / (2 * 3.3233509704) = 0.9027033
    # g = -1.2 * 0.9027033 = -1.0832440   (the approximation 1 - 3/(4*8-1) would give -1.0838710)
    assert S.hedges_correction(8) == pytest.approx(6 / (2 * 15 * math.sqrt(math.pi) / 8), rel=1e-12)
    assert S.hedges_g([1, 2, 3, 4, 5], [2, 4, 6, 8, 10]) == pytest.approx(-1.0832440, abs=1e-6)


def test_hedges_g_av_paired_hand_computed():
    # a: mean 2, SD 1; b: mean 0.5, SD 0.5; d_av = 1.5 / 0.75 = 2; J(2) = Gamma(1)/(1*Gamma(0.5)) = 1/sqrt(pi)
    g = S.hedges_g([1, 2, 3], [0, 0.5, 1], paired=True)
    assert g == pytest.approx(2 / math.sqrt(math.pi), rel=1e-12)


# ------------------------------------------------------------------------------------------------ Holm
def test_holm_hand_computed():
    # sorted: 0.01*3 = 0.03; 0.03*2 = 0.06; 0.04*1 = 0.04 -> monotone max 0.06
    assert S.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    from statsmodels.stats.multitest import multipletests
    rng = np.random.default_rng(0)
    for m in (1, 2, 7, 30):
        p = rng.random(m) ** 3
        assert np.array_equal(S.holm(p), multipletests(p, method="holm")[1])
    tied = np.array([0.3, 0.01, 0.3, 0.4, 0.01, 0.9])            # ties and adjusted values above 1 (clipped)
    assert np.array_equal(S.holm(tied), multipletests(tied, method="holm")[1])
    assert S.holm(tied).max() == 1.0
    out = S.holm([0.01, float("nan"), 0.04])  # NaN is not in the family: m = 2
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)


# -------------------------------------------------------------------------------------- seed summary
def _measures(values: dict[str, list[float]], condition: str = "clean") -> pd.DataFrame:
    rows = [dict(model=m, dataset="d", condition=condition, seed=i, value=v)
            for m, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_seed_summary_values_and_few_seeds_warning():
    r = S.seed_summary(_measures({"a": [0.80, 0.82, 0.84], "b": [0.7] * 5}))
    row = r.table.set_index("model").loc["a"]
    assert row["n"] == 3 and row["mean"] == pytest.approx(0.82)
    assert row["ci_hi"] - row["mean"] == pytest.approx(0.0496828, abs=1e-7)
    assert any("fewer than 5 seeds" in w and "a (n=3)" in w for w in r.warnings)
    assert not any("b (n=" in w for w in r.warnings)


def test_single_seed_is_refused():
    df = _measures({"a": [0.8], "b": [0.7, 0.72, 0.71]})
    summ = S.seed_summary(df)
    a = summ.table.set_index("model").loc["a"]
    assert math.isnan(a["sd"]) and math.isnan(a["ci_lo"]) and "single seed" in a["note"]
    assert any("single seed" in w and "no claim" in w for w in summ.warnings)
    pw = S.pairwise_tests(df, reference="b")
    row = pw.table.iloc[0]
    assert math.isnan(row["p"]) and math.isnan(row["ci_lo"]) and math.isnan(row["p_holm"])
    assert not row["reject"]
    assert any(w.startswith("refusing a claim") for w in pw.warnings)
    assert "family of 0" in pw.family


def test_pairwise_family_and_holm():
    df = pd.concat([_measures({"a": [0.80, 0.81, 0.82], "b": [0.70, 0.72, 0.71], "c": [0.79, 0.80, 0.83]}, c)
                    for c in ("clean", "mCA")], ignore_index=True)
    r = S.pairwise_tests(df, reference="a")
    assert len(r.table) == 4  # (b, c) vs a × 2 conditions
    assert set(zip(r.table["model_a"], r.table["model_b"])) == {("b", "a"), ("c", "a")}
    assert "family of 4" in r.family
    assert r.table["p_holm"].to_numpy() == pytest.approx(S.holm(r.table["p"]))
    r_all = S.pairwise_tests(df)
    assert len(r_all.table) == 6 and "family of 6" in r_all.family


def test_zero_variance_is_reported_not_crashing():
    r = S.compare_two([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    assert math.isnan(r["p"]) and "zero variance" in r["note"]


# -------------------------------------------------------------------------------------------- Wilcoxon
def test_minimum_wilcoxon_p_for_five_pairs():
    res = sst.wilcoxon([0.01, 0.02, 0.03, 0.04, 0.05], method="exact")
    assert res.pvalue == pytest.approx(0.0625)
    assert S.min_wilcoxon_p(5) == 0.0625 == 2 / 2 ** 5
    row, warns = S.wilcoxon_paired([1, 2, 3, 4, 5], [0, 0, 0, 0, 0])
    assert row["p"] == pytest.approx(0.0625) and row["wins"] == 5
    assert "Wilcoxon over n=5 pairs cannot reach p<0.05 (minimum two-sided p = 0.0625)" in warns[0]
    _, warns6 = S.wilcoxon_paired([1, 2, 3, 4, 5, 6], [0] * 6)
    assert not any("cannot reach" in w for w in warns6)
    assert S.wilcoxon_small_n_warning(6, alpha=0.01) is not None  # 2/64 = 0.031 > 0.01


def test_wilcoxon_cells_tally_with_tolerance():
    rows = []
    diffs = [0.02, 0.03, -0.01, 0.0005, 0.04, 0.05, 0.06, -0.02]
    for i, dlt in enumerate(diffs):
        for seed in range(2):
            rows.append(dict(model="a", seed=seed, condition=f"c{i}", severity=1, value=0.5 + dlt))
            rows.append(dict(model="b", seed=seed, condition=f"c{i}", severity=1, value=0.5))
    df = pd.DataFrame(rows)
    r = S.wilcoxon_cells(df, "a", "b", tol=0.001)
    t = r.table.iloc[0]
    assert (t["wins"], t["ties"], t["losses"]) == (5, 1, 2)
    assert t["n_nonzero"] == 7 and t["n_cells"] == 8
    nz = [d for d in diffs if abs(d) > 0.001]
    assert t["p"] == pytest.approx(sst.wilcoxon(nz).pvalue)


# -------------------------------------------------------------------------------------------- Friedman
def test_friedman_against_scipy_and_ranks():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 4)) + np.array([0.0, 0.3, 0.6, 0.9])
    rows = [dict(model=f"m{j}", seed=0, condition=f"b{i}", severity=1, value=x[i, j])
            for i in range(12) for j in range(4)]
    r = S.friedman_test(pd.DataFrame(rows), models=["m0", "m1", "m2", "m3"])
    ref = sst.friedmanchisquare(*x.T)
    assert r.info["statistic"] == pytest.approx(ref.statistic)
    assert r.info["p"] == pytest.approx(ref.pvalue)
    assert r.info["n_blocks"] == 12 and r.info["k"] == 4
    ranks = sst.rankdata(-x, axis=1).mean(axis=0)
    got = r.table.set_index("model")["avg_rank"]
    assert [got[f"m{j}"] for j in range(4)] == pytest.approx(list(ranks))
    # hand: with 3 models always in the same order the ranks are 1, 2, 3
    rows = [dict(model=m, seed=0, condition=f"b{i}", severity=1, value=v)
            for i in range(5) for m, v in (("a", 0.9), ("b", 0.8), ("c", 0.7))]
    r3 = S.friedman_test(pd.DataFrame(rows))
    assert list(r3.table["model"]) == ["a", "b", "c"] and list(r3.table["avg_rank"]) == [1.0, 2.0, 3.0]


def test_critical_difference_k3_n75_demsar():
    cd = S.critical_difference(3, 75, alpha=0.05)
    assert cd == pytest.approx(2.343 * math.sqrt(3 * 4 / (6 * 75)), abs=1e-3)
    # k = 2: q_0.05 = 1.960 (Demšar's table)
    assert S.critical_difference({"a": 1.0, "b": 2.0}, 1) / math.sqrt(2 * 3 / 6) == pytest.approx(1.960, abs=1e-3)


def test_holm_cliques_follow_the_pairwise_decisions():
    ranks = {"a": 1.0, "b": 1.3, "c": 2.5, "d": 2.6}
    # a-b not different, c-d not different, every cross pair different -> two bars
    diff = [("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")]
    assert S.holm_cliques(ranks, diff) == [["a", "b"], ["c", "d"]]
    # a pair the tests told apart is never joined, even when adjacent in rank
    assert S.holm_cliques(ranks, diff + [("a", "b")]) == [["c", "d"]]
    assert S.holm_cliques(ranks, []) == [["a", "b", "c", "d"]]


def test_fewer_than_three_seeds_is_never_significant():
    df = _measures({"a": [0.90, 0.91], "b": [0.10, 0.11]})   # a huge difference, two seeds each
    pw = S.pairwise_tests(df, reference="b")
    row = pw.table.iloc[0]
    assert np.isfinite(row["p"]) and row["p"] < 0.01           # the number is shown ...
    assert math.isnan(row["p_holm"]) and not row["reject"]     # ... but it is not a claim
    assert row["verdict"] == "not testable: 2 seeds"
    assert "family of 0" in pw.family
    df3 = _measures({"a": [0.90, 0.91, 0.92], "b": [0.10, 0.11, 0.12]})
    row3 = S.pairwise_tests(df3, reference="b").table.iloc[0]
    assert row3["reject"] and row3["verdict"] == "significant"


# ---------------------------------------------------------------------------------------- ASO, bootstrap
def test_violation_ratio_hand_computed():
    # Q_a = 1 on (0, .5], 3 on (.5, 1]; Q_b = 2: diff = -1 then +1 -> violation share 0.5
    assert S.violation_ratio([1, 3], [2, 2]) == pytest.approx(0.5)
    assert S.violation_ratio([5, 6, 7], [1, 2, 3]) == 0.0
    assert S.violation_ratio([1, 2, 3], [5, 6, 7]) == 1.0


def test_aso_direction_and_determinism():
    a = [0.90, 0.91, 0.92, 0.93, 0.94]
    b = [0.80, 0.81, 0.82, 0.83, 0.84]
    better = S.aso_eps_min(a, b, n_bootstrap=200, seed=0)
    worse = S.aso_eps_min(b, a, n_bootstrap=200, seed=0)
    assert better["eps_min"] < 0.2 and worse["eps_min"] > 0.8
    mixed1 = S.aso_eps_min([0.8, 0.85, 0.9, 0.82, 0.88], [0.81, 0.84, 0.86, 0.83, 0.87], n_bootstrap=200, seed=3)
    mixed2 = S.aso_eps_min([0.8, 0.85, 0.9, 0.82, 0.88], [0.81, 0.84, 0.86, 0.83, 0.87], n_bootstrap=200, seed=3)
    assert mixed1 == mixed2


def test_bootstrap_ci_contains_mean_and_is_seeded():
    x = [0.80, 0.82, 0.79, 0.85, 0.81, 0.83]
    lo, hi = S.bootstrap_ci(x, n_resamples=2000, seed=1)
    assert lo < np.mean(x) < hi
    assert (lo, hi) == S.bootstrap_ci(x, n_resamples=2000, seed=1)
    dlo, dhi = S.bootstrap_ci(x, [0.70, 0.71, 0.69, 0.72], n_resamples=2000, seed=1)
    assert 0 < dlo < dhi
