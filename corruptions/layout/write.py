"""Regenerate corruptions into the CIFAR-C layout (streamed, all-or-nothing, merged under a folder lock)."""
from __future__ import annotations

import datetime as _dt
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import CorruptionError, OutputExistsError
from .checks import ProgressWrapper, _check_labels, _label_dtype, _resolve_names, _resolve_severities, _wrap, check_images, name_list
from .digest import _hash_array, _hash_file, file_sha256
from ..atomic import commit_staged, fsync_file, owner_token, partial_path
from .locks import _folder_lock, _lock_partial, clean_stale_partials
from .manifest import (MANIFEST_FORMAT, MANIFEST_NAME, Manifest, _difference, _manifest_data, _run_key,
                       library_versions, read_manifest)
from .official import layout_suffix


def regenerate(images: np.ndarray, labels: Any, out_dir: str | os.PathLike, corruptions: str | Sequence[str],
               severities: str | int | Sequence[int], *, constants: str | None = None, seed: int = 0,
               device: str | None = None, frost: Any = None, chunk_size: int = 1000, overwrite: bool = False,
               progress: ProgressWrapper | None = None, description: str | None = None,
               input_description: str | None = None, preflight: bool = True) -> Manifest:
    """Write the official layout for ``images`` (uint8 N×H×W×3) into ``out_dir`` and return its manifest.

    ``corruptions``: names, groups, "benchmark", "extra" or "all" (a string or a list of them).
    ``severities``: ``"1-5"``, ``"1,3"``, an int or a list; blocks are stacked in the order given.
    ``labels``: N integer labels or None; written tiled per block (uint8 when all < 256, as the official file).
    ``constants``: "cifar", "tiny-imagenet" or "imagenet"; default: the regime of the image size (32, 64, 224 px).
    ``frost``: None (default textures), a directory, or a loaded ``FrostTextures``; its ``source`` is recorded.
    ``progress``: optional wrapper ``progress(iterable, total=..., description=...) -> iterable`` (e.g.
    ``robustbench_dgsa.util.progress.track``); the library prints nothing itself.

    Only 10,000 images x severities 1..5 get the official file names (see the module notes).
    An existing output file (or a manifest from a different run) without ``overwrite`` raises CorruptionError
    naming it, and nothing is touched. Into a directory whose manifest has the same inputs, seed, severities,
    constants and library versions, further corruptions are added to that manifest, and corruptions it already
    lists with intact files are skipped (``Manifest.skipped``). Concurrent runs merge under a folder lock.
    Stale partial files of killed runs are deleted first.
    """
    from .. import api, registry

    x, y, names, sevs, seed, out = _check_regenerate_args(images, labels, corruptions, severities, seed,
                                                          chunk_size, out_dir)
    n, h, w = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    regime = registry.resolve_regime(constants, h, w)
    plan = _plan_run(x, y, out, names, sevs, seed, overwrite, regime)
    if not plan.todo and not plan.write_labels:
        return Manifest(plan.old.path, plan.old.data, skipped=tuple(plan.skipped))

    description = description or f"{regime.dataset}-style (regenerated)"
    frost_obj, frost_source, frost_files = _frost_for(plan.todo, frost)
    corrupter = api.Corrupter(regime.name, seed, device, frost_obj)
    if preflight:  # fail fast on one image before any file is created (bad size, missing assets, device)
        _preflight(x, plan.todo, sevs, corrupter)
    n_rows = len(sevs) * n
    _check_disk_space(out, len(plan.todo) * n_rows * h * w * 3 + (n_rows * 8 if y is not None else 0))

    made_dir = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    token = owner_token()  # records this process as the partials' owner
    staged: dict[str, Path] = {}
    held: list[int] = []
    entries: dict[str, dict] = {}
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    try:
        _write_files(x, out, plan.todo, sevs, plan.suffix, corrupter, chunk_size, progress, token, staged, held,
                     entries, created)
        if plan.write_labels:
            _write_labels(y, len(sevs), partial_path(out / plan.labels_name, token), plan.labels_name, staged,
                          held, entries, created)
        with _folder_lock(out):  # read-merge-write: a concurrent run's entries are kept
            cur, same, data = _merge_and_commit(out, overwrite, plan, entries, staged, description,
                                                input_description, frost_source, frost_files, device, created,
                                                registry)
    except BaseException:
        _discard_staged(staged, out, made_dir)
        raise
    finally:
        for fd in held:
            os.close(fd)
    if cur is not None and not same:
        _warn_left_over(out, cur, data)
    return Manifest(out / MANIFEST_NAME, data, skipped=tuple(plan.skipped))


def _check_regenerate_args(images, labels, corruptions, severities, seed, chunk_size, out_dir):
    """The checked inputs of :func:`regenerate`: ``(x, y, names, sevs, seed, out)``."""
    x = check_images(images)
    y = _check_labels(labels, int(x.shape[0]))
    names = _resolve_names(corruptions)
    sevs = _resolve_severities(severities)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CorruptionError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise CorruptionError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CorruptionError(f"{out} exists and is not a directory")
    return x, y, names, sevs, seed, out


@dataclass
class _RunPlan:
    """What a :func:`regenerate` call will write, decided before any file is touched."""
    run_key: dict
    suffix: str
    old: Manifest | None
    skipped: list
    todo: list
    labels_name: str
    write_labels: bool


def _plan_run(x: np.ndarray, y: np.ndarray | None, out: Path, names: list[str], sevs: list[int], seed: int,
              overwrite: bool, regime) -> _RunPlan:
    """What the run will be, and whether it collides with what is there (CorruptionError if so)."""
    n, h, w = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    run_key = {"format": MANIFEST_FORMAT, "constants_version": regime.constants_version, "seed": seed,
               "severities": sevs, "n": n, "image_shape": [h, w, 3], "images_sha256": _hash_array(x),
               "labels_sha256": None if y is None else _hash_array(y), "library_versions": library_versions()}
    suffix = layout_suffix(n, sevs)
    if out.is_dir():
        clean_stale_partials(out)
    try:
        old = read_manifest(out) if out.is_dir() else None
    except CorruptionError:
        old = None  # unreadable: reported as existing output below
    merge = old is not None and _run_key(old.data) == run_key
    skipped = _finished(old, out, names) if merge and not overwrite else []
    todo = [nm for nm in names if nm not in skipped]
    labels_name = f"labels{suffix}.npy"
    targets = [f"{nm}{suffix}.npy" for nm in todo]
    write_labels = y is not None and not (merge and old.has_labels and (out / old.labels_file).is_file())
    if write_labels:
        targets.append(labels_name)
    existing = [t for t in targets if (out / t).exists()]
    if old is not None and not merge:
        existing.append(f"{MANIFEST_NAME} (from a run with different {_difference(old.data, run_key)})")
    elif old is None and (out / MANIFEST_NAME).exists():
        existing.append(MANIFEST_NAME)
    if existing and not overwrite:
        raise OutputExistsError(out, existing)
    return _RunPlan(run_key, suffix, old, skipped, todo, labels_name, write_labels)


def _check_disk_space(out: Path, need: int) -> None:
    probe = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    free = shutil.disk_usage(probe).free
    if need > free:
        raise CorruptionError(f"not enough disk space in {probe}: need {need / 2**30:.2f} GiB, "
                              f"{free / 2**30:.2f} GiB free")


def _merge_and_commit(out: Path, overwrite: bool, plan: _RunPlan, entries: dict, staged: dict, description: str,
                      input_description: str | None, frost_source, frost_files, device, created: str, registry):
    """Under the folder lock: read the current manifest, merge, rename the staged files into place and write
    the manifest last. Returns ``(cur, same, data)``: the manifest found, whether it was from the same run, and
    the one written."""
    try:
        cur = read_manifest(out)
    except CorruptionError:
        if not overwrite:
            raise
        cur = None
    same = cur is not None and _run_key(cur.data) == plan.run_key
    if cur is not None and not same and not overwrite:
        raise CorruptionError(f"{out}: another run wrote {MANIFEST_NAME} with different "
                              f"{_difference(cur.data, plan.run_key)} meanwhile; nothing written")
    data = _manifest_data(cur.data if same else None, plan.run_key, plan.suffix, entries, description,
                          input_description, frost_source, device, created, registry)
    if frost_files is None and same:
        frost_files = cur.data.get("frost_files_sha256")
    if frost_files is not None:
        data["frost_files_sha256"] = frost_files
    commit_staged(out, staged, MANIFEST_NAME, data)  # targets checked first, the old manifest out, the new last
    staged.clear()
    return cur, same, data


def _discard_staged(staged: dict, out: Path, made_dir: bool) -> None:
    """After a failure: delete this run's partial files, and the folder if this call created it and it is empty."""
    for tmp in staged.values():
        tmp.unlink(missing_ok=True)
    if made_dir:
        try:
            out.rmdir()  # only if empty: a folder this call created and nothing was finished in
        except OSError:
            pass


def _warn_left_over(out: Path, cur: Manifest, data: dict) -> None:
    stale = sorted(set(cur.files) - set(data["files"]))
    stale = [f for f in stale if (out / f).exists()]
    if stale:
        warnings.warn(f"{out}: left from an earlier, different run and not in the new manifest: "
                      f"{name_list(stale)} (delete, or regenerate with the same settings)", stacklevel=3)


def _finished(old: Manifest, out: Path, names: list[str]) -> list[str]:
    """Corruptions the (same-run) manifest already lists whose file is present and intact."""
    done = []
    for nm in names:
        fname = old.file_of(nm)
        entry = old.files.get(fname)
        path = out / fname
        if nm in old.corruptions and entry and path.is_file() and file_sha256(path) == entry.get("sha256"):
            done.append(nm)
    return done


def _frost_for(names: list[str], frost: Any):
    if "frost" not in names:
        return frost, None, None
    from .. import frost as frost_mod
    obj = frost_mod.load_frost_textures(frost) if frost is None or isinstance(frost, (str, os.PathLike)) else frost
    return obj, getattr(obj, "source", None), dict(getattr(obj, "file_sha256", None) or {})


def _preflight(x: np.ndarray, names: list[str], sevs: list[int], corrupter) -> None:
    h, w = int(x.shape[1]), int(x.shape[2])
    for name in names:
        for sev in sevs:
            _check_output(corrupter(x[:1], name, sev, np.arange(1)), (1, h, w, 3), name, sev)


def _write_files(x, out: Path, names, sevs, suffix, corrupter, chunk_size, progress, token,
                 staged: dict, held: list, entries: dict, created: str) -> None:
    """Stream every corruption into its locked hidden partial file (renamed later by the caller)."""
    from .. import registry
    n, h, w = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    n_rows = len(sevs) * n
    jobs = [(name, b, sev, start, min(n, start + chunk_size))
            for name in names for b, sev in enumerate(sevs) for start in range(0, n, chunk_size)]
    mm, current = None, None
    for name, b, sev, start, stop in _wrap(progress, jobs, "corrupting"):
        if name != current:
            if mm is not None:
                _finish(mm, staged[f"{current}{suffix}.npy"], f"{current}{suffix}.npy", current, entries, created,
                        registry)
            fname = f"{name}{suffix}.npy"
            tmp = partial_path(out / fname, token)
            staged[fname] = tmp
            held.append(_lock_partial(tmp))
            mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(n_rows, h, w, 3))
            current = name
        res = corrupter(x[start:stop], name, sev, np.arange(start, stop))
        mm[b * n + start:b * n + stop] = _check_output(res, (stop - start, h, w, 3), name, sev)
    if mm is not None:
        _finish(mm, staged[f"{current}{suffix}.npy"], f"{current}{suffix}.npy", current, entries, created, registry)


def _write_labels(y: np.ndarray, blocks: int, tmp: Path, fname: str, staged: dict, held: list, entries: dict,
                  created: str) -> None:
    tiled = np.tile(y.astype(_label_dtype(y)), blocks)
    staged[fname] = tmp
    held.append(_lock_partial(tmp))
    with open(tmp, "wb") as f:
        np.save(f, tiled)
        f.flush()
        os.fsync(f.fileno())
    entries[fname] = {"sha256": _hash_file(tmp, "sha256"), "shape": list(tiled.shape), "dtype": str(tiled.dtype),
                      "bytes": tmp.stat().st_size, "role": "labels", "created": created}


def _check_output(res: Any, shape: tuple, name: str, sev: int) -> np.ndarray:
    if not isinstance(res, np.ndarray) or res.dtype != np.uint8 or tuple(res.shape) != shape:
        got = f"{type(res).__name__} {getattr(res, 'dtype', '')} {tuple(getattr(res, 'shape', ()))}"
        raise CorruptionError(f"{name} severity {sev} returned {got}, expected uint8 {shape}")
    return res


def _finish(mm: np.memmap, tmp: Path, fname: str, name: str, entries: dict, created: str, registry) -> None:
    mm.flush()
    shape, dtype = list(mm.shape), str(mm.dtype)
    del mm
    fsync_file(tmp)
    spec = registry.CORRUPTIONS.get(name)
    entries[fname] = {"sha256": _hash_file(tmp, "sha256"), "shape": shape, "dtype": dtype,
                      "bytes": tmp.stat().st_size, "corruption": name,
                      "group": getattr(spec, "group", None), "random": getattr(spec, "random", None),
                      "created": created}

