"""The ImageNet-C / Tiny-ImageNet-C folder layout: ``<out>/<corruption>/<severity>/<wnid>/<file>``.

Writing (:func:`regenerate_folders`) follows the generators: each input image goes through its regime's input step
(:mod:`corruptions.imagenet`), is corrupted, truncated to uint8 and saved under its own file name, in the format of
its extension with the generators' arguments (``quality=85, optimize=True``: JPEG quality 85 for ``.JPEG``). Each
source image is read once for all conditions; the randomness is keyed by image index, so the order of work does not
change a single byte.

Next to the images, each ``<corruption>/<severity>/`` folder gets ``SHA256SUMS`` (``sha256sum -c`` format, one line
per file) and the output folder ``manifest.json`` (written last): the regime, its constants version, seed,
severities, the input listing's digest, the SHA-256 of every ``SHA256SUMS`` and library versions.

Interrupted runs resume: the work goes in chunks of images; each output is written under a hidden partial name and
renamed, its digest appended to the condition's ``.SHA256SUMS.progress``, and when a chunk is complete (flushed to
disk) a line in ``.progress.jsonl`` records it. A run with the same settings continues after the last recorded
chunk. One run at a time per folder (an advisory lock; a second run is refused).

Reading (:func:`list_folder_conditions`, :func:`read_condition`) takes the official sets as published and the
regenerated ones; a regenerated condition is checked against its ``SHA256SUMS`` (itself vouched for by the
manifest) while its files are read.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..atomic import partial_path, replace, write_bytes, write_json
from ..errors import CorruptionError, OutputExistsError
from .checks import ProgressWrapper, _resolve_names, _resolve_severities, _wrap
from .locks import fcntl
from .manifest import MANIFEST_NAME, library_versions, manifest_json

FOLDERS_FORMAT = "corruptions-folders/1"
SUMS_NAME = "SHA256SUMS"
_SUMS_PROGRESS = ".SHA256SUMS.progress"
_JOURNAL = ".progress.jsonl"
_TMP_TOKEN = "w"  # one writer per folder (locked): fixed partial names, overwritten when a chunk is redone
SAVE_ARGS = {"quality": 85, "optimize": True}  # the generators' Image.save arguments


@dataclass(frozen=True)
class FolderManifest:
    """A regenerated folder layout's ``manifest.json``; ``skipped``: conditions found finished and not redone."""

    path: Path
    data: dict
    skipped: tuple = ()

    @property
    def conditions(self) -> dict[str, dict]:
        return dict(self.data["conditions"])


@dataclass
class _Run:
    """One :func:`regenerate_folders` call: what to write and where it stands."""

    out: Path
    key: dict
    todo: list  # [(corruption, severity)]
    names: list  # output names, <wnid>/<file>
    chunk: int
    done: set = field(default_factory=set)  # starts of finished chunks
    inputs: dict = field(default_factory=dict)  # start -> input file digests
    input_description: str = ""  # the listing's description (which validation folder)


# ---------------------------------------------------------------------------------------------- writing


def regenerate_folders(images, out_dir: str | os.PathLike, corruptions: str | Sequence[str],
                       severities: str | int | Sequence[int], *, constants: str, seed: int = 0,
                       device: str | None = None, frost: Any = None, chunk_size: int = 100, overwrite: bool = False,
                       progress: ProgressWrapper | None = None, description: str | None = None) -> FolderManifest:
    """Write ``<out>/<corruption>/<severity>/<wnid>/<file>`` for every image of ``images`` (an
    :class:`corruptions.imagenet.ImageList`) and return the manifest (see the module notes).

    ``constants``: "imagenet" (Resize(256) + CenterCrop(224) inputs) or "tiny-imagenet" (Resize((64, 64))).
    Conditions a finished run with the same settings already wrote are skipped; an interrupted run with the same
    settings and conditions continues. Output of other settings (or files without a manifest) raises
    :class:`OutputExistsError` unless ``overwrite``.
    """
    from .. import api, registry
    from ..imagenet import INPUT_STEPS

    regime = registry.get_regime(constants)
    if regime.name not in INPUT_STEPS:
        raise CorruptionError(f"folder layouts are written with the imagenet or tiny-imagenet constants, got "
                              f"{constants!r}")
    names, sevs = _resolve_names(corruptions), _resolve_severities(severities)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CorruptionError(f"seed must be a non-negative integer, got {seed!r}")
    if not len(images):
        raise CorruptionError(f"{images.description}: no images")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CorruptionError(f"{out} exists and is not a directory")
    key = _run_key(images, regime, int(seed), sevs)
    description = description or f"{regime.dataset}-style (regenerated)"
    frost_obj = _frost(names, frost)
    corrupter = api.Corrupter(regime.name, int(seed), device, frost_obj)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with _exclusive(out):
            return _regenerate_locked(images, out, names, sevs, key, corrupter, chunk_size, overwrite, progress,
                                      description, frost_obj)
    except BaseException:
        if made and not any(out.iterdir()):
            out.rmdir()
        raise


def regenerate_val_folders(dataset: str, root: str | os.PathLike, out_dir: str | os.PathLike,
                           corruptions: str | Sequence[str], severities: str | int | Sequence[int], *,
                           constants: str | None = None, limit: int | None = None, **kwargs: Any) -> FolderManifest:
    """ImageNet-C or Tiny-ImageNet-C from the validation images under ``root``, in the official layout.

    ``dataset``: "imagenet" (``val/<wnid>/*.JPEG``, or flat ``val/`` with the devkit's ground truth) or
    "tiny-imagenet" (``tiny-imagenet-200/val/images`` with ``val_annotations.txt``); see
    :mod:`corruptions.imagenet`. ``constants``: default the dataset's own ("imagenet": Resize(256) +
    CenterCrop(224); "tiny-imagenet": Resize((64, 64))); "tiny-imagenet" on ImageNet's val gives the reference's
    ImageNet-64x64-C. ``limit``: only the first N images (the generators' order). Other keyword arguments go to
    :func:`regenerate_folders` (seed, device, frost, chunk_size, overwrite, progress, description).
    """
    from ..imagenet import LISTINGS

    key = str(dataset).strip().lower()
    if key not in LISTINGS:
        raise CorruptionError(f"unknown validation set {dataset!r} (valid: {', '.join(LISTINGS)})")
    if limit is not None and (isinstance(limit, bool) or int(limit) < 1):
        raise CorruptionError(f"limit must be a positive integer, got {limit!r}")
    images = LISTINGS[key](root).head(None if limit is None else int(limit))
    return regenerate_folders(images, out_dir, corruptions, severities, constants=constants or key, **kwargs)


def _regenerate_locked(images, out: Path, names, sevs, key, corrupter, chunk_size, overwrite, progress,
                       description, frost_obj) -> FolderManifest:
    old = _read_manifest_data(out)
    same = old is not None and old.get("run_key") == key
    finished = set(old["conditions"]) if same else set()
    todo = [(c, s) for c in names for s in sevs if f"{c}/{s}" not in finished]
    skipped = tuple(f"{c}/{s}" for c in names for s in sevs if f"{c}/{s}" in finished)
    if not todo:
        return FolderManifest(out / MANIFEST_NAME, old, skipped)
    run = _Run(out, key, todo, images.out_names, int(chunk_size), input_description=images.description)
    if not _resume(run):
        _check_fresh(run, old, same, overwrite)
        _start(run)
    _preflight(corrupter, key, todo)
    _write_chunks(images, run, corrupter, progress)
    data = _finish(run, old if same else None, description, frost_obj, corrupter)
    return FolderManifest(out / MANIFEST_NAME, data, skipped)


def _preflight(corrupter, key: dict, todo: list) -> None:
    """Every condition once on one grey image: a missing asset or a bad device fails before the long work."""
    side = int(key["image_shape"][0])
    x = np.full((1, side, side, 3), 128, np.uint8)
    for c, s in todo:
        corrupter(x, c, s, np.arange(1))


def _run_key(images, regime, seed: int, sevs: list[int]) -> dict:
    return {"format": FOLDERS_FORMAT, "constants": regime.name, "constants_version": regime.constants_version,
            "seed": seed, "severities": sevs, "n": len(images), "image_shape": [regime.size, regime.size, 3],
            "inputs_list_sha256": images.digest(), "save": dict(SAVE_ARGS), "library_versions": library_versions()}


def _frost(names: list[str], frost: Any):
    if "frost" not in names:
        return frost
    from .. import frost as frost_mod
    return frost_mod.load_frost_textures(frost) if frost is None or isinstance(frost, (str, os.PathLike)) else frost


@contextlib.contextmanager
def _exclusive(out: Path):
    """An exclusive advisory lock on the output folder for the whole run; a second run is refused, not queued."""
    if fcntl is None:  # pragma: no cover - no POSIX locks
        yield
        return
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise CorruptionError(f"{out}: another run is writing into this folder") from None
        yield
    finally:
        os.close(fd)


def _read_manifest_data(out: Path) -> dict | None:
    data = manifest_json(out)
    if data is not None and data.get("format") != FOLDERS_FORMAT:
        raise CorruptionError(f"{out / MANIFEST_NAME}: not a folder-layout manifest (format {data.get('format')!r})")
    return data


def _journal_header(run: _Run) -> dict:
    return {"run_key": run.key, "todo": [f"{c}/{s}" for c, s in run.todo], "chunk": run.chunk}


def _resume(run: _Run) -> bool:
    """Continue an interrupted run with the same settings: the finished chunks from the journal, the digests of
    unfinished ones dropped. False when there is nothing to continue."""
    path = run.out / _JOURNAL
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return False
    if not lines or lines[0] != _journal_header(run):
        return False
    for rec in lines[1:]:
        if rec.get("complete"):
            run.done.add(int(rec["start"]))
            run.inputs[int(rec["start"])] = rec["inputs"]
    index = {name: i for i, name in enumerate(run.names)}
    for c, s in run.todo:
        sums = run.out / c / str(s) / _SUMS_PROGRESS
        keep = [ln for ln in _lines(sums) if (index[ln.split("  ", 1)[1]] // run.chunk) * run.chunk in run.done]
        write_bytes(sums, "".join(ln + "\n" for ln in keep).encode())
    return True


def _lines(path: Path) -> list[str]:
    try:
        return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except FileNotFoundError:
        return []


def _check_fresh(run: _Run, old: dict | None, same: bool, overwrite: bool) -> None:
    """Refuse (unless ``overwrite``) output of other settings: a manifest, an unfinished run, or image files."""
    existing = []
    if old is not None and not same:
        existing.append(f"{MANIFEST_NAME} (another run's settings)")
    if (run.out / _JOURNAL).exists():
        existing.append(f"{_JOURNAL} (an unfinished run with other settings or conditions)")
    existing += [f"{c}/{s}" for c, s in run.todo if (run.out / c / str(s)).is_dir()
                 and any((run.out / c / str(s)).iterdir())]
    if existing and not overwrite:
        raise OutputExistsError(run.out, existing)
    if old is not None and not same:
        (run.out / MANIFEST_NAME).unlink()


def _start(run: _Run) -> None:
    for c, s in run.todo:
        d = run.out / c / str(s)
        d.mkdir(parents=True, exist_ok=True)
        (d / _SUMS_PROGRESS).write_bytes(b"")
        (d / SUMS_NAME).unlink(missing_ok=True)
    write_bytes(run.out / _JOURNAL, (json.dumps(_journal_header(run)) + "\n").encode())


def _write_chunks(images, run: _Run, corrupter, progress) -> None:
    from ..imagenet import load_inputs

    starts = [s for s in range(0, len(run.names), run.chunk) if s not in run.done]
    workers = max(1, _threads())
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="save") as pool:
        for start in _wrap(progress, starts, "corrupting"):
            stop = min(start + run.chunk, len(run.names))
            x, input_sums = load_inputs(images, start, stop, run.key["constants"])
            sums = {}
            for c, s in run.todo:
                y = corrupter(x, c, s, np.arange(start, stop))
                sums[(c, s)] = list(pool.map(lambda i, y=y, c=c, s=s: _save(run, c, s, start + i, y[i]),
                                             range(stop - start)))
            _commit_chunk(run, start, stop, sums, input_sums)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _save(run: _Run, corruption: str, severity: int, i: int, image: np.ndarray) -> str:
    """Encode one output as the generators save it (format from the extension, quality 85, optimize), write it
    under a partial name and rename; its SHA-256."""
    from PIL import Image

    name = run.names[i]
    target = run.out / corruption / str(severity) / name
    buf = io.BytesIO()
    fmt = Image.registered_extensions().get(target.suffix.lower(), "PNG")
    Image.fromarray(np.uint8(image)).save(buf, format=fmt, **SAVE_ARGS)
    data = buf.getvalue()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(target, _TMP_TOKEN)
    tmp.write_bytes(data)
    replace(tmp, target)
    return hashlib.sha256(data).hexdigest()


def _commit_chunk(run: _Run, start: int, stop: int, sums: dict, input_sums: list[str]) -> None:
    """Append the chunk's digests to each condition's progress file, flush everything written to disk, then
    record the chunk in the journal."""
    for (c, s), digests in sums.items():
        with open(run.out / c / str(s) / _SUMS_PROGRESS, "a", encoding="utf-8") as f:
            f.writelines(f"{d}  {run.names[start + k]}\n" for k, d in enumerate(digests))
    if hasattr(os, "sync"):
        os.sync()  # the images and digests are on disk before the journal says so
    with open(run.out / _JOURNAL, "a", encoding="utf-8") as f:
        f.write(json.dumps({"start": start, "stop": stop, "complete": True, "inputs": input_sums}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    run.done.add(start)
    run.inputs[start] = input_sums


def _finish(run: _Run, old: dict | None, description: str, frost_obj, corrupter) -> dict:
    """SHA256SUMS per condition, then the manifest (merged with a finished run of the same settings), last."""
    conditions = dict(old["conditions"]) if old else {}
    for c, s in run.todo:
        d = run.out / c / str(s)
        text = "".join(ln + "\n" for ln in _lines(d / _SUMS_PROGRESS)).encode()
        write_bytes(d / SUMS_NAME, text)
        (d / _SUMS_PROGRESS).unlink()
        conditions[f"{c}/{s}"] = {"files": text.count(b"\n"), "sha256sums": hashlib.sha256(text).hexdigest()}
    inputs = hashlib.sha256("".join(d + "\n" for st in sorted(run.inputs) for d in run.inputs[st]).encode())
    data = _manifest(run, conditions, description, frost_obj, corrupter, old, inputs.hexdigest())
    write_json(run.out / MANIFEST_NAME, data)
    (run.out / _JOURNAL).unlink(missing_ok=True)
    return data


def _manifest(run: _Run, conditions: dict, description: str, frost_obj, corrupter, old, inputs_sha: str) -> dict:
    from .. import registry

    regime = registry.get_regime(run.key["constants"])
    listed = [c for c in registry.ALL if any(k.split("/")[0] == c for k in conditions)]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return {
        "format": FOLDERS_FORMAT, "description": description,
        "note": "Regenerated with keyed randomness; not the published files (the reference generators had no seed, "
                "so the random corruptions match the official ones only in distribution).",
        "run_key": run.key, "constants": regime.name, "constants_version": regime.constants_version,
        "reference": regime.reference, "input_step": regime.input_step, "input": run.input_description,
        "seed": run.key["seed"],
        "severities": run.key["severities"], "corruptions": listed, "n": run.key["n"],
        "layout": "<corruption>/<severity>/<wnid>/<file>, each saved as the generators do (format from the "
                  "extension, quality=85, optimize=True); <corruption>/<severity>/SHA256SUMS lists every file",
        "randomness": "keyed by (constants, seed, corruption, severity, image index): any subset regenerates "
                      "identically",
        "inputs_sha256": inputs_sha if old is None else old.get("inputs_sha256", inputs_sha),
        "frost_source": getattr(frost_obj, "source", None) or (old or {}).get("frost_source"),
        "conditions": conditions, "device": "auto" if corrupter.device is None else str(corrupter.device),
        "created": (old or {}).get("created", now), "updated": now,
    }


# ---------------------------------------------------------------------------------------------- reading


def is_folder_layout(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds ``<corruption>/<severity>/`` folders (official or regenerated)."""
    return bool(list_folder_conditions(directory, quiet=True))


def list_folder_conditions(directory: str | os.PathLike, quiet: bool = False) -> dict[str, list[int]]:
    """``{corruption: [severities]}`` present (registry order; folders named after the 19 corruptions)."""
    from .. import registry

    d = Path(directory)
    if not d.is_dir():
        if quiet:
            return {}
        raise CorruptionError(f"{d}: no such directory")
    with os.scandir(d) as entries:     # one listing: a folder of .npy files is not stat'ed 95 times
        folders = {e.name for e in entries if e.is_dir()}
    out = {}
    for c in (c for c in registry.ALL if c in folders):
        sevs = [s for s in range(1, 6) if (d / c / str(s)).is_dir()]
        if sevs:
            out[c] = sevs
    return out


def condition_files(directory: str | os.PathLike, corruption: str, severity: int) -> tuple[list[str], list[str]]:
    """(``<wnid>/<file>`` names in the generators' order, their wnids) of one condition folder."""
    d = Path(directory) / corruption / str(int(severity))
    if not d.is_dir():
        have = list_folder_conditions(directory)
        raise CorruptionError(f"{d}: no such condition; present: "
                              + (", ".join(f"{c} {','.join(map(str, s))}" for c, s in have.items()) or "none"))
    names, wnids = [], []
    for w in sorted(p.name for p in d.iterdir() if p.is_dir()):
        for f in sorted(os.listdir(d / w)):
            if not f.startswith(".") and (d / w / f).is_file():
                names.append(f"{w}/{f}")
                wnids.append(w)
    return names, wnids


def condition_sums(directory: str | os.PathLike, corruption: str, severity: int) -> dict[str, str] | None:
    """``{<wnid>/<file>: sha256}`` of a regenerated condition, checked against the manifest; None for an official
    folder (no manifest)."""
    d = Path(directory)
    data = _read_manifest_data(d)
    if data is None:
        return None
    key = f"{corruption}/{int(severity)}"
    entry = data["conditions"].get(key)
    path = d / corruption / str(int(severity)) / SUMS_NAME
    if entry is None or not path.is_file():
        raise CorruptionError(f"{d}: {key} is not listed in {MANIFEST_NAME} (left from another run?)")
    text = path.read_bytes()
    if hashlib.sha256(text).hexdigest() != entry["sha256sums"]:
        raise CorruptionError(f"{path}: differs from {MANIFEST_NAME}; regenerate or restore it")
    return {ln.split("  ", 1)[1]: ln.split("  ", 1)[0] for ln in text.decode().splitlines() if ln.strip()}


def read_images(directory: str | os.PathLike, corruption: str, severity: int, names: Sequence[str],
                sums: dict[str, str] | None = None) -> np.ndarray:
    """The images ``names`` of one condition as uint8 (n, H, W, 3) RGB; with ``sums`` each file's SHA-256 is
    checked while it is read."""
    from PIL import Image

    d = Path(directory) / corruption / str(int(severity))
    out = []
    for name in names:
        data = (d / name).read_bytes()
        if sums is not None and hashlib.sha256(data).hexdigest() != sums.get(name):
            raise CorruptionError(f"{d / name}: contents differ from {SUMS_NAME}; regenerate or restore the file")
        with Image.open(io.BytesIO(data)) as im:
            out.append(np.asarray(im.convert("RGB")))
    shapes = {a.shape for a in out}
    if len(shapes) > 1:
        raise CorruptionError(f"{d}: images of different sizes ({', '.join(map(str, sorted(shapes)))})")
    return np.stack(out) if out else np.zeros((0, 0, 0, 3), np.uint8)
