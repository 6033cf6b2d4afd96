"""``corrupt``: apply one corruption at one severity, with one regime's constants, to a batch of uint8 images."""
from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import torch

from . import _output, blur, digital, noise, weather
from .errors import CorruptionError, ResultWarning
from .registry import check_severity, get_spec, resolve_regime
from .rng import KeyedRandom

_IMPL = {
    "gaussian_noise": noise.gaussian_noise,
    "shot_noise": noise.shot_noise,
    "impulse_noise": noise.impulse_noise,
    "speckle_noise": noise.speckle_noise,
    "gaussian_blur": blur.gaussian_blur,
    "glass_blur": blur.glass_blur,
    "defocus_blur": blur.defocus_blur,
    "motion_blur": blur.motion_blur,
    "zoom_blur": blur.zoom_blur,
    "snow": weather.snow,
    "frost": weather.frost,
    "fog": weather.fog,
    "brightness": weather.brightness,
    "spatter": weather.spatter,
    "contrast": digital.contrast,
    "elastic_transform": digital.elastic_transform,
    "pixelate": digital.pixelate,
    "jpeg_compression": digital.jpeg_compression,
    "saturate": digital.saturate,
}

MIN_SIDE = 8
# pixels per internal step: on CPU small enough that one step's temporaries stay in the per-core cache (2**19
# pixels: 64 images at 32 px, 10 at 224 px; at 224 px a 64-image step was 2-4x slower, its float64 draws alone
# ~77 MB); on CUDA large enough to fill the device
_CHUNK_PIXELS = {"cpu": 1 << 19, "cuda": 8192 * 32 * 32}
_CHUNK_MAX_IMAGES = {"cpu": 64, "cuda": 8192}


def chunk_images(device_type: str, h: int, w: int) -> int:
    """Images per internal step on ``device_type`` for h x w images (results do not depend on it)."""
    limit = _CHUNK_MAX_IMAGES.get(device_type, 512)
    return max(1, min(limit, _CHUNK_PIXELS.get(device_type, 1 << 19) // (h * w)))

_POOLS: dict = {}
_POOL_LOCK = threading.Lock()


def _single_threaded():
    torch.set_num_threads(1)  # per OS thread (OpenMP ICV): the caller's own setting is untouched


def _pool(workers: int) -> ThreadPoolExecutor:
    """A process-wide pool of CPU workers; each runs torch single-threaded and works on whole chunks.

    Chunk-level parallelism instead of torch's intra-op threads: the per-chunk tensors are small, and
    OpenMP's fork/join on every small op costs more than it gains (and degrades badly when other
    processes share the cores). Torch, PIL and OpenCV release the GIL while they compute.
    """
    with _POOL_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="corruptions", initializer=_single_threaded
            )
        return _POOLS[workers]


def _describe(images) -> str:
    if isinstance(images, (np.ndarray, torch.Tensor)):
        return f"{type(images).__name__} of dtype {images.dtype} and shape {tuple(images.shape)}"
    return type(images).__name__



class SizeWarning(ResultWarning):
    """Constants applied to images of another size than their reference's (32, 64 or 224 px): the results are not
    comparable with the published set."""


_SIZE_WARNED: set = set()


def _warn_size(regime, h: int, w: int) -> None:
    key = (regime.name, h, w)
    if (h, w) != (regime.size, regime.size) and key not in _SIZE_WARNED:
        _SIZE_WARNED.add(key)
        warnings.warn(f"corruptions use {regime.dataset} constants (tuned for {regime.size}x{regime.size} images); "
                      f"got {h}x{w} images, whose results are not comparable with {regime.dataset} (this warning is "
                      f"shown once)", SizeWarning, stacklevel=3)


def _imagecorruptions_call(images, name, severity, corruption_name, corruption_number):
    """Map imagecorruptions' keywords / positional order onto (images, name, severity)."""
    if isinstance(severity, str) and not isinstance(name, str) and name is not None:
        name, severity = severity, name  # corrupt(image, 3, "fog"): imagecorruptions' positional order
    style = corruption_name is not None or corruption_number != -1
    if corruption_name is not None:
        if name is not None and name != corruption_name:
            raise CorruptionError(f"give the corruption once (name {name!r} vs corruption_name {corruption_name!r})")
        name = corruption_name
    elif corruption_number != -1:
        from .registry import ALL

        if isinstance(corruption_number, bool) or not isinstance(corruption_number, (int, np.integer)) or not (
            0 <= int(corruption_number) < len(ALL)
        ):
            raise CorruptionError(f"corruption_number must be an integer in 0..{len(ALL) - 1}, got {corruption_number!r}")
        name = ALL[int(corruption_number)]
    if name is None:
        raise CorruptionError("no corruption given: pass a name (or corruption_name= / corruption_number=)")
    if style and isinstance(images, (np.ndarray, torch.Tensor)) and (
        images.ndim == 2 or (images.ndim == 3 and images.shape[-1] == 1)
    ):
        gray = images.reshape(images.shape[0], images.shape[1])
        images = np.stack([gray] * 3, axis=-1) if isinstance(gray, np.ndarray) else gray[..., None].expand(-1, -1, 3)
    return images, name, severity


def _check_images(images):
    if not isinstance(images, (np.ndarray, torch.Tensor)):
        raise CorruptionError(f"images must be a uint8 NumPy array or torch tensor, got {_describe(images)}")
    if images.dtype not in (np.uint8, torch.uint8):
        raise CorruptionError(f"images must have dtype uint8, got {_describe(images)}")
    shape = tuple(images.shape)
    if len(shape) not in (3, 4) or shape[-1] != 3:
        raise CorruptionError(f"images must have shape (N, H, W, 3) or (H, W, 3), got {_describe(images)}")
    if shape[-2] < MIN_SIDE or shape[-3] < MIN_SIDE:
        raise CorruptionError(f"images must be at least {MIN_SIDE}x{MIN_SIDE}, got {_describe(images)}")


def _check_indices(indices, n: int) -> np.ndarray:
    if indices is None:
        return np.arange(n, dtype=np.int64)
    if isinstance(indices, torch.Tensor):
        indices = indices.detach().cpu().numpy()
    arr = np.asarray(indices)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise CorruptionError(f"indices must be a 1-D sequence of {n} image indices, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise CorruptionError(f"indices must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _resolve_device(device, images) -> torch.device:
    if device is None:
        return images.device if isinstance(images, torch.Tensor) else torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise CorruptionError(f"device must be 'cpu', 'cuda' or None, got {device!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise CorruptionError(f"device must be 'cpu', 'cuda' or None, got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CorruptionError("device 'cuda' requested but CUDA is not available")
    return dev


def corrupt(images, name: str | None = None, severity: int = 1, *, constants: str | None = None, seed: int = 0,
            indices=None, device=None, frost=None, corruption_name: str | None = None, corruption_number: int = -1):
    """Apply corruption ``name`` at ``severity`` (1..5) with the constants of one reference generator.

    ``constants``: ``"cifar"`` (CIFAR-10-C, 32 px), ``"tiny-imagenet"`` (Tiny-ImageNet-C, 64 px) or ``"imagenet"``
    (ImageNet-C, 224 px); by default the regime of the image size (32x32, 64x64, 224x224; other sizes: a
    CorruptionError asking for the constants). Constants of another size than the images' give a
    :class:`SizeWarning` once per process and size.

    imagecorruptions' call style works too: ``corrupt(image, corruption_name="fog", severity=3)``,
    ``corrupt(image, corruption_number=9, severity=3)`` (position in :data:`~corruptions.registry.ALL`) or
    positionally ``corrupt(image, 3, "fog")``; in that style a grayscale (H, W) or (H, W, 1) image is stacked to
    three channels first, as imagecorruptions does. At 224 px this uses the ImageNet constants, as
    imagecorruptions does (its elastic_transform differs; see docs/corruptions-imagenet.md). imagecorruptions'
    own behaviour at any size >= 32 px (its size handling, exception types): :mod:`corruptions.compat`.

    On CPU the batch is processed in chunks (64 images at 32 px, 10 at 224 px) by ``torch.get_num_threads()``
    worker threads (each single-threaded); results do not depend on the chunking or the number of workers.

    images: uint8 (N, H, W, 3) or (H, W, 3), NumPy array or torch tensor, RGB. Returns the same type and
    shape (uint8): NumPy in, NumPy out; a tensor comes back on its own device unless ``device`` is given.
    Random draws for image i come from a generator keyed by (constants, seed, name, severity, indices[i]) (indices
    default to 0..N-1), so ``corrupt(x[5:9], ..., indices=[5, 6, 7, 8])`` equals ``corrupt(x, ...)[5:9]``.
    ``frost``: a :class:`~corruptions.frost.FrostTextures`; default :func:`load_frost_textures()`.
    """
    images, name, severity = _imagecorruptions_call(images, name, severity, corruption_name, corruption_number)
    spec = get_spec(name)
    sev = check_severity(severity)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CorruptionError(f"seed must be an integer, got {seed!r}")
    _check_images(images)
    h, w = int(images.shape[-3]), int(images.shape[-2])
    regime = resolve_regime(constants, h, w)
    _warn_size(regime, h, w)
    single = images.ndim == 3
    batch = images[None] if single else images
    idx = _check_indices(indices, batch.shape[0])
    dev = _resolve_device(device, images)
    extra = (_frost_for(frost, regime, h, w),) if spec.name == "frost" else ()
    x = torch.from_numpy(np.ascontiguousarray(batch)) if isinstance(batch, np.ndarray) else batch.detach()
    # on the CPU a NumPy allocation: NumPy asks for transparent huge pages for large arrays (fewer page faults)
    out = (torch.from_numpy(np.empty(tuple(x.shape), np.uint8)) if dev.type == "cpu"
           else torch.empty(tuple(x.shape), dtype=torch.uint8, device=dev))
    if batch.shape[0]:
        rng = KeyedRandom(seed, spec.name, sev, idx, device=dev, prefix=regime.key) if spec.random else None
        _run_chunks(x, out, _IMPL[spec.name], spec.param(sev, regime.name), rng, extra, dev)
    if single:
        out = out[0]
    if isinstance(images, np.ndarray):
        return out.cpu().numpy()
    return out if device is not None else out.to(images.device)


def _frost_for(frost, regime, h: int, w: int):
    """The frost textures (default: :func:`load_frost_textures`) as ``regime``'s generator resizes them, checked
    to be larger than the ``h`` x ``w`` images first (:meth:`~corruptions.frost.FrostTextures.check_fits`)."""
    from .frost import FrostTextures, load_frost_textures

    if frost is None:
        frost = load_frost_textures()
    elif not isinstance(frost, FrostTextures):
        raise CorruptionError(f"frost must be a FrostTextures object, got {type(frost).__name__}")
    frost.check_fits(h, w, regime.frost_scale)
    return frost.at_scale(regime.frost_scale)


def _run_chunks(x, out, fn, param, rng, extra: tuple, dev) -> None:
    """``out[s:s+step] = fn(x[s:s+step], param, rng of those images, *extra)`` over the chunks, on CPU by the
    process-wide worker pool."""
    step = chunk_images(dev.type, int(x.shape[1]), int(x.shape[2]))

    def work(s: int):
        xc = x[s : s + step].to(dev).contiguous()
        rc = rng.subset(slice(s, s + step)) if rng is not None else None
        target = out[s : s + step]
        if dev.type == "cpu":
            _output.offer(target.numpy())  # the CPU paths write their result here (corruptions._output)
        try:
            res = fn(xc, param, rc, *extra)
        finally:
            _output.offer(None)
        if res.data_ptr() != target.data_ptr() or res.shape != target.shape:
            target.copy_(res)

    starts = range(0, x.shape[0], step)
    workers = min(torch.get_num_threads(), len(starts)) if dev.type == "cpu" else 1
    if workers > 1 and threading.current_thread().name.startswith("corruptions"):
        workers = 1  # already inside a worker: no nested pools
    if workers > 1:
        for _ in _pool(workers).map(work, starts):
            pass
    else:
        for s in starts:
            work(s)


def corrupt_batches(images, name: str, severity: int, *, batch_size: int = 1000, constants: str | None = None,
                    seed: int = 0, start_index: int = 0, device=None, frost=None) -> Iterator:
    """Yield ``corrupt`` of consecutive slices of ``images`` (bounded memory for writers).

    Slice k covers images[k*batch_size : (k+1)*batch_size] with global indices offset by ``start_index``;
    the concatenation equals ``corrupt(images, ..., indices=start_index + arange(N))``.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise CorruptionError(f"batch_size must be a positive integer, got {batch_size!r}")
    _check_images(images)
    n = images.shape[0] if images.ndim == 4 else 1
    if images.ndim == 3:
        images = images[None]
    for s in range(0, n, batch_size):
        chunk = images[s : s + batch_size]
        yield corrupt(chunk, name, severity, constants=constants, seed=seed,
                      indices=np.arange(start_index + s, start_index + s + len(chunk)), device=device, frost=frost)


@dataclass(frozen=True)
class Corrupter:
    """How a writer corrupts: one regime's constants, the seed of the keyed randomness, the device and the frost
    textures; ``corrupter(x, name, severity, indices)`` is :func:`corrupt` with these settings."""

    constants: str
    seed: int = 0
    device: str | None = None
    frost: Any = None

    def __call__(self, x, name: str, severity: int, indices) -> np.ndarray:
        return corrupt(x, name, severity, constants=self.constants, seed=self.seed, indices=indices,
                       device=self.device, frost=self.frost)
