"""Robustness metrics computed from the results store (docs/METHODS.md, Metrics). Pure functions: DataFrame in,
DataFrame out.

Inputs are the long table of :func:`robustbench_dgsa.store.load_results` (evaluation rows: ``kind="eval"``,
``condition="clean"`` with severity 0, or a corruption / text-noise name with severity 1..5) and, for the
prediction-based metrics, :func:`robustbench_dgsa.store.load_predictions`.

Definitions (all on accuracy in [0, 1]):

* clean accuracy — the ``clean`` row of a (model, dataset, seed).
* cell accuracy — accuracy on one (corruption, severity) cell.
* **mCA** — unweighted mean over the 15 benchmark corruptions × 5 severities = 75 cells.
  *Completeness policy*: by default (``partial=False``) an mCA is reported only when all 75 cells are present;
  otherwise the value is NaN, ``n_cells``/``n_expected`` count the cells and ``missing`` names the absent ones
  (long lists shortened to their first names and a count). With ``partial=True`` the mean
  is taken over the cells present and ``complete`` is False — such a number is not comparable with a full mCA
  and must be shown with its flag (``n_cells``/``n_expected``).
* **mCE (unnormalised)** = 1 − mCA.
* the 4 extra corruptions (speckle_noise, gaussian_blur, spatter, saturate) never enter mCA; their mean is
  reported separately (``extra``).
* group means over Hendrycks & Dietterich's groups (noise, blur, weather, digital), 5 severities each.
* **mean noisy accuracy** (mNA, text) — mean over the text-noise types present in the dataset × severities 1..5,
  with the same completeness policy.
* **CE relative to a reference model** — ``CE_c = Σ_s err_model(c, s) / Σ_s err_ref(c, s)`` on seed-averaged
  errors, and ``rel_mCE`` = mean of CE_c over the benchmark corruptions. This is Hendrycks & Dietterich's mCE
  formula with a *user-chosen* reference model instead of AlexNet; it is never called "AlexNet mCE". (It is
  also not their "Relative mCE", which subtracts clean error first.)
* **ImageNet-C mCE** (:func:`imagenet_c_ce`, :func:`alexnet_mce`) — the standard one: ``CE_c = Σ_s E_model(c, s) /
  Σ_s E_AlexNet(c, s)`` with AlexNet's *published* top-1 errors (package data ``alexnet_imagenet_c.csv``, from
  Hendrycks & Dietterich's repository; its header cites the commit), and ``mCE`` = 100 × mean of CE_c over the 15
  benchmark corruptions, in percent; CE_c of the 4 extra corruptions is given beside it, never in the mean. Only
  meaningful on ImageNet-C (AlexNet's errors are ImageNet's); a model with AlexNet's errors has mCE 100.
* **retention** = corrupted accuracy / clean accuracy of the same (model, dataset, seed).
* **flip rate** (clean → corrupted) — fraction of examples whose predicted class changes between the clean
  and the corrupted version of the same example, same model and seed.
* **error consistency** (Geirhos et al. 2020) — Cohen's κ over per-example correctness of two models:
  ``c_obs`` = fraction of examples where both are right or both wrong, ``c_exp = p_a p_b + (1 − p_a)(1 − p_b)``
  with ``p`` the accuracies, ``κ = (c_obs − c_exp) / (1 − c_exp)``.

Row selection (:func:`eval_rows`): rows of one metric and split; repeated evaluations of the same cell keep the
latest (by ``created``). Corrupted cells of one (model, dataset, seed) evaluated on several data *sources*
(e.g. "official" and "regenerated") are not mixed: that raises a :class:`UserError` unless ``source`` is given.
"""
from __future__ import annotations

from importlib import resources
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from corruptions.registry import BENCHMARK as _REG_BENCHMARK
from corruptions.registry import EXTRA as _REG_EXTRA
from corruptions.registry import GROUP_NAMES as _REG_GROUP_NAMES
from corruptions.registry import GROUPS as _REG_GROUPS
from robustbench_dgsa.store import CORRUPTION_SOURCES
from robustbench_dgsa.util.errors import UserError

CLEAN = "clean"
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)

# The corruption registry is the one source of the names and groups (corruptions is a dependency of the suite).
BENCHMARK_CORRUPTIONS: tuple[str, ...] = tuple(_REG_BENCHMARK)
EXTRA_CORRUPTIONS: tuple[str, ...] = tuple(_REG_EXTRA)
IMAGE_CORRUPTIONS: tuple[str, ...] = BENCHMARK_CORRUPTIONS + EXTRA_CORRUPTIONS

#: Hendrycks & Dietterich (2019) groups of the 15 benchmark corruptions (the registry's groups, benchmark members)
CORRUPTION_GROUPS: dict[str, tuple[str, ...]] = {
    g: tuple(c for c in _REG_GROUPS[g] if c in BENCHMARK_CORRUPTIONS) for g in _REG_GROUP_NAMES}

_RUN_KEYS = ["model", "dataset", "seed"]
_CELL_KEYS = ["model", "dataset", "seed", "condition", "severity"]


def condition_kind(condition: str) -> str:
    """"clean", "benchmark" (one of the 15), "extra" (one of the 4 extra image corruptions) or "text"."""
    if condition == CLEAN:
        return "clean"
    if condition in BENCHMARK_CORRUPTIONS:
        return "benchmark"
    if condition in EXTRA_CORRUPTIONS:
        return "extra"
    return "text"


# --------------------------------------------------------------------------------------------- row selection
def eval_rows(df: pd.DataFrame, dataset: str | None = None, metric: str = "accuracy",
              split: str | None = "test", source: str | None = None,
              models: Sequence[str] | None = None, precision: str | None = None) -> pd.DataFrame:
    """Evaluation rows of one metric/split, de-duplicated: of a cell measured by several evaluation runs, the latest
    run (``created``) wins; a cell with different values inside one run, or from two runs written in the same
    second, is a UserError naming the cell (:func:`check_duplicate_cells`), never averaged or picked silently.

    ``source`` restricts corrupted cells to one data source (clean rows are kept whatever their source); it must
    be one of :data:`~robustbench_dgsa.store.CORRUPTION_SOURCES`.
    ``precision`` ("fp32" / "bf16") keeps the rows computed in it; without it, one model's rows on one dataset in
    two precisions are a UserError (:func:`check_one_precision`): fp32 and bf16 results are never pooled silently.
    Returns columns model, dataset, seed, condition, severity, value, n, source, run_id, precision,
    kind_of_condition.
    A frame that already is such a selection (it has ``kind_of_condition``) is only filtered by dataset and
    models, so callers can select once and pass the result to the other functions of this module.
    """
    if "kind_of_condition" in df.columns:
        out = df
        if dataset is not None:
            out = out[out["dataset"] == dataset]
        if models is not None:
            out = out[out["model"].isin(list(models))]
        if precision is not None and "precision" in out.columns:
            out = out[out["precision"] == precision]
        return out.reset_index(drop=True)
    if source is not None and source not in CORRUPTION_SOURCES:
        raise UserError(f"unknown corrupted-data source {source!r} (valid: {', '.join(CORRUPTION_SOURCES)})")
    ev = df[df["kind"] == "eval"]
    if metric:
        ev = ev[ev["metric"] == metric]
    if split:
        ev = ev[ev["split"] == split]
    if dataset is not None:
        ev = ev[ev["dataset"] == dataset]
    if models is not None:
        ev = ev[ev["model"].isin(list(models))]
    if source is not None:
        ev = ev[(ev["condition"] == CLEAN) | (ev["source"] == source)]
    if "precision" not in ev.columns:                       # a frame built by hand: rows before precision existed
        ev = ev.assign(precision="fp32")
    if precision is not None:
        ev = ev[ev["precision"] == precision]
    check_one_precision(ev)
    ev = ev.sort_values("created", kind="stable") if "created" in ev.columns else ev
    check_duplicate_cells(ev)
    is_clean = ev["condition"] == CLEAN
    clean = ev[is_clean].drop_duplicates(_RUN_KEYS, keep="last")
    cor = ev[~is_clean].drop_duplicates(_CELL_KEYS + ["source"], keep="last")
    clash = cor[cor.duplicated(_CELL_KEYS, keep=False)]
    if len(clash):
        sources = sorted(set(clash["source"]))
        first = clash.iloc[0]
        raise UserError(
            f"corrupted results from several sources ({', '.join(map(repr, sources))}) for the same cells, "
            f"e.g. {first['model']}/{first['dataset']} seed {first['seed']} {first['condition']}@{first['severity']}; "
            f"choose one source (source=NAME)", options="source")
    out = pd.concat([clean, cor], ignore_index=True)
    out = out[["model", "dataset", "seed", "condition", "severity", "value", "n", "source", "run_id",
               "precision"]].copy()
    for c in ("model", "dataset", "condition", "source", "run_id", "precision"):  # objects: faster small frames
        out[c] = out[c].astype(object)
    out["kind_of_condition"] = [condition_kind(c) for c in out["condition"]]
    return out.sort_values(_CELL_KEYS, kind="stable").reset_index(drop=True)


def check_one_precision(rows: pd.DataFrame) -> None:
    """A UserError naming the first model and dataset whose rows were computed in more than one precision (fp32
    and bf16 runs of one model are different measurements: analyse them apart, e.g. ``eval_rows(precision=...)``,
    or keep them in separate stores)."""
    if "precision" not in rows.columns or rows.empty:
        return
    mixed = rows.groupby(["model", "dataset"], sort=True)["precision"].agg(lambda s: sorted(set(s)))
    for (model, dataset), found in mixed.items():
        if len(found) > 1:
            raise UserError(f"rows of {model} on {dataset} were computed in {' and '.join(found)}; results of "
                            "different precisions are not pooled: analyse each precision apart (keep their runs "
                            "in separate stores, or select one precision)")


def check_duplicate_cells(ev: pd.DataFrame) -> None:
    """A UserError naming the first cell (model, dataset, seed, condition, severity, and metric, split and source
    where the frame has them) that has different values in one evaluation run, or in two runs written in the
    same second (which is the latest is unknown)."""
    keys = _CELL_KEYS + [c for c in ("metric", "split", "source") if c in ev.columns]
    for tie in ("run_id", "created"):
        if tie not in ev.columns:
            continue
        dup = ev[ev.duplicated(keys + [tie], keep=False)]
        for key, g in dup.groupby(keys + [tie], sort=False):
            values = sorted(set(float(v) for v in g["value"]), key=str)
            if len(values) < 2:
                continue
            k = dict(zip(keys + [tie], key))
            where = (f"in run {k['run_id']}" if tie == "run_id" else
                     f"in runs {', '.join(sorted(set(g['run_id'])))} written in the same second ({k['created']})")
            what = " ".join(str(k[c]) for c in ("metric", "split") if c in k)
            raise UserError(f"cell {k['model']}/{k['dataset']} seed {k['seed']} {k['condition']}@{k['severity']}"
                            f"{' ' + what if what else ''} ({k.get('source') or 'no source'}) has {len(values)} "
                            f"different values {where}: {', '.join(map(repr, values[:3]))}; remove the wrong rows "
                            "(a cell is measured once per evaluation)")


def source_warnings(rows: pd.DataFrame) -> list[str]:
    """Warn when models of one dataset were evaluated on corrupted data from different sources."""
    out = []
    cor = rows[rows["condition"] != CLEAN]
    for ds, g in cor.groupby("dataset", sort=True):
        per_model = g.groupby("model")["source"].agg(lambda s: ",".join(sorted(set(s))))
        if per_model.nunique() > 1:
            desc = "; ".join(f"{m}: {s or '(none)'}" for m, s in per_model.items())
            out.append(f"{ds}: corrupted data come from different sources per model ({desc}); "
                       f"comparisons across them mix datasets")
    return out


def clean_accuracy(df: pd.DataFrame, dataset: str | None = None, **select) -> pd.DataFrame:
    """Clean accuracy per (model, dataset, seed): columns model, dataset, seed, value."""
    rows = eval_rows(df, dataset=dataset, **select)
    return rows[rows["condition"] == CLEAN][_RUN_KEYS + ["value"]].reset_index(drop=True)


def cell_accuracy(df: pd.DataFrame, dataset: str | None = None, kinds: Iterable[str] | None = None,
                  **select) -> pd.DataFrame:
    """Accuracy per (model, dataset, seed, condition, severity) for non-clean conditions.

    ``kinds`` keeps only some condition kinds ("benchmark", "extra", "text"; default all).
    """
    rows = eval_rows(df, dataset=dataset, **select)
    rows = rows[rows["condition"] != CLEAN]
    if kinds is not None:
        rows = rows[rows["kind_of_condition"].isin(list(kinds))]
    return rows[_CELL_KEYS + ["value", "n", "source", "kind_of_condition"]].reset_index(drop=True)


def benchmark_cells(df: pd.DataFrame, dataset: str | None = None, **select) -> pd.DataFrame:
    """The cells a dataset's robustness is judged on: the 75 benchmark image cells when the dataset has any,
    otherwise its text-noise cells."""
    cells = cell_accuracy(df, dataset=dataset, **select)
    out = []
    for _, g in cells.groupby("dataset", sort=True):
        bench = g[g["kind_of_condition"] == "benchmark"]
        out.append(bench if len(bench) else g[g["kind_of_condition"] == "text"])
    if not out:
        return cells.iloc[0:0]
    return pd.concat(out, ignore_index=True)


# ---------------------------------------------------------------------------------------------- aggregates
def format_cells(cells: Iterable[tuple[str, int]], max_items: int | None = None) -> str:
    """Compact description of (condition, severity) cells, e.g. ``"fog, snow (all severities); zoom_blur (3,4)"``.

    ``max_items`` shortens long lists to their first names and a count.
    """
    by: dict[str, list[int]] = {}
    for c, s in cells:
        by.setdefault(c, []).append(int(s))

    def _short(names: list[str]) -> str:
        if max_items is not None and len(names) > max_items:
            return ", ".join(names[:max_items]) + f" and {len(names) - max_items} more"
        return ", ".join(names)

    whole = sorted(c for c, sev in by.items() if sorted(sev) == list(SEVERITIES))
    some = sorted(c for c in by if c not in whole)
    parts = []
    if whole:
        parts.append(f"{_short(whole)} (all severities)")
    if some:
        parts.append(_short([f"{c} ({','.join(map(str, sorted(by[c])))})" for c in some]))
    return "; ".join(parts)


def _aggregate(rows: pd.DataFrame, expected_by_dataset: dict[str, list[tuple[str, int]]], label: str,
               partial: bool) -> pd.DataFrame:
    """Mean over expected cells per (model, dataset, seed) with completeness bookkeeping."""
    records = []
    for (model, ds, seed), g in rows.groupby(_RUN_KEYS, sort=True):
        expected = expected_by_dataset.get(ds, [])
        cells = {(c, int(s)): v for c, s, v in zip(g["condition"], g["severity"], g["value"]) if c != CLEAN}
        present = [cells[k] for k in expected if k in cells]
        missing = [k for k in expected if k not in cells]
        complete = bool(expected) and not missing
        value = float(np.mean(present)) if present and (complete or partial) else float("nan")
        records.append(dict(model=model, dataset=ds, seed=int(seed), condition=label, value=value,
                            n_cells=len(present), n_expected=len(expected), complete=complete,
                            missing=format_cells(missing, max_items=8)))
    cols = ["model", "dataset", "seed", "condition", "value", "n_cells", "n_expected", "complete", "missing"]
    return pd.DataFrame(records, columns=cols)


def _expected(conditions: Iterable[str]) -> list[tuple[str, int]]:
    return [(c, s) for c in conditions for s in SEVERITIES]


def _text_conditions(rows: pd.DataFrame) -> dict[str, list[str]]:
    text = rows[rows["kind_of_condition"] == "text"]
    return {ds: sorted(set(g["condition"])) for ds, g in text.groupby("dataset")}


def mean_corrupted_accuracy(df: pd.DataFrame, dataset: str | None = None,
                            corruptions: Sequence[str] | None = None, partial: bool = False,
                            label: str = "mCA", **select) -> pd.DataFrame:
    """mCA per (model, dataset, seed) over ``corruptions`` (default: the 15 benchmark ones) × severities 1..5.

    Columns: model, dataset, seed, condition (=label), value, n_cells, n_expected, complete, missing.
    Incomplete runs get NaN unless ``partial`` (see the module docstring).
    """
    rows = eval_rows(df, dataset=dataset, **select)
    corruptions = tuple(corruptions) if corruptions is not None else BENCHMARK_CORRUPTIONS
    expected = {ds: _expected(corruptions) for ds in set(rows["dataset"])}
    return _aggregate(rows, expected, label, partial)


def mean_noisy_accuracy(df: pd.DataFrame, dataset: str | None = None, partial: bool = False,
                        **select) -> pd.DataFrame:
    """Text: mean accuracy over the noise types present in the dataset × severities 1..5 ("mNA")."""
    rows = eval_rows(df, dataset=dataset, **select)
    expected = {ds: _expected(c) for ds, c in _text_conditions(rows).items()}
    return _aggregate(rows, expected, "mNA", partial)


def severity_accuracy(df: pd.DataFrame, severity: int, dataset: str | None = None, partial: bool = False,
                      **select) -> pd.DataFrame:
    """Mean accuracy at one severity per (model, dataset, seed): over the 15 benchmark corruptions on a dataset
    with benchmark cells, else over its text-noise types; label ``"severity s"``, completeness as mCA's."""
    rows = eval_rows(df, dataset=dataset, **select)
    text = _text_conditions(rows)
    bench = set(rows.loc[rows["kind_of_condition"] == "benchmark", "dataset"])
    expected = {ds: [(c, int(severity)) for c in (BENCHMARK_CORRUPTIONS if ds in bench else text.get(ds, []))]
                for ds in set(rows["dataset"])}
    return _aggregate(rows, expected, f"severity {int(severity)}", partial)


def seed_measures(df: pd.DataFrame, condition: str, dataset: str | None = None, partial: bool = False,
                  **select) -> pd.DataFrame:
    """One number per (model, dataset, seed) for a named measure — the input of the seed statistics.

    ``condition``: "clean"; "mCA" (15 benchmark corruptions × 5); "mCE" (= 1 − mCA); "mNA" (text noise);
    "extra" (the 4 extra corruptions × 5); a group name (noise, blur, weather, digital); a condition name
    (mean over severities 1..5); or "name:severity" for a single cell.
    Columns as :func:`mean_corrupted_accuracy` (clean rows have n_cells = n_expected = 0, complete True).
    """
    key = condition.lower()
    if key == CLEAN:
        rows = eval_rows(df, dataset=dataset, **select)
        c = rows[rows["condition"] == CLEAN]
        out = c[_RUN_KEYS + ["value"]].copy()
        out.insert(3, "condition", CLEAN)
        out["n_cells"], out["n_expected"], out["complete"], out["missing"] = 0, 0, True, ""
        return out.reset_index(drop=True)
    if key in ("mca", "mce"):
        out = mean_corrupted_accuracy(df, dataset=dataset, partial=partial, **select)
        if key == "mce":
            out["value"] = 1.0 - out["value"]
            out["condition"] = "mCE"
        return out
    if key == "mna":
        return mean_noisy_accuracy(df, dataset=dataset, partial=partial, **select)
    if key == "extra":
        return mean_corrupted_accuracy(df, dataset=dataset, corruptions=EXTRA_CORRUPTIONS, partial=partial,
                                       label="extra", **select)
    if key in CORRUPTION_GROUPS:
        return mean_corrupted_accuracy(df, dataset=dataset, corruptions=CORRUPTION_GROUPS[key],
                                       partial=partial, label=key, **select)
    name, _, sev = condition.partition(":")
    rows = eval_rows(df, dataset=dataset, **select)
    if sev:
        try:
            s = int(sev)
        except ValueError:
            raise UserError(f"bad severity in condition {condition!r} (expected NAME:1..5)") from None
        expected = {ds: [(name, s)] for ds in set(rows["dataset"])}
    else:
        expected = {ds: _expected([name]) for ds in set(rows["dataset"])}
    return _aggregate(rows, expected, condition, partial)


def retention(df: pd.DataFrame, dataset: str | None = None, **select) -> pd.DataFrame:
    """Per cell: corrupted accuracy, clean accuracy of the same (model, dataset, seed), and their ratio."""
    df = eval_rows(df, dataset=dataset, **select)
    cells = cell_accuracy(df)
    clean = clean_accuracy(df).rename(columns={"value": "clean"})
    out = cells.merge(clean, on=_RUN_KEYS, how="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        out["retention"] = np.where(out["clean"] > 0, out["value"] / out["clean"], np.nan)
    return out[_CELL_KEYS + ["value", "clean", "retention"]]


def robustness_summary(df: pd.DataFrame, dataset: str | None = None, partial: bool = False,
                       **select) -> pd.DataFrame:
    """Per (model, dataset, seed): clean, mCA, mCE, mCA bookkeeping, extra, group means, mNA, retention.

    Columns: model, dataset, seed, clean, mCA, mCE, mCA_cells, mCA_complete, mCA_missing, extra, noise, blur,
    weather, digital, mNA, mNA_cells, mNA_complete, retention (= mCA / clean, or mNA / clean for text).
    Image columns are NaN on text datasets and vice versa.
    """
    rows = eval_rows(df, dataset=dataset, **select)
    df, select = rows, {}
    base = rows[_RUN_KEYS].drop_duplicates().sort_values(_RUN_KEYS).reset_index(drop=True)
    clean = seed_measures(df, CLEAN, dataset=dataset, **select)[_RUN_KEYS + ["value"]]
    out = base.merge(clean.rename(columns={"value": "clean"}), on=_RUN_KEYS, how="left")
    has_bench = set(rows.loc[rows["kind_of_condition"] == "benchmark", "dataset"])
    has_extra = set(rows.loc[rows["kind_of_condition"] == "extra", "dataset"])
    has_text = set(rows.loc[rows["kind_of_condition"] == "text", "dataset"])

    def _merge(frame: pd.DataFrame, datasets: set[str], name: str, extra_cols: dict[str, str]) -> None:
        nonlocal out
        frame = frame[frame["dataset"].isin(datasets)]
        cols = {"value": name, **extra_cols}
        out = out.merge(frame[_RUN_KEYS + list(cols)].rename(columns=cols), on=_RUN_KEYS, how="left")

    mca = mean_corrupted_accuracy(df, dataset=dataset, partial=partial, **select)
    _merge(mca, has_bench, "mCA", {"n_cells": "mCA_cells", "complete": "mCA_complete", "missing": "mCA_missing"})
    out["mCE"] = 1.0 - out["mCA"]
    extra = mean_corrupted_accuracy(df, dataset=dataset, corruptions=EXTRA_CORRUPTIONS, partial=partial,
                                    label="extra", **select)
    _merge(extra, has_extra, "extra", {})
    for group, members in CORRUPTION_GROUPS.items():
        g = mean_corrupted_accuracy(df, dataset=dataset, corruptions=members, partial=partial, label=group,
                                    **select)
        _merge(g, has_bench, group, {})
    mna = mean_noisy_accuracy(df, dataset=dataset, partial=partial, **select)
    _merge(mna, has_text, "mNA", {"n_cells": "mNA_cells", "complete": "mNA_complete"})
    robust = out["mCA"].where(out["mCA"].notna(), out["mNA"])
    with np.errstate(divide="ignore", invalid="ignore"):
        out["retention"] = np.where(out["clean"] > 0, robust / out["clean"], np.nan)
    cols = ["model", "dataset", "seed", "clean", "mCA", "mCE", "mCA_cells", "mCA_complete", "mCA_missing",
            "extra", *CORRUPTION_GROUPS, "mNA", "mNA_cells", "mNA_complete", "retention"]
    out = out[cols]
    for c in ("mCA_cells", "mNA_cells"):
        out[c] = out[c].fillna(0).astype("int64")
    for c in ("mCA_complete", "mNA_complete"):
        out[c] = out[c].astype("boolean").fillna(False).astype(bool)
    out["mCA_missing"] = out["mCA_missing"].fillna("")
    return out


def reference_ce(df: pd.DataFrame, reference: str, dataset: str | None = None,
                 corruptions: Sequence[str] | None = None, **select) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Corruption error relative to a reference model, on seed-averaged errors (err = 1 − accuracy).

    Returns ``(per_corruption, summary)``. ``per_corruption``: model, dataset, corruption, n_severities,
    err_sum, ref_err_sum, ce (``Σ_s err_model / Σ_s err_ref`` over the severities both models have).
    ``summary``: model, dataset, reference, rel_mCE (mean CE over the corruptions), n_corruptions,
    n_expected, complete (all corruptions with all 5 severities for both models).
    """
    corruptions = tuple(corruptions) if corruptions is not None else BENCHMARK_CORRUPTIONS
    cells = cell_accuracy(df, dataset=dataset, **select)
    cells = cells[cells["condition"].isin(corruptions)]
    if reference not in set(cells["model"]):
        raise UserError(f"reference model {reference!r} has no corrupted results"
                        + (f" on {dataset}" if dataset else ""))
    err = (cells.assign(err=1.0 - cells["value"])
           .groupby(["model", "dataset", "condition", "severity"], as_index=False)["err"].mean())
    ref = err[err["model"] == reference].rename(columns={"err": "ref_err"}).drop(columns="model")
    both = err.merge(ref, on=["dataset", "condition", "severity"], how="inner")
    per = (both.groupby(["model", "dataset", "condition"], as_index=False)
           .agg(n_severities=("severity", "nunique"), err_sum=("err", "sum"), ref_err_sum=("ref_err", "sum")))
    with np.errstate(divide="ignore", invalid="ignore"):
        per["ce"] = np.where(per["ref_err_sum"] > 0, per["err_sum"] / per["ref_err_sum"], np.nan)
    per = per.rename(columns={"condition": "corruption"})
    recs = []
    for (model, ds), g in per.groupby(["model", "dataset"], sort=True):
        full = g[g["n_severities"] == len(SEVERITIES)]
        recs.append(dict(model=model, dataset=ds, reference=reference, rel_mCE=float(g["ce"].mean()),
                         n_corruptions=int(g["corruption"].nunique()), n_expected=len(corruptions),
                         complete=len(full) == len(corruptions)))
    summary = pd.DataFrame(recs, columns=["model", "dataset", "reference", "rel_mCE", "n_corruptions",
                                          "n_expected", "complete"])
    return per, summary


ALEXNET_CSV = "alexnet_imagenet_c.csv"


def alexnet_errors() -> pd.DataFrame:
    """AlexNet's published ImageNet-C top-1 errors (fractions): index corruption (15 benchmark, then 4 extra),
    columns severities 1..5 and ``average`` (see the CSV's header for the source)."""
    with resources.files("robustbench_dgsa.analysis").joinpath(ALEXNET_CSV).open("r", encoding="utf-8") as f:
        table = pd.read_csv(f, comment="#", index_col="corruption")
    table.columns = [int(c.split("_")[1]) if c.startswith("severity_") else c for c in table.columns]
    return table


def imagenet_c_ce(cells: pd.DataFrame, partial: bool = False) -> tuple[pd.DataFrame, dict]:
    """The ImageNet-C corruption errors of one model from its cell accuracies (columns ``condition``,
    ``severity`` and ``accuracy`` or ``value``; other conditions are ignored).

    Returns ``(per_corruption, summary)``. ``per_corruption``: corruption, kind (benchmark / extra), n_severities,
    err_sum, alexnet_err_sum, ce (in %, ``100 Σ_s err / Σ_s err_AlexNet`` over the severities present).
    ``summary``: ``mCE`` (%, mean CE over the 15 benchmark corruptions; NaN unless all 15 x 5 cells are there
    or ``partial``), ``mCA`` (mean accuracy of the benchmark cells present), ``n_corruptions`` (benchmark ones
    with any cell), ``complete``, ``missing`` and ``extra_ce`` ({corruption: CE} of the extra ones present).
    """
    ref = alexnet_errors()
    acc = cells["accuracy"] if "accuracy" in cells.columns else cells["value"]
    frame = pd.DataFrame({"condition": cells["condition"].astype(str), "severity": cells["severity"].astype(int),
                          "accuracy": acc.astype(float)})
    frame = frame[frame["condition"].isin(ref.index) & frame["severity"].isin(SEVERITIES)]
    recs = []
    for c, g in frame.groupby("condition", sort=False):
        sevs = sorted(set(g["severity"]))
        err = float((1.0 - g.groupby("severity")["accuracy"].mean()).sum())
        ref_err = float(sum(ref.loc[c, s] for s in sevs))
        recs.append(dict(corruption=c, kind=condition_kind(c), n_severities=len(sevs), err_sum=err,
                         alexnet_err_sum=ref_err, ce=100.0 * err / ref_err))
    per = pd.DataFrame(recs, columns=["corruption", "kind", "n_severities", "err_sum", "alexnet_err_sum", "ce"])
    order = {c: i for i, c in enumerate(ref.index)}
    per = per.sort_values("corruption", key=lambda col: col.map(order)).reset_index(drop=True)
    bench = per[per["kind"] == "benchmark"]
    missing = [(c, s) for c in BENCHMARK_CORRUPTIONS for s in SEVERITIES
               if not ((frame["condition"] == c) & (frame["severity"] == s)).any()]
    complete = not missing
    bench_cells = frame[frame["condition"].isin(BENCHMARK_CORRUPTIONS)]
    summary = {"mCE": float(bench["ce"].mean()) if len(bench) and (complete or partial) else float("nan"),
               "mCA": float(bench_cells["accuracy"].mean()) if len(bench_cells) else float("nan"),
               "n_corruptions": int(len(bench)), "complete": complete, "missing": format_cells(missing, 8),
               "extra_ce": {r.corruption: float(r.ce) for r in per[per["kind"] == "extra"].itertuples()}}
    return per, summary


def alexnet_mce(df: pd.DataFrame, dataset: str | None = None, partial: bool = False, **select) -> pd.DataFrame:
    """ImageNet-C mCE (AlexNet-normalised, %) per (model, dataset, seed) of the store rows, beside mCA.

    Columns: model, dataset, seed, mCE, mCA, n_corruptions, complete, missing. Use it on ImageNet-C results only
    (AlexNet's published errors are ImageNet's; see :func:`imagenet_c_ce`).
    """
    cells = cell_accuracy(df, dataset=dataset, kinds=("benchmark", "extra"), **select)
    recs = []
    for (model, ds, seed), g in cells.groupby(_RUN_KEYS, sort=True):
        _, summ = imagenet_c_ce(g, partial=partial)
        recs.append(dict(model=model, dataset=ds, seed=int(seed), mCE=summ["mCE"], mCA=summ["mCA"],
                         n_corruptions=summ["n_corruptions"], complete=summ["complete"], missing=summ["missing"]))
    return pd.DataFrame(recs, columns=["model", "dataset", "seed", "mCE", "mCA", "n_corruptions", "complete",
                                       "missing"])


# ------------------------------------------------------------------------------------ per-example metrics
def attach_run_info(preds: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """Add model, dataset and seed to predictions by joining on run_id (predictions of unknown runs drop)."""
    info = results[["run_id", "model", "dataset", "seed"]].drop_duplicates("run_id")
    keep = [c for c in preds.columns if c not in ("model", "dataset", "seed")]
    return preds[keep].merge(info, on="run_id", how="inner")


def _dedupe_preds(p: pd.DataFrame) -> pd.DataFrame:
    return p.drop_duplicates(["model", "dataset", "seed", "condition", "severity", "index"], keep="last")


def flip_rate(preds: pd.DataFrame, results: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fraction of examples whose prediction changes from clean to corrupted, per (model, dataset, seed,
    condition, severity). ``preds`` must carry model/dataset/seed, or pass ``results`` to attach them.

    Columns: model, dataset, seed, condition, severity, n (examples matched by index), flips, flip_rate.
    """
    if results is not None:
        preds = attach_run_info(preds, results)
    p = _dedupe_preds(preds)
    key = ["model", "dataset", "seed", "index"]
    clean = p[p["condition"] == CLEAN][key + ["label", "pred"]].rename(
        columns={"label": "label_clean", "pred": "pred_clean"})
    cor = p[p["condition"] != CLEAN]
    m = cor.merge(clean, on=key, how="inner")
    if len(m) and (m["label"] != m["label_clean"]).any():
        bad = m[m["label"] != m["label_clean"]].iloc[0]
        raise UserError(f"clean and corrupted predictions disagree on labels ({bad['model']} seed {bad['seed']}, "
                        f"{bad['condition']}@{bad['severity']}, index {bad['index']}): different example order?")
    m = m.assign(flip=(m["pred"] != m["pred_clean"]).astype(int))
    out = (m.groupby(["model", "dataset", "seed", "condition", "severity"], as_index=False)
           .agg(n=("flip", "size"), flips=("flip", "sum")))
    out["flip_rate"] = out["flips"] / out["n"]
    return out


def cohen_kappa_correctness(correct_a: Sequence[bool] | np.ndarray,
                            correct_b: Sequence[bool] | np.ndarray) -> dict[str, float]:
    """Error consistency: Cohen's κ over per-example correctness (Geirhos et al. 2020).

    Returns c_obs, c_exp, kappa, acc_a, acc_b, n. κ is NaN when c_exp = 1 (both models always right or both
    always wrong: agreement is certain and κ undefined).
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError("correctness vectors differ in length")
    n = a.size
    if n == 0:
        return dict(n=0, acc_a=np.nan, acc_b=np.nan, c_obs=np.nan, c_exp=np.nan, kappa=np.nan)
    pa, pb = a.mean(), b.mean()
    c_obs = float(np.mean(a == b))
    c_exp = float(pa * pb + (1 - pa) * (1 - pb))
    kappa = (c_obs - c_exp) / (1 - c_exp) if c_exp < 1 else float("nan")
    return dict(n=n, acc_a=float(pa), acc_b=float(pb), c_obs=c_obs, c_exp=c_exp, kappa=float(kappa))


def error_consistency(preds: pd.DataFrame, model_a: str, model_b: str, results: pd.DataFrame | None = None,
                      dataset: str | None = None, condition: str | None = None,
                      severity: int | None = None, seeds: str = "all") -> pd.DataFrame:
    """Cohen's κ over per-example correctness between two models, per (dataset, condition, severity, seed pair).

    ``seeds="all"``: every seed of A against every seed of B (a model against itself skips equal seeds);
    ``seeds="matched"``: only equal seed numbers. Examples are matched by ``index``.
    Columns: dataset, condition, severity, model_a, seed_a, model_b, seed_b, n, acc_a, acc_b, c_obs, c_exp, kappa.
    """
    if results is not None:
        preds = attach_run_info(preds, results)
    p = _dedupe_preds(preds)
    if dataset is not None:
        p = p[p["dataset"] == dataset]
    if condition is not None:
        p = p[p["condition"] == condition]
    if severity is not None:
        p = p[p["severity"] == severity]
    p = p.assign(correct=p["pred"] == p["label"])
    recs = []
    cols = ["dataset", "condition", "severity", "model_a", "seed_a", "model_b", "seed_b",
            "n", "acc_a", "acc_b", "c_obs", "c_exp", "kappa"]
    for (ds, cond, sev), g in p.groupby(["dataset", "condition", "severity"], sort=True):
        ga, gb = g[g["model"] == model_a], g[g["model"] == model_b]
        for sa, xa in ga.groupby("seed", sort=True):
            for sb, xb in gb.groupby("seed", sort=True):
                if seeds == "matched" and sa != sb:
                    continue
                if model_a == model_b and sa == sb:
                    continue
                m = xa[["index", "label", "correct"]].merge(xb[["index", "label", "correct"]], on="index",
                                                             suffixes=("_a", "_b"))
                if (m["label_a"] != m["label_b"]).any():
                    raise UserError(f"{model_a} and {model_b} predictions disagree on labels for {ds}/{cond}: "
                                    f"different example order?")
                k = cohen_kappa_correctness(m["correct_a"], m["correct_b"])
                recs.append(dict(dataset=ds, condition=cond, severity=int(sev), model_a=model_a, seed_a=int(sa),
                                 model_b=model_b, seed_b=int(sb), **k))
    return pd.DataFrame(recs, columns=cols)
