"""Corruptions as data transforms: :class:`Corrupt` (for ``torchvision.transforms.Compose`` and
``transforms.v2.Compose``) and :class:`CorruptedDataset` (an index-aware wrapper, so every example gets its own
keyed randomness).

    from torchvision import transforms
    train_tf = transforms.Compose([Corrupt("fog", 3, seed=0), transforms.ToTensor()])

    ds = CorruptedDataset(cifar_test, Corrupt("snow", 5, seed=0), transform=transforms.ToTensor())
    ds[i]  # image i corrupted exactly as corrupt(x, "snow", 5, seed=0, indices=[i]) corrupts it

Accepted images, returned as the same type: a PIL image (mode RGB or L; other modes are converted to RGB and
returned as RGB), a uint8 NumPy array (H, W, 3) or (H, W), a torch tensor (C, H, W) with C = 1 or 3, either uint8
or float in [0, 1] (as ``ToTensor`` makes it; rounded to 8 bits before corrupting, returned as float in [0, 1]),
including torchvision's ``tv_tensors.Image`` (returned as a ``tv_tensors.Image``). Batches work too: a tensor
(N, C, H, W) or an array (N, H, W[, 3]), each image corrupted on its own. Single-channel images are replicated
to RGB, corrupted, and averaged back to one channel (as the suite's evaluation does). Further positional
arguments (e.g. the label of a ``transforms.v2`` sample) are passed through unchanged.

Randomness: with ``index=i`` the draws are those of :func:`corruptions.api.corrupt` for image index ``i`` and the
transform's seed (a batch takes ``i, i+1, ...``, or one index per image), whatever process or DataLoader worker
runs it. Without an index each image is keyed by its own content (a hash of its pixels), so the output depends
only on the image, the corruption and the seed: the same bytes for any ``num_workers``, worker order or batch
layout (the same image gets the same corruption every epoch; give an index to vary it).

Images that are not 32x32 trigger one :class:`~corruptions.api.SizeWarning` per process tree (DataLoader
workers included), not one per worker.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import tempfile
import warnings
from typing import Any, Sequence

import numpy as np
import torch

from .api import SizeWarning, corrupt
from .errors import CorruptionError
from .registry import check_severity, get_spec

_MAX_KEY = 2**62
_TREE_ENV = "CORRUPTIONS_WARN_TREE"  # inherited by child processes (fork and spawn): names the process tree


class Corrupt:
    """Callable transform: one corruption at one severity; ``constants`` as in :func:`corrupt` (default: the regime
    of the image size: CIFAR 32 px, Tiny-ImageNet 64 px, ImageNet 224 px)."""

    def __init__(self, name: str, severity: int, seed: int = 0, *, constants: str | None = None, frost=None):
        self.name = get_spec(name).name
        self.severity = check_severity(severity)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise CorruptionError(f"seed must be an integer, got {seed!r}")
        self.seed = int(seed)
        self.frost = frost
        self.constants = constants            # None: the regime of the image size (corrupt()'s default)

    def __repr__(self) -> str:
        return f"Corrupt(name={self.name!r}, severity={self.severity}, seed={self.seed})"

    def __call__(self, image: Any, *rest: Any, index: int | Sequence[int] | None = None) -> Any:
        batch, back = _to_nhwc_uint8(image)
        keys = _keys(batch, index)
        gray = batch.ndim == 3
        rgb = np.repeat(batch[..., None], 3, axis=-1) if gray else batch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SizeWarning)
            out = corrupt(rgb, self.name, self.severity, constants=self.constants, seed=self.seed, indices=keys,
                          frost=self.frost)
        for w in caught:
            if issubclass(w.category, SizeWarning):
                _warn_once_per_tree(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if gray:
            out = np.round(out.astype(np.float32).mean(axis=-1)).astype(np.uint8)
        result = back(out)
        return (result, *rest) if rest else result


def _keys(batch: np.ndarray, index: Any) -> list[int]:
    """One key per image: the given index (a batch: index, index+1, ... or one per image), else the content."""
    n = len(batch)
    if index is None:
        return [_content_key(im) for im in batch]
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        return [int(index) + k for k in range(n)]
    if isinstance(index, (list, tuple, np.ndarray, torch.Tensor)):
        keys = [int(i) for i in (index.tolist() if hasattr(index, "tolist") else index)]
        if len(keys) == n:
            return keys
    raise CorruptionError(f"index must be an integer (or one per image of a batch of {n}), got {index!r}")


def _content_key(image: np.ndarray) -> int:
    """A key from the image itself: BLAKE2b of its shape and pixels, in [0, 2**62)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(repr(tuple(image.shape)).encode())
    h.update(np.ascontiguousarray(image).tobytes())
    return int.from_bytes(h.digest(), "little") % _MAX_KEY


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _marker(token: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"corruptions-sizewarning-{token}")


def _tree_token() -> str:
    """The process tree's token: set by its first process that imports this module (which removes the tree's
    marker file when it exits), inherited by the rest through the environment."""
    token = os.environ.get(_TREE_ENV)
    if not token:
        token = f"{os.getpid()}-{os.urandom(6).hex()}"
        os.environ[_TREE_ENV] = token
        atexit.register(_remove, _marker(token))
    return token


_TREE = _tree_token()
_WARNED_HERE = False


def _warn_once_per_tree(message: str) -> None:
    """Warn unless a process of this tree already did: the first one to create the tree's marker file wins."""
    global _WARNED_HERE
    if _WARNED_HERE:
        return
    _WARNED_HERE = True
    try:
        os.close(os.open(_marker(_TREE), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return
    except OSError:
        pass  # no shared temp folder: warn in this process
    warnings.warn(message.replace("this warning is shown once", "this warning is shown once per process tree"),
                  SizeWarning, stacklevel=4)


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


def _to_nhwc_uint8(image: Any):
    """(uint8 batch (N, H, W, 3) or (N, H, W), function mapping the corrupted batch back to the input's type)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - PIL is a dependency of the corruptions themselves
        Image = None
    if Image is not None and isinstance(image, Image.Image):
        mode = "L" if image.mode == "L" else "RGB"
        arr = np.array(image.convert(mode), dtype=np.uint8)
        return arr[None], lambda out: Image.fromarray(out[0], mode)
    if isinstance(image, np.ndarray):
        return _array_to_nhwc(image)
    if isinstance(image, torch.Tensor):
        return _tensor_to_nhwc(image)
    raise CorruptionError(f"Corrupt takes a PIL image, a uint8 NumPy array or a (C, H, W) / (N, C, H, W) tensor, "
                          f"got {type(image).__name__}")


def _array_to_nhwc(image: np.ndarray):
    ok_single = image.ndim == 2 or (image.ndim == 3 and image.shape[-1] in (1, 3))
    ok_batch = image.ndim == 4 and image.shape[-1] in (1, 3)
    if image.dtype != np.uint8 or not (ok_single or ok_batch):
        raise CorruptionError(f"NumPy images must be uint8 (H, W, 3), (H, W) or a batch (N, H, W, 3), got "
                              f"{image.dtype} {tuple(image.shape)}")
    single = ok_single
    batch = image[None] if single else image
    one = batch.shape[-1] == 1 and batch.ndim == 4
    if one:
        batch = batch[..., 0]

    def back(out: np.ndarray) -> np.ndarray:
        out = out[..., None] if one else out
        return out[0] if single else out

    return batch, back


def _tensor_to_nhwc(t: torch.Tensor):
    single = t.ndim == 3
    if t.ndim not in (3, 4) or t.shape[-3] not in (1, 3):
        raise CorruptionError(f"tensor images must be (C, H, W) or (N, C, H, W) with C = 1 or 3, got shape "
                              f"{tuple(t.shape)}")
    device, dtype = t.device, t.dtype
    x = torch.Tensor(t.detach()).cpu() if type(t) is not torch.Tensor else t.detach().cpu()  # tv_tensors: plain
    if dtype == torch.uint8:
        u8 = x
    elif dtype.is_floating_point:
        u8 = (x.float().clamp(0, 1) * 255.0).round().to(torch.uint8)
    else:
        raise CorruptionError(f"tensor images must be uint8 or float in [0, 1], got {dtype}")
    u8 = u8[None] if single else u8
    nhwc = u8.permute(0, 2, 3, 1).numpy()
    if nhwc.shape[-1] == 1:
        nhwc = nhwc[..., 0]

    def back(out: np.ndarray) -> torch.Tensor:
        o = torch.from_numpy(np.ascontiguousarray(out))
        o = o[:, None] if o.ndim == 3 else o.permute(0, 3, 1, 2)
        if dtype != torch.uint8:
            o = o.to(dtype) / 255.0
        o = (o[0] if single else o).contiguous().to(device)
        return _rewrap(o, t)

    return nhwc, back


def _rewrap(out: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Keep a torchvision ``tv_tensors`` type (e.g. ``tv_tensors.Image``) through the transform."""
    if type(like) is torch.Tensor:
        return out
    try:
        from torchvision import tv_tensors
    except ImportError:  # pragma: no cover - a tensor subclass without torchvision
        return out
    if isinstance(like, tv_tensors.TVTensor):
        return tv_tensors.wrap(out, like=like)
    return out
