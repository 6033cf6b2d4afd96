"""Our consistency machinery (pairwise Wilcoxon + Holm, Friedman ranks, the Nemenyi critical difference, the
rank-diagram cliques) against scikit-posthocs, an independent implementation (test extra; skipped without it)."""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from robustbench_dgsa.analysis import stats as S

sp = pytest.importorskip("scikit_posthocs")


def _blocks(seed, n=30, shifts=(0.0, 0.02, 0.05, 0.3)):
    """Cells (blocks) x models with distinct differences, no ties in |d| (continuous values)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.6, 0.05, size=(n, 1)) + np.asarray(shifts)[None, :] + rng.normal(0, 0.03, (n, len(shifts)))
    models = [f"m{j}" for j in range(len(shifts))]
    rows = [dict(model=m, seed=0, condition=f"c{i}", severity=1, value=float(x[i, j]))
            for i in range(n) for j, m in enumerate(models)]
    return pd.DataFrame(rows), x, models


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairwise_wilcoxon_holm_equals_scikit_posthocs(seed):
    df, x, models = _blocks(seed)
    ours = S.pairwise_wilcoxon(df, models=models).table.set_index(["model_a", "model_b"])
    long = pd.DataFrame({"value": x.T.ravel(), "model": np.repeat(models, len(x))})
    ref = sp.posthoc_wilcoxon(long, val_col="value", group_col="model", p_adjust="holm", zero_method="wilcox")
    for a, b in combinations(models, 2):
        assert ours.loc[(a, b), "p_holm"] == pytest.approx(ref.loc[a, b], rel=1e-9), (a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_critical_difference_agrees_with_nemenyi_p_values(seed):
    """|rank difference| > CD exactly where scikit-posthocs' Nemenyi-Friedman test rejects at alpha = 0.05."""
    df, x, models = _blocks(seed, n=40, shifts=(0.0, 0.01, 0.03, 0.06, 0.1))
    fr = S.friedman_test(df, models=models)
    ranks = fr.table.set_index("model")["avg_rank"]
    cd = S.critical_difference(len(models), len(x), alpha=0.05)
    nemenyi = sp.posthoc_nemenyi_friedman(x)  # blocks x groups; columns 0..k-1
    for (i, a), (j, b) in combinations(enumerate(models), 2):
        assert (abs(ranks[a] - ranks[b]) > cd) == (nemenyi.iloc[i, j] < 0.05), (a, b)


@pytest.mark.parametrize("seed", [3, 4])
def test_cliques_equal_scikit_posthocs_diagram_cliques(seed):
    """The rank diagram's bars (models not told apart): our holm_cliques against the maximal cliques
    scikit-posthocs' critical_difference_diagram draws for the same significance matrix."""
    plotting = pytest.importorskip("scikit_posthocs._plotting")
    if not hasattr(plotting, "_find_maximal_cliques"):
        pytest.skip("this scikit-posthocs version has no _find_maximal_cliques")
    df, x, models = _blocks(seed, n=30, shifts=(0.0, 0.004, 0.03, 0.034, 0.2))
    table = S.pairwise_wilcoxon(df, models=models).table
    ranks = S.friedman_test(df, models=models).table.set_index("model")["avg_rank"]
    different = [(a, b) for a, b, r in zip(table.model_a, table.model_b, table.reject) if r]
    ours = {frozenset(c) for c in S.holm_cliques(ranks, different) if len(c) > 1}
    sig = pd.DataFrame(1.0, index=models, columns=models)
    for a, b, p in zip(table.model_a, table.model_b, table.p_holm):
        sig.loc[a, b] = sig.loc[b, a] = p
    adj = pd.DataFrame(1 - sp.sign_array(sig, alpha=0.05), index=models, columns=models, dtype=bool)
    theirs = {frozenset(c) for c in plotting._find_maximal_cliques(adj) if len(c) > 1}
    assert ours == theirs and ours  # and there is something to compare
