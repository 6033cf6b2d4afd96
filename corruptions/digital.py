"""Digital corruptions: contrast, elastic_transform, pixelate, jpeg_compression, saturate."""
from __future__ import annotations

import io
import math
from functools import lru_cache

import numpy as np
import torch

from . import _cpu_color
from ._ops import (
    floor_u8,
    from_hwb,
    hsv2rgb,
    rgb2hsv,
    scipy_gaussian,
    take_pixels_hwc,
    to_hwb,
    true_div,
    u8_to_unit32,
    u8_to_unit64,
)
from ._output import output_array
from .rng import KeyedRandom

# ----------------------------------------------------------------------------------------------
# contrast (deterministic)


def sequential_channel_mean(xf: torch.Tensor) -> torch.Tensor:
    """``np.mean(x, axis=(0, 1), keepdims=True)`` per image of (N, H, W, C) float64, bit for bit.

    NumPy reduces these two axes with the channel axis in the inner loop, i.e. a plain left-to-right
    sum over the H*W pixels (no pairwise summation), then divides by H*W. The CPU cumulative sum is
    that same sequential scan; on other devices the scan is an explicit loop.
    """
    n, h, w, c = xf.shape
    flat = xf.reshape(n, h * w, c)
    if xf.device.type == "cpu":
        total = torch.cumsum(flat, dim=1)[:, -1]
    else:
        total = flat[:, 0].clone()
        for i in range(1, h * w):
            total = total + flat[:, i]
    return true_div(total, float(h * w)).view(n, 1, 1, c)


def contrast(x: torch.Tensor, c: float, rng=None) -> torch.Tensor:
    """(x - mean) * c + mean with the per-image, per-channel mean; clip, x255, floor. Bit-exact.

    On the CPU a compiled pass (same operations); elsewhere :func:`contrast_torch`."""
    if x.device.type == "cpu":
        return _cpu_color.contrast_cpu(x, c)
    return contrast_torch(x, c)


def contrast_torch(x: torch.Tensor, c: float) -> torch.Tensor:
    """:func:`contrast` as whole-tensor torch operations (the CUDA path)."""
    xf = u8_to_unit64(x)
    means = sequential_channel_mean(xf)
    return floor_u8((xf - means) * c + means)


# ----------------------------------------------------------------------------------------------
# saturate (deterministic)


def saturate(x: torch.Tensor, params, rng=None) -> torch.Tensor:
    """skimage rgb2hsv, S <- clip(S * a + b, 0, 1), hsv2rgb, clip, x255, floor. Bit-exact.

    On the CPU a compiled per-pixel kernel (same operations); elsewhere :func:`saturate_torch`."""
    if x.device.type == "cpu":
        return _cpu_color.saturate_cpu(x, *params)
    return saturate_torch(x, params)


def saturate_torch(x: torch.Tensor, params) -> torch.Tensor:
    """:func:`saturate` as whole-tensor torch operations (the CUDA path)."""
    a, b = params
    h, s, v = rgb2hsv(u8_to_unit64(x))
    return floor_u8(hsv2rgb(h, torch.clamp(s * a + b, 0.0, 1.0), v))


# ----------------------------------------------------------------------------------------------
# jpeg_compression (deterministic for a given libjpeg)


_CV2_DECODE_OK = None
_CV2_ENCODE_OK = None
_PROBE_QUALITIES = (80, 65, 58, 50, 40)


def _jpeg_probes() -> list:
    g = np.random.default_rng(0)
    return [g.integers(0, 256, (32, 32, 3)).astype(np.uint8),
            np.kron(g.integers(0, 256, (4, 4, 3)), np.ones((8, 8, 1))).astype(np.uint8),
            np.clip(np.arange(32)[:, None, None] * 8 + g.integers(-20, 20, (32, 32, 3)), 0, 255).astype(np.uint8)]


def _pil_jpeg_bytes(im: np.ndarray, quality: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(im, "RGB").save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def _cv2_jpeg_bytes(im: np.ndarray, quality: int):
    import cv2

    ok, enc = cv2.imencode(".jpg", np.ascontiguousarray(im[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    return enc if ok else None


def _cv2_decode_rgb(data) -> np.ndarray:
    """OpenCV's decode of a JPEG stream as RGB: straight into RGB where OpenCV has IMREAD_COLOR_RGB (>= 4.10;
    the decoder's colour conversion in the other channel order), else BGR reversed."""
    import cv2

    flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
    if flag is not None:
        return cv2.imdecode(data, flag)
    return cv2.imdecode(data, cv2.IMREAD_COLOR)[..., ::-1]


def _cv2_decodes_like_pil() -> bool:
    """Whether OpenCV's JPEG decoder (:func:`_cv2_decode_rgb`) returns PIL's pixels here (both
    libjpeg(-turbo), islow IDCT, fancy upsampling); checked once on probe images. OpenCV decodes ~6x
    faster; PIL remains the reference."""
    global _CV2_DECODE_OK
    if _CV2_DECODE_OK is None:
        try:
            from PIL import Image

            ok = True
            for im in _jpeg_probes()[:2]:
                for q in (80, 40):
                    data = _pil_jpeg_bytes(im, q)
                    ref = np.asarray(Image.open(io.BytesIO(data)))
                    got = _cv2_decode_rgb(np.frombuffer(data, np.uint8))
                    ok = ok and got is not None and np.array_equal(got, ref)
            _CV2_DECODE_OK = ok
        except Exception:  # pragma: no cover - any doubt: decode with PIL
            _CV2_DECODE_OK = False
    return _CV2_DECODE_OK


def _cv2_encodes_like_pil() -> bool:
    """Whether OpenCV's JPEG encoder writes PIL's bytes here, byte for byte, at every CIFAR quality on
    probe images (same libjpeg-turbo tables, 4:2:0, islow DCT, no optimisation); checked once. OpenCV
    encodes faster; when the streams are identical, so are the decoded pixels. Any difference: PIL."""
    global _CV2_ENCODE_OK
    if _CV2_ENCODE_OK is None:
        try:
            ok = True
            for im in _jpeg_probes():
                for q in _PROBE_QUALITIES:
                    enc = _cv2_jpeg_bytes(im, q)
                    ok = ok and enc is not None and enc.tobytes() == _pil_jpeg_bytes(im, q)
            _CV2_ENCODE_OK = ok
        except Exception:  # pragma: no cover - any doubt: encode with PIL
            _CV2_ENCODE_OK = False
    return _CV2_ENCODE_OK


def jpeg_compression(x: torch.Tensor, quality: int, rng=None) -> torch.Tensor:
    """PIL ``save(format='JPEG', quality=q)`` (4:2:0, baseline, IJG tables) and decode, per image.

    The JPEG stream is PIL's: written by PIL, or by OpenCV where OpenCV writes byte-identical streams on
    this installation (checked once). Decoding uses OpenCV when it gives PIL's pixels (checked once), else
    PIL.
    """
    arr = x.cpu().numpy()
    fast_dec = _cv2_decodes_like_pil()
    if fast_dec and _cv2_encodes_like_pil():
        out = _jpeg_cv2(arr, quality)
    else:
        out = _jpeg_pil(arr, quality, fast_dec)
    return torch.from_numpy(out).to(x.device)


def _jpeg_cv2(arr: np.ndarray, quality: int) -> np.ndarray:
    """Encode and decode every (H, W, 3) image with OpenCV: each image is swapped to BGR by ``cv2.cvtColor`` (a
    byte shuffle; NumPy's reversed-axis copy of the batch cost more than the codec), and the decoder writes RGB
    (:func:`_cv2_decode_rgb`); the same codec calls as :func:`_cv2_jpeg_bytes`."""
    import cv2

    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    out = output_array(arr.shape)
    bgr = np.empty_like(arr[0])
    for i in range(arr.shape[0]):
        cv2.cvtColor(np.ascontiguousarray(arr[i]), cv2.COLOR_RGB2BGR, dst=bgr)
        ok, enc = cv2.imencode(".jpg", bgr, params)
        if not ok:
            raise RuntimeError("OpenCV could not encode a JPEG image")
        out[i] = _cv2_decode_rgb(enc)
    return out


def _jpeg_pil(arr: np.ndarray, quality: int, cv2_decode: bool) -> np.ndarray:
    """Encode every image with PIL; decode with OpenCV when ``cv2_decode``, else with PIL."""
    from PIL import Image

    out = np.empty_like(arr)
    for i in range(arr.shape[0]):
        buf = io.BytesIO()
        Image.fromarray(arr[i], "RGB").save(buf, format="JPEG", quality=int(quality))
        if cv2_decode:
            out[i] = _cv2_decode_rgb(np.frombuffer(buf.getbuffer(), np.uint8))
        else:
            buf.seek(0)
            with Image.open(buf) as im:
                out[i] = np.asarray(im.convert("RGB"))
    return out


# ----------------------------------------------------------------------------------------------
# pixelate (deterministic): PIL BOX resize down and up, emulated in PIL's fixed point

_PRECISION_BITS = 32 - 8 - 2


@lru_cache(maxsize=None)
def pil_box_coeffs(in_size: int, out_size: int):
    """Pillow's ``precompute_coeffs`` for the BOX filter and ``normalize_coeffs_8bpc``.

    Returns (index, coeff) int64 arrays of shape (out_size, ksize): output o = clip8((1 << 21) +
    sum_t src[index[o, t]] * coeff[o, t]) with clip8(v) = v >> 22 clamped to 0..255.
    """
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = 0.5 * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    index = np.zeros((out_size, ksize), dtype=np.int64)
    coeff = np.zeros((out_size, ksize), dtype=np.int64)
    ss = 1.0 / filterscale
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        ws = []
        for t in range(xmax):
            u = (t + xmin - center + 0.5) * ss
            ws.append(1.0 if -0.5 < u <= 0.5 else 0.0)
        ww = 0.0
        for wv in ws:
            ww += wv
        for t, wv in enumerate(ws):
            k = wv / ww if ww != 0.0 else wv
            coeff[xx, t] = int(0.5 + k * (1 << _PRECISION_BITS)) if k >= 0 else int(-0.5 + k * (1 << _PRECISION_BITS))
            index[xx, t] = xmin + t
    return index, coeff


@lru_cache(maxsize=None)
def _box_taps(in_size: int, out_size: int) -> np.ndarray:
    """:func:`pil_box_coeffs` as one table with the zero taps last, for the CPU kernels; a pass that keeps the
    size (skipped by :func:`pil_resize_box`) is an exact copy."""
    if in_size == out_size:
        return _cpu_color.identity_taps(out_size)
    return _cpu_color.compact_taps(*pil_box_coeffs(in_size, out_size))


def _pil_resample_pass(x: torch.Tensor, dim: int, out_size: int) -> torch.Tensor:
    """One 8-bit Pillow resampling pass along ``dim`` of an integer tensor."""
    index, coeff = pil_box_coeffs(x.shape[dim], out_size)
    dev = x.device
    idx = torch.as_tensor(index, device=dev)
    acc = None
    for t in range(index.shape[1]):
        col = x.index_select(dim, idx[:, t])
        shape = [1] * x.dim()
        shape[dim] = out_size
        term = col * torch.as_tensor(coeff[:, t], dtype=x.dtype, device=dev).view(shape)
        acc = term if acc is None else acc + term
    acc = acc + (1 << (_PRECISION_BITS - 1))
    return torch.clamp(acc >> _PRECISION_BITS, 0, 255)


def pil_resize_box(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """``Image.resize((out_w, out_h), Image.BOX)`` of (N, H, W, C) uint8: horizontal pass, then vertical.

    Integer arithmetic in int32 (sums stay below 255 * 2**22 + 2**21 < 2**31), exact in any order. The torch
    path works in the batch-innermost layout; on the CPU one compiled kernel
    (:func:`corruptions._cpu_color.box_resize_kernel`, same integer sums) works per image on packed pixels.
    """
    if x.device.type == "cpu":
        return _pil_resize_box_cpu(x, out_h, out_w)
    return pil_resize_box_torch(x, out_h, out_w)


def _pil_resize_box_cpu(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    n, h, w, c = x.shape
    out = np.empty((n, out_h, out_w, c), dtype=np.uint8)
    _cpu_color.box_resize_kernel(x.contiguous().numpy(), _box_taps(w, out_w), _box_taps(h, out_h), out)
    return torch.from_numpy(out)


def pil_resize_box_torch(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """:func:`pil_resize_box` as whole-tensor torch operations (the CUDA path)."""
    n, _, _, c = x.shape
    y = to_hwb(x.to(torch.int32))
    if out_w != x.shape[2]:
        y = _pil_resample_pass(y, 1, out_w)
    if out_h != x.shape[1]:
        y = _pil_resample_pass(y, 0, out_h)
    return from_hwb(y.to(torch.uint8), n, c)


def pixelate(x: torch.Tensor, c: float, rng=None) -> torch.Tensor:
    """resize to (int(W*c), int(H*c)) with BOX, then back with BOX (PIL 8-bit fixed point). Bit-exact."""
    _, h, w, _ = x.shape
    sh, sw = int(h * c), int(w * c)
    if x.device.type == "cpu":  # both resizes in one compiled pass (same integer sums)
        out = output_array(x.shape)
        _cpu_color.pixelate_kernel(x.contiguous().numpy(), _box_taps(w, sw), _box_taps(h, sh), _box_taps(sw, w),
                                   _box_taps(sh, h), out)
        return torch.from_numpy(out)
    small = pil_resize_box(x, sh, sw)
    return pil_resize_box(small, h, w)


# ----------------------------------------------------------------------------------------------
# elastic_transform (random affine and displacement fields)


def _mirror_idx(i: torch.Tensor, n: int) -> torch.Tensor:
    """Whole-sample symmetric index (OpenCV BORDER_REFLECT_101, SciPy 'mirror')."""
    if n == 1:
        return torch.zeros_like(i)
    p = 2 * n - 2
    if bool(((i > -n) & (i < p)).all()):  # one reflection at most (the usual case): no modulo
        return torch.where(i < 0, -i, torch.where(i >= n, p - i, i))
    i = torch.remainder(i, p)
    return torch.where(i >= n, p - i, i)


def elastic_control_points(h: int, w: int) -> np.ndarray:
    """pts1 of the reference: centre +- min(H, W)//3, from ``np.float32(shape) // 2``."""
    center = np.float32((h, w)) // 2
    sq = min(h, w) // 3
    return np.float32([center + sq, [center[0] + sq, center[1] - sq], center - sq])


def warp_affine_fixed_point(mats: np.ndarray, h: int, w: int):
    """OpenCV's fixed-point inverse map of :func:`cv2_warp_affine_linear`: int64 (x0, y0) of shape (N, H)
    and (adelta, bdelta) of shape (N, W), in 1/1024 px (x0, y0 include the + 16 rounding term); the
    sampled position of pixel (y, x) is ((x0[y] + adelta[x]) >> 5, (y0[y] + bdelta[x]) >> 5) in 1/32 px."""
    n = len(mats)
    m = np.asarray(mats, dtype=np.float64).reshape(n, 6).copy()
    d = m[:, 0] * m[:, 4] - m[:, 1] * m[:, 3]
    d = np.where(d != 0, 1.0 / np.where(d != 0, d, 1.0), 0.0)
    a11 = m[:, 4] * d
    a22 = m[:, 0] * d
    m[:, 0] = a11
    m[:, 1] *= -d
    m[:, 3] *= -d
    m[:, 4] = a22
    b1 = -m[:, 0] * m[:, 2] - m[:, 1] * m[:, 5]
    b2 = -m[:, 3] * m[:, 2] - m[:, 4] * m[:, 5]
    m[:, 2] = b1
    m[:, 5] = b2
    xs = np.arange(w, dtype=np.float64)[None, :]
    ys = np.arange(h, dtype=np.float64)[None, :]
    adelta = np.rint(m[:, 0:1] * xs * 1024).astype(np.int64)  # (N, W)
    bdelta = np.rint(m[:, 3:4] * xs * 1024).astype(np.int64)
    x0 = np.rint((m[:, 1:2] * ys + m[:, 2:3]) * 1024).astype(np.int64) + 16  # (N, H)
    y0 = np.rint((m[:, 4:5] * ys + m[:, 5:6]) * 1024).astype(np.int64) + 16
    return x0, y0, adelta, bdelta


def cv2_warp_affine_linear(x32: torch.Tensor, mats: np.ndarray) -> torch.Tensor:
    """``cv2.warpAffine(img, M, (W, H))`` with INTER_LINEAR and BORDER_REFLECT_101, float32, batched.

    Emulates OpenCV's fixed-point path (OpenCV <= 4.10, and what the 2019 generator ran): the inverse map
    is evaluated in 1/1024 px with cvRound, reduced to 1/32 px (INTER_BITS = 5), and the float32 bilinear
    weights come from the 32x32 table: w = (1 - ty, ty) x (1 - tx, tx) multiplied in float32, summed in
    float32 left to right. (Checked bit for bit against OpenCV 4.10. OpenCV >= 4.11 switched to
    unquantised float coordinates, which differ by up to 1/64 px of interpolation.)
    """
    n, h, w, c = x32.shape
    x0, y0, adelta, bdelta = warp_affine_fixed_point(mats, h, w)
    dev = x32.device
    X = (torch.as_tensor(x0, device=dev)[:, :, None] + torch.as_tensor(adelta, device=dev)[:, None, :]) >> 5
    Y = (torch.as_tensor(y0, device=dev)[:, :, None] + torch.as_tensor(bdelta, device=dev)[:, None, :]) >> 5
    ix, fx = X >> 5, X & 31
    iy, fy = Y >> 5, Y & 31
    tx = fx.to(torch.float32) * 0.03125
    ty = fy.to(torch.float32) * 0.03125
    wx = (1.0 - tx, tx)
    wy = (1.0 - ty, ty)
    img = x32.contiguous()
    acc = None
    cols = [_mirror_idx(ix + b, w) for b in range(2)]
    for a in range(2):
        rows = _mirror_idx(iy + a, h) * w
        for b in range(2):
            pix = (rows + cols[b]).view(n, h * w)
            wgt = (wy[a] * wx[b]).view(n, h * w, 1)
            term = take_pixels_hwc(img, pix).mul_(wgt)
            acc = term if acc is None else acc.add_(term)
    return acc.view(n, h, w, c)


def _scipy_reflect_coordinate(cc: torch.Tensor, n: int) -> torch.Tensor:
    """``map_coordinate(in, len, NI_EXTEND_REFLECT)`` of SciPy's ni_interpolation.c (SciPy >= 1.6): the
    coordinate folded into (-1, n)."""
    if n <= 1:
        return torch.zeros_like(cc)
    sz2 = float(2 * n)
    if not bool(((cc >= -n) & (cc < sz2)).all()):  # far outside: reduce modulo 2n first, as SciPy does
        neg = cc < 0
        lo = torch.where(cc < -sz2, sz2 * torch.trunc(true_div(-cc, sz2)) + cc, cc)
        lo = torch.where(lo < -n, lo + sz2, lo)
        hi = cc - sz2 * torch.trunc(true_div(cc, sz2))
        cc = torch.where(neg, lo, torch.where(cc > n - 1, hi, cc))
    # -n <= cc < 0: -cc - 1 (SciPy guards -cc - 1 == -1); n <= cc < 2n: 2n - cc - 1; else unchanged
    neg = torch.where(cc > -1e-15, torch.full_like(cc, 1e-15), -cc) - 1
    return torch.where(cc < 0, neg, torch.where(cc >= n, (sz2 - cc) - 1, cc))


def scipy_map_coordinates_reflect(img: torch.Tensor, cy: torch.Tensor, cx: torch.Tensor) -> torch.Tensor:
    """``map_coordinates(img, (cy, cx, channel), order=1, mode='reflect')`` for (N, H, W, C) float32 images.

    Per point and axis: the coordinate is folded with SciPy's 'reflect' rule, the 2 taps are floor(cc)
    and floor(cc)+1 with weights (1 - t, 1 - (1 - t)), taps outside the axis are reflected
    (half-sample), and t = sum in C order of ((p * wy) * wx) in float64, cast to float32. The channel
    coordinate is an integer, so its weights are (1, 0) and add nothing. This is SciPy >= 1.6; the
    SciPy of 2019 mirrored (whole-sample) the out-of-range taps, which changes border pixels whose
    displaced coordinate falls in (-1, 0) or (n-1, n): a property of the random field, not testable
    against the published arrays.
    """
    n, h, w, c = img.shape
    ry = _scipy_reflect_coordinate(cy, h)
    rx = _scipy_reflect_coordinate(cx, w)
    valid = (ry > -1.0) & (rx > -1.0)
    sy, sx = torch.floor(ry), torch.floor(rx)
    wy0 = 1.0 - (ry - sy)
    wx0 = 1.0 - (rx - sx)
    wys, wxs = (wy0, 1.0 - wy0), (wx0, 1.0 - wx0)
    sy, sx = sy.to(torch.int64), sx.to(torch.int64)
    img64 = img.to(torch.float64).contiguous()
    acc = None
    cols = [(sx + b).clamp_(0, w - 1) for b in range(2)]
    for a in range(2):
        rows = (sy + a).clamp_(0, h - 1).mul_(w)  # taps of a folded coordinate lie in [-1, n]: reflect = clamp
        for b in range(2):
            pix = (rows + cols[b]).view(n, h * w)
            term = take_pixels_hwc(img64, pix).mul_(wys[a].view(n, h * w, 1)).mul_(wxs[b].view(n, h * w, 1))
            acc = term if acc is None else acc.add_(term)
    acc.masked_fill_(~valid.view(n, h * w, 1), 0.0)
    return acc.to(torch.float32).view(n, h, w, c)


def elastic_draws(rng: KeyedRandom, params, h: int, w: int):
    """Affine jitter U(-affine, affine) (N, 3, 2) as float32, and the two U(-1, 1) noise fields (dx first)."""
    alpha, _, aff = params
    j = rng.uniform_cpu(6, stream=0)
    jitter = (-aff + (aff - -aff) * j).astype(np.float32).reshape(-1, 3, 2)
    if alpha == 0:  # severity 1: the fields are multiplied by 0, so they are not drawn
        return jitter, None, None
    # -1 + 2u in place (the same two roundings as -1.0 + 2.0 * u, no temporaries)
    ndx = rng.uniform(h * w, stream=1).view(-1, h, w).mul_(2.0).add_(-1.0)
    ndy = rng.uniform(h * w, stream=2).view(-1, h, w).mul_(2.0).add_(-1.0)
    return jitter, ndx, ndy


def _elastic_mats(jitter: np.ndarray, h: int, w: int) -> np.ndarray:
    """The reference's ``cv2.getAffineTransform(pts1, pts1 + jitter)`` per image, (N, 2, 3) float64."""
    import cv2

    pts1 = elastic_control_points(h, w)
    return np.stack([cv2.getAffineTransform(pts1, pts1 + jitter[i]) for i in range(len(jitter))])


def elastic_fields(ndx: torch.Tensor, ndy: torch.Tensor, alpha: float,
                   sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The displacement fields: ``scipy_gaussian(noise, sigma, mode='reflect', truncate=3) * alpha`` in float64,
    cast to float32 (dx, dy); :func:`smoothed_noise` gives the float64 fields before the scaling."""
    return tuple((f * alpha).to(torch.float32) for f in smoothed_noise(ndx, ndy, sigma))


def smoothed_noise(ndx: torch.Tensor, ndy: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``scipy_gaussian(noise, sigma, mode='reflect', truncate=3)`` of both noise planes, float64. Where the kernel is
    longer than the image (ImageNet's severity 1: sigma 170.8, 512 taps each side at 224 px) the filter runs
    folded (``fold=True``): SciPy's values up to rounding."""
    return tuple(scipy_gaussian(f, sigma, dims=(1, 2), mode="reflect", truncate=3, fold=True) for f in (ndx, ndy))


def elastic_apply(x: torch.Tensor, params, jitter: np.ndarray, ndx, ndy):
    """The torch implementation (CUDA path; :func:`elastic_apply_cpu` is the same arithmetic compiled)."""
    alpha, sigma, _ = params
    n, h, w, c = x.shape
    mats = _elastic_mats(jitter, h, w)
    warped = cv2_warp_affine_linear(u8_to_unit32(x), mats)
    if alpha == 0:
        # zero displacement: map_coordinates samples integer coordinates with weights (1, 0), which
        # returns every value exactly (p*1*1 + 0 + 0 + 0)
        return floor_u8(warped)
    dx, dy = elastic_fields(ndx, ndy, alpha, sigma)
    dev = x.device
    yy = torch.arange(h, device=dev, dtype=torch.float64).view(1, h, 1)
    xx = torch.arange(w, device=dev, dtype=torch.float64).view(1, 1, w)
    out = scipy_map_coordinates_reflect(warped, yy + dy.to(torch.float64), xx + dx.to(torch.float64))
    return floor_u8(out)


def elastic_apply_cpu(x: torch.Tensor, params, jitter: np.ndarray, ndx, ndy) -> torch.Tensor:
    """:func:`elastic_apply` on the CPU: the same fields (:func:`smoothed_noise`, scaled in the kernel as
    :func:`elastic_fields` does), then warp and resampling as one compiled pass per image
    (``_cpu_weather.elastic_kernel``)."""
    from ._cpu_weather import UNIT32, elastic_kernel

    alpha, sigma, _ = params
    n, h, w, c = x.shape
    x0, y0, adelta, bdelta = warp_affine_fixed_point(_elastic_mats(jitter, h, w), h, w)
    if alpha == 0:  # no fields drawn; the kernel only warps (and reads no field)
        fx = fy = np.zeros((n, 1, 1))
    else:  # the kernel scales them: float32(f * alpha), as elastic_fields
        fx, fy = (f.contiguous().numpy() for f in smoothed_noise(ndx, ndy, sigma))
    out = output_array((n, h, w, c))
    elastic_kernel(x.contiguous().numpy(), UNIT32, x0, y0, adelta, bdelta, float(alpha), fx, fy, out)
    return torch.from_numpy(out)


def elastic_transform(x: torch.Tensor, params, rng: KeyedRandom) -> torch.Tensor:
    n, h, w, _ = x.shape
    jitter, ndx, ndy = elastic_draws(rng, params, h, w)
    if x.device.type == "cpu":
        return elastic_apply_cpu(x, params, jitter, ndx, ndy)
    return elastic_apply(x, params, jitter, ndx, ndy)
