"""``dgsa-bench corrupt`` (CIFAR-C-style image corruptions) and ``dgsa-bench corrupt-text`` (text noise).

Thin: input reading and option handling here; the work is in the standalone ``corruptions`` library
(``corruptions.layout.regenerate``, ``corruptions.preview.preview_grid``, ``corruptions.text``).
"""
from __future__ import annotations

import csv
import json
import math
import re
import time
import zipfile
from pathlib import Path
from typing import Any, Optional

import numpy as np
import typer

from .app import app

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}
_ARRAY_SUFFIXES = {".npy", ".npz"}
_TEXT_SUFFIXES = {".csv", ".tsv", ".jsonl", ".txt"}


def _log(message: str) -> None:
    from robustbench_dgsa.util.progress import log
    log(message)


def _natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.as_posix())]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else "-inf" if obj < 0 else "nan"
    if isinstance(obj, Path):
        return str(obj)
    return obj


# ---------------------------------------------------------------------------------------------- image inputs


def _looks_like_path(spec: str) -> bool:
    p = Path(spec)
    return ("/" in spec or "\\" in spec or p.suffix.lower() in _IMAGE_SUFFIXES | _ARRAY_SUFFIXES | _TEXT_SUFFIXES
            or spec.startswith((".", "~")))


def _as_uint8_images(x: Any, where: str) -> tuple[np.ndarray, str | None]:
    """Check dtype/shape; replicate grayscale to 3 channels. Returns (x, note)."""
    from corruptions.errors import CorruptionError
    if not isinstance(x, np.ndarray):
        raise CorruptionError(f"{where}: expected a NumPy array, got {type(x).__name__}")
    if x.dtype != np.uint8:
        hint = (" (floats in [0,1]? convert with (x * 255).round().astype(np.uint8))"
                if x.dtype.kind == "f" else "")
        raise CorruptionError(f"{where}: images must be uint8 (0..255), got {x.dtype}{hint}")
    if x.ndim == 3:
        return np.repeat(np.asarray(x)[..., None], 3, axis=-1), f"grayscale input {x.shape}: replicated to 3 channels"
    if x.ndim == 4 and x.shape[-1] == 1:
        return np.repeat(np.asarray(x), 3, axis=-1), f"grayscale input {x.shape}: replicated to 3 channels"
    if x.ndim == 4 and x.shape[-1] == 3:
        return x, None
    if x.ndim == 4 and x.shape[1] in (1, 3) and x.shape[-1] not in (1, 3):
        raise CorruptionError(f"{where}: shape {x.shape} looks channels-first; transpose to (N, H, W, 3)")
    raise CorruptionError(f"{where}: images must have shape (N, H, W, 3), (N, H, W, 1) or (N, H, W), got {x.shape}")


def _check_labels(y: Any, n: int, where: str) -> np.ndarray | None:
    from corruptions.errors import CorruptionError
    if y is None:
        return None
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n or y.dtype.kind not in "iu":
        raise CorruptionError(f"{where}: labels must be {n} integers (1-D), got {y.dtype} {y.shape}")
    return y.astype(np.int64)


def _read_npy(path: Path, limit: int | None):
    from corruptions.errors import CorruptionError
    try:
        x = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise CorruptionError(f"{path}: cannot read as a .npy array ({e})") from None
    if not isinstance(x, np.ndarray):
        raise CorruptionError(f"{path}: not a single array")
    return np.array(x[:limit] if limit else x), None


def _read_npz(path: Path, limit: int | None):
    from corruptions.errors import CorruptionError
    try:
        with np.load(path, allow_pickle=False) as z:
            if "x" not in z.files:
                raise CorruptionError(f"{path}: needs an array named 'x' (and optionally 'y'); it has "
                                      f"{', '.join(z.files) or 'none'}")
            x = z["x"]
            y = z["y"] if "y" in z.files else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CorruptionError(f"{path}: cannot read as a .npz archive ({e})") from None
    if limit:
        x = x[:limit]
        y = None if y is None else y[:limit]
    return x, y


def _read_image_folder(root: Path, split: str, limit: int | None):
    """Images under ``root`` (or ``root/<split>`` when that exists), recursively; labels from class folders
    when every image sits in a first-level subfolder. Returns (x, y, class_names, note, base)."""
    from PIL import Image, UnidentifiedImageError

    from corruptions.errors import CorruptionError
    base = root / split if (root / split).is_dir() else root
    files = sorted((p for p in base.rglob("*") if p.suffix.lower() in _IMAGE_SUFFIXES and p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(base).parts)), key=_natural_key)
    if not files:
        raise CorruptionError(f"{base}: no .png/.jpg images found")
    rel = [p.relative_to(base) for p in files]
    classes = sorted({r.parts[0] for r in rel}) if all(len(r.parts) >= 2 for r in rel) else None
    if classes is not None:  # keep class-major order (natural sort within each class)
        order = sorted(range(len(files)), key=lambda i: (classes.index(rel[i].parts[0]), _natural_key(rel[i])))
        files, rel = [files[i] for i in order], [rel[i] for i in order]
    if limit:
        files, rel = files[:limit], rel[:limit]
    arrays, gray, alpha = [], 0, 0
    for p in files:
        try:
            with Image.open(p) as im:
                if im.mode in ("L", "I;16", "I", "F", "1", "LA"):
                    gray += 1
                if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
                    alpha += 1
                a = np.asarray(im.convert("RGB"), dtype=np.uint8)
        except (OSError, UnidentifiedImageError) as e:
            raise CorruptionError(f"{p}: unreadable image ({e})") from None
        if arrays and a.shape != arrays[0].shape:
            raise CorruptionError(f"{p}: size {a.shape[1]}x{a.shape[0]} differs from the first image's "
                                  f"{arrays[0].shape[1]}x{arrays[0].shape[0]}; all images must have one size")
        arrays.append(a)
    x = np.stack(arrays)
    y = None if classes is None else np.array([classes.index(r.parts[0]) for r in rel], dtype=np.int64)
    notes = []
    if gray:
        notes.append(f"{gray} grayscale image(s): replicated to 3 channels")
    if alpha:
        notes.append(f"{alpha} image(s) with transparency: alpha channel dropped")
    return x, y, classes, "; ".join(notes) or None, base


def _load_image_input(spec: str, split: str, data_root: Path | None, limit: int | None) -> dict:
    """Returns {"x", "y", "description", "notes", "dataset"}."""
    from corruptions.errors import CorruptionError
    path = Path(spec).expanduser()
    notes: list[str] = []
    dataset = None
    if path.exists():
        if path.is_dir():
            x, y, classes, note, base = _read_image_folder(path, split, limit)
            desc = f"image folder {base}" + (f" ({len(classes)} classes from sub-folders)" if classes else
                                             " (no class sub-folders: no labels)")
            if note:
                notes.append(note)
        elif path.suffix.lower() == ".npy":
            x, y = _read_npy(path, limit)
            desc = f"array {path}"
        elif path.suffix.lower() == ".npz":
            x, y = _read_npz(path, limit)
            desc = f"arrays {path}" + ("" if y is not None else " (no 'y': no labels)")
        else:
            raise CorruptionError(f"{path}: unsupported input (give a .npy or .npz file, an image folder, or a "
                                  f"dataset name)")
    elif _looks_like_path(spec):
        raise CorruptionError(f"{path}: no such file or folder")
    else:
        try:
            from ..data import load_dataset
        except ImportError as e:
            from robustbench_dgsa.util.errors import UserError
            raise UserError(f"{spec!r} is not a file or folder, and dataset loading is unavailable ({e})") from None
        ds = load_dataset(spec, split, data_root=data_root)
        x, y = getattr(ds, "x", None), getattr(ds, "y", None)
        if not isinstance(x, np.ndarray):
            raise CorruptionError(f"dataset {spec!r} is not an image dataset (no image array); for text use "
                                  f"dgsa-bench corrupt-text")
        if limit:
            x = x[:limit]
            y = None if y is None else y[:limit]
        dataset = spec.lower()
        desc = f"dataset {spec} split {split} ({getattr(ds, 'source', None) or data_root or 'default root'})"
    x, gray_note = _as_uint8_images(x, desc)
    if gray_note:
        notes.append(gray_note)
    from corruptions.layout import check_images
    check_images(x, desc)
    y = _check_labels(y, len(x), desc)
    if limit:
        desc += f", first {len(x)} images"
    return {"x": x, "y": y, "description": desc, "notes": notes, "dataset": dataset}


def _device(device: str) -> str | None:
    from robustbench_dgsa.util.errors import UserError
    d = device.strip().lower()
    if d == "auto":
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    if d == "cpu":
        return "cpu"
    if d.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            raise UserError(f"--device {device}: CUDA is not available here (use cpu or auto)")
        return d
    raise UserError(f"--device must be cpu, cuda, cuda:N or auto, got {device!r}")


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
        console.print("[yellow]labels differ between the two directories: were they made from the same images "
                      "in the same order?[/]")


@app.command("corrupt")
def corrupt(
    input: Optional[str] = typer.Option(
        None, "--input", "-i",
        help="Dataset name (with --data-root), an image folder (*.png/*.jpg, labels from class sub-folders), a "
             ".npy uint8 N x H x W x 3 array, or a .npz with 'x' and optional 'y'. Omit to only --verify-against "
             "an existing --out directory."),
    data_root: Optional[Path] = typer.Option(None, "--data-root", help="Root folder of the dataset files."),
    split: str = typer.Option("test", "--split", help="Dataset split (also <folder>/<split> for image folders)."),
    corruption: str = typer.Option("all", "--corruption", "-c",
                                   help="Names or groups, comma-separated: a corruption, noise/blur/weather/"
                                        "digital, benchmark (15), extra (4), all (19)."),
    severity: str = typer.Option("1-5", "--severity", "-s", help="Severities: 3, 1-5 or 1,3,5."),
    seed: int = typer.Option(0, "--seed", help="Seed of the keyed randomness."),
    out: Optional[Path] = typer.Option(None, "--out", "-o",
                                       help="Output folder (official layout + manifest.json)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
    chunk_size: int = typer.Option(1000, "--chunk-size", min=1, help="Images per chunk (bounds memory)."),
    frost_dir: Optional[Path] = typer.Option(None, "--frost-dir",
                                             help="Folder with frost1.png, frost2.png, frost3.png, frost4.jpg, "
                                                  "frost5.jpg (e.g. ../shared/data/corruptions/frost). Default: an "
                                                  "installed imagecorruptions, else a labelled procedural "
                                                  "substitute."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Use only the first N images."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
    preview: Optional[Path] = typer.Option(None, "--preview",
                                           help="Also draw a PNG grid: images x corruptions x severities."),
    preview_images: int = typer.Option(3, "--preview-images", min=1, help="Images in the preview grid."),
    verify_against: Optional[Path] = typer.Option(
        None, "--verify-against",
        help="Official CIFAR-10-C/100-C folder: compare the output with it and print a table."),
    json_: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> None:
    """Regenerate CIFAR-10-C-style corruptions in the official layout (<corruption>.npy + labels.npy +
    manifest.json), optionally preview them and compare them with an official set."""
    from corruptions import layout
    from corruptions.errors import CorruptionError

    from robustbench_dgsa.util.errors import UserError
    from robustbench_dgsa.util.progress import track

    started = time.monotonic()
    summary: dict[str, Any] = {}
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
    if preview is not None and preview.suffix.lower() != ".png":
        raise UserError(f"--preview must name a .png file, got {preview}")

    if input is not None:
        names = layout._resolve_names(corruption)
        sevs = layout._resolve_severities(severity)
        if seed < 0:
            raise CorruptionError(f"--seed must be >= 0, got {seed}")
        dev = _device(device)
        inp = _load_image_input(input, split, data_root, limit)
        x, y = inp["x"], inp["y"]
        for note in inp["notes"]:
            _log(f"note: {note}")
        _log(f"input: {inp['description']}: {len(x)} images {x.shape[1]}x{x.shape[2]}, "
             f"{'labels' if y is not None else 'no labels'}")
        frost = None
        if "frost" in names:
            from corruptions.frost import load_frost_textures
            frost = load_frost_textures(frost_dir)
            _log(f"frost textures: {frost.source}")
            if str(frost.source).startswith("procedural"):
                _log("warning: no frost textures found (give --frost-dir or install imagecorruptions); frost uses "
                     "a procedural substitute and is not the reference frost")
        elif frost_dir is not None:
            _log("note: --frost-dir ignored (frost is not among the corruptions)")
        phrase = ("CIFAR-100-C-style (regenerated)" if inp["dataset"] and "100" in inp["dataset"]
                  else layout.REGENERATED_PHRASE)
        summary.update(input=inp["description"], notes=inp["notes"], n=len(x), image_shape=list(x.shape[1:]),
                       labels=y is not None, corruptions=names, severities=sevs, seed=seed,
                       frost_source=None if frost is None else frost.source)
        if out is not None:
            manifest = layout.regenerate(x, y, out, names, sevs, seed=seed, device=dev, frost=frost,
                                         chunk_size=chunk_size, overwrite=overwrite, progress=track,
                                         description=phrase, input_description=inp["description"])
            summary.update(out=str(out), manifest=str(manifest.path), description=phrase,
                           files={k: v["sha256"] for k, v in manifest.files.items()},
                           skipped=list(manifest.skipped), official_layout=manifest.official_layout)
            if manifest.skipped:
                _log(f"skipped (already finished in {out} with the same parameters): "
                     f"{layout.name_list(manifest.skipped)}")
            written = len(names) - len(manifest.skipped)
            if written:
                _log(f"wrote {written} corruption file(s) x {len(sevs)} severities to {out} ({phrase})")
            if not manifest.official_layout:
                _log(f"note: {len(x)} images x severities {','.join(map(str, sevs))} is not the official "
                     f"5 x 10,000 layout; files are named <corruption>{layout.layout_suffix(len(x), sevs)}.npy")
        if preview is not None:
            k = min(preview_images, len(x))
            from corruptions.preview import preview_grid
            preview_grid(x[:k], names, sevs, preview, seed=seed, frost=frost, device=dev,
                         title=f"{phrase}, seed {seed}: {inp['description']}")
            summary["preview"] = str(preview)
            _log(f"preview: {preview}")
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


# ---------------------------------------------------------------------------------------------- text


def _maybe_int_labels(labels: list) -> list:
    try:
        ints = [int(v) for v in labels]
    except (TypeError, ValueError):
        return labels
    return ints if all(str(v).strip() == str(i) for v, i in zip(labels, ints)) else labels


def _read_text_file(path: Path, text_column: str, label_column: str | None, encoding: str):
    from corruptions.errors import CorruptionError
    suffix = path.suffix.lower()
    try:
        raw = path.read_text(encoding=encoding)
    except UnicodeDecodeError as e:
        raise CorruptionError(f"{path}: not valid {encoding} ({e.reason} at byte {e.start}); pass --encoding "
                              f"(e.g. latin-1)") from None
    except OSError as e:
        raise CorruptionError(f"{path}: unreadable ({e})") from None
    texts: list[str] = []
    labels: list | None = None
    if suffix == ".txt":
        texts = [line for line in raw.splitlines() if line.strip()]
        return texts, None
    if suffix in (".csv", ".tsv"):
        rows = list(csv.DictReader(raw.splitlines(), delimiter="\t" if suffix == ".tsv" else ","))
        fields = list(rows[0].keys()) if rows else []
    elif suffix == ".jsonl":
        rows = []
        for k, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise CorruptionError(f"{path}:{k}: not JSON ({e})") from None
            if not isinstance(obj, dict):
                raise CorruptionError(f"{path}:{k}: each line must be a JSON object")
            rows.append(obj)
        fields = list(rows[0].keys()) if rows else []
    else:
        raise CorruptionError(f"{path}: unsupported text file (use .csv, .tsv, .jsonl or .txt)")
    if not rows:
        raise CorruptionError(f"{path}: no rows")
    if text_column not in fields:
        raise CorruptionError(f"{path}: no column {text_column!r} (columns: {', '.join(fields)}); pass "
                              f"--text-column")
    lab = label_column if label_column is not None else ("label" if "label" in fields else None)
    if lab is not None and lab not in fields:
        raise CorruptionError(f"{path}: no column {lab!r} (columns: {', '.join(fields)}); pass --label-column")
    for k, r in enumerate(rows):
        t = r.get(text_column)
        if not isinstance(t, str):
            raise CorruptionError(f"{path}: row {k + 1}: {text_column!r} is not a string")
        texts.append(t)
    if lab is not None:
        labels = _maybe_int_labels([r.get(lab) for r in rows])
    return texts, labels


def _load_text_input(spec: str, split: str, data_root: Path | None, text_column: str, label_column: str | None,
                     encoding: str, limit: int | None) -> tuple[list[str], list | None, str]:
    from corruptions.errors import CorruptionError
    path = Path(spec).expanduser()
    if path.is_file():
        texts, labels = _read_text_file(path, text_column, label_column, encoding)
        desc = f"file {path}"
    elif path.exists() or _looks_like_path(spec):
        raise CorruptionError(f"{path}: not a text file (use .csv, .tsv, .jsonl or .txt, or a dataset name)"
                              if path.exists() else f"{path}: no such file")
    else:
        try:
            from ..data import load_dataset
        except ImportError as e:
            from robustbench_dgsa.util.errors import UserError
            raise UserError(f"{spec!r} is not a file, and dataset loading is unavailable ({e})") from None
        ds = load_dataset(spec, split, data_root=data_root)
        texts = next((getattr(ds, a) for a in ("texts", "text", "x") if isinstance(getattr(ds, a, None), list)),
                     None)
        if texts is None or not all(isinstance(t, str) for t in texts[:100]):
            raise CorruptionError(f"dataset {spec!r} is not a text dataset; for images use dgsa-bench corrupt")
        y = getattr(ds, "y", None)
        labels = None if y is None else list(np.asarray(y).tolist())
        desc = f"dataset {spec} split {split} ({getattr(ds, 'source', None) or data_root or 'default root'})"
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
    encoding: str = typer.Option("utf-8", "--encoding", help="Encoding of a text file."),
    noise: str = typer.Option("all", "--noise", "-n",
                              help="Noise types, comma-separated, or char / word / all (all: the 10 types and "
                                   "mixed)."),
    severity: str = typer.Option("1-5", "--severity", "-s", help="Severities: 3, 1-5 or 1,3,5."),
    seed: int = typer.Option(0, "--seed", help="Seed of the keyed randomness."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (JSONL per condition + manifest.json)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Use only the first N examples."),
    cer_sample: int = typer.Option(1000, "--cer-sample", min=0,
                                   help="Measure CER/WER on this many examples spread over the corpus (0: all)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
    json_: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> None:
    """Write noisy copies of a text dataset per (noise type, severity) as JSONL, with the realised character
    and word error rates in manifest.json."""
    from corruptions import text as tn
    from corruptions.errors import CorruptionError

    from robustbench_dgsa.util.progress import track

    started = time.monotonic()
    types = tn.resolve_text_noise(noise)
    from corruptions.layout import _resolve_severities
    sevs = _resolve_severities(severity)
    if seed < 0:
        raise CorruptionError(f"--seed must be >= 0, got {seed}")
    texts, labels, desc = _load_text_input(input, split, data_root, text_column, label_column, encoding, limit)
    _log(f"input: {desc}: {len(texts)} examples, {'labels' if labels is not None else 'no labels'}")
    manifest = tn.write_text_noise(texts, labels, out, types, sevs, seed=seed, overwrite=overwrite,
                                   max_measure=cer_sample or None, input_description=desc, progress=track)
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
    from rich.table import Table
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 110))
    console.print(f"text noise v{manifest['text_noise_version']} on {desc} (seed {seed}) -> {out}")
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
