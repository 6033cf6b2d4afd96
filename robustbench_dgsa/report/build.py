"""``dgsa-bench report``: SPEC §8's figures and tables regenerated from the results store alone.

:func:`build_report` reads a store (:mod:`robustbench_dgsa.store`) and the paper's published numbers
(:func:`load_published`, package data ``robustbench_dgsa/report/published.csv``, described in
``results/README.md``) and writes, never running a model:

* Table 1 / Table 3: clean accuracy mean ± SD over seeds per dataset and model, the paper's value beside ours;
* Figure 4: accuracy vs severity per corruption (images) or noise type (text), one line per model, 95% t-interval band (seaborn);
* Figure 5: training and validation curves per model, 95% t-interval band (seaborn);
* robustness summary (clean, mCA, mCE, retention, corruption groups, extra corruptions, text mNA with
  realised CER/WER) and the corruption error relative to a reference model;
* statistical comparisons (:mod:`robustbench_dgsa.analysis.compare`): the seed-level tests are the claim (n, test,
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
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import stat
import tempfile
from importlib import resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from corruptions.text import TEXT_NOISE_TYPES
from PIL import Image

from robustbench_dgsa import store
from robustbench_dgsa.util import atomic
from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.analysis.compare import CELLS_CAVEAT, run_compare
from robustbench_dgsa.config import RunConfig
from robustbench_dgsa.data.registry import dataset_label as _registry_dataset_label
from robustbench_dgsa.rollout.plots import render_figure2, render_figure3
from robustbench_dgsa.rollout.runs import load_rollout_sets
from robustbench_dgsa.util.provenance import sha256_file
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.paths import is_safe_name, safe_name
from robustbench_dgsa.models.registry import MODEL_FACTS, model_order, reference_model
from robustbench_dgsa.models.registry import display_name as _registry_name
from robustbench_dgsa.report.figures import cd_diagram, curves_figure, save_figure, severity_figure
from robustbench_dgsa.report.findings import findings_section
from robustbench_dgsa.report.tables import (LATEX_PREAMBLE, Table, fmt_count, fmt_mean_sd, fmt_num, fmt_p, md_escape,
                                            md_inline, printable)

#: the paper's published numbers: package data, so every install (wheel, editable, checkout) has them
PUBLISHED_CSV = resources.files("robustbench_dgsa.report") / "published.csv"

_SOURCE_LABELS = {"regenerated": "CIFAR-C corruptions, regenerated", "on-the-fly": "CIFAR-C corruptions, on the fly",
                  "official": "official CIFAR-C files"}
WIDE_TABLE = 5      # an HTML table of this many columns or more shows a "scroll sideways" hint on a narrow screen
ACC_SCALE = 100.0   # store accuracies are fractions; the report prints percent
REPORT_KIND = "dgsa-bench report"   # marks a manifest.json as a report's own (only those files are ever removed)

SECTIONS = (
    ("findings", "Findings"),
    ("caveats", "Warnings and caveats"),
    ("accuracy", "Clean accuracy (Tables 1 and 3)"),
    ("severity", "Accuracy vs corruption severity (Figure 4)"),
    ("robustness", "Robustness summary"),
    ("significance", "Statistical comparisons"),
    ("curves", "Training and validation curves (Figure 5)"),
    ("rollout", "Attention rollout (Figures 2 and 3)"),
    ("efficiency", "Efficiency (Table 9)"),
    ("published", "The paper's published numbers"),
)


# ------------------------------------------------------------------------------------------- published
def load_published(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The paper's published numbers (Tables 1, 2, 3, 7, 8, 9) as a tidy frame.

    Columns: table, dataset, model, variant, proj, drop, metric, mean (float), sd (float, NaN when not
    printed), unit, note, and mean_text / sd_text (the numbers as the paper prints them). ``dataset`` is a
    suite name (``cifar10``, ``imdb``, ...); a value like ``fashion-mnist|svhn`` marks a cell whose column is
    ambiguous in the paper's text (see ``note``).
    """
    src = Path(path) if path is not None else PUBLISHED_CSV
    if not src.is_file():
        raise UserError(f"published values not found: {src}")
    with src.open("r", encoding="utf-8") as f:
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
    df["mean_text"], df["sd_text"] = df["mean"], df["sd"]
    df["mean"] = pd.to_numeric(df["mean"])
    df["sd"] = pd.to_numeric(df["sd"].replace("", np.nan))
    return df


def proj_label(ratio: float) -> str:
    """The paper's "proj." label of an FFN ratio: 2, 4, 16/3."""
    for label, value in (("2", 2.0), ("4", 4.0), ("16/3", 16 / 3)):
        if abs(float(ratio) - value) < 1e-3:
            return label
    return f"{float(ratio):g}"


def paper_variant(model_cfg: dict[str, Any] | None) -> tuple[str, str]:
    """(proj, drop) of a model config as the paper labels its rows; ("", "") for the GELU baselines."""
    if not model_cfg or model_cfg.get("ffn", "swiglu") != "swiglu" or model_cfg.get("attention") == "mhsa":
        return "", ""
    return proj_label(model_cfg.get("ffn_ratio", 4.0)), "2" if model_cfg.get("ffn_dropout2") else "1"


def published_value(pub: pd.DataFrame, dataset: str, model: str, *, tables: Sequence[str],
                    metric: str = "accuracy", proj: str = "", drop: str = "") -> pd.Series | None:
    """The published row for (dataset, model, variant) in one of ``tables``, or None.

    A row whose ``drop`` is empty (Table 3 prints no dropout) matches any dropout count.
    """
    sub = pub[pub["table"].isin(list(tables)) & (pub["model"] == model) & (pub["metric"] == metric)]
    if sub.empty:  # a model the paper does not have (e.g. a benchmarked outside model)
        return None
    sub = sub[[dataset in d.split("|") for d in sub["dataset"]]]
    sub = sub[(sub["proj"] == proj) & ((sub["drop"] == drop) | (sub["drop"] == ""))]
    return None if sub.empty else sub.iloc[0]


# ------------------------------------------------------------------------------------------- helpers
_order = model_order


def dataset_label(name: str) -> str:
    """The dataset registry's label (cifar10 -> CIFAR-10), without control characters."""
    return printable(_registry_dataset_label(name), cell=True)


def display_name(name: str) -> str:
    """The registry's display name (vit -> ViT); a name from the data without control characters (a NUL would
    break a figure's font lookup and every format the report writes)."""
    return printable(_registry_name(name), cell=True)


def _model_labels(models) -> dict[str, str]:
    return {m: display_name(m) for m in models}


def _rows_sha256(rows: pd.DataFrame) -> str:
    if rows.empty:
        return hashlib.sha256(b"").hexdigest()
    cols = sorted(rows.columns)
    body = rows[cols].sort_values(cols, kind="stable").to_csv(index=False, lineterminator="\n")
    return hashlib.sha256(body.encode()).hexdigest()


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


#: said wherever a frost number or image made with the procedural substitute appears
PROCEDURAL_FROST_NOTE = ("Frost here uses the procedural substitute textures, not the reference frost photographs: "
                         "its numbers (and mCA, mCE and the weather group, which include it) are not comparable with "
                         "CIFAR-10-C.")
_FROST_GROUP = next(g for g, members in metrics.CORRUPTION_GROUPS.items() if "frost" in members)


def _condition_label(rep: "_Report", ds: str, condition: str) -> str:
    """A corruption's name for a panel or a table row; frost made with the procedural substitute says so."""
    label = condition.replace("_", " ")
    return f"{label} (procedural)" if condition == "frost" and rep.procedural_frost(ds) else label


def _condition_order(conditions, modality: str) -> list[str]:
    if modality == "text":
        order: Sequence[str] = TEXT_NOISE_TYPES
    else:
        order = metrics.IMAGE_CORRUPTIONS
    conditions = set(conditions) - {metrics.CLEAN}
    return [c for c in order if c in conditions] + sorted(c for c in conditions if c not in order)


@dataclass
class Artefact:
    section: str
    key: str
    title: str
    files: dict[str, str]                      # format -> path relative to the report folder
    caption: str = ""
    image: str | None = None                   # PNG shown inline
    table_html: str | None = None              # table shown inline (HTML index)
    table_md: str | None = None                # table shown inline (Markdown index)
    sources: str | None = None                 # sidecar, relative
    provenance: str = ""                       # one-line summary of the sidecar
    n_columns: int = 0                         # columns of the inline table (a wide one gets a scroll hint)


@dataclass
class _Report:
    store_dir: Path
    out_dir: Path
    df: pd.DataFrame
    runs: dict[str, dict[str, Any]]
    final_dir: Path | None = None               # where the report ends up (out_dir may be a staging folder)
    artefacts: list[Artefact] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)   # (section, title, reason)
    warnings: list[str] = field(default_factory=list)
    cell_tests: bool = False                    # some cell-level tests were shown (caveat)

    _by_dataset: dict[str, pd.DataFrame] = field(default_factory=dict)

    _frost: dict[str, str] | None = None

    def procedural_frost(self, dataset: str) -> bool:
        """Whether frost on ``dataset`` was made with the procedural substitute textures (run provenance /
        corruption manifest say so): every frost number and image of it is then marked."""
        if self._frost is None:
            self._frost = _frost_substitutes(self)
        return dataset in self._frost

    def rel(self, path: str | os.PathLike) -> str:
        """``path`` relative to the report folder (``../store``): a report names no absolute path of the machine
        that built it, and stays right when report and store move together."""
        here = (self.final_dir or self.out_dir).resolve()
        try:
            return Path(os.path.relpath(Path(path).resolve(), here)).as_posix()
        except ValueError:   # another drive (Windows): no relative path exists
            return Path(path).name

    def rows_of(self, dataset: str) -> pd.DataFrame:
        """All store rows of one dataset (cached: the metrics helpers then scan only these)."""
        if dataset not in self._by_dataset:
            self._by_dataset[dataset] = self.df[self.df["dataset"] == dataset].reset_index(drop=True)
        return self._by_dataset[dataset]

    # -- sources ---------------------------------------------------------------------------------------
    def _write_sources(self, stem: str, rows: pd.DataFrame, extra: dict[str, Any] | None = None
                       ) -> tuple[str, str]:
        stem = safe_name(stem)
        rows = rows if rows is not None else self.df.iloc[0:0]
        run_ids = sorted(set(rows["run_id"])) if len(rows) else []
        commits = sorted(set(rows["git_commit"]) - {""}) if len(rows) else []
        info = {
            "artefact": stem,
            "store": self.rel(self.store_dir),
            "n_rows": int(len(rows)),
            "rows_sha256": _rows_sha256(rows),
            "run_ids": run_ids,
            "config_hashes": sorted(set(rows["config_hash"]) - {""}) if len(rows) else [],
            "git_commits": commits,
            "package_versions": sorted(set(rows["package_version"]) - {""}) if len(rows) else [],
            "datasets": sorted(set(rows["dataset"]) - {""}) if len(rows) else [],
            "models": sorted(set(rows["model"]) - {""}) if len(rows) else [],
            "kinds": sorted(set(rows["kind"]) - {""}) if len(rows) else [],
        }
        if extra:
            info.update(extra)
        rel = f"{stem}.sources.json"
        atomic.write_json(self.out_dir / rel, info)
        short = ", ".join(c[:10] for c in commits[:3]) + (" …" if len(commits) > 3 else "")
        summary = (f"{len(rows)} rows from {len(run_ids)} runs"
                   + (f", git {short}" if commits else "")
                   + f"; rows sha256 {info['rows_sha256'][:12]}")
        if extra and "published_sha256" in extra:
            summary += f"; published values sha256 {extra['published_sha256'][:12]}"
        return rel, summary

    # -- artefacts -------------------------------------------------------------------------------------
    def figure(self, section: str, stem: str, title: str, fig, rows: pd.DataFrame, caption: str = "",
               extra: dict[str, Any] | None = None) -> None:
        stem = safe_name(stem)  # stems carry dataset names from the store
        png, pdf = save_figure(fig, self.out_dir, stem)
        src, prov = self._write_sources(stem, rows, extra)
        self.artefacts.append(Artefact(section, stem, title, {"PNG": png.name, "PDF": pdf.name}, caption,
                                       image=png.name, sources=src, provenance=prov))

    def files(self, section: str, stem: str, title: str, files: dict[str, str], rows: pd.DataFrame,
              caption: str = "", image: str | None = None, extra: dict[str, Any] | None = None) -> None:
        stem = safe_name(stem)  # stems carry dataset names from the store
        src, prov = self._write_sources(stem, rows, extra)
        self.artefacts.append(Artefact(section, stem, title, files, caption, image=image, sources=src,
                                       provenance=prov))

    def table(self, section: str, stem: str, title: str, table: Table, rows: pd.DataFrame,
              extra: dict[str, Any] | None = None) -> None:
        stem = safe_name(stem)  # stems carry dataset names from the store
        if not table.caption:
            table.caption = title
        atomic.write_text(self.out_dir / f"{stem}.md", table.to_markdown())
        atomic.write_text(self.out_dir / f"{stem}.tex", table.to_latex(label=f"tab:{stem}"))
        src, prov = self._write_sources(stem, rows, extra)
        self.artefacts.append(Artefact(section, stem, title, {"Markdown": f"{stem}.md", "LaTeX": f"{stem}.tex"},
                                       table_html=table.to_html(caption=False),
                                       table_md=table.to_markdown(caption=False),
                                       sources=src, provenance=prov, n_columns=len(table.columns)))

    def skip(self, section: str, title: str, reason: str) -> None:
        self.skipped.append((section, title, reason))

    def attempt(self, section: str, title: str, fn: Callable[[], None]) -> None:
        """Run one recipe; a data problem (UserError, ValueError, KeyError) skips it with a note."""
        try:
            fn()
        except (UserError, ValueError, KeyError) as e:
            self.skip(section, title, f"could not be made: {e}")


# ------------------------------------------------------------------------------------------- recipes
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


def _accuracy_tables(rep: _Report, pub: pd.DataFrame, pub_sha: str, datasets: dict[str, str],
                     cfgs: dict[str, dict[str, Any]]) -> None:
    for modality, stem, number, paper_tables in (("image", "table1_accuracy_vision", "1", ("1", "2")),
                                                  ("text", "table3_accuracy_text", "3", ("3",))):
        title = f"Table {number}: clean test accuracy (%), mean ± SD over seeds, ours beside the paper's"
        dsets = [d for d, m in datasets.items() if m == modality]
        if not dsets:
            rep.skip("accuracy", f"Table {number}", f"no {'image' if modality == 'image' else 'text'} "
                     "evaluation results in the store")
            continue
        records, notes, used_rows = [], [], []
        ambiguous = False
        for ds in dsets:
            clean = metrics.clean_accuracy(rep.rows_of(ds), dataset=ds)
            if clean.empty:
                continue
            d = rep.rows_of(ds)
            raw = d[(d["kind"] == "eval") & (d["condition"] == "clean") & (d["metric"] == "accuracy")]
            used_rows.append(raw)
            for model in _order(clean["model"]):
                vals = clean.loc[clean["model"] == model, "value"].to_numpy(float) * ACC_SCALE
                sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else float("nan")
                h = sorted(set(raw.loc[raw["model"] == model, "config_hash"]))
                cfg = cfgs.get(h[0]) if h else None
                proj, drop = paper_variant(cfg["model"] if cfg else None)
                p = published_value(pub, ds, model, tables=paper_tables, proj=proj, drop=drop)
                if p is not None:
                    ambiguous |= "|" in p["dataset"]
                    ptxt = f"{p['mean_text']} ± {p['sd_text']}" + ("†" if "|" in p["dataset"] else "")
                    pref = f"Table {p['table']}" + (f", {p['variant']}" if p["variant"] else "")
                    delta = f"{float(np.mean(vals)) - p['mean']:+.2f}"
                else:
                    in_paper = bool(pub[[ds in d.split("|") for d in pub["dataset"]]].shape[0])
                    ptxt, pref, delta = "—", ("no row for this model/variant" if in_paper
                                               else "dataset not in the paper"), "—"
                if len(h) > 1:
                    rep.warnings.append(f"{ds}/{model}: {len(h)} different configs pooled in Table {number}")
                records.append([dataset_label(ds), display_name(model), fmt_mean_sd(float(np.mean(vals)), sd),
                                str(len(vals)), ptxt, pref, delta])
        if not records:
            rep.skip("accuracy", f"Table {number}", "no clean accuracy rows")
            continue
        notes.append("Ours: clean accuracy on the test split, mean ± sample SD (ddof 1) over training seeds; "
                     "SD is blank with one seed. Paper: as printed (5 seeds).")
        notes.append("Datasets the paper does not report (e.g. the embedded synthetic sets) have no paper value; "
                     "the paper's full tables are under 'The paper's published numbers'.")
        if ambiguous:
            notes.append("† The paper's text gives three values for four dataset columns in the DViT/DGViT rows "
                         "of Table 1; the third is FashionMNIST or SVHN.")
        t = Table(["Dataset", "Model", "Ours (%)", "Seeds", "Paper (%)", "Paper row", "Δ ours − paper"],
                  records, title, notes, align="llrrrlr")
        rep.table("accuracy", stem, title, t, pd.concat(used_rows), extra={"published": str(PUBLISHED_CSV.name),
                                                                         "published_sha256": pub_sha})


def _severity_figures(rep: _Report, datasets: dict[str, str]) -> None:
    for ds, modality in datasets.items():
        title_short = f"Figure 4 — {dataset_label(ds)}"
        rows = metrics.eval_rows(rep.rows_of(ds), dataset=ds)
        if rows.empty or not (rows["condition"] != metrics.CLEAN).any():
            rep.skip("severity", title_short, "no corrupted / noisy evaluation rows")
            continue
        rows = rows.assign(value=rows["value"] * ACC_SCALE)
        clean = rows[rows["condition"] == metrics.CLEAN]
        cor = rows[(rows["condition"] != metrics.CLEAN) & (rows["severity"] >= 1)]
        conds = _condition_order(cor["condition"], modality)
        models = _order(rows["model"])
        if modality == "text":
            mean_panel = (f"mean of {len(conds)} noise types", conds)
            cond_labels = {c: c.replace("_", " ") for c in conds}
            what = "text noise"
        else:
            bench = [c for c in conds if c in metrics.BENCHMARK_CORRUPTIONS]
            mean_panel = (f"mean of {len(bench)} benchmark corruptions", bench) if bench else None
            cond_labels = {c: _condition_label(rep, ds, c) + (" (extra)" if c in metrics.EXTRA_CORRUPTIONS else "")
                           for c in conds}
            srcs = sorted(set(cor["source"]) - {""})
            what = ", ".join(_SOURCE_LABELS.get(s, s) for s in srcs) or "corruptions"
        seeds = sorted(set(rows["seed"]))
        title = (f"{dataset_label(ds)}: accuracy vs severity ({what}); "
                 f"mean and 95% t-interval over {len(seeds)} seed{'s' if len(seeds) != 1 else ''}.")
        fig = severity_figure(cor, clean, conds, models, labels=_model_labels(models),
                              mean_panel=mean_panel, condition_labels=cond_labels)
        if fig is None:
            rep.skip("severity", title_short, "nothing to draw")
            continue
        d = rep.rows_of(ds)
        raw = d[(d["kind"] == "eval") & (d["metric"] == "accuracy")]
        caption = (f"{title} One panel per {'noise type' if modality == 'text' else 'corruption'} "
                   f"(severity 0 = clean), one line per model, band = 95% t-interval over seeds. ")
        if mean_panel:
            caption += (f"The first panel (bold) is the per-seed mean over the "
                        f"{mean_panel[0].split('of ')[-1]}.")
        if "frost" in conds and rep.procedural_frost(ds):
            caption += f" {PROCEDURAL_FROST_NOTE}"
        rep.figure("severity", f"fig4_severity_{ds}", title_short, fig, raw, caption)


def _curve_figures(rep: _Report, datasets: dict[str, str]) -> None:
    for ds in datasets:
        title_short = f"Figure 5 — {dataset_label(ds)}"
        tr = rep.rows_of(ds)
        tr = tr[(tr["kind"] == "train") & (tr["epoch"] >= 0)]
        sub = tr[tr["metric"].isin(["loss", "accuracy"]) & tr["split"].isin(["train", "val"])]
        if sub.empty:
            rep.skip("curves", title_short, "no per-epoch training rows")
            continue
        sub = sub.sort_values("created", kind="stable").drop_duplicates(
            ["model", "seed", "split", "metric", "epoch"], keep="last")
        plot = sub.assign(value=np.where(sub["metric"] == "accuracy", sub["value"] * ACC_SCALE, sub["value"]))
        models = _order(sub["model"])
        seeds = sorted(set(sub["seed"]))
        title = (f"{dataset_label(ds)}: training (dashed) and validation (solid) curves; "
                 f"mean and 95% t-interval over {len(seeds)} seed{'s' if len(seeds) != 1 else ''}.")
        fig = curves_figure(plot, models, labels=_model_labels(models))
        if fig is None:
            rep.skip("curves", title_short, "nothing to draw")
            continue
        rep.figure("curves", f"fig5_curves_{ds}", title_short, fig, sub,
                   f"{title} Loss and accuracy per epoch on the training and validation splits; colour and "
                   "marker = model.")


def _robustness_tables(rep: _Report, datasets: dict[str, str], reference: str | None) -> None:
    for ds, modality in datasets.items():
        title = f"Robustness summary: {dataset_label(ds)}"
        d = rep.rows_of(ds)
        rows = metrics.eval_rows(d, dataset=ds)
        if rows.empty or not (rows["condition"] != metrics.CLEAN).any():
            rep.skip("robustness", title, "no corrupted / noisy evaluation rows")
            continue
        summ = metrics.robustness_summary(d, dataset=ds, partial=True)
        models = _order(summ["model"])
        raw = d[d["kind"] == "eval"]

        def ms(model: str, col: str, scale: float = ACC_SCALE) -> str:
            v = summ.loc[summ["model"] == model, col].astype(float).dropna().to_numpy() * scale
            if not len(v):
                return "—"
            return fmt_mean_sd(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else None)

        over, title_seeds = _seed_words(sorted(set(rows["seed"])))
        title += title_seeds
        notes = [f"{over} Accuracies in %.",
                 "† Retention = robust accuracy / clean accuracy, in %: a ratio, not a ranking of robustness — it "
                 "favours a weak model (a model at chance accuracy keeps 100 % of it under any corruption); read it "
                 "beside Clean and mCA / mNA."]
        if modality == "image":
            frost = rep.procedural_frost(ds) and (rows["condition"] == "frost").any()
            mark = (lambda c: f"{c}‡") if frost else (lambda c: c)  # noqa: E731
            cols = ["Model", "Clean", mark("mCA"), mark("mCE"), "Retention†",
                    *(mark(g) if g == _FROST_GROUP else g for g in metrics.CORRUPTION_GROUPS),
                    f"extra ({len(metrics.EXTRA_CORRUPTIONS)})"]
            if frost:
                notes.append(f"‡ {PROCEDURAL_FROST_NOTE}")
            recs = []
            for m in models:
                recs.append([display_name(m), ms(m, "clean"), ms(m, "mCA"), ms(m, "mCE"), ms(m, "retention"),
                             *(ms(m, g) for g in metrics.CORRUPTION_GROUPS), ms(m, "extra")])
            cells = summ["mCA_cells"].max()
            if (~summ["mCA_complete"]).any():
                notes.append(f"mCA over the benchmark cells present ({int(cells)} of 75): not comparable with a "
                             "full 15 × 5 mCA. Missing: " + str(summ.loc[~summ["mCA_complete"], "mCA_missing"]
                                                                   .iloc[0])[:300])
            notes.append("mCE is unnormalised (1 − mCA). Groups: Hendrycks & Dietterich's noise / blur / weather / "
                         "digital; the 4 extra corruptions never enter mCA.")
        else:
            cols = ["Model", "Clean", "mNA", "Retention†"]
            recs = [[display_name(m), ms(m, "clean"), ms(m, "mNA"), ms(m, "retention")] for m in models]
            if (~summ["mNA_complete"]).any():
                notes.append("mNA over the noise cells present (some types/severities missing).")
            notes.append("mNA = mean accuracy over the noise types present × severities 1–5.")
        t = Table(cols, recs, title, notes)
        rep.table("robustness", f"robustness_{ds}", title, t, raw)
        if modality == "image":
            ref = reference if reference in models else reference_model(models, modality)
            if ref is not None and ref in models:
                rep.attempt("robustness", f"Relative CE ({dataset_label(ds)})",
                            lambda ds=ds, ref=ref, raw=raw: _relative_ce(rep, ds, ref, raw))
        else:
            _text_noise_table(rep, ds, raw)


def _relative_ce(rep: _Report, ds: str, ref: str, raw: pd.DataFrame) -> None:
    per, summary = metrics.reference_ce(rep.rows_of(ds), ref, dataset=ds)
    if per.empty:
        rep.skip("robustness", f"Relative CE ({dataset_label(ds)})", "no benchmark corruption cells")
        return
    conds = _condition_order(per["corruption"], "image")
    models = _order(per["model"])
    ce = {(r.model, r.corruption): r.ce for r in per.itertuples(index=False)}
    rel = dict(zip(summary["model"], summary["rel_mCE"]))
    recs = [["rel. mCE (mean)"] + [fmt_num(float(rel[m]) * 100, 1) if m in rel else "—" for m in models]]
    for c in conds:
        recs.append([_condition_label(rep, ds, c)] + [fmt_num(float(ce[(m, c)]) * 100, 1) if (m, c) in ce else "—"
                                                      for m in models])
    title = f"Corruption error relative to {display_name(ref)}: {dataset_label(ds)}"
    notes = [f"CE_c = Σ_s err_model(c, s) / Σ_s err_{display_name(ref)}(c, s) on seed-averaged errors, in %; "
             f"rel. mCE = mean CE over the benchmark corruptions present. The reference is a user choice; "
             f"this is not the AlexNet-normalised mCE."]
    if not summary["complete"].all():
        notes.append("Not all 15 benchmark corruptions × 5 severities are present: rel. mCE is partial.")
    if "frost" in conds and rep.procedural_frost(ds):
        recs[0][0] += "‡"
        notes.append(f"‡ {PROCEDURAL_FROST_NOTE}")
    t = Table(["Corruption"] + [display_name(m) for m in models], recs, title, notes)
    rep.table("robustness", f"relative_ce_{ds}", title, t, raw)


def _text_noise_table(rep: _Report, ds: str, raw: pd.DataFrame) -> None:
    title = f"Text noise: realised error rates and accuracy ({dataset_label(ds)})"
    d = rep.rows_of(ds)
    acc = metrics.cell_accuracy(d, dataset=ds, kinds=["text"])
    if acc.empty:
        return
    rates = {}
    for metric in ("cer", "wer"):
        r = metrics.eval_rows(d, dataset=ds, metric=metric)
        r = r[r["condition"] != metrics.CLEAN]
        rates[metric] = r.groupby(["condition", "severity"])["value"].mean()
    by = acc.groupby(["condition", "severity", "model"])["value"].mean().unstack("model")
    models = _order(acc["model"])
    recs = []
    for (cond, sev) in sorted(by.index, key=lambda k: (_condition_order(acc["condition"], "text").index(k[0]), k[1])):
        row = [cond.replace("_", " "), str(int(sev))]
        for metric in ("cer", "wer"):
            s = rates[metric]
            row.append(fmt_num(float(s.loc[(cond, sev)]) * 100, 1) if (cond, sev) in s.index else "—")
        for m in models:
            v = by.loc[(cond, sev)].get(m, float("nan"))
            row.append(fmt_num(float(v) * ACC_SCALE, 1))
        recs.append(row)
    notes = ["CER / WER: realised character / word error rate of the noisy test texts against the clean ones, "
             "in %, averaged over the runs that measured it; accuracy: mean over seeds, in %."]
    t = Table(["Noise", "Severity", "CER (%)", "WER (%)"] + [f"{display_name(m)} acc. (%)" for m in models],
              recs, title, notes, align="lr" + "r" * (2 + len(models)))
    rep.table("robustness", f"text_noise_{ds}", title, t, raw)


def _efficiency_table(rep: _Report, pub: pd.DataFrame, pub_sha: str) -> None:
    title = "Table 9: parameters, FLOPs, throughput, latency, peak memory"
    bench = rep.df[rep.df["kind"] == "bench"]
    ours_cols = [("params", "Params", fmt_count, 1.0),
                 ("flops", "G mult-adds / sample", lambda v: fmt_num(v, 4), 0.5e-9),
                 ("train_throughput", "Throughput (samples/s)", lambda v: fmt_num(v, 1), 1.0),
                 ("latency_ms", "Latency (ms)", lambda v: fmt_num(v, 2), 1.0),
                 ("peak_memory_mb", "Peak train memory (MB)", lambda v: fmt_num(v, 1), 1.0)]
    recs = []
    if not bench.empty:
        bench = bench.sort_values("created", kind="stable")
        for (ds, src), g in bench.groupby(["dataset", "source"], sort=True):
            for m in _order(g["model"]):
                gm = g[g["model"] == m]
                row = [_device_label(src), dataset_label(ds), display_name(m)]
                for metric, _, f, scale in ours_cols:
                    v = gm.loc[gm["metric"] == metric, "value"]
                    row.append(f(float(v.mean()) * scale) if len(v) else "—")
                recs.append(row)
    bench_ds = set(bench["dataset"]) if not bench.empty else set()
    p9 = pub[pub["table"] == "9"]
    paper_ds = [d for d in dict.fromkeys(p9["dataset"]) if d in bench_ds] or ["cifar10"]
    for ds in paper_ds:
        g = p9[p9["dataset"] == ds]
        for m in _order(g["model"]):
            gm = g[g["model"] == m]
            val = dict(zip(gm["metric"], gm["mean_text"]))
            recs.append(["paper (A10G, 224×224/16)", dataset_label(ds), display_name(m),
                         fmt_count(float(val["params"])), val["flops"], val["throughput_img"], val["latency"],
                         val["peak_train_memory"]])
    if bench.empty:
        rep.skip("efficiency", "Table 9 (ours)", "no benchmark rows (kind=bench) in the store: "
                 "only the paper's values are shown")
    notes = ["Ours: measured at the preset's model size (the trained checkpoint) on the device named in the first "
             "column: throughput = training samples per second (forward + backward + AdamW step); latency = one "
             "forward pass of one training-size batch; peak train memory = CUDA peak allocation during a training "
             "step, or on CPU parameters + gradients + AdamW state + the activations saved for backward; "
             "multiply-adds analytic per sample (robustbench_dgsa.models.flops: FLOPs / 2).",
             "Paper: Table 9 as printed (ViT×4 / DViT×4 / DGViT×4 at 224×224, patch 16, on an A10G; its "
             "'FLOPs / Img' are multiply-adds; throughput in img/s; memory = 'Peak Train Mem'). The absolute "
             "numbers are not comparable (other size, device and data); the ratios between models are."]
    notes.append(_load_note(rep, bench))
    t = Table(["Source", "Dataset", "Model"] + [c[1] for c in ours_cols], recs, title, notes, align="lll" + "r" * 5)
    rep.table("efficiency", "table9_efficiency", title, t, bench,
              extra={"published": PUBLISHED_CSV.name, "published_sha256": pub_sha})


def _load_note(rep: _Report, bench: pd.DataFrame) -> str:
    """Under Table 9: the machine load each of our timings was measured under (1-minute load average / cores,
    read by the benchmark right after its timed steps; rows ``load_avg_1m``, provenance ``cpu_cores``)."""
    if bench.empty:
        return "Machine load: no timings of ours."
    load = bench[bench["metric"] == "load_avg_1m"]
    load = load[np.isfinite(load["value"].astype(float))]
    if load.empty:
        return ("Machine load during our timings: not recorded (measured before the benchmark recorded it); "
                "timings on a busy machine are slower.")
    parts = []
    for r in load.itertuples(index=False):
        cores = (rep.runs.get(r.run_id) or {}).get("cpu_cores")
        parts.append(f"{display_name(r.model)} {float(r.value):.2f}" + (f" on {int(cores)} cores" if cores else ""))
    busy = any(float(r.value) > float((rep.runs.get(r.run_id) or {}).get("cpu_cores") or np.inf)
               for r in load.itertuples(index=False))
    return ("Machine load during our timings (1-minute load average read right after the timed steps): "
            + "; ".join(parts) + "." + (" A load above the core count means other work shared the CPUs: "
                                        "throughput and latency are slower than on an idle machine." if busy else ""))


def _device_label(src: str) -> str:
    """"cpu:x86_64x2" -> "ours (CPU, 2 threads)"; "cuda:NVIDIA H100" -> "ours (NVIDIA H100)"."""
    kind, _, rest = src.partition(":")
    if kind == "cpu" and "x" in rest:
        threads = rest.rsplit("x", 1)[1]
        return f"ours (CPU, {threads} thread{'' if threads == '1' else 's'})"
    return f"ours ({rest or src})" if src else "ours"


_PAPER_TITLES = {
    "1": "Paper Table 1: accuracy (%) on small vision benchmarks, mean ± SD over 5 seeds",
    "2": "Paper Table 2: accuracy (%) on ImageNet-1k, mean ± SD over 5 seeds",
    "3": "Paper Table 3: accuracy (%) on language benchmarks, mean ± SD over 5 seeds",
    "7": "Paper Table 7: learnable parameters (millions), language benchmarks",
    "8": "Paper Table 8: MNLI parameters, memory and GFLOPs",
    "9": "Paper Table 9: performance and resource metrics (224×224, patch 16)",
}


def _published_tables(rep: _Report, pub: pd.DataFrame, pub_sha: str) -> None:
    empty = rep.df.iloc[0:0]
    for table, title in _PAPER_TITLES.items():
        g = pub[pub["table"] == table]
        if g.empty:
            continue
        cell = {(r.dataset, r.model, r.variant, r.metric): r for r in g.itertuples(index=False)}
        is9 = table == "9"
        by_dataset = table in ("1", "2", "3", "7")
        marks = _NoteMarks(g, "dataset" if by_dataset else "metric", ["model", "variant"] if by_dataset
                           else ["dataset", "model", "variant"])
        recs = []
        if by_dataset:
            cols = list(dict.fromkeys(g["dataset"]))
            metric = g["metric"].iloc[0]
            for m, v in dict.fromkeys(zip(g["model"], g["variant"])):
                row = [display_name(m) + marks.row((m, v)), v or "—"]
                for d in cols:
                    c = cell.get((d, m, v, metric))
                    if c is None:
                        row.append("—")
                    else:
                        text = f"{c.mean_text}M" if table == "7" else \
                            (f"{c.mean_text} ± {c.sd_text}" if c.sd_text else c.mean_text)
                        row.append(text + marks.cell(c))
                recs.append(row)
            header = ["Model", "Variant"] + [("FashionMNIST or SVHN" if "|" in d else dataset_label(d))
                                             + marks.column(d) for d in cols]
        else:
            metrics_order = list(dict.fromkeys(g["metric"]))
            units = {m: g.loc[g["metric"] == m, "unit"].iloc[0] for m in metrics_order}
            for d, m, v in dict.fromkeys(zip(g["dataset"], g["model"], g["variant"])):
                row = ([dataset_label(d)] if is9 else []) + [display_name(m) + marks.row((d, m, v)), v or "—"]
                for met in metrics_order:
                    c = cell.get((d, m, v, met))
                    row.append("—" if c is None else (fmt_count(c.mean) if units[met] == "count" else c.mean_text)
                               + marks.cell(c))
                recs.append(row)
            header = (["Dataset"] if is9 else []) + ["Model", "Variant"] + [
                f"{met.replace('_', ' ')} ({units[met]})" + marks.column(met) for met in metrics_order]
        n_left = 3 if is9 else 2
        t = Table(header, recs, title, marks.notes() + ["Typed in from the paper's text; see results/README.md."],
                  align="l" * n_left + "r" * (len(header) - n_left))
        rep.table("published", f"paper_table{table}", title, t, empty,
                  extra={"published": PUBLISHED_CSV.name, "published_sha256": pub_sha})


class _NoteMarks:
    """Footnote marks of a published table tied to what they are about: each part of a ``note`` ("a; b") that
    holds for every value of the table is a plain note; one that holds for exactly the values of some columns
    marks those columns' headers; of some rows, those rows' model cells; otherwise each value it is about."""

    SYMBOLS = ("¹", "²", "³", "⁴")

    def __init__(self, g: pd.DataFrame, col: str, row: list[str]) -> None:
        recs = list(g.itertuples(index=False))
        self._keys = {_rec_key(r): (getattr(r, col), tuple(getattr(r, k) for k in row)) for r in recs}
        parts: dict[str, list[Any]] = {}
        for r in recs:
            for part in dict.fromkeys(p.strip() for p in str(r.note).split(";") if p.strip()):
                parts.setdefault(part, []).append(r)
        self._general = [p for p, rs in parts.items() if len(rs) == len(recs)]
        self._order: list[str] = []
        self._col: dict[Any, list[str]] = {}
        self._row: dict[Any, list[str]] = {}
        self._cell: dict[tuple, list[str]] = {}
        for part, rs in parts.items():
            if part in self._general:
                continue
            cols = {self._keys[_rec_key(r)][0] for r in rs}
            rows = {self._keys[_rec_key(r)][1] for r in rs}
            self._order.append(part)
            if len(rs) == sum(self._keys[_rec_key(r)][0] in cols for r in recs):   # whole columns
                for c in cols:
                    self._col.setdefault(c, []).append(part)
            elif len(rs) == sum(self._keys[_rec_key(r)][1] in rows for r in recs):   # whole rows
                for k in rows:
                    self._row.setdefault(k, []).append(part)
            else:
                for r in rs:
                    self._cell.setdefault(_rec_key(r), []).append(part)

    def _mark(self, parts: list[str]) -> str:
        return "".join(self.SYMBOLS[i] if i < len(self.SYMBOLS) else f"[{i + 1}]"
                       for i in sorted(self._order.index(p) for p in parts))

    def column(self, key: Any) -> str:
        return self._mark(self._col.get(key, []))

    def row(self, key: Any) -> str:
        return self._mark(self._row.get(key, []))

    def cell(self, rec: Any) -> str:
        return self._mark(self._cell.get(_rec_key(rec), []))

    def notes(self) -> list[str]:
        """The footnotes, each after its mark, then the notes that hold for the whole table."""
        return [f"{self._mark([p])} {p}" for p in self._order] + [f"Note: {p}" for p in self._general]


def _rec_key(r: Any) -> tuple:
    """A published value's identity (dataset, model, variant, metric)."""
    return (r.dataset, r.model, r.variant, r.metric)


def _significance(rep: _Report, datasets: dict[str, str], reference: str | None) -> None:
    """The comparisons of ``dgsa-bench compare`` (:func:`analysis.compare.run_compare`), formatted for the report:
    first the seed-level tests (the claim), then the cell-level tests as consistency across conditions."""

    for ds, modality in datasets.items():
        label = dataset_label(ds)
        d = rep.rows_of(ds)
        raw = d[d["kind"] == "eval"]
        models = _order(metrics.eval_rows(d, dataset=ds)["model"])
        if len(models) < 2:
            rep.skip("significance", f"Comparisons ({label})", "fewer than two models evaluated")
            continue
        ref = reference if reference in models else reference_model(models, modality)
        # reversed order: every pair reads "later (gated / differential) model − earlier (vanilla) model"
        cmp = run_compare(d, dataset=ds, models=list(reversed(models)), reference=ref, all_pairs=True,
                          partial=True, store_label=rep.rel(rep.store_dir))
        n_seeds = int(cmp.info["n_seeds"].get(ds, 0))
        _seed_table(rep, ds, cmp, raw, n_seeds)
        kind = "text-noise" if modality == "text" else "benchmark corruption"
        _cell_tables(rep, ds, cmp, raw, n_seeds, kind)
        rep.warnings += [f"{label}: {w}" for w in _not_in_caveats(cmp.warnings)]
        rep.cell_tests |= bool(cmp.tables.get("wilcoxon_cells") is not None)


#: compare's warnings that the report's caveats already state once for all datasets (seeds below the paper's,
#: cell-level tests sharing models) or that repeat another warning (an incomplete mCA is also "partial")
_SAID_IN_CAVEATS = (re.compile(r"^fewer than \d+ seeds: "), re.compile(re.escape(CELLS_CAVEAT)),
                    re.compile(r"^\S+: (mCA|mNA) incomplete for "))


def _not_in_caveats(warnings: Sequence[str]) -> list[str]:
    """``warnings`` less those the caveats block (or another warning) already says: each said once."""
    return [w for w in warnings if not any(rx.search(w) for rx in _SAID_IN_CAVEATS)]


def _seed_table(rep: _Report, ds: str, cmp, raw: pd.DataFrame, n_seeds: int) -> None:
    label = dataset_label(ds)
    pw = cmp.tables.get("pairwise")
    if pw is None or not len(pw):
        rep.skip("significance", f"Seed-level tests ({label})", "no comparable per-seed measures")
        return
    recs = [[r.condition, f"{display_name(r.model_a)} − {display_name(r.model_b)}", f"{r.n_a}/{r.n_b}",
             fmt_num(r.diff * ACC_SCALE, 2),
             f"[{fmt_num(r.ci_lo * ACC_SCALE, 2)}, {fmt_num(r.ci_hi * ACC_SCALE, 2)}]" if np.isfinite(r.ci_lo)
             else "—",
             r.test, fmt_num(r.t, 2), fmt_num(r.df, 1), fmt_p(r.p), fmt_p(r.p_holm), fmt_num(r.g, 2), r.verdict]
            for r in pw.itertuples(index=False)]
    title = f"Seed-level tests (the claim): {label}"
    fam = [f for f in cmp.families if "t-test" in f]
    notes = ["Δ = A − B in percentage points (mCE: lower is better) with its 95% CI; n = seeds of A/B (independent "
             "training runs); effect size g = Hedges' g. Verdict: significant = Holm-adjusted p < 0.05 within the "
             "family below; a comparison with fewer than 3 seeds per model shows its numbers but is 'not testable' "
             "(left out of the family, never called significant)."] + fam
    if n_seeds < 3:
        notes.append(f"{n_seeds} seed{'s' if n_seeds != 1 else ''} per model: no comparison here is testable.")
    t = Table(["Measure", "A − B", "n (A/B)", "Δ (pp)", "95% CI", "Test", "t", "df", "p", "p (Holm)",
               "Hedges' g", "Verdict"], recs, title, notes, align="llrrrlrrrrrl")
    rep.table("significance", f"significance_seeds_{ds}", title, t, raw)


def _cell_tables(rep: _Report, ds: str, cmp, raw: pd.DataFrame, n_seeds: int, kind: str) -> None:
    label = dataset_label(ds)
    post = "posthoc_wilcoxon" in cmp.tables
    wil = cmp.tables.get("posthoc_wilcoxon", cmp.tables.get("wilcoxon_cells"))
    if wil is None or not len(wil):
        rep.skip("significance", f"Consistency across conditions ({label})", "no corrupted / noisy cells")
        return
    recs = [[f"{display_name(r.model_a)} vs {display_name(r.model_b)}", str(r.n_cells),
             f"{r.wins}/{r.ties}/{r.losses}", fmt_num(r.median_diff * ACC_SCALE, 2), fmt_num(r.W, 1),
             fmt_p(r.p), fmt_p(r.p_holm), f"{r.min_p:.2g}", r.verdict] for r in wil.itertuples(index=False)]
    title = f"Consistency across {kind} conditions (same trained models): {label}"
    fam = [f for f in cmp.families if "Wilcoxon" in f and ("post-hoc" in f) == post]
    notes = [f"Wilcoxon signed-rank over (condition, severity) cells, accuracies averaged over {n_seeds} seed(s). "
             "The cells are conditions of the same trained models, not independent samples: a small p says the "
             "difference is consistent across conditions, not that it holds for new training runs (the seed-level "
             "table is the claim). W/T/L = cells where A is better / equal / worse; effect size = median Δ over "
             "cells (pp); min p = the smallest p attainable with that many non-tied cells."] + fam
    t = Table(["A vs B", "Cells", "W/T/L", "median Δ (pp)", "W", "p", "p (Holm)", "min p", "Verdict"],
              recs, title, notes, align="lrcrrrrrl")
    rep.table("significance", f"significance_cells_{ds}", title, t, raw)
    fr, ranks = cmp.tables.get("friedman"), cmp.tables.get("avg_ranks")
    if fr is None or ranks is None or not len(fr[fr["dataset"] == ds]):
        return
    info = fr[fr["dataset"] == ds].iloc[0]
    rk = ranks[ranks["dataset"] == ds]
    recs = [[display_name(r.model), fmt_num(r.avg_rank, 2), fmt_num(r.mean * ACC_SCALE, 2)]
            for r in rk.itertuples(index=False)]
    title = f"Average ranks over {kind} cells (Friedman): {label}"
    notes = [f"Friedman χ² = {fmt_num(info['statistic'], 3)}, {_p_eq(info['p'])}, k = {info['k']} models, "
             f"N = {info['n_blocks']} cells of the same trained models ({n_seeds} seed(s)); effect size Kendall's "
             f"W = {fmt_num(info['kendall_w'], 2)}; verdict: {info['verdict']}. Rank 1 = best. A test over cells "
             "measures "
             "consistency across conditions, not independent evidence."]
    t = Table(["Model", "Average rank", "Mean acc. (%)"], recs, title, notes)
    rep.table("significance", f"friedman_{ds}", title, t, raw)
    for name, avg, cliques, note in cmp.cd_diagrams:
        if not name.startswith(f"{ds} "):
            continue
        if cliques is None:   # no bars would read as "every pair differs": no diagram at all
            rep.skip("significance", f"Average-rank diagram: {label}",
                     f"not drawn: not testable (n < 3) — {n_seeds} seed{'s' if n_seeds != 1 else ''} per model")
            continue
        named = {display_name(m): float(v) for m, v in avg.items()}
        bars = [[display_name(m) for m in g] for g in cliques]
        fig = cd_diagram(named, bars, note=note)
        what = ("Bars join models that the post-hoc Wilcoxon–Holm table above did not tell apart (the same tests "
                "and correction, so the two cannot disagree)." if bars else
                "No bars: every pair differs — the post-hoc Wilcoxon–Holm table above told every pair of models "
                "apart (Holm-adjusted p < 0.05).")
        rep.figure("significance", f"cd_diagram_{ds}", f"Average-rank diagram: {label}", fig, raw,
                   f"Average rank (1 = best) of each model over {int(info['n_blocks'])} seed-averaged {kind} "
                   f"cells. {what}")


def _p_eq(p: float) -> str:
    """"p = 0.123" or "p < 0.001" for running text."""
    text = fmt_p(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def _rollout_figures(rep: _Report) -> None:
    """Figures 2 and 3 from the rollout sets stored under ``<store>/rollouts`` (never re-running a model)."""

    allowed = set(rep.df["dataset"])
    sets = [s for s in load_rollout_sets(rep.store_dir) if s.dataset in allowed]
    for kind, fig_no in (("image", 2), ("text", 3)):
        dsets = sorted({s.dataset for s in sets if s.kind == kind})
        if not dsets:
            rep.skip("rollout", f"Figure {fig_no}",
                     f"no stored {kind} rollout sets in {rep.rel(rep.store_dir)}/rollouts")
        for ds in dsets:
            label = dataset_label(ds)
            stem = safe_name(f"fig{fig_no}_rollout_{ds}")
            png, pdf = rep.out_dir / f"{stem}.png", rep.out_dir / f"{stem}.pdf"
            files = {"PNG": png.name, "PDF": pdf.name}
            if kind == "image":
                desc = render_figure2(sets, png, pdf, dataset=ds, max_images=4)
                caption = (f"Attention rollout on {label}. Rows: test images (true class at the left); columns: "
                           "the image, then each model's rollout overlaid, with the rollout mode in brackets. One "
                           "scale per model column (colour bar below it): signed modes use the diverging map, "
                           "symmetric about 0 (white = 0, red = excitatory, blue = inhibitory); positive modes the "
                           "sequential viridis map (dark = lowest).")
                if desc is not None and desc.get("salient_outlined"):
                    caption += " Dashed outline: the known salient region of the synthetic image."
            else:
                html_path = rep.out_dir / f"{stem}.html"
                desc = render_figure3(sets, png, pdf, html_path, dataset=ds)
                files["HTML"] = html_path.name
                caption = ("One test text, tokens shaded by each model's rollout relevance (the HTML version shows "
                           "each token's score on hover). Signed modes: diverging map, white = 0, red = positive, "
                           "blue = negative; positive modes: sequential map, white = lowest.")
                if desc is not None:
                    caption = f"{label} test example {desc['index']} (true label: {desc['label']}). " + caption
            if desc is None:
                continue
            caption += " " + _shown_seeds(desc)
            rows = rep.df[rep.df["run_id"].isin(desc["runs"])]
            extra = {"rollout_sets": [{"file": rep.rel(f), "sha256": sha256_file(f)} for f in desc["files"]],
                     "figure": {k: v for k, v in desc.items() if k != "files"}}
            rep.files("rollout", stem, f"Figure {fig_no} — {label}", files, rows, caption, image=png.name,
                      extra=extra)


def _shown_seeds(desc: dict[str, Any]) -> str:
    """Which trained model (seed) each column of a rollout figure shows."""
    seeds = list(desc.get("seeds") or [])
    if not seeds:
        return ""
    if len(set(seeds)) == 1:
        return f"Every column shows the model trained with seed {seeds[0]} (one seed, not an average over seeds)."
    return "Seeds shown: " + ", ".join(f"{display_name(m)} seed {s}" for m, s in zip(desc["models"], seeds)) + "."


def _rollout_numbers(rep: _Report) -> None:
    ro = rep.df[rep.df["kind"] == "rollout"]
    if ro.empty or not ro["metric"].isin(["rollout_mass", "rollout_drift"]).any():
        rep.skip("rollout", "Rollout numbers", "no rollout rows (salient mass / drift) in the store")
        return
    ro = ro.assign(mode=[src.split("|")[0] for src in ro["source"]])

    def cell(g: pd.DataFrame, m: str, digits: int = 3) -> str:
        v = g.loc[g["model"] == m].groupby("seed")["value"].mean().to_numpy(float)
        v = v[np.isfinite(v)]
        if not len(v):
            return "—"
        return fmt_mean_sd(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else None, digits)

    for ds, d in ro.groupby("dataset", sort=True):
        label = dataset_label(ds)
        over, title_seeds = _seed_words(sorted(set(d.loc[d["metric"].isin(["rollout_mass", "rollout_drift"]),
                                                           "seed"])))
        mass = d[d["metric"] == "rollout_mass"]
        chance = d[d["metric"] == "rollout_mass_chance"]
        if len(mass):
            models = _order(mass["model"])
            recs = []
            for mode, g in mass.groupby("mode", sort=True):
                ch = chance.loc[chance["mode"] == mode, "value"]
                recs.append([mode, fmt_num(float(ch.mean()), 3) if len(ch) else "—"] + [cell(g, m) for m in models])
            title = f"Rollout salient mass: {label}{title_seeds}"
            notes = ["Fraction of the rollout's positive relevance inside the known salient region (images) or "
                     "tokens (text) of the synthetic test set; chance = the salient share of the input (what a "
                     f"uniform map scores). Higher = more focused on the signal. {over} Mode (SPEC §7): "
                     "positive = positive part, comparable across models; signed = L1-normalised signed rollout "
                     "(the differential models' default); '—' = mode not run for that model."]
            t = Table(["Mode", "Chance"] + [display_name(m) for m in models], recs, title, notes)
            rep.table("rollout", f"rollout_mass_{ds}", title, t, pd.concat([mass, chance]).drop(columns="mode"))
        drift = d[d["metric"] == "rollout_drift"]
        if len(drift):
            models = _order(drift["model"])
            per_cond = drift.groupby(["mode", "model", "seed", "condition"], as_index=False)["value"].mean()
            recs = []
            for mode, g in per_cond.groupby("mode", sort=True):
                for c in _condition_order(g["condition"], "image") + ["all"]:
                    gc = g if c == "all" else g[g["condition"] == c]
                    recs.append([mode, "mean of all" if c == "all" else _condition_label(rep, ds, c)]
                                + [cell(gc, m) for m in models])
            title = f"Rollout drift under corruption: {label}{title_seeds}"
            notes = ["Pearson correlation between each image's clean and corrupted rollout map (patch grid), "
                     f"averaged over images and severities. {over} 1 = the map did not move; "
                     "lower = the corruption moved the model's attention more."]
            t = Table(["Mode", "Corruption"] + [display_name(m) for m in models], recs, title, notes,
                      align="ll" + "r" * len(models))
            rep.table("rollout", f"rollout_drift_{ds}", title, t, drift.drop(columns="mode"))


def _seed_words(seeds: Sequence[int]) -> tuple[str, str]:
    """(a sentence for a table's notes, a suffix for its title) saying over which seeds its values are: mean ±
    SD over several seeds, or one seed named as such (never "over seeds" for a single one)."""
    if len(seeds) == 1:
        return (f"Single seed: every value is from seed {seeds[0]} (one trained model per column; no SD).",
                f" (single seed: seed {seeds[0]})")
    return f"Mean ± sample SD over {len(seeds)} seeds ({', '.join(map(str, seeds))}).", ""


# ------------------------------------------------------------------------------------------- caveats
PAPER_SEEDS = 5


def _frost_substitutes(rep: _Report) -> dict[str, str]:
    """dataset -> frost texture source, for evaluations whose frost came from a substitute (procedural)."""
    out: dict[str, str] = {}
    frost_runs = set(rep.df.loc[(rep.df["kind"] == "eval") & (rep.df["condition"] == "frost"), "run_id"])
    for run_id in sorted(frost_runs):
        rec = rep.runs.get(run_id) or {}
        src = str(rec.get("frost_source") or "")
        cdir = rec.get("corruption_dir")
        if not src and cdir:
            try:
                src = str(json.loads((Path(cdir) / "manifest.json").read_text()).get("frost_source") or "")
            except (OSError, json.JSONDecodeError, AttributeError):
                src = ""
        if src.startswith("procedural"):
            ds = str(rec.get("dataset") or rep.df.loc[rep.df["run_id"] == run_id, "dataset"].iloc[0])
            out[ds] = src
    return out


def _caveats(rep: _Report, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str]) -> list[str]:
    """What a reader must know before trusting any number below (each line names the evidence)."""
    out: list[str] = []
    for ds, src in sorted(_frost_substitutes(rep).items()):
        out.append(f"Substitute: frost on {dataset_label(ds)} uses the {src} textures, not the reference frost "
                   "images (the corruption manifest / evaluation record says so); its cells, mCA and the weather "
                   "group are not comparable with CIFAR-10-C.")
    ev = rep.df[(rep.df["kind"] == "eval") & (rep.df["condition"] == metrics.CLEAN)]
    for ds, g in ev.groupby("dataset", sort=True):
        srcs = sorted(set(g["source"]) - {""})
        if any("JPEG" in x for x in srcs):
            out.append(f"Substitute: {dataset_label(ds)} comes from the lossy JPEG copy (quality 75, mean absolute "
                       "error about 5.8/255 against the original pixels), not the official files.")
        if any("subset" in x or re.search(r"images 0\.\.\d+", x) for x in srcs):
            out.append(f"Subset: {dataset_label(ds)} is evaluated on part of the official test split "
                       f"({'; '.join(srcs)[:200]}).")
    for ds in datasets:
        hashes = sorted(set(rep.df.loc[(rep.df["dataset"] == ds), "config_hash"]) - {""})
        data = [cfgs[h]["data"] for h in hashes if h in cfgs and "data" in cfgs[h]]
        mt = sorted({d.get("max_train") for d in data if d.get("max_train")})
        ms = sorted({(d.get("max_test"), d.get("test_subset") or "first") for d in data if d.get("max_test")})
        if mt or ms:
            parts = ([f"trained on at most {', '.join(f'{v:,}' for v in mt)} examples"] if mt else []) + \
                    ([f"evaluated on {', '.join(_subset_words(n, how) for n, how in ms)} test examples"]
                     if ms else [])
            out.append(f"Subset: on {dataset_label(ds)} the runs were {' and '.join(parts)} — not the paper's "
                       "full splits; accuracies are not comparable with the paper's.")
    out += _outside_model_lines(rep)
    seeds = rep.df[rep.df["kind"].isin(["eval", "train"]) & (rep.df["seed"] >= 0)]
    few = []
    for (ds, m), g in seeds.groupby(["dataset", "model"], sort=True):
        n = g["seed"].nunique()
        if n < PAPER_SEEDS:
            few.append((ds, m, n))
    if few:
        by_n: dict[int, list[str]] = {}
        for ds, m, n in few:
            by_n.setdefault(n, []).append(f"{display_name(m)} on {dataset_label(ds)}")
        every = len(few) == seeds.groupby(["dataset", "model"]).ngroups and len(by_n) == 1
        desc = (f"{few[0][2]} seed{'s' if few[0][2] != 1 else ''} for every model" if every else
                "; ".join(f"{n} seed{'s' if n != 1 else ''}: {', '.join(v)}" for n, v in sorted(by_n.items())))
        testable = min(n for _, _, n in few) >= 3
        out.append(f"Seeds below the paper's {PAPER_SEEDS}: {desc}. SDs and intervals are wide"
                   + ("." if testable else "; with fewer than 3 seeds per model no comparison is testable and none "
                      "is called significant (the tables show the numbers with 'not testable: n seeds')."))
    if rep.cell_tests:
        out.append("Cells share models: the tests over corruption / noise cells (Wilcoxon, Friedman, the rank "
                   "diagram) compare conditions of the same few trained models, so they show consistency across "
                   "conditions, not independent evidence. The seed-level tests are the claim.")
    return out


# ------------------------------------------------------------------------------------------- index
_CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;max-width:1180px;margin:1.5em auto;
padding:0 1.2em;color:#1d2125;line-height:1.45;background:#fff}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:2em;border-bottom:2px solid #e3e6ea;padding-bottom:.2em}
h3{font-size:1.02em;margin:1.4em 0 .4em}
.meta{color:#5a6270;font-size:.9em}.meta code{font-size:.95em}
nav{background:#f6f8fa;border:1px solid #e3e6ea;border-radius:6px;padding:.6em 1em;margin:1em 0;font-size:.9em}
nav ol{margin:.3em 0 0 0;padding-left:1.4em;columns:2 22em;column-gap:2em}nav li{break-inside:avoid}
nav ul{margin:.1em 0 .3em 0;padding-left:1.1em;font-size:.95em}
a.self{color:#b0b7c0;font-weight:normal;font-size:.8em;margin-left:.3em;visibility:hidden}
h2:hover a.self,h3:hover a.self,a.self:focus{visibility:visible}
ul.caveats{background:#fff8e6;border:1px solid #f0d58a;border-radius:6px;padding:.6em 1em .6em 2em}
ul.caveats li{margin:.25em 0}details{margin:.6em 0;font-size:.9em}summary{cursor:pointer;color:#5a6270}
section{scroll-margin-top:.5em}h2{scroll-margin-top:.5em}
@media (max-width:700px){body{padding:0 .6em}nav ol{columns:1}table{font-size:.8em}}
a{color:#0b5cad;text-decoration:none}a:hover{text-decoration:underline}
figure{margin:.6em 0 1.4em 0}figure img{max-width:100%;height:auto;border:1px solid #eceef1;border-radius:4px}
figcaption,.caption{color:#4a515c;font-size:.88em;margin-top:.3em}
.links{font-size:.85em;color:#5a6270}.links a{margin-right:.7em}
.prov{font-size:.78em;color:#7a828e;margin-top:.15em}
table{border-collapse:collapse;margin:.4em 0;font-size:.86em;font-variant-numeric:tabular-nums}
caption{caption-side:top;text-align:left;font-weight:600;padding-bottom:.35em;color:#1d2125}
th,td{padding:.28em .7em;border-bottom:1px solid #e3e6ea}thead th{border-bottom:2px solid #9aa3ad;background:#f6f8fa}
td.r,th.r{text-align:right}td.l,th.l{text-align:left}td.c,th.c{text-align:center}
tbody tr:hover{background:#fafbfc}
ul.notes{font-size:.82em;color:#4a515c;margin:.3em 0 0 0;padding-left:1.2em}
.skipped li{color:#7a4b00}.warn li{color:#7a4b00}
.tablewrap{overflow-x:auto;-webkit-overflow-scrolling:touch;
background:linear-gradient(to right,#fff 30%,rgba(255,255,255,0)) left/2.5em 100% no-repeat local,
linear-gradient(to left,#fff 30%,rgba(255,255,255,0)) right/2.5em 100% no-repeat local,
radial-gradient(farthest-side at 0 50%,rgba(0,0,0,.22),rgba(0,0,0,0)) left/1em 100% no-repeat scroll,
radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.22),rgba(0,0,0,0)) right/1em 100% no-repeat scroll}
.tablewrap table{margin:.4em 0}
.tablewrap th:first-child,.tablewrap td:first-child{position:sticky;left:0;z-index:1;background:#fff;
box-shadow:inset -1px 0 0 #e3e6ea}
.tablewrap thead th:first-child{background:#f6f8fa}
td.nw{white-space:nowrap}
.scrollhint{display:none;font-size:.78em;color:#7a828e;text-align:right;margin-top:.3em}
@media (max-width:700px){.scrollhint{display:block}}
"""


def _index(rep: _Report, title: str, header: list[str], caveats: list[str]) -> None:
    by_section: dict[str, list[Artefact]] = {}
    for a in rep.artefacts:
        by_section.setdefault(a.section, []).append(a)
    skipped_by: dict[str, list[tuple[str, str]]] = {}
    for sec, t, reason in rep.skipped:
        skipped_by.setdefault(sec, []).append((t, reason))
    sections = [(sec, t) for sec, t in SECTIONS
                if sec == "caveats" or by_section.get(sec) or skipped_by.get(sec)]
    warnings = list(dict.fromkeys(rep.warnings))
    atomic.write_text(rep.out_dir / "index.md", _index_md(title, header, caveats, warnings, sections, by_section,
                                                          skipped_by))
    atomic.write_text(rep.out_dir / "index.html", _index_html(rep, title, header, caveats, warnings, sections,
                                                              by_section, skipped_by))


def _index_md(title, header, caveats, warnings, sections, by_section, skipped_by) -> str:
    """index.md; every text from the data escaped (:func:`md_escape`: no raw HTML tag, link or control char)."""
    m = lambda t: md_escape(printable(t, cell=True))  # noqa: E731
    md = [f"# {m(title)}", ""] + [f"- {md_inline(h)}" for h in header] + ["", "**Contents**", ""]
    for sec, sec_title in sections:
        md.append(f"- [{m(sec_title)}](#{sec})")
        md += [f"  - [{m(a.title)}](#{a.key})" for a in by_section.get(sec, [])]
    md.append("")
    for sec, sec_title in sections:
        md += [f'<a id="{sec}"></a>', "", f"## {sec_title}", ""]
        if sec == "caveats":
            md += [f"- {m(c)}" for c in caveats] or ["- None found."]
            if warnings:
                md += ["", f"Other warnings ({len(warnings)}):", ""] + [f"- {m(w)}" for w in warnings]
            md.append("")
            continue
        for a in by_section.get(sec, []):
            md += [f'<a id="{a.key}"></a>', "", f"### {m(a.title)}", ""]
            if a.image:
                md += [f"![{m(a.title)}]({a.image})", ""]
            if a.caption:
                md += [m(a.caption), ""]
            if a.table_md:
                md += [a.table_md, ""]
            links = [f"[{fmt}]({path})" for fmt, path in a.files.items()]
            if a.sources:
                links.append(f"[sources]({a.sources})")
            md += [" · ".join(links), ""]
            if a.provenance:
                md += [f"<sub>Made from {m(a.provenance)}.</sub>", ""]
        for t, reason in skipped_by.get(sec, []):
            md += [f"- *Skipped: {m(t)}* — {m(reason)}", ""]
    return "\n".join(md).rstrip() + "\n"


def _index_html(rep, title, header, caveats, warnings, sections, by_section, skipped_by) -> str:
    e = lambda t: html.escape(printable(t))  # noqa: E731
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{e(title)}</title>", f"<style>{_CSS}</style>", "</head><body>", f"<h1>{e(title)}</h1>"]
    parts.append('<div class="meta">' + "<br>".join(_md_inline(h) for h in header) + "</div>")
    toc = []
    for sec, sec_title in sections:
        sub = "".join(f'<li><a href="#{e(a.key)}">{e(a.title)}</a></li>' for a in by_section.get(sec, []))
        toc.append(f'<li><a href="#{sec}">{e(sec_title)}</a>' + (f"<ul>{sub}</ul>" if sub else "") + "</li>")
    nav = '<nav aria-label="Contents"><strong>Contents</strong><ol>' + "".join(toc) + "</ol></nav>"
    for sec, sec_title in sections:
        parts.append(f'<h2 id="{sec}">{e(sec_title)} <a class="self" href="#{sec}" aria-label="link to this '
                     f'section">¶</a></h2>')
        if sec == "caveats":   # first thing after the header, then the contents
            parts.append('<ul class="caveats">' + ("".join(f"<li>{e(c)}</li>" for c in caveats)
                                                   or "<li>None found.</li>") + "</ul>")
            if warnings:
                parts.append(f"<details><summary>Other warnings ({len(warnings)})</summary><ul class=\"warn\">"
                             + "".join(f"<li>{e(w)}</li>" for w in warnings) + "</ul></details>")
            parts.append(nav)
            continue
        for a in by_section.get(sec, []):
            parts.append(f'<section id="{e(a.key)}"><h3>{e(a.title)} <a class="self" href="#{e(a.key)}" '
                         f'aria-label="link to this artefact">¶</a></h3>')
            if a.image:
                size = _display_width(rep.out_dir / a.image)
                parts.append(f'<figure><a href="{e(a.image)}"><img src="{e(a.image)}" alt="{e(a.title)}"{size}></a>'
                             + (f"<figcaption>{e(a.caption)}</figcaption>" if a.caption else "") + "</figure>")
            elif a.caption:
                parts.append(f'<p class="caption">{e(a.caption)}</p>')
            if a.table_html:
                if a.n_columns >= WIDE_TABLE:
                    parts.append('<div class="scrollhint" aria-hidden="true">scroll sideways for more →</div>')
                parts.append(f'<div class="tablewrap" tabindex="0">{a.table_html}</div>')
            links = [f'<a href="{e(p)}">{e(f)}</a>' for f, p in a.files.items()]
            if a.sources:
                links.append(f'<a href="{e(a.sources)}">sources</a>')
            parts.append(f'<div class="links">{" ".join(links)}</div>')
            if a.provenance:
                parts.append(f'<div class="prov">Made from {e(a.provenance)}.</div>')
            parts.append("</section>")
        skips = skipped_by.get(sec, [])
        if skips:
            parts.append('<ul class="skipped">' + "".join(f"<li><em>Skipped: {e(t)}</em> — {e(r)}</li>"
                                                          for t, r in skips) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _display_width(png: Path) -> str:
    """``width`` attribute showing a PNG at its physical size (its pixels at its dpi, 96 CSS px per inch)."""
    try:
        with Image.open(png) as im:
            dpi = float((im.info.get("dpi") or (96.0,))[0]) or 96.0
            return f' width="{round(im.width * 96.0 / dpi)}"'
    except (OSError, ValueError):
        return ""


def _md_inline(text: str) -> str:
    """The little Markdown the header lines use: `code`."""
    out = []
    for i, chunk in enumerate(printable(text).split("`")):
        out.append(f"<code>{html.escape(chunk)}</code>" if i % 2 else html.escape(chunk))
    return "".join(out)


# ------------------------------------------------------------------------------------------- entry point
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
    out = _report_folder(store_dir, out_dir, name)
    check_report_folder(out)
    previous = _previous_files(out)
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
                        f"{', '.join(_order(set(df['model']) - {''}))})")
    # Built in a hidden sibling folder and moved in at the end: Ctrl-C or an error leaves no half report.
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        rep = _write_report(store_dir, stage, df, reference, title, final=out)
        _publish(stage, out, rep, previous)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


def _write_report(store_dir: Path, out: Path, df: pd.DataFrame, reference: str | None,
                  title: str | None, final: Path | None = None) -> _Report:
    """Every artefact, the index and the manifest of one report, written into ``out`` (paths in them relative
    to ``final``, where the report is moved to; default ``out``)."""
    runs = store.load_runs(store_dir)
    cfgs = _configs(runs)
    rep = _Report(store_dir, out, df, runs, final_dir=final)
    pub = load_published()
    pub_sha = hashlib.sha256(PUBLISHED_CSV.read_bytes()).hexdigest()

    ds_all = sorted(set(df.loc[df["kind"].isin(["eval", "train"]), "dataset"]) - {""})
    mods = {ds: _modality_of(df, ds, cfgs) for ds in ds_all}
    datasets_m = {ds: mods[ds] for ds in sorted(ds_all, key=lambda d: (mods[d] != "image", d))}

    try:
        rep.warnings += metrics.source_warnings(metrics.eval_rows(df))
    except UserError as e:
        rep.warnings.append(str(e))
    rep.attempt("findings", "Findings", lambda: findings_section(rep, pub, cfgs))
    rep.attempt("accuracy", "Tables 1 and 3", lambda: _accuracy_tables(rep, pub, pub_sha, datasets_m, cfgs))
    rep.attempt("severity", "Figure 4", lambda: _severity_figures(rep, datasets_m))
    rep.attempt("robustness", "Robustness summary", lambda: _robustness_tables(rep, datasets_m, reference))
    rep.attempt("significance", "Significance", lambda: _significance(rep, datasets_m, reference))
    rep.attempt("curves", "Figure 5", lambda: _curve_figures(rep, datasets_m))
    rep.attempt("rollout", "Figures 2 and 3", lambda: _rollout_figures(rep))
    rep.attempt("rollout", "Rollout numbers", lambda: _rollout_numbers(rep))
    rep.attempt("efficiency", "Table 9", lambda: _efficiency_table(rep, pub, pub_sha))
    rep.attempt("published", "Published tables", lambda: _published_tables(rep, pub, pub_sha))

    commits = sorted(set(df["git_commit"]) - {""})
    header = [f"Store: `{rep.rel(store_dir)}` (relative to this report) — {len(df)} rows, "
              f"{df['run_id'].nunique()} runs",
              "Datasets: " + (", ".join(f"{dataset_label(d)} ({m})" for d, m in datasets_m.items()) or "none"),
              "Models: " + ", ".join(display_name(m) for m in _order(set(df["model"]) - {""})),
              "Seeds: " + ", ".join(str(s) for s in sorted(set(df.loc[df["seed"] >= 0, "seed"]))),
              *_setup_lines(df, cfgs, datasets_m),
              "Code: " + (", ".join(f"`{c[:12]}`" for c in commits) or "unknown")
              + f"; package {', '.join(sorted(set(df['package_version']) - {''})) or '?'}",
              "Every artefact was regenerated from the stored results only; each links its `sources.json` "
              "(runs, configs, commits, rows hash).",
              "Figures: PNG (200 dpi) and vector PDF; tables: Markdown and LaTeX, which compile with pdflatex under "
              "the preamble `" + LATEX_PREAMBLE.replace("\n", " ") + "`."]
    _index(rep, title or "dgsa-bench report", header, _caveats(rep, cfgs, datasets_m))
    from robustbench_dgsa.report.summary import SUMMARY_FILE, summary_table
    summ = summary_table(df)
    atomic.write_json(out / SUMMARY_FILE, {"columns": list(summ.columns), "rows": summ.values.tolist()})
    return rep


def _subset_words(n: int, how: str) -> str:
    return {"first": f"the first {n:,}", "stratified": f"a class-stratified {n:,} (seed 0)",
            "auto": f"{n:,} (the first, or class-stratified where those miss a class)"}.get(how, f"{n:,} ({how})")


def _outside_model_lines(rep: _Report) -> list[str]:
    """Models evaluated with benchmark / --timm / --module: their input convention and test examples."""
    seen: dict[str, set[str]] = {}
    for rec in rep.runs.values():
        if rec.get("origin") == "benchmark" and rec.get("model"):
            words = str(rec.get("input") or "input convention not recorded")
            if rec.get("examples"):
                words += f"; test examples: {rec['examples']}"
            seen.setdefault(str(rec["model"]), set()).add(words)
    return [f"Outside model {m}: {' | '.join(sorted(w))}." for m, w in sorted(seen.items())]


def _setup_lines(df: pd.DataFrame, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str]) -> list[str]:
    """One line per dataset: the model size and training schedule the runs used (from their configs)."""
    out = []
    for ds in datasets:
        hashes = sorted(set(df.loc[(df["dataset"] == ds) & (df["kind"] == "train"), "config_hash"]) - {""})
        cfg = next((cfgs[h] for h in hashes if h in cfgs), None)
        if cfg is None:
            continue
        m, t, d = cfg["model"], cfg["train"], cfg["data"]
        n = f", up to {d['max_train']:,} training examples" if d.get("max_train") else ""
        n += f", {_subset_words(d['max_test'], d.get('test_subset') or 'first')} test examples" \
            if d.get("max_test") else ""
        out.append(f"Setup on {dataset_label(ds)}: D={m['dim']}, {m['depth']} layers, {m['heads']} heads; "
                   f"{t['epochs']} epochs, batch {t['batch_size']}, lr {t['lr']:g}{n}"
                   + _configs_words([cfgs[h] for h in hashes if h in cfgs], len(hashes),
                                    df.loc[(df["dataset"] == ds) & (df["kind"] == "train"), "model"].nunique()))
    return out


def _configs_words(configs: list[dict[str, Any]], n: int, n_models: int) -> str:
    """What "N configs" behind a setup line means: the runs on a dataset used N run configurations (config
    hashes; each model has its own), and whether they share the size and schedule the line shows."""
    if n <= 1:
        return ""
    shape = lambda c: (c["model"].get("dim"), c["model"].get("depth"), c["model"].get("heads"),  # noqa: E731
                       c["train"].get("epochs"), c["train"].get("batch_size"), c["train"].get("lr"),
                       c["data"].get("max_train"), c["data"].get("max_test"))
    if len({shape(c) for c in configs}) <= 1:
        which = ("one per model: they differ in the model's own settings, e.g. its attention" if n == n_models
                 else f"for {n_models} model{'s' if n_models != 1 else ''}")
        return f" — {n} run configurations ({which}), all with this size and schedule"
    return (f" — {n} run configurations that differ in size or schedule (the first is shown; each artefact's "
            "sources.json lists the config hashes)")


def _report_folder(store_dir: Path, out_dir: str | os.PathLike | None, name: str | None) -> Path:
    """``out_dir``, else ``reports/<name>``: a name is one folder name (never a path that leaves ``reports/``)."""
    if out_dir is not None:
        return Path(out_dir)
    if name is not None and not is_safe_name(name):
        raise UserError(f"report name {name!r} is not one folder name: use letters, digits, '.', '_', '+' and '-' "
                        f"(no '/', '..' or spaces), or give the report folder itself")
    return Path("reports") / (name or safe_name(store_dir.resolve().parent.name or "report"))


def check_report_folder(out: Path) -> None:
    """UserError when ``out`` cannot take a report: a file, or a folder whose manifest.json no report wrote
    (for callers that write the report last, e.g. the main job: checked before any work)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"report folder {out} is a file")
    _previous_files(out)


def _previous_files(out: Path) -> list[str]:
    """The files the previous report in ``out`` wrote (its own manifest.json lists them), which a rebuild may
    remove; [] for a new folder, a folder without a manifest or an older report's manifest (nothing is removed
    then). UserError, before any work, when ``out`` holds a manifest.json that no report wrote."""
    path = out / "manifest.json"
    if not os.path.lexists(path):
        return []
    data = None
    if path.is_file() and not path.is_symlink():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
    files = data.get("files") if isinstance(data, dict) else None
    if isinstance(files, list) and all(isinstance(f, str) for f in files):
        if data.get("kind") == REPORT_KIND:
            return files
        if set(data) == {"files"} and {"index.md", "index.html", "manifest.json"} <= set(files):
            return []  # written by a report before manifests carried their kind: kept, nothing removed
    raise UserError(f"report folder {out} holds a manifest.json that no dgsa-bench report wrote (another tool's "
                    f"folder?); nothing was changed: choose a new or empty folder")


def _plain_name(name: str) -> bool:
    """One visible file name directly inside a folder: no separators, no ``..``, not hidden."""
    return (bool(name) and name == os.path.basename(name) and "\\" not in name and "\x00" not in name
            and not name.startswith("."))


def _publish(stage: Path, out: Path, rep: _Report, previous: Sequence[str] = ()) -> None:
    """Move a finished report from ``stage`` into ``out`` (same file system: renames), the index last, then
    remove what the previous report there wrote (``previous``) and this one did not. Nothing moves when a
    target is a device, FIFO, socket or folder."""
    out.mkdir(parents=True, exist_ok=True)
    last = ("index.md", "index.html")
    files = [f for f in sorted(stage.iterdir(), key=lambda p: p.name in last) if f.is_file()]
    for f in files:
        atomic.refuse_special(out / f.name)
    for f in files:
        atomic.replace(f, out / f.name)
    _prune(out, rep, previous)


def _prune(out: Path, rep: _Report, previous: Sequence[str]) -> None:
    """Remove the files the previous report listed that this build did not write (skipped artefacts): only
    plain names directly in ``out`` that are regular files (never a link, a folder or a special file); then
    write this report's own manifest."""
    keep = {"index.md", "index.html", "manifest.json", "summary.json"}
    for a in rep.artefacts:
        keep.update(a.files.values())
        if a.image:
            keep.add(a.image)
        if a.sources:
            keep.add(a.sources)
    for f in previous:
        if f in keep or not _plain_name(f):
            continue
        try:
            st = os.lstat(out / f)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            (out / f).unlink()
    atomic.write_json(out / "manifest.json", {"kind": REPORT_KIND, "version": 1, "files": sorted(keep)})
