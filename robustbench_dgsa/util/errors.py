"""User-facing errors: the CLI prints these as one line and exits non-zero."""


class UserError(Exception):
    """Bad input from the user (path, name, value). The message is shown as is, on one line."""


class CheckpointError(UserError):
    """A checkpoint that is unreadable or does not fit the requested model."""


class DataError(UserError):
    """Missing, misplaced or malformed dataset files."""
