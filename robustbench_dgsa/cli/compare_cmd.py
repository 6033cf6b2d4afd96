"""``dgsa-bench compare``: statistics between models from the results store (docs/METHODS.md, Statistics).

Options -> :func:`robustbench_dgsa.report.comparison.compare_store` (reads the store, runs the tests, writes CSV /
LaTeX / diagrams) -> Rich tables (or JSON).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from . import options as opt
from . import render
from .app import app

if TYPE_CHECKING:  # the library (numpy, pandas, torch) is imported when the command runs: --help stays fast
    from robustbench_dgsa.analysis.compare import Comparison


#: the width of compare's tables without --wide
NARROW = 100


#: columns that name what a table is about: one value in every row moves them into the title
_KEYS = ("dataset", "condition", "model_b", "test", "n", "n_a", "n_b", "n_seeds", "n_cells", "blocks", "k",
         "n_blocks", "n_corruptions", "mCA_complete", "metric")


def _narrow(show, title: str):
    """For a 100-column table: columns empty in every row dropped, and naming columns (:data:`_KEYS`) with one
    value in every row moved into the title (``[dataset=cifar10, n=5]``). Returns (frame, title)."""
    fixed = []
    for c in list(show.columns):
        values = {str(v) for v in show[c]}
        if values <= {"", "nan", "None"}:
            show = show.drop(columns=c)
        elif c in _KEYS and len(values) == 1 and len(show) > 1:
            fixed.append(f"{c}={values.pop()}")
            show = show.drop(columns=c)
    return show, title + (f" [{', '.join(fixed)}]" if fixed else "")


def _table(show, title: str, wide: bool, p_cols, cells):
    """A Rich table of ``show``; narrow: a light frame, and a one-row table turned into field | value lines."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table
    if not wide and len(show) == 1 and show.shape[1] > 6:
        t = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        t.add_column("field")
        t.add_column("value", overflow="fold")
        for c, v in zip(show.columns, next(iter(cells(show)))):
            t.add_row(escape(str(c)), escape(str(v)))
        return t
    t = Table(title=escape(title), title_justify="left", show_lines=False)
    if not wide:
        t.box, t.pad_edge, t.collapse_padding = box.SIMPLE_HEAD, False, True
    for c in show.columns:
        t.add_column(escape(str(c)), justify="left" if show[c].dtype == object and c not in p_cols else "right",
                     overflow="fold")
    for row in cells(show):
        t.add_row(*(escape(str(v)) for v in row))
    return t


def _render(cmp: Comparison, wide: bool = False) -> None:
    from rich.console import Console
    from rich.markup import escape

    from robustbench_dgsa.report.comparison import P_COLS, TITLES, cells, display_frame

    # --wide: every column, never cut at 80 columns when piped; else at most NARROW columns (cells wrap)
    console = render.console(highlight=False) if wide else render.console(highlight=False, max_width=NARROW)
    info = cmp.info
    refs = info.get("references") or {}
    # names come from the store (any text): escaped, so "[/x]" or "/..." is printed, not read as markup
    console.print(f"[bold]compare[/] " + escape(
                  f"metric={info['metric']} models={', '.join(info['models'])} "
                  f"reference={', '.join(f'{r} ({d})' for d, r in refs.items()) or info['reference']} "
                  f"alpha={info['alpha']:g}" + (" paired" if info["paired"] else "")))
    for name, df in cmp.tables.items():
        show, title = display_frame(name, df), TITLES.get(name, name)
        if not wide:
            show, title = _narrow(show, title)
        console.print(_table(show, title, wide, P_COLS, cells))
    for f in cmp.families:
        console.print(f"[dim]{escape(str(f))}[/]")
    for w in cmp.warnings:  # warnings: stderr (stdout holds the tables); the library's partial=True is --partial
        w = opt.spell_flags(str(w), ["partial"])
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[yellow]warning:[/] {escape(w)}")



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
    wide: bool = typer.Option(False, "--wide", help="Every column of every table, as wide as they need (default: "
                              "at most 100 columns: constant columns go into the title, cells wrap)."),
) -> None:
    """Compare models over seeds and corruption cells: t-intervals, Welch/paired t + Holm, Hedges' g,
    Wilcoxon over cells, Friedman + average ranks + critical difference, honest warnings (methods:
    docs/METHODS.md, Statistics)."""
    from robustbench_dgsa.report.comparison import compare_store

    opt.check_source(source)
    opt.check_output_file(csv, "--csv")
    opt.check_output_file(latex, "--latex")
    opt.check_output_file(cd_plot, "--cd-plot", suffixes=(".png", ".pdf", ".svg"))
    opt.check_outputs({"--csv": csv, "--latex": latex, "--cd-plot": cd_plot})
    cmp, written = compare_store(store, csv=csv, latex=latex, cd_plot=cd_plot, dataset=dataset,
                                 models=opt.split_list(models) or None, reference=reference, metric=metric,
                                 condition=condition, paired=paired, alpha=alpha, aso=aso, all_pairs=all_pairs,
                                 partial=partial, source=source, split=split, tie_tol=tie_tol)
    if json_out:
        doc = cmp.to_dict()
        doc["written"] = [str(p) for p in written]
        render.echo_json(doc, fallback=str)
        return
    _render(cmp, wide)
    for p in written:
        typer.echo(f"wrote {p}")
