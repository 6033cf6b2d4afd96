"""Batched torch emulations of the library calls the reference generator makes.

Each function reproduces the floating-point operation order of the library it stands for (SciPy's
``correlate1d`` and ``zoom``/``map_coordinates`` with order 1, ImageMagick's ``MotionBlurImage``, ...), so
that results agree bit for bit where the library is deterministic. Everything works on a leading batch
dimension and on any device; only elementwise IEEE operations (separate multiplies and adds, no fused
kernels) are used, so CPU and CUDA give the same bits.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from ._cpu_blur import clipped_zoom_kernel, gaussian_f64_kernel, gaussian_folded_kernel, motion_blur_kernel
from ._output import output_array

# ----------------------------------------------------------------------------------------------
# conversions


def to_planes(x: torch.Tensor) -> torch.Tensor:
    """(N, H, W, C) -> flat contiguous (N*C*H*W,) in (N, C, H, W) order, for ``take_pixels``."""
    return x.permute(0, 3, 1, 2).reshape(-1)


def from_planes(y: torch.Tensor, n: int, c: int, h: int, w: int) -> torch.Tensor:
    """(N, C, H*W) -> (N, H, W, C) contiguous."""
    return y.view(n, c, h, w).permute(0, 2, 3, 1).contiguous()


def take_pixels(flat: torch.Tensor, pix: torch.Tensor, c: int, hw: int) -> torch.Tensor:
    """Per-image pixel gather: flat is ``to_planes`` of N images, pix (N, P) pixel indices (y*W + x) ->
    (N, C, P). One ``take`` with a broadcast index (much faster than gather with an expanded index)."""
    n = pix.shape[0]
    return flat.take(pix.unsqueeze(1) + _plane_base(n, c, hw, str(pix.device)))


def take_pixels_hwc(img: torch.Tensor, pix: torch.Tensor) -> torch.Tensor:
    """Per-image pixel gather in the (N, H, W, C) layout: pix (N, P) pixel indices (y*W + x) -> (N, P, C).
    One index per pixel (the C channels are one contiguous row), no layout change."""
    n, h, w, c = img.shape
    idx = (pix + _plane_base(n, 1, h * w, str(pix.device)).view(n, 1)).view(-1)
    return img.reshape(n * h * w, c).index_select(0, idx).view(n, pix.shape[1], c)


@lru_cache(maxsize=64)
def _plane_base(n: int, c: int, hw: int, device: str) -> torch.Tensor:
    return (torch.arange(n * c, device=torch.device(device)) * hw).view(n, c, 1)


def divisor(x: torch.Tensor, d: float) -> float | torch.Tensor:
    """``d`` as the divisor of ``x``: the number itself on the CPU; off the CPU a 0-dim tensor on x's device.
    PyTorch's CUDA kernels divide by a Python (or CPU) scalar as a multiplication by its reciprocal, which can
    lose a bit (measured on an H200: saturate 6.1 % and brightness 0.12 % of bytes off by one against the CPU
    kernels); a device tensor divisor takes the IEEE division, as NumPy and the CPU kernels do."""
    return d if x.device.type == "cpu" else torch.full((), d, dtype=x.dtype, device=x.device)


def true_div_(x: torch.Tensor, d: float) -> torch.Tensor:
    """``x /= d`` in place, the IEEE quotient on every device (see :func:`divisor`)."""
    return x.div_(divisor(x, d))


def true_div(x: torch.Tensor, d: float) -> torch.Tensor:
    """``x / d``, the IEEE quotient on every device (see :func:`divisor`)."""
    return torch.div(x, divisor(x, d))


def u8_to_unit64(x: torch.Tensor) -> torch.Tensor:
    """``np.array(img) / 255.`` : uint8 -> float64 by true division (not multiplication by 1/255); one
    widening copy and one in-place IEEE division (cheaper than a table look-up with int64 indices)."""
    return true_div_(x.to(torch.float64), 255.0)


def u8_to_unit32(x: torch.Tensor) -> torch.Tensor:
    """``np.array(img, dtype=np.float32) / 255.`` (float32 division)."""
    return true_div_(x.to(torch.float32), 255.0)


def floor_u8(y: torch.Tensor) -> torch.Tensor:
    """``np.uint8(np.clip(y, 0, 1) * 255)``: clip, scale and *truncate* (floor), in y's dtype."""
    # the float -> uint8 conversion truncates toward zero, which is floor on the clipped range [0, 255]
    return torch.clamp(y, 0.0, 1.0).mul_(255.0).to(torch.uint8)


def floor_u8_255(y: torch.Tensor) -> torch.Tensor:
    """``np.uint8(np.clip(y, 0, 255))`` for results already on the 0..255 scale."""
    return torch.clamp(y, 0.0, 255.0).to(torch.uint8)  # truncation = floor on [0, 255]


# ----------------------------------------------------------------------------------------------
# boundary extension (index maps)


def ext_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source index of each position -lo .. n-1+hi of a line of length n under a boundary mode.

    nearest: edge replication (aaa|abcd|ddd); reflect: SciPy 'reflect', half-sample symmetric
    (cba|abcd|dcb); mirror: SciPy 'mirror' = OpenCV BORDER_REFLECT_101 (dcb|abcd|cba).
    """
    i = np.arange(-lo, n + hi)
    if mode == "nearest":
        return np.clip(i, 0, n - 1)
    if mode == "reflect":
        p = 2 * n
        i = np.mod(i, p)
        return np.where(i >= n, p - 1 - i, i)
    if mode == "mirror":
        if n == 1:
            return np.zeros_like(i)
        p = 2 * n - 2
        i = np.mod(i, p)
        return np.where(i >= n, p - i, i)
    raise ValueError(mode)


# ----------------------------------------------------------------------------------------------
# scipy.ndimage.correlate1d / gaussian_filter (float64)


def scipy_gaussian_weights(sigma: float, truncate: float) -> np.ndarray:
    """``scipy.ndimage._filters._gaussian_kernel1d(sigma, 0, int(truncate*sigma+0.5))``, same arithmetic."""
    sd = float(sigma)
    radius = int(truncate * sd + 0.5)
    sigma2 = sd * sd
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / sigma2 * x**2)
    return phi / phi.sum()


def scipy_correlate1d_sym(x: torch.Tensor, weights: np.ndarray, dim: int, mode: str) -> torch.Tensor:
    """SciPy's symmetric-kernel path of ``NI_Correlate1D`` along ``dim`` (float64 in, float64 out).

    out = x[i]*w[0] + sum over k = r..1 (outermost pair first) of (x[i-k] + x[i+k]) * w[k].
    """
    r = len(weights) // 2
    if r == 0:
        return x * float(weights[0])
    n = x.shape[dim]
    idx = torch.as_tensor(ext_index(n, r, r, mode), device=x.device)
    xp = x.index_select(dim, idx)
    out = x * float(weights[r])
    tmp = torch.empty_like(out)
    for k in range(r, 0, -1):
        lo = xp.narrow(dim, r - k, n)
        hi = xp.narrow(dim, r + k, n)
        out.add_(torch.add(lo, hi, out=tmp).mul_(float(weights[r + k])))
    return out


@lru_cache(maxsize=None)
def gaussian_tables(sigma: float, truncate: float, h: int, w: int, mode: str):
    """Weights and the (H + 2r) / (W + 2r) boundary index maps of the compiled SciPy filter."""
    wts = scipy_gaussian_weights(sigma, truncate)
    r = len(wts) // 2
    return wts, ext_index(h, r, r, mode).astype(np.int64), ext_index(w, r, r, mode).astype(np.int64)


@lru_cache(maxsize=None)
def folded_gaussian_tables(sigma: float, truncate: float, n: int, mode: str):
    """The SciPy filter along an axis of length n as a matrix, folded by the axis' mirror symmetry: (s, d).

    M[i, j] (n x n) is the sum of the weights w[k] (k = 0 .. 2r, in that order, from 0.0) whose tap i - r + k
    lands on j through the boundary map (``ext_index``), so ``correlate1d(x)[i] = sum_j M[i, j] * x[j]``
    exactly. For hh = n // 2 and j < hh: s[i, j] = (M[i, j] + M[i, n-1-j]) * 0.5 (rows i < n - hh),
    d[i, j] = (M[i, j] - M[i, n-1-j]) * 0.5 (i < hh); s[i, hh] = M[i, hh] when n is odd. Since
    M[n-1-i, n-1-j] = M[i, j] (symmetric weights, symmetric boundary), out[i] = S[i] + D[i] and
    out[n-1-i] = S[i] - D[i], with S = s . (x[j] + x[n-1-j]) and D = d . (x[j] - x[n-1-j])."""
    wts = scipy_gaussian_weights(sigma, truncate)
    r = len(wts) // 2
    src = ext_index(n, r, r, mode)
    m = np.zeros((n, n))
    rows = np.arange(n)
    for k in range(2 * r + 1):
        m[rows, src[rows + k]] += wts[k]  # one weight per (row, column) pair per tap: elementwise
    hh, c = n // 2, n - n // 2
    lo, hi = m[:c, :hh], m[:c, n - 1 - np.arange(hh)]
    s = np.empty((c, c))
    s[:, :hh] = (lo + hi) * 0.5
    if c > hh:
        s[:, hh] = m[:c, hh]
    return s, np.ascontiguousarray((lo[:hh] - hi[:hh]) * 0.5)


def folds(sigma: float, truncate: float, h: int, w: int) -> bool:
    """Whether a ``fold=True`` filter over an (h, w) plane takes the folded path: the radius reaches both axes'
    lengths (every tap window wraps the axis; elsewhere the direct SciPy loop is kept, bit for bit)."""
    return int(truncate * float(sigma) + 0.5) >= max(h, w)


def scipy_gaussian(x: torch.Tensor, sigma: float, dims=(1, 2), mode: str = "nearest", truncate: float = 4.0,
                   fold: bool = False):
    """``scipy.ndimage.gaussian_filter`` (as called by ``skimage.filters.gaussian``) over ``dims``, float64.

    Axes are filtered in increasing order; sigma <= 1e-15 skips the filter (identity), as SciPy does.
    On the CPU, (N, H, W[, C]) float64 over (1, 2) runs as ``_cpu_blur.gaussian_f64_kernel``. With ``fold``, where
    the kernel is longer than the axes (:func:`folds`), it runs as :func:`scipy_gaussian_folded` instead (the
    same values up to rounding, not bit for bit: for callers whose fidelity is distributional; far fewer
    operations).
    """
    if sigma <= 1e-15:
        return x
    if (x.device.type == "cpu" and tuple(dims) == (1, 2) and x.dim() in (3, 4) and x.dtype == torch.float64
            and x.numel() > 0):
        if fold and folds(sigma, truncate, x.shape[1], x.shape[2]):
            return scipy_gaussian_folded(x, sigma, mode, truncate)
        x4 = x.contiguous().numpy().reshape(tuple(x.shape[:3]) + (-1,))
        out = np.empty_like(x4)
        gaussian_f64_kernel(x4, *gaussian_tables(float(sigma), float(truncate), x4.shape[1], x4.shape[2], mode), out)
        return torch.from_numpy(out.reshape(tuple(x.shape)))
    return scipy_gaussian_torch(x, sigma, dims, mode, truncate, fold)


def _fold_dot(tab: np.ndarray, v: torch.Tensor, dim: int) -> torch.Tensor:
    """sum_j tab[:, j] * v[j] along ``dim`` of v, left to right (the first product is not added to 0)."""
    shape = [1] * v.dim()
    shape[dim] = tab.shape[0]
    col = torch.as_tensor(tab.T.copy(), device=v.device)  # col[j] = tab[:, j]
    if tab.shape[1] == 0:
        return v.narrow(dim, 0, 0).clone()
    acc = torch.mul(col[0].view(shape), v.narrow(dim, 0, 1))
    tmp = torch.empty_like(acc)
    for j in range(1, tab.shape[1]):
        acc.add_(torch.mul(col[j].view(shape), v.narrow(dim, j, 1), out=tmp))
    return acc


def _fold_axis(x: torch.Tensor, tables, dim: int) -> torch.Tensor:
    """One folded pass along ``dim`` (see :func:`folded_gaussian_tables`; ``_cpu_blur._fold_pass``)."""
    s, d = tables
    n = x.shape[dim]
    hh = n // 2
    a, b = x.narrow(dim, 0, hh), x.narrow(dim, n - hh, hh).flip(dim)
    e, o = a + b, a - b
    if n % 2:
        e = torch.cat([e, x.narrow(dim, hh, 1)], dim)
    sv, dv = _fold_dot(s, e, dim), _fold_dot(d, o, dim)
    lo = sv.narrow(dim, 0, hh)
    return torch.cat([lo + dv, sv.narrow(dim, hh, n - 2 * hh), (lo - dv).flip(dim)], dim)


def scipy_gaussian_folded(x: torch.Tensor, sigma: float, mode: str = "reflect", truncate: float = 4.0):
    """The SciPy filter over axes (1, 2) of float64 x (N, H, W[, C]) as two folded matrix passes (H, then W):
    :func:`folded_gaussian_tables`, sums over j in increasing order. Equal to ``scipy_gaussian`` up to rounding
    (the taps are summed per matrix entry first); CPU (``_cpu_blur.gaussian_folded_kernel``) and torch
    (whole-tensor multiply-adds, one per table column) give the same bits."""
    h, w = x.shape[1], x.shape[2]
    ty = folded_gaussian_tables(float(sigma), float(truncate), h, mode)
    tx = folded_gaussian_tables(float(sigma), float(truncate), w, mode)
    if x.device.type == "cpu" and x.numel() > 0:
        x4 = x.contiguous().numpy().reshape(tuple(x.shape[:3]) + (-1,))
        out = np.empty_like(x4)
        gaussian_folded_kernel(x4, *ty, *tx, out)
        return torch.from_numpy(out.reshape(tuple(x.shape)))
    return scipy_gaussian_folded_torch(x, sigma, mode, truncate)


def scipy_gaussian_folded_torch(x: torch.Tensor, sigma: float, mode: str = "reflect", truncate: float = 4.0):
    """:func:`scipy_gaussian_folded` with torch operations (the CUDA path; on CPU, the tests' reference)."""
    shape = x.shape
    xt = x.reshape(shape[0], shape[1], shape[2], -1).permute(1, 2, 0, 3).reshape(shape[1], shape[2], -1)
    xt = _fold_axis(xt, folded_gaussian_tables(float(sigma), float(truncate), shape[1], mode), 0)
    xt = _fold_axis(xt, folded_gaussian_tables(float(sigma), float(truncate), shape[2], mode), 1)
    c = xt.shape[2] // shape[0]
    return xt.reshape(shape[1], shape[2], shape[0], c).permute(2, 0, 1, 3).reshape(shape).contiguous()


def scipy_gaussian_torch(x: torch.Tensor, sigma: float, dims=(1, 2), mode: str = "nearest", truncate: float = 4.0,
                         fold: bool = False):
    """:func:`scipy_gaussian` with torch operations (the CUDA path; on CPU, the tests' reference)."""
    if sigma <= 1e-15:
        return x
    w = scipy_gaussian_weights(sigma, truncate)
    if tuple(dims) == (1, 2) and x.dim() in (3, 4):
        if fold and folds(sigma, truncate, x.shape[1], x.shape[2]):
            return scipy_gaussian_folded_torch(x, sigma, mode, truncate)
        # filter in the batch-innermost layout (contiguous shifted blocks), same arithmetic
        shape = x.shape
        xt = x.reshape(shape[0], shape[1], shape[2], -1).permute(1, 2, 0, 3).reshape(shape[1], shape[2], -1)
        for d in (0, 1):
            xt = scipy_correlate1d_sym(xt, w, d, mode)
        c = xt.shape[2] // shape[0]
        return xt.reshape(shape[1], shape[2], shape[0], c).permute(2, 0, 1, 3).reshape(shape).contiguous()
    for d in dims:
        x = scipy_correlate1d_sym(x, w, d, mode)
    return x


# ----------------------------------------------------------------------------------------------
# scipy.ndimage.zoom(order=1, mode='constant', grid_mode=False) and the reference clipped_zoom


def _spline1_weights(cc: np.ndarray):
    # get_spline_interpolation_weights for order 1: w0 = 1 - t, w1 = 1 - w0 (not t).
    t = cc - np.floor(cc)
    w0 = 1.0 - t
    w1 = 1.0 - w0
    return w0, w1


@lru_cache(maxsize=None)
def clipped_zoom_axis(h: int, zoom: float):
    """Per output position of the reference ``clipped_zoom`` along one axis of length h.

    Returns (i0, i1, w0, w1, valid): output position r samples the crop at zoom-output index trim+r;
    the interpolated value is w0*src[i0] + w1*src[i1] (indices into the full axis), or cval 0 where the
    coordinate falls beyond the input (SciPy 'constant' mode, never the case for the CIFAR constants).
    """
    ch = int(np.ceil(h / zoom))
    top = (h - ch) // 2
    out_len = int(round(ch * zoom))
    trim = (out_len - h) // 2
    zf = (ch - 1) / (out_len - 1) if out_len - 1 != 0 else 1.0
    kk = np.arange(trim, trim + h, dtype=np.float64)
    cc = kk * zf if zoom != 1.0 else kk  # scipy returns a copy when every zoom factor is 1
    valid = cc <= ch - 1
    cc = np.where(valid, cc, 0.0)
    start = np.floor(cc).astype(np.int64)
    w0, w1 = _spline1_weights(cc)
    nb = start + 1
    s2 = 2 * ch - 2
    if ch > 1:  # neighbour beyond the crop: SciPy's edge offsets use mirror indexing (weight is 0 there)
        nb = np.where(nb >= ch, s2 - nb, nb)
    else:
        nb = np.zeros_like(nb)
    return (start + top, nb + top, w0, w1, valid)


def zoom_geometry(h: int, w: int, zoom: float) -> tuple:
    """Key identifying the sampling pattern of ``clipped_zoom``: factors with equal crop and output sizes
    give identical results (SciPy's per-axis factor is (ch-1)/(out-1), not the nominal zoom)."""
    def axis(n):
        ch = int(np.ceil(n / zoom))
        return (n, ch, int(round(ch * zoom)))

    return axis(h) + axis(w)


def is_identity_zoom(h: int, w: int, zoom: float) -> bool:
    g = zoom_geometry(h, w, zoom)
    return g[0] == g[1] == g[2] and g[3] == g[4] == g[5]


@lru_cache(maxsize=None)
def _zoom_tables(h: int, w: int, zoom: float, device: str):
    """Row/column indices and weights of ``clipped_zoom`` stacked as (neighbour 0, neighbour 1)."""
    ry0, ry1, wy0, wy1, vy = clipped_zoom_axis(h, zoom)
    rx0, rx1, wx0, wx1, vx = clipped_zoom_axis(w, zoom)
    dev = torch.device(device)
    f64 = dict(dtype=torch.float64, device=dev)
    rows = torch.as_tensor(np.concatenate([ry0, ry1]), dtype=torch.int64, device=dev)
    wrows = torch.as_tensor(np.concatenate([wy0, wy1]), **f64).view(2 * h, 1, 1)
    cols = torch.as_tensor(np.concatenate([rx0, rx1]), dtype=torch.int64, device=dev)
    wcols = torch.as_tensor(np.concatenate([wx0, wx1]), **f64).view(1, 2 * w, 1)
    mask = None
    if not (vy.all() and vx.all()):
        mask = torch.as_tensor(vy, **f64).view(h, 1, 1) * torch.as_tensor(vx, **f64).view(1, w, 1)
    return rows, wrows, cols, wcols, mask


@lru_cache(maxsize=None)
def clipped_zoom_tables(h: int, w: int, zooms: tuple):
    """``clipped_zoom_axis`` of both axes for each zoom, as the compiled kernels take them: rows, cols
    (G, 2, H|W) int64 and wrows, wcols (G, 2, H|W) float64, stacked as (neighbour 0, neighbour 1); valid
    (G, 2, max(H, W)) the validity as 0/1, with -1 in [g, 0, 0] where all are valid (no mask multiply)."""
    g, m = max(1, len(zooms)), max(h, w)
    rows, cols = np.zeros((g, 2, h), np.int64), np.zeros((g, 2, w), np.int64)
    wrows, wcols = np.zeros((g, 2, h)), np.zeros((g, 2, w))
    valid = np.ones((g, 2, m))
    for i, z in enumerate(zooms):
        ry0, ry1, wy0, wy1, vy = clipped_zoom_axis(h, z)
        rx0, rx1, wx0, wx1, vx = clipped_zoom_axis(w, z)
        rows[i], wrows[i], cols[i], wcols[i] = (ry0, ry1), (wy0, wy1), (rx0, rx1), (wx0, wx1)
        valid[i, 0, :h], valid[i, 1, :w] = vy, vx
        if vy.all() and vx.all():
            valid[i, 0, 0] = -1.0
    return rows, wrows, cols, wcols, valid


def clipped_zoom_hwb(xt: torch.Tensor, zoom: float) -> torch.Tensor:
    """Reference ``clipped_zoom`` on a batch-innermost float64 tensor (H, W, B), B = images x channels.

    For square images this is the reference exactly (it uses the row count for both axes; non-square
    images are cropped per axis). The interpolation reproduces SciPy's order-1 ``zoom``: in float64,
    t = sum over the 2x2 neighbours in C order of ((p * wy) * wx). The caller casts the result to the
    input dtype (SciPy writes float32 output for float32 input). On the CPU a compiled kernel
    (``_cpu_blur.clipped_zoom_kernel``), elsewhere :func:`clipped_zoom_hwb_torch`.
    """
    if xt.device.type != "cpu" or xt.dtype != torch.float64 or xt.numel() == 0:
        return clipped_zoom_hwb_torch(xt, zoom)
    h, w, _ = xt.shape
    out = np.empty(tuple(xt.shape), np.float64)
    clipped_zoom_kernel(xt.contiguous().numpy(), *clipped_zoom_tables(h, w, (float(zoom),)), out)
    return torch.from_numpy(out)


def clipped_zoom_hwb_torch(xt: torch.Tensor, zoom: float) -> torch.Tensor:
    """:func:`clipped_zoom_hwb` with torch operations (the CUDA path; on CPU, the tests' reference).
    Batch-innermost layout makes both gathers contiguous block copies; both row neighbours (and both
    column neighbours) are gathered and weighted in one call each."""
    h, w, _ = xt.shape
    rows, wrows, cols, wcols, mask = _zoom_tables(h, w, float(zoom), str(xt.device))
    a = xt.index_select(0, rows).mul_(wrows)  # (2H, W, B): p * wy for neighbour rows 0 and 1
    t = a.index_select(1, cols).mul_(wcols)  # (2H, 2W, B): (p * wy) * wx for the four neighbours
    acc = torch.add(t[:h, :w], t[:h, w:])  # in C order: (0,0) + (0,1), then (1,0), then (1,1)
    acc.add_(t[h:, :w]).add_(t[h:, w:])
    if mask is not None:
        acc.mul_(mask)
    return acc


def to_hwb(x: torch.Tensor) -> torch.Tensor:
    """(N, H, W, C) -> contiguous (H, W, N*C), the batch-innermost layout."""
    n, h, w, c = x.shape
    return x.permute(1, 2, 0, 3).reshape(h, w, n * c)


def from_hwb(xt: torch.Tensor, n: int, c: int) -> torch.Tensor:
    h, w, _ = xt.shape
    return xt.reshape(h, w, n, c).permute(2, 0, 1, 3).contiguous()


# ----------------------------------------------------------------------------------------------
# ImageMagick MotionBlurImage (IM6 >= 6.6.2 and IM7; Q16 non-HDRI quantisation)

MAGICK_SQ2PI = 2.50662827463100024161235523934010416269302368164062
MAGICK_EPSILON = 1.0e-12


def im_motion_kernel(radius: float, sigma: float) -> np.ndarray:
    """GetOptimalKernelWidth1D (2*ceil(radius)+1 for radius > 0) and GetMotionBlurKernel, in IM's order."""
    width = 2 * int(math.ceil(radius)) + 1
    s = sigma if abs(sigma) >= MAGICK_EPSILON else MAGICK_EPSILON
    k = [math.exp(-(float(i * i)) / (2.0 * s * s)) / (MAGICK_SQ2PI * s) for i in range(width)]
    norm = 0.0
    for v in k:
        norm += v
    return np.array([v / norm for v in k], dtype=np.float64)


def im_motion_offsets(width: int, angles_deg: np.ndarray):
    """Tap offsets (ox, oy) of shape (N, width), as IM computes them (x right, y down)."""
    a = np.asarray(angles_deg, dtype=np.float64)
    rad = math.pi * a / 180.0
    px = float(width) * np.sin(rad)
    py = float(width) * np.cos(rad)
    hyp = np.hypot(px, py)
    i = np.arange(width, dtype=np.float64)[None, :]
    ox = np.ceil((i * py[:, None]) / hyp[:, None] - 0.5).astype(np.int64)
    oy = np.ceil((i * px[:, None]) / hyp[:, None] - 0.5).astype(np.int64)
    return ox, oy


_MOTION_SUBCHUNK_PX = 1 << 17  # source values per step on CPU (keeps the gathers in cache)


def im_motion_blur(x: torch.Tensor, radius: float, sigma: float, angles_deg: np.ndarray) -> torch.Tensor:
    """Wand ``motion_blur`` of 8-bit images written back as 8-bit PNG: (N, H, W, C) uint8 -> uint8.

    Per pixel: v = sum_i k_i * 257*p(x + ox_i, y + oy_i) with edge clamping, accumulated in IM's order in
    float64; Q16 ClampToQuantum q = floor(v + 0.5); 8-bit output floor(q * 255 / 65535) = q // 257.
    On the CPU a compiled kernel (``_cpu_blur.motion_blur_kernel``), elsewhere :func:`im_motion_blur_torch`.
    """
    if x.device.type != "cpu" or x.numel() == 0:
        return im_motion_blur_torch(x, radius, sigma, angles_deg)
    k = im_motion_kernel(radius, sigma)
    ox, oy = im_motion_offsets(len(k), np.asarray(angles_deg, dtype=np.float64).reshape(-1))
    out = output_array(x.shape)
    motion_blur_kernel(x.contiguous().numpy(), k, ox, oy, out)
    return torch.from_numpy(out)


def im_motion_blur_torch(x: torch.Tensor, radius: float, sigma: float, angles_deg: np.ndarray) -> torch.Tensor:
    """:func:`im_motion_blur` with torch operations (the CUDA path; on CPU, the tests' reference)."""
    n, h, w, c = x.shape
    step = max(1, _MOTION_SUBCHUNK_PX // (h * w * c))
    if n > step and x.device.type == "cpu":
        a = np.asarray(angles_deg)
        return torch.cat([im_motion_blur_torch(x[s : s + step], radius, sigma, a[s : s + step])
                          for s in range(0, n, step)])
    k = im_motion_kernel(radius, sigma)
    ox, oy = im_motion_offsets(len(k), angles_deg)
    dev = x.device
    flat = x.permute(0, 3, 1, 2).reshape(-1).to(torch.float64).mul_(257.0)  # (N, C, H, W) flattened
    # flat index = rowpart[n, c, y] + colpart[n, x]: edge clamping per axis, one broadcast add per tap
    plane = (torch.arange(n * c, device=dev) * (h * w)).view(n, c, 1)
    ys = torch.arange(h, device=dev).view(1, 1, h)
    xs = torch.arange(w, device=dev).view(1, w)
    oxt = torch.as_tensor(ox, device=dev)
    oyt = torch.as_tensor(oy, device=dev)
    acc = None
    for i in range(len(k)):
        rowpart = (ys + oyt[:, i].view(n, 1, 1)).clamp_(0, h - 1).mul_(w) + plane  # (N, C, H)
        colpart = (xs + oxt[:, i].view(n, 1)).clamp_(0, w - 1)  # (N, W)
        idx = rowpart.unsqueeze(-1) + colpart.view(n, 1, 1, w)  # (N, C, H, W)
        term = flat.take(idx).mul_(float(k[i]))
        acc = term if acc is None else acc.add_(term)
    q = acc.clamp_(0.0, 65535.0).add_(0.5).floor_()
    out = torch.div(q, 257.0, rounding_mode="floor").to(torch.uint8)  # (N, C, H, W)
    return out.permute(0, 2, 3, 1).contiguous()


# ----------------------------------------------------------------------------------------------
# skimage.color.rgb2hsv / hsv2rgb (float64), same arithmetic as skimage (unchanged since 0.14)


def rgb2hsv(arr: torch.Tensor):
    """(..., 3) float64 RGB in [0, 1] -> (h, s, v) each (...), as skimage computes them.

    Same IEEE operations per pixel as skimage: one hue quotient per pixel (the numerator and offset of
    the channel that wins skimage's later-assignment-wins order: red, then green, then blue), offset +
    quotient, / 6, and + 1 for a negative hue (skimage's ``% 1``; |h| < 1 here, so fmod(h, 1) = h).
    Pixels with delta 0 get s = 0 and h = 0, whatever the 0/0 in between gave.
    """
    r, g, b = arr.unbind(-1)
    v = arr.amax(dim=-1)
    delta = v - arr.amin(dim=-1)  # np.ptp
    zero = delta == 0.0
    s = torch.div(delta, v).masked_fill_(zero, 0.0)
    bmax = b == v
    gmax = g == v
    num = torch.where(bmax, r - g, torch.where(gmax, b - r, g - b))
    off = torch.where(bmax, 4.0, torch.where(gmax, 2.0, 0.0))
    h = true_div_(num.div_(delta).add_(off), 6.0)  # (off + num / delta) / 6
    h = torch.where(h < 0, h + 1.0, h)
    return h.masked_fill_(zero, 0.0), s, v


# skimage's np.choose table: hi -> (R, G, B) as indices into (v, p, q, t); hi = 6 (h * 6 rounding up to 6)
# selects like hi = 0 (skimage's ``% 6``)
_HSV_SELECT = torch.tensor([[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2], [0, 3, 1]])
_HSV_TABLES: dict = {}


def _hsv_select(device) -> torch.Tensor:
    key = str(device)
    if key not in _HSV_TABLES:
        _HSV_TABLES[key] = _HSV_SELECT.reshape(-1).to(device)
    return _HSV_TABLES[key]


def hsv2rgb(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """skimage hsv2rgb: hi = floor(6h) % 6 selects among (v,t,p), (q,v,p), (p,v,t), (p,q,v), (t,p,v), (v,p,q).

    p = v(1 - s), q = v(1 - fs), t = v(1 - (1 - f)s) with f = 6h - hi, each written once into a (..., 4)
    buffer, from which one gather picks the three channels.
    """
    h6 = h * 6
    hi = torch.floor(h6)
    f = h6.sub_(hi)
    vals = torch.empty(v.shape + (4,), dtype=v.dtype, device=v.device)
    vals[..., 0] = v
    torch.mul(v, torch.rsub(s, 1), out=vals[..., 1])
    torch.mul(v, torch.rsub(f * s, 1), out=vals[..., 2])
    torch.mul(v, torch.rsub(torch.rsub(f, 1).mul_(s), 1), out=vals[..., 3])
    sel = _hsv_select(h.device)
    code = hi.to(torch.int64).mul_(3).unsqueeze(-1) + torch.arange(3, device=h.device)
    return torch.gather(vals, -1, sel.take(code))
