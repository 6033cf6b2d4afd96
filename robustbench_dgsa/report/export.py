"""Export evaluation results in RobustBench's format (common corruptions; Linf / L2: :mod:`.export_adversarial`),
from the results store alone.

Writes, under ``out_dir``::

    model_info/<dataset>/corruptions/<model>.json            one per model whose 15 x 5 grid is complete
    model_info/<dataset>/corruptions/unaggregated_results.csv every model (missing cells empty)
    incomplete_grids.<dataset>.json                          models with an incomplete grid: NOT model_info files

RobustBench's ``generate_leaderboard`` reads every JSON in ``model_info/<dataset>/corruptions/`` and sorts by
``corruptions_acc``, so one record without it breaks the whole page: a model whose grid misses a cell goes to the
side file instead, with its footnote naming the missing cells. The JSON has RobustBench's model_info fields
(``link``, ``name``, ``authors``, ``additional_data``, ``number_forward_passes``, ``dataset``, ``venue``,
``architecture``, ``eps``, ``clean_acc``, ``reported``, ``corruptions_acc``, ``corruptions_mce``, ``footnote``).
Fields a leaderboard shows are never null or a Python repr: what the store does not know (link, authors, venue)
is empty, as in RobustBench's own files; ``architecture`` is the model's source (``timm:<name>``,
``module:<pkg.mod:factory>``, ``python:<class path>``) or ``dgsa-bench <model>``; ``additional_data`` is false
(for an outside model the footnote says the store cannot know). Where the target folder already holds a JSON for
the model, the fields the store does not know keep their values there (RobustBench's ``update_json`` merges the
same way). Accuracies are percentages with two decimals, as strings, as RobustBench writes them.

``corruptions_acc`` is the mean accuracy over the 15 benchmark corruptions × 5 severities, for every seed of the
model. ``corruptions_mce`` is RobustBench's mCE: the mean over corruptions of (mean error over severities) /
(AlexNet's mean error over severities), in percent — given where a reference grid is at hand: ``mce_reference``
(an unaggregated CSV such as RobustBench's own ``model_info/<dataset>/corruptions/unaggregated_results.csv`` with
an ``AlexNet`` row, or the name of a store model), else an ``AlexNet`` row already in the target CSV or the
store, else, for ``imagenet``, AlexNet's published ImageNet-C errors (:func:`metrics.alexnet_errors`, the standard
ImageNet-C mCE normaliser; RobustBench's own ImageNet AlexNet row was measured on its 5,000-image subset and differs
slightly). The footnote says where the corrupted images came from (regenerated CIFAR-C- / ImageNet-C-style data is
not the official files), how many test images and seeds are behind the numbers.

The CSV is RobustBench's unaggregated table: two header rows (corruption, severity) in RobustBench's corruption
order, one row per model, accuracies as fractions (mean over seeds); missing cells are empty. Rows of other
models already in the target CSV (RobustBench's own file holds the whole leaderboard) are kept.

RobustBench's datasets are ``cifar10``, ``cifar100`` and ``imagenet`` (ImageNet-C: ``model_info/imagenet/
corruptions/``). A store dataset that is none of them (e.g. a custom ``npz:`` source) is exported as the dataset
family its evaluation runs recorded (from an official or regenerated CIFAR-10-C / CIFAR-100-C / ImageNet-C folder),
else only when ``dataset`` names RobustBench's dataset for it.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa import store
from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.paths import safe_name

ROBUSTBENCH_DATASETS = ("cifar10", "cifar100", "imagenet")
# RobustBench's order of the 15 corruptions (robustbench.data.CORRUPTIONS) — the CSV's column order.
ROBUSTBENCH_CORRUPTIONS = ("shot_noise", "motion_blur", "snow", "pixelate", "gaussian_noise", "defocus_blur",
                           "brightness", "fog", "zoom_blur", "frost", "glass_blur", "impulse_noise", "contrast",
                           "jpeg_compression", "elastic_transform")
SEVERITIES = (1, 2, 3, 4, 5)
FULL_TEST = {"cifar10": 10_000, "cifar100": 10_000, "imagenet": 5_000}  # RobustBench's n_examples per dataset
C_NAMES = {"cifar10": "CIFAR-10-C", "cifar100": "CIFAR-100-C", "imagenet": "ImageNet-C"}
CSV_NAME = "unaggregated_results.csv"
MCE_REFERENCE = "AlexNet"           # RobustBench's normaliser for corruptions_mce
KEEP_FROM_EXISTING = ("link", "name", "authors", "venue", "reported", "eps")  # what the store cannot know


@dataclass
class ExportResult:
    files: list[Path] = field(default_factory=list)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)   # "<dataset>/<model>" -> JSON record
    skipped: list[str] = field(default_factory=list)                    # store datasets not exported, and why
    incomplete: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<dataset>/<model>" -> side-file record


def export_robustbench(store_dir: str | Path, out_dir: str | Path, *, dataset: str | None = None,
                       store_dataset: str | None = None, models: Sequence[str] | None = None,
                       source: str | None = None, mce_reference: str | Path | None = None) -> ExportResult:
    """Write RobustBench model_info files for the evaluation results in ``store_dir`` (see the module docstring).

    ``dataset``: RobustBench's dataset name (cifar10 / cifar100 / imagenet) for the exported store dataset; needed
    when that one is a custom source whose runs recorded no dataset family. ``store_dataset``: which store dataset to
    export (default: all that map to a RobustBench dataset). ``models``: restrict to these models. ``source``:
    only corrupted rows from this data source (official / regenerated / on-the-fly), as ``compare --source``.
    ``mce_reference``: the reference grid for ``corruptions_mce`` (see the module docstring).
    """
    if dataset is not None and dataset not in ROBUSTBENCH_DATASETS:
        raise UserError(f"RobustBench dataset must be one of {', '.join(ROBUSTBENCH_DATASETS)}, got {dataset!r}")
    df = store.load_results(store_dir)
    rows = metrics.eval_rows(df, metric="accuracy", split="test", source=source)
    result = ExportResult()
    if (df["kind"] == "adversarial").any():                  # Linf / L2: model_info/<dataset>/<Linf|L2>/
        from robustbench_dgsa.report.export_adversarial import export_adversarial
        files, records, skipped = export_adversarial(store_dir, out_dir, dataset=dataset, models=models)
        result.files += files
        result.models.update(records)
        result.skipped += skipped
        if rows.empty and files:
            return result
    if rows.empty:
        raise UserError(f"no test-accuracy evaluation rows in {store_dir}: nothing to export")
    runs = store.load_runs(store_dir)
    for ds, rb in _dataset_map(sorted(set(rows["dataset"])), dataset, store_dataset, result.skipped,
                               _families(rows, runs)):
        part = rows[rows["dataset"] == ds]
        wanted = list(models) if models else sorted(set(part["model"]))
        unknown = sorted(set(wanted) - set(part["model"]))
        if unknown:
            raise UserError(f"model(s) {', '.join(unknown)} have no results on {ds} (present: "
                            f"{', '.join(sorted(set(part['model'])))})")
        _export_dataset(result, Path(out_dir), ds, rb, part, wanted, runs, mce_reference)
    if not result.files:
        raise UserError("nothing exported: " + "; ".join(result.skipped), options="dataset")
    return result


def _export_dataset(result: ExportResult, out_dir: Path, ds: str, rb: str, part: pd.DataFrame, wanted: list[str],
                    runs: dict[str, dict[str, Any]], mce_reference: str | Path | None) -> None:
    """One RobustBench dataset: model_info JSONs (complete grids), the side file (incomplete ones), the CSV."""
    folder = out_dir / "model_info" / safe_name(rb) / "corruptions"
    csv_path = folder / CSV_NAME
    existing = read_unaggregated(csv_path) if csv_path.is_file() else None
    table: dict[str, dict[tuple[str, int], float]] = {}
    records: dict[str, dict[str, Any]] = {}
    for model in wanted:
        records[model], table[model] = _model_record(model, rb, ds, part[part["model"] == model], runs)
    reference = _mce_reference(mce_reference, existing, table, rows=part, runs=runs, rb=rb, ds=ds)
    incomplete: dict[str, dict[str, Any]] = {}
    for model, record in records.items():
        if record["corruptions_acc"] is None:
            incomplete[model] = record
            result.incomplete[f"{rb}/{model}"] = record
            continue
        if reference is not None:
            record["corruptions_mce"] = _mce(table[model], reference[1])
            record["footnote"] += f" corruptions_mce normalised by {reference[0]}."
        path = folder / f"{safe_name(model)}.json"
        record = _merge_existing(path, record)
        atomic.write_text(path, json.dumps(record, indent=2) + "\n")
        result.files.append(path)
        result.models[f"{rb}/{model}"] = record
    if incomplete:
        side = out_dir / f"incomplete_grids.{safe_name(rb)}.json"
        atomic.write_text(side, json.dumps({
            "note": "Not RobustBench model_info files: these models miss cells of the 15 corruptions x 5 "
                    "severities grid, so they have no corruptions_acc and would break generate_leaderboard; "
                    "each footnote names the missing cells.", "dataset": rb, "models": incomplete}, indent=2) + "\n")
        result.files.append(side)
    atomic.write_text(csv_path, _csv_text(_merge_rows(existing, table)))
    result.files.append(csv_path)


def _families(rows: pd.DataFrame, runs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Store dataset -> cifar10 / cifar100, where every evaluation run of it that recorded a family agrees."""
    out: dict[str, str] = {}
    for ds, g in rows.groupby("dataset"):
        fams = {runs.get(r, {}).get("dataset_family") for r in set(g["run_id"])} - {None, ""}
        if len(fams) == 1 and next(iter(fams)) in ROBUSTBENCH_DATASETS:
            out[str(ds)] = str(next(iter(fams)))
    return out


def _merge_existing(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Keep what an existing model_info file says about fields the store cannot know (link, authors, ...)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return record
    if not isinstance(old, dict):
        return record
    merged = dict(record)
    for key in KEEP_FROM_EXISTING:  # the store has placeholders only for these (the name: the model's)
        if old.get(key) not in (None, ""):
            merged[key] = old[key]
    return merged


def _mce_reference(spec: str | Path | None, existing: pd.DataFrame | None,
                   table: dict[str, dict[tuple[str, int], float]], *, rows: pd.DataFrame,
                   runs: dict[str, dict[str, Any]], rb: str, ds: str
                   ) -> tuple[str, dict[tuple[str, int], float]] | None:
    """(label, complete reference grid) for corruptions_mce, or None where no reference is at hand."""
    if spec is not None and Path(spec).suffix.lower() == ".csv":
        ref = read_unaggregated(spec)
        if MCE_REFERENCE not in ref.index:
            raise UserError(f"{spec}: no {MCE_REFERENCE} row to normalise corruptions_mce by")
        return _complete_or_error(f"{MCE_REFERENCE} in {Path(spec).name}", _row_cells(ref, MCE_REFERENCE), spec)
    name = str(spec) if spec is not None else MCE_REFERENCE
    if name in table or name in set(rows["model"]):
        cells = table.get(name) or _model_record(name, rb, ds, rows[rows["model"] == name], runs)[1]
        if spec is not None:
            return _complete_or_error(f"{name} (this store)", cells, name)
        return (f"{name} (this store)", cells) if len(cells) == len(ROBUSTBENCH_CORRUPTIONS) * 5 else None
    if spec is not None:
        raise UserError(f"mCE reference {name!r} is neither an unaggregated .csv file nor a model of the store")
    if existing is not None and MCE_REFERENCE in existing.index:
        cells = _row_cells(existing, MCE_REFERENCE)
        if len(cells) == len(ROBUSTBENCH_CORRUPTIONS) * 5:
            return f"{MCE_REFERENCE} in the existing {CSV_NAME}", cells
    if rb == "imagenet":
        return _published_alexnet()
    return None


def _published_alexnet() -> tuple[str, dict[tuple[str, int], float]]:
    """AlexNet's published ImageNet-C errors as an accuracy grid (the standard mCE normaliser)."""
    errors = metrics.alexnet_errors()
    cells = {(c, s): 1.0 - float(errors.loc[c, s]) for c in ROBUSTBENCH_CORRUPTIONS for s in SEVERITIES}
    return "AlexNet's published ImageNet-C errors (Hendrycks & Dietterich 2019)", cells


def _row_cells(table: pd.DataFrame, model: str) -> dict[tuple[str, int], float]:
    row = table.loc[model]
    return {(c, int(s)): float(v) for (c, s), v in row.items() if c in ROBUSTBENCH_CORRUPTIONS and np.isfinite(v)}


def _complete_or_error(label: str, cells: dict[tuple[str, int], float], where: Any):
    if len(cells) != len(ROBUSTBENCH_CORRUPTIONS) * len(SEVERITIES):
        raise UserError(f"mCE reference {where}: {len(cells)} of the 75 corruption x severity cells, not all")
    return label, cells


def _mce(cells: dict[tuple[str, int], float], ref: dict[tuple[str, int], float]) -> str | None:
    """RobustBench's corruptions_mce: mean over corruptions of mean_s(1 - acc) / mean_s(1 - acc_ref), in %."""
    ratios = []
    for c in ROBUSTBENCH_CORRUPTIONS:
        err = np.mean([1.0 - cells[(c, s)] for s in SEVERITIES])
        ref_err = np.mean([1.0 - ref[(c, s)] for s in SEVERITIES])
        if ref_err <= 0:
            return None
        ratios.append(err / ref_err)
    return _pct(float(np.mean(ratios)))


def _merge_rows(existing: pd.DataFrame | None, table: dict[str, dict[tuple[str, int], float]]
                ) -> dict[str, dict[tuple[str, int], float]]:
    """Rows of models already in the target CSV first (in their order), this export's replacing theirs."""
    merged: dict[str, dict[tuple[str, int], float]] = {}
    if existing is not None:
        for model in existing.index:
            if str(model) not in table:
                merged[str(model)] = _row_cells(existing, model)
    merged.update(table)
    return merged


def _dataset_map(present: list[str], dataset: str | None, store_dataset: str | None,
                 skipped: list[str], families: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(store dataset, RobustBench dataset) pairs to export; ``families``: store dataset -> the dataset family
    its runs recorded."""
    families = families or {}
    if store_dataset is not None:
        if store_dataset not in present:
            raise UserError(f"dataset {store_dataset!r} has no evaluation rows (present: {', '.join(present)})")
        present = [store_dataset]
    elif dataset is not None and dataset not in present:
        custom = [d for d in present if d not in ROBUSTBENCH_DATASETS]
        if len(custom) != 1:
            raise UserError(f"which store dataset is RobustBench's {dataset}? present: {', '.join(present)} "
                            "(choose one with store_dataset=NAME)", options="store_dataset")
        present = custom
    elif dataset is not None:
        present = [dataset]
    out = []
    for ds in present:
        rb = dataset or (ds if ds in ROBUSTBENCH_DATASETS else families.get(ds))
        if rb is None:
            skipped.append(f"{ds}: not a RobustBench dataset and its runs recorded no dataset family; name it "
                           "with dataset=cifar10|cifar100|imagenet")
            continue
        out.append((ds, rb))
    return out


def _model_record(model: str, rb_dataset: str, store_dataset: str, sub: pd.DataFrame,
                  runs: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[tuple[str, int], float]]:
    """RobustBench's JSON record for one model, and its per-cell accuracies (mean over seeds)."""
    clean = sub[sub["condition"] == metrics.CLEAN]
    cor = sub[sub["condition"].isin(ROBUSTBENCH_CORRUPTIONS) & sub["severity"].isin(SEVERITIES)]
    seeds = sorted(set(sub["seed"]))
    cells = {(c, int(s)): float(g["value"].mean()) for (c, s), g in cor.groupby(["condition", "severity"])}
    need = [(c, s) for c in ROBUSTBENCH_CORRUPTIONS for s in SEVERITIES]
    per_seed_missing = {seed: [k for k in need if k not in set(zip(cor.loc[cor["seed"] == seed, "condition"],
                                                                     cor.loc[cor["seed"] == seed, "severity"]))]
                        for seed in seeds}
    missing = sorted({k for v in per_seed_missing.values() for k in v})
    complete = not missing and len(cor) > 0
    corr_acc = None
    if complete:
        per_seed = cor.groupby("seed")["value"].mean()
        corr_acc = _pct(float(per_seed.mean()))
    clean_acc = _pct(float(clean.groupby("seed")["value"].mean().mean())) if len(clean) else None
    run_ids = sorted(set(sub["run_id"]))
    prov = [runs.get(r, {}) for r in run_ids]
    outside = any(p.get("origin") == "benchmark" for p in prov)
    n_values = sorted(set(int(v) for v in sub["n"]))
    sources = sorted(set(cor["source"]))
    record = {
        "link": "", "name": model, "authors": "",
        "additional_data": False,
        "number_forward_passes": 1, "dataset": rb_dataset, "venue": "",
        "architecture": _architecture(model, prov), "eps": None,
        "clean_acc": clean_acc if clean_acc is not None else "", "reported": None, "corruptions_acc": corr_acc,
        "footnote": _footnote(store_dataset, rb_dataset, sources, n_values, seeds, missing, len(need), outside),
    }
    return record, cells


def _footnote(store_dataset: str, rb_dataset: str, sources: list[str], n_values: list[int], seeds: list[int],
              missing: list[tuple[str, int]], n_need: int, outside: bool) -> str:
    parts = ["Evaluated with dgsa-bench."]
    if store_dataset != rb_dataset:
        parts.append(f"Clean data: the store's dataset {store_dataset!r}, exported as {rb_dataset}.")
    c_name = C_NAMES.get(rb_dataset, "CIFAR-C")
    kinds = {"official": f"the official {c_name} files", "regenerated":
             f"regenerated {c_name}-style data (not the official {c_name} files)",
             "on-the-fly": f"corruptions generated on the fly (not the official {c_name} files)"}
    if sources:
        parts.append("Corrupted images: " + "; ".join(kinds.get(s, s) for s in sources) + ".")
    full = FULL_TEST.get(rb_dataset, 10_000)
    if n_values and max(n_values) < full:
        parts.append(f"{'/'.join(map(str, n_values))} test images per condition (RobustBench uses {full:,}).")
    if len(seeds) > 1:
        parts.append(f"Mean over {len(seeds)} training seeds.")
    if missing:
        shown = ", ".join(f"{c}@{s}" for c, s in missing[:4]) + (", ..." if len(missing) > 4 else "")
        parts.append(f"corruptions_acc not given: {len(missing)} of the {n_need} corruption x severity cells are "
                     f"missing ({shown}); only the full 15 x 5 set counts.")
    if outside:
        parts.append("Outside model: whether it used additional data is unknown to the store (shown as no).")
    return " ".join(parts)


def _architecture(model: str, prov: list[dict[str, Any]]) -> str:
    """The model's source (timm name, factory, class path), never a Python repr; the suite's own by name."""
    for p in prov:
        src = str(p.get("model_source") or "")
        if src and src != "python object":
            return src
        if p.get("model_class"):
            return f"python:{p['model_class']}"
    return f"dgsa-bench {model}"


def _pct(v: float) -> str | None:
    return None if not np.isfinite(v) else f"{100.0 * v:.2f}"


def _csv_text(table: dict[str, dict[tuple[str, int], float]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = [(c, s) for c in ROBUSTBENCH_CORRUPTIONS for s in SEVERITIES]
    w.writerow([""] + [c for c, _ in cols])
    w.writerow([""] + [str(s) for _, s in cols])
    for model, cells in table.items():
        w.writerow([model] + [repr(cells[k]) if k in cells else "" for k in cols])
    return buf.getvalue()


def read_unaggregated(path: str | Path) -> pd.DataFrame:
    """Read an unaggregated CSV (ours or RobustBench's): rows = models, columns = (corruption, severity)."""
    df = pd.read_csv(path, header=[0, 1], index_col=0)
    df.columns = pd.MultiIndex.from_tuples([(c, int(s)) for c, s in df.columns])
    return df
