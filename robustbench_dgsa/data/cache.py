"""On-disk cache for extracted archives and decoded datasets.

Location: ``$DGSA_CACHE`` if set, else ``~/.cache/dgsa-bench``. Every entry is a directory that is built in a
temporary sibling folder and then renamed into place, so an interrupted build never leaves half an entry and two
processes building the same entry at once both end up with one complete copy (the second rename loses and its
temporary folder is removed). A finished entry holds a ``.complete`` marker.

Entries are keyed by the identity of their source (resolved path, size and mtime of the archive or of every file
in a folder) plus a format version, so replacing a source file invalidates its cache entry.

Two kinds of entries:

* ``decoded/<label>-<key>/``: arrays (``*.npy``) and JSON written by the loaders. Archives such as
  ``cifar10-jpeg75.tar.xz`` or ``aclImdb.tar.xz`` are *streamed* once (no 60,000 small files on disk; reading
  the tar stream is about four times faster than extracting it) and the decoded result is stored here.
* ``extracted/<stem>-<key>/``: a plain extraction (:func:`extract_archive`), for callers that need the files.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import lzma
import os
import shutil
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from robustbench_dgsa.util.errors import DataError

FORMAT_VERSION = 1
_MARKER = ".complete"


def cache_root() -> Path:
    """``$DGSA_CACHE`` or ``~/.cache/dgsa-bench``."""
    env = os.environ.get("DGSA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dgsa-bench"


def file_key(*paths: str | os.PathLike, extra: Any = None) -> str:
    """A 16-hex-digit key from the identity (resolved path, size, mtime) of files/folders and ``extra``."""
    h = hashlib.sha256(f"v{FORMAT_VERSION}".encode())
    for p in paths:
        p = Path(p).resolve()
        st = p.stat()
        h.update(f"{p}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    if extra is not None:
        h.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def listing_key(entries: list[tuple[str, int, int]], extra: Any = None) -> str:
    """Key from a listing of ``(relative path, size, mtime_ns)`` triples (a folder source)."""
    h = hashlib.sha256(f"v{FORMAT_VERSION}".encode())
    for rel, size, mtime in entries:
        h.update(f"{rel}|{size}|{mtime}\n".encode())
    if extra is not None:
        h.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def cached_dir(kind: str, label: str, key: str, build: Callable[[Path], None]) -> Path:
    """Return ``<cache>/<kind>/<label>-<key>``, building it with ``build(tmpdir)`` first if absent.

    If the cache folder cannot be written, the entry is built in a fresh temporary folder that is removed at
    exit (callers load arrays into memory, never memory-map them).
    """
    final = cache_root() / kind / f"{label}-{key}"
    if (final / _MARKER).is_file():
        return final
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{label}-", suffix=".tmp", dir=final.parent))
    except OSError:  # read-only cache location: a private folder, removed when the process exits
        tmp = Path(tempfile.mkdtemp(prefix=f"dgsa-{label}-"))
        atexit.register(shutil.rmtree, tmp, True)
        build(tmp)
        return tmp
    try:
        build(tmp)
        (tmp / _MARKER).write_text("ok\n")
        if final.exists() and not (final / _MARKER).is_file():
            shutil.rmtree(final, ignore_errors=True)  # a stale, unmarked entry
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / _MARKER).is_file():  # lost a race is fine; anything else is not
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def save_arrays(folder: Path, **arrays: np.ndarray) -> None:
    for name, arr in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)


def load_arrays(folder: Path, *names: str) -> list[np.ndarray]:
    return [np.load(folder / f"{name}.npy", allow_pickle=False) for name in names]


def save_json(folder: Path, name: str, obj: Any) -> None:
    with open(folder / name, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


def load_json(folder: Path, name: str) -> Any:
    with open(folder / name, encoding="utf-8") as f:
        return json.load(f)


# --- archives --------------------------------------------------------------------------------------------------

ARCHIVE_SUFFIXES = (".tar.xz", ".tar.gz", ".tgz", ".tar.bz2", ".tar", ".zip")


# What a damaged archive raises while it is read (a truncated .tar.xz ends in EOFError, which click would
# otherwise turn into a bare "Aborted.").
_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, lzma.LZMAError, zlib.error)


def _archive_error(path: Path, e: BaseException) -> DataError:
    what = " ".join(str(e).split()) or type(e).__name__
    return DataError(f"cannot read archive {path}: {what}; the file is truncated or damaged (re-download or "
                     "re-copy it)")


def iter_archive(path: str | os.PathLike) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """Yield ``(member path with '/' separators, read())`` for every regular file of a tar or zip archive.

    ``read`` must be called before advancing (tar streams are read sequentially); the loop may stop early.
    A damaged or truncated archive is a one-line :class:`DataError`, whether it shows while listing or in
    ``read()``.
    """
    path = Path(path)

    def guarded(read: Callable[[], bytes]) -> Callable[[], bytes]:
        def run() -> bytes:
            try:
                return read()
            except _ARCHIVE_ERRORS as e:
                raise _archive_error(path, e) from None
        return run

    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if not info.is_dir():
                        yield info.filename, guarded(lambda i=info: zf.read(i))
            return
        with tarfile.open(path, "r:*") as tf:
            for m in tf:
                if m.isfile():
                    yield m.name, guarded(lambda m=m: tf.extractfile(m).read())  # type: ignore[union-attr]
    except _ARCHIVE_ERRORS as e:
        raise _archive_error(path, e) from None


def extract_archive(path: str | os.PathLike) -> Path:
    """Extract a tar/zip archive once into ``<cache>/extracted/<stem>-<key>/`` (atomic) and return that folder."""
    path = Path(path)
    stem = path.name
    for suf in ARCHIVE_SUFFIXES:
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
            break

    def build(tmp: Path) -> None:
        try:
            if path.name.lower().endswith(".zip"):
                with zipfile.ZipFile(path) as zf:
                    for name in zf.namelist():  # refuse absolute paths and '..'
                        if name.startswith("/") or ".." in Path(name).parts:
                            raise DataError(f"unsafe member {name!r} in archive {path}")
                    zf.extractall(tmp)
            else:
                with tarfile.open(path, "r:*") as tf:
                    if hasattr(tarfile, "data_filter"):
                        tf.extractall(tmp, filter="data")
                    else:  # Python without extraction filters: refuse absolute paths, '..' and links
                        for m in tf.getmembers():
                            if m.name.startswith("/") or ".." in Path(m.name).parts or m.issym() or m.islnk():
                                raise DataError(f"unsafe member {m.name!r} in archive {path}")
                        tf.extractall(tmp)
        except _ARCHIVE_ERRORS as e:
            raise _archive_error(path, e) from None

    return cached_dir("extracted", stem, file_key(path), build)
