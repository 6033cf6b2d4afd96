"""Blur corruptions: gaussian_blur, glass_blur, defocus_blur, motion_blur, zoom_blur."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from ._cpu_blur import (defocus_blur_kernel, gaussian_blur_kernel, glass_blur_kernel, glass_shuffle_kernel,
                        zoom_blur_kernel)
from ._ops import (
    clipped_zoom_hwb_torch,
    clipped_zoom_tables,
    ext_index,
    floor_u8,
    from_hwb,
    gaussian_tables,
    im_motion_blur,
    is_identity_zoom,
    scipy_gaussian_torch,
    take_pixels_hwc,
    to_hwb,
    u8_to_unit64,
    zoom_geometry,
)
from .rng import KeyedRandom

# ----------------------------------------------------------------------------------------------
# gaussian_blur (deterministic)


def gaussian_blur(x: torch.Tensor, sigma: float, rng=None) -> torch.Tensor:
    """skimage ``gaussian(x/255., sigma, multichannel=True)``: SciPy separable Gaussian over H then W
    (mode 'nearest', truncate 4, float64, SciPy's summation order), clip, x255, floor. Bit-exact.
    On the CPU one compiled pass (``_cpu_blur.gaussian_blur_kernel``), elsewhere :func:`gaussian_blur_torch`."""
    if x.device.type != "cpu" or x.numel() == 0 or sigma <= 1e-15:
        return gaussian_blur_torch(x, sigma)
    out = np.empty(tuple(x.shape), np.uint8)
    tables = gaussian_tables(float(sigma), 4.0, x.shape[1], x.shape[2], "nearest")
    gaussian_blur_kernel(x.contiguous().numpy(), *tables, out)
    return torch.from_numpy(out)


def gaussian_blur_torch(x: torch.Tensor, sigma: float) -> torch.Tensor:
    return floor_u8(scipy_gaussian_torch(u8_to_unit64(x), sigma, dims=(1, 2), mode="nearest", truncate=4.0))


# ----------------------------------------------------------------------------------------------
# glass_blur (random)


def glass_offsets(choices, d: int):
    """The reference's ``dx, dy = np.random.randint(-d, d, size=2)`` from a choice c in 0 .. (2d)^2 - 1:
    dx = d - 1 - c % 2d, dy = d - 1 - c // 2d, each uniform over -d .. d-1 (randint's upper bound is exclusive).
    For d = 1: (dx, dy) = (-(c & 1), -(c >> 1))."""
    return (d - 1) - choices % (2 * d), (d - 1) - choices // (2 * d)


def glass_shuffle(x: torch.Tensor, choices: torch.Tensor, d: int = 1) -> torch.Tensor:
    """The reference's local "swap" loop.

    ``choices``: int tensor (N, iterations, H-2d, W-2d) with values 0 .. (2d)^2 - 1 for the pixels (h, w),
    d < h < H-d+1, d < w < W-d+1 (:func:`glass_offsets`).

    The reference scans h = H-d .. d+1 and w = W-d .. d+1 and does ``x[h,w], x[h',w'] = x[h',w'], x[h,w]`` on
    NumPy views: a *copy* of (h', w') = (h+dy, w+dx) into (h, w), not a swap. For d = 1 the offsets are in
    {-1, 0}: every source (up, left, up-left) is still unmodified when it is read (the scan runs in reverse), so
    one pass equals new[h, w] = old[h+dy, w+dx] for all pixels at once, computed here as one gather. For d >= 2
    a source may lie below or right of the pixel and be rewritten already in this pass: the loop is sequential and
    runs literally, on the CPU (:func:`corruptions._cpu_blur.glass_shuffle_kernel`), whatever the device.
    (tests/corruptions_lib/test_corruptions_properties.py checks both against a literal NumPy loop.)
    """
    if d != 1:
        img = x.detach().cpu().numpy().copy()
        glass_shuffle_kernel(img, choices.detach().cpu().to(torch.int64).contiguous().numpy(), d)
        return torch.from_numpy(img).to(x.device)
    n, h, w, c = x.shape
    dev = x.device
    hh = torch.arange(2, h, device=dev).view(1, h - 2, 1)
    ww = torch.arange(2, w, device=dev).view(1, 1, w - 2)
    img = x.contiguous()
    for it in range(choices.shape[1]):
        ch = choices[:, it].to(torch.int64)
        src = torch.arange(h * w, device=dev).repeat(n, 1).view(n, h, w)
        src[:, 2:, 2:] = (hh - (ch >> 1)) * w + (ww - (ch & 1))  # dy = -(c >> 1), dx = -(c & 1)
        img = take_pixels_hwc(img, src.view(n, h * w)).view(n, h, w, c)
    return img


def glass_choices(rng: KeyedRandom, iterations: int, h: int, w: int, d: int = 1) -> torch.Tensor:
    """(N, iterations, H-2d, W-2d) uniform choices in 0 .. (2d)^2 - 1: two fair offsets in -d .. d-1 per pixel
    and pass (:func:`glass_offsets`)."""
    k = (2 * d) ** 2
    u = rng.uniform(iterations * (h - 2 * d) * (w - 2 * d))
    shape = (rng.n, iterations, h - 2 * d, w - 2 * d)
    if u.device.type == "cpu":  # u > 0, so truncation is the floor: the same integers in one NumPy pass
        return torch.from_numpy((u.numpy() * float(k)).astype(np.int64)).view(shape)
    return torch.floor(u * float(k)).to(torch.int64).view(shape)


def glass_blur_apply(x: torch.Tensor, params, choices: torch.Tensor) -> torch.Tensor:
    """Gaussian, uint8 truncation, :func:`glass_shuffle` with ``choices``, Gaussian, ``floor_u8``. On the
    CPU one compiled pass (``_cpu_blur.glass_blur_kernel``), elsewhere :func:`glass_blur_apply_torch`."""
    sigma, d = params[0], int(params[1])
    if x.device.type != "cpu" or x.numel() == 0 or sigma <= 1e-15:
        return glass_blur_apply_torch(x, params, choices)
    out = np.empty(tuple(x.shape), np.uint8)
    tables = gaussian_tables(float(sigma), 4.0, x.shape[1], x.shape[2], "nearest")
    glass_blur_kernel(x.contiguous().numpy(), *tables, choices.to(torch.int64).contiguous().numpy(), d, out)
    return torch.from_numpy(out)


def glass_blur_apply_torch(x: torch.Tensor, params, choices: torch.Tensor) -> torch.Tensor:
    sigma, d, _iterations = params
    # np.uint8(gaussian(x/255., sigma) * 255): truncation to uint8 *before* the shuffle
    y = scipy_gaussian_torch(u8_to_unit64(x), sigma, dims=(1, 2), mode="nearest", truncate=4.0)
    y = (y * 255.0).floor_().clamp_(0, 255).to(torch.uint8)
    y = glass_shuffle(y, choices, int(d))
    return floor_u8(scipy_gaussian_torch(u8_to_unit64(y), sigma, dims=(1, 2), mode="nearest", truncate=4.0))


def glass_blur(x: torch.Tensor, params, rng: KeyedRandom) -> torch.Tensor:
    _, h, w, _ = x.shape
    d = int(params[1])  # max_delta: 1 at every CIFAR severity; up to 4 at ImageNet's
    if h <= 2 * d or w <= 2 * d:
        from .errors import CorruptionError
        raise CorruptionError(f"glass_blur with max_delta {d} needs images larger than {2 * d}x{2 * d}, got {h}x{w}")
    return glass_blur_apply(x, params, glass_choices(rng, params[2], h, w, d))


# ----------------------------------------------------------------------------------------------
# defocus_blur (deterministic)


@lru_cache(maxsize=None)
def defocus_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The reference ``disk(radius, alias_blur)``: float32 17x17 disk, normalised, cv2.GaussianBlur 3x3."""
    import cv2

    if radius <= 8:
        ax = np.arange(-8, 8 + 1)
        ksize = (3, 3)
    else:
        ax = np.arange(-radius, radius + 1)
        ksize = (5, 5)
    xx, yy = np.meshgrid(ax, ax)
    disk = np.array((xx**2 + yy**2) <= radius**2, dtype=np.float32)
    disk /= np.sum(disk)
    return cv2.GaussianBlur(disk, ksize=ksize, sigmaX=alias_blur)


@lru_cache(maxsize=None)
def defocus_taps(radius: float, alias_blur: float):
    """The non-zero entries of :func:`defocus_kernel` in ``np.nonzero`` order: (dy, dx, float64 value)."""
    k = defocus_kernel(radius, alias_blur)
    r = k.shape[0] // 2
    return tuple((int(i) - r, int(j) - r, float(k[i, j])) for i, j in zip(*np.nonzero(k)))


def defocus_blur(x: torch.Tensor, params, rng=None) -> torch.Tensor:
    """cv2.filter2D(x/255., -1, kernel) per channel (BORDER_REFLECT_101), clip, x255, floor.

    The float32 kernel's entries are used as float64, only the non-zero taps, summed directly. OpenCV
    filters a 17x17 kernel on CV_64F data through its DFT path, so the two sums differ by ~1e-16
    relative: a floor can differ only where 255*y lies within ~1e-13 of an integer. The kernels sum to
    1 + 1.4e-9 .. 1 + 4.5e-8 (float32 normalisation), which keeps flat regions clear of that edge; on
    real CIFAR images no value differed (test bounds the rate). On the CPU a compiled kernel
    (``_cpu_blur.defocus_blur_kernel``), elsewhere :func:`defocus_blur_torch`: the same sums.
    """
    if x.device.type != "cpu" or x.numel() == 0:
        return defocus_blur_torch(x, params)
    taps = defocus_taps(*params)
    pad = max(max(abs(dy), abs(dx)) for dy, dx, _ in taps)
    n, h, w, c = x.shape
    dys, dxs, vs = (np.array(col) for col in zip(*taps))
    iy, ix = ext_index(h, pad, pad, "mirror"), ext_index(w, pad, pad, "mirror")
    out = np.empty((n, h, w, c), np.uint8)
    defocus_blur_kernel(x.contiguous().numpy(), dys.astype(np.int64), dxs.astype(np.int64), vs.astype(np.float64),
                        iy.astype(np.int64), ix.astype(np.int64), out)
    return torch.from_numpy(out)


def defocus_blur_torch(x: torch.Tensor, params) -> torch.Tensor:
    """:func:`defocus_blur` with torch operations (the CUDA path; on CPU, the tests' reference)."""
    taps = defocus_taps(*params)
    pad = max(max(abs(dy), abs(dx)) for dy, dx, _ in taps)
    n, h, w, c = x.shape
    xt = to_hwb(u8_to_unit64(x))  # batch-innermost: every shifted window is a contiguous block
    iy = torch.as_tensor(ext_index(h, pad, pad, "mirror"), device=x.device)
    ix = torch.as_tensor(ext_index(w, pad, pad, "mirror"), device=x.device)
    xp = xt.index_select(0, iy).index_select(1, ix)
    acc, tmp = None, None
    for dy, dx, v in taps:
        win = xp[pad + dy : pad + dy + h, pad + dx : pad + dx + w]
        if acc is None:
            acc = win * v
            tmp = torch.empty_like(acc)
        else:
            acc.add_(torch.mul(win, v, out=tmp))
    return floor_u8(from_hwb(acc, n, c))


# ----------------------------------------------------------------------------------------------
# motion_blur (random angle)


def motion_angles(rng: KeyedRandom, low: float, high: float) -> np.ndarray:
    """``np.random.uniform(low, high)`` per image: low + (high - low) * u."""
    return low + (high - low) * rng.uniform_cpu(1)[:, 0]


def motion_blur_apply(x: torch.Tensor, params, angles_deg: np.ndarray) -> torch.Tensor:
    """ImageMagick motion blur of the RGB image at the given angles (see ``_ops.im_motion_blur``)."""
    radius, sigma = params
    return im_motion_blur(x, radius, sigma, angles_deg)


def motion_blur(x: torch.Tensor, params, rng: KeyedRandom) -> torch.Tensor:
    return motion_blur_apply(x, params, motion_angles(rng, -45.0, 45.0))


# ----------------------------------------------------------------------------------------------
# zoom_blur (deterministic)


_ZOOM_SUBCHUNK = 8  # images per step in the batch-innermost layout (the five float64 buffers stay in L2)


@lru_cache(maxsize=None)
def _zoom_cpu_tables(h: int, w: int, factors: tuple):
    """Tables of :func:`_cpu_blur.zoom_blur_kernel`: the factor -> geometry sequence (-1: identity) and
    ``clipped_zoom_tables`` of one factor per distinct geometry (equal geometries sample identically)."""
    keys, seq, reps = [], [], []
    for z in factors:
        key = zoom_geometry(h, w, z)
        if is_identity_zoom(h, w, z):
            seq.append(-1)
            continue
        if key not in keys:
            keys.append(key)
            reps.append(float(z))
        seq.append(keys.index(key))
    return (np.array(seq, np.int64),) + clipped_zoom_tables(h, w, tuple(reps))


_UNIT32 = (np.arange(256) / 255.0).astype(np.float32)  # float32(v / 255.) for every byte v


def _zoom_blur_cpu(x: torch.Tensor, factors) -> torch.Tensor:
    n, h, w, c = x.shape
    tables = _zoom_cpu_tables(h, w, tuple(float(z) for z in factors))
    out = np.empty((n, h, w, c), np.uint8)
    zoom_blur_kernel(x.contiguous().numpy(), _UNIT32, *tables, np.float32(len(factors) + 1), out)
    return torch.from_numpy(out)


def zoom_blur(x: torch.Tensor, factors, rng=None) -> torch.Tensor:
    """float32 pipeline: out = sum of clipped_zoom(x, z) over the factors (float32 accumulation in order),
    (x + out) / (n + 1), clip, x255, floor. Each zoom is SciPy's order-1 zoom of a top-left-anchored crop
    (computed in float64, rounded to float32 like SciPy's float32 output). Bit-exact.

    Factors with the same crop/output sizes (e.g. 1.02 and 1.03) give identical zooms; each distinct
    one is computed once and added as often as the reference adds it, in the reference's order. On the
    CPU a compiled kernel (``_cpu_blur.zoom_blur_kernel``) does the same arithmetic.
    """
    if x.device.type == "cpu" and x.numel() > 0:
        return _zoom_blur_cpu(x, factors)
    return zoom_blur_torch(x, factors)


def zoom_blur_torch(x: torch.Tensor, factors) -> torch.Tensor:
    """:func:`zoom_blur` with torch operations (the CUDA path; on CPU, the tests' reference)."""
    n, h, w, c = x.shape
    if n > _ZOOM_SUBCHUNK and x.device.type == "cpu":
        return torch.cat([zoom_blur_torch(x[s : s + _ZOOM_SUBCHUNK], factors) for s in range(0, n, _ZOOM_SUBCHUNK)])
    x32 = to_hwb((x.to(torch.float64) / 255.0).to(torch.float32))  # (np.array(x) / 255.).astype(np.float32)
    x64 = x32.to(torch.float64)
    cache = {}
    out = torch.zeros_like(x32)
    for z in factors:
        key = zoom_geometry(h, w, z)
        if key not in cache:
            cache[key] = x32 if is_identity_zoom(h, w, z) else clipped_zoom_hwb_torch(x64, z).to(torch.float32)
        out.add_(cache[key])
    y = (x32 + out) / float(len(factors) + 1)
    return floor_u8(from_hwb(y, n, c))
