"""Progress reporting: a Rich bar on a terminal, plain log lines otherwise (CI, pipes, files)."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterable, Iterator, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

T = TypeVar("T")

_MUTED = {"on": False}


def mute(on: bool) -> None:
    """Silence progress bars and status lines of this process (a distributed run's ranks other than 0)."""
    _MUTED["on"] = bool(on)


_prefix = ""   # what every status line of this process starts with (log_prefix), e.g. the job a worker runs


@contextlib.contextmanager
def log_prefix(text: str) -> Iterator[None]:
    """Start every :func:`log` line (and plain progress line) with ``text`` inside the block: a worker running
    one of several jobs at once names its job on each line (``[dvit synthetic-vision seed 1] ...``)."""
    global _prefix
    before = _prefix
    _prefix = f"{before}{text} "
    try:
        yield
    finally:
        _prefix = before


def is_interactive() -> bool:
    return sys.stderr.isatty()


def track(iterable: Iterable[T], total: int | None = None, description: str = "working",
          enabled: bool = True) -> Iterator[T]:
    """Iterate with progress on stderr. Plain mode prints at most ~10 lines per loop."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if not enabled or _MUTED["on"]:
        yield from iterable
        return
    if is_interactive():
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                      transient=True) as bar:
            task = bar.add_task(description, total=total)
            for item in iterable:
                yield item
                bar.advance(task)
        return
    start = time.monotonic()
    step = max(1, (total or 10) // 10)
    done = 0
    for item in iterable:
        yield item
        done += 1
        if done % step == 0 or (total is not None and done == total):
            of = f"/{total}" if total is not None else ""
            print(f"{_prefix}[{description}] {done}{of} ({time.monotonic() - start:.1f}s)", file=sys.stderr,
                  flush=True)


def log(message: str) -> None:
    """One status line on stderr (stdout stays clean for --json output)."""
    if _MUTED["on"]:
        return
    print(f"{_prefix}{message}", file=sys.stderr, flush=True)
