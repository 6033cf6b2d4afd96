"""Weather corruptions: snow, frost, fog, brightness, spatter (spatter is grouped with weather, as the
reference does)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from . import _cpu_color
from ._ops import (
    clipped_zoom_axis,
    clipped_zoom_hwb,
    clipped_zoom_tables,
    from_hwb,
    to_hwb,
    floor_u8,
    floor_u8_255,
    hsv2rgb,
    im_motion_blur,
    rgb2hsv,
    scipy_gaussian,
    u8_to_unit32,
    u8_to_unit64,
)
from .blur import motion_angles
from ._output import output_array
from .rng import KeyedRandom, stream_offset

# ----------------------------------------------------------------------------------------------
# brightness (deterministic)


def brightness(x: torch.Tensor, c: float, rng=None) -> torch.Tensor:
    """skimage rgb2hsv, V <- clip(V + c, 0, 1), hsv2rgb, clip, x255, floor (skimage's arithmetic).

    On the CPU a compiled per-pixel kernel (same operations); elsewhere :func:`brightness_torch`."""
    if x.device.type == "cpu":
        return _cpu_color.brightness_cpu(x, c)
    return brightness_torch(x, c)


def brightness_torch(x: torch.Tensor, c: float) -> torch.Tensor:
    """:func:`brightness` as whole-tensor torch operations (the CUDA path)."""
    h, s, v = rgb2hsv(u8_to_unit64(x))
    return floor_u8(hsv2rgb(h, s, torch.clamp(v + c, 0.0, 1.0)))


# ----------------------------------------------------------------------------------------------
# fog (random plasma)

_PLASMA_STREAM = 0


def plasma_uniform_count(mapsize: int) -> int:
    """Uniforms one plasma map of side ``mapsize`` uses (3 per new value, over the steps ``mapsize`` .. 2)."""
    from ._cpu_weather import plasma_count  # the one count, also used inside the compiled fog kernel

    return int(plasma_count(mapsize))


def plasma_fractal(u: torch.Tensor, mapsize: int = 32, wibbledecay: float = 3) -> torch.Tensor:
    """The reference diamond-square ``plasma_fractal``, batched: u is (N, plasma_uniform_count) uniforms.

    float64, torus-periodic (np.roll), noise wibble * U(-wibble, wibble) added to the mean of 4
    neighbours; finally shifted to min 0 and divided by the max.
    """
    n = u.shape[0]
    m = torch.zeros((n, mapsize, mapsize), dtype=torch.float64, device=u.device)
    step = mapsize
    wibble = 100.0
    pos = 0

    def wibbledmean(arr):
        nonlocal pos
        k = arr.shape[1] * arr.shape[2]
        r = u[:, pos : pos + k].reshape(arr.shape)
        pos += k
        # np.random.uniform(low, high) = low + (high - low) * r
        return arr / 4 + wibble * (-wibble + (wibble - -wibble) * r)

    while step >= 2:
        hs = step // 2
        corner = m[:, 0:mapsize:step, 0:mapsize:step]
        sq = corner + torch.roll(corner, -1, dims=1)
        sq = sq + torch.roll(sq, -1, dims=2)
        m[:, hs:mapsize:step, hs:mapsize:step] = wibbledmean(sq)
        dr = m[:, hs:mapsize:step, hs:mapsize:step].clone()
        ul = m[:, 0:mapsize:step, 0:mapsize:step].clone()
        lt = (dr + torch.roll(dr, 1, dims=1)) + (ul + torch.roll(ul, -1, dims=2))
        m[:, 0:mapsize:step, hs:mapsize:step] = wibbledmean(lt)
        tt = (dr + torch.roll(dr, 1, dims=2)) + (ul + torch.roll(ul, -1, dims=1))
        m[:, hs:mapsize:step, 0:mapsize:step] = wibbledmean(tt)
        step //= 2
        wibble /= wibbledecay
    m = m - m.amin(dim=(1, 2), keepdim=True)
    return m / m.amax(dim=(1, 2), keepdim=True)


def fog_mapsize(h: int, w: int) -> int:
    """32 as in the reference (cropped to [:H, :W]); larger images get the next power of two."""
    size = 32
    while size < max(h, w):
        size *= 2
    return size


def fog_apply(x: torch.Tensor, params, plasma: torch.Tensor) -> torch.Tensor:
    c0, _decay = params
    n, h, w, _ = x.shape
    xf = u8_to_unit64(x)
    max_val = xf.amax(dim=(1, 2, 3), keepdim=True)
    y = xf + c0 * plasma[:, :h, :w, None]
    return floor_u8(y * max_val / (max_val + c0))


def fog_apply_cpu(x: torch.Tensor, params, rng: KeyedRandom, mapsize: int) -> torch.Tensor:
    """``fog_apply(x, params, plasma_fractal(rng.uniform(plasma_uniform_count(mapsize)), mapsize, params[1]))`` on
    the CPU, compiled (``_cpu_weather.fog_kernel``: same draws, same arithmetic), one image's draws at a time."""
    from ._cpu_weather import UNIT64, fog_kernel

    c0, decay = params
    out = output_array(x.shape)
    fog_kernel(x.contiguous().numpy(), rng.keys_u64(), stream_offset(_PLASMA_STREAM), mapsize, float(decay),
               float(c0), UNIT64, out)
    return torch.from_numpy(out)


def fog(x: torch.Tensor, params, rng: KeyedRandom) -> torch.Tensor:
    _, h, w, _ = x.shape
    size = fog_mapsize(h, w)
    if x.device.type == "cpu":
        return fog_apply_cpu(x, params, rng, size)
    u = rng.uniform(plasma_uniform_count(size), stream=_PLASMA_STREAM)
    return fog_apply(x, params, plasma_fractal(u, size, params[1]))


# ----------------------------------------------------------------------------------------------
# frost (random texture and crop)


def frost_draws(rng: KeyedRandom, shapes, h: int, w: int):
    """Per image: texture index randint(5), row start randint(0, Ht - H), column start randint(0, Wt - W)."""
    from .errors import CorruptionError

    u = rng.uniform_cpu(3)
    idx = np.minimum((u[:, 0] * 5).astype(np.int64), 4)
    ht = np.array([s[0] for s in shapes])[idx]
    wt = np.array([s[1] for s in shapes])[idx]
    if (ht - h < 1).any() or (wt - w < 1).any():
        raise CorruptionError(
            f"frost: images of {h}x{w} need textures larger than that; the resized textures are "
            + ", ".join(f"{a}x{b}" for a, b in shapes)
        )
    r0 = np.floor(u[:, 1] * (ht - h)).astype(np.int64)
    c0 = np.floor(u[:, 2] * (wt - w)).astype(np.int64)
    return idx, r0, c0


def frost_apply(x: torch.Tensor, params, stack: torch.Tensor, idx, r0, c0) -> torch.Tensor:
    """np.clip(a * x + b * crop, 0, 255) -> uint8, the crop taken from the stacked RGB textures."""
    a, b = params
    n, h, w, _ = x.shape
    dev = x.device
    it = torch.as_tensor(idx, device=dev).view(n, 1, 1)
    rr = torch.as_tensor(r0, device=dev).view(n, 1, 1) + torch.arange(h, device=dev).view(1, h, 1)
    cc = torch.as_tensor(c0, device=dev).view(n, 1, 1) + torch.arange(w, device=dev).view(1, 1, w)
    crop = stack[it, rr, cc]  # (N, H, W, 3) uint8
    idx = x.to(torch.int64).bitwise_left_shift_(8).bitwise_or_(crop.to(torch.int64))
    return _frost_table(float(a), float(b), str(dev)).take(idx)


@lru_cache(maxsize=None)
def _frost_table(a: float, b: float, device: str) -> torch.Tensor:
    """The output byte for every (image byte, texture byte) pair: ``np.uint8(np.clip(a * x + b * t, 0, 255))``
    in float64, exactly the reference's per-element arithmetic, as a flat 256 * 256 table (index x * 256 + t)."""
    v = torch.arange(256, dtype=torch.float64)
    y = a * v.view(256, 1) + b * v.view(1, 256)
    return floor_u8_255(y).reshape(-1).to(torch.device(device))


def frost_apply_cpu(x: torch.Tensor, params, stack: torch.Tensor, idx, r0, c0) -> torch.Tensor:
    """:func:`frost_apply` on the CPU, compiled (``_cpu_weather.frost_kernel``: the same table look-up)."""
    from ._cpu_weather import frost_kernel

    a, b = params
    out = output_array(x.shape)
    frost_kernel(x.contiguous().numpy(), stack.contiguous().numpy(), np.asarray(idx, np.int64),
                 np.asarray(r0, np.int64), np.asarray(c0, np.int64), _frost_table(float(a), float(b), "cpu").numpy(),
                 out)
    return torch.from_numpy(out)


def frost(x: torch.Tensor, params, rng: KeyedRandom, textures) -> torch.Tensor:
    _, h, w, _ = x.shape
    idx, r0, c0 = frost_draws(rng, textures.shapes, h, w)
    apply = frost_apply_cpu if x.device.type == "cpu" else frost_apply
    return apply(x, params, textures.stacked(x.device), idx, r0, c0)


# ----------------------------------------------------------------------------------------------
# snow (random layer and angle)


def _fma32(a: torch.Tensor, b: float, c: torch.Tensor) -> torch.Tensor:
    # float32 fused multiply-add through float64 (a*b is exact there)
    return (a.to(torch.float64) * b + c.to(torch.float64)).to(torch.float32)


_R2Y, _G2Y, _B2Y = (float(np.float32(v)) for v in (0.299, 0.587, 0.114))


def rgb2gray32(x32: torch.Tensor) -> torch.Tensor:
    """cv2.cvtColor(x, COLOR_RGB2GRAY) on float32 (N, H, W, 3) -> (N, H, W, 1).

    OpenCV's float path computes fma(B, 0.114f, fma(R, 0.299f, G * 0.587f)) with its SIMD code (0
    mismatches against OpenCV 5.0 on this machine); older builds without FMA can differ by 1 ulp.
    """
    r, g, b = x32[..., 0], x32[..., 1], x32[..., 2]
    return _fma32(b, _B2Y, _fma32(r, _R2Y, g * _G2Y)).unsqueeze(-1)


def snow_base(x: torch.Tensor, blend: float) -> torch.Tensor:
    """float32: blend * x + (1 - blend) * max(x, 1.5 * gray + 0.5)."""
    x32 = u8_to_unit32(x)
    gray = rgb2gray32(x32) * 1.5 + 0.5
    return float(np.float32(blend)) * x32 + float(np.float32(1 - blend)) * torch.maximum(x32, gray)


def snow_layer_u8(normal: torch.Tensor, params) -> torch.Tensor:
    """(N, H, W) standard normals -> the uint8 snow layer before motion blur, (N, H, W, 1)."""
    mean, std, zoom, thr = params[:4]
    layer = mean + std * normal  # np.random.normal(loc=mean, scale=std), (N, H, W) float64
    n = layer.shape[0]
    layer = from_hwb(clipped_zoom_hwb(to_hwb(layer.unsqueeze(-1)), zoom), n, 1)
    layer = torch.where(layer < thr, torch.zeros_like(layer), layer)
    return torch.clamp(layer, 0.0, 1.0).mul_(255.0).floor_().to(torch.uint8)


def snow_layer_u8_cpu(normal: torch.Tensor, params) -> torch.Tensor:
    """:func:`snow_layer_u8` on the CPU: one compiled pass (``_cpu_weather.snow_layer_kernel``), the same bytes."""
    from ._cpu_weather import snow_layer_kernel

    mean, std, zoom, thr = params[:4]
    n, h, w = normal.shape
    out = np.empty((n, h, w, 1), np.uint8)
    snow_layer_kernel(normal.contiguous().numpy(), float(mean), float(std), float(thr),
                      *clipped_zoom_tables(h, w, (float(zoom),)), out.reshape(n, h, w))
    return torch.from_numpy(out)


def snow_normals(rng: KeyedRandom, zoom: float, n: int, h: int, w: int) -> torch.Tensor:
    """The layer's standard normals (N, H, W) float64: ``ndtri`` of the keyed uniforms (stream 0, H * W per image),
    evaluated only on the rows and columns that the layer's ``clipped_zoom`` reads (the centre crop); the rest,
    never read, is 0."""
    u = rng.uniform(h * w, stream=0).view(n, h, w)
    ry, rx = clipped_zoom_axis(h, float(zoom)), clipped_zoom_axis(w, float(zoom))
    y0, y1 = int(min(ry[0].min(), ry[1].min())), int(max(ry[0].max(), ry[1].max())) + 1
    x0, x1 = int(min(rx[0].min(), rx[1].min())), int(max(rx[0].max(), rx[1].max())) + 1
    normal = torch.zeros_like(u)
    normal[:, y0:y1, x0:x1] = torch.special.ndtri(u[:, y0:y1, x0:x1])
    return normal


def snow_apply(x: torch.Tensor, params, normal: torch.Tensor, angles_deg: np.ndarray) -> torch.Tensor:
    blur_r, blur_s, blend = params[4:7]
    s8 = im_motion_blur(snow_layer_u8(normal, params), blur_r, blur_s, angles_deg)
    s = u8_to_unit64(s8)
    y = snow_base(x, blend).to(torch.float64) + s + torch.flip(s, dims=(1, 2))  # + np.rot90(S, k=2)
    return floor_u8(y)


def snow_apply_cpu(x: torch.Tensor, params, normal: torch.Tensor, angles_deg: np.ndarray) -> torch.Tensor:
    """:func:`snow_apply` on the CPU: the same layer (:func:`snow_layer_u8_cpu`) and motion blur (compiled on the
    CPU through ``im_motion_blur``), then the composition as one compiled pass (``_cpu_weather.snow_blend_kernel``)."""
    from ._cpu_weather import snow_blend_kernel

    blur_r, blur_s, blend = params[4:7]
    s8 = im_motion_blur(snow_layer_u8_cpu(normal, params), blur_r, blur_s, angles_deg)
    out = output_array(x.shape)
    snow_blend_kernel(x.contiguous().numpy(), s8.reshape(s8.shape[:3]).contiguous().numpy(),
                      np.array([_R2Y, _G2Y, _B2Y]), np.array([float(np.float32(blend)), float(np.float32(1 - blend))]),
                      out)
    return torch.from_numpy(out)


def snow(x: torch.Tensor, params, rng: KeyedRandom) -> torch.Tensor:
    n, h, w, _ = x.shape
    normal = snow_normals(rng, params[2], n, h, w)
    apply = snow_apply_cpu if x.device.type == "cpu" else snow_apply
    return apply(x, params, normal, motion_angles(rng, -135.0, -45.0))


# ----------------------------------------------------------------------------------------------
# spatter (random liquid layer; water for severities 1-3, mud for 4-5)

_EMBOSS = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])


def _water_distance(l8: np.ndarray) -> np.ndarray:
    """The reference's OpenCV chain on one uint8 liquid layer -> float32 'dist' map."""
    import cv2

    dist = 255 - cv2.Canny(l8, 50, 150)
    dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
    _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
    dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
    dist = cv2.equalizeHist(dist)
    dist = cv2.filter2D(dist, cv2.CV_8U, _EMBOSS)
    return cv2.blur(dist, (3, 3)).astype(np.float32)


_WATER = tuple(float(np.float32(v / 255.0)) for v in (175, 238, 238))
_MUD = tuple(float(np.float32(v / 255.0)) for v in (63, 42, 20))


def spatter_liquid(normal: torch.Tensor, params) -> torch.Tensor:
    """The liquid layer (N, H, W) float64: scipy_gaussian(mean + std * normal, 'nearest'), 0 below thr."""
    mean, std, sigma, thr, _, _ = params
    liquid = scipy_gaussian(mean + std * normal, sigma, dims=(1, 2), mode="nearest", truncate=4.0)
    return torch.where(liquid < thr, torch.zeros_like(liquid), liquid)


def water_layer(liquid: torch.Tensor) -> torch.Tensor:
    """(liquid * 255).astype(np.uint8): truncation; values above 255 wrap modulo 256 as NumPy's C cast does on
    x86 (possible only in rare tails where the blurred layer exceeds 1)."""
    return torch.remainder(torch.floor(liquid * 255.0), 256).to(torch.uint8)


def mud_mask(liquid: torch.Tensor, params) -> torch.Tensor:
    """Mud: gaussian of the binary mask liquid > thr (float64, as skimage <= 0.14's img_as_float made it),
    0 below 0.8; (N, H, W)."""
    _, _, _, thr, k, _ = params
    mm = scipy_gaussian((liquid > thr).to(torch.float64), k, dims=(1, 2), mode="nearest", truncate=4.0)
    return torch.where(mm < 0.8, torch.zeros_like(mm), mm)


def spatter_apply(x: torch.Tensor, params, normal: torch.Tensor) -> torch.Tensor:
    mean, std, sigma, thr, k, mode = params
    dev = x.device
    x32 = u8_to_unit32(x)
    liquid = spatter_liquid(normal, params)
    if mode == 0:  # water
        l8 = water_layer(liquid)
        l8_np = l8.cpu().numpy()
        dist = torch.as_tensor(np.stack([_water_distance(a) for a in l8_np]), device=dev)
        m = l8.to(torch.float32) * dist  # (N, H, W) float32
        mx = m.amax(dim=(1, 2), keepdim=True)
        # m /= np.max(m): 0/0 = NaN if no liquid survives (never observed); we add nothing instead
        m = torch.where(mx > 0, m / torch.where(mx > 0, mx, torch.ones_like(mx)), torch.zeros_like(m))
        m = m * float(np.float32(k))
        color = torch.tensor(_WATER, dtype=torch.float32, device=dev)
        return floor_u8(x32 + m.unsqueeze(-1) * color)
    mm = mud_mask(liquid, params).unsqueeze(-1)
    color = torch.tensor(_MUD, dtype=torch.float64, device=dev)
    color = (color * mm).to(torch.float32)  # color *= m  (float32 array, float64 operand)
    xm = (x32.to(torch.float64) * (1 - mm)).to(torch.float32)  # x *= (1 - m)
    return floor_u8(xm + color)


def spatter_apply_cpu(x: torch.Tensor, params, normal: torch.Tensor) -> torch.Tensor:
    """:func:`spatter_apply` on the CPU: the same liquid layer and mask (``scipy_gaussian`` runs compiled on the
    CPU), then the compositions as compiled kernels (``_cpu_weather``); the water branch's OpenCV chain runs in
    between, as in the torch path."""
    from ._cpu_weather import UNIT32, mud_blend_kernel, water_blend_kernel

    k, mode = params[4], params[5]
    n, h, w, c = x.shape
    xn, liquid = x.contiguous().numpy(), spatter_liquid(normal, params)
    out = output_array((n, h, w, c))
    if mode == 0:
        l8 = water_layer(liquid).numpy()
        dist = np.stack([_water_distance(a) for a in l8])
        water_blend_kernel(xn, l8, dist, float(np.float32(k)), np.array(_WATER, np.float32), UNIT32, out)
    else:
        mud_blend_kernel(xn, mud_mask(liquid, params).contiguous().numpy(), np.array(_MUD), UNIT32, out)
    return torch.from_numpy(out)


def spatter(x: torch.Tensor, params, rng: KeyedRandom) -> torch.Tensor:
    n, h, w, _ = x.shape
    normal = torch.special.ndtri(rng.uniform(h * w)).view(n, h, w)
    apply = spatter_apply_cpu if x.device.type == "cpu" else spatter_apply
    return apply(x, params, normal)
