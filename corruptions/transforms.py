"""Corruptions as data transforms: :class:`Corrupt` (for ``torchvision.transforms.Compose``) and
:class:`CorruptedDataset` (an index-aware wrapper, so every example gets its own keyed randomness).

    from torchvision import transforms
    train_tf = transforms.Compose([Corrupt("fog", 3, seed=0), transforms.ToTensor()])

    ds = CorruptedDataset(cifar_test, Corrupt("snow", 5, seed=0), transform=transforms.ToTensor())
    ds[i]  # image i corrupted exactly as corrupt(x, "snow", 5, seed=0, indices=[i]) corrupts it

Accepted images, returned as the same type: a PIL image (mode RGB or L; other modes are converted to RGB and
returned as RGB), a uint8 NumPy array (H, W, 3) or (H, W), a torch tensor (C, H, W) with C = 1 or 3, either uint8
or float in [0, 1] (as ``ToTensor`` makes it; rounded to 8 bits before corrupting, returned as float in [0, 1]).
Single-channel images are replicated to RGB, corrupted, and averaged back to one channel (as the suite's
evaluation does).

Randomness: with ``index=i`` the draws are those of :func:`corruptions.api.corrupt` for image index ``i`` and the
transform's seed, whatever process or DataLoader worker runs it. Without an index (plain ``Compose`` use) each
call draws a fresh index from torch's global generator, so augmentation varies per call and is reproducible
under ``torch.manual_seed`` (DataLoader workers are seeded from it) but not comparable with ``corrupt``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .api import corrupt
from .errors import CorruptionError
from .registry import check_severity, get_spec

_MAX_KEY = 2**62


class Corrupt:
    """Callable transform: one corruption at one severity with CIFAR-10-C constants."""

    def __init__(self, name: str, severity: int, seed: int = 0, *, frost=None):
        self.name = get_spec(name).name
        self.severity = check_severity(severity)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise CorruptionError(f"seed must be an integer, got {seed!r}")
        self.seed = int(seed)
        self.frost = frost

    def __repr__(self) -> str:
        return f"Corrupt(name={self.name!r}, severity={self.severity}, seed={self.seed})"

    def __call__(self, image: Any, index: int | None = None) -> Any:
        if index is None:
            index = int(torch.randint(0, _MAX_KEY, (1,)).item())
        elif isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise CorruptionError(f"index must be an integer, got {index!r}")
        hwc, back = _to_hwc_uint8(image)
        gray = hwc.ndim == 2
        rgb = np.repeat(hwc[..., None], 3, axis=-1) if gray else hwc
        out = corrupt(rgb, self.name, self.severity, seed=self.seed, indices=[int(index)], frost=self.frost)
        if gray:
            out = np.round(out.astype(np.float32).mean(axis=-1)).astype(np.uint8)
        return back(out)


class CorruptedDataset(torch.utils.data.Dataset):
    """``dataset[i]`` -> (corrupted image i, *rest): :class:`Corrupt` called with ``index=i``, then ``transform``.

    ``dataset`` items may be an image or a tuple whose first element is the image (e.g. (image, label)).
    ``index_offset`` shifts the keys (e.g. a shard of a larger set keeps the global indices).
    """

    def __init__(self, dataset, corruption: Corrupt, transform=None, index_offset: int = 0):
        if not isinstance(corruption, Corrupt):
            raise CorruptionError(f"corruption must be a Corrupt transform, got {type(corruption).__name__}")
        self.dataset = dataset
        self.corruption = corruption
        self.transform = transform
        self.index_offset = int(index_offset)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        item = self.dataset[i]
        is_tuple = isinstance(item, tuple)
        image = item[0] if is_tuple else item
        image = self.corruption(image, index=self.index_offset + int(i))
        if self.transform is not None:
            image = self.transform(image)
        return (image, *item[1:]) if is_tuple else image


def _to_hwc_uint8(image: Any):
    """(uint8 (H, W, 3) or (H, W) array, function mapping a corrupted array back to the input's type)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - PIL is a dependency of the corruptions themselves
        Image = None
    if Image is not None and isinstance(image, Image.Image):
        mode = "L" if image.mode == "L" else "RGB"
        arr = np.array(image.convert(mode), dtype=np.uint8)
        return arr, lambda out: Image.fromarray(out, mode)
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or not (image.ndim == 2 or (image.ndim == 3 and image.shape[-1] in (1, 3))):
            raise CorruptionError(f"NumPy images must be uint8 (H, W, 3) or (H, W), got {image.dtype} "
                                  f"{tuple(image.shape)}")
        if image.ndim == 3 and image.shape[-1] == 1:
            return image[..., 0], lambda out: out[..., None]
        return image, lambda out: out
    if isinstance(image, torch.Tensor):
        return _tensor_to_hwc(image)
    raise CorruptionError(f"Corrupt takes a PIL image, a uint8 NumPy array or a (C, H, W) tensor, got "
                          f"{type(image).__name__}")


def _tensor_to_hwc(t: torch.Tensor):
    if t.ndim != 3 or t.shape[0] not in (1, 3):
        raise CorruptionError(f"tensor images must be (C, H, W) with C = 1 or 3, got shape {tuple(t.shape)}")
    device, dtype = t.device, t.dtype
    x = t.detach().cpu()
    if dtype == torch.uint8:
        u8 = x
    elif dtype.is_floating_point:
        u8 = (x.float().clamp(0, 1) * 255.0).round().to(torch.uint8)
    else:
        raise CorruptionError(f"tensor images must be uint8 or float in [0, 1], got {dtype}")
    hwc = u8.permute(1, 2, 0).numpy()
    if hwc.shape[-1] == 1:
        hwc = hwc[..., 0]

    def back(out: np.ndarray) -> torch.Tensor:
        o = torch.from_numpy(np.ascontiguousarray(out))
        o = o[None] if o.ndim == 2 else o.permute(2, 0, 1)
        if dtype != torch.uint8:
            o = o.to(dtype) / 255.0
        return o.contiguous().to(device)

    return hwc, back
