"""``dgsa-bench report`` (figures and tables from a results store) and ``dgsa-bench reproduce`` (the main job)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import app


@app.command("report")
def report_command(
    store: Path = typer.Option(..., "--store", help="Results store folder (the one train/evaluate wrote)."),
    out: Optional[Path] = opt.out(None, help="Report folder (default: reports/<name>)."),
    name: Optional[str] = typer.Option(None, "--name", help="Report name: writes reports/<name>/ (default: the "
                                       "store's parent folder name)."),
    datasets: Optional[list[str]] = opt.datasets(None, help="Datasets to include, comma-separated or repeated "
                                                          "(default: all in the store)."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Reference model for the relative "
                                            "corruption error and the pairwise tests (default: ViT on image datasets, Transformer on text "
                                            "datasets; `compare` uses the same)."),
    title: Optional[str] = typer.Option(None, "--title", help="Title of index.html / index.md."),
    as_json: bool = opt.json_(help="Print the result as JSON."),
) -> None:
    """Regenerate the paper's figures and tables from a results store alone (never re-running a model):
    Figures 2-5, Tables 1, 3 and 9 beside the paper's published numbers, warnings and caveats, statistical
    comparisons (seed-level tests; cell-level consistency), robustness summary, rollout numbers; PNG (200 dpi) +
    PDF, Markdown + LaTeX (pdflatex-ready), linked from index.md / index.html. Methods: docs/METHODS.md."""
    from robustbench_dgsa.report.build import build_report

    if out is not None and name is not None:
        raise UserError("give either --out or --name, not both")
    ds = opt.split_list(datasets) or None
    opt.check_output_dir(out, "--out")
    folder = build_report(store, out, name=name, datasets=ds, reference=reference, title=title)
    _print_summary(folder, as_json)


def _print_summary(folder: Path, as_json: bool) -> None:
    """Where the report is, and clean / robust accuracy per model (or the same as JSON)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    import pandas as pd

    from robustbench_dgsa.report.summary import SUMMARY_FILE
    from robustbench_dgsa.util.jsonio import to_jsonable

    table = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))   # the report's own
    summ = pd.DataFrame(table["rows"], columns=table["columns"])
    index = folder / "index.html"
    if as_json:
        doc = {"report": str(index.resolve()), "index_md": str((folder / "index.md").resolve()),
               "summary": summ.to_dict(orient="records")}
        typer.echo(json.dumps(to_jsonable(doc, fallback=str), indent=2))
        return
    probe = Console()
    con = Console(width=probe.width if probe.is_terminal else 100_000)   # piped: never cut the table
    if len(summ):
        t = Table(title="Clean and robust accuracy (mean ± SD over seeds)")
        for c in summ.columns:
            t.add_column(c, justify="right" if c in ("seeds", "clean (%)", "robust (%)") else "left")
        for r in summ.itertuples(index=False):
            t.add_row(*[escape(str(v)) for v in r])  # model names are any text, not markup
        con.print(t)
    con.print(escape(f"Report: {index.resolve()}"))


@app.command("reproduce")
def reproduce_command(
    out: Path = opt.out(Path("reports/reproduce"), help="Output folder: the report, plus store/ (results) and "
                                                        "runs/ (checkpoints)."),
    preset: str = typer.Option("tiny", "--preset", help="tiny | small | evidence | paper (evidence: the committed "
                               "real-data campaign's sizes, about 3 h on 2 CPU cores; paper: the full protocol, "
                               "needs real data and a GPU)."),
    seed: str = opt.seed("0-2", help="Seeds: one, a list or a range (default 0-2: three seeds, the fewest the "
                         "seed-level tests can speak with)."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Folder with real datasets in their "
                                             "official layouts."),
    image_dataset: Optional[str] = typer.Option(None, "--image-dataset", help="Image dataset(s), "
                                                "comma-separated (default: synthetic-vision; cifar10 with --preset "
                                                "paper; 'none' to skip)."),
    text_dataset: Optional[str] = typer.Option(None, "--text-dataset", help="Text dataset(s), "
                                               "comma-separated, e.g. 20newsgroups,rotten-tomatoes (default: "
                                               "synthetic-text; imdb with --preset paper; 'none' to skip)."),
    models: Optional[list[str]] = opt.models(None, help="Models, comma-separated or repeated (default: vit, "
                                                        "dvit, dgvit, transformer, dt, dgt)."),
    corruption: Optional[str] = opt.corruption(None, help="Image corruptions: names, groups, benchmark, extra or "
                                                          "all (default: all; two with --quick)."),
    text_noise: Optional[str] = opt.text_noise(None, help="Text noise types, char, word or all (default: all)."),
    severity: Optional[str] = opt.severity(),
    max_examples: Optional[int] = opt.max_examples(help="Test examples per condition (default: the preset's)."),
    device: str = opt.device(),
    quick: bool = typer.Option(False, "--quick", help="Smallest size (1 epoch, 2 corruptions × 2 severities, "
                               "64 test examples): a smoke test in seconds. --corruption, --severity and "
                               "--text-noise given with it are kept."),
    ffn_ratio: Optional[str] = opt.ffn_ratio(),
    set_: Optional[list[str]] = opt.set_("Config override section.key=value of every job (repeatable), e.g. "
                                         "train.amp=off for fp32 where 'auto' means bf16, or train.compile=on; part "
                                         "of each job's identity."),
    as_json: bool = opt.json_(help="Print the result as JSON."),
    quiet: bool = opt.quiet(),
) -> None:
    """The main job: train ViT/DViT/DGViT and Transformer/DT/DGT over several seeds, evaluate clean, under all
    corruptions × severities and text noise, run statistics, rollouts and a small efficiency benchmark, and
    write the report into --out. Re-running resumes: finished work is skipped."""
    from robustbench_dgsa.config import parse_set_options
    from robustbench_dgsa.jobs.reproduce import reproduce

    seeds = opt.parse_seeds(seed)
    overrides = parse_set_options(set_)
    # Under --quick, conditions not given take the quick defaults; given ones are kept (and checked) as given.
    severities = opt.parse_severities(severity) if severity is not None else None
    corruptions = opt.parse_corruptions(corruption)
    noise = opt.parse_text_noise(text_noise)
    opt.check_output_dir(out, "--out")
    folder = reproduce(out, preset=preset, seeds=seeds, data_root=data_root, image_dataset=image_dataset,
                       text_dataset=text_dataset, models=opt.split_list(models) or None, severities=severities,
                       corruptions=corruptions, text_noise=noise, max_test=max_examples,
                       progress=not (as_json or quiet), quick=quick, device=device, ffn_ratio=ffn_ratio,
                       overrides=overrides)
    timings = json.loads((folder / "timings.json").read_text())
    _print_summary(folder, as_json)
    if not as_json:
        typer.echo(_time_line(timings))


def _time_line(timings: dict) -> str:
    """``Time: 361.9s wall (corrupt 20.1s within train_evaluate, train_evaluate 300.2s, ...)``: a phase that ran
    inside another's wall time says so, so the phases are not read as adding up to the total."""
    phases, within = timings["phases"], timings.get("within", {})
    parts = []
    for k in timings.get("phase_order", phases):
        if k == "total":
            continue
        inside = within.get(k)
        count = f" for {timings['rollouts']} rollout set(s)" if k == "rollout" and "rollouts" in timings else ""
        parts.append(f"{k} {phases[k]:.1f}s{count}"
                     + (f" within {inside}" if inside in phases and phases[k] > 0 else ""))
    overlap = any(within.get(k) in phases and phases[k] > 0 for k in phases)
    return (f"Time: {phases['total']:.1f}s wall ({', '.join(parts)})"
            + ("; the phases overlap (one marked 'within' ran inside another's wall time): do not add them up"
               if overlap else ""))
