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
import uuid
from pathlib import Path
from typing import Any, Iterator

PARTIAL_SUFFIX = ".partial"


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
    tmp = partial_path(target)
    try:
        yield tmp
        if sync:
            fsync_file(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path, sync=sync) as tmp:
        tmp.write_bytes(data)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """``obj`` as indented UTF-8 JSON (non-JSON values as ``str``), written atomically."""
    write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
