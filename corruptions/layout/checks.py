"""Checks of the inputs of the layout writers (images, labels, corruption and severity specs)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..errors import CorruptionError

ProgressWrapper = Callable[..., Iterable]


def check_images(images: Any, what: str = "images") -> np.ndarray:
    """``images`` as a uint8 (N, H, W, 3) array (no copy); CorruptionError naming the problem otherwise."""
    if not isinstance(images, np.ndarray):
        raise CorruptionError(f"{what} must be a NumPy uint8 array of shape (N, H, W, 3), got {type(images).__name__}")
    if images.dtype != np.uint8:
        raise CorruptionError(f"{what} must be uint8 (0..255), got {images.dtype}")
    if images.ndim != 4 or images.shape[-1] != 3:
        hint = (" (channels first? transpose to (N, H, W, 3))" if images.ndim == 4 and images.shape[1] == 3 else
                " (grayscale: replicate to 3 channels first)" if images.ndim in (3, 4) else "")
        raise CorruptionError(f"{what} must have shape (N, H, W, 3), got {tuple(images.shape)}{hint}")
    if len(images) == 0:
        raise CorruptionError(f"{what} is empty")
    return images


def _check_labels(labels: Any, n: int) -> np.ndarray | None:
    if labels is None:
        return None
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != n:
        raise CorruptionError(f"labels must be a 1-D array of {n} entries (one per image), got shape {y.shape}")
    if y.dtype.kind not in "iu":
        raise CorruptionError(f"labels must be integers, got {y.dtype}")
    if len(y) and y.min() < 0:
        raise CorruptionError("labels must be non-negative integers")
    if len(y) and y.max() >= MAX_LABEL:
        raise CorruptionError(f"labels must be class indices below {MAX_LABEL:,}, found {y.max()}")
    return y.astype(np.int64)


#: labels are class indices; a larger value is a broken file (refused before anything is written)
MAX_LABEL = 2**31


def _resolve_names(corruptions: str | Sequence[str]) -> list[str]:
    from .. import registry
    items = [corruptions] if isinstance(corruptions, str) else list(corruptions)
    out: list[str] = []
    for item in items:
        for name in registry.resolve_corruptions(item):
            if name not in out:
                out.append(name)
    if not out:
        raise CorruptionError(f"no corruption selected; valid: {', '.join(registry.ALL)}")
    return out


def _resolve_severities(severities: str | int | Sequence[int]) -> list[int]:
    """Severities in the order given (the order of the blocks), each once: :func:`registry.parse_severities`."""
    from .. import registry
    return registry.parse_severities(severities, keep_order=True)


def name_list(names: Sequence[str], limit: int = 6) -> str:
    """``a, b, c and 4 more``: keeps one-line error messages short."""
    names = list(names)
    head = ", ".join(names[:limit])
    return head if len(names) <= limit else f"{head} and {len(names) - limit} more"


def _wrap(progress: ProgressWrapper | None, items: list, description: str) -> Iterable:
    if progress is None:
        return items
    return progress(items, total=len(items), description=description)


def _label_dtype(y: np.ndarray) -> np.dtype:
    return np.dtype(np.uint8) if len(y) == 0 or int(y.max()) < 256 else np.dtype(np.int64)

