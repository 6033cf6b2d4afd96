"""Robustness metrics on synthetic result tables and hand-made predictions."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from robustbench_dgsa.analysis import metrics as M
from robustbench_dgsa import store
from robustbench_dgsa.util.errors import UserError


def _rows(model: str, seed: int, cells: dict[tuple[str, int], float], clean: float, dataset: str = "cifar10",
          source: str = "regenerated", created: str = "2026-01-01T00:00:00+00:00") -> list[dict]:
    base = dict(kind="eval", model=model, dataset=dataset, seed=seed, split="test", metric="accuracy", n=100,
                run_id=f"run-{model}-{seed}", created=created)
    out = [dict(base, condition="clean", severity=0, value=clean, source="")]
    out += [dict(base, condition=c, severity=s, value=v, source=source) for (c, s), v in cells.items()]
    return out


def _full_cells(offset: float = 0.0, with_extra: bool = True) -> dict[tuple[str, int], float]:
    # value = 0.9 - 0.1 s + 0.001 i  (i = index of the corruption in the benchmark list)
    cells = {(c, s): 0.9 - 0.1 * s + 0.001 * i + offset
             for i, c in enumerate(M.BENCHMARK_CORRUPTIONS) for s in M.SEVERITIES}
    if with_extra:
        cells.update({(c, s): 0.2 + offset for c in M.EXTRA_CORRUPTIONS for s in M.SEVERITIES})
    return cells


def _df(*row_lists: list[dict]) -> pd.DataFrame:
    return store.normalize(pd.DataFrame([r for rows in row_lists for r in rows]))


def test_corruption_lists():
    assert len(M.BENCHMARK_CORRUPTIONS) == 15 and len(M.EXTRA_CORRUPTIONS) == 4
    assert not set(M.BENCHMARK_CORRUPTIONS) & set(M.EXTRA_CORRUPTIONS)
    assert sorted(c for g in M.CORRUPTION_GROUPS.values() for c in g) == sorted(M.BENCHMARK_CORRUPTIONS)


def test_mca_over_full_75_cells():
    df = _df(_rows("vit", 0, _full_cells(), clean=0.8))
    mca = M.mean_corrupted_accuracy(df).iloc[0]
    # mean over s of (0.9 - 0.1 s) = 0.6; mean over i = 0..14 of 0.001 i = 0.007; extra cells excluded
    assert mca["value"] == pytest.approx(0.607)
    assert mca["complete"] and mca["n_cells"] == 75 and mca["n_expected"] == 75 and mca["missing"] == ""
    summ = M.robustness_summary(df).iloc[0]
    assert summ["mCA"] == pytest.approx(0.607) and summ["mCE"] == pytest.approx(0.393)
    assert summ["extra"] == pytest.approx(0.2)
    assert summ["noise"] == pytest.approx(0.6 + 0.001)  # i = 0, 1, 2
    assert summ["retention"] == pytest.approx(0.607 / 0.8)
    assert math.isnan(summ["mNA"]) and summ["mCA_complete"]


def test_mca_incomplete_is_nan_unless_partial():
    cells = _full_cells(with_extra=False)
    del cells[("fog", 3)]
    df = _df(_rows("vit", 0, cells, clean=0.8))
    strict = M.mean_corrupted_accuracy(df).iloc[0]
    assert math.isnan(strict["value"]) and not strict["complete"] and strict["n_cells"] == 74
    assert strict["missing"] == "fog (3)"
    part = M.mean_corrupted_accuracy(df, partial=True).iloc[0]
    assert part["value"] == pytest.approx(np.mean(list(cells.values()))) and not part["complete"]


def test_format_cells_shortens():
    cells = [(c, s) for c in ("a", "b", "c") for s in M.SEVERITIES] + [("d", 2), ("d", 4)]
    assert M.format_cells(cells) == "a, b, c (all severities); d (2,4)"
    assert M.format_cells(cells, max_items=2) == "a, b and 1 more (all severities); d (2,4)"


def test_retention_and_seed_measures():
    df = _df(_rows("vit", 0, {("fog", 1): 0.6, ("fog", 2): 0.4}, clean=0.8))
    r = M.retention(df).set_index("severity")
    assert r.loc[1, "retention"] == pytest.approx(0.75) and r.loc[2, "retention"] == pytest.approx(0.5)
    one = M.seed_measures(df, "fog:2")
    assert one["value"].iloc[0] == pytest.approx(0.4) and one["complete"].iloc[0]
    fog = M.seed_measures(df, "fog")
    assert math.isnan(fog["value"].iloc[0]) and "fog (3,4,5)" in fog["missing"].iloc[0]
    assert M.seed_measures(df, "fog", partial=True)["value"].iloc[0] == pytest.approx(0.5)
    assert M.seed_measures(df, "clean")["value"].iloc[0] == pytest.approx(0.8)


def test_reference_ce_hand_computed():
    # model errors on gaussian_noise: 0.1..0.5 (sum 1.5); reference errors: 0.2..0.6 (sum 2.0) -> CE = 0.75
    cells_m = {("gaussian_noise", s): 1 - 0.1 * s for s in M.SEVERITIES}
    cells_r = {("gaussian_noise", s): 1 - (0.1 * s + 0.1) for s in M.SEVERITIES}
    df = _df(_rows("dgvit", 0, cells_m, 0.9), _rows("dgvit", 1, cells_m, 0.9), _rows("vit", 0, cells_r, 0.9))
    per, summary = M.reference_ce(df, reference="vit")
    row = per.set_index("model").loc["dgvit"]
    assert row["ce"] == pytest.approx(0.75) and row["err_sum"] == pytest.approx(1.5)
    s = summary.set_index("model")
    assert s.loc["dgvit", "rel_mCE"] == pytest.approx(0.75) and s.loc["vit", "rel_mCE"] == pytest.approx(1.0)
    assert not s.loc["dgvit", "complete"] and s.loc["dgvit", "reference"] == "vit"
    with pytest.raises(UserError):
        M.reference_ce(df, reference="nobody")


def test_latest_evaluation_wins_and_sources_do_not_mix():
    old = _rows("vit", 0, {("fog", 1): 0.5}, 0.8, created="2026-01-01T00:00:00+00:00")
    new = [dict(r, run_id="run-vit-0-again") for r in  # a re-run is another evaluation run
           _rows("vit", 0, {("fog", 1): 0.6}, 0.8, created="2026-02-01T00:00:00+00:00")]
    rows = M.eval_rows(_df(new, old))
    assert rows.loc[rows["condition"] == "fog", "value"].item() == pytest.approx(0.6)
    official = _rows("vit", 0, {("fog", 1): 0.7}, 0.8, source="official")
    with pytest.raises(UserError, match="several sources"):
        M.eval_rows(_df(new, official))
    only = M.eval_rows(_df(new, official), source="official")
    assert only.loc[only["condition"] == "fog", "value"].item() == pytest.approx(0.7)
    assert (only["condition"] == "clean").sum() == 1


def test_source_warning_between_models():
    df = _df(_rows("vit", 0, {("fog", 1): 0.5}, 0.8), _rows("dgvit", 0, {("fog", 1): 0.5}, 0.8, source="official"))
    assert any("different sources" in w for w in M.source_warnings(M.eval_rows(df)))


def test_mean_noisy_accuracy_text():
    cells = {(t, s): 0.8 - 0.05 * s for t in ("char_substitute", "word_dropout") for s in M.SEVERITIES}
    df = _df(_rows("dgt", 0, cells, 0.85, dataset="imdb", source="on-the-fly"))
    mna = M.mean_noisy_accuracy(df).iloc[0]
    assert mna["value"] == pytest.approx(0.65) and mna["complete"] and mna["n_expected"] == 10
    summ = M.robustness_summary(df).iloc[0]
    assert summ["mNA"] == pytest.approx(0.65) and math.isnan(summ["mCA"])
    assert M.condition_kind("word_dropout") == "text" and M.condition_kind("fog") == "benchmark"
    assert M.condition_kind("spatter") == "extra"
    cells_df = M.benchmark_cells(df)
    assert set(cells_df["kind_of_condition"]) == {"text"} and len(cells_df) == 10


# ---------------------------------------------------------------------------------- per-example metrics
def _preds(run_id: str, condition: str, severity: int, labels: list[int], preds: list[int]) -> pd.DataFrame:
    return pd.DataFrame(dict(run_id=run_id, condition=condition, severity=severity, index=range(len(labels)),
                             label=labels, pred=preds))


def test_flip_rate_hand_made():
    labels = [0, 1, 2, 3]
    p = pd.concat([_preds("r1", "clean", 0, labels, [0, 1, 2, 3]),
                   _preds("r1", "fog", 1, labels, [0, 1, 0, 0]),
                   _preds("r1", "fog", 5, labels, [1, 1, 1, 1])], ignore_index=True)
    results = _df(_rows("vit", 0, {}, 1.0))
    results["run_id"] = "r1"
    fr = M.flip_rate(p, results).set_index("severity")
    assert fr.loc[1, "flip_rate"] == pytest.approx(0.5) and fr.loc[1, "n"] == 4
    assert fr.loc[5, "flip_rate"] == pytest.approx(0.75)


def test_cohen_kappa_hand_made():
    same = M.cohen_kappa_correctness([1, 0, 1, 1, 0, 0], [1, 0, 1, 1, 0, 0])
    assert same["kappa"] == pytest.approx(1.0)
    # independent by construction: A right on the first half, B right on every other example
    a = [1, 1, 1, 1, 0, 0, 0, 0]
    b = [1, 0, 1, 0, 1, 0, 1, 0]
    ind = M.cohen_kappa_correctness(a, b)
    assert ind["c_obs"] == pytest.approx(0.5) and ind["c_exp"] == pytest.approx(0.5)
    assert ind["kappa"] == pytest.approx(0.0)
    # hand: c_obs = 3/4, p_a = 3/4, p_b = 1/2 -> c_exp = 3/8 + 1/8 = 1/2 -> kappa = (3/4 - 1/2)/(1/2) = 0.5
    assert M.cohen_kappa_correctness([1, 1, 1, 0], [1, 1, 0, 0])["kappa"] == pytest.approx(0.5)
    # large random independent patterns: kappa close to 0
    rng = np.random.default_rng(0)
    k = M.cohen_kappa_correctness(rng.random(20000) < 0.7, rng.random(20000) < 0.6)["kappa"]
    assert abs(k) < 0.03
    assert math.isnan(M.cohen_kappa_correctness([1, 1], [1, 1])["kappa"])


def test_error_consistency_between_models():
    labels = [0, 1, 0, 1]
    p = pd.concat([_preds("ra", "clean", 0, labels, [0, 1, 1, 1]),   # A correct: 1 1 0 1
                   _preds("rb", "clean", 0, labels, [0, 1, 1, 0])],  # B correct: 1 1 0 0
                  ignore_index=True)
    results = _df(_rows("vit", 0, {}, 0.75), _rows("dgvit", 0, {}, 0.5))
    results["run_id"] = np.where(results["model"] == "vit", "ra", "rb")
    ec = M.error_consistency(p, "vit", "dgvit", results=results)
    assert len(ec) == 1
    assert ec["kappa"].iloc[0] == pytest.approx(0.5) and ec["n"].iloc[0] == 4
    wrong = p.copy()
    wrong.loc[(wrong["run_id"] == "rb") & (wrong["index"] == 0), "label"] = 1
    with pytest.raises(UserError, match="disagree on labels"):
        M.error_consistency(wrong, "vit", "dgvit", results=results)
