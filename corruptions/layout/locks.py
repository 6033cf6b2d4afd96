"""Advisory locks on a layout folder and on a run's partial files; stale-partial cleaning."""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ..atomic import PARTIAL_SUFFIX, token_owner_dead

try:  # advisory locks (POSIX); elsewhere runs are not serialised and stale partials are kept
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

# an unlocked partial without an owner record, younger than this, may be one a live run is about to lock
_STALE_MIN_AGE_S = 5.0


@contextlib.contextmanager
def _folder_lock(directory: Path):
    """Exclusive advisory lock on the folder itself (no lock file left behind); blocks until free."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_partial(path: Path) -> int:
    """Create ``path`` and hold an exclusive advisory lock on it for this run (released on exit, even kill -9)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def clean_stale_partials(directory: str | os.PathLike) -> list[str]:
    """Delete hidden ``.*.partial`` files in ``directory`` that no live run holds (left by a killed run).

    A partial file's name records its writer (:func:`corruptions.atomic.owner_token`): one whose writer is dead
    is deleted at once, one whose writer is alive is kept. A file without such a record (or from another host)
    is deleted when nobody locks it and it is older than a few seconds. A file a run holds locked is always kept.
    Returns the names removed. Without POSIX locks nothing is removed.
    """
    d = Path(directory)
    removed: list[str] = []
    if fcntl is None or not d.is_dir():
        return removed
    now = time.time()
    for p in d.glob(f".*{PARTIAL_SUFFIX}"):
        dead = token_owner_dead(p.name[:-len(PARTIAL_SUFFIX)].rsplit(".", 1)[-1])
        try:
            if dead is False or not p.is_file():
                continue  # a live writer's
            if dead is None and now - p.stat().st_mtime < _STALE_MIN_AGE_S:
                continue
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live run owns it
        try:
            p.unlink()
            removed.append(p.name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed
