"""``dgsa-bench corrupt`` (CIFAR-C-style image corruptions) and ``dgsa-bench corrupt-text`` (text noise).

Thin: input reading and option handling here; the work is in the standalone ``corruptions`` library
(``corruptions.layout.regenerate``, ``corruptions.preview.preview_grid``, ``corruptions.text``).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Optional

import typer

from . import options as opt
from .app import app

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}
_ARRAY_SUFFIXES = {".npy", ".npz"}
_TEXT_SUFFIXES = {".csv", ".tsv", ".jsonl", ".txt"}


def _jsonable(summary: dict[str, Any]) -> Any:
    from robustbench_dgsa.util.jsonio import to_jsonable
    return to_jsonable(summary, nonfinite="text")


def _log(message: str) -> None:
    from robustbench_dgsa.util.progress import log
    log(message)


# ---------------------------------------------------------------------------------------------- image inputs


def _looks_like_path(spec: str) -> bool:
    p = Path(spec)
    return ("/" in spec or "\\" in spec or p.suffix.lower() in _IMAGE_SUFFIXES | _ARRAY_SUFFIXES | _TEXT_SUFFIXES
            or spec.startswith((".", "~")))


def _image_source(spec: str) -> str:
    """The dataset-source name for ``--input``: an image folder, a .npy/.npz file, or a dataset name as given."""
    from corruptions.errors import CorruptionError
    path = Path(spec).expanduser()
    if path.is_dir():
        return f"folder:{path}"
    if path.suffix.lower() in _ARRAY_SUFFIXES:
        return f"{path.suffix.lower()[1:]}:{path}"
    if path.exists():
        raise CorruptionError(f"{path}: unsupported input (give a .npy or .npz file, an image folder, or a "
                              f"dataset name)")
    if _looks_like_path(spec):
        raise CorruptionError(f"{path}: no such file or folder")
    return spec


def _load_image_input(spec: str, split: str, data_root: Path | None, limit: int | None) -> dict:
    """Through the dataset machinery (``load_dataset``: folder:/npy:/npz: sources or a dataset name; one
    reader, :mod:`robustbench_dgsa.data.readers`). Returns {"x", "y", "description", "notes", "dataset"}."""
    from corruptions.errors import CorruptionError
    from corruptions.layout import check_images

    from robustbench_dgsa.data import load_dataset, readers
    source = _image_source(spec)
    generic = source.startswith(("folder:", "npy:", "npz:"))
    options = {"unlabeled_ok": True} if generic else {}
    if source.startswith("folder:"):
        options["split_optional"] = True
    ds = load_dataset(source, split, data_root=data_root, **options)
    if getattr(ds, "modality", None) != "image":
        raise CorruptionError(f"dataset {spec!r} is not an image dataset (no image array); for text use "
                              f"dgsa-bench corrupt-text")
    x, y = ds.x, (ds.y if ds.classes else None)
    if limit:
        x = x[:limit]
        y = None if y is None else y[:limit]
    if generic:
        desc = ds.source
    else:
        desc = f"dataset {spec} split {split} ({ds.source or data_root or 'default root'})"
    notes = list(ds.notes)
    if x.shape[-1] == 1:
        notes.append(f"grayscale input {x.shape[:-1]}: replicated to 3 channels")
        x = readers.to_rgb(x)
    check_images(x, desc)
    if limit:
        desc += f", first {len(x)} images"
    return {"x": x, "y": y, "description": desc, "notes": notes, "dataset": None if generic else spec.lower()}


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
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 130))
    console.print(table)
    if df.attrs.get("labels_identical") is False:
        Console(stderr=True).print("[yellow]warning: labels differ between the two directories: were they made "
                                   "from the same images in the same order?[/]")


@app.command("corrupt")
def corrupt(  # long: its Typer signature declares 17 options (30 lines); the body is under 60
    input: Optional[str] = typer.Option(
        None, "--input", "-i",
        help="Dataset name (with --data-root), an image folder (*.png/*.jpg, labels from class sub-folders), a "
             ".npy uint8 N x H x W x 3 array, or a .npz with 'x' and optional 'y'; imagenet / tiny-imagenet: the "
             "validation images under --data-root into ImageNet-C's / Tiny-ImageNet-C's folder layout. Omit to "
             "only --verify-against an existing --out directory."),
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
    frost_dir: Optional[Path] = typer.Option(None, "--frost-dir",
                                             help="Folder with frost1.png, frost2.png, frost3.png, frost4.jpg, "
                                                  "frost5.jpg (e.g. ../shared/data/corruptions/frost). Default: an "
                                                  "installed imagecorruptions, else a labelled procedural "
                                                  "substitute."),
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
    labels.npy + manifest.json), optionally preview them and compare them with an official set."""
    from corruptions import layout

    from robustbench_dgsa.util.errors import UserError

    started = time.monotonic()
    log = (lambda message: None) if quiet else _log  # warnings still go to stderr
    summary: dict[str, Any] = {}
    _check_corrupt_paths(input, out, preview, verify_against)
    if input is not None and input.strip().lower() in _VAL_SETS:  # ImageNet-C / Tiny-ImageNet-C folder layout
        return _corrupt_val_set(input.strip().lower(), data_root, out, corruption, severity, seed, constants,
                                device, frost_dir, limit, overwrite, quiet, json_, started, preview or verify_against)
    if input is not None:
        names = opt.parse_corruptions(corruption)
        sevs = opt.parse_severities(severity)
        seed = opt.parse_one_seed(seed)
        from robustbench_dgsa.engine.predict import resolve_device
        dev = str(resolve_device(device))
        # a given --frost-dir is checked before any work or progress line
        frost = _frost_textures(names, frost_dir, log) if frost_dir is not None else None
        inp = _load_image_input(input, split, data_root, limit)
        x, y = inp["x"], inp["y"]
        for note in inp["notes"]:
            log(f"note: {note}")
        log(f"input: {inp['description']}: {len(x)} images {x.shape[1]}x{x.shape[2]}, "
            f"{'labels' if y is not None else 'no labels'}")
        constants = _constants(constants, x.shape[1], x.shape[2])
        if frost_dir is None:
            frost = _frost_textures(names, None, log)
        phrase = _regenerated_phrase(inp["dataset"], constants)
        summary.update(input=inp["description"], notes=inp["notes"], n=len(x), image_shape=list(x.shape[1:]),
                       labels=y is not None, corruptions=names, severities=sevs, seed=seed,
                       constants=constants, frost_source=None if frost is None else frost.source)
        if out is not None:
            summary.update(_regenerate(x, y, out, names, sevs, constants=constants, seed=seed, device=dev,
                                       frost=frost, chunk_size=chunk_size, overwrite=overwrite, quiet=quiet,
                                       phrase=phrase, input_description=inp["description"], log=log))
        if preview is not None:
            k = min(preview_images, len(x))
            from corruptions.preview import preview_grid
            preview_grid(x[:k], names, sevs, preview, constants=constants, seed=seed, frost=frost, device=dev,
                         title=f"{phrase}, seed {seed}: {inp['description']}")
            summary["preview"] = str(preview)
            log(f"preview: {preview}")
    else:
        if layout.read_manifest(out) is None and not layout.list_available(out):
            raise UserError(f"{out}: no corruption files to verify")
        summary["out"] = str(out)

    if verify_against is not None:
        df = layout.verify_against(out, verify_against)
        summary["verify"] = df.to_dict("records")
        summary["verify_labels_identical"] = df.attrs.get("labels_identical")
        if not json_:
            _verify_table(df)
    summary["seconds"] = round(time.monotonic() - started, 2)
    if json_:
        typer.echo(json.dumps(_jsonable(summary), indent=2))
    elif out is not None and input is not None:
        typer.echo(f"{summary['description']}: {len(summary['corruptions'])} corruption(s), severities "
                   f"{','.join(map(str, summary['severities']))}, {summary['n']} images -> {out} "
                   f"({summary['seconds']:.1f}s)")


_VAL_SETS = ("imagenet", "tiny-imagenet")


def _corrupt_val_set(dataset: str, data_root: Optional[Path], out: Optional[Path], corruption: str, severity: str,
                     seed: str, constants: Optional[str], device: str, frost_dir: Optional[Path],
                     limit: Optional[int], overwrite: bool, quiet: bool, json_: bool, started: float,
                     other: Optional[Path] = None) -> None:
    """``corrupt --input imagenet|tiny-imagenet``: one library call (``regenerate_val_folders``) writes
    ``<out>/<corruption>/<severity>/<wnid>/<file>`` with SHA256SUMS and manifest.json."""
    from corruptions import layout

    from robustbench_dgsa.engine.predict import resolve_device
    from robustbench_dgsa.util.errors import UserError
    from robustbench_dgsa.util.progress import track
    if data_root is None or out is None:
        raise UserError(f"--input {dataset} needs --data-root (the folder holding its validation images) and --out")
    if other is not None:
        raise UserError(f"--preview and --verify-against work on the CIFAR-C layout, not with --input {dataset}")
    names, sevs = opt.parse_corruptions(corruption), opt.parse_severities(severity)
    log = (lambda message: None) if quiet else _log
    frost = _frost_textures(names, frost_dir, log)
    with opt.overwrite_flag():
        manifest = layout.regenerate_val_folders(
            dataset, data_root, out, names, sevs, constants=None if constants is None else constants.strip().lower(),
            limit=limit, seed=opt.parse_one_seed(seed), device=str(resolve_device(device)), frost=frost,
            overwrite=overwrite, progress=None if quiet else track)
    data = manifest.data
    summary = {"input": data.get("input"), "n": data["n"], "constants": data["constants"], "corruptions": names,
               "severities": sevs, "out": str(out), "manifest": str(manifest.path), "description": data["description"],
               "skipped": list(manifest.skipped), "seconds": round(time.monotonic() - started, 2)}
    if json_:
        typer.echo(json.dumps(_jsonable(summary), indent=2))
        return
    if manifest.skipped:
        log(f"skipped (already finished in {out}): {', '.join(manifest.skipped)}")
    typer.echo(f"{data['description']}: {len(names)} corruption(s), severities {','.join(map(str, sevs))}, "
               f"{data['n']} images of {data.get('input')} -> {out} ({summary['seconds']:.1f}s)")


def _regenerated_phrase(dataset: str | None, constants: str = "cifar") -> str:
    """How the output is called: after the dataset it came from (CIFAR-10-C-style for cifar10, CIFAR-100-C-style
    for cifar100), CIFAR-C-style for other inputs at CIFAR's constants, else after the constants' reference set."""
    from corruptions import layout
    from corruptions.registry import get_regime
    if constants != "cifar":
        return f"{get_regime(constants).dataset}-style (regenerated)"
    if dataset == "cifar10":
        return layout.REGENERATED_PHRASE
    if dataset == "cifar100":
        return "CIFAR-100-C-style (regenerated)"
    return "CIFAR-C-style (regenerated)"


def _constants(constants: Optional[str], h: int, w: int) -> str:
    """The regime name for ``--constants`` (default: by image size), checked before any work."""
    from corruptions.errors import CorruptionError
    from corruptions.registry import REGIMES, get_regime, regime_for_size

    from robustbench_dgsa.util.errors import UserError
    if constants is not None:
        try:
            return get_regime(constants.strip().lower()).name
        except CorruptionError as e:
            raise UserError(f"--constants: {e}") from None
    name = regime_for_size(h, w)
    if name is None:
        sizes = ", ".join(f"{r.size} px -> {r.name}" for r in REGIMES.values())
        raise UserError(f"{h}x{w} images have no default corruption constants ({sizes}); pass --constants "
                        f"{'|'.join(REGIMES)}")
    return name


def _regenerate(x, y, out: Path, names: list[str], sevs: list[int], *, constants: str, seed: int, device: str,
                frost,
                chunk_size: int, overwrite: bool, quiet: bool, phrase: str, input_description: str,
                log) -> dict[str, Any]:
    """Write the corrupted sets in the official layout; the summary entries about them."""
    from corruptions import layout

    from robustbench_dgsa.util.progress import track

    with opt.overwrite_flag():
        manifest = layout.regenerate(x, y, out, names, sevs, constants=constants, seed=seed, device=device,
                                     frost=frost,
                                     chunk_size=chunk_size, overwrite=overwrite, progress=None if quiet else track,
                                     description=phrase, input_description=input_description)
    if manifest.skipped:
        _log(f"skipped (already finished in {out} with the same parameters): "
             f"{layout.name_list(manifest.skipped)}")
    written = len(names) - len(manifest.skipped)
    if written:
        log(f"wrote {written} corruption file(s) x {len(sevs)} severities to {out} ({phrase})")
    if not manifest.official_layout:
        log(f"note: {len(x)} images x severities {','.join(map(str, sevs))} is not the official "
            f"5 x 10,000 layout; files are named <corruption>{layout.layout_suffix(len(x), sevs)}.npy")
    return dict(out=str(out), manifest=str(manifest.path), description=phrase,
                files={k: v["sha256"] for k, v in manifest.files.items()},
                skipped=list(manifest.skipped), official_layout=manifest.official_layout)


def _check_corrupt_paths(input: Optional[Path], out: Optional[Path], preview: Optional[Path],
                         verify_against: Optional[Path]) -> None:
    """The combinations ``corrupt`` accepts, and the output paths checked before any work."""
    from robustbench_dgsa.util.errors import UserError

    if input is None:
        if verify_against is None or out is None:
            raise UserError("give --input (and --out and/or --preview), or --out DIR --verify-against DIR to "
                            "compare an existing regenerated folder")
        if preview is not None:
            raise UserError("--preview needs --input")
    elif out is None and preview is None:
        raise UserError("give --out DIR (and/or --preview PNG)")
    if verify_against is not None and not verify_against.is_dir():
        raise UserError(f"--verify-against {verify_against}: no such folder")
    opt.check_output_file(preview, "--preview", suffixes=(".png",))
    if input is not None:
        opt.check_output_dir(out, "--out")


def _frost_textures(names: list[str], frost_dir: Optional[Path], log):
    """Frost's textures when frost is asked for (a warning when only the procedural substitute is found)."""
    if "frost" not in names:
        if frost_dir is not None:
            log("note: --frost-dir ignored (frost is not among the corruptions)")
        return None
    import warnings

    from corruptions.errors import ResultWarning
    from corruptions.frost import load_frost_textures
    with warnings.catch_warnings():  # the library's procedural-frost warning: said once, below, with the flag
        warnings.simplefilter("ignore", ResultWarning)
        frost = load_frost_textures(frost_dir)
    log(f"frost textures: {frost.source}")
    if str(frost.source).startswith("procedural"):
        _log("warning: no frost textures found (give --frost-dir or install imagecorruptions); frost uses "
             "a procedural substitute and is not the reference frost")
    return frost


# ---------------------------------------------------------------------------------------------- text


def _maybe_int_labels(labels: list) -> list:
    try:
        ints = [int(v) for v in labels]
    except (TypeError, ValueError):
        return labels
    return ints if all(str(v).strip() == str(i) for v, i in zip(labels, ints)) else labels


def _read_text_file(path: Path, text_column: str, label_column: str | None, encoding: str):
    """Texts and optional labels from a .txt (one example per line) or a text table, by the one reader."""
    from corruptions.errors import CorruptionError

    from robustbench_dgsa.data import readers
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return readers.read_lines(path, encoding), None
    if suffix not in (".csv", ".tsv", ".jsonl"):
        raise CorruptionError(f"{path}: unsupported text file (use .csv, .tsv, .jsonl or .txt)")
    table = readers.read_table(path, encoding=encoding)
    if not table.rows:
        raise CorruptionError(f"{path}: no rows")
    fields = table.columns
    if text_column not in fields:
        raise CorruptionError(f"{path}: no column {text_column!r} (columns: {', '.join(fields)}); pass "
                              f"--text-column")
    lab = label_column if label_column is not None else ("label" if "label" in fields else None)
    if lab is not None and lab not in fields:
        raise CorruptionError(f"{path}: no column {lab!r} (columns: {', '.join(fields)}); pass --label-column")
    texts = []
    for r, line in zip(table.rows, table.lines):
        t = r.get(text_column)
        if not isinstance(t, str):
            raise CorruptionError(f"{path} line {line}: {text_column!r} is not a string")
        texts.append(t)
    labels = _maybe_int_labels([r.get(lab) for r in table.rows]) if lab is not None else None
    return texts, labels


def _load_text_input(spec: str, split: str, data_root: Path | None, text_column: str, label_column: str | None,
                     encoding: str, limit: int | None) -> tuple[list[str], list | None, str]:
    from corruptions.errors import CorruptionError

    from robustbench_dgsa.data import load_dataset, readers
    readers.check_encoding(encoding)
    path = Path(spec).expanduser()
    if path.is_file():
        texts, labels = _read_text_file(path, text_column, label_column, encoding)
        desc = f"file {path}"
    elif path.exists() or _looks_like_path(spec):
        raise CorruptionError(f"{path}: not a text file (use .csv, .tsv, .jsonl or .txt, or a dataset name)"
                              if path.exists() else f"{path}: no such file")
    else:
        ds = load_dataset(spec, split, data_root=data_root)
        if getattr(ds, "modality", None) != "text":
            raise CorruptionError(f"dataset {spec!r} is not a text dataset; for images use dgsa-bench corrupt")
        texts, labels = list(ds.texts), ds.y.tolist()
        desc = f"dataset {spec} split {split} ({ds.source or data_root or 'default root'})"
    if limit:
        texts = texts[:limit]
        labels = None if labels is None else labels[:limit]
        desc += f", first {len(texts)} examples"
    if not texts:
        raise CorruptionError(f"{desc}: no examples")
    return texts, labels, desc


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
    and word error rates in manifest.json. Examples may be at most 100,000 characters long (a longer one is
    refused before anything is written: its error rates would take minutes each)."""
    from corruptions import text as tn

    from robustbench_dgsa.util.progress import track

    started = time.monotonic()
    types = opt.parse_text_noise(noise)
    sevs = opt.parse_severities(severity)
    seed = opt.parse_one_seed(seed)
    opt.check_output_dir(out, "--out")
    texts, labels, desc = _load_text_input(input, split, data_root, text_column, label_column, encoding, limit)
    tn.check_text_lengths(texts)  # before any word on the input: a refused input is one line
    if not quiet:
        _log(f"input: {desc}: {len(texts)} examples, {'labels' if labels is not None else 'no labels'}")
    with opt.overwrite_flag():
        manifest = tn.write_text_noise(texts, labels, out, types, sevs, seed=seed, overwrite=overwrite,
                                       max_measure=cer_sample or None, input_description=desc,
                                       progress=None if quiet else track)
    rows = [{"file": f, "noise": m["noise"], "severity": m["severity"], "p": m["p"], "cer": m["cer"],
             "wer": m["wer"], "n_measured": m["n_measured"]}
            for f, m in manifest["files"].items() if m["noise"] is not None]
    summary = {"input": desc, "n": len(texts), "out": str(out), "noise_types": types, "severities": sevs,
               "seed": seed, "text_noise_version": manifest["text_noise_version"], "conditions": rows,
               "manifest": str(out / "manifest.json"), "seconds": round(time.monotonic() - started, 2)}
    if json_:
        typer.echo(json.dumps(_jsonable(summary), indent=2))
        return
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 110))
    console.print(escape(f"text noise v{manifest['text_noise_version']} on {desc} (seed {seed}) -> {out}"))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False,
                  caption=f"realised CER/WER measured on {rows[0]['n_measured']} of {len(texts)} examples"
                  if rows else None, caption_justify="left")
    for col in ("noise", "severity", "p", "CER", "WER"):
        table.add_column(col, justify="left" if col == "noise" else "right", no_wrap=True)
    last = None
    for r in rows:
        table.add_row(r["noise"] if r["noise"] != last else "", str(r["severity"]), f"{r['p']:.3f}",
                      f"{r['cer']:.3f}", f"{r['wer']:.3f}")
        last = r["noise"]
    console.print(table)
