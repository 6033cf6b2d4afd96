"""The one atomic file writer of the corruptions package.

A file is written under a hidden partial name in its own folder (``.<name>.<token>.partial``: the pattern that
:func:`corruptions.layout.clean_stale_partials` recognises), flushed to disk and renamed over the target, so a
reader sees the old file or the complete new one, never a half-written file. On an error the partial file is
deleted and the target is left as it was.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
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


def refuse_special(path: str | os.PathLike, error: type[Exception] = CorruptionError) -> None:
    """``error`` (CorruptionError; a caller may pass its own error type) when ``path`` exists and is not a regular
    file (see :func:`special_kind`)."""
    kind = special_kind(path)
    if kind is not None:
        raise error(f"{path}: is {kind}, not a regular file; refusing to replace it (give the path of a regular file)")


def replace(tmp: str | os.PathLike, target: str | os.PathLike, error: type[Exception] = CorruptionError) -> None:
    """``os.replace(tmp, target)``, refused (``error``) when ``target`` is a device, FIFO, socket or folder."""
    refuse_special(target, error)
    os.replace(tmp, target)


def commit_staged(folder: str | os.PathLike, staged: dict[str, Path], manifest_name: str, manifest: Any,
                  error: type[Exception] = CorruptionError) -> None:
    """Move a run's staged partial files into ``folder`` and write its manifest last.

    ``staged``: final name -> partial path (each file already flushed to disk). Every target is checked before
    anything moves (``error`` when one is a device, FIFO, socket or folder: nothing is replaced then); the old
    manifest is removed before the first file is replaced (no manifest may vouch for files being replaced); each
    file is renamed with :func:`replace`; the new manifest is written atomically (:func:`write_json`)."""
    out = Path(folder)
    for name in staged:
        refuse_special(out / name, error)
    (out / manifest_name).unlink(missing_ok=True)
    for name, tmp in staged.items():
        replace(tmp, out / name, error)
    write_json(out / manifest_name, manifest)


def partial_path(path: str | os.PathLike, token: str | None = None) -> Path:
    """The hidden partial name of ``path``: ``<folder>/.<name>.<token>.partial`` (a fresh :func:`owner_token`
    by default)."""
    p = Path(path)
    return p.with_name(f".{p.name}.{token or owner_token()}{PARTIAL_SUFFIX}")


# --- owner records ------------------------------------------------------------------------------------------
# A partial file's token names its writer (host, pid, process start time), so that the next run can delete what
# a killed (dead) writer left at once, and never what a live one is writing -- whatever the file's age.

_TOKEN_RE = re.compile(r"([0-9a-f]{6})-([0-9]+)-([0-9]+)-[0-9a-f]+")


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


def process_start(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), or "0" where unknown."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return "0"


def owner_token() -> str:
    """A fresh token recording this process as a partial file's owner: ``<host>-<pid>-<start>-<random>``."""
    return f"{_host_tag()}-{os.getpid()}-{process_start(os.getpid())}-{uuid.uuid4().hex[:6]}"


def token_owner_dead(token: str) -> bool | None:
    """Whether the writer a token names is gone: True (dead: no such process, or the pid now belongs to a later
    process), False (alive), None (not an owner token, or written on another host: unknown)."""
    m = _TOKEN_RE.fullmatch(token)
    if m is None or m.group(1) != _host_tag():
        return None
    pid, start = int(m.group(2)), m.group(3)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, another user's
    except (OverflowError, ValueError):
        return None
    now = process_start(pid)
    return start != "0" and now != "0" and now != start


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
