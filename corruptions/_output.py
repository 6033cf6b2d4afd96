"""Where a CPU corruption writes its result: straight into :func:`corruptions.corrupt`'s output when it offers it.

``corrupt`` processes a batch in chunks on worker threads; each chunk's result used to be a fresh array, copied into
the output afterwards. Fresh arrays of a few MB are new pages for the kernel to fault in (at 224 px that cost as
much as the fastest corruptions themselves). So the chunk loop offers the chunk's slice of the output (per thread),
and the CPU paths ask :func:`output_array` for their result array: the offered slice when the shape matches (taken
once), else a new array. The chunk loop copies only a result that is not the offered slice.
"""
from __future__ import annotations

import threading

import numpy as np

_LOCAL = threading.local()


def offer(buf: np.ndarray | None) -> None:
    """Offer ``buf`` (a uint8 slice of the final output) to the next :func:`output_array` call of its shape on this
    thread; ``None`` withdraws the offer."""
    _LOCAL.buf = buf


def output_array(shape) -> np.ndarray:
    """A uint8 array of ``shape`` for a result: the offered slice when its shape is ``shape`` (taken once), else a
    new array."""
    buf = getattr(_LOCAL, "buf", None)
    if buf is not None and buf.shape == tuple(shape):
        _LOCAL.buf = None
        return buf
    return np.empty(tuple(shape), np.uint8)
