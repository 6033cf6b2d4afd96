"""Compiled CPU kernels of the per-pixel corruptions: brightness, saturate, contrast, pixelate and the
noise samplers.

Each kernel is one pass over a chunk of uint8 images that does, per element, exactly the IEEE operations
of the torch implementation it replaces (which stays the CUDA path and the reference of the tests), in
the same order: no fused multiply-add, no reassociation (see :mod:`corruptions._jit`). Only +, -, *, /,
comparisons, floor, truncating conversions and exact integer sums are used (no transcendental
functions), so the results are bit-identical. Inputs are C-contiguous NumPy views of the chunk; outputs
are written into a preallocated array. The random draws come from :mod:`corruptions.rng` unchanged.
"""
from __future__ import annotations

import numpy as np
import torch

from ._jit import kernel
from .rng import keyed_word, stream_offset

_UNIT64 = np.arange(256) / 255.0  # x / 255. of every byte (IEEE division: the values of u8_to_unit64)


@kernel
def _floor_u8(y: float) -> np.uint8:
    """``np.uint8(np.clip(y, 0, 1) * 255)``: clip, x255, truncate (as :func:`corruptions._ops.floor_u8`)."""
    return np.uint8(int(min(max(y, 0.0), 1.0) * 255.0))


# ----------------------------------------------------------------------------------------------
# skimage rgb2hsv / hsv2rgb (float64), in planar blocks of pixels

_HSV_BLOCK = 256  # pixels per block: the six float64 rows of a block stay in L1


@kernel
def _rgb2hsv_rows(r: np.ndarray, g: np.ndarray, b: np.ndarray, h: np.ndarray, s: np.ndarray, v: np.ndarray):
    """skimage ``rgb2hsv`` per pixel, as :func:`corruptions._ops.rgb2hsv`: v = max, delta = v - min
    (np.ptp), s = delta / v; the hue numerator and offset of the channel that wins skimage's
    later-assignment-wins order (blue, else green, else red), h = (num / delta + off) / 6, + 1 when
    negative; delta 0 gives h = s = 0 (whatever 0/0 gave). Selects, no branches, so the loop vectorises."""
    for j in range(r.shape[0]):
        rj, gj, bj = r[j], g[j], b[j]
        vj = max(max(rj, gj), bj)
        delta = vj - min(min(rj, gj), bj)
        bmax, gmax = bj == vj, gj == vj
        num = (rj - gj) if bmax else ((bj - rj) if gmax else (gj - bj))
        off = 4.0 if bmax else (2.0 if gmax else 0.0)
        hj = (num / delta + off) / 6.0
        hj = hj + 1.0 if hj < 0.0 else hj
        zero = delta == 0.0
        h[j] = 0.0 if zero else hj
        s[j] = 0.0 if zero else delta / vj
        v[j] = vj


@kernel
def _hsv2rgb_rows(h: np.ndarray, s: np.ndarray, v: np.ndarray, r: np.ndarray, g: np.ndarray, b: np.ndarray):
    """skimage ``hsv2rgb`` per pixel, as :func:`corruptions._ops.hsv2rgb`, then clip to [0, 1] and x255
    (the truncation is left to the caller): h6 = h * 6, hi = floor(h6), f = h6 - hi, p = v(1 - s),
    q = v(1 - f s), t = v(1 - (1 - f) s); hi (0..6, 6 selecting like 0) picks (v,t,p), (q,v,p), (p,v,t),
    (p,q,v), (t,p,v), (v,p,q). Selects, no branches."""
    for j in range(h.shape[0]):
        vj, sj = v[j], s[j]
        h6 = h[j] * 6.0
        hi = np.floor(h6)
        f = h6 - hi
        p = vj * (1.0 - sj)
        q = vj * (1.0 - f * sj)
        t = vj * (1.0 - (1.0 - f) * sj)
        rj = q if hi == 1.0 else (p if (hi == 2.0 or hi == 3.0) else (t if hi == 4.0 else vj))
        gj = t if (hi == 0.0 or hi == 6.0) else (vj if (hi == 1.0 or hi == 2.0) else (q if hi == 3.0 else p))
        bj = vj if (hi == 3.0 or hi == 4.0) else (q if hi == 5.0 else (t if hi == 2.0 else p))
        r[j] = min(max(rj, 0.0), 1.0) * 255.0
        g[j] = min(max(gj, 0.0), 1.0) * 255.0
        b[j] = min(max(bj, 0.0), 1.0) * 255.0


@kernel
def hsv_adjust_kernel(x: np.ndarray, unit: np.ndarray, c: float, a: float, b: float, saturate: bool,
                      out: np.ndarray) -> None:
    """brightness or saturate of (P, 3) uint8 pixels into ``out``: rgb2hsv of x / 255. (``unit``: the
    quotient of each byte); then s <- clip(s * a + b, 0, 1) (product rounded, then the sum) when
    ``saturate`` (:func:`corruptions.digital.saturate`), else v <- clip(v + c, 0, 1)
    (:func:`corruptions.weather.brightness`); hsv2rgb; floor_u8. In planar blocks of :data:`_HSV_BLOCK`
    pixels. One entry point for both: one compilation."""
    buf = np.empty((6, _HSV_BLOCK))
    for start in range(0, x.shape[0], _HSV_BLOCK):
        m = min(_HSV_BLOCK, x.shape[0] - start)
        r, g, bl, h, s, v = buf[0, :m], buf[1, :m], buf[2, :m], buf[3, :m], buf[4, :m], buf[5, :m]
        for j in range(m):
            r[j], g[j], bl[j] = unit[x[start + j, 0]], unit[x[start + j, 1]], unit[x[start + j, 2]]
        _rgb2hsv_rows(r, g, bl, h, s, v)
        if saturate:
            for j in range(m):
                s[j] = min(max(s[j] * a + b, 0.0), 1.0)
        else:
            for j in range(m):
                v[j] = min(max(v[j] + c, 0.0), 1.0)
        _hsv2rgb_rows(h, s, v, r, g, bl)
        for j in range(m):  # the float -> uint8 conversion truncates: floor on [0, 255]
            out[start + j, 0], out[start + j, 1] = np.uint8(r[j]), np.uint8(g[j])
            out[start + j, 2] = np.uint8(bl[j])


def _pixels(x):
    """(N, H, W, 3) uint8 CPU tensor -> contiguous (P, 3) NumPy view and an empty output of that shape."""
    arr = x.contiguous().numpy().reshape(-1, 3)
    return arr, np.empty_like(arr)


def brightness_cpu(x, c: float):
    """brightness (:func:`hsv_adjust_kernel`) of an (N, H, W, 3) uint8 CPU tensor; a tensor of that shape."""
    arr, out = _pixels(x)
    hsv_adjust_kernel(arr, _UNIT64, float(c), 0.0, 0.0, False, out)
    return torch.from_numpy(out).view(x.shape)


def saturate_cpu(x, a: float, b: float):
    """saturate (:func:`hsv_adjust_kernel`) of an (N, H, W, 3) uint8 CPU tensor; a tensor of that shape."""
    arr, out = _pixels(x)
    hsv_adjust_kernel(arr, _UNIT64, 0.0, float(a), float(b), True, out)
    return torch.from_numpy(out).view(x.shape)


# ----------------------------------------------------------------------------------------------
# noise: per-element output level from one uniform


_HALF_BITS = 46  # q = 256 u in units of 2**-46: exact for every draw (below)
_HALF_MASK = (1 << _HALF_BITS) - 1


_BLOCK = 2048  # elements per inner block of the noise kernels (their draws stay in L1)


@kernel
def _scaled_draw(m):
    """256 * u in units of 2**-46 (an exact integer) for the uniform u = fl(m + 0.5) * 2**-53 of the 53-bit m, as
    :func:`corruptions.rng.uniform_from_keys` rounds it: m + 0.5 is exact below 2**52 (2m + 1 units); from 2**52
    on it rounds half to even, to m + (m & 1) (2 (m + (m & 1)) units)."""
    low = m < np.uint64(1 << 52)
    return np.uint64(2) * m + (np.uint64(1) if low else np.uint64(2) * (m & np.uint64(1)))


@kernel
def _alias_draws(key, offset, start: int, s: np.ndarray) -> None:
    """s[t] = :func:`_scaled_draw` of word start + t of the stream (a vectorisable pass)."""
    s11 = np.uint64(11)
    for t in range(s.shape[0]):
        s[t] = _scaled_draw(keyed_word(key, offset, start + t) >> s11)


@kernel
def alias_keyed_kernel(x: np.ndarray, keys: np.ndarray, offset, thr: np.ndarray, pick: np.ndarray,
                       out: np.ndarray) -> None:
    """Walker alias draw per element, as ``_LevelSampler.sample_torch`` in :mod:`corruptions.noise`, with the
    element's keyed draw made inline (no array of uniforms). Element j of image i draws m = the top 53 bits of
    ``keyed_word(keys[i], offset, j)``; q = 256 u = s * 2**-46 exactly (s = :func:`_scaled_draw`), so the column
    is k = min(s >> 46, 255) and the fraction f = q - k = F * 2**-46 with F = s - k * 2**46. Cell c = 256 * byte + k;
    level k if f < prob[c], else alias[c]: ``thr[c]`` (:func:`alias_thresholds`) makes it the integer test
    F < thr[c]. ``pick`` holds (k, alias[c]) at (2c, 2c + 1). x, out: (N, P) uint8; blocks of ``_BLOCK`` draws."""
    s46 = np.uint64(_HALF_BITS)
    buf = np.empty(_BLOCK, np.uint64)
    for i in range(x.shape[0]):
        key = keys[i]
        for b0 in range(0, x.shape[1], _BLOCK):
            nb = min(_BLOCK, x.shape[1] - b0)
            s = buf[:nb]
            _alias_draws(key, offset, b0, s)
            xi, oi = x[i, b0 : b0 + nb], out[i, b0 : b0 + nb]
            for j in range(nb):
                k = min(np.int64(s[j] >> s46), 255)
                cell = np.int64(xi[j]) * 256 + k
                oi[j] = pick[2 * cell + np.int64(np.int64(s[j]) - (k << _HALF_BITS) >= thr[cell])]


def alias_thresholds(prob: np.ndarray) -> np.ndarray:
    """Integer thresholds of the alias test: for an integer F, F * 2**-46 < p exactly when F < ceil(p * 2**46)
    (p * 2**46 is exact: a power of two)."""
    p = np.asarray(prob, np.float64)
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError("alias probabilities must lie in [0, 1]")
    return np.ceil(np.ldexp(p, _HALF_BITS)).astype(np.int64)


@kernel
def impulse_keyed_kernel(x: np.ndarray, keys: np.ndarray, offset, salt_below: int, pepper_below: int,
                         out: np.ndarray) -> None:
    """impulse_noise per element, as :func:`corruptions.noise.impulse_noise`, with the keyed draw made inline:
    with m = the top 53 bits of the element's word, 255 if u(m) < c/2, else 0 if u(m) < c, else the input byte;
    u is non-decreasing in m, so ``salt_below`` / ``pepper_below`` (:func:`uniform_threshold`) make those tests
    the integer ones m < threshold. x, out: (N, P) uint8."""
    s11 = np.uint64(11)
    for i in range(x.shape[0]):
        key = keys[i]
        xi, oi = x[i], out[i]
        for j in range(x.shape[1]):
            m = np.int64(keyed_word(key, offset, j) >> s11)
            oi[j] = 255 if m < salt_below else (0 if m < pepper_below else xi[j])


def uniform_threshold(t: float) -> int:
    """The smallest 53-bit m whose uniform u(m) = fl(m + 0.5) * 2**-53 (float64, as
    :func:`corruptions.rng.uniform_from_keys` computes it) is >= t (2**53 if none): u(m) < t exactly when m is
    below it. Bisection on the float64 formula itself (u is non-decreasing in m)."""
    lo, hi = 0, 1 << 53
    while lo < hi:
        mid = (lo + hi) // 2
        if (float(mid) + 0.5) * 2.0**-53 >= t:
            hi = mid
        else:
            lo = mid + 1
    return lo


def alias_sample_cpu(x: torch.Tensor, keyed, stream: int, thr: np.ndarray, pick: np.ndarray) -> torch.Tensor:
    """:func:`alias_keyed_kernel` on a uint8 (N, ...) CPU tensor, draws from the KeyedRandom ``keyed``'s stream."""
    n = x.shape[0]
    out = torch.empty(x.shape, dtype=torch.uint8)
    alias_keyed_kernel(x.contiguous().view(n, -1).numpy(), keyed.keys_u64(), stream_offset(stream), thr, pick,
                       out.view(n, -1).numpy())
    return out


def impulse_cpu(x: torch.Tensor, keyed, stream: int, c: float) -> torch.Tensor:
    """:func:`impulse_keyed_kernel` on a uint8 (N, ...) CPU tensor, draws from the KeyedRandom ``keyed``."""
    n = x.shape[0]
    out = torch.empty(x.shape, dtype=torch.uint8)
    impulse_keyed_kernel(x.contiguous().view(n, -1).numpy(), keyed.keys_u64(), stream_offset(stream),
                         uniform_threshold(c / 2), uniform_threshold(c), out.view(n, -1).numpy())
    return out


def alias_pick_table(alias: np.ndarray) -> np.ndarray:
    """The ``pick`` table of :func:`alias_keyed_kernel` for flat (256 * 256) alias indices: (k, alias)."""
    pick = np.empty(2 * alias.size, dtype=np.uint8)
    pick[0::2] = np.arange(alias.size) % 256
    pick[1::2] = alias
    return pick


# ----------------------------------------------------------------------------------------------
# contrast


@kernel
def _channel_sums(x: np.ndarray, i: int, unit: np.ndarray, total: np.ndarray) -> None:
    """Left-to-right float64 sums over the pixels of image i, per channel, of unit[x] (= x / 255.),
    starting from pixel 0: NumPy's ``np.sum(axis=(0, 1))`` order for (H, W, C) arrays. Three channels
    accumulate in scalars (three independent chains in registers), others in ``total``."""
    if x.shape[2] == 3:
        a0, a1, a2 = unit[x[i, 0, 0]], unit[x[i, 0, 1]], unit[x[i, 0, 2]]
        for k in range(1, x.shape[1]):
            a0, a1, a2 = a0 + unit[x[i, k, 0]], a1 + unit[x[i, k, 1]], a2 + unit[x[i, k, 2]]
        total[0], total[1], total[2] = a0, a1, a2
        return
    for ch in range(x.shape[2]):
        total[ch] = unit[x[i, 0, ch]]
    for k in range(1, x.shape[1]):
        for ch in range(x.shape[2]):
            total[ch] = total[ch] + unit[x[i, k, ch]]


@kernel
def contrast_kernel(x: np.ndarray, c: float, unit: np.ndarray, out: np.ndarray) -> None:
    """contrast of (N, P, C) uint8 images (P = H*W pixels), as :func:`corruptions.digital.contrast`:
    xf = x / 255. (``unit``); per image and channel mean = (left-to-right sum over the P pixels) / P, as
    ``np.mean(axis=(0, 1))``; then floor_u8((xf - mean) * c + mean), rounded in that order. That value
    depends only on the byte, so it is tabulated per (image, channel) for the 256 bytes and looked up, all
    channels in one pass over the pixels."""
    n, p, nc = x.shape
    total = np.empty(nc)
    tab = np.empty((nc, 256), np.uint8)
    for i in range(n):
        _channel_sums(x, i, unit, total)
        for ch in range(nc):
            mean = total[ch] / float(p)
            for v in range(256):
                tab[ch, v] = _floor_u8((unit[v] - mean) * c + mean)
        xi, oi = x[i], out[i]
        if nc == 3:
            t0, t1, t2 = tab[0], tab[1], tab[2]
            for k in range(p):
                oi[k, 0], oi[k, 1], oi[k, 2] = t0[xi[k, 0]], t1[xi[k, 1]], t2[xi[k, 2]]
        else:
            for k in range(p):
                for ch in range(nc):
                    oi[k, ch] = tab[ch, xi[k, ch]]


def contrast_cpu(x: torch.Tensor, c: float) -> torch.Tensor:
    """:func:`contrast_kernel` on an (N, H, W, C) uint8 CPU tensor; returns a tensor of the same shape."""
    n, h, w, nc = x.shape
    arr = x.contiguous().numpy().reshape(n, h * w, nc)
    out = np.empty_like(arr)
    contrast_kernel(arr, float(c), _UNIT64, out)
    return torch.from_numpy(out).view(x.shape)


# ----------------------------------------------------------------------------------------------
# pixelate: Pillow's 8-bit BOX resampling


@kernel
def _clip8(acc: int) -> int:
    """Pillow's ``clip8`` of a fixed-point sum: (acc + 2**21) >> 22 (arithmetic shift), clamped to 0..255."""
    v = (acc + (1 << 21)) >> 22
    return min(max(v, 0), 255)


@kernel
def _box_pass(src: np.ndarray, taps: np.ndarray, dst: np.ndarray, axis: int, acc: np.ndarray) -> None:
    """One Pillow resampling pass along ``axis`` (0: rows, 1: columns) of (H, W, B) uint8 images, batch
    innermost: dst[..o..] = clip8(sum_t src[..index[o, t]..] * coeff[o, t]) over the non-zero taps of output
    o (``taps``: the table of :func:`compact_taps`), for each of the B contiguous values. An integer sum
    (below 2**31, as Pillow's int32), exact in any order; zero taps add nothing."""
    ksize, b = (taps.shape[1] - 1) // 2, src.shape[2]
    for o in range(dst.shape[axis]):
        for other in range(dst.shape[1 - axis]):
            for k in range(b):
                acc[k] = 0
            for t in range(taps[o, 0]):
                i, cf = taps[o, 1 + t], np.int32(taps[o, 1 + ksize + t])
                line = src[i, other] if axis == 0 else src[other, i]
                for k in range(b):
                    acc[k] += np.int32(line[k]) * cf
            out = dst[o, other] if axis == 0 else dst[other, o]
            for k in range(b):
                out[k] = _clip8(acc[k])


@kernel
def _move_pixels(img: np.ndarray, hwb: np.ndarray, back: bool) -> None:
    """Copy between img (N, H, W, C) and the batch-innermost hwb (H, W, N*C) (the layout of
    :func:`corruptions._ops.to_hwb`): img -> hwb, or hwb -> img when ``back``. The three-channel case is
    written out (a loop over channels costs more than the copy)."""
    n, h, w, c = img.shape
    for i in range(n):
        for y in range(h):
            for xx in range(w):
                if c == 3 and back:
                    img[i, y, xx, 0], img[i, y, xx, 1] = hwb[y, xx, 3 * i], hwb[y, xx, 3 * i + 1]
                    img[i, y, xx, 2] = hwb[y, xx, 3 * i + 2]
                elif c == 3:
                    hwb[y, xx, 3 * i], hwb[y, xx, 3 * i + 1] = img[i, y, xx, 0], img[i, y, xx, 1]
                    hwb[y, xx, 3 * i + 2] = img[i, y, xx, 2]
                else:
                    for ch in range(c):
                        if back:
                            img[i, y, xx, ch] = hwb[y, xx, i * c + ch]
                        else:
                            hwb[y, xx, i * c + ch] = img[i, y, xx, ch]


@kernel
def _box_passes(x: np.ndarray, bufs: tuple, tables: tuple, out: np.ndarray) -> None:
    """x (N, H, W, C) -> the batch-innermost bufs[0]; pass p reads bufs[p], writes bufs[p + 1] with
    tables[p], along columns for even p (horizontal) and rows for odd p (vertical); the last buffer -> out.
    A pass that keeps the size uses :func:`identity_taps` (an exact copy, where Pillow skips the pass)."""
    _move_pixels(x, bufs[0], False)
    acc = np.empty(bufs[0].shape[2], np.int32)
    for p in range(len(tables)):
        _box_pass(bufs[p], tables[p], bufs[p + 1], 1 - p % 2, acc)
    _move_pixels(out, bufs[len(tables)], True)


@kernel
def box_resize_kernel(x: np.ndarray, horizontal: np.ndarray, vertical: np.ndarray, out: np.ndarray) -> None:
    """``Image.resize((OW, OH), Image.BOX)`` of (N, H, W, C) uint8 images into out (N, OH, OW, C), as
    :func:`corruptions.digital.pil_resize_box` (same integer sums): the horizontal pass, then the vertical
    one, in the batch-innermost layout (H, W, N*C) so that every pass runs along contiguous values.
    ``horizontal`` / ``vertical``: :func:`compact_taps` tables (one row per output column / row)."""
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    b = n * c
    bufs = (np.empty((h, w, b), np.uint8), np.empty((h, ow, b), np.uint8), np.empty((oh, ow, b), np.uint8))
    _box_passes(x, bufs, (horizontal, vertical), out)


@kernel
def pixelate_kernel(x: np.ndarray, down_w: np.ndarray, down_h: np.ndarray, up_w: np.ndarray, up_h: np.ndarray,
                    out: np.ndarray) -> None:
    """:func:`box_resize_kernel` to the small size (tables ``down_w``, ``down_h``: as many rows as output
    columns / rows), then back to (H, W) with ``up_w``, ``up_h`` (:func:`corruptions.digital.pixelate`),
    with one layout change each way."""
    n, h, w, c = x.shape
    sh, sw, b = down_h.shape[0], down_w.shape[0], n * c
    bufs = (np.empty((h, w, b), np.uint8), np.empty((h, sw, b), np.uint8), np.empty((sh, sw, b), np.uint8),
            np.empty((sh, w, b), np.uint8), np.empty((h, w, b), np.uint8))
    _box_passes(x, bufs, (down_w, down_h, up_w, up_h), out)


def identity_taps(size: int) -> np.ndarray:
    """The :func:`compact_taps` table of a pass that keeps its size: output o = input o (clip8 of v * 2**22
    is v for every byte), the pass Pillow (and :func:`corruptions.digital.pil_resize_box`) skips."""
    return np.stack([np.ones(size, np.int64), np.arange(size), np.full(size, 1 << 22)], axis=1)


def compact_taps(index: np.ndarray, coeff: np.ndarray) -> np.ndarray:
    """One int64 table (out_size, 1 + 2 * ksize) of Pillow's (index, coeff) arrays: per output the count of
    non-zero taps, then the tap indices and then the coefficients, the non-zero taps first (in order)."""
    keep = coeff != 0
    order = np.argsort(~keep, axis=1, kind="stable")
    parts = [keep.sum(axis=1, keepdims=True), np.take_along_axis(index, order, 1),
             np.take_along_axis(coeff, order, 1)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1).astype(np.int64))
