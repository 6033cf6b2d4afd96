"""``dgsa-bench`` command line. Thin: each command parses its options and calls library functions.

Every command lives in its own module and registers on ``app``; shared options live in ``options.py``.
:func:`main` is the one error boundary: an expected failure (a bad option value, name, path or file; an OS
error on a path; a file that cannot be decoded) is one ``error: ...`` line on stderr, exit 2 for usage errors
and 1 for failures while running; Ctrl-C is one line and exit 130. A traceback only with ``--debug``; an
unexpected exception (a bug) is one line pointing to ``--debug``.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shlex
import sys
from typing import Sequence

from .app import app

# Command modules, in --help order. Each imports `app` and decorates its commands.
_COMMAND_MODULES = ["models_cmd", "corrupt_cmd", "train_cmd", "evaluate_cmd", "rollout_cmd", "compare_cmd",
                    "report_cmd", "export_cmd", "sweep_cmd"]
for _name in _COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

USAGE, FAILURE, INTERRUPTED = 2, 1, 130

# Commands that continue where they stopped when run again (the extra flag it takes, if any).
_RESUMABLE = {"train": "--resume", "reproduce": "", "sweep run": "", "sweep run-one": ""}


def _user_error_types() -> tuple[type[BaseException], ...]:
    from corruptions.errors import CorruptionError

    from robustbench_dgsa.util.errors import UserError
    return UserError, CorruptionError


def _failure_types() -> tuple[type[BaseException], ...]:
    from robustbench_dgsa.util.errors import RunFailure
    return (RunFailure,)


def _say(message: str) -> None:
    """One line on stderr: ``error: message`` (newlines folded, markup escaped)."""
    from rich.console import Console
    from rich.markup import escape
    line = " ".join(str(message).split()) or "unknown error"
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(line)}")


_OS_HINTS = {
    "PermissionError": "permission denied (read-only?); choose a writable location or fix the permissions",
    "IsADirectoryError": "is a folder, but a file is expected; give a file path",
    "NotADirectoryError": "a file is in the way where a folder is expected; give a folder path",
    "FileExistsError": "already exists; choose another path or remove it",
    "FileNotFoundError": "no such file or folder; check the path",
}


def _os_message(e: OSError) -> str:
    paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
    from robustbench_dgsa.util.errors import DISK_FULL
    hint = _OS_HINTS.get(type(e).__name__)
    if hint is None:
        import errno
        hint = {errno.ENOSPC: DISK_FULL,
                errno.EROFS: "read-only file system; choose a writable location"}.get(e.errno, e.strerror or str(e))
    if not paths:
        return hint if hint == DISK_FULL else f"{e.strerror or e}: {hint}"
    return f"{' -> '.join(paths)}: {hint}"


_STDOUT_MESSAGE = "cannot write the output: standard output is closed or a broken pipe"


class StdoutUnwritable(Exception):
    """Standard output is closed (``>&-``) or a broken pipe: the command's output would be lost."""


class _ClosedStdout(io.TextIOBase):
    """Stands in for ``sys.stdout`` when the process started with file descriptor 1 closed (Python then sets
    ``sys.stdout`` to None and print() drops the output without a word): any write is a StdoutUnwritable."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not s:
            return 0
        raise StdoutUnwritable("standard output is closed")

    def isatty(self) -> bool:
        return False


def _guard_closed_stdout() -> None:
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()


def _flush_stdout() -> None:
    """Flush stdout now, so that a broken pipe or closed stream is this command's failure (exit 1), not a
    message from the interpreter's shutdown."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as e:
        raise StdoutUnwritable(str(e) or type(e).__name__) from None


def _stdout_broken() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (poll reports an error or hang-up on it)."""
    import select
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def _stdout_failure(e: BaseException) -> bool:
    """Whether ``e`` is a failed write to stdout (closed, broken pipe; not another pipe of the command); stdout is
    then pointed at /dev/null so the interpreter's last flush stays quiet."""
    closed = bool(getattr(sys.stdout, "closed", False))
    if not (isinstance(e, StdoutUnwritable) or (isinstance(e, BrokenPipeError) and _stdout_broken())
            or (isinstance(e, ValueError) and closed)):
        return False
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return True


def _classify(e: BaseException) -> tuple[str, int] | None:
    """(one-line message, exit code) for an expected failure; None for a bug."""
    from typer import Abort

    from robustbench_dgsa.util.errors import DISK_FULL, disk_full

    from .options import ClickException, Truncated, flag_message
    if _stdout_failure(e):
        return _STDOUT_MESSAGE, FAILURE
    if disk_full(e) and not isinstance(e, OSError):   # a library's wrapper of ENOSPC (safetensors' os error 28)
        return DISK_FULL, FAILURE
    if isinstance(e, _user_error_types()):
        return flag_message(e), USAGE
    if isinstance(e, _failure_types()):
        return flag_message(e), FAILURE
    if isinstance(e, ClickException):
        return e.format_message(), e.exit_code
    if isinstance(e, UnicodeDecodeError):
        return (f"cannot decode text as {e.encoding} ({e.reason} at byte {e.start}); save the file as UTF-8 or "
                f"give its encoding"), USAGE
    if isinstance(e, json.JSONDecodeError):
        return (f"malformed JSON ({e.msg} at line {e.lineno}, column {e.colno}); check the files the command "
                f"reads"), USAGE
    if isinstance(e, OSError):
        return _os_message(e), FAILURE
    if isinstance(e, Truncated):
        return f"a file or archive ended early ({e}); it is probably truncated: download or write it again", FAILURE
    if type(e).__name__ == "DecompressionBombError":
        return f"image too large to open safely ({e})", USAGE
    if isinstance(e, RecursionError):
        return "input nested too deeply to read (a JSON, TOML or checkpoint header thousands of levels deep?)", USAGE
    if isinstance(e, MemoryError):
        return "out of memory; try a smaller --batch-size or --max-examples", FAILURE
    if isinstance(e, Abort):
        return "aborted", FAILURE
    return None


def _interrupted(command: str, argv: Sequence[str]) -> str:
    if command not in _RESUMABLE:
        return "interrupted"
    extra = _RESUMABLE[command]
    args = list(argv) + ([extra] if extra and extra not in argv else [])
    return "interrupted; resume with: " + shlex.join(["dgsa-bench", *args])


def _worker_reported(line: str, code: int, e: BaseException | None = None) -> bool:
    """In a worker of torchrun or of ``train --nproc``: record the line for the launcher (torchrun's error file);
    True when the launcher of ``train --nproc`` prints it (then this worker stays quiet)."""
    if not os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return False
    from robustbench_dgsa.engine.distributed import PeerFailure, record_worker_error
    return record_worker_error(line, code, peer=isinstance(e, PeerFailure))


def _exit(code: int) -> None:
    """``sys.exit(code)``; in a process that joined a process group, ``engine.distributed.exit_process`` (loaded
    only where a run used it: without it no group was joined)."""
    dist = sys.modules.get("robustbench_dgsa.engine.distributed")
    if dist is not None:
        dist.exit_process(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``dgsa-bench`` with ``argv`` (default: sys.argv[1:]); always ends in SystemExit."""
    import typer.main

    from .options import Interrupted, NoArgsIsHelpError, debug_enabled, set_command_line, set_debug

    from robustbench_dgsa.util.procs import skip_collection_at_exit
    from robustbench_dgsa.util.warnlines import warning_lines

    skip_collection_at_exit()   # ~0.8 s less at exit after a command that loaded torch and the report's libraries
    args = list(sys.argv[1:] if argv is None else argv)
    set_debug(False)
    set_command_line(args)
    _guard_closed_stdout()
    flags = args[:args.index("--")] if "--" in args else args
    try:
        with warning_lines(quiet="-q" in flags or "--quiet" in flags):  # one clean line per warning
            rv = typer.main.get_command(app).main(args=args, prog_name="dgsa-bench", standalone_mode=False)
        _flush_stdout()
    except NoArgsIsHelpError:
        sys.exit(USAGE)  # the help is already printed
    except SystemExit:
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click's own EPIPE handling: exit 1 without a word
            _stdout_failure(StdoutUnwritable("broken pipe"))
            _say(_STDOUT_MESSAGE)
            sys.exit(FAILURE)
        raise
    except Interrupted as e:
        if not _worker_reported(_interrupted(e.command, args), INTERRUPTED):
            print(_interrupted(e.command, args), file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)
    except KeyboardInterrupt:
        if not _worker_reported("interrupted", INTERRUPTED):
            print("interrupted", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)
    except Exception as e:  # noqa: BLE001 - the one error boundary
        known = _classify(e)
        if debug_enabled():
            import traceback
            traceback.print_exc()
        if known is None:
            known = (f"internal error: {type(e).__name__}: {e} (this is a bug; run again with --debug for the "
                     f"traceback and report it)", FAILURE)
        if not _worker_reported(known[0], known[1], e):
            _say(known[0])
        _exit(known[1])
    _exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)
