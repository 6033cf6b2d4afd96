"""Compiled CPU loops of the blur corruptions (and of the ``_ops`` helpers they share).

Each kernel reproduces, element by element, the IEEE operations of the torch implementation it replaces
(which stays the CUDA path): the same operands, the same rounding steps and the same summation order, so
the outputs are bit-identical (``tests/corruptions_lib/test_cpu_blur.py`` compares both on CPU tensors).
Kernels take NumPy arrays (no torch), write into a caller-provided ``out`` and are single-threaded and
nogil (``corrupt`` runs one chunk per worker thread). No transcendental is evaluated here: weights and
offsets come precomputed from the Python side, as in the torch code.
"""
from __future__ import annotations

import numpy as np

from ._jit import kernel

# ----------------------------------------------------------------------------------------------
# zoom_blur

ZOOM_SUB = 16  # images per step in the batch-innermost layout (the float64 copy stays in L2)


@kernel
def _zoom_load(x, s0, nb, lut32, x32, x64):
    """Images s0 .. s0+nb of x (N, H, W, C) uint8 into the batch-innermost (H, W, nb*C) buffers:
    x32 = float32(x / 255.) (``lut32``: float64 true division, then rounded), x64 = x32 widened."""
    _, h, w, c = x.shape
    for r in range(h):
        for q in range(w):
            d32, d64 = x32[r, q], x64[r, q]
            for i in range(nb):
                px = x[s0 + i, r, q]
                for k in range(c):
                    v = lut32[px[k]]
                    d32[i * c + k] = v
                    d64[i * c + k] = np.float64(v)


@kernel
def _zoom_row(x64, nbc, g, r, rows, wrows, cols, wcols, valid, zrow):
    """Row r of SciPy's order-1 ``clipped_zoom`` (``_ops.clipped_zoom_hwb``) for geometry g into zrow (W, B),
    rounded to zrow's dtype (float32 for zoom_blur, like SciPy's float32 output; float64: exact).

    Per output (r, q): with p = x64[row, col], t = ((p00*wy0)*wx0 + (p01*wy0)*wx1) + (p10*wy1)*wx0, then
    + (p11*wy1)*wx1 (neighbours in C order), times vy*vx if the geometry has an invalid coordinate
    (``valid[g, 0, 0]`` < 0 means all valid)."""
    r0, r1 = rows[g, 0, r], rows[g, 1, r]
    a0, a1 = wrows[g, 0, r], wrows[g, 1, r]
    for q in range(zrow.shape[0]):
        c0, c1 = cols[g, 0, q], cols[g, 1, q]
        u0, u1 = wcols[g, 0, q], wcols[g, 1, q]
        p00, p01, p10, p11 = x64[r0, c0], x64[r0, c1], x64[r1, c0], x64[r1, c1]
        zq = zrow[q]
        if valid[g, 0, 0] < 0.0:
            for b in range(nbc):
                t = (p00[b] * a0) * u0 + (p01[b] * a0) * u1
                t = t + (p10[b] * a1) * u0
                zq[b] = t + (p11[b] * a1) * u1  # the store rounds to zq's dtype
        else:
            m = valid[g, 0, r] * valid[g, 1, q]
            for b in range(nbc):
                t = (p00[b] * a0) * u0 + (p01[b] * a0) * u1
                t = t + (p10[b] * a1) * u0
                zq[b] = (t + (p11[b] * a1) * u1) * m


@kernel
def clipped_zoom_kernel(xt, rows, wrows, cols, wcols, valid, out):
    """``_ops.clipped_zoom_hwb`` of float64 xt (H, W, B) into out (same shape, float64): geometry 0 of the
    tables (``_ops.clipped_zoom_tables``), row by row with :func:`_zoom_row`."""
    for r in range(out.shape[0]):
        _zoom_row(xt, out.shape[2], 0, r, rows, wrows, cols, wcols, valid, out[r])


@kernel
def _zoom_finish(x32, acc, r, nb, div, s0, tmp, out):
    """``floor_u8((x32 + acc) / div)`` in float32 for row r, written back to (N, H, W, C) at image s0."""
    one, zero, scale = np.float32(1.0), np.float32(0.0), np.float32(255.0)
    c = out.shape[3]
    for q in range(acc.shape[0]):
        xq, aq = x32[r, q], acc[q]
        for b in range(nb * c):
            y = (xq[b] + aq[b]) / div
            tmp[b] = np.uint8(np.int32(min(max(y, zero), one) * scale))
        for i in range(nb):
            px = out[s0 + i, r, q]
            for k in range(c):
                px[k] = tmp[i * c + k]


@kernel
def zoom_blur_kernel(x, lut32, seq, rows, wrows, cols, wcols, valid, div, out):
    """``blur.zoom_blur`` on (N, H, W, C) uint8 x, into out (same shape, uint8).

    seq[f] is the geometry of factor f (-1: identity, the image itself); rows/cols (G, 2, H|W) int64 and
    wrows/wcols (G, 2, H|W) float64 are ``_ops.clipped_zoom_axis`` (neighbour 0, neighbour 1), valid
    (G, 2, max(H, W)) its validity as 0/1 (-1 in [g, 0, 0]: all valid). Per row, out = float32 sum over
    the factors in order (from 0) of each zoom; a zoom repeated by consecutive factors is computed once.
    ``div`` = float32(number of factors + 1); ``lut32[v]`` = float32(v / 255.)."""
    n, h, w, c = x.shape
    sub = min(n, ZOOM_SUB)
    x32 = np.empty((h, w, sub * c), np.float32)
    x64 = np.empty((h, w, sub * c), np.float64)
    acc = np.empty((w, sub * c), np.float32)
    zrow = np.empty((w, sub * c), np.float32)
    tmp = np.empty(sub * c, np.uint8)
    for s0 in range(0, n, sub):
        nb = min(sub, n - s0)
        nbc = nb * c
        _zoom_load(x, s0, nb, lut32, x32, x64)
        for r in range(h):
            acc.fill(0.0)
            prev = -2
            for f in range(seq.shape[0]):
                g = seq[f]
                if g >= 0 and g != prev:
                    _zoom_row(x64, nbc, g, r, rows, wrows, cols, wcols, valid, zrow)
                src = x32[r] if g < 0 else zrow
                for q in range(w):
                    for b in range(nbc):
                        acc[q, b] += src[q, b]
                prev = g
            _zoom_finish(x32, acc, r, nb, div, s0, tmp, out)


# ----------------------------------------------------------------------------------------------
# ImageMagick motion blur (motion_blur; snow's layer)


@kernel
def _motion_pad(x, i, pt, pb, pl, pr, m, pad):
    """Image i of x (N, H, W, C) uint8 as 257 * p (float64, exact), edge-replicated by pt/pb rows and
    pl/pr columns, into pad (H + 2m, (W + 2m) * C) with the image's (0, 0) at [m, m * C]."""
    _, h, w, c = x.shape
    wc = w * c
    xi = x[i].reshape((h, wc))
    for rr in range(h):
        src, row = xi[rr], pad[m + rr]
        inner = row[m * c : m * c + wc]
        for j in range(wc):
            inner[j] = np.float64(src[j]) * 257.0
        left, right = row[(m - pl) * c : m * c], row[(m + w) * c : (m + w + pr) * c]
        first, last = row[m * c : (m + 1) * c], row[(m + w - 1) * c : (m + w) * c]
        for q in range(pl):
            for k in range(c):
                left[q * c + k] = first[k]
        for q in range(pr):
            for k in range(c):
                right[q * c + k] = last[k]
    lo, hi = (m - pl) * c, (m + w + pr) * c
    top, bottom = pad[m, lo:hi], pad[m + h - 1, lo:hi]
    for rr in range(pt):
        row = pad[m - 1 - rr, lo:hi]
        for j in range(hi - lo):
            row[j] = top[j]
    for rr in range(pb):
        row = pad[m + h + rr, lo:hi]
        for j in range(hi - lo):
            row[j] = bottom[j]


@kernel
def _quantize_q16(acc, out_row):
    """q = floor(min(max(v, 0), 65535) + 0.5) (Q16 ClampToQuantum), then q // 257 (8-bit)."""
    for j in range(acc.shape[0]):
        q = np.floor(min(max(acc[j], 0.0), 65535.0) + 0.5)
        out_row[j] = np.uint8(np.int32(q) // 257)


@kernel
def motion_blur_kernel(x, k, ox, oy, out):
    """``_ops.im_motion_blur`` (torch: ``im_motion_blur_torch``) on (N, H, W, C) uint8 x into out.

    Per pixel and channel: v = p_0 * k_0, then v = v + p_i * k_i for taps i = 1 .. width-1 in order,
    p_i = 257 * x[clamp(y + oy[n, i]), clamp(x + ox[n, i])] (edge clamping); q = floor(clamp(v, 0, 65535)
    + 0.5) (Q16 ClampToQuantum); output q // 257 (8-bit). Offsets come from ``_ops.im_motion_offsets``."""
    n, h, w, c = x.shape
    width = k.shape[0]
    m = 0
    for i in range(n):
        for t in range(width):
            m = max(m, abs(ox[i, t]), abs(oy[i, t]))
    pad = np.empty((h + 2 * m, (w + 2 * m) * c), np.float64)
    acc = np.empty(w * c, np.float64)
    wc = w * c
    for i in range(n):
        pt = pb = pl = pr = 0
        for t in range(width):
            pt, pb = max(pt, -oy[i, t]), max(pb, oy[i, t])
            pl, pr = max(pl, -ox[i, t]), max(pr, ox[i, t])
        _motion_pad(x, i, pt, pb, pl, pr, m, pad)
        oi = out[i].reshape((h, wc))
        for r in range(h):
            for t in range(width):
                b0 = (m + ox[i, t]) * c
                seg = pad[m + r + oy[i, t], b0 : b0 + wc]
                kt = k[t]
                if t == 0:
                    for j in range(wc):
                        acc[j] = seg[j] * kt
                else:
                    for j in range(wc):
                        acc[j] = acc[j] + seg[j] * kt
            _quantize_q16(acc, oi[r])


# ----------------------------------------------------------------------------------------------
# SciPy gaussian_filter over (H, W): gaussian_blur, glass_blur, and ``_ops.scipy_gaussian``


@kernel
def _unit64(x, i, src):
    """Image i of uint8 x (N, H, W, C) as ``u8_to_unit64`` (p / 255., true division) into src (H, W * C)."""
    _, h, w, c = x.shape
    xi = x[i].reshape((h, w * c))
    for a in range(h):
        for j in range(w * c):
            src[a, j] = xi[a, j] / 255.0


@kernel
def _pair_taps4(acc, l0, h0, l1, h1, l2, h2, l3, h3, k0, k1, k2, k3, n):
    """Four taps of SciPy's symmetric sum in one sweep: acc = (((acc + (l0 + h0) * k0) + (l1 + h1) * k1)
    + (l2 + h2) * k2) + (l3 + h3) * k3 over the first n entries (the order of four single steps)."""
    for j in range(n):
        t = (acc[j] + (l0[j] + h0[j]) * k0) + (l1[j] + h1[j]) * k1
        acc[j] = (t + (l2[j] + h2[j]) * k2) + (l3[j] + h3[j]) * k3


@kernel
def _gauss_filter(src, wts, iy, ix, c, mid, res):
    """``_ops.scipy_correlate1d_sym`` along H, then along W: src (H, W * C) float64 to res (H, W * C).

    Each pass is SciPy's symmetric path: y = x[i] * w[r], then y = y + (x[i-k] + x[i+k]) * w[r+k] for
    k = r .. 1 (outermost pair first; four pairs per sweep, :func:`_pair_taps4`); x[i +- k] beyond the edge is
    read through the boundary index maps iy (H + 2r), ix (W + 2r) of ``_ops.ext_index``. The H pass writes the
    columns of mid (H, (W + 2r) * C) from r on; the W-padding columns are then copies of filtered columns (the
    H pass filters each column on its own, so this equals filtering the padded image)."""
    r = wts.shape[0] // 2
    h, wc = src.shape
    w = wc // c
    for a in range(h):
        m = mid[a, r * c : r * c + wc]  # slices: the inner loops index from 0 (no negative-index checks)
        p0, w0 = src[iy[a + r]], wts[r]
        for j in range(wc):
            m[j] = p0[j] * w0
        k, q0 = r, a + r
        while k >= 4:
            _pair_taps4(m, src[iy[q0 - k]], src[iy[q0 + k]], src[iy[q0 - k + 1]], src[iy[q0 + k - 1]],
                        src[iy[q0 - k + 2]], src[iy[q0 + k - 2]], src[iy[q0 - k + 3]], src[iy[q0 + k - 3]],
                        wts[r + k], wts[r + k - 1], wts[r + k - 2], wts[r + k - 3], wc)
            k -= 4
        for k in range(k, 0, -1):
            lo, hi, wk = src[iy[q0 - k]], src[iy[q0 + k]], wts[r + k]
            for j in range(wc):
                m[j] = m[j] + (lo[j] + hi[j]) * wk
        mp = mid[a]
        for b in range(r):
            for q in range(c):
                mp[b * c + q] = mp[(ix[b] + r) * c + q]
                mp[(w + r + b) * c + q] = mp[(ix[w + r + b] + r) * c + q]
        o, m0 = res[a], mp[r * c : r * c + wc]
        for j in range(wc):
            o[j] = m0[j] * w0
        k = r
        while k >= 4:
            s0, t0 = (r - k) * c, (r + k) * c
            _pair_taps4(o, mp[s0:], mp[t0:], mp[s0 + c:], mp[t0 - c:], mp[s0 + 2 * c:], mp[t0 - 2 * c:],
                        mp[s0 + 3 * c:], mp[t0 - 3 * c:], wts[r + k], wts[r + k - 1], wts[r + k - 2], wts[r + k - 3],
                        wc)
            k -= 4
        for k in range(k, 0, -1):
            lo, hi, wk = mp[(r - k) * c : (r - k) * c + wc], mp[(r + k) * c : (r + k) * c + wc], wts[r + k]
            for j in range(wc):
                o[j] = o[j] + (lo[j] + hi[j]) * wk


@kernel
def gaussian_f64_kernel(x, wts, iy, ix, out):
    """``_ops.scipy_gaussian`` over axes (1, 2) of float64 x (N, H, W, C) into out (same shape)."""
    n, h, w, c = x.shape
    mid = np.empty((h, ix.shape[0] * c), np.float64)
    for i in range(n):
        _gauss_filter(x[i].reshape((h, w * c)), wts, iy, ix, c, mid, out[i].reshape((h, w * c)))


@kernel
def _fold_dot(t, v, nj, m, acc):
    """acc[k] = t[0] * v[0, k] + t[1] * v[1, k] + ... + t[nj-1] * v[nj-1, k], summed left to right (k < m).
    Four rows per sweep (((acc + a0 v0) + a1 v1) + a2 v2) + a3 v3: the same order, a quarter of the stores."""
    v0 = v[0]
    for k in range(m):
        acc[k] = t[0] * v0[k]
    j = 1
    while j + 4 <= nj:
        a0, a1, a2, a3 = t[j], t[j + 1], t[j + 2], t[j + 3]
        v0, v1, v2, v3 = v[j], v[j + 1], v[j + 2], v[j + 3]
        for k in range(m):
            acc[k] = (((acc[k] + a0 * v0[k]) + a1 * v1[k]) + a2 * v2[k]) + a3 * v3[k]
        j += 4
    while j < nj:
        a0, v0 = t[j], v[j]
        for k in range(m):
            acc[k] = acc[k] + a0 * v0[k]
        j += 1


@kernel
def _fold_pass(src, s, d, e, o, sv, dv, res):
    """One pass of ``_ops.scipy_gaussian_folded`` along axis 0 of src (L, M) float64 into res (L, M).

    With hh = L // 2: e[j] = src[j] + src[L-1-j], o[j] = src[j] - src[L-1-j] (j < hh), and e[hh] = src[hh] when L
    is odd; S[i] = s[i, 0] * e[0] + s[i, 1] * e[1] + ... and D[i] = d[i, 0] * o[0] + ... (summed left to right,
    :func:`_fold_dot`); res[i] = S[i] + D[i], res[L-1-i] = S[i] - D[i] (i < hh), res[hh] = S[hh] when L is odd."""
    ln, m = src.shape
    hh, c = ln // 2, s.shape[0]
    for j in range(hh):
        a, b, ej, oj = src[j], src[ln - 1 - j], e[j], o[j]
        for k in range(m):
            ej[k] = a[k] + b[k]
            oj[k] = a[k] - b[k]
    if c > hh:
        a, ej = src[hh], e[hh]
        for k in range(m):
            ej[k] = a[k]
    for i in range(c):
        _fold_dot(s[i], e, c, m, sv)
        if i == hh:  # the middle row of an odd axis
            r = res[i]
            for k in range(m):
                r[k] = sv[k]
            continue
        _fold_dot(d[i], o, hh, m, dv)
        r0, r1 = res[i], res[ln - 1 - i]
        for k in range(m):
            r0[k] = sv[k] + dv[k]
            r1[k] = sv[k] - dv[k]


@kernel
def gaussian_folded_kernel(x, sy, dy, sx, dx, out):
    """``_ops.scipy_gaussian_folded`` over axes (1, 2) of float64 x (N, H, W, C) into out (same shape): the
    folded pass (:func:`_fold_pass`) along H with the tables (sy, dy), then along W with (sx, dx) (on the
    transposed (W, H * C) copy; transposes are exact)."""
    n, h, w, c = x.shape
    big = max(h, w * c, h * c)
    e, o = np.empty((h // 2 + 1, big)), np.empty((h // 2 + 1, big))
    et, ot = np.empty((w // 2 + 1, h * c)), np.empty((w // 2 + 1, h * c))
    sv, dv = np.empty(big), np.empty(big)
    mid = np.empty((h, w * c))
    midt, rest = np.empty((w, h * c)), np.empty((w, h * c))
    for i in range(n):
        _fold_pass(x[i].reshape((h, w * c)), sy, dy, e, o, sv, dv, mid)
        for a in range(h):
            for b in range(w):
                for q in range(c):
                    midt[b, a * c + q] = mid[a, b * c + q]
        _fold_pass(midt, sx, dx, et, ot, sv, dv, rest)
        oi = out[i]
        for a in range(h):
            for b in range(w):
                for q in range(c):
                    oi[a, b, q] = rest[b, a * c + q]


@kernel
def _floor_u8(res, out):
    """``floor_u8``: min(max(y, 0), 1) * 255, truncated to uint8; res and out (H, W * C)."""
    for a in range(res.shape[0]):
        for j in range(res.shape[1]):
            out[a, j] = np.uint8(np.int32(min(max(res[a, j], 0.0), 1.0) * 255.0))


@kernel
def gaussian_blur_kernel(x, wts, iy, ix, out):
    """``blur.gaussian_blur`` on uint8 x (N, H, W, C): p / 255., the SciPy filter, ``floor_u8``."""
    n, h, w, c = x.shape
    src = np.empty((h, w * c), np.float64)
    mid = np.empty((h, ix.shape[0] * c), np.float64)
    res = np.empty((h, w * c), np.float64)
    for i in range(n):
        _unit64(x, i, src)
        _gauss_filter(src, wts, iy, ix, c, mid, res)
        _floor_u8(res, out[i].reshape((h, w * c)))


@kernel
def _glass_shuffle(img, choices, i, d):
    """``blur.glass_shuffle`` of image i in place, img (H, W, C) uint8: per pass it, for h = H-d .. d+1 and
    w = W-d .. d+1 in that order, pixel (h, w) takes the current pixel (h + dy, w + dx) with
    (dx, dy) = ``blur.glass_offsets(choices[i, it, h-d-1, w-d-1], d)``: the reference's loop literally."""
    h_, w_, c = img.shape
    k = 2 * d
    for it in range(choices.shape[1]):
        for h in range(h_ - d, d, -1):
            cr = choices[i, it, h - d - 1]
            for w in range(w_ - d, d, -1):
                ch = cr[w - d - 1]
                src = img[h + (d - 1) - ch // k, w + (d - 1) - ch % k]
                dst = img[h, w]
                for q in range(c):
                    dst[q] = src[q]


@kernel
def glass_shuffle_kernel(img, choices, d):
    """:func:`_glass_shuffle` of every image of img (N, H, W, C) uint8, in place."""
    for i in range(img.shape[0]):
        _glass_shuffle(img[i], choices, i, d)


@kernel
def glass_blur_kernel(x, wts, iy, ix, choices, d, out):
    """``blur.glass_blur_apply`` on uint8 x (N, H, W, C): y = the SciPy filter of p / 255.; the uint8
    min(max(floor(y * 255), 0), 255); :func:`_glass_shuffle` with choices (N, iterations, H-2d, W-2d) int64 and
    max_delta d; the filter of that / 255.; ``floor_u8``."""
    n, h, w, c = x.shape
    src = np.empty((h, w * c), np.float64)
    mid = np.empty((h, ix.shape[0] * c), np.float64)
    res = np.empty((h, w * c), np.float64)
    img = np.empty((1, h, w, c), np.uint8)
    img2 = img[0].reshape((h, w * c))
    for i in range(n):
        _unit64(x, i, src)
        _gauss_filter(src, wts, iy, ix, c, mid, res)
        for a in range(h):
            for j in range(w * c):
                img2[a, j] = np.uint8(np.int32(min(max(np.floor(res[a, j] * 255.0), 0.0), 255.0)))
        _glass_shuffle(img[0], choices, i, d)
        _unit64(img, 0, src)
        _gauss_filter(src, wts, iy, ix, c, mid, res)
        _floor_u8(res, out[i].reshape((h, w * c)))


# ----------------------------------------------------------------------------------------------
# defocus_blur


@kernel
def _pad_rows(src, iy, ix, c, pad):
    """pad[b, q * C + k] = src[iy[b], ix[q] * C + k] for src (H, W * C) and the boundary index maps iy, ix
    of ``_ops.ext_index`` (lo = hi = r): interior columns as one contiguous copy per row."""
    r = (ix.shape[0] - src.shape[1] // c) // 2
    wc = src.shape[1]
    for b in range(iy.shape[0]):
        s, p = src[iy[b]], pad[b]
        inner = p[r * c : r * c + wc]
        for j in range(wc):
            inner[j] = s[j]
        for q in range(r):
            q2 = ix.shape[0] - 1 - q
            for k in range(c):
                p[q * c + k] = s[ix[q] * c + k]
                p[q2 * c + k] = s[ix[q2] * c + k]


@kernel
def defocus_direct_kernel(x, dys, dxs, vs, iy, ix, out):
    """``blur.defocus_blur`` of a kernel with few taps (``blur.defocus_direct``), on uint8 x (N, H, W, C):
    p / 255., mirror-padded by r (iy, ix); per pixel y = win_0 * v_0, then y = y + win_t * v_t over the non-zero
    taps t (dy, dx, v) in ``np.nonzero`` order, win_t = the pixel at (h + dy_t, w + dx_t); ``floor_u8``."""
    n, h, w, c = x.shape
    wc = w * c
    r = (iy.shape[0] - h) // 2
    src = np.empty((h, wc), np.float64)
    pad = np.empty((iy.shape[0], ix.shape[0] * c), np.float64)
    res = np.empty((h, wc), np.float64)
    for i in range(n):
        _unit64(x, i, src)
        _pad_rows(src, iy, ix, c, pad)
        for a in range(h):
            acc = res[a]
            for t in range(vs.shape[0]):
                off = (r + dxs[t]) * c
                seg = pad[a + r + dys[t], off : off + wc]
                v = vs[t]
                if t == 0:
                    for j in range(wc):
                        acc[j] = seg[j] * v
                else:
                    for j in range(wc):
                        acc[j] = acc[j] + seg[j] * v
        _floor_u8(res, out[i].reshape((h, wc)))


@kernel
def _defocus_prefix(x, i, iy, ix, ch, cv):
    """Running sums of image i of x (N, H, W, C) uint8, mirror-padded through iy, ix (``_ops.ext_index``), as
    float32 (integers below 2**24: exact): ch[a, b * C + k] = sum of padded row a before column b (ch (Hp,
    (Wp + 1) * C)); cv[a, j] = sum of padded column j above row a (cv (Hp + 1, Wp * C); skipped when empty)."""
    _, _, w, c = x.shape
    wp = ix.shape[0]
    for a in range(iy.shape[0]):
        src, row = x[i, iy[a]].reshape(w * c), ch[a]
        if c == 3:  # the running sums in registers (RGB: the usual case)
            s0 = s1 = s2 = np.float32(0.0)
            row[0] = row[1] = row[2] = s0
            for b in range(wp):
                o = ix[b] * 3
                s0 += np.float32(src[o])
                s1 += np.float32(src[o + 1])
                s2 += np.float32(src[o + 2])
                row[3 * b + 3], row[3 * b + 4], row[3 * b + 5] = s0, s1, s2
        else:
            for k in range(c):
                t = np.float32(0.0)
                row[k] = t
                for b in range(wp):
                    t += np.float32(src[ix[b] * c + k])
                    row[(b + 1) * c + k] = t
    if cv.shape[0] > 0:
        first = cv[0]
        for j in range(wp * c):
            first[j] = 0.0
        for a in range(iy.shape[0]):  # bounded slices: the loops vectorise
            prev, nxt, lo, hi = cv[a], cv[a + 1], ch[a, : wp * c], ch[a, c : c + wp * c]
            for j in range(wp * c):
                nxt[j] = prev[j] + (hi[j] - lo[j])


@kernel
def _defocus_disk_sums(ch, rows, pad, s, c, q):
    """q[t, j] = the disk's sum (rows (dy, x0, x1): its horizontal runs) at pixel (t - s, j // C - s) from the
    row running sums ch: q (H + 2s, (W + 2s) * C), float32, exact."""
    wq = q.shape[1]
    for t in range(q.shape[0]):
        acc = q[t]
        for j in range(wq):
            acc[j] = 0.0
        for e in range(rows.shape[0]):
            src = ch[t - s + pad + rows[e, 0]]
            o1, o0 = (pad - s + rows[e, 2] + 1) * c, (pad - s + rows[e, 1]) * c
            hi, lo = src[o1 : o1 + wq], src[o0 : o0 + wq]
            for j in range(wq):
                acc[j] += hi[j] - lo[j]


@kernel
def _defocus_line_sums(ch, cv, pad, s, c, xruns, xk, yruns, yk, lx, ly):
    """The line sums X_b into lx (H + 2s, s, W * C) at pixel (t - s, j // C): xk * vertical runs (b, dx, y0, y1)
    of cv; Y_b into ly (H, s, (W + 2s) * C) at pixel (t, j // C - s): yk * horizontal runs (b, dy, x0, x1) of
    ch. float32, exact."""
    for t in range(lx.shape[0] if xruns.shape[0] > 0 else 0):
        for b in range(lx.shape[1]):
            for j in range(lx.shape[2]):
                lx[t, b, j] = 0.0
        for e in range(xruns.shape[0]):
            a, k, o = lx[t, xruns[e, 0] - 1], xk[e], (pad + xruns[e, 1]) * c
            hi = cv[t - s + pad + xruns[e, 3] + 1, o : o + a.shape[0]]
            lo = cv[t - s + pad + xruns[e, 2], o : o + a.shape[0]]
            for j in range(lx.shape[2]):
                a[j] += k * (hi[j] - lo[j])
    for t in range(ly.shape[0] if yruns.shape[0] > 0 else 0):
        for b in range(ly.shape[1]):
            for j in range(ly.shape[2]):
                ly[t, b, j] = 0.0
        for e in range(yruns.shape[0]):
            a, k, src = ly[t, yruns[e, 0] - 1], yk[e], ch[t + pad + yruns[e, 1]]
            o1, o0 = (pad - s + yruns[e, 3] + 1) * c, (pad - s + yruns[e, 2]) * c
            hi, lo = src[o1 : o1 + a.shape[0]], src[o0 : o0 + a.shape[0]]
            for j in range(ly.shape[2]):
                a[j] += k * (hi[j] - lo[j])


@kernel
def _defocus_rows(x, i, r0, nb, ch, cv, q, lx, ly, pad, s, qtaps, xtaps, ytaps, hruns, hk, vruns, vk, weights,
                  centre, acc, z, out):
    """Rows r0 .. r0+nb-1 of image i (band rows r = 0 .. nb-1). Per row, the class sums I_c into acc (classes,
    W * C), float32, exact: Q at -(i, j) per qtap (class, i, j), X_b at row -i per xtap (class, i, b), Y_b at
    column -j per ytap (class, j, b), plus hk * a horizontal run (class, dy, x0, x1) of ch and vk * a vertical
    run (class, dx, y0, y1) of cv. Then in float64 z = I_0 * w_0, z = z + I_c * w_c (c = 1, 2, ...),
    y = (z + p * centre) / 255, ``floor_u8`` into out."""
    c = x.shape[3]
    wc = acc.shape[1]
    for r in range(nb):
        for cl in range(acc.shape[0]):
            for j in range(wc):
                acc[cl, j] = 0.0
        for e in range(qtaps.shape[0]):
            o = (s - qtaps[e, 2]) * c
            a, seg = acc[qtaps[e, 0]], q[r - qtaps[e, 1] + s, o : o + wc]
            for j in range(wc):
                a[j] += seg[j]
        for e in range(xtaps.shape[0]):
            a, seg = acc[xtaps[e, 0]], lx[r - xtaps[e, 1] + s, xtaps[e, 2] - 1]
            for j in range(wc):
                a[j] += seg[j]
        for e in range(ytaps.shape[0]):
            o = (s - ytaps[e, 1]) * c
            a, seg = acc[ytaps[e, 0]], ly[r, ytaps[e, 2] - 1, o : o + wc]
            for j in range(wc):
                a[j] += seg[j]
        for e in range(hruns.shape[0]):
            a, src, k = acc[hruns[e, 0]], ch[r + pad + hruns[e, 1]], hk[e]
            o1, o0 = (pad + hruns[e, 3] + 1) * c, (pad + hruns[e, 2]) * c
            hi, lo = src[o1 : o1 + wc], src[o0 : o0 + wc]
            for j in range(wc):
                a[j] += k * (hi[j] - lo[j])
        for e in range(vruns.shape[0]):
            a, k, o = acc[vruns[e, 0]], vk[e], (pad + vruns[e, 1]) * c
            hi, lo = cv[r + pad + vruns[e, 3] + 1, o : o + wc], cv[r + pad + vruns[e, 2], o : o + wc]
            for j in range(wc):
                a[j] += k * (hi[j] - lo[j])
        a0, w0 = acc[0], weights[0]
        for j in range(wc):
            z[j] = np.float64(a0[j]) * w0
        for cl in range(1, weights.shape[0]):
            a, wk = acc[cl], weights[cl]
            for j in range(wc):
                z[j] = z[j] + np.float64(a[j]) * wk
        px, o = x[i, r0 + r].reshape(wc), out[i, r0 + r].reshape(wc)
        for j in range(wc):
            y = (z[j] + np.float64(px[j]) * centre) / 255.0
            o[j] = np.uint8(np.int32(min(max(y, 0.0), 1.0) * 255.0))


DEFOCUS_BAND = 32  # output rows per step: the running sums of a band (and its margin) stay in L2


@kernel
def defocus_blur_kernel(x, iy, ix, pad, s, rows, qtaps, xruns, xk, xtaps, yruns, yk, ytaps, hruns, hk, vruns, vk,
                        weights, centre, out):
    """``blur.defocus_blur`` on uint8 x (N, H, W, C) with ``blur.defocus_plan``'s tables: per image and band of
    ``DEFOCUS_BAND`` rows, the exact float32 class sums I_c (:func:`_defocus_prefix`, :func:`_defocus_disk_sums`,
    :func:`_defocus_line_sums`, each on the band's padded rows as if they were a whole image), then
    :func:`_defocus_rows`. Integer sums: the bands change nothing."""
    n, h, w, c = x.shape
    wc = w * c
    bh = min(h, DEFOCUS_BAND)
    ch = np.empty((bh + 2 * pad, (ix.shape[0] + 1) * c), np.float32)
    cv = np.empty((bh + 2 * pad + 1 if xruns.shape[0] + vruns.shape[0] > 0 else 0, ix.shape[0] * c), np.float32)
    q = np.empty((bh + 2 * s, (w + 2 * s) * c), np.float32)
    lx = np.empty((bh + 2 * s if xruns.shape[0] > 0 else 0, s, wc), np.float32)
    ly = np.empty((bh if yruns.shape[0] > 0 else 0, s, (w + 2 * s) * c), np.float32)
    acc = np.empty((weights.shape[0], wc), np.float32)
    z = np.empty(wc, np.float64)
    for i in range(n):
        for r0 in range(0, h, bh):
            nb = min(bh, h - r0)
            cvb = cv[: nb + 2 * pad + 1]
            _defocus_prefix(x, i, iy[r0 : r0 + nb + 2 * pad], ix, ch, cvb)
            qb = q[: nb + 2 * s]
            _defocus_disk_sums(ch, rows, pad, s, c, qb)
            lxb, lyb = lx[: nb + 2 * s], ly[:nb]
            _defocus_line_sums(ch, cvb, pad, s, c, xruns, xk, yruns, yk, lxb, lyb)
            _defocus_rows(x, i, r0, nb, ch, cvb, qb, lxb, lyb, pad, s, qtaps, xtaps, ytaps, hruns, hk, vruns, vk,
                          weights, centre, acc, z, out)
