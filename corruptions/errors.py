"""Errors of the corruption library (independent of the rest of the suite)."""


class CorruptionError(ValueError):
    """Bad input to the corruption library: unknown name, severity out of range, wrong dtype/shape, bad file."""
