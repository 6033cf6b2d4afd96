"""Atomic file writes: write to a temporary file beside the target, then rename.

A killed process therefore leaves either the old file or the new one, never half of one. A target that exists
and is not a regular file (a device node such as /dev/full, a FIFO, a socket, a folder; symbolic links followed)
is never replaced: :class:`UserError` before anything is written, and again just before the rename. That check
is the standalone ``corruptions`` library's (``corruptions.atomic``): one copy for both.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from corruptions import atomic as _shared
from corruptions.atomic import special_kind

from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.jsonio import to_jsonable

__all__ = ["atomic_path", "refuse_special", "replace", "special_kind", "write_bytes", "write_json", "write_text"]


def refuse_special(path: str | os.PathLike) -> None:
    """UserError when ``path`` exists and is not a regular file (a device, FIFO, socket or folder; see
    :func:`special_kind`)."""
    _shared.refuse_special(path, UserError)


def replace(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """``os.replace(src, dst)``, refused (UserError) when ``dst`` is a device, FIFO, socket or folder."""
    _shared.replace(src, dst, UserError)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success rename it onto ``path``."""
    path = Path(path)
    refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600 files; give the result the usual permissions (0666 minus umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(to_jsonable(obj, fallback=str), indent=2, sort_keys=True) + "\n")
