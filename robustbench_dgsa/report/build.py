"""``dgsa-bench report``: the report's figures and tables regenerated from the results store alone.

:func:`build_report` reads a store (:mod:`robustbench_dgsa.store`) and the paper's published numbers
(:func:`robustbench_dgsa.report.published.load_published`, package data ``robustbench_dgsa/report/published.csv``,
described in ``results/README.md``) and writes, never running a model:

* Table 1 / Table 3: clean accuracy mean ± SD over seeds per dataset and model, the paper's value beside ours;
* Figure 4: accuracy vs severity per corruption (images) or noise type (text), one line per model, 95% t-interval band (seaborn);
* Figure 5: training and validation curves per model, 95% t-interval band (seaborn);
* robustness summary (clean, mCA, mCE, retention, corruption groups, extra corruptions, text mNA with
  realised CER/WER) and the corruption error relative to a reference model;
* statistical comparisons (:mod:`robustbench_dgsa.analysis.compare`): the seed-level Welch tests as sensitivity analyses of the Findings (n, test,
  Holm family and effect size beside every p; fewer than 3 seeds per model: "not testable"); tests over
  corruption cells are shown as consistency across conditions of the same trained models; for three or
  more models an average-rank diagram whose bars are the post-hoc Wilcoxon–Holm decisions of the table beside it;
* "Warnings and caveats" near the top: substitutes (procedural frost, the JPEG copy of CIFAR-10, subsets), seeds
  below the paper's five, cell-level tests sharing models;
* Figure 2 / Figure 3 from stored rollout sets, and the rollout numbers (salient mass, drift);
* Table 9: parameters, FLOPs, throughput, latency, peak memory (``kind="bench"`` rows) beside the paper's;
* the paper's published Tables 1, 2, 3, 7, 8, 9 as typed in.

Every figure comes as PNG (200 dpi) + PDF, byte-identical across re-runs and whatever the user's matplotlibrc;
every table as Markdown + LaTeX (booktabs; compiles under :data:`tables.LATEX_PREAMBLE`); ``index.md`` and
``index.html`` link them all from their contents, with relative links only. Each artefact has a ``<stem>.sources.json``
sidecar naming the runs, config hashes, git commits, store path and a SHA-256 of the rows it was made from.
An artefact whose data is missing is skipped with a note in the index. Every file is written atomically.

This module only orchestrates; each concern has its module in this package:

* :mod:`.document`: the report being built (artefacts, sources sidecars, skips, warnings);
* :mod:`.labels`: dataset / model / corruption labels and orders the sections share;
* :mod:`.published`: the paper's published numbers and its tables as typed in;
* :mod:`.paper_tables`: Tables 1, 3 and 9, ours beside the paper's;
* :mod:`.accuracy_figures`: Figures 4 and 5; :mod:`.robustness`: the robustness summary;
* :mod:`.significance`: the statistical comparisons; :mod:`.rollout_section`: Figures 2 and 3, rollout numbers;
* :mod:`.findings`: one verdict per registered claim, opened by :mod:`.forest`; :mod:`.caveats`: warnings and caveats;
* :mod:`.page`: ``index.md`` / ``index.html``; :mod:`.folder`: the report folder, its manifest, publishing and
  removing the previous report's files.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from robustbench_dgsa import store
from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.config import RunConfig
from robustbench_dgsa.models.registry import MODEL_FACTS, model_order
from robustbench_dgsa.report.accuracy_figures import curve_figures, severity_figures
from robustbench_dgsa.report.document import Report
from robustbench_dgsa.report.caveats import caveat_lines
from robustbench_dgsa.report.adversarial_section import adversarial_section
from robustbench_dgsa.report.findings import findings_section
from robustbench_dgsa.report.folder import check_report_folder, previous_files, publish, report_folder
from robustbench_dgsa.report.page import header_lines, write_index
from robustbench_dgsa.report.paper_tables import accuracy_tables, efficiency_table
from robustbench_dgsa.report.published import PUBLISHED_CSV, load_published, published_tables
from robustbench_dgsa.report.robustness import robustness_tables
from robustbench_dgsa.report.rollout_section import rollout_figures, rollout_numbers
from robustbench_dgsa.report.significance import significance_tables
from robustbench_dgsa.report.summary import SUMMARY_FILE, summary_table
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.figures import saving_in_background
from robustbench_dgsa.util.errors import UserError


def build_report(store_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                 name: str | None = None, datasets: Sequence[str] | None = None,
                 reference: str | None = None, title: str | None = None) -> Path:
    """Write the report of a results store; returns the report folder.

    ``out_dir`` wins; otherwise ``reports/<name>`` (default name: the store folder's parent name); ``name``
    must be one folder name. ``datasets`` restricts the report; ``reference`` names the model the relative
    corruption error is measured against (default: ViT / Transformer when present). A folder holding a
    ``manifest.json`` that no report wrote is refused before any work; a rebuild removes only files the
    previous report's own manifest lists.
    """
    store_dir = Path(store_dir)
    out = report_folder(store_dir, out_dir, name)
    check_report_folder(out)
    previous = previous_files(out)
    df = store.load_results(store_dir)
    if df.empty:
        raise UserError(f"results store {store_dir} has no rows: nothing to report")
    metrics.check_duplicate_cells(df[df["kind"] == "eval"])  # a cell with two values is refused, not reported
    all_ds = sorted(set(df["dataset"]) - {""})
    if datasets:
        unknown = sorted(set(datasets) - set(all_ds))
        if unknown:
            raise UserError(f"dataset(s) not in the store: {', '.join(unknown)} (present: {', '.join(all_ds)})")
        df = df[df["dataset"].isin(list(datasets)) | (df["dataset"] == "")].reset_index(drop=True)
    if reference is not None and reference not in set(df["model"]):
        raise UserError(f"reference model {reference!r} has no results (present: "
                        f"{', '.join(model_order(set(df['model']) - {''}))})")
    # Built in a hidden sibling folder and moved in at the end: Ctrl-C or an error leaves no half report.
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        rep = _write_report(store_dir, stage, df, reference, title, final=out)
        publish(stage, out, rep, previous)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


def _write_report(store_dir: Path, out: Path, df: pd.DataFrame, reference: str | None,
                  title: str | None, final: Path | None = None) -> Report:
    """Every artefact, the index and ``summary.json`` of one report, written into ``out`` (paths in them relative
    to ``final``, where the report is moved to; default ``out``)."""
    runs = store.load_runs(store_dir)
    cfgs = _configs(runs)
    rep = Report(store_dir, out, df, runs, final_dir=final)
    pub = load_published()
    pub_sha = hashlib.sha256(PUBLISHED_CSV.read_bytes()).hexdigest()

    ds_all = sorted(set(df.loc[df["kind"].isin(["eval", "train"]), "dataset"]) - {""})
    mods = {ds: _modality_of(df, ds, cfgs) for ds in ds_all}
    datasets_m = {ds: mods[ds] for ds in sorted(ds_all, key=lambda d: (mods[d] != "image", d))}

    try:
        rep.warnings += metrics.source_warnings(metrics.eval_rows(df))
    except UserError as e:
        rep.warnings.append(str(e))
    with saving_in_background():   # figure files written by child processes; all written when the block ends
        rep.attempt("findings", "Findings", lambda: findings_section(rep, pub, cfgs))
        rep.attempt("accuracy", "Tables 1 and 3", lambda: accuracy_tables(rep, pub, pub_sha, datasets_m, cfgs))
        rep.attempt("severity", "Figure 4", lambda: severity_figures(rep, datasets_m))
        rep.attempt("robustness", "Robustness summary", lambda: robustness_tables(rep, datasets_m, reference))
        rep.attempt("significance", "Significance", lambda: significance_tables(rep, datasets_m, reference))
        rep.attempt("curves", "Figure 5", lambda: curve_figures(rep, datasets_m))
        rep.attempt("rollout", "Figures 2 and 3", lambda: rollout_figures(rep))
        rep.attempt("rollout", "Rollout numbers", lambda: rollout_numbers(rep))
        rep.attempt("adversarial", "Adversarial robustness", lambda: adversarial_section(rep))
        rep.attempt("efficiency", "Table 9", lambda: efficiency_table(rep, pub, pub_sha))
        rep.attempt("published", "Published tables", lambda: published_tables(rep, pub, pub_sha))

    write_index(rep, title or "dgsa-bench report", header_lines(rep, cfgs, datasets_m),
                caveat_lines(rep, cfgs, datasets_m))
    summ = summary_table(df)
    atomic.write_json(out / SUMMARY_FILE, {"columns": list(summ.columns), "rows": summ.values.tolist()})
    return rep


def _configs(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """config_hash -> config dict, from run provenance records that carry a config."""
    out: dict[str, dict[str, Any]] = {}
    for rec in runs.values():
        cfg = rec.get("config")
        if isinstance(cfg, dict) and "model" in cfg:
            h = rec.get("config_hash")
            if not h:
                h = RunConfig.from_dict(cfg).hash()
            out.setdefault(str(h), cfg)
    return out


def _modality_of(df: pd.DataFrame, dataset: str, cfgs: dict[str, dict[str, Any]]) -> str:
    rows = df[df["dataset"] == dataset]
    for h in sorted(set(rows["config_hash"])):
        cfg = cfgs.get(h)
        if cfg:
            return cfg["model"].get("modality", "image")
    known = {MODEL_FACTS[m].modality for m in set(rows["model"]) if m in MODEL_FACTS}
    if "text" in known or (rows["metric"].isin(["cer", "wer"])).any():
        return "text"
    return "image"

