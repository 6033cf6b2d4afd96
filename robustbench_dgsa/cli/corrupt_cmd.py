"""``dgsa-bench corrupt`` (CIFAR-C-style image corruptions) and ``dgsa-bench corrupt-text`` (text noise).

Options -> :func:`robustbench_dgsa.jobs.corrupt.corrupt_images` (``corrupt_val_set`` for ImageNet / Tiny-ImageNet
validation folders) / :func:`~robustbench_dgsa.jobs.corrupt.corrupt_texts` (which read the input and drive the
standalone ``corruptions`` library) -> a Rich table, one line or JSON.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.progress import log as _log
from . import options as opt
from . import render
from .app import app

#: how the library's messages name what they point at, on this command line
_SPELL = {"frost_dir": "--frost-dir", "constants": "--constants", "text_column": "--text-column",
          "label_column": "--label-column", "corrupt": "dgsa-bench corrupt", "corrupt_text": "dgsa-bench corrupt-text"}


def _constants(constants: Optional[str]) -> Optional[str]:
    """``--constants``: a known name (lower case), or None for the default by image size."""
    from corruptions.errors import CorruptionError
    from corruptions.registry import get_regime

    from robustbench_dgsa.util.errors import UserError
    if constants is None:
        return None
    try:
        return get_regime(constants.strip().lower()).name
    except CorruptionError as e:
        raise UserError(f"--constants: {e}") from None


def _verify_table(df) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"regenerated {df.attrs.get('regen_dir')} vs {df.attrs.get('official_dir')}",
                  box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="bytewise: deterministic corruptions, expected identical up to library rounding; "
                          "distributional: random corruptions, only means/stds are expected to agree",
                  caption_justify="left")
    cols = [("corruption", "corruption"), ("sev", "severity"), ("compare", "comparison"), ("n", "n_compared"),
            ("mean r/o", None), ("std r/o", None), ("|diff|", "mean_abs_diff"), ("identical", "identical_fraction"),
            ("within 1", "within_1_fraction"), ("PSNR dB", "psnr_db")]
    for title, _ in cols:
        table.add_column(title, justify="left" if title in ("corruption", "compare") else "right", no_wrap=True)
    last = None
    for r in df.to_dict("records"):
        table.add_row(r["corruption"] if r["corruption"] != last else "", str(r["severity"]), r["comparison"],
                      str(r["n_compared"]), f"{r['mean_regen']:.2f}/{r['mean_official']:.2f}",
                      f"{r['std_regen']:.2f}/{r['std_official']:.2f}", f"{r['mean_abs_diff']:.3f}",
                      f"{r['identical_fraction']:.2%}", f"{r['within_1_fraction']:.2%}",
                      "inf" if math.isinf(r["psnr_db"]) else f"{r['psnr_db']:.1f}")
        last = r["corruption"]
    render.console(130).print(table)
    if df.attrs.get("labels_identical") is False:
        Console(stderr=True).print("[yellow]warning: labels differ between the two directories: were they made "
                                   "from the same images in the same order?[/]")


@app.command("corrupt")
def corrupt(  # long: its Typer signature declares 17 options (30 lines); the body is under 60
    input: Optional[str] = typer.Option(
        None, "--input", "-i",
        help="Dataset name (with --data-root), one image file (corrupted PNGs + a preview grid), an image folder "
             "(*.png/*.jpg, labels from class sub-folders), a .npy uint8 N x H x W x 3 array, or a .npz with 'x' and "
             "optional 'y'; imagenet / tiny-imagenet: the validation images under --data-root into ImageNet-C's / "
             "Tiny-ImageNet-C's folder layout. Omit to only --verify-against an existing --out directory."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Root folder of the dataset files."),
    split: str = typer.Option("test", "--split", help="Dataset split (also <folder>/<split> for image folders)."),
    corruption: str = opt.corruption("all"),
    severity: str = opt.severity("1-5"),
    seed: str = opt.seed("0", help="Seed of the keyed randomness (one)."),
    constants: Optional[str] = typer.Option(
        None, "--constants",
        help="Corruption constants of one reference generator: cifar (CIFAR-10-C, 32 px), tiny-imagenet "
             "(Tiny-ImageNet-C, 64 px) or imagenet (ImageNet-C, 224 px). Default: by image size (32, 64, 224 px); "
             "other sizes must choose."),
    out: Optional[Path] = opt.out(None, help="Output folder (official layout + manifest.json)."),
    device: str = opt.device(),
    chunk_size: int = typer.Option(1000, "--chunk-size", min=1, max=10**6, help="Images per chunk (bounds memory)."),
    frost_dir: Optional[Path] = typer.Option(None, "--frost-dir", help=(
        "Folder with frost1.png, frost2.png, frost3.png, frost4.jpg, frost5.jpg (e.g. ../shared/data/corruptions/"
        "frost). Default: <data-root>/corruptions/frost when present, else an installed imagecorruptions, else a "
        "labelled procedural substitute.")),
    limit: Optional[int] = opt.max_examples(help="Use only the first N images."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
    preview: Optional[Path] = typer.Option(None, "--preview",
                                           help="Also draw a PNG grid: images x corruptions x severities."),
    preview_images: int = typer.Option(3, "--preview-images", min=1, max=1000, help="Images in the preview grid."),
    verify_against: Optional[Path] = typer.Option(
        None, "--verify-against",
        help="Official CIFAR-10-C/100-C folder: compare the output with it and print a table."),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
) -> None:
    """Regenerate CIFAR-10-C / CIFAR-100-C-style corruptions in the official layout (<corruption>.npy +
    labels.npy + manifest.json), optionally preview them and compare them with an official set (constants:
    docs/METHODS.md, Corruptions and constants)."""
    from robustbench_dgsa.jobs.corrupt import VAL_SETS, corrupt_images, corrupt_val_set
    from robustbench_dgsa.util.progress import track
    _check_corrupt_paths(input, out, preview, verify_against)
    names, sevs, seed_ = (opt.parse_corruptions(corruption), opt.parse_severities(severity),
                          opt.parse_one_seed(seed)) if input is not None else (None, None, 0)
    say = dict(progress=None if quiet else track, log=(lambda m: None) if quiet else _log, warn=_log, spell=_SPELL)
    with opt.overwrite_flag():   # warnings still go to stderr
        if input is not None and input.strip().lower() in VAL_SETS:  # ImageNet-C / Tiny-ImageNet-C folder layout
            summary, df = corrupt_val_set(input.strip().lower(), data_root, out, names, sevs, seed=seed_,
                                          constants=_constants(constants), device=device, frost_dir=frost_dir,
                                          limit=limit, overwrite=overwrite, other=preview or verify_against,
                                          **say), None
        else:
            summary, df = corrupt_images(input, out, split=split, data_root=data_root, limit=limit,
                                         corruptions=names, severities=sevs, seed=seed_,
                                         constants=_constants(constants), device=device, chunk_size=chunk_size,
                                         frost_dir=frost_dir, overwrite=overwrite, preview=preview,
                                         preview_images=preview_images, verify_against=verify_against, **say)
    if df is not None and not json_:
        _verify_table(df)
    if json_:
        render.echo_json(summary, nonfinite="text")
    elif out is not None and input is not None:
        typer.echo(f"{summary['description']}: {len(summary['corruptions'])} corruption(s), severities "
                   f"{','.join(map(str, summary['severities']))}, {summary['n']} images"
                   f"{' of ' + summary['input'] if input.lower() in VAL_SETS else ''} -> {out} "
                   f"({summary['seconds']:.1f}s)")


def _check_corrupt_paths(input: Optional[str], out: Optional[Path], preview: Optional[Path],
                         verify_against: Optional[Path]) -> None:
    """The combinations ``corrupt`` accepts, and the output paths checked before any work."""
    from robustbench_dgsa.util.errors import UserError
    if input is None:
        if verify_against is None or out is None:
            raise UserError("give --input (and --out and/or --preview), or --out DIR --verify-against DIR to compare "
                            "an existing regenerated folder; for example: dgsa-bench corrupt --input synthetic-vision "
                            "--max-examples 4 --corruption fog,snow --severity 1-5 --preview fog-snow.png")
        if preview is not None:
            raise UserError("--preview needs --input")
    elif out is None and preview is None:
        raise UserError("give --out DIR (and/or --preview PNG)")
    if verify_against is not None and not verify_against.is_dir():
        raise UserError(f"--verify-against {verify_against}: no such folder")
    opt.check_output_file(preview, "--preview", suffixes=(".png",))
    if input is not None:
        opt.check_output_dir(out, "--out")


@app.command("corrupt-text")
def corrupt_text(
    input: str = typer.Option(..., "--input", "-i",
                              help="Text dataset name (with --data-root), or a .csv/.tsv/.jsonl file (see "
                                   "--text-column/--label-column), or a .txt file with one example per line."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Root folder of the dataset files."),
    split: str = typer.Option("test", "--split", help="Dataset split."),
    text_column: str = typer.Option("text", "--text-column", help="Text column of a CSV/JSONL file."),
    label_column: Optional[str] = typer.Option(None, "--label-column",
                                               help="Label column of a CSV/JSONL file (default: 'label' if "
                                                    "present, else no labels)."),
    encoding: str = opt.encoding(),
    noise: str = opt.text_noise("all"),
    severity: str = opt.severity("1-5"),
    seed: str = opt.seed("0", help="Seed of the keyed randomness (one)."),
    out: Path = opt.out(..., help="Output folder (JSONL per condition + manifest.json)."),
    limit: Optional[int] = opt.max_examples(),
    cer_sample: int = typer.Option(1000, "--cer-sample", min=0, max=10**9,
                                   help="Measure CER/WER on this many examples spread over the corpus (0: all)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
    json_: bool = opt.json_(),
    quiet: bool = opt.quiet(),
) -> None:
    """Write noisy copies of a text dataset per (noise type, severity) as JSONL, with the realised character
    and word error rates in manifest.json (docs/METHODS.md, Text noise). Examples may be at most 100,000
    characters long (a longer one is refused before anything is written: its error rates would take minutes
    each)."""
    from robustbench_dgsa.jobs.corrupt import corrupt_texts
    from robustbench_dgsa.util.progress import track

    types = opt.parse_text_noise(noise)
    sevs = opt.parse_severities(severity)
    seed_ = opt.parse_one_seed(seed)
    opt.check_output_dir(out, "--out")
    with opt.overwrite_flag():
        summary = corrupt_texts(input, out, split=split, data_root=data_root, text_column=text_column,
                                label_column=label_column, encoding=encoding, noise=types, severities=sevs,
                                seed=seed_, limit=limit, cer_sample=cer_sample, overwrite=overwrite,
                                progress=None if quiet else track, log=(lambda m: None) if quiet else _log,
                                spell=_SPELL)
    if json_:
        render.echo_json(summary, nonfinite="text")
    else:
        _text_table(summary)


def _text_table(summary: dict[str, Any]) -> None:
    """The realised error rates per condition."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table
    rows = summary["conditions"]
    console = render.console(110)
    console.print(escape(f"text noise v{summary['text_noise_version']} on {summary['input']} (seed "
                         f"{summary['seed']}) -> {summary['out']}"))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False,
                  caption=f"realised CER/WER measured on {rows[0]['n_measured']} of {summary['n']} examples"
                  if rows else None, caption_justify="left")
    for col in ("noise", "severity", "p", "CER", "WER"):
        table.add_column(col, justify="left" if col == "noise" else "right", no_wrap=True)
    last = None
    for r in rows:
        table.add_row(r["noise"] if r["noise"] != last else "", str(r["severity"]), f"{r['p']:.3f}",
                      f"{r['cer']:.3f}", f"{r['wer']:.3f}")
        last = r["noise"]
    console.print(table)
