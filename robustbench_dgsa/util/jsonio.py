"""The one JSON sanitiser: Python, numpy and torch values -> plain JSON types.

Used wherever the suite writes JSON it builds from mixed values (checkpoint meta, rollout-set meta, run
records, ``--json`` output of the commands).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Callable

import numpy as np

_PLAIN = (str, int, float, bool, type(None))


def _refuse(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


_NONFINITE = ("keep", "text", "null")


def _key(k: Any) -> str:
    """A dict key as json writes it (1 -> "1", True -> "true", None -> "null"); other keys as ``str(k)``."""
    if isinstance(k, np.generic):
        k = k.item()
    if isinstance(k, str):
        return k
    return json.dumps(k) if isinstance(k, _PLAIN) else str(k)


def to_jsonable(obj: Any, *, fallback: Callable[[Any], Any] = _refuse, nonfinite: str = "keep") -> Any:
    """``obj`` with every container rebuilt from JSON types, recursively.

    dicts -> dicts with string keys (numbers, booleans and None written as json writes them); lists, tuples, sets ->
    lists; numpy scalars -> Python scalars; arrays and tensors -> nested lists (``tolist``); paths -> strings;
    dataclass instances -> dicts. Anything else goes through ``fallback`` (default: ``TypeError``; ``str`` or
    ``repr`` to keep a description). ``nonfinite``: what becomes of inf / -inf / nan — ``"keep"`` (Python's
    json writes the bare ``Infinity`` / ``NaN``, which strict JSON readers refuse), ``"text"`` (the strings
    ``"inf"``, ``"-inf"``, ``"nan"``) or ``"null"``.
    """
    if nonfinite not in _NONFINITE:
        raise ValueError(f"nonfinite must be one of {', '.join(_NONFINITE)}, got {nonfinite!r}")

    def conv(o: Any) -> Any:
        if isinstance(o, np.generic):
            o = o.item()
        if isinstance(o, float):
            if nonfinite != "keep" and not math.isfinite(o):
                return None if nonfinite == "null" else "inf" if o > 0 else "-inf" if o < 0 else "nan"
            return o
        if isinstance(o, _PLAIN):
            return o
        if isinstance(o, dict):
            return {_key(k): conv(v) for k, v in o.items()}
        if isinstance(o, (list, tuple, set, frozenset)):
            return [conv(v) for v in o]
        if isinstance(o, (os.PathLike,)):
            return os.fspath(o)
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return conv(dataclasses.asdict(o))
        if hasattr(o, "tolist") and callable(o.tolist):      # numpy arrays, torch tensors (0-d: a scalar)
            return conv(o.tolist())
        return fallback(o)

    return conv(obj)
