"""Errors of the corruption library (independent of the rest of the suite)."""
from __future__ import annotations

import os
from typing import Sequence


class CorruptionError(ValueError):
    """Bad input to the corruption library: unknown name, severity out of range, wrong dtype/shape, bad file."""


class ResultWarning(UserWarning):
    """A warning that changes what a number means (e.g. procedural frost textures instead of the reference's
    photographs, constants tuned for another image size): callers that silence warnings keep these."""


class OutputExistsError(CorruptionError):
    """A writer would replace existing outputs; nothing was touched. ``directory`` and ``names`` say which, so a
    caller can name its own switch (the library's is the ``overwrite=True`` argument)."""

    def __init__(self, directory: str | os.PathLike, names: Sequence[str]):
        self.directory, self.names = str(directory), list(names)
        self.options = ("overwrite",)  # the keyword argument the message names (a caller may say it its own way)
        super().__init__(f"output exists in {self.directory}: {self.shown}; pass overwrite=True to replace it")

    @property
    def shown(self) -> str:
        """The names, at most six, then how many more."""
        head = ", ".join(self.names[:6])
        return head if len(self.names) <= 6 else f"{head} and {len(self.names) - 6} more"
