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
from ._output import output_array
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
    return arr, output_array(x.shape).reshape(-1, 3)


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
    out = torch.from_numpy(output_array(x.shape))
    alias_keyed_kernel(x.contiguous().view(n, -1).numpy(), keyed.keys_u64(), stream_offset(stream), thr, pick,
                       out.view(n, -1).numpy())
    return out


def impulse_cpu(x: torch.Tensor, keyed, stream: int, c: float) -> torch.Tensor:
    """:func:`impulse_keyed_kernel` on a uint8 (N, ...) CPU tensor, draws from the KeyedRandom ``keyed``."""
    n = x.shape[0]
    out = torch.from_numpy(output_array(x.shape))
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
    out = output_array(x.shape).reshape(arr.shape)
    contrast_kernel(arr, float(c), _UNIT64, out)
    return torch.from_numpy(out).view(x.shape)


# ----------------------------------------------------------------------------------------------
# pixelate: Pillow's 8-bit BOX resampling


@kernel
def _clip8(acc: np.int32) -> np.uint8:
    """Pillow's ``clip8`` of a fixed-point sum: (acc + 2**21) >> 22 (arithmetic shift), clamped to 0..255.
    Every step is cast back to int32 (numba widens int32 arithmetic to int64): the loops then vectorise
    over int32 lanes."""
    v = np.int32(np.int32(acc + np.int32(1 << 21)) >> np.int32(22))
    return np.uint8(min(max(v, np.int32(0)), np.int32(255)))


@kernel
def _box_rows(src: np.ndarray, taps: np.ndarray, dst: np.ndarray, acc: np.ndarray) -> None:
    """One Pillow resampling pass along axis 0 of the byte rows ``src`` (R, L): dst[o, :] = clip8(sum_t
    src[index[o, t], :] * coeff[o, t]) over the non-zero taps of output o (``taps``: a :func:`compact_taps`
    table), each row a long run of contiguous values. An integer sum in int32 (below 2**31, as Pillow's),
    exact in any order: taps with one shared coefficient (every BOX output) add the bytes first and multiply
    once; a single tap of coefficient 2**22 is a copy (clip8 of v * 2**22 is v)."""
    ksize, n_val = (taps.shape[1] - 1) // 2, src.shape[1]
    for o in range(dst.shape[0]):    # 2-d indexing, no row views: each view costs reference counting
        n, cf, ia = taps[o, 0], np.int32(taps[o, 1 + ksize]), taps[o, 1]
        ib, ic, ie = taps[o, min(2, ksize)], taps[o, min(3, ksize)], taps[o, min(4, ksize)]
        shared = True
        for t in range(1, n):
            shared = shared and taps[o, 1 + ksize + t] == cf
        if n == 1 and cf == (1 << 22):
            for k in range(n_val):
                dst[o, k] = src[ia, k]
        elif n == 1:
            for k in range(n_val):
                dst[o, k] = _clip8(np.int32(np.int32(src[ia, k]) * cf))
        elif n == 2 and shared:
            for k in range(n_val):
                dst[o, k] = _clip8(np.int32(np.int32(np.int32(src[ia, k]) + np.int32(src[ib, k])) * cf))
        elif n == 3 and shared:
            for k in range(n_val):
                sk = np.int32(np.int32(src[ia, k]) + np.int32(src[ib, k]) + np.int32(src[ic, k]))
                dst[o, k] = _clip8(np.int32(sk * cf))
        elif n == 4 and shared:
            for k in range(n_val):
                sk = np.int32(np.int32(src[ia, k]) + np.int32(src[ib, k]) + np.int32(src[ic, k]) + np.int32(src[ie, k]))
                dst[o, k] = _clip8(np.int32(sk * cf))
        else:
            for k in range(n_val):
                acc[k] = np.int32(np.int32(src[ia, k]) * cf)
            for t in range(1, n):
                it, ct = taps[o, 1 + t], np.int32(taps[o, 1 + ksize + t])
                for k in range(n_val):
                    acc[k] = np.int32(acc[k] + np.int32(np.int32(src[it, k]) * ct))
            for k in range(n_val):
                dst[o, k] = _clip8(acc[k])


@kernel
def _is_copy(taps: np.ndarray) -> bool:
    """Whether every output of a :func:`compact_taps` table is one input with coefficient 2**22 (a copy)."""
    ksize = (taps.shape[1] - 1) // 2
    for o in range(taps.shape[0]):
        if taps[o, 0] != 1 or taps[o, 1 + ksize] != (1 << 22):
            return False
    return True


@kernel
def _gather_columns(src: np.ndarray, taps: np.ndarray, dst: np.ndarray) -> None:
    """A copy pass (:func:`_is_copy`) along axis 2 of packed pixels (R, K, cols): dst[r, k, o] = src[r, k,
    index[o, 0]]."""
    for r in range(src.shape[0]):
        for k in range(src.shape[1]):    # 3-d indexing, no row views (each costs reference counting)
            for o in range(dst.shape[2]):
                dst[r, k, o] = src[r, k, np.uintp(taps[o, 1])]    # unsigned: no negative-index wraparound test


@kernel
def _transpose(src: np.ndarray, dst: np.ndarray) -> None:
    """dst (W, H) = src (H, W) transposed (packed pixels)."""
    h, w = src.shape
    for xx in range(w):
        for y in range(h):
            dst[xx, y] = src[y, xx]


@kernel
def _transpose_group(src: np.ndarray, dst: np.ndarray) -> None:
    """dst (B, K, A) = src (A, K, B) with every image k transposed."""
    for k in range(src.shape[1]):
        _transpose(src[:, k, :], dst[:, k, :])


@kernel
def _pack(imgs: np.ndarray, c0: int, dst: np.ndarray) -> None:
    """Channels c0..c0+3 of imgs (K, H, W, C) as 4-byte pixels into the bytes dst (K * H * W * 4); missing
    channels are 0. The three-channel images are one strided loop (it vectorises)."""
    kk, h, w, c = imgs.shape
    if c == 3:
        flat = imgs.reshape(kk * h * w * 3)
        for p in range(kk * h * w):
            dst[4 * p], dst[4 * p + 1], dst[4 * p + 2] = flat[3 * p], flat[3 * p + 1], flat[3 * p + 2]
            dst[4 * p + 3] = 0
        return
    for k in range(kk):
        for y in range(h):
            for xx in range(w):
                for ch in range(4):
                    dst[4 * ((k * h + y) * w + xx) + ch] = imgs[k, y, xx, c0 + ch] if c0 + ch < c else 0


@kernel
def _pack_pairs(img: np.ndarray, dst: np.ndarray) -> None:
    """The three-channel img (H, W, 3), H even, as 4-byte pixels into the bytes dst (H / 2, W, 8): rows 2j and
    2j + 1 side by side in each 8 bytes (so that a transpose moves two pixels at once)."""
    h, w, _ = img.shape
    flat, n = img.reshape(h * w * 3), 3 * w
    for j in range(h // 2):
        r0, r1 = flat[2 * j * n:2 * j * n + n], flat[2 * j * n + n:2 * j * n + 2 * n]
        t = dst[8 * w * j:8 * w * j + 8 * w]
        for p in range(w):
            t[8 * p], t[8 * p + 1], t[8 * p + 2], t[8 * p + 3] = r0[3 * p], r0[3 * p + 1], r0[3 * p + 2], 0
            t[8 * p + 4], t[8 * p + 5], t[8 * p + 6], t[8 * p + 7] = r1[3 * p], r1[3 * p + 1], r1[3 * p + 2], 0


@kernel
def _load(imgs: np.ndarray, c0: int, across: bool, tmp: np.ndarray, dst: np.ndarray) -> None:
    """Channels c0..c0+3 of imgs (K, H, W, C) packed into dst: (W, K, H) when ``across`` (each image
    transposed), else (H, K, W); ``tmp``: K * H * W uint32 of scratch. Three-channel images of even height are
    transposed two pixels (8 bytes) at a time."""
    kk, h, w, c = imgs.shape
    if across and c == 3 and h % 2 == 0:
        pairs, dst64 = tmp[:h * w], dst.reshape(w * kk * h).view(np.uint64).reshape((w, kk, h // 2))
        for k in range(kk):
            _pack_pairs(imgs[k], pairs.view(np.uint8))
            _transpose(pairs.view(np.uint64).reshape((h // 2, w)), dst64[:, k, :])
        return
    _pack(imgs, c0, tmp.view(np.uint8))
    img_major = tmp.reshape((kk, h, w))
    for k in range(kk):
        if across:
            _transpose(img_major[k], dst[:, k, :])
        else:
            dst[:, k, :] = img_major[k]


@kernel
def _unpack(src: np.ndarray, c0: int, c: int, dst: np.ndarray) -> None:
    """Channels c0..c0+3 of the C-channel pixels dst (bytes, P * C) = the 4-byte pixels src (bytes, P * 4).
    The three-channel case is one strided loop (it vectorises)."""
    if c == 3:
        for p in range(src.shape[0] // 4):
            dst[3 * p], dst[3 * p + 1], dst[3 * p + 2] = src[4 * p], src[4 * p + 1], src[4 * p + 2]
        return
    for p in range(src.shape[0] // 4):
        for ch in range(min(4, c - c0)):
            dst[p * c + c0 + ch] = src[4 * p + ch]


@kernel
def _unpack_rows(src: np.ndarray, rows: np.ndarray, c0: int, stage: np.ndarray, out: np.ndarray) -> None:
    """out[k, y, :, c0..c0+3] = the 4-byte pixels src[rows[y], k] of the packed (R, K, OW) buffer: unpacked
    once into ``stage`` (bytes, at least R * K * OW * C), then whole rows copied (up to 4 channels)."""
    kk, oh, ow, c = out.shape
    r, n = src.shape[0], ow * c
    if c > 4:
        for k in range(kk):
            for y in range(oh):
                _unpack(src[rows[y], k].view(np.uint8), c0, c, out[k, y].reshape(n))
        return
    flat, st = out.reshape(kk * oh * n), stage[:r * kk * n]    # one reshape each: every reshape is a call
    _unpack(src.reshape(r * kk * ow).view(np.uint8), c0, c, st)
    out2, st2 = flat.reshape((kk * oh, n)), st.reshape((r * kk, n))    # 2-d indexing, no row views
    for k in range(kk):
        for y in range(oh):
            o, i = k * oh + y, rows[y] * kk + k
            for j in range(n):
                out2[o, j] = st2[i, j]


@kernel
def _box_group(imgs: np.ndarray, c0: int, tables: tuple, bufs: tuple, acc: np.ndarray, out: np.ndarray) -> None:
    """The passes of :func:`_box_passes` on channels c0..c0+3 of K images (K, H, W, C) into out (K, OH, OW, C).
    Pixels travel packed in 4 bytes (bufs: two flat uint32 buffers), the K images side by side, (rows, K,
    columns): a pass along the rows combines whole rows of all K images (:func:`_box_rows`), a pass along
    the columns transposes first, or gathers when it is a copy; a final vertical copy is left to the
    unpacking, which repeats rows."""
    kk, h, w = imgs.shape[0], imgs.shape[1], imgs.shape[2]
    a, b = bufs
    across = not _is_copy(tables[0])    # start with the images' columns as rows, for the first (horizontal) pass
    rows, cols = (w, h) if across else (h, w)
    _load(imgs, c0, across, b[:kk * h * w], a[:kk * h * w].reshape((rows, kk, cols)))
    last = len(tables)
    if last % 2 == 0 and _is_copy(tables[last - 1]):
        last -= 1     # vertical copy: done while unpacking
    for p in range(last):
        taps = tables[p]
        n_out = taps.shape[0]
        if (p % 2 == 0) != across:    # the pass runs along the columns of the buffer
            if _is_copy(taps):
                _gather_columns(a[:rows * kk * cols].reshape((rows, kk, cols)), taps,
                                b[:rows * kk * n_out].reshape((rows, kk, n_out)))
                a, b, cols = b, a, n_out
                continue
            _transpose_group(a[:rows * kk * cols].reshape((rows, kk, cols)),
                             b[:rows * kk * cols].reshape((cols, kk, rows)))
            a, b, rows, cols, across = b, a, cols, rows, not across
        _box_rows(a[:rows * kk * cols].view(np.uint8).reshape((rows, 4 * kk * cols)), taps,
                  b[:n_out * kk * cols].view(np.uint8).reshape((n_out, 4 * kk * cols)), acc)
        a, b, rows = b, a, n_out
    if across:
        _transpose_group(a[:rows * kk * cols].reshape((rows, kk, cols)),
                         b[:rows * kk * cols].reshape((cols, kk, rows)))
        a, b, rows, cols = b, a, cols, rows
    row_of = tables[len(tables) - 1][:, 1] if last < len(tables) else np.arange(rows).astype(np.int32)
    _unpack_rows(a[:rows * kk * cols].reshape((rows, kk, cols)), row_of, c0, b.view(np.uint8), out)


_GROUP_VALUES = 256  # images side by side: about this many pixels per row of a pass (224 px: one image)


@kernel
def _box_passes(x: np.ndarray, tables: tuple, out: np.ndarray) -> None:
    """Resampling passes on (N, H, W, C) uint8 images into out: pass p applies tables[p] (:func:`compact_taps`)
    along columns for even p (horizontal) and rows for odd p (vertical), per group of images side by side
    (long rows also for small images) and per group of up to 4 channels (:func:`_box_group`). A pass that
    keeps the size uses :func:`identity_taps` (a copy, where Pillow skips the pass)."""
    n, h, w, c = x.shape
    big_h, big_w = h, w
    for p in range(len(tables)):
        if p % 2 == 0:
            big_w = max(big_w, tables[p].shape[0])
        else:
            big_h = max(big_h, tables[p].shape[0])
    group = max(1, min(n, _GROUP_VALUES // min(h, w)))
    bufs = (np.empty(group * big_h * big_w, np.uint32), np.empty(group * big_h * big_w, np.uint32))
    acc = np.empty(4 * group * max(big_h, big_w), np.int32)
    for i in range(0, n, group):
        for c0 in range(0, c, 4):
            _box_group(x[i:i + group], c0, tables, bufs, acc, out[i:i + group])


@kernel
def box_resize_kernel(x: np.ndarray, horizontal: np.ndarray, vertical: np.ndarray, out: np.ndarray) -> None:
    """``Image.resize((OW, OH), Image.BOX)`` of (N, H, W, C) uint8 images into out (N, OH, OW, C), as
    :func:`corruptions.digital.pil_resize_box` (same integer sums): the horizontal pass, then the vertical
    one (:func:`_box_passes`). ``horizontal`` / ``vertical``: :func:`compact_taps` tables (one row per
    output column / row)."""
    _box_passes(x, (horizontal, vertical), out)


@kernel
def pixelate_kernel(x: np.ndarray, down_w: np.ndarray, down_h: np.ndarray, up_w: np.ndarray, up_h: np.ndarray,
                    out: np.ndarray) -> None:
    """:func:`box_resize_kernel` to the small size (tables ``down_w``, ``down_h``: as many rows as output
    columns / rows), then back to (H, W) with ``up_w``, ``up_h`` (:func:`corruptions.digital.pixelate`),
    without unpacking in between."""
    _box_passes(x, (down_w, down_h, up_w, up_h), out)


def identity_taps(size: int) -> np.ndarray:
    """The :func:`compact_taps` table of a pass that keeps its size: output o = input o (clip8 of v * 2**22
    is v for every byte), the pass Pillow (and :func:`corruptions.digital.pil_resize_box`) skips."""
    ones, index = np.ones(size, np.int32), np.arange(size, dtype=np.int32)
    return np.stack([ones, index, np.full(size, 1 << 22, np.int32)], axis=1)


def compact_taps(index: np.ndarray, coeff: np.ndarray) -> np.ndarray:
    """One int32 table (out_size, 1 + 2 * ksize) of Pillow's (index, coeff) arrays: per output the count of
    non-zero taps, then the tap indices and then the coefficients, the non-zero taps first (in order). int32
    (every value fits): the kernels' int32 sums then vectorise over int32 lanes."""
    keep = coeff != 0
    order = np.argsort(~keep, axis=1, kind="stable")
    parts = [keep.sum(axis=1, keepdims=True), np.take_along_axis(index, order, 1),
             np.take_along_axis(coeff, order, 1)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1).astype(np.int32))
