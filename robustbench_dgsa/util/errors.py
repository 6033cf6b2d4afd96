"""User-facing errors: the CLI prints these as one line (``error: ...``) and exits 2 (:class:`RunFailure`: 1).

Messages are neutral (no flag names; the CLI adds those) and fit on one line. Where a message tells the user
to set a keyword argument it spells it ``name=value`` (``pass resume=True to continue it``) and lists the name in
``options``, so a front end can say it in its own words (the CLI: ``pass --resume to continue it``). The CLI's
error boundary (``robustbench_dgsa.cli.main``) also turns OS errors on paths (exit 1), undecodable text (exit 2),
truncated files (exit 1) and Ctrl-C (exit 130) into one line; anything else is a bug, reported in one line that points
to ``--debug`` for the traceback.
"""


class _Neutral(Exception):
    """An error whose message may name keyword arguments (``options``: their names, e.g. ``("resume",)``)."""

    def __init__(self, *args: object, options: str | tuple[str, ...] = ()) -> None:
        super().__init__(*args)
        self.options: tuple[str, ...] = (options,) if isinstance(options, str) else tuple(options)


class UserError(_Neutral):
    """Bad input from the user (path, name, value). The message is shown as is, on one line."""


class CheckpointError(UserError):
    """A checkpoint that is unreadable or does not fit the requested model."""


class DataError(UserError):
    """Missing, misplaced or malformed dataset files."""


class RunFailure(_Neutral):
    """A failure found while running on valid input (e.g. a model whose outputs are NaN): the CLI prints the
    message as one line and exits 1; nothing is stored as a result."""


#: the one line for a full disk (the CLI prints it after the path: ``<path>: <DISK_FULL>``)
DISK_FULL = "no space left on the device; free space or choose another location"


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` is a full disk: an ``OSError`` with errno ENOSPC, or one that a library wrapped in its own
    type (safetensors' ``SafetensorError: ... No space left on device (os error 28)``), also as the cause or
    context of ``e``."""
    import errno
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        text = str(e)
        if not isinstance(e, OSError) and ("os error 28" in text or "No space left on device" in text):
            return True
        e = e.__cause__ or e.__context__
    return False
