"""Atomic file writes: write to a temporary file beside the target, then rename.

A killed process therefore leaves either the old file or the new one, never half of one. A target that exists
and is not a regular file (a device node such as /dev/full, a FIFO, a socket, a folder; symbolic links followed)
is never replaced: :class:`UserError` before anything is written, and again just before the rename. That check
is the standalone ``corruptions`` library's (``corruptions.atomic``): one copy for both.

The temporary file is ``.<name>.<owner token>.tmp``: the token names the writing process (host, pid, start
time: ``corruptions.atomic.owner_token``), so :func:`remove_dead_temps` deletes what a killed writer left, never
what a live one is writing. A full disk while writing (an ``OSError`` ENOSPC, or a library's wrapper of one, such
as safetensors' ``SafetensorError ... os error 28``) leaves no temporary file and is raised as ``OSError(ENOSPC)``
naming the target, which the CLI prints as its one disk-full line.
"""
from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
from pathlib import Path
from typing import Any, Iterator

from corruptions import atomic as _shared
from corruptions.atomic import owner_token, special_kind, token_owner_dead

from robustbench_dgsa.util.errors import UserError, disk_full
from robustbench_dgsa.util.jsonio import to_jsonable

__all__ = ["atomic_path", "refuse_special", "remove_dead_temps", "replace", "special_kind", "write_bytes",
           "write_json", "write_text"]
TEMP_SUFFIX = ".tmp"


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
    tmp_path = path.with_name(f".{path.name}.{owner_token()}{TEMP_SUFFIX}")
    os.close(os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        yield tmp_path
        # created 0600 (as mkstemp does); give the result the usual permissions (0666 minus umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        replace(tmp_path, path)
    except Exception as e:
        if disk_full(e) and not (isinstance(e, OSError) and e.errno == errno.ENOSPC and e.filename):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from e
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


def remove_dead_temps(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary files of :func:`atomic_path` for ``path`` whose writer is gone (killed: its owner token
    names a process that no longer runs); returns them. A live writer's, another host's or an unknown one's stay."""
    path = Path(path)
    prefix = f".{path.name}."
    removed = []
    for p in path.parent.glob(f"{glob.escape(prefix)}*{TEMP_SUFFIX}") if path.parent.is_dir() else ():
        if token_owner_dead(p.name[len(prefix):-len(TEMP_SUFFIX)]) and p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


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
