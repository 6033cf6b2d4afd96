"""Seeded stratified splits and subsamples.

Both functions are deterministic functions of ``(y, fraction or n, seed)``. The draw for each class uses its own
random stream, seeded by ``(seed, class label)``, so the indices chosen for one class do not depend on how many
examples the other classes have. Returned index arrays are sorted (official order is kept).
"""
from __future__ import annotations

import numpy as np

from robustbench_dgsa.util.errors import UserError


def _class_rng(seed: int, label: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(label) & 0xFFFFFFFF]))


def _as_labels(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise UserError(f"labels must be a 1-D array, got shape {y.shape}")
    return y.astype(np.int64, copy=False)


def stratified_split(y, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split indices into ``(train_idx, holdout_idx)`` with ``fraction`` of every class held out.

    Per class with ``n_c`` examples, ``round(n_c * fraction)`` (halves rounded up) are held out, except that a
    class with at least one example always keeps one in the training part when ``fraction < 1``. So the
    proportions are exact per class up to rounding of that class's count, e.g. 0.2 of 5,000 is exactly 1,000.
    """
    y = _as_labels(y)
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise UserError(f"split fraction must be in [0, 1], got {fraction}")
    hold: list[np.ndarray] = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        n_hold = int(np.floor(len(idx) * fraction + 0.5))
        if fraction < 1.0:
            n_hold = min(n_hold, len(idx) - 1)
        if n_hold > 0:
            hold.append(_class_rng(seed, c).permutation(idx)[:n_hold])
    holdout = np.sort(np.concatenate(hold)) if hold else np.zeros(0, dtype=np.int64)
    mask = np.ones(len(y), dtype=bool)
    mask[holdout] = False
    return np.flatnonzero(mask).astype(np.int64), holdout.astype(np.int64)


def stratified_subsample(y, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of a seeded subsample of ``n`` examples with class proportions kept.

    Per-class quotas are ``n * n_c / N`` rounded by the largest-remainder method (ties go to the smaller
    label), so they sum to exactly ``n``. ``n >= len(y)`` returns all indices.
    """
    y = _as_labels(y)
    n = int(n)
    if n < 0:
        raise UserError(f"subsample size must be >= 0, got {n}")
    if n >= len(y):
        return np.arange(len(y), dtype=np.int64)
    classes, counts = np.unique(y, return_counts=True)
    exact = n * counts / len(y)
    quota = np.floor(exact).astype(np.int64)
    rest = n - int(quota.sum())
    if rest > 0:
        order = sorted(range(len(classes)), key=lambda i: (-(exact[i] - quota[i]), i))
        for i in order[:rest]:
            quota[i] += 1
    picked = [_class_rng(seed, c).permutation(np.flatnonzero(y == c))[:q]
              for c, q in zip(classes, quota) if q > 0]
    return np.sort(np.concatenate(picked)).astype(np.int64) if picked else np.zeros(0, dtype=np.int64)
