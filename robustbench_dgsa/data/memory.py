"""In-memory image data given as RobustBench gives it: ``(x, y)`` tensors (x float in [0, 1], (N, C, H, W)) or a
``torch.utils.data.Dataset`` of (image, label) pairs, turned into the suite's uint8 (N, H, W, C) arrays.

The suite corrupts uint8 images (as the reference generators do), so float images are scaled by 255 and rounded:
exact for images that came from uint8 files (RobustBench's loaders divide by 255), an 8-bit quantisation otherwise.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from robustbench_dgsa.util.errors import UserError


def is_in_memory(data: Any) -> bool:
    """True for ``(x, y)`` (tensors or arrays) or a torch ``Dataset``; False for a dataset name."""
    if isinstance(data, (str, bytes)) or hasattr(data, "value"):
        return False
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return True
    try:
        from torch.utils.data import Dataset
    except ImportError:  # pragma: no cover
        return False
    return isinstance(data, Dataset)


def _images_to_uint8(x: Any, where: str) -> np.ndarray:
    """(N, C, H, W) float in [0, 1] (RobustBench) or (N, H, W, C) uint8 -> uint8 (N, H, W, C)."""
    arr = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    if arr.ndim != 4:
        raise UserError(f"{where}: images must be (N, C, H, W), got shape {tuple(arr.shape)}")
    if arr.dtype == np.uint8:
        return np.ascontiguousarray(arr if arr.shape[-1] in (1, 3) else arr.transpose(0, 2, 3, 1))
    if not np.issubdtype(arr.dtype, np.floating):
        raise UserError(f"{where}: images must be floats in [0, 1] or uint8, got {arr.dtype}")
    if arr.shape[1] not in (1, 3):
        raise UserError(f"{where}: images must be (N, C, H, W) with 1 or 3 channels, got {tuple(arr.shape)}")
    if arr.size and (float(np.nanmin(arr)) < 0.0 or float(np.nanmax(arr)) > 1.0 or np.isnan(arr).any()):
        raise UserError(f"{where}: images must lie in [0, 1] (RobustBench's convention; no normalisation)")
    return np.ascontiguousarray(np.rint(arr.transpose(0, 2, 3, 1).astype(np.float64) * 255.0).astype(np.uint8))


def _labels(y: Any, n: int, where: str) -> np.ndarray:
    arr = y.detach().cpu().numpy() if hasattr(y, "detach") else np.asarray(y)
    if arr.ndim != 1 or len(arr) != n or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise UserError(f"{where}: labels must be {n} integers (shape (N,)), got {arr.dtype} {tuple(arr.shape)}")
    if n and arr.min() < 0:
        raise UserError(f"{where}: labels must be class indices >= 0")
    return arr.astype(np.int64)


def _from_dataset(ds: Any) -> tuple[Any, Any]:
    import torch

    try:
        n = len(ds)
    except TypeError:
        raise UserError("a torch Dataset given as data must have a length (a map-style Dataset)") from None
    if n == 0:
        raise UserError("the Dataset given as data is empty")
    xs, ys = [], []
    for i in range(n):
        item = ds[i]
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise UserError(f"the Dataset's items must be (image, label) pairs; item {i} is {type(item).__name__}")
        img, label = item[0], item[1]
        if not hasattr(img, "shape"):  # a PIL image: as ToTensor would give it
            img = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).float().div(255.0)
            img = img.permute(2, 0, 1) if img.ndim == 3 else img[None]
        xs.append(torch.as_tensor(img))
        ys.append(int(label))
    shapes = {tuple(t.shape) for t in xs}
    if len(shapes) != 1:
        raise UserError(f"the Dataset's images differ in shape ({sorted(shapes)[:2]}); resize them first")
    return torch.stack(xs), torch.tensor(ys)


def image_arrays(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (N, H, W, C) images and int64 labels of ``(x, y)`` or a torch Dataset (see the module docstring)."""
    if isinstance(data, (tuple, list)):
        x, y = data
        where = "data (x, y)"
    else:
        x, y = _from_dataset(data)
        where = f"data ({type(data).__name__})"
    xs = _images_to_uint8(x, where)
    return xs, _labels(y, len(xs), where)


def write_arrays_dataset(x: np.ndarray, y: np.ndarray, folder, num_classes: int = 0) -> str:
    """uint8 images and labels (:func:`image_arrays`) written as ``<folder>/tensors/test.npz`` with class names
    "0" .. "K-1", K = max(num_classes, max label + 1); returns that path, a dataset name the array reader serves."""
    from pathlib import Path

    k = max(int(num_classes), int(y.max()) + 1 if len(y) else 0)
    d = Path(folder) / "tensors"
    d.mkdir(parents=True, exist_ok=True)
    np.savez(d / "test.npz", x=x, y=y, classes=np.array([str(i) for i in range(k)]))
    return str(d / "test.npz")
