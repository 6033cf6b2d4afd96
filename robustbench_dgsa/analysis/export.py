"""Export evaluation results in RobustBench's format (common corruptions), from the results store alone.

Writes, under ``out_dir``::

    model_info/<dataset>/corruptions/<model>.json
    model_info/<dataset>/corruptions/unaggregated_results.csv

The JSON has RobustBench's model_info fields (``link``, ``name``, ``authors``, ``additional_data``,
``number_forward_passes``, ``dataset``, ``venue``, ``architecture``, ``eps``, ``clean_acc``, ``reported``,
``corruptions_acc``, ``footnote``); what the store does not know (link, authors, venue, the paper's reported
number) is null. Accuracies are percentages with two decimals, as strings, as RobustBench writes them.
``corruptions_acc`` is the mean accuracy over the 15 benchmark corruptions × 5 severities — given only when
every one of those 75 cells is in the store for every seed of the model; otherwise it is null and the footnote
says which cells are missing. The footnote also says where the corrupted images came from (regenerated
CIFAR-10-C-style data is not the official CIFAR-10-C), how many test images and seeds are behind the numbers.
The CSV is RobustBench's unaggregated table: two header rows (corruption, severity) in RobustBench's corruption
order, one row per model, accuracies as fractions (mean over seeds); missing cells are empty.

A store dataset that is not ``cifar10`` / ``cifar100`` (e.g. a custom ``npz:`` source) is exported only when
``dataset`` names RobustBench's dataset for it.
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

ROBUSTBENCH_DATASETS = ("cifar10", "cifar100")
# RobustBench's order of the 15 corruptions (robustbench.data.CORRUPTIONS) — the CSV's column order.
ROBUSTBENCH_CORRUPTIONS = ("shot_noise", "motion_blur", "snow", "pixelate", "gaussian_noise", "defocus_blur",
                           "brightness", "fog", "zoom_blur", "frost", "glass_blur", "impulse_noise", "contrast",
                           "jpeg_compression", "elastic_transform")
SEVERITIES = (1, 2, 3, 4, 5)
FULL_TEST = 10_000
CSV_NAME = "unaggregated_results.csv"


@dataclass
class ExportResult:
    files: list[Path] = field(default_factory=list)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)   # "<dataset>/<model>" -> JSON record
    skipped: list[str] = field(default_factory=list)                    # store datasets not exported, and why


def export_robustbench(store_dir: str | Path, out_dir: str | Path, *, dataset: str | None = None,
                       store_dataset: str | None = None, models: Sequence[str] | None = None,
                       source: str | None = None) -> ExportResult:
    """Write RobustBench model_info files for the evaluation results in ``store_dir`` (see the module docstring).

    ``dataset``: RobustBench's dataset name (cifar10 / cifar100) for the exported store dataset; required when
    that one is a custom source. ``store_dataset``: which store dataset to export (default: all that map to a
    RobustBench dataset). ``models``: restrict to these models. ``source``: only corrupted rows from this data
    source (official / regenerated / on-the-fly), as ``compare --source``.
    """
    if dataset is not None and dataset not in ROBUSTBENCH_DATASETS:
        raise UserError(f"RobustBench dataset must be one of {', '.join(ROBUSTBENCH_DATASETS)}, got {dataset!r}")
    df = store.load_results(store_dir)
    rows = metrics.eval_rows(df, metric="accuracy", split="test", source=source)
    if rows.empty:
        raise UserError(f"no test-accuracy evaluation rows in {store_dir}: nothing to export")
    runs = store.load_runs(store_dir)
    result = ExportResult()
    for ds, rb in _dataset_map(sorted(set(rows["dataset"])), dataset, store_dataset, result.skipped):
        part = rows[rows["dataset"] == ds]
        wanted = list(models) if models else sorted(set(part["model"]))
        unknown = sorted(set(wanted) - set(part["model"]))
        if unknown:
            raise UserError(f"model(s) {', '.join(unknown)} have no results on {ds} (present: "
                            f"{', '.join(sorted(set(part['model'])))})")
        folder = Path(out_dir) / "model_info" / safe_name(rb) / "corruptions"
        table: dict[str, dict[tuple[str, int], float]] = {}
        for model in wanted:
            sub = part[part["model"] == model]
            record, cells = _model_record(model, rb, ds, sub, runs)
            path = folder / f"{safe_name(model)}.json"
            atomic.write_text(path, json.dumps(record, indent=2) + "\n")
            result.files.append(path)
            result.models[f"{rb}/{model}"] = record
            table[model] = cells
        csv_path = folder / CSV_NAME
        atomic.write_text(csv_path, _csv_text(table))
        result.files.append(csv_path)
    if not result.files:
        raise UserError("nothing exported: " + "; ".join(result.skipped))
    return result


def _dataset_map(present: list[str], dataset: str | None, store_dataset: str | None,
                 skipped: list[str]) -> list[tuple[str, str]]:
    """(store dataset, RobustBench dataset) pairs to export."""
    if store_dataset is not None:
        if store_dataset not in present:
            raise UserError(f"dataset {store_dataset!r} has no evaluation rows (present: {', '.join(present)})")
        present = [store_dataset]
    elif dataset is not None and dataset not in present:
        custom = [d for d in present if d not in ROBUSTBENCH_DATASETS]
        if len(custom) != 1:
            raise UserError(f"which store dataset is RobustBench's {dataset}? present: {', '.join(present)} "
                            "(choose one with store_dataset / --store-dataset)")
        present = custom
    elif dataset is not None:
        present = [dataset]
    out = []
    for ds in present:
        rb = dataset or (ds if ds in ROBUSTBENCH_DATASETS else None)
        if rb is None:
            skipped.append(f"{ds}: not a RobustBench dataset; name it with dataset= / --dataset cifar10|cifar100")
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
        "link": None, "name": model, "authors": None,
        "additional_data": None if outside else False,
        "number_forward_passes": 1, "dataset": rb_dataset, "venue": None,
        "architecture": _architecture(model, prov), "eps": None,
        "clean_acc": clean_acc, "reported": None, "corruptions_acc": corr_acc,
        "footnote": _footnote(store_dataset, rb_dataset, sources, n_values, seeds, missing, len(need), outside),
    }
    return record, cells


def _footnote(store_dataset: str, rb_dataset: str, sources: list[str], n_values: list[int], seeds: list[int],
              missing: list[tuple[str, int]], n_need: int, outside: bool) -> str:
    parts = ["Evaluated with dgsa-bench."]
    if store_dataset != rb_dataset:
        parts.append(f"Clean data: the store's dataset {store_dataset!r}, exported as {rb_dataset}.")
    kinds = {"official": "the official CIFAR-C files", "regenerated":
             "regenerated CIFAR-C-style data (not the official CIFAR-C files)",
             "on-the-fly": "corruptions generated on the fly (not the official CIFAR-C files)"}
    if sources:
        parts.append("Corrupted images: " + "; ".join(kinds.get(s, s) for s in sources) + ".")
    if n_values and max(n_values) < FULL_TEST:
        parts.append(f"{'/'.join(map(str, n_values))} test images per condition (RobustBench uses {FULL_TEST:,}).")
    if len(seeds) > 1:
        parts.append(f"Mean over {len(seeds)} training seeds.")
    if missing:
        shown = ", ".join(f"{c}@{s}" for c, s in missing[:4]) + (", ..." if len(missing) > 4 else "")
        parts.append(f"corruptions_acc not given: {len(missing)} of the {n_need} corruption x severity cells are "
                     f"missing ({shown}); only the full 15 x 5 set counts.")
    if outside:
        parts.append("Outside model: whether it used additional data is unknown to the store.")
    return " ".join(parts)


def _architecture(model: str, prov: list[dict[str, Any]]) -> str | None:
    for p in prov:
        if p.get("model_class"):
            return str(p.get("model_source") or p["model_class"])
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
