"""Python warnings as one clean line each on stderr: ``warning: <message>`` (newlines folded, no source path or
code line), each message once per process. In quiet mode only a :class:`corruptions.errors.ResultWarning` is
shown: a warning that changes what a number means (e.g. procedural frost instead of the real photographs).

The CLI installs this around every command; worker processes started by a command call :func:`install` with
no argument and follow the command's quiet mode through the environment (:data:`QUIET_ENV`).
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Iterator

QUIET_ENV = "DGSA_QUIET_WARNINGS"


def _changes_results(category: Any) -> bool:
    # looked up, not imported: importing the corruptions package loads torch, too slow for every command's start;
    # a ResultWarning can only have been raised once its module is loaded
    errors = sys.modules.get("corruptions.errors")
    return errors is not None and isinstance(category, type) and issubclass(category, errors.ResultWarning)


def install(quiet: bool | None = None) -> None:
    """Route this process's warnings through one-line output. ``quiet`` None: from :data:`QUIET_ENV`."""
    if quiet is None:
        quiet = os.environ.get(QUIET_ENV) == "1"
    seen: set[str] = set()

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if quiet and not _changes_results(category):
            return
        text = " ".join(str(message).split()) or getattr(category, "__name__", "warning")
        if text in seen:
            return
        seen.add(text)
        stream = file if file is not None else sys.stderr
        try:
            stream.write(f"warning: {text}\n")
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # no stderr (closed, or a detached process): nothing to show it on

    warnings.showwarning = show


@contextlib.contextmanager
def warning_lines(quiet: bool) -> Iterator[None]:
    """:func:`install` for the duration of a block (one command), restoring the previous handler, filters and
    quiet setting afterwards; child processes started inside inherit the quiet mode."""
    old_env = os.environ.get(QUIET_ENV)
    os.environ[QUIET_ENV] = "1" if quiet else "0"
    with warnings.catch_warnings():
        # UserWarning's own default action, set again: changing the filters starts Python's once-per-location
        # registry afresh, so each command in a long-lived process (tests, notebooks) warns again
        warnings.filterwarnings("default", category=UserWarning)
        install(quiet)
        try:
            yield
        finally:
            if old_env is None:
                os.environ.pop(QUIET_ENV, None)
            else:
                os.environ[QUIET_ENV] = old_env
