"""Statistics between models from the results store (docs/METHODS.md, Statistics): what ``dgsa-bench compare``
shows and the report's significance tables reuse.

:func:`run_compare` takes store rows and returns a :class:`Comparison` (named tables, Holm families, honest
warnings, critical-difference inputs); printing and writing files is the CLI's job.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.analysis import stats
from robustbench_dgsa.models.registry import MODEL_FACTS, model_order, reference_model
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.jsonio import to_jsonable
from robustbench_dgsa.util.lists import split_list


_KEYWORDS = ("clean", "mca", "mce", "mna", "extra", *metrics.CORRUPTION_GROUPS)
CELLS_CAVEAT = ("cell-level tests (Wilcoxon, Friedman) compare conditions of the same trained models: they measure "
                "consistency across conditions, not independent evidence; the seed-level tests are the claim")
_LOWER_IS_BETTER_METRICS = {"loss", "error", "err", "cer", "wer", "nll", "ece"}


@dataclass
class Comparison:
    """Everything ``compare`` shows: named tables, the Holm families, honest warnings, rank-diagram inputs.

    ``cd_diagrams``: (name, average ranks, cliques, note) — cliques are the groups the post-hoc pairwise
    Wilcoxon + Holm did not tell apart (the table beside the diagram), or None when not testable (``note`` says
    why)."""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    families: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    cd_diagrams: list[tuple[str, dict[str, float], list[list[str]] | None, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The tables as lists of records (full float precision), with the info, families and warnings."""
        return {
            "info": self.info,
            "tables": {k: _records(v) for k, v in self.tables.items()},
            "families": self.families,
            "warnings": self.warnings,
        }


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON records at full float precision (every p-value exactly as computed: 5.96e-14 stays
    5.96e-14, not the 6e-14 of ``DataFrame.to_json``'s 15 decimals); missing and non-finite values -> None."""
    rows = df.astype(object).where(df.notna(), None).to_dict(orient="records")
    return to_jsonable(rows, fallback=str, nonfinite="null")


def _labels_for(rows: pd.DataFrame, ds: str, wanted: list[str] | None) -> tuple[list[str], bool]:
    """Measure labels for one dataset; the bool says whether the user named them (strict) or not."""
    r = rows[rows["dataset"] == ds]
    kinds = set(r["kind_of_condition"])
    aggregate = "mCA" if "benchmark" in kinds else ("mNA" if "text" in kinds else None)
    present = sorted(set(r.loc[r["condition"] != metrics.CLEAN, "condition"]))
    if wanted is None:
        return ["clean"] + ([aggregate] if aggregate else []), False
    out: list[str] = []
    for w in wanted:
        key = w.lower()
        if key == "all":
            out += ["clean"] + ([aggregate] if aggregate else [])
            if "extra" in kinds:
                out.append("extra")
            out += present
        elif key == "mca" and aggregate == "mNA":
            out.append("mNA")
        elif key in ("mca", "mce", "mna", "extra") or key in metrics.CORRUPTION_GROUPS:
            out.append({"mca": "mCA", "mce": "mCE", "mna": "mNA"}.get(key, key))
        elif key == "clean":
            out.append("clean")
        elif w.partition(":")[0] in present:
            out.append(w)
        # else: a condition this dataset lacks (run_compare has checked that some dataset has it)
    return list(dict.fromkeys(out)), "all" not in [w.lower() for w in wanted]


@dataclass
class _Setup:
    """What every step of :func:`run_compare` shares: the selected rows and the choices made from them."""
    rows: pd.DataFrame
    select: dict[str, Any]
    datasets: list[str]
    model_list: list[str]
    ds_models: dict[str, list[str]]
    refs: dict[str, str]
    n_seeds: dict[str, int]
    reference: str
    higher_better: bool
    wanted: list[str] | None
    alpha: float
    partial: bool
    tie_tol: float


def run_compare(results: pd.DataFrame, dataset: str | None = None, models: Sequence[str] | None = None,
                reference: str | None = None, metric: str = "accuracy", condition: str | None = None,
                paired: bool = False, alpha: float = 0.05, aso: bool = False, all_pairs: bool = False,
                partial: bool = False, source: str | None = None, split: str = "test", tie_tol: float = 0.0,
                store_label: str = "store") -> Comparison:
    """All of ``compare`` without the printing. Raises :class:`UserError` for bad input."""
    su = _setup(results, dataset, models, reference, metric, condition, alpha, partial, source, split, tie_tol,
                store_label)
    out = Comparison(info=dict(models=su.model_list, reference=su.reference, references=su.refs,
                               n_seeds=su.n_seeds, metric=metric, datasets=su.datasets, alpha=alpha, paired=paired,
                               partial=partial, source=source, split=split, tie_tol=tie_tol))
    out.warnings += metrics.source_warnings(su.rows)
    if len(su.model_list) < 2:
        out.warnings.append(f"only one model ({su.model_list[0]}): nothing to compare")
    _check_conditions(su.rows, su.wanted)

    meas, incomplete = _seed_measures(su, out)
    label_order = list(dict.fromkeys(meas["condition"]))   # the order of labels as requested
    _seed_tables(su, out, meas, label_order, paired=paired, aso=aso, all_pairs=all_pairs)
    frames: dict[str, list[pd.DataFrame]] = {k: [] for k in ("robust", "wil", "fr", "rank", "post")}
    for ds in su.datasets:
        _cell_tables(su, out, ds, incomplete, frames)
    _dataset_friedman(su, out, meas, label_order, frames)
    _collect_tables(su, out, frames)
    return out


def _setup(results: pd.DataFrame, dataset: str | None, models: Sequence[str] | None, reference: str | None,
           metric: str, condition: str | None, alpha: float, partial: bool, source: str | None, split: str,
           tie_tol: float, store_label: str) -> _Setup:
    """Check the inputs against the store; select the rows, models, datasets and references."""
    if not 0 < alpha < 1:
        raise UserError(f"alpha must be in (0, 1), got {alpha}", options="alpha")
    ev = results[results["kind"] == "eval"]
    if ev.empty:
        raise UserError(f"no evaluation results in {store_label} (it holds no rows of kind 'eval')")
    if metric not in set(ev["metric"]):
        raise UserError(f"no {metric!r} results in {store_label}; metrics present: "
                        f"{', '.join(sorted(set(ev['metric'])))}")
    all_datasets = sorted(set(ev.loc[ev["metric"] == metric, "dataset"]))
    if dataset is not None and dataset not in all_datasets:
        raise UserError(f"unknown dataset {dataset!r}; the store has: {', '.join(all_datasets)}")
    datasets = [dataset] if dataset else all_datasets
    select = dict(metric=metric, split=split, source=source)
    rows = metrics.eval_rows(results, dataset=dataset, **select)
    if rows.empty:
        raise UserError(f"no {metric!r} rows with split {split!r}"
                        + (f" and source {source!r}" if source else "") + f" in {store_label}")
    present_models = sorted(set(rows["model"]))
    model_list = split_list(models) if models else None
    if model_list:
        unknown = [m for m in model_list if m not in present_models]
        if unknown:
            raise UserError(f"unknown model(s) {', '.join(map(repr, unknown))}"
                            + (f" on {dataset}" if dataset else "") + f"; the store has: {', '.join(present_models)}")
    else:
        model_list = model_order(present_models)
    model_list = list(dict.fromkeys(model_list))
    if reference is not None and reference not in model_list:
        raise UserError(f"reference {reference!r} is not among the compared models ({', '.join(model_list)})")
    rows = rows[rows["model"].isin(model_list)]
    ds_models = {ds: [m for m in model_list if ((rows["dataset"] == ds) & (rows["model"] == m)).any()]
                 for ds in datasets}
    refs = {ds: _reference_for(ms, reference) for ds, ms in ds_models.items() if ms}
    n_seeds = {ds: int(rows[(rows["dataset"] == ds)].groupby("model")["seed"].nunique().min())
               for ds in datasets if ds_models[ds]}
    select["models"] = model_list
    return _Setup(rows=rows, select=select, datasets=datasets, model_list=model_list, ds_models=ds_models,
                  refs=refs, n_seeds=n_seeds, reference=reference or ", ".join(dict.fromkeys(refs.values())),
                  higher_better=metric.lower() not in _LOWER_IS_BETTER_METRICS,
                  wanted=split_list(condition) or None, alpha=alpha, partial=partial, tie_tol=tie_tol)


def _check_conditions(rows: pd.DataFrame, wanted: list[str] | None) -> None:
    """Each requested condition is a keyword or a condition in the store, with a severity 1..5 if any."""
    if not wanted:
        return
    known = set(rows.loc[rows["condition"] != metrics.CLEAN, "condition"])
    for w in wanted:
        if w.lower() not in (*_KEYWORDS, "all") and w.partition(":")[0] not in known:
            raise UserError(f"unknown condition {w!r}; choose {', '.join(_KEYWORDS)}, all, or one of the "
                            f"conditions in the store: {', '.join(sorted(known)) or '(none)'}")
        sev = w.partition(":")[2]
        if sev and sev not in {"1", "2", "3", "4", "5"}:
            raise UserError(f"bad severity in condition {w!r} (expected NAME:1..5)")


def _seed_measures(su: _Setup, out: Comparison) -> tuple[pd.DataFrame, set[tuple[str, str]]]:
    """One value per (dataset, measure label, model, seed), in model order; the (dataset, label) pairs left
    incomplete (warned about)."""
    frames = []
    incomplete: set[tuple[str, str]] = set()
    for ds in su.datasets:
        labels, strict = _labels_for(su.rows, ds, su.wanted)
        for label in labels:
            m = metrics.seed_measures(su.rows, label, dataset=ds, partial=su.partial, **su.select)
            if m.empty:
                if strict:
                    raise UserError(f"no results for {label} on {ds}")
                continue
            bad = m[m["value"].isna()]
            if len(bad):
                first = bad.iloc[0]
                what = (f"{label} on {ds} needs all {first['n_expected']} cells; {len(bad)} (model, seed) "
                        f"run(s) lack some, e.g. {first['model']} seed {first['seed']}"
                        + (f" misses {first['missing']}" if strict else ""))
                if strict:
                    raise UserError(what + " (partial=True averages the cells present, flagged as partial)",
                                    options="partial")
                out.warnings.append(f"{what}; left out (partial=True averages the cells present)")
                incomplete.add((ds, label))
                m = m[m["value"].notna()]
            if su.partial and (~m["complete"]).any():
                out.warnings.append(f"{label} on {ds}: partial (over the cells present) for "
                                    f"{', '.join(sorted(set(m.loc[~m['complete'], 'model'])))}; "
                                    f"not comparable with a complete {label}")
            frames.append(m)
    if not frames:
        raise UserError("nothing to compare: no results for the requested conditions")
    meas = pd.concat(frames, ignore_index=True)
    meas["model"] = pd.Categorical(meas["model"], categories=su.model_list, ordered=True)
    meas = meas.sort_values(["dataset", "model", "seed"], kind="stable")
    meas["model"] = meas["model"].astype(str)
    return meas, incomplete


def _seed_tables(su: _Setup, out: Comparison, meas: pd.DataFrame, label_order: list[str], *, paired: bool,
                 aso: bool, all_pairs: bool) -> None:
    """The seed summary and the seed-level pairwise tests (one Holm family)."""
    # every measure compared is a rate in [0, 1] (accuracy, mCA, mCE, mNA, groups); retention can exceed 1
    summ = stats.seed_summary(meas[~meas["condition"].astype(str).str.startswith("retention")],
                              by=["dataset", "condition", "model"], bounds=(0.0, 1.0))
    rest = meas[meas["condition"].astype(str).str.startswith("retention")]
    if len(rest):
        extra = stats.seed_summary(rest, by=["dataset", "condition", "model"])
        summ.table = pd.concat([summ.table, extra.table], ignore_index=True)
        summ.warnings += extra.warnings
    st = summ.table
    st["condition"] = pd.Categorical(st["condition"], categories=label_order, ordered=True)
    st = st.sort_values(["dataset", "condition"], kind="stable").reset_index(drop=True)
    st["condition"] = st["condition"].astype(str)
    out.tables["seed_summary"] = st
    out.warnings += summ.warnings
    if len(su.model_list) < 2:
        return
    n_groups = meas.groupby(["dataset", "condition"]).ngroups
    pairs = []
    for ds, ms in su.ds_models.items():
        pairs += ([(a, b) for i, a in enumerate(ms) for b in ms[i + 1:]] if all_pairs
                  else [(m, su.refs[ds]) for m in ms if m != su.refs[ds]])
    pairs = list(dict.fromkeys(pairs))
    higher_better = su.higher_better
    pw = stats.pairwise_tests(
        meas[["dataset", "condition", "model", "seed", "value"]], pairs=pairs, paired=paired, alpha=su.alpha,
        aso=aso, higher_is_better=lambda g: higher_better != (g.get("condition") == "mCE"),
        family=("all model pairs" if all_pairs else f"each model vs {su.reference} (per dataset)")
        + f" × {n_groups} (dataset, condition) group(s)")
    out.tables["pairwise"] = pw.table
    out.families.append(pw.family or "")
    out.warnings += pw.warnings


def _robustness_frame(su: _Setup, out: Comparison, ds: str, is_image: bool,
                      incomplete: set[tuple[str, str]]) -> pd.DataFrame:
    """Mean clean / mCA / mCE / relative mCE / retention per model on ``ds`` (image) or clean / mNA (text)."""
    rows, select, partial = su.rows, su.select, su.partial
    rs = metrics.robustness_summary(rows, dataset=ds, partial=partial, **select)
    agg = rs.groupby("model", sort=False).agg(
        n_seeds=("seed", "nunique"), clean=("clean", "mean"), mCA=("mCA", "mean"), mCE=("mCE", "mean"),
        mCA_complete=("mCA_complete", "all"), extra=("extra", "mean"), mNA=("mNA", "mean"),
        retention=("retention", "mean")).reset_index()
    if is_image:
        agg = agg.drop(columns=["mNA"])
        try:
            _, rel = metrics.reference_ce(rows, su.refs[ds], dataset=ds, **select)
            agg = agg.merge(rel[["model", "rel_mCE", "n_corruptions"]], on="model", how="left")
        except UserError as e:
            out.warnings.append(f"{ds}: no relative CE: {e}")
            agg["rel_mCE"], agg["n_corruptions"] = math.nan, 0
        agg = agg.rename(columns={"rel_mCE": f"rel_mCE(ref={su.refs[ds]})"})
        if not agg["mCA_complete"].all() and (ds, "mCA") not in incomplete:
            out.warnings.append(f"{ds}: mCA incomplete for "
                                f"{', '.join(agg.loc[~agg['mCA_complete'], 'model'])}"
                                + ("" if partial else " (NaN; partial=True averages the cells present)"))
    else:
        agg = agg.drop(columns=["mCA", "mCE", "mCA_complete", "extra"])
    agg.insert(0, "dataset", ds)
    agg["model"] = pd.Categorical(agg["model"], categories=su.model_list, ordered=True)
    return agg.sort_values("model").assign(model=lambda d: d["model"].astype(str))


def _cell_tables(su: _Setup, out: Comparison, ds: str, incomplete: set[tuple[str, str]],
                 frames: dict[str, list[pd.DataFrame]]) -> None:
    """Robustness over the benchmark cells of ``ds``: the summary, Wilcoxon vs the reference, Friedman with
    its post-hoc pairs and a rank diagram (each appended to ``frames`` / ``out``)."""
    cells = metrics.benchmark_cells(su.rows, dataset=ds, **su.select)
    if cells.empty:
        return
    is_image = (cells["kind_of_condition"] == "benchmark").any()
    frames["robust"].append(_robustness_frame(su, out, ds, is_image, incomplete))

    ds_list, ref, n_seeds, alpha = su.ds_models[ds], su.refs[ds], su.n_seeds[ds], su.alpha
    n_cells = cells.groupby(["condition", "severity"]).ngroups
    if is_image and n_cells < 75:
        out.warnings.append(f"{ds}: cell-level tests use {n_cells} benchmark cells, not the full 75")
    cell_df = cells[["model", "seed", "condition", "severity", "value"]]
    if len(ds_list) >= 2:
        wil = stats.pairwise_wilcoxon(cell_df, pairs=[(m, ref) for m in ds_list if m != ref], tol=su.tie_tol,
                                      alpha=alpha, block_cols=["condition", "severity"], n_seeds=n_seeds,
                                      family=f"each model vs {ref} over the cells of {ds}")
        frames["wil"].append(wil.table.assign(dataset=ds))
        out.families.append(wil.family or "")
        out.warnings += wil.warnings
    if len(ds_list) >= 3:
        fr = stats.friedman_test(cell_df, models=ds_list, block_cols=["condition", "severity"],
                                 higher_is_better=su.higher_better, alpha=alpha)
        frames["fr"].append(_friedman_frame(ds, "cells (condition, severity)", fr, n_seeds))
        frames["rank"].append(fr.table.assign(dataset=ds, blocks="cells"))
        out.warnings += [f"{ds}: {w}" for w in fr.warnings]
        post = stats.pairwise_wilcoxon(cell_df, models=ds_list, tol=su.tie_tol, alpha=alpha,
                                       block_cols=["condition", "severity"], n_seeds=n_seeds,
                                       family=f"all model pairs over the cells of {ds} (post-hoc)")
        frames["post"].append(post.table.assign(dataset=ds))
        out.families.append(post.family or "")
        out.warnings += post.warnings
        out.cd_diagrams.append(_rank_diagram(f"{ds} (cells)", fr, post, n_seeds))


def _dataset_friedman(su: _Setup, out: Comparison, meas: pd.DataFrame, label_order: list[str],
                      frames: dict[str, list[pd.DataFrame]]) -> None:
    """Friedman over datasets (blocks = datasets) per measure label, for the models present everywhere."""
    everywhere = [m for m in su.model_list if all(m in ms for ms in su.ds_models.values())]
    if len(everywhere) < 3 or len(su.datasets) < 2:
        return
    for label in label_order:
        sub = meas[meas["condition"] == label]
        if sub["dataset"].nunique() < 2:
            continue
        fr = stats.friedman_test(sub[["model", "dataset", "seed", "value"]], models=everywhere,
                                 block_cols=["dataset"], higher_is_better=su.higher_better
                                 and label != "mCE", alpha=su.alpha)
        frames["fr"].append(_friedman_frame("(all)", f"datasets ({label})", fr, min(su.n_seeds.values())))
        frames["rank"].append(fr.table.assign(dataset="(all)", blocks=f"datasets ({label})"))
        out.warnings += [f"datasets ({label}): {w}" for w in fr.warnings]


def _collect_tables(su: _Setup, out: Comparison, frames: dict[str, list[pd.DataFrame]]) -> None:
    """The cell and dataset frames as named tables; the closing caveats; families and warnings de-duplicated."""
    def _cat(parts: list[pd.DataFrame], first: Sequence[str]) -> pd.DataFrame:
        df = pd.concat(parts, ignore_index=True)
        return df[[*first, *[c for c in df.columns if c not in first]]]

    if frames["robust"]:
        out.tables["robustness"] = _cat(frames["robust"], ["dataset", "model"])
    if frames["wil"]:
        out.tables["wilcoxon_cells"] = _cat(frames["wil"], ["dataset", "model_a", "model_b"])
    if frames["fr"]:
        out.tables["friedman"] = _cat(frames["fr"], ["dataset", "blocks"])
        out.tables["avg_ranks"] = _cat(frames["rank"], ["dataset", "blocks", "model"])
    if frames["post"]:
        out.tables["posthoc_wilcoxon"] = _cat(frames["post"], ["dataset", "model_a", "model_b"])
    if frames["wil"] or frames["post"] or frames["fr"]:
        out.warnings.append(CELLS_CAVEAT)
    low = {ds: n for ds, n in su.n_seeds.items() if n < stats.MIN_TESTABLE_SEEDS}
    if low:
        out.warnings.append("fewer than 3 seeds per model on " + ", ".join(f"{d} ({n})" for d, n in low.items())
                            + ": no comparison there is testable; numbers only")
    out.families = [f for f in out.families if f]
    out.warnings = list(dict.fromkeys(out.warnings))


def _reference_for(models: Sequence[str], wanted: str | None) -> str:
    """The user's reference where the dataset has it, else ViT / Transformer (by the models' modality)."""
    if wanted in models:
        return str(wanted)
    modalities = {MODEL_FACTS[m].modality for m in models if m in MODEL_FACTS}
    return reference_model(models, modalities.pop() if len(modalities) == 1 else None) or models[0]


def _friedman_frame(ds: str, blocks: str, fr: stats.StatResult, n_seeds: int) -> pd.DataFrame:
    info = {k: v for k, v in fr.info.items() if k != "blocks"}
    p = info.get("p", math.nan)
    v = stats.verdict(bool(np.isfinite(p) and p < info["alpha"]), n_seeds, cells=True)
    k, n = info["k"], info["n_blocks"]
    kendall_w = info["statistic"] / (n * (k - 1)) if n and k > 1 else math.nan   # effect size, 0..1
    return pd.DataFrame([{"dataset": ds, "blocks": blocks, **info, "kendall_w": kendall_w, "n_seeds": n_seeds,
                          "verdict": v}])


def _rank_diagram(name: str, fr: stats.StatResult, post: stats.StatResult, n_seeds: int
                  ) -> tuple[str, dict[str, float], list[list[str]] | None, str]:
    """Average ranks + the cliques of the post-hoc pairwise Wilcoxon–Holm table (the same decisions)."""
    ranks = dict(zip(fr.table["model"], fr.table["avg_rank"]))
    if n_seeds < stats.MIN_TESTABLE_SEEDS:
        return name, ranks, None, f"no bars: pairwise tests {stats.not_testable(n_seeds)}"
    different = [(r.model_a, r.model_b) for r in post.table.itertuples(index=False) if r.reject]
    cliques = stats.holm_cliques(ranks, different)
    if not cliques:
        return name, ranks, cliques, "no bars: the post-hoc Wilcoxon–Holm test over cells told every pair apart"
    return name, ranks, cliques, "bars join models the post-hoc Wilcoxon–Holm test over cells did not tell apart"
