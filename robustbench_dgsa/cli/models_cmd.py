"""``dgsa-bench models``: options -> :func:`robustbench_dgsa.models.table.model_table` (or, with --pretrained,
:func:`robustbench_dgsa.models.zoo.list_pretrained`) -> a Rich table or JSON."""
from __future__ import annotations

import json
from typing import Optional

import typer

from . import options as opt
from . import render
from .app import app

@app.command("models")
def models(
    image_size: int = typer.Option(32, "--image-size", min=1, max=opt.config_max("model.image_size"),
                                   help="Image side for the vision models."),
    patch_size: int = typer.Option(4, "--patch-size", min=1, max=opt.config_max("model.patch_size"),
                                   help="Patch side for the vision models."),
    num_classes: int = typer.Option(10, "--num-classes", min=1, max=opt.config_max("model.num_classes"),
                                    help="Number of classes of the classifier head."),
    proj: str = typer.Option("4", "--proj",
                             help="FFN ratio of the SwiGLU models (the paper's 'proj.'): 2, 4 or 16/3 (5.333)."),
    vocab_size: int = typer.Option(30000, "--vocab-size", min=2, max=opt.config_max("model.vocab_size"),
                                   help="Vocabulary size for the text models."),
    max_len: int = typer.Option(256, "--max-len", min=1, max=opt.config_max("model.max_len"),
                                help="Maximum text length (tokens, CLS excluded)."),
    model: Optional[list[str]] = opt.models(None, help="Only these models, comma-separated or repeated. Default: "
                                                       "all registered."),
    set_: Optional[list[str]] = opt.set_("Model config override key=value (or model.key=value) applied to every "
                                         "model (repeatable), e.g. --set dim=96 --set depth=4."),
    as_json: bool = opt.json_(help="Print a JSON list instead of a table."),
    pretrained: bool = typer.Option(False, "--pretrained",
                                    help="List the trained models that ship with the package (the zoo) with "
                                         "their cards: accuracy, mCA, size, and the command that made them."),
) -> None:
    """List the registered models with parameters and forward FLOPs per sample for a geometry.

    With --image-size 224 --patch-size 16 the vision rows reproduce the paper's Table 9 parameter counts.
    With --pretrained: the shipped trained models (use them with --pretrained NAME in rollout and evaluate).
    """
    from robustbench_dgsa.config import parse_set_options
    from robustbench_dgsa.models.table import FLOPS_NOTE, model_table

    if pretrained:
        _print_pretrained(as_json)
        return

    overrides = {k.removeprefix("model."): v for k, v in parse_set_options(set_).items()}
    rows = model_table(opt.split_list(model) or None, image_size=image_size, patch_size=patch_size,
                       num_classes=num_classes, proj=proj,
                       vocab_size=vocab_size, max_len=max_len, overrides=overrides)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return

    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"images {image_size}x{image_size}/patch {patch_size}; text max_len {max_len}, "
                        f"vocab {vocab_size:,}; {num_classes} classes",
                  caption=FLOPS_NOTE, caption_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for col in ("model", "attention", "FFN", "tokens", "params", "GFLOPs", "GMACs"):
        table.add_column(col, justify="left" if col in ("model", "attention", "FFN") else "right", no_wrap=True)
    table.add_column("what it is", justify="left", min_width=30, ratio=1)
    for i, r in enumerate(rows):
        ratio = r["ffn_ratio"]
        ratio_txt = "16/3" if abs(ratio - 16 / 3) < 1e-9 else f"{ratio:g}"
        last_of_modality = i + 1 < len(rows) and rows[i + 1]["modality"] != r["modality"]
        table.add_row(r["name"], r["attention"], f"{r['ffn']} x{ratio_txt}", str(r["tokens"]), f"{r['params']:,}",
                      f"{r['flops'] / 1e9:.3f}", f"{r['macs'] / 1e9:.3f}", escape(r["description"]),
                      end_section=last_of_modality)
    render.console(150).print(table)  # logs and pipes: do not squeeze the table into 80 columns


def _print_pretrained(as_json: bool) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from robustbench_dgsa.models.zoo import list_pretrained

    cards = list_pretrained()
    if as_json:
        typer.echo(json.dumps([c.to_dict() for c in cards], indent=2))
        return
    table = Table(title="Pretrained models (the zoo): dgsa-bench rollout / evaluate --pretrained NAME",
                  box=box.SIMPLE_HEAD, pad_edge=False, caption_justify="left",
                  caption=_zoo_caption(cards))
    for col in ("name", "model", "dataset", "params", "size", "clean acc", "mCA", "n test", "train time"):
        table.add_column(col, justify="left" if col in ("name", "model", "dataset") else "right", no_wrap=True)
    for c in cards:
        m, t = c.metrics, c.training
        mca = f"{m['mca']:.2%}" if m.get("mca") is not None else "-"
        secs = t.get("train_seconds")
        table.add_row(escape(c.name), escape(c.model), escape(c.dataset), f"{c.params:,}",
                      f"{c.weights_bytes / 1e6:.1f} MB {c.dtype}", f"{m['clean_accuracy']:.2%}", mca,
                      f"{m['n_test']:,}", f"{secs / 60:.0f} min" if secs else "-")
    render.console(120).print(table)


def _zoo_caption(cards: list) -> str:
    if not cards:
        return "No pretrained models are installed."
    from robustbench_dgsa.models.zoo import NUMBERS_FROM
    lines = ["clean acc: full official test split; mCA: mean accuracy over the 15 benchmark corruptions x 5 "
             "severities of a regenerated CIFAR-10-C-style test set (all 10,000 images).",
             f"Numbers from {NUMBERS_FROM}."]
    for c in cards:
        t, m = c.training, c.metrics
        note = f"frost: {m['frost_source']}; " if m.get("frost_source") else ""
        lines.append(f"{c.name}: {note}seed {t['seed']}, preset {t['preset']}, {t['epochs']} epochs on "
                     f"{t['n_train']:,} examples, commit {str(c.provenance.get('commit'))[:10]}; "
                     f"made by: {t['command']}")
    return "\n".join(lines)
