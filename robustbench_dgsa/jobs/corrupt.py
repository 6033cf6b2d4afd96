"""Corrupted copies of a dataset: what ``dgsa-bench corrupt`` and ``dgsa-bench corrupt-text`` run.

:func:`corrupt_images` reads an image input through the dataset machinery (a dataset name, an image folder, a
.npy / .npz file), chooses the corruption constants by image size, loads frost's textures and hands the work to
the standalone ``corruptions`` library: regeneration in the official layout, a preview grid, a comparison
with an official set. :func:`corrupt_texts` does the same for text noise. Both report through ``log`` (progress
notes, may be silenced) and ``warn`` (always shown) and return a JSON-ready summary.

Messages that point at a parameter name it as ``spell`` spells it: the defaults are this module's argument
names; a command line passes its flags (``{"frost_dir": "--frost-dir", ...}``).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from robustbench_dgsa.util.errors import UserError

Say = Callable[[str], None]

#: how messages name the parameters and entry points they point at (a command line passes its own spelling)
SPELL: Mapping[str, str] = {"frost_dir": "frost_dir", "constants": "constants", "text_column": "text_column",
                            "label_column": "label_column", "corrupt": "corrupt_images()",
                            "corrupt_text": "corrupt_texts()"}

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}
_ARRAY_SUFFIXES = {".npy", ".npz"}
_TEXT_SUFFIXES = {".csv", ".tsv", ".jsonl", ".txt"}


def _quiet(message: str) -> None:
    """A ``log`` / ``warn`` that says nothing."""


# ---------------------------------------------------------------------------------------------- image inputs


def looks_like_path(spec: str) -> bool:
    """Whether an input spec is meant as a file or folder (a slash, a known suffix, ``.`` or ``~`` first) rather
    than a dataset name."""
    p = Path(spec)
    return ("/" in spec or "\\" in spec or p.suffix.lower() in _IMAGE_SUFFIXES | _ARRAY_SUFFIXES | _TEXT_SUFFIXES
            or spec.startswith((".", "~")))


def image_source(spec: str) -> str:
    """The dataset-source name for an image input: an image folder, a .npy/.npz file, or a dataset name as
    given."""
    from corruptions.errors import CorruptionError
    path = Path(spec).expanduser()
    if path.is_dir():
        return f"folder:{path}"
    if path.suffix.lower() in _ARRAY_SUFFIXES:
        return f"{path.suffix.lower()[1:]}:{path}"
    if path.exists():
        raise CorruptionError(f"{path}: unsupported input (give an image file (.png, .jpg), a .npy or .npz file, "
                              f"an image folder, or a dataset name)")
    if looks_like_path(spec):
        raise CorruptionError(f"{path}: no such file or folder")
    return spec


def load_image_input(spec: str, split: str, data_root: Path | None, limit: int | None,
                     spell: Mapping[str, str] = SPELL) -> dict:
    """Through the dataset machinery (``load_dataset``: folder:/npy:/npz: sources or a dataset name; one
    image reader). Returns {"x", "y", "description", "notes", "dataset"}."""
    from corruptions.errors import CorruptionError
    from corruptions.layout import check_images

    from robustbench_dgsa.data import load_dataset, readers
    source = image_source(spec)
    generic = source.startswith(("folder:", "npy:", "npz:"))
    options = {"unlabeled_ok": True} if generic else {}
    if source.startswith("folder:"):
        options["split_optional"] = True
    ds = load_dataset(source, split, data_root=data_root, **options)
    if getattr(ds, "modality", None) != "image":
        raise CorruptionError(f"dataset {spec!r} is not an image dataset (no image array); for text use "
                              f"{spell['corrupt_text']}")
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


def regenerated_phrase(dataset: str | None, constants: str = "cifar") -> str:
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


def constants_for(constants: str | None, h: int, w: int, spell: Mapping[str, str] = SPELL) -> str:
    """The corruption constants' name: ``constants`` when given (a known name), else by image size."""
    from corruptions.registry import REGIMES, get_regime, regime_for_size
    if constants is not None:
        return get_regime(constants.strip().lower()).name
    name = regime_for_size(h, w)
    if name is None:
        sizes = ", ".join(f"{r.size} px -> {r.name}" for r in REGIMES.values())
        raise UserError(f"{h}x{w} images have no default corruption constants ({sizes}); pass "
                        f"{spell['constants']} {'|'.join(REGIMES)}")
    return name


def frost_textures(names: Sequence[str], frost_dir: Path | None, log: Say, warn: Say,
                   spell: Mapping[str, str] = SPELL):
    """Frost's textures when frost is asked for (a warning when only the procedural substitute is found)."""
    if "frost" not in names:
        if frost_dir is not None:
            log(f"note: {spell['frost_dir']} ignored (frost is not among the corruptions)")
        return None
    import warnings

    from corruptions.errors import ResultWarning
    from corruptions.frost import load_frost_textures
    with warnings.catch_warnings():  # the library's procedural-frost warning: said once, below
        warnings.simplefilter("ignore", ResultWarning)
        frost = load_frost_textures(frost_dir)
    log(f"frost textures: {frost.source}")
    if str(frost.source).startswith("procedural"):
        warn(f"warning: no frost textures found (give {spell['frost_dir']}, a data root holding corruptions/frost, "
             f"or install imagecorruptions); frost uses a procedural substitute and is not the reference frost")
    return frost


def _regenerate(x, y, out: Path, names: list[str], sevs: list[int], *, constants: str, seed: int, device: str,
                frost, chunk_size: int, overwrite: bool, progress, phrase: str, input_description: str,
                log: Say, warn: Say) -> dict[str, Any]:
    """Write the corrupted sets in the official layout; the summary entries about them."""
    from corruptions import layout

    manifest = layout.regenerate(x, y, out, names, sevs, constants=constants, seed=seed, device=device, frost=frost,
                                 chunk_size=chunk_size, overwrite=overwrite, progress=progress,
                                 description=phrase, input_description=input_description)
    if manifest.skipped:
        warn(f"skipped (already finished in {out} with the same parameters): {layout.name_list(manifest.skipped)}")
    written = len(names) - len(manifest.skipped)
    if written:
        log(f"wrote {written} corruption file(s) x {len(sevs)} severities to {out} ({phrase})")
    if not manifest.official_layout:
        log(f"note: {len(x)} images x severities {','.join(map(str, sevs))} is not the official "
            f"5 x 10,000 layout; files are named <corruption>{layout.layout_suffix(len(x), sevs)}.npy")
    return dict(out=str(out), manifest=str(manifest.path), description=phrase,
                files={k: v["sha256"] for k, v in manifest.files.items()},
                skipped=list(manifest.skipped), official_layout=manifest.official_layout)


def corrupt_images(input: str | None, out: Path | None = None, *, split: str = "test",
                   data_root: Path | None = None, limit: int | None = None, corruptions: Sequence[str] = (),
                   severities: Sequence[int] = (1, 2, 3, 4, 5), seed: int = 0, constants: str | None = None,
                   device: str = "auto", chunk_size: int = 1000, frost_dir: Path | None = None,
                   overwrite: bool = False, preview: Path | None = None, preview_images: int = 3,
                   verify_against: Path | None = None, progress: Any = None, log: Say = _quiet, warn: Say = _quiet,
                   spell: Mapping[str, str] = SPELL) -> tuple[dict[str, Any], Any]:
    """Regenerate CIFAR-C-style corruptions of ``input`` into ``out`` (official layout + manifest.json), draw a
    ``preview`` grid of its first ``preview_images`` images, and/or compare ``out`` with the official set in
    ``verify_against``. Without ``input`` only the comparison runs (``out`` must hold corruption files).

    ``constants``: cifar, tiny-imagenet or imagenet (default: by image size). ``progress``: a progress
    wrapper for the writer (None: none). Returns (summary, the comparison table or None)."""
    from corruptions import layout

    from robustbench_dgsa.data.locate import frost_dir_for

    started = time.monotonic()
    summary: dict[str, Any] = {}
    if input is not None and "frost" in corruptions:
        frost_dir = frost_dir_for(frost_dir, data_root)   # the one rule: given, else <data root>/corruptions/frost
    if input is not None and is_image_file(input):
        return corrupt_image_file(Path(input).expanduser(), out, corruptions=corruptions, severities=severities,
                                  seed=seed, constants=constants, device=device, frost_dir=frost_dir,
                                  overwrite=overwrite, preview=preview, log=log, warn=warn, spell=spell), None
    if input is not None:
        names, sevs = list(corruptions), list(severities)
        from robustbench_dgsa.engine.predict import resolve_device
        dev = str(resolve_device(device))
        # a given frost folder is checked before any work or progress line
        frost = frost_textures(names, frost_dir, log, warn, spell) if frost_dir is not None else None
        inp = load_image_input(input, split, data_root, limit, spell)
        x, y = inp["x"], inp["y"]
        for note in inp["notes"]:
            log(f"note: {note}")
        log(f"input: {inp['description']}: {len(x)} images {x.shape[1]}x{x.shape[2]}, "
            f"{'labels' if y is not None else 'no labels'}")
        constants = constants_for(constants, x.shape[1], x.shape[2], spell)
        if frost_dir is None:
            frost = frost_textures(names, None, log, warn, spell)
        phrase = regenerated_phrase(inp["dataset"], constants)
        summary.update(input=inp["description"], notes=inp["notes"], n=len(x), image_shape=list(x.shape[1:]),
                       labels=y is not None, corruptions=names, severities=sevs, seed=seed,
                       constants=constants, frost_source=None if frost is None else frost.source)
        if out is not None:
            summary.update(_regenerate(x, y, out, names, sevs, constants=constants, seed=seed, device=dev,
                                       frost=frost, chunk_size=chunk_size, overwrite=overwrite, progress=progress,
                                       phrase=phrase, input_description=inp["description"], log=log, warn=warn))
        if preview is not None:
            from corruptions.preview import preview_grid
            k = min(preview_images, len(x))
            preview_grid(x[:k], names, sevs, preview, constants=constants, seed=seed, frost=frost, device=dev,
                         title=f"{phrase}, seed {seed}: {inp['description']}")
            summary["preview"] = str(preview)
            log(f"preview: {preview}")
    else:
        if layout.read_manifest(out) is None and not layout.list_available(out):
            raise UserError(f"{out}: no corruption files to verify")
        summary["out"] = str(out)
    df = None
    if verify_against is not None:
        df = layout.verify_against(out, verify_against)
        summary["verify"] = df.to_dict("records")
        summary["verify_labels_identical"] = df.attrs.get("labels_identical")
    summary["seconds"] = round(time.monotonic() - started, 2)
    return summary, df


# ---------------------------------------------------------------------------------------------- one photograph

#: image files ``corrupt`` takes one at a time (read by the suite's one image reader)
SINGLE_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def is_image_file(spec: str) -> bool:
    """Whether an input names one image file (rather than a folder, an array file or a dataset)."""
    path = Path(spec).expanduser()
    return path.is_file() and path.suffix.lower() in SINGLE_IMAGE_SUFFIXES


def single_image_constants(constants: str | None, h: int, w: int, log: Say, spell: Mapping[str, str] = SPELL) -> str:
    """``constants`` when given; else those of the image's size; else (a photograph of another size) those of
    the reference size nearest its shorter side, said through ``log`` (the library warns that they were made
    for another size)."""
    from corruptions.registry import REGIMES, regime_for_size
    if constants is not None:
        return constants_for(constants, h, w)
    name = regime_for_size(h, w)
    if name is None:
        name = min(REGIMES.values(), key=lambda r: (abs(r.size - min(h, w)), r.size)).name
        log(f"note: {h}x{w} is no reference size: using the {name} constants (nearest to its shorter side; "
            f"{spell['constants']} chooses others)")
    return name


def corrupt_image_file(path: Path, out: Path | None, *, corruptions: Sequence[str], severities: Sequence[int],
                       seed: int = 0, constants: str | None = None, device: str = "auto",
                       frost_dir: Path | None = None, overwrite: bool = False, preview: Path | None = None,
                       log: Say = _quiet, warn: Say = _quiet, spell: Mapping[str, str] = SPELL) -> dict[str, Any]:
    """One photograph under each corruption and severity: ``<out>/<stem>_<corruption>_s<severity>.png`` and a
    preview grid (``preview``, default ``<out>/<stem>_preview.png``). Every target is checked before anything is
    written (existing files need ``overwrite``). Returns the summary."""
    from corruptions import corrupt
    from corruptions.preview import preview_grid
    from PIL import Image

    from robustbench_dgsa.data import readers
    from robustbench_dgsa.engine.predict import resolve_device
    from robustbench_dgsa.util import atomic
    started = time.monotonic()
    names, sevs = list(corruptions), list(severities)
    frost = frost_textures(names, frost_dir, log, warn, spell)
    x = readers.to_rgb(readers.decode_image_file(path).pixels)
    constants = single_image_constants(constants, x.shape[0], x.shape[1], log, spell)
    targets = {(c, s): out / f"{path.stem}_{c}_s{s}.png" for c in names for s in sevs} if out is not None else {}
    preview = preview if preview is not None or out is None else out / f"{path.stem}_preview.png"
    taken = [p for p in [*targets.values(), preview] if p is not None and p.exists()]
    if taken and not overwrite:
        raise UserError(f"{taken[0]} exists ({len(taken)} output file(s) would be replaced; pass overwrite=True "
                        f"to replace them)", options="overwrite")
    dev = str(resolve_device(device))
    log(f"input: {path}: one image {x.shape[0]}x{x.shape[1]}, constants {constants}")
    for (c, s), target in targets.items():
        img = corrupt(x[None], c, s, constants=constants, seed=seed, indices=[0], device=dev, frost=frost)[0]
        with atomic.atomic_path(target) as tmp:
            Image.fromarray(img).save(tmp, format="PNG")
    if preview is not None:
        preview_grid(x[None], names, sevs, preview, constants=constants, seed=seed, frost=frost, device=dev,
                     title=f"{path.name}, {constants} constants, seed {seed}")
    log(f"wrote {len(targets)} corrupted image(s){' to ' + str(out) if out is not None else ''}; preview: {preview}")
    return {"input": str(path), "description": "corrupted copies of one image", "n": 1,
            "image_shape": list(x.shape), "corruptions": names, "severities": sevs, "seed": seed,
            "constants": constants, "frost_source": None if frost is None else frost.source,
            "files": [str(p) for p in targets.values()], "preview": None if preview is None else str(preview),
            "out": None if out is None else str(out), "seconds": round(time.monotonic() - started, 2)}


# ---------------------------------------------------------------------------------------------- text


#: ``corrupt --input`` names that read a validation folder and write a folder-tree layout
VAL_SETS = ("imagenet", "tiny-imagenet")


def corrupt_val_set(dataset: str, data_root: Path | None, out: Path | None, names: list[str], sevs: list[int], *,
                    seed: int = 0, constants: str | None = None, device: str = "auto", frost_dir: Path | None = None,
                    limit: int | None = None, overwrite: bool = False, other: Path | None = None, progress=None,
                    log: Say = _quiet, warn: Say = _quiet, spell: Mapping[str, str] = SPELL) -> dict[str, Any]:
    """ImageNet-C / Tiny-ImageNet-C from the validation images under ``data_root``: one call of
    :func:`corruptions.layout.regenerate_val_folders`, which writes ``<out>/<corruption>/<severity>/<wnid>/<file>``
    with SHA256SUMS and manifest.json (finished conditions are skipped). Returns the summary."""
    from corruptions import layout

    from robustbench_dgsa.data.locate import frost_dir_for
    from robustbench_dgsa.engine.predict import resolve_device
    started = time.monotonic()
    if data_root is None or out is None:
        raise UserError(f"input {dataset} needs the data root (the folder holding its validation images) and an "
                        "output folder", options=("data_root", "out"))
    if other is not None:
        raise UserError(f"previews and verification work on the CIFAR-C layout, not with input {dataset}")
    frost = frost_textures(names, frost_dir_for(frost_dir, data_root) if "frost" in names else frost_dir, log, warn,
                           spell)
    manifest = layout.regenerate_val_folders(dataset, data_root, out, names, sevs, constants=constants, limit=limit,
                                             seed=seed, device=str(resolve_device(device)), frost=frost,
                                             overwrite=overwrite, progress=progress)
    data = manifest.data
    if manifest.skipped:
        log(f"skipped (already finished in {out}): {', '.join(manifest.skipped)}")
    return {"input": data.get("input"), "n": data["n"], "constants": data["constants"], "corruptions": names,
            "severities": sevs, "out": str(out), "manifest": str(manifest.path), "description": data["description"],
            "skipped": list(manifest.skipped), "seconds": round(time.monotonic() - started, 2)}


def load_text_input(spec: str, split: str, data_root: Path | None, text_column: str, label_column: str | None,
                    encoding: str, limit: int | None,
                    spell: Mapping[str, str] = SPELL) -> tuple[list[str], list | None, str]:
    """Texts, optional labels and a description of a text input: a .txt / .csv / .tsv / .jsonl file (read by
    :func:`robustbench_dgsa.data.text.read_text_examples`) or a text dataset's ``split``."""
    from corruptions.errors import CorruptionError

    from robustbench_dgsa.data import load_dataset, readers
    from robustbench_dgsa.data.text import MissingColumnError, TextFileError, read_text_examples
    readers.check_encoding(encoding)
    path = Path(spec).expanduser()
    if path.is_file():
        try:
            texts, labels = read_text_examples(path, text_column, label_column, encoding)
        except TextFileError as e:  # the corruption library's error type, as for the other inputs
            hint = f"; pass {spell[e.parameter]}" if isinstance(e, MissingColumnError) else ""
            raise CorruptionError(f"{e}{hint}") from None
        desc = f"file {path}"
    elif path.exists() or looks_like_path(spec):
        raise CorruptionError(f"{path}: not a text file (use .csv, .tsv, .jsonl or .txt, or a dataset name)"
                              if path.exists() else f"{path}: no such file")
    else:
        ds = load_dataset(spec, split, data_root=data_root)
        if getattr(ds, "modality", None) != "text":
            raise CorruptionError(f"dataset {spec!r} is not a text dataset; for images use {spell['corrupt']}")
        texts, labels = list(ds.texts), ds.y.tolist()
        desc = f"dataset {spec} split {split} ({ds.source or data_root or 'default root'})"
    if limit:
        texts = texts[:limit]
        labels = None if labels is None else labels[:limit]
        desc += f", first {len(texts)} examples"
    if not texts:
        raise CorruptionError(f"{desc}: no examples")
    return texts, labels, desc


def corrupt_texts(input: str, out: Path, *, split: str = "test", data_root: Path | None = None,
                  text_column: str = "text", label_column: str | None = None, encoding: str = "utf-8",
                  noise: Sequence[str] = (), severities: Sequence[int] = (1, 2, 3, 4, 5), seed: int = 0,
                  limit: int | None = None, cer_sample: int = 1000, overwrite: bool = False, progress: Any = None,
                  log: Say = _quiet, spell: Mapping[str, str] = SPELL) -> dict[str, Any]:
    """Write noisy copies of a text input per (noise type, severity) as JSONL into ``out``, with the realised
    character and word error rates (measured on ``cer_sample`` examples spread over the corpus; 0: all) in
    manifest.json. Returns the summary: input, n, out, noise_types, severities, seed, text_noise_version,
    conditions (file, noise, severity, p, cer, wer, n_measured), manifest, seconds."""
    from corruptions import text as tn

    started = time.monotonic()
    texts, labels, desc = load_text_input(input, split, data_root, text_column, label_column, encoding, limit, spell)
    tn.check_text_lengths(texts)  # before any word on the input: a refused input is one line
    log(f"input: {desc}: {len(texts)} examples, {'labels' if labels is not None else 'no labels'}")
    manifest = tn.write_text_noise(texts, labels, out, list(noise), list(severities), seed=seed, overwrite=overwrite,
                                   max_measure=cer_sample or None, input_description=desc, progress=progress)
    rows = [{"file": f, "noise": m["noise"], "severity": m["severity"], "p": m["p"], "cer": m["cer"],
             "wer": m["wer"], "n_measured": m["n_measured"]}
            for f, m in manifest["files"].items() if m["noise"] is not None]
    return {"input": desc, "n": len(texts), "out": str(out), "noise_types": list(noise),
            "severities": list(severities), "seed": seed, "text_noise_version": manifest["text_noise_version"],
            "conditions": rows, "manifest": str(out / "manifest.json"),
            "seconds": round(time.monotonic() - started, 2)}
