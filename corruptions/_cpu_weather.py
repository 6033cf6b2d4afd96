"""Compiled CPU kernels of the geometric and weather corruptions (elastic_transform, snow, spatter, fog,
frost).

Each kernel reproduces, element by element, the IEEE operations of the torch implementation it replaces
on the CPU (the torch code stays the CUDA path, and the tests compare both bit for bit): the same dtype
for every intermediate, the same operands, and sums in the same order. Transcendentals (exp, ndtri, ...)
stay outside the kernels, in NumPy/torch; the kernels do the cheap arithmetic, gathers, interpolation and
blends. All kernels are single-threaded and release the GIL (see :mod:`corruptions._jit`).
"""
from __future__ import annotations

import numpy as np

from ._jit import kernel
from .rng import uniform_row

# ----------------------------------------------------------------------------------------------
# shared pieces

UNIT32 = np.arange(256, dtype=np.float32) / np.float32(255.0)  # ``u8_to_unit32`` of every byte
UNIT64 = np.arange(256, dtype=np.float64) / 255.0  # ``u8_to_unit64`` of every byte


@kernel
def _mirror101(i: int, n: int) -> int:
    """``_mirror_idx`` of digital.py: whole-sample symmetric index (OpenCV BORDER_REFLECT_101)."""
    if 0 <= i < n:
        return i
    if n == 1:
        return 0
    p = 2 * n - 2
    i = i % p  # Python (floor) modulo, as torch.remainder
    return p - i if i >= n else i


@kernel
def _floor_u8_32(v) -> int:
    """``floor_u8`` of one float32 value: clamp to [0, 1], times 255 in float32, truncate."""
    if v < np.float32(0.0):
        v = np.float32(0.0)
    elif v > np.float32(1.0):
        v = np.float32(1.0)
    return int(v * np.float32(255.0))


@kernel
def _floor_u8_64(v) -> int:
    """``floor_u8`` of one float64 value: clamp to [0, 1], times 255 in float64, truncate."""
    if v < 0.0:
        v = 0.0
    elif v > 1.0:
        v = 1.0
    return int(v * 255.0)


# ----------------------------------------------------------------------------------------------
# elastic_transform


@kernel
def _warp_affine_image(x, lut32, x0, y0, adelta, bdelta, xf32, out) -> None:
    """``digital.cv2_warp_affine_linear`` of one uint8 image (H, W, C) -> ``out`` (H, W, C) (float32 values;
    ``out`` may be float64, which holds them exactly).

    Pixels are ``u8_to_unit32`` (``lut32``, into the (H, W, C) float32 scratch ``xf32``); the fixed-point map X = (x0[y] + adelta[x]) >> 5 (1/32 px),
    taps mirrored (BORDER_REFLECT_101), weights wy[a] * wx[b] in float32 with wx = (1 - tx, tx),
    tx = (X & 31) * 0.03125, and the float32 sum ((t00 + t01) + t10) + t11 of p * weight."""
    h, w, c = x.shape
    one, q = np.float32(1.0), np.float32(0.03125)
    for yy in range(h):
        for xx in range(w):
            for ch in range(c):
                xf32[yy, xx, ch] = lut32[x[yy, xx, ch]]
    for yy in range(h):
        for xx in range(w):
            xf = (x0[yy] + adelta[xx]) >> 5
            yf = (y0[yy] + bdelta[xx]) >> 5
            tx = np.float32(xf & 31) * q
            ty = np.float32(yf & 31) * q
            wx0, wy0 = one - tx, one - ty
            w00, w01, w10, w11 = wy0 * wx0, wy0 * tx, ty * wx0, ty * tx
            c0, c1 = _mirror101(xf >> 5, w), _mirror101((xf >> 5) + 1, w)
            r0, r1 = _mirror101(yf >> 5, h), _mirror101((yf >> 5) + 1, h)
            for ch in range(c):
                acc = xf32[r0, c0, ch] * w00
                acc = acc + xf32[r0, c1, ch] * w01
                acc = acc + xf32[r1, c0, ch] * w10
                out[yy, xx, ch] = acc + xf32[r1, c1, ch] * w11


@kernel
def _scipy_reflect(cc: float, n: int) -> float:
    """``digital._scipy_reflect_coordinate`` of one float64 coordinate (SciPy's NI_EXTEND_REFLECT fold)."""
    if 0.0 <= cc < n and n > 1:
        return cc
    if n <= 1:
        return 0.0
    sz2 = float(2 * n)
    if not (cc >= -n and cc < sz2):  # far outside: reduce modulo 2n first
        if cc < 0:
            lo = sz2 * np.trunc(-cc / sz2) + cc if cc < -sz2 else cc
            cc = lo + sz2 if lo < -n else lo
        elif cc > n - 1:
            cc = cc - sz2 * np.trunc(cc / sz2)
    if cc < 0:
        return (1e-15 if cc > -1e-15 else -cc) - 1
    if cc >= n:
        return (sz2 - cc) - 1
    return cc


@kernel
def _map_coordinates_image(img, fx, fy, alpha, out) -> None:
    """``digital.scipy_map_coordinates_reflect`` at (y + dy, x + dx) of one float32 image (H, W, C) (given as
    float64, the exact same values), then ``floor_u8`` of the float32 result into uint8 ``out``. The displacements
    are ``digital.elastic_fields``' float32(f * alpha) of the smoothed float64 fields fx, fy (H, W).

    Per point: coordinates folded by :func:`_scipy_reflect`, taps floor(cc), floor(cc) + 1 clamped to the
    axis, weights (1 - (cc - floor), 1 - w0); float64 sum in order (0,0), (0,1), (1,0), (1,1) of
    (p * wy) * wx; 0 where a folded coordinate is <= -1; cast to float32."""
    h, w, c = img.shape
    for yy in range(h):
        for xx in range(w):
            ry = _scipy_reflect(float(yy) + np.float64(np.float32(fy[yy, xx] * alpha)), h)
            rx = _scipy_reflect(float(xx) + np.float64(np.float32(fx[yy, xx] * alpha)), w)
            sy, sx = np.floor(ry), np.floor(rx)
            wy0, wx0 = 1.0 - (ry - sy), 1.0 - (rx - sx)
            wy1, wx1 = 1.0 - wy0, 1.0 - wx0
            iy, ix = int(sy), int(sx)
            r0, r1 = min(max(iy, 0), h - 1), min(max(iy + 1, 0), h - 1)
            c0, c1 = min(max(ix, 0), w - 1), min(max(ix + 1, 0), w - 1)
            valid = ry > -1.0 and rx > -1.0
            for ch in range(c):
                acc = (img[r0, c0, ch] * wy0) * wx0
                acc = acc + (img[r0, c1, ch] * wy0) * wx1
                acc = acc + (img[r1, c0, ch] * wy1) * wx0
                acc = acc + (img[r1, c1, ch] * wy1) * wx1
                out[yy, xx, ch] = _floor_u8_32(np.float32(acc) if valid else np.float32(0.0))


@kernel
def elastic_kernel(x, lut32, x0, y0, adelta, bdelta, alpha, fx, fy, out) -> None:
    """``digital.elastic_apply`` of uint8 images (N, H, W, C) into uint8 ``out``: affine warp, then (alpha
    != 0) displacement by alpha times the smoothed float64 fields ``fx``, ``fy`` (N, H, W; unread when alpha is 0)
    and bilinear resampling."""
    n, h, w, c = x.shape
    warped, xf32 = np.empty((h, w, c), np.float64), np.empty((h, w, c), np.float32)  # both float32 values
    for i in range(n):
        _warp_affine_image(x[i], lut32, x0[i], y0[i], adelta[i], bdelta[i], xf32, warped)
        if alpha == 0.0:
            for yy in range(h):
                for xx in range(w):
                    for ch in range(c):
                        out[i, yy, xx, ch] = _floor_u8_32(np.float32(warped[yy, xx, ch]))
            continue
        _map_coordinates_image(warped, fx[i], fy[i], alpha, out[i])


# ----------------------------------------------------------------------------------------------
# snow


@kernel
def snow_layer_kernel(z, mean, std, thr, rows, wrows, cols, wcols, valid, out) -> None:
    """``weather.snow_layer_u8`` of standard normals z (N, H, W) float64 into uint8 ``out`` (N, H, W): the layer
    mean + std * z (float64), the reference ``clipped_zoom`` (geometry 0 of ``_ops.clipped_zoom_tables``:
    t = ((L00*wy0)*wx0 + (L01*wy0)*wx1) + (L10*wy1)*wx0, then + (L11*wy1)*wx1, times vy*vx where a coordinate is
    invalid), 0 below ``thr``, clamp to [0, 1], * 255, floor. Only the zoom's crop of z is read."""
    n, h, w = z.shape
    all_valid = valid[0, 0, 0] < 0.0
    for i in range(n):
        zi, oi = z[i], out[i]
        for r in range(h):
            r0, r1 = rows[0, 0, r], rows[0, 1, r]
            a0, a1 = wrows[0, 0, r], wrows[0, 1, r]
            for q in range(w):
                c0, c1 = cols[0, 0, q], cols[0, 1, q]
                u0, u1 = wcols[0, 0, q], wcols[0, 1, q]
                t = ((mean + std * zi[r0, c0]) * a0) * u0 + ((mean + std * zi[r0, c1]) * a0) * u1
                t = t + ((mean + std * zi[r1, c0]) * a1) * u0
                t = t + ((mean + std * zi[r1, c1]) * a1) * u1
                if not all_valid:
                    t = t * (valid[0, 0, r] * valid[0, 1, q])
                if t < thr:
                    t = 0.0
                oi[r, q] = np.uint8(int(min(max(t, 0.0), 1.0) * 255.0))  # >= 0: truncation is floor


@kernel
def _floor_u8_64v(v) -> np.uint8:
    """:func:`_floor_u8_64` written with min/max (the same values; the loops calling it vectorise)."""
    return np.uint8(np.int32(min(max(v, 0.0), 1.0) * 255.0))


@kernel
def _snow_blend(x, s8, gray_w, blend, out) -> None:
    """``weather.snow_apply``'s composition of one RGB image (H, W, 3): float32 ``snow_base`` (pixels
    ``u8_to_unit32``: float32(v) / 255 in float32; ``rgb2gray32`` with its float64 fused steps, gray * 1.5 + 0.5,
    blend * x + (1 - blend) * max(x, gray)), to float64, + S + rot180(S) with S = s8 / 255.0 in float64, then
    ``floor_u8``. ``gray_w``: (R, G, B) weights; ``blend``: (blend, 1 - blend), all exact float32 values.
    Straight-line per pixel (no table lookups), so the loop over a row vectorises."""
    h, w, _ = x.shape
    r2y, g2y32, b2y = gray_w[0], np.float32(gray_w[1]), gray_w[2]
    k15, k05, d255 = np.float32(1.5), np.float32(0.5), np.float32(255.0)
    b32, ib32 = np.float32(blend[0]), np.float32(blend[1])
    for y in range(h):
        xr, orow = x[y].reshape((w * 3,)), out[y].reshape((w * 3,))
        srow, sfrow = s8[y], s8[h - 1 - y]
        for xx in range(w):
            r = np.float32(xr[3 * xx]) / d255
            g = np.float32(xr[3 * xx + 1]) / d255
            b = np.float32(xr[3 * xx + 2]) / d255
            gray = np.float32(np.float64(r) * r2y + np.float64(g * g2y32))
            gray = np.float32(np.float64(b) * b2y + np.float64(gray))
            gray = gray * k15 + k05
            s, sf = np.float64(srow[xx]) / 255.0, np.float64(sfrow[w - 1 - xx]) / 255.0
            orow[3 * xx] = _floor_u8_64v((np.float64(b32 * r + ib32 * max(r, gray)) + s) + sf)
            orow[3 * xx + 1] = _floor_u8_64v((np.float64(b32 * g + ib32 * max(g, gray)) + s) + sf)
            orow[3 * xx + 2] = _floor_u8_64v((np.float64(b32 * b + ib32 * max(b, gray)) + s) + sf)


@kernel
def snow_blend_kernel(x, s8, gray_w, blend, out) -> None:
    """``weather.snow_apply``'s composition of uint8 images (N, H, W, 3) with their motion-blurred snow layers
    ``s8`` (N, H, W) into ``out`` (see :func:`_snow_blend`)."""
    for i in range(x.shape[0]):
        _snow_blend(x[i], s8[i], gray_w, blend, out[i])


# ----------------------------------------------------------------------------------------------
# spatter


@kernel
def water_blend_kernel(x, l8, dist, k, color, lut32, out) -> None:
    """Water composition of ``spatter_apply`` (float32): m = l8 * dist; m / max(m) (0 where max(m) <= 0);
    * k; then floor_u8(x + m * color) per channel. ``k`` and ``color`` (3,) are float32 values."""
    n, h, w, c = x.shape
    k32 = np.float32(k)
    for i in range(n):
        mx = np.float32(-np.inf)
        for y in range(h):
            for xx in range(w):
                mx = max(mx, np.float32(l8[i, y, xx]) * dist[i, y, xx])
        for y in range(h):
            for xx in range(w):
                m = np.float32(0.0)
                if mx > np.float32(0.0):
                    m = ((np.float32(l8[i, y, xx]) * dist[i, y, xx]) / mx) * k32
                for ch in range(c):
                    out[i, y, xx, ch] = _floor_u8_32(lut32[x[i, y, xx, ch]] + m * color[ch])


@kernel
def mud_blend_kernel(x, mm, color, lut32, out) -> None:
    """Mud composition of ``spatter_apply``: float32(color * m) + float32(x * (1 - m)) with the smoothed mask
    ``mm`` (N, H, W) float64, floor_u8 in float32. ``color`` (3,) float64 (exact float32 values)."""
    n, h, w, c = x.shape
    for i in range(n):
        for y in range(h):
            for xx in range(w):
                m = mm[i, y, xx]
                for ch in range(c):
                    xm = np.float32(np.float64(lut32[x[i, y, xx, ch]]) * (1 - m))
                    out[i, y, xx, ch] = _floor_u8_32(xm + np.float32(color[ch] * m))


# ----------------------------------------------------------------------------------------------
# fog


@kernel
def _wrap_next(i: int, k: int) -> int:
    """(i + 1) % k for 0 <= i < k, without a division."""
    return i + 1 if i + 1 < k else 0


@kernel
def _wrap_prev(i: int, k: int) -> int:
    """(i - 1) % k (Python modulo) for 0 <= i < k, without a division."""
    return i - 1 if i > 0 else k - 1


@kernel
def plasma_grids(s: int):
    """Scratch of :func:`_plasma` for side ``s``: two s x s corner grids, and squares / left / top edges."""
    half = max(s // 2, 1)
    return (np.empty((s, s)), np.empty((s, s)), np.empty((half, half)), np.empty((half, half)),
            np.empty((half, half)))


@kernel
def _plasma_squares(c, k: int, u, pos: int, wibble: float, d) -> None:
    """The square values of one diamond-square step on the k x k grid of corners ``c`` (torus-periodic):
    d[i, j] = ((c[i, j] + c[i+1, j]) + (c[i, j+1] + c[i+1, j+1])) / 4 + wibble * (-wibble + 2 wibble r) with the
    uniforms r row-major from ``u[pos:]`` (``/ 4`` as ``* 0.25``: the same correctly rounded value)."""
    amp = wibble - -wibble
    for i in range(k):
        ci, cn, di, base = c[i], c[_wrap_next(i, k)], d[i], pos + i * k
        for j in range(k - 1):
            di[j] = ((ci[j] + cn[j]) + (ci[j + 1] + cn[j + 1])) * 0.25 + wibble * (-wibble + amp * u[base + j])
        j = k - 1
        di[j] = ((ci[j] + cn[j]) + (ci[0] + cn[0])) * 0.25 + wibble * (-wibble + amp * u[base + j])


@kernel
def _plasma_edges(c, d, k: int, u, pos: int, wibble: float, left, top) -> None:
    """The two edge sets of one step: left[i, j] (between corners (i, j) and (i, j+1)) =
    ((d[i, j] + d[i-1, j]) + (c[i, j] + c[i, j+1])) / 4 + noise, uniforms from ``u[pos:]``; then top[i, j] (between
    (i, j) and (i+1, j)) = ((d[i, j] + d[i, j-1]) + (c[i, j] + c[i+1, j])) / 4 + noise, from ``u[pos + k*k:]``:
    the groupings of the torch rolls."""
    amp = wibble - -wibble
    for i in range(k):
        ci, di, dp, li, base = c[i], d[i], d[_wrap_prev(i, k)], left[i], pos + i * k
        for j in range(k - 1):
            li[j] = ((di[j] + dp[j]) + (ci[j] + ci[j + 1])) * 0.25 + wibble * (-wibble + amp * u[base + j])
        j = k - 1
        li[j] = ((di[j] + dp[j]) + (ci[j] + ci[0])) * 0.25 + wibble * (-wibble + amp * u[base + j])
    pos += k * k
    for i in range(k):
        ci, cn, di, ti, base = c[i], c[_wrap_next(i, k)], d[i], top[i], pos + i * k
        ti[0] = ((di[0] + di[k - 1]) + (ci[0] + cn[0])) * 0.25 + wibble * (-wibble + amp * u[base])
        for j in range(1, k):
            ti[j] = ((di[j] + di[j - 1]) + (ci[j] + cn[j])) * 0.25 + wibble * (-wibble + amp * u[base + j])


@kernel
def _plasma(u, decay: float, m, grids) -> None:
    """``weather.plasma_fractal`` of one image into ``m`` (S, S): steps S, S/2, ..., 2 with wibble 100 divided
    by ``decay`` after each; then m - min(m), divided by the max of that.

    Each step works on the compact k x k grid of the current corners (contiguous rows, so the loops vectorise):
    squares, then the two edge sets (the same values, in the same order, as on the strided map), then the next
    grid (2k x 2k) interleaves corners, edges and squares. ``grids``: scratch of :func:`plasma_grids`."""
    s = m.shape[0]
    c, nxt, d, left, top = grids
    c[0, 0] = 0.0
    k, wibble, pos = 1, 100.0, 0
    while s // k >= 2:
        _plasma_squares(c, k, u, pos, wibble, d)
        _plasma_edges(c, d, k, u, pos + k * k, wibble, left, top)
        pos += 3 * k * k
        for i in range(k):
            for j in range(k):
                nxt[2 * i, 2 * j], nxt[2 * i, 2 * j + 1] = c[i, j], left[i, j]
                nxt[2 * i + 1, 2 * j], nxt[2 * i + 1, 2 * j + 1] = top[i, j], d[i, j]
        c, nxt = nxt, c
        k *= 2
        wibble /= decay
    lo = c.min()
    for i in range(s):
        for j in range(s):
            m[i, j] = c[i, j] - lo
    hi = m.max()
    for i in range(s):
        for j in range(s):
            m[i, j] = m[i, j] / hi


@kernel
def _max_byte(img) -> int:
    """The largest byte of one (H, W, C) image."""
    mx = 0
    for y in range(img.shape[0]):
        for v in img[y].ravel():
            mx = max(mx, v)
    return mx


@kernel
def fog_kernel(x, keys, offset, mapsize: int, decay: float, c0: float, lut64, out) -> None:
    """``weather.fog_apply`` with ``plasma_fractal(u, mapsize, decay)`` of uint8 images into ``out``, the uniforms
    u of image i drawn here from its key (``corruptions.rng.uniform_row``: the values of ``KeyedRandom.uniform``):
    xf = x / 255., y = xf + c0 * plasma[:H, :W], floor_u8((y * max(xf)) / (max(xf) + c0)) in float64."""
    n, h, w, c = x.shape
    m = np.empty((mapsize, mapsize))
    u = np.empty(plasma_count(mapsize))
    grids = plasma_grids(mapsize)
    fogrow = np.empty(w * c)
    for i in range(n):
        uniform_row(keys[i], offset, u)
        _plasma(u, decay, m, grids)
        mv = lut64[_max_byte(x[i])]
        den = mv + c0
        for y in range(h):
            for xx in range(w):
                for ch in range(c):
                    fogrow[xx * c + ch] = c0 * m[y, xx]
            src, dst = x[i, y].ravel(), out[i, y].ravel()
            for k in range(w * c):
                dst[k] = _floor_u8_64(((lut64[src[k]] + fogrow[k]) * mv) / den)


@kernel
def plasma_count(mapsize: int) -> int:
    """Uniforms one plasma map of side ``mapsize`` uses: 3 per new value over the steps ``mapsize`` .. 2
    (``weather.plasma_uniform_count`` calls this)."""
    n, step = 0, mapsize
    while step >= 2:
        n += 3 * (mapsize // step) ** 2
        step //= 2
    return n


# ----------------------------------------------------------------------------------------------
# frost


@kernel
def frost_kernel(x, stack, idx, r0, c0, table, out) -> None:
    """``weather.frost_apply``: out = table[x * 256 + t] with t the texture byte of the crop of texture
    ``idx[i]`` at (``r0[i]`` + y, ``c0[i]`` + x); ``table`` is ``_frost_table`` (65536,) uint8. Row by row: an
    image row and its texture row are each one contiguous run of W * C bytes."""
    n, h, w, c = x.shape
    for i in range(n):
        tex = stack[idx[i]]
        for y in range(h):
            src, dst = x[i, y].ravel(), out[i, y].ravel()
            trow = tex[r0[i] + y, c0[i] : c0[i] + w].ravel()
            for k in range(w * c):
                dst[k] = table[np.int64(src[k]) * 256 + np.int64(trow[k])]
