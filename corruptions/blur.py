"""Blur corruptions: gaussian_blur, glass_blur, defocus_blur, motion_blur, zoom_blur."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch

from ._cpu_blur import (defocus_blur_kernel, defocus_direct_kernel, gaussian_blur_kernel, glass_blur_kernel,
                        glass_shuffle_kernel, zoom_blur_kernel)
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
    true_div,
    true_div_,
    u8_to_unit64,
    zoom_geometry,
)
from ._output import output_array
from .rng import KeyedRandom

# ----------------------------------------------------------------------------------------------
# gaussian_blur (deterministic)


def gaussian_blur(x: torch.Tensor, sigma: float, rng=None) -> torch.Tensor:
    """skimage ``gaussian(x/255., sigma, multichannel=True)``: SciPy separable Gaussian over H then W
    (mode 'nearest', truncate 4, float64, SciPy's summation order), clip, x255, floor. Bit-exact.
    On the CPU one compiled pass (``_cpu_blur.gaussian_blur_kernel``), elsewhere :func:`gaussian_blur_torch`."""
    if x.device.type != "cpu" or x.numel() == 0 or sigma <= 1e-15:
        return gaussian_blur_torch(x, sigma)
    out = output_array(x.shape)
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
    out = output_array(x.shape)
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


def _defocus_disk(radius: float) -> np.ndarray:
    """The reference's aliased disk before its blur: float32 17x17 (2r+1 square for r > 8), 1/S inside."""
    ax = np.arange(-8, 8 + 1) if radius <= 8 else np.arange(-radius, radius + 1)
    xx, yy = np.meshgrid(ax, ax)
    disk = np.array((xx**2 + yy**2) <= radius**2, dtype=np.float32)
    disk /= np.sum(disk)
    return disk


@lru_cache(maxsize=None)
def defocus_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The reference ``disk(radius, alias_blur)``: float32 17x17 disk, normalised, cv2.GaussianBlur 3x3."""
    import cv2

    return cv2.GaussianBlur(_defocus_disk(radius), ksize=(3, 3) if radius <= 8 else (5, 5), sigmaX=alias_blur)


DEFOCUS_DIRECT_TAPS = 9  # kernels with at most this many non-zero taps (a 3x3 blur of one pixel) are summed directly


def defocus_is_direct(params, h: int, w: int) -> bool:
    """Whether :func:`defocus_blur` sums the kernel's taps directly: kernels with at most ``DEFOCUS_DIRECT_TAPS``
    taps, and images so large that a row or column running sum of 255s could pass 2**24 (float32 exactness)."""
    if len(defocus_taps(*params)) <= DEFOCUS_DIRECT_TAPS:
        return True
    return (max(h, w) + 2 * defocus_plan(*params).pad + 1) * 255 >= 2**24


@lru_cache(maxsize=None)
def defocus_taps(radius: float, alias_blur: float):
    """The non-zero entries of :func:`defocus_kernel` in ``np.nonzero`` order: (dy, dx, float64 value)."""
    k = defocus_kernel(radius, alias_blur)
    r = k.shape[0] // 2
    return tuple((int(i) - r, int(j) - r, float(k[i, j])) for i, j in zip(*np.nonzero(k)))


class DefocusPlan(NamedTuple):
    """:func:`defocus_kernel` as integer sums of the image and a few float64 weights (see :func:`defocus_plan`).

    Offsets are (row, column) relative to the output pixel; ``pad`` is the mirror padding they need, ``s`` the
    Gaussian's half width. rows (dy, x0, x1): the disk's horizontal runs (Q, the disk sum); qtaps (class, i, j):
    Q at -(i, j); xruns (b, dx, y0, y1) * xk: vertical runs making the line sums X_b; xtaps (class, i, b): X_b at
    row -i; yruns (b, dy, x0, x1) * yk, ytaps (class, j, b): the same transposed (Y_b); hruns (class, dy, x0, x1)
    * hk and vruns (class, dx, y0, y1) * vk: any rest, as runs; run multipliers are float32 integers. weights:
    float64, one per class; ``centre``: float64, the weight of the pixel itself."""
    pad: int
    s: int
    rows: np.ndarray
    qtaps: np.ndarray
    xruns: np.ndarray
    xk: np.ndarray
    xtaps: np.ndarray
    yruns: np.ndarray
    yk: np.ndarray
    ytaps: np.ndarray
    hruns: np.ndarray
    hk: np.ndarray
    vruns: np.ndarray
    vk: np.ndarray
    weights: np.ndarray
    centre: float


def _defocus_classes(disk: np.ndarray, s: int):
    """Integer kernels of cv2.GaussianBlur(disk) (BORDER_REFLECT_101, cropped to the disk's square) per class.

    Gaussian tap (i, j) reads disk[refl(y + i), refl(x + j)] for kernel tap (y, x): M_ij, a 0/1 kernel; class
    (min(|i|, |j|), max(|i|, |j|)) sums M_ij over its (i, j). M_ij = the disk shifted by -(i, j) (a qtap) + E_j
    (the reflection / crop along x: [x inside] disk[u, refl(x + j)] - disk[u, x + j]) shifted by -i rows + F_i
    (the same along y) shifted by -j columns + a rest (where both reflect: empty for a disk clear of the
    corners). Returns the classes, qtaps, E (j -> kernel), F, the rests per class and the ones of each M_c; all
    kernels on the square grown by 2s each side (index = offset + n // 2 + 2s)."""
    n = disk.shape[0]
    classes = [(a, b) for b in range(s + 1) for a in range(b + 1)]
    src, m, t = ext_index(n, s, s, "mirror"), n + 4 * s, 2 * s
    d0 = np.zeros((m + 2 * s, m + 2 * s), np.int64)
    d0[3 * s : 3 * s + n, 3 * s : 3 * s + n] = disk  # d0[a + s, b + s] = disk grown, at grid index (a, b)
    ex, ey = {}, {}
    for j in range(-s, s + 1):
        e = np.zeros((m, m), np.int64)
        e[t : t + n, t : t + n] = disk[:, src[s + j : s + j + n]]
        ex[j] = e - d0[s : s + m, s + j : s + j + m]
        ey[j] = ex[j].T.copy() if np.array_equal(disk, disk.T) else None
        if ey[j] is None:
            e = np.zeros((m, m), np.int64)
            e[t : t + n, t : t + n] = disk[src[s + j : s + j + n], :]
            ey[j] = e - d0[s + j : s + j + m, s : s + m]
    rest = np.zeros((len(classes), m, m), np.int64)
    counts = np.zeros(len(classes), np.int64)
    qtaps = []
    for i in range(-s, s + 1):
        for j in range(-s, s + 1):
            c = classes.index((min(abs(i), abs(j)), max(abs(i), abs(j))))
            mij = np.zeros((m, m), np.int64)
            mij[t : t + n, t : t + n] = disk[np.ix_(src[s + i : s + i + n], src[s + j : s + j + n])]
            counts[c] += mij.sum()
            rest[c] += (mij - d0[s + i : s + i + m, s + j : s + j + m] - np.roll(ex[j], -i, 0)
                        - np.roll(ey[i], -j, 1))
            qtaps.append((c, i, j))
    return classes, qtaps, ex, ey, rest, counts


def _runs(f: np.ndarray, off: int) -> list:
    """The non-zero entries of f as maximal runs of equal value along its rows: (row, start, end, value),
    indices minus off."""
    out = []
    for a in range(f.shape[0]):
        b = 0
        while b < f.shape[1]:
            e = b
            while e + 1 < f.shape[1] and f[a, e + 1] == f[a, b]:
                e += 1
            if f[a, b] != 0:
                out.append((a - off, b - off, e - off, int(f[a, b])))
            b = e + 1
    return out


@lru_cache(maxsize=None)
def defocus_plan(radius: float, alias_blur: float) -> DefocusPlan:
    """:func:`defocus_kernel` K decomposed: K ~ sum over classes c of w_c * M_c + centre * (tap 0, 0).

    M_c are the integer kernels of :func:`_defocus_classes`, w_c = (d * g_a) * g_b with d the disk value
    (float32 1/S) and g cv2's float32 Gaussian (the weights GaussianBlur used). M_c matches K up to K's float32
    rounding (~1e-7 relative per tap). Classes whose whole weight w_c * |M_c| is below 1e-18 are left out;
    ``centre`` = fsum(K) - fsum(w_c * |M_c|) of the others, so the effective kernel sums to K's own (float64)
    sum and flat regions floor as they do with K."""
    import cv2

    disk = _defocus_disk(radius)
    k = defocus_kernel(radius, alias_blur)
    n, s = disk.shape[0], (3 if radius <= 8 else 5) // 2
    g = cv2.getGaussianKernel(2 * s + 1, alias_blur, cv2.CV_32F)[:, 0].astype(np.float64)
    classes, qtaps, ex, ey, rest, counts = _defocus_classes(disk > 0, s)
    w = [(float(disk.max()) * g[s + a]) * g[s + b] for a, b in classes]
    keep = [c for c in range(len(classes)) if c == 0 or w[c] * counts[c] >= 1e-18]
    cls = {(a, b): keep.index(classes.index((min(a, b), max(a, b))))
           for a in range(s + 1) for b in range(s + 1) if classes.index((min(a, b), max(a, b))) in keep}
    h, off = n // 2, n // 2 + 2 * s
    rows = [(y - h, int(np.flatnonzero(r)[0]) - h, int(np.flatnonzero(r)[-1]) - h)
            for y, r in enumerate(disk > 0) if r.any()]
    xr, yr, xt, yt, hr, vr = [], [], [], [], [], []
    for b in range(1, s + 1):
        xr += [(b,) + t for t in _runs((ex[b] + ex[-b]).T, off)]
        yr += [(b,) + t for t in _runs(ey[b] + ey[-b], off)]
        xt += [(cls[abs(i), b], i, b) for i in range(-s, s + 1) if (abs(i), b) in cls and (ex[b] + ex[-b]).any()]
        yt += [(cls[b, abs(j)], j, b) for j in range(-s, s + 1) if (b, abs(j)) in cls and (ey[b] + ey[-b]).any()]
    for new, c in enumerate(keep):
        horiz = np.abs(np.arange(rest.shape[1]) - off)[:, None] >= np.abs(np.arange(rest.shape[1]) - off)[None, :]
        hr += [(new,) + t for t in _runs(np.where(horiz, rest[c], 0), off)]
        vr += [(new,) + t for t in _runs(np.where(horiz, 0, rest[c]).T, off)]
    reach = [abs(v) + s for t in rows for v in t] + [max(abs(t[1]), abs(t[2]) + s, abs(t[3]) + s) for t in xr + yr]
    pad = max(reach + [abs(v) for t in hr + vr for v in t[1:4]])  # the farthest pixel any sum reads
    i64 = lambda t, cols: np.array(t, np.int64).reshape(-1, cols)  # noqa: E731
    xr, yr, hr, vr = i64(xr, 5), i64(yr, 5), i64(hr, 5), i64(vr, 5)
    return DefocusPlan(pad, s, i64(rows, 3), i64([(keep.index(c), i, j) for c, i, j in qtaps if c in keep], 3),
                       xr[:, :4].copy(), xr[:, 4].astype(np.float32), i64(xt, 3),
                       yr[:, :4].copy(), yr[:, 4].astype(np.float32), i64(yt, 3),
                       hr[:, :4].copy(), hr[:, 4].astype(np.float32), vr[:, :4].copy(), vr[:, 4].astype(np.float32),
                       np.array([w[c] for c in keep], np.float64),
                       math.fsum(k.astype(np.float64).ravel()) - math.fsum(w[c] * float(counts[c]) for c in keep))


def defocus_blur(x: torch.Tensor, params, rng=None) -> torch.Tensor:
    """cv2.filter2D(x/255., -1, kernel) per channel (BORDER_REFLECT_101), clip, x255, floor.

    Kernels with at most ``DEFOCUS_DIRECT_TAPS`` non-zero taps (the CIFAR constants' single-pixel disks) and
    images over ~65,000 px a side are summed directly (:func:`defocus_is_direct`, :func:`defocus_direct`). Larger
    kernels are applied as :func:`defocus_plan` decomposes them. On
    the pixel values p (0..255, mirror-padded), float32 running sums along rows and columns give the disk sums
    Q, the line sums X_b, Y_b and from them the class sums I_c, all integers below 2**24, so exact in any order.
    Then per value, in float64: z = I_0 * w_0, z = z + I_c * w_c for the other classes in order,
    y = (z + p * centre) / 255, ``floor_u8``. Against OpenCV (which filters the CV_64F image through its DFT)
    the result differs by K's float32 rounding, ~1e-7 relative per tap, so 255*y moves by ~1e-6 at most: a
    floor differs only where 255*y lies that close to an integer (about 1 value in 10**6 on photographs, see
    the fidelity tests). The effective kernel sums to K's own sum (1 - 5e-8 .. 1 + 2e-8; 1.01 at radius 8 and
    10, where the reference's blur reflects the disk), which keeps flat regions on the reference's side of the
    floor. On the CPU compiled kernels (``_cpu_blur.defocus_blur_kernel``, ``defocus_direct_kernel``),
    elsewhere :func:`defocus_blur_torch`: the same operations.
    """
    if x.device.type != "cpu" or x.numel() == 0:
        return defocus_blur_torch(x, params)
    n, h, w, c = x.shape
    out = output_array((n, h, w, c))
    if defocus_is_direct(params, h, w):
        taps = defocus_taps(*params)
        pad = max(max(abs(dy), abs(dx)) for dy, dx, _ in taps)
        dys, dxs, vs = (np.array(col) for col in zip(*taps))
        iy, ix = ext_index(h, pad, pad, "mirror"), ext_index(w, pad, pad, "mirror")
        defocus_direct_kernel(x.contiguous().numpy(), dys.astype(np.int64), dxs.astype(np.int64),
                              vs.astype(np.float64), iy.astype(np.int64), ix.astype(np.int64), out)
        return torch.from_numpy(out)
    pl = defocus_plan(*params)
    iy, ix = ext_index(h, pl.pad, pl.pad, "mirror"), ext_index(w, pl.pad, pl.pad, "mirror")
    defocus_blur_kernel(x.contiguous().numpy(), iy.astype(np.int64), ix.astype(np.int64), pl.pad, pl.s, pl.rows,
                        pl.qtaps, pl.xruns, pl.xk, pl.xtaps, pl.yruns, pl.yk, pl.ytaps, pl.hruns, pl.hk, pl.vruns,
                        pl.vk, pl.weights, pl.centre, out)
    return torch.from_numpy(out)


def defocus_direct(x: torch.Tensor, params) -> torch.Tensor:
    """The direct sum (torch): per pixel y = win_0 * v_0, then y = y + win_t * v_t over the non-zero taps
    (dy, dx, v) of :func:`defocus_taps` in order, on x / 255. (float64) mirror-padded; ``floor_u8``."""
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


def _defocus_sums_torch(xp: torch.Tensor, pl: DefocusPlan, h: int, w: int) -> torch.Tensor:
    """The class sums I_c (classes, H, W, B) float32 of the padded pixel values xp (H + 2 pad, W + 2 pad, B)."""
    r, s = pl.pad, pl.s
    hp, wp, nb = xp.shape
    ch = torch.cat([xp.new_zeros((hp, 1, nb)), xp.cumsum(1)], 1)  # ch[a, b] = sum of xp[a, :b]
    cv = torch.cat([xp.new_zeros((1, wp, nb)), xp.cumsum(0)], 0)  # cv[a, b] = sum of xp[:a, b]
    hrun = lambda a, x0, x1, ht, wt: ch[a : a + ht, x1 + 1 : x1 + 1 + wt] - ch[a : a + ht, x0 : x0 + wt]  # noqa
    vrun = lambda b, y0, y1, ht, wt: cv[y1 + 1 : y1 + 1 + ht, b : b + wt] - cv[y0 : y0 + ht, b : b + wt]  # noqa
    q = xp.new_zeros((h + 2 * s, w + 2 * s, nb))  # Q at pixel (t - s, u - s)
    for dy, x0, x1 in pl.rows.tolist():
        q += hrun(r - s + dy, r - s + x0, r - s + x1, h + 2 * s, w + 2 * s)
    lx = xp.new_zeros((s, h + 2 * s, w, nb))  # X_b at pixel (t - s, u)
    for (b, dx, y0, y1), k in zip(pl.xruns.tolist(), pl.xk.tolist()):
        lx[b - 1] += vrun(r + dx, r - s + y0, r - s + y1, h + 2 * s, w) * k
    ly = xp.new_zeros((s, h, w + 2 * s, nb))  # Y_b at pixel (t, u - s)
    for (b, dy, x0, x1), k in zip(pl.yruns.tolist(), pl.yk.tolist()):
        ly[b - 1] += hrun(r + dy, r - s + x0, r - s + x1, h, w + 2 * s) * k
    acc = xp.new_zeros((len(pl.weights), h, w, nb))
    for c, i, j in pl.qtaps.tolist():
        acc[c] += q[s - i : s - i + h, s - j : s - j + w]
    for c, i, b in pl.xtaps.tolist():
        acc[c] += lx[b - 1, s - i : s - i + h]
    for c, j, b in pl.ytaps.tolist():
        acc[c] += ly[b - 1, :, s - j : s - j + w]
    for (c, dy, x0, x1), k in zip(pl.hruns.tolist(), pl.hk.tolist()):
        acc[c] += hrun(r + dy, r + x0, r + x1, h, w) * k
    for (c, dx, y0, y1), k in zip(pl.vruns.tolist(), pl.vk.tolist()):
        acc[c] += vrun(r + dx, r + y0, r + y1, h, w) * k
    return acc


def defocus_blur_torch(x: torch.Tensor, params) -> torch.Tensor:
    """:func:`defocus_blur` with torch operations (the CUDA path; on CPU, the tests' reference)."""
    if defocus_is_direct(params, x.shape[1], x.shape[2]):
        return defocus_direct(x, params)
    pl = defocus_plan(*params)
    n, h, w, c = x.shape
    xt = to_hwb(x).to(torch.float32)  # batch-innermost: every shifted window is a contiguous block
    iy = torch.as_tensor(ext_index(h, pl.pad, pl.pad, "mirror"), device=x.device)
    ix = torch.as_tensor(ext_index(w, pl.pad, pl.pad, "mirror"), device=x.device)
    acc = _defocus_sums_torch(xt.index_select(0, iy).index_select(1, ix), pl, h, w)
    z = acc[0].to(torch.float64).mul_(float(pl.weights[0]))
    for k in range(1, len(pl.weights)):
        z.add_(acc[k].to(torch.float64).mul_(float(pl.weights[k])))
    z.add_(xt.to(torch.float64).mul_(pl.centre))
    return floor_u8(from_hwb(true_div_(z, 255.0), n, c))


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
    out = output_array((n, h, w, c))
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
    x32 = to_hwb(u8_to_unit64(x).to(torch.float32))  # (np.array(x) / 255.).astype(np.float32)
    x64 = x32.to(torch.float64)
    cache = {}
    out = torch.zeros_like(x32)
    for z in factors:
        key = zoom_geometry(h, w, z)
        if key not in cache:
            cache[key] = x32 if is_identity_zoom(h, w, z) else clipped_zoom_hwb_torch(x64, z).to(torch.float32)
        out.add_(cache[key])
    y = true_div(x32 + out, float(len(factors) + 1))
    return floor_u8(from_hwb(y, n, c))
