"""``dgsa-bench compare``: statistics between models from the results store (docs/METHODS.md, Statistics).

The work is done by :func:`robustbench_dgsa.analysis.compare.run_compare`; this command parses options, prints Rich
tables (or JSON) and writes CSV / LaTeX.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from . import options as opt
from .app import app

if TYPE_CHECKING:  # the library (numpy, pandas, torch) is imported when the command runs: --help stays fast
    import pandas as pd

    from robustbench_dgsa.analysis.compare import Comparison


# ------------------------------------------------------------------------------------------------ output
def _num(v: Any, fmt: str = "{:.4f}") -> str:
    import numpy as np
    import pandas as pd

    if v is None or v is pd.NA:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "–"
        return ("inf" if f > 0 else "-inf") if math.isinf(f) else fmt.format(f)
    return str(v)


def _p(v: Any) -> str:
    import numpy as np

    if isinstance(v, (float, np.floating)) and math.isfinite(float(v)):
        return f"{float(v):.3g}" if float(v) >= 1e-4 else f"{float(v):.1e}"
    return "–"


_P_COLS = {"p", "p_holm", "min_p", "iman_davenport_p"}
_TITLES = {
    "seed_summary": "Seed summary (mean ± SD over seeds, 95% t-interval)",
    "pairwise": "Pairwise differences over seeds (Δ = A − B; the primary claim): Welch / paired t, Holm, Hedges' g",
    "robustness": "Robustness (means over seeds)",
    "wilcoxon_cells": "Consistency across conditions: Wilcoxon signed-rank over seed-averaged cells of the same "
                      "trained models (not independent evidence; wins/ties/losses for A)",
    "friedman": "Friedman test over cells of the same trained models (consistency across conditions); "
                "Kendall's W = effect size",
    "avg_ranks": "Average ranks (1 = best)",
    "posthoc_wilcoxon": "Post-hoc pairwise Wilcoxon over cells (consistency across conditions), Holm",
}
_SHOW = {
    "seed_summary": ["dataset", "condition", "model", "n", "mean ± SD", "ci_lo", "ci_hi", "note"],
    "pairwise": ["dataset", "condition", "model_a", "model_b", "n_a", "n_b", "diff", "ci_lo", "ci_hi", "test", "t",
                 "df", "p", "p_holm", "g", "verdict", "aso_eps_min", "note"],
    "wilcoxon_cells": ["dataset", "model_a", "model_b", "n_cells", "wins", "ties", "losses", "median_diff", "W",
                       "p", "p_holm", "min_p", "verdict"],
    "friedman": ["dataset", "blocks", "k", "n_blocks", "n_seeds", "statistic", "p", "kendall_w",
                 "iman_davenport_F", "iman_davenport_p", "verdict"],
    "avg_ranks": ["dataset", "blocks", "model", "avg_rank", "mean"],
    "posthoc_wilcoxon": ["dataset", "model_a", "model_b", "n_cells", "wins", "ties", "losses", "median_diff", "W",
                         "p", "p_holm", "verdict"],
}


def _display_frame(name: str, df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    if name == "seed_summary":
        df["mean ± SD"] = [f"{_num(m)} ± {_num(s)}" if math.isfinite(s) else _num(m)
                         for m, s in zip(df["mean"], df["sd"])]
    cols = _SHOW.get(name, list(df.columns))
    return df[[c for c in cols if c in df.columns]]


def _cells(show: pd.DataFrame) -> list[list[str]]:
    return [[_p(r[c]) if c in _P_COLS else _num(r[c], "{:.3f}" if c in ("t", "df", "g", "W", "kendall_w") else
                                                "{:.4f}") for c in show.columns] for _, r in show.iterrows()]


def _render(cmp: Comparison) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    probe = Console()
    # piped or redirected: never cut tables at 80 columns
    console = Console(highlight=False, width=probe.width if probe.is_terminal else 100_000)
    info = cmp.info
    refs = info.get("references") or {}
    # names come from the store (any text): escaped, so "[/x]" or "/..." is printed, not read as markup
    console.print(f"[bold]compare[/] " + escape(
                  f"metric={info['metric']} models={', '.join(info['models'])} "
                  f"reference={', '.join(f'{r} ({d})' for d, r in refs.items()) or info['reference']} "
                  f"alpha={info['alpha']:g}" + (" paired" if info["paired"] else "")))
    for name, df in cmp.tables.items():
        show = _display_frame(name, df)
        t = Table(title=escape(_TITLES.get(name, name)), title_justify="left", show_lines=False)
        for c in show.columns:
            t.add_column(escape(str(c)), justify="left" if show[c].dtype == object and c not in _P_COLS else "right")
        for row in _cells(show):
            t.add_row(*(escape(str(v)) for v in row))
        console.print(t)
    for f in cmp.families:
        console.print(f"[dim]{escape(str(f))}[/]")
    for w in cmp.warnings:  # warnings: stderr (stdout holds the tables)
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[yellow]warning:[/] {escape(str(w))}")


def _write_csv(cmp: Comparison, path: Path) -> list[Path]:
    from robustbench_dgsa.util import atomic

    written = []
    for i, (name, df) in enumerate(cmp.tables.items()):
        p = path if i == 0 else path.with_name(f"{path.stem}.{name}{path.suffix or '.csv'}")
        atomic.write_text(p, df.to_csv(index=False))
        written.append(p)
    return written


def _write_latex(cmp: Comparison, path: Path) -> Path:
    """Every table through the report's one table writer (:mod:`robustbench_dgsa.report.tables`)."""
    from robustbench_dgsa.report.tables import LATEX_PREAMBLE, Table
    from robustbench_dgsa.util import atomic

    parts = ["% dgsa-bench compare; preamble: " + LATEX_PREAMBLE.replace("\n", " "),
             f"% metric={cmp.info['metric']} models={','.join(cmp.info['models'])} "
             f"reference={cmp.info['reference']} alpha={cmp.info['alpha']:g}"]
    parts += [f"% warning: {w}" for w in cmp.warnings]
    for name, df in cmp.tables.items():
        show = _display_frame(name, df)
        notes = [f for f in cmp.families if (name == "pairwise") == ("t-test" in f)] if name in (
            "pairwise", "wilcoxon_cells", "posthoc_wilcoxon") else []
        t = Table([str(c) for c in show.columns], _cells(show), _TITLES.get(name, name), notes)
        parts += ["", t.to_latex(label=f"tab:compare-{name}")]
    atomic.write_text(path, "\n".join(parts) + "\n")
    return path


@app.command("compare")
def compare(
    store: Path = typer.Option(Path("runs/store"), "--store", help="Results store directory."),
    dataset: Optional[str] = opt.dataset(None, help="Dataset to compare on (default: every dataset in the store)."),
    models: Optional[list[str]] = opt.models(None, help="Models, comma-separated or repeated (default: all)."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Reference model for pairwise tests and "
                                            "relative CE (default: the first model)."),
    metric: str = typer.Option("accuracy", "--metric", help="Result metric to compare."),
    condition: Optional[str] = typer.Option(
        None, "--condition",
        help="Comma-separated: clean | mca (mNA on text) | mce | mna | extra | noise | blur | weather | digital | "
             "<corruption or noise type> (mean over severities 1-5) | <name>:<severity> | all. "
             "Default: clean plus mCA/mNA when corrupted results exist."),
    paired: bool = typer.Option(False, "--paired", help="Paired t-test over matched seeds instead of Welch."),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0,
                                help="Significance level (Holm-adjusted decisions, CD)."),
    aso: bool = typer.Option(False, "--aso", help="Add almost-stochastic-order eps_min (bootstrap; slower)."),
    all_pairs: bool = typer.Option(False, "--all-pairs", help="Test every model pair, not only vs the reference."),
    partial: bool = typer.Option(False, "--partial", help="Average mCA/mNA over the cells present (flagged) "
                                 "instead of requiring all of them."),
    source: Optional[str] = typer.Option(None, "--source", help="Corrupted-data source to use (official, "
                                         "regenerated or on-the-fly) when the store has several."),
    split: str = typer.Option("test", "--split", help="Evaluation split."),
    tie_tol: float = typer.Option(0.0, "--tie-tol", min=0.0, help="|difference| <= this counts as a tie over cells."),
    cd_plot: Optional[Path] = typer.Option(None, "--cd-plot", help="Write the critical-difference diagram "
                                           "(.png/.pdf/.svg) when >= 3 models; several Friedman tests give "
                                           "<stem>.<dataset-blocks><suffix>."),
    csv: Optional[Path] = typer.Option(None, "--csv", help="Write the seed summary here and the other tables "
                                       "beside it as <stem>.<table>.csv."),
    latex: Optional[Path] = typer.Option(None, "--latex", help="Write all tables as booktabs LaTeX."),
    json_out: bool = opt.json_(help="Print JSON instead of tables."),
) -> None:
    """Compare models over seeds and corruption cells: t-intervals, Welch/paired t + Holm, Hedges' g,
    Wilcoxon over cells, Friedman + average ranks + critical difference, honest warnings (methods:
    docs/METHODS.md, Statistics)."""
    from robustbench_dgsa.analysis.compare import run_compare
    from robustbench_dgsa.util.jsonio import to_jsonable

    from .. import store as store_mod

    opt.check_source(source)
    opt.check_output_file(csv, "--csv")
    opt.check_output_file(latex, "--latex")
    opt.check_output_file(cd_plot, "--cd-plot", suffixes=(".png", ".pdf", ".svg"))
    results = store_mod.load_results(store)
    cmp = run_compare(results, dataset=dataset, models=opt.split_list(models) or None, reference=reference,
                      metric=metric,
                      condition=condition, paired=paired, alpha=alpha, aso=aso, all_pairs=all_pairs,
                      partial=partial, source=source, split=split, tie_tol=tie_tol, store_label=str(store))
    written: list[Path] = []
    if csv is not None:
        written += _write_csv(cmp, csv)
    if latex is not None:
        written.append(_write_latex(cmp, latex))
    if cd_plot is not None:
        if not cmp.cd_diagrams:
            cmp.warnings.append("no critical-difference diagram: needs >= 3 models and a Friedman test")
        from robustbench_dgsa.models.registry import display_name
        from robustbench_dgsa.report.figures import cd_diagram
        from robustbench_dgsa.util.figures import save_as
        for title, ranks, cliques, note in cmp.cd_diagrams:
            from robustbench_dgsa.util.paths import safe_name
            p = cd_plot if len(cmp.cd_diagrams) == 1 else \
                cd_plot.with_name(f"{cd_plot.stem}.{safe_name(title)}{cd_plot.suffix}")
            named = {display_name(m): r for m, r in ranks.items()}
            bars = None if cliques is None else [[display_name(m) for m in g] for g in cliques]
            written.append(save_as(cd_diagram(named, bars, note=note), p))
    if json_out:
        doc = cmp.to_dict()
        doc["written"] = [str(p) for p in written]
        typer.echo(json.dumps(to_jsonable(doc, fallback=str), indent=2))
        return
    _render(cmp)
    for p in written:
        typer.echo(f"wrote {p}")
