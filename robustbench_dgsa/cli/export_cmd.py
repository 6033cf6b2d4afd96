"""``dgsa-bench export``: results in another benchmark's format (RobustBench model_info), from the store alone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from robustbench_dgsa.util.errors import UserError
from .app import app

_FORMATS = ("robustbench",)


@app.command("export")
def export_command(
    fmt: str = typer.Option("robustbench", "--format", help="Output format: robustbench."),
    store: Path = typer.Option(..., "--store", help="Results store folder."),
    out: Path = typer.Option(..., "--out", help="Folder to write model_info/<dataset>/corruptions/ into."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="RobustBench's dataset (cifar10, cifar100 or "
                                          "imagenet) for a store dataset that is a custom source such as npz:... "
                                          "whose runs recorded no dataset family."),
    mce_reference: Optional[str] = typer.Option(None, "--mce-reference", help="Reference grid for "
                                                "corruptions_mce: an unaggregated CSV with an AlexNet row (e.g. "
                                                "RobustBench's own) or a model of the store (default: an AlexNet "
                                                "row already in the target CSV or the store, else for imagenet "
                                                "AlexNet's published ImageNet-C errors, else no mCE)."),
    store_dataset: Optional[str] = typer.Option(None, "--store-dataset", help="The store dataset to export "
                                                "(default: all that map to a RobustBench dataset)."),
    model: Optional[str] = typer.Option(None, "--model", help="Comma-separated models (default: all)."),
    source: Optional[str] = typer.Option(None, "--source", help="Only corrupted rows from this source "
                                         "(official, regenerated, on-the-fly)."),
    as_json: bool = typer.Option(False, "--json", help="Print the written records as JSON."),
) -> None:
    """RobustBench model_info JSON per model with a full 15 x 5 grid (clean_acc, corruptions_acc, corruptions_mce
    where a reference is at hand); incomplete grids go to a side file with a footnote saying why; plus the
    unaggregated per-corruption, per-severity CSV."""
    from robustbench_dgsa.report.export import export_robustbench

    from . import options as opt

    if fmt not in _FORMATS:
        raise UserError(f"--format must be one of {', '.join(_FORMATS)}, got {fmt!r}")
    opt.check_source(source)
    opt.check_output_dir(out, "--out")
    models = [m.strip() for m in model.split(",") if m.strip()] if model else None
    res = export_robustbench(store, out, dataset=dataset, store_dataset=store_dataset, models=models, source=source,
                             mce_reference=mce_reference)
    if as_json:
        typer.echo(json.dumps({"files": [str(f) for f in res.files], "models": res.models,
                               "incomplete": res.incomplete, "skipped": res.skipped}, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape as esc  # model names and paths are any text, not markup
    con = Console(stderr=True, highlight=False)
    for key, rec in res.models.items():
        mce = f", mCE {rec['corruptions_mce']}%" if rec.get("corruptions_mce") else ""
        robust = (f"AutoAttack {rec['autoattack_acc']}% at eps {rec['eps']}" if "autoattack_acc" in rec
                  else f"corruptions {rec['corruptions_acc']}%")             # Linf / L2 records (issue 36)
        con.print(esc(f"{key}: clean {rec['clean_acc']}%, {robust}{mce}"))
    for key, rec in res.incomplete.items():
        con.print(f"[yellow]{esc(key)}[/]: " + esc(f"incomplete 15 x 5 grid, written to the side file "
                  f"incomplete_grids.{key.split('/')[0]}.json, not to model_info (see its footnote)"))
    for note in res.skipped:
        con.print(f"[yellow]skipped[/] {esc(opt.spell_flags(str(note), ['dataset']))}")
    con.print(esc(f"wrote {len(res.files)} files under {Path(out) / 'model_info'}"))
