"""numba compilation for the corruptions' CPU kernels.

The CPU path of the slow corruptions runs as small compiled loops instead of many whole-array passes.
Every kernel is compiled with the same settings:

* ``nogil=True``: :func:`corruptions.corrupt` runs one chunk of images per worker thread, and the kernels
  must release the GIL for the threads to run in parallel;
* ``fastmath=False``: IEEE arithmetic, no reassociation and no fused multiply-add contraction, so the float64
  sums are evaluated in the order written and the outputs stay bit-identical to the reference algorithms
  (and to the CUDA path, which keeps its torch implementation);
* ``error_model="numpy"``: a division by zero gives inf/nan as in NumPy instead of raising;
* ``cache=True``: compiled once per machine and Python (next to the module, or numba's user cache folder
  when the package folder is read-only; ``NUMBA_CACHE_DIR`` overrides it). Where no cache folder is
  writable at all, kernels are compiled in each process instead (about a second each, on first use).
"""
from __future__ import annotations

from numba import njit


_SETTINGS = dict(nogil=True, fastmath=False, error_model="numpy", boundscheck=False)


def kernel(fn):
    """Compile ``fn`` as a CPU corruption kernel (see the module docstring for the settings)."""
    try:
        return njit(fn, cache=True, **_SETTINGS)
    except RuntimeError:   # numba: "cannot cache function ...: no locator available" (nothing writable)
        return njit(fn, cache=False, **_SETTINGS)
