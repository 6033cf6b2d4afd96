"""The one atomic file writer of the corruptions package.

A file is written under a hidden partial name in its own folder (``.<name>.<token>.partial``: the pattern that
:func:`corruptions.layout.clean_stale_partials` recognises), flushed to disk and renamed over the target, so a
reader sees the old file or the complete new one, never a half-written file. On an error the partial file is
deleted and the target is left as it was.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from pathlib import Path
from typing import Any, Iterator

from .errors import CorruptionError

PARTIAL_SUFFIX = ".partial"
_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def special_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it exists and is not a regular file (after following symbolic links): "a character
    device", "a block device", "a FIFO (named pipe)", "a socket" or "a folder"; None for a regular file, a
    missing path or a dangling link. Writers never replace such a path (a device node such as /dev/full, a
    named pipe, /dev/stdout's target)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def refuse_special(path: str | os.PathLike) -> None:
    """CorruptionError when ``path`` exists and is not a regular file (see :func:`special_kind`)."""
    kind = special_kind(path)
    if kind is not None:
        raise CorruptionError(f"{path}: is {kind}, not a regular file; refusing to replace it "
                              f"(give the path of a regular file)")


def replace(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """``os.replace(tmp, target)``, refused (CorruptionError) when ``target`` is a device, FIFO, socket or folder."""
    refuse_special(target)
    os.replace(tmp, target)


def partial_path(path: str | os.PathLike, token: str | None = None) -> Path:
    """The hidden partial name of ``path``: ``<folder>/.<name>.<token>.partial`` (a fresh token by default)."""
    p = Path(path)
    return p.with_name(f".{p.name}.{token or uuid.uuid4().hex[:8]}{PARTIAL_SUFFIX}")


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written file's data to the device."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, sync: bool = True) -> Iterator[Path]:
    """Yield a partial path next to ``path`` to write; when the block ends normally the file is flushed
    (``sync``) and renamed to ``path``; on an error it is deleted."""
    target = Path(path)
    refuse_special(target)
    tmp = partial_path(target)
    try:
        yield tmp
        if sync:
            fsync_file(tmp)
        replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path, sync=sync) as tmp:
        tmp.write_bytes(data)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """``obj`` as indented UTF-8 JSON (non-JSON values as ``str``), written atomically."""
    write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
