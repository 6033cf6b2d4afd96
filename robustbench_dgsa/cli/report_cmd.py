"""``dgsa-bench report`` (figures and tables from a results store) and ``dgsa-bench reproduce`` (the main job)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from robustbench_dgsa.util.errors import UserError
from .app import app


@app.command("report")
def report_command(
    store: Path = typer.Option(..., "--store", help="Results store folder (the one train/evaluate wrote)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Report folder (default: reports/<name>)."),
    name: Optional[str] = typer.Option(None, "--name", help="Report name: writes reports/<name>/ (default: the "
                                       "store's parent folder name)."),
    datasets: Optional[str] = typer.Option(None, "--datasets", help="Comma-separated datasets to include "
                                           "(default: all in the store)."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Reference model for the relative "
                                            "corruption error and the Wilcoxon tests (default: ViT / Transformer)."),
    title: Optional[str] = typer.Option(None, "--title", help="Title of index.html / index.md."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Regenerate the figures and tables of SPEC §8 from a results store alone (never re-running a model):
    Figures 2-5, Tables 1, 3 and 9 beside the paper's published numbers, significance tables, robustness
    summary, rollout numbers; PNG + PDF, Markdown + LaTeX, linked from index.md / index.html."""
    from robustbench_dgsa.report.build import build_report

    if out is not None and name is not None:
        raise UserError("give either --out or --name, not both")
    ds = [d.strip() for d in datasets.split(",") if d.strip()] if datasets else None
    folder = build_report(store, out, name=name, datasets=ds, reference=reference, title=title)
    _print_summary(store, folder, as_json)


def _print_summary(store: Path, folder: Path, as_json: bool) -> None:
    """Where the report is, and clean / robust accuracy per model (or the same as JSON)."""
    from rich.console import Console
    from rich.table import Table

    from robustbench_dgsa.jobs.reproduce import summary_table

    summ = summary_table(store)
    index = folder / "index.html"
    if as_json:
        typer.echo(json.dumps({"report": str(index.resolve()), "index_md": str((folder / "index.md").resolve()),
                               "summary": summ.to_dict(orient="records")}, indent=2, default=str))
        return
    con = Console()
    if len(summ):
        t = Table(title="Clean and robust accuracy (mean ± SD over seeds)")
        for c in summ.columns:
            t.add_column(c, justify="right" if c in ("seeds", "clean (%)", "robust (%)") else "left")
        for r in summ.itertuples(index=False):
            t.add_row(*[str(v) for v in r])
        con.print(t)
    con.print(f"Report: {index.resolve()}")


@app.command("reproduce")
def reproduce_command(
    out: Path = typer.Option(Path("reports/reproduce"), "--out", help="Output folder: the report, plus store/ "
                             "(results) and runs/ (checkpoints)."),
    preset: str = typer.Option("tiny", "--preset", help="tiny | small | paper (paper: the full protocol, "
                               "needs real data and a GPU)."),
    seeds: str = typer.Option("0-2", "--seeds", help="Seeds, e.g. 0-2 (default), 0-4 or 0,2,7."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder with real datasets in their "
                                             "official layouts."),
    image_dataset: Optional[str] = typer.Option(None, "--image-dataset", help="Image dataset (default: "
                                                "synthetic-vision; cifar10 with --preset paper; 'none' to skip)."),
    text_dataset: Optional[str] = typer.Option(None, "--text-dataset", help="Text dataset (default: "
                                               "synthetic-text; imdb with --preset paper; 'none' to skip)."),
    models: Optional[str] = typer.Option(None, "--models", help="Comma-separated models (default: vit, dvit, "
                                         "dgvit, transformer, dt, dgt)."),
    corruptions: str = typer.Option("all", "--corruptions", help="Image corruptions: all, benchmark, extra, "
                                    "groups or names."),
    text_noise: str = typer.Option("all", "--text-noise", help="Text noise types: all, char, word or names."),
    severities: str = typer.Option("1-5", "--severities", help="Severities, e.g. 1-5 or 1,3,5."),
    max_test: Optional[int] = typer.Option(None, "--max-test", help="Test examples per condition (default: "
                                           "the preset's)."),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N."),
    quick: bool = typer.Option(False, "--quick", help="Smallest size (1 epoch, 2 corruptions × 2 severities, "
                               "64 test examples): a smoke test in seconds."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """The main job: train ViT/DViT/DGViT and Transformer/DT/DGT over several seeds, evaluate clean, under all
    corruptions × severities and text noise, run statistics, rollouts and a small efficiency benchmark, and
    write the report into --out. Re-running resumes: finished work is skipped."""
    from corruptions.registry import parse_severities

    from robustbench_dgsa.jobs.reproduce import reproduce
    from .train_cmd import parse_seeds

    folder = reproduce(out, preset=preset, seeds=parse_seeds(None, seeds), data_root=data_root,
                       image_dataset=image_dataset, text_dataset=text_dataset, models=models,
                       severities=parse_severities(severities), corruptions=corruptions, text_noise=text_noise,
                       max_test=max_test, progress=not as_json, quick=quick, device=device)
    timings = json.loads((folder / "timings.json").read_text())
    _print_summary(folder / "store", folder, as_json)
    if not as_json:
        phases = timings["phases"]
        typer.echo(f"Time: {phases['total']:.1f}s ("
                   + ", ".join(f"{k} {phases[k]:.1f}s" for k in timings.get("phase_order", phases) if k != "total")
                   + ")")
