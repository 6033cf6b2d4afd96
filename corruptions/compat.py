"""imagecorruptions' call, explicitly: code written for the ``imagecorruptions`` package runs unchanged with
``from corruptions.compat import corrupt, get_corruption_names, corruption_dict, corruption_tuple``.

What matches imagecorruptions (1.1.2, learnt by running it as a black box; see README "Interop"):

* the call ``corrupt(image, severity=1, corruption_name=None, corruption_number=-1)`` on one uint8 image of any size
  of at least 32x32: (H, W), (H, W, 1) or (H, W, 3); a grayscale image is stacked to three channels and the result
  is (H, W, 3) uint8, truncated as ``np.uint8`` truncates;
* the ImageNet-C constants (:data:`corruptions.registry.CONSTANTS` ``"imagenet"``) at every size, and
  imagecorruptions' own size handling: the fog map is the next power of two >= the longer side (cropped to H x W);
  the frost photograph is scaled by ``max(1, H/h, W/w) * 1.1`` with ``cv2.INTER_CUBIC`` and cropped at random;
  ``clipped_zoom`` crops each axis on its own and keeps the top-left H x W (no centred trim); pixelate goes down
  with PIL BOX and back up with NEAREST; elastic_transform has no affine step (sigma 1 % of each side, displacement
  noise U(+-0.5 % of the height), alpha 250 x (.05, .065, .085, .1, .12)); motion blur in float without
  ImageMagick's 8-bit quantisation, stopping at a shift as large as the image; snow rounds its blurred layer;
* the exception types for bad input: ``AttributeError`` for a wrong type, dtype, shape, size or severity,
  ``KeyError`` for an unknown name, ``IndexError`` / ``TypeError`` for a bad ``corruption_number``, ``ValueError``
  when no corruption is named, ``TypeError`` for a non-integral severity such as 2.0 (the classes here subclass
  both those types and :class:`~corruptions.errors.CorruptionError`);
* ``get_corruption_names(subset)``, ``corruption_tuple`` (the 19 functions in imagecorruptions' order) and
  ``corruption_dict`` (name -> function); each function takes ``(x, severity=1)``, x a PIL image or an array, and
  returns what imagecorruptions' does (a float array of the 0..255 values; a PIL image for pixelate and
  jpeg_compression); ``corrupt`` takes precedence of ``corruption_name`` over ``corruption_number``, and a negative
  number counts from the end, as there.

Additions: ``seed=`` / ``index=`` (keyword only). The draws of a random corruption are keyed by (seed, name,
severity, index) with the suite's counter-based generator (prefix ``imagecorruptions``), so a call is reproducible;
``seed=None`` (the default) takes a fresh seed from NumPy's global generator, so ``np.random.seed(k)`` makes a
script reproducible, as with imagecorruptions. ``frost=``: a :class:`~corruptions.frost.FrostTextures` or a folder
holding frost1.png ... frost5.jpg; by default :func:`~corruptions.frost.load_frost_textures` (an installed
imagecorruptions distribution's photographs, found without importing it, else the labelled procedural substitute
with its warning).

What differs on purpose: random corruptions draw other numbers than imagecorruptions (no global NumPy stream);
fog's plasma is float64 (the reference generators'), imagecorruptions' float32. Given imagecorruptions' own draws,
elastic_transform, frost, snow, glass_blur and spatter are byte-identical, motion_blur up to float summation order
(a few values in 10^4 by one level); tests/corruptions_lib/test_compat.py checks this.

The rest of the suite (``corruptions.corrupt``, the writers, evaluation) is unchanged and keyed by image size.
"""
from __future__ import annotations

import operator
from typing import Callable

import numpy as np

from .errors import CorruptionError
from .registry import ALL, CONSTANTS, SUBSETS

__all__ = ["corrupt", "corruption_dict", "corruption_tuple", "get_corruption_names"]

MIN_SIDE = 32
KEY_PREFIX = "imagecorruptions"  # the keyed generator's prefix (its own draws, apart from the three regimes')
# imagecorruptions' elastic_transform: alpha per severity (sigma and the noise bound follow the image size)
ELASTIC_ALPHA = tuple(250 * f for f in (0.05, 0.065, 0.085, 0.1, 0.12))
_SEVERITIES = (1, 2, 3, 4, 5)


class CompatAttributeError(CorruptionError, AttributeError):
    """Bad image or severity (imagecorruptions raises AttributeError)."""


class CompatKeyError(CorruptionError, KeyError):
    """Unknown ``corruption_name`` (imagecorruptions raises KeyError)."""


class CompatIndexError(CorruptionError, IndexError):
    """``corruption_number`` out of range (imagecorruptions raises IndexError)."""


class CompatTypeError(CorruptionError, TypeError):
    """A severity or corruption number that is not an integer (imagecorruptions raises TypeError)."""


def get_corruption_names(subset: str = "common") -> list[str]:
    """Names of a subset, as imagecorruptions: ``common`` (15), ``validation`` (4), ``all`` (19), and the groups
    ``noise``, ``blur``, ``weather``, ``digital`` (their benchmark corruptions). Unknown subset: ValueError."""
    names = SUBSETS.get(subset) if isinstance(subset, str) else None
    if names is None:
        raise CorruptionError(f"subset must be one of {list(SUBSETS)}, got {subset!r}")
    return list(names)


# ---------------------------------------------------------------------------------------------- input checks


def _check_image(image) -> np.ndarray:
    """imagecorruptions' checks, in its order; a grayscale image comes back stacked to (H, W, 3)."""
    if not isinstance(image, np.ndarray):
        raise CompatAttributeError("Expecting type(image) to be numpy.ndarray")
    if image.dtype.type is not np.uint8:
        raise CompatAttributeError("Expecting image.dtype.type to be numpy.uint8")
    if image.ndim not in (2, 3):
        raise CompatAttributeError("Expecting image.shape to be either (height x width) or "
                                   "(height x width x channels)")
    if image.ndim == 3 and image.shape[2] not in (1, 3):
        raise CompatAttributeError("Expecting image to have either 1 or 3 channels (last dimension)")
    if image.shape[0] < MIN_SIDE or image.shape[1] < MIN_SIDE:
        raise CompatAttributeError(f"Image width and height must be at least {MIN_SIDE} pixels")
    if image.ndim == 2 or image.shape[2] == 1:
        gray = image.reshape(image.shape[0], image.shape[1])
        image = np.stack([gray] * 3, axis=-1)
    return np.ascontiguousarray(image)


def _check_severity(severity) -> int:
    if severity not in _SEVERITIES:
        raise CompatAttributeError("Severity must be an integer in [1, 5]")
    try:
        return operator.index(severity)
    except TypeError:
        raise CompatTypeError(f"severity must be an integer, not {type(severity).__name__}") from None


def _as_array(x) -> np.ndarray:
    """A corruption function's input (PIL image or array) as uint8 (H, W, 3)."""
    arr = np.asarray(x)
    if arr.dtype != np.uint8:
        arr = np.uint8(arr)
    if arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 1):
        arr = np.stack([arr.reshape(arr.shape[:2])] * 3, axis=-1)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise CompatAttributeError(f"Expecting an RGB image (height x width x 3), got shape {arr.shape}")
    return np.ascontiguousarray(arr)


def _fresh_seed() -> int:
    return int(np.random.randint(0, np.iinfo(np.int64).max, dtype=np.int64))  # NumPy's global stream


# ---------------------------------------------------------------------------------------------- implementations


def _keyed(name: str, severity: int, seed: int, index: int):
    from .rng import KeyedRandom

    return KeyedRandom(int(seed), name, severity, np.array([int(index)]), device="cpu", prefix=KEY_PREFIX)


def _suite(name: str, img: np.ndarray, severity: int, seed: int, index: int) -> np.ndarray:
    """The suite's batched implementation with the ImageNet constants: size-agnostic corruptions whose
    imagecorruptions version differs from the reference only in the constants."""
    import torch

    from .api import _IMPL
    from .registry import get_spec

    spec = get_spec(name)
    rng = _keyed(name, severity, seed, index) if spec.random else None
    x = torch.from_numpy(np.array(img[None]))  # a writable copy
    out = _IMPL[name](x, spec.param(severity, "imagenet"), rng)
    return np.asarray(out[0].cpu().numpy(), dtype=np.uint8)


def clipped_zoom(img: np.ndarray, zoom: float) -> np.ndarray:
    """imagecorruptions' clipped zoom: a centre crop of ceil(side / zoom) on each axis, SciPy's order-1 zoom by
    ``zoom`` on both axes, then the top-left H x W (no centred trim)."""
    from scipy.ndimage import zoom as scizoom

    h, w = img.shape[:2]
    ch, cw = int(np.ceil(h / zoom)), int(np.ceil(w / zoom))
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = img[top:top + ch, left:left + cw]
    out = scizoom(crop, (zoom, zoom) + (1,) * (img.ndim - 2), order=1)
    return out[:h, :w]


def pixelate_apply(img: np.ndarray, c: float) -> np.ndarray:
    """PIL BOX down to int(W c) x int(H c), NEAREST back up (imagecorruptions' upsampling)."""
    from PIL import Image

    h, w = img.shape[:2]
    small = Image.fromarray(img).resize((int(w * c), int(h * c)), Image.BOX)
    return np.asarray(small.resize((w, h), Image.NEAREST), dtype=np.uint8)


def defocus_apply(img: np.ndarray, params) -> np.ndarray:
    """OpenCV's ``filter2D`` of each float64 channel with the reference's disk kernel, as imagecorruptions calls it
    (OpenCV switches to a DFT for large kernels, whose rounding the suite's exact sums do not share)."""
    import cv2

    from .blur import defocus_kernel

    k = defocus_kernel(*params)
    x = img.astype(np.float64) / 255.0
    out = np.stack([cv2.filter2D(x[:, :, d], -1, k) for d in range(3)], axis=-1)
    return np.uint8(np.clip(out, 0, 1) * 255)


def frost_size(texture_hw, h: int, w: int) -> tuple[int, int]:
    """(width, height) ``cv2.resize`` gets for a texture of (th, tw) under an h x w image: scale 1 when the texture
    covers the image, else max(h / th, w / tw); times 1.1; rounded up."""
    th, tw = texture_hw
    s = (1.0 if (th >= h and tw >= w) else max(h / th, w / tw)) * 1.1  # (the product first: as observed)
    return int(np.ceil(tw * s)), int(np.ceil(th * s))


def frost_apply(img: np.ndarray, params, texture: np.ndarray, u_row: float, u_col: float) -> np.ndarray:
    """a * x + b * (a random H x W crop of the rescaled RGB texture), clipped, truncated; ``u_*`` in [0, 1) pick the
    crop start in [0, Ht - H) and [0, Wt - W), as ``randint`` does."""
    import cv2

    a, b = params
    h, w = img.shape[:2]
    tex = cv2.resize(texture, frost_size(texture.shape[:2], h, w), interpolation=cv2.INTER_CUBIC)
    r0 = min(int(u_row * (tex.shape[0] - h)), tex.shape[0] - h - 1)
    c0 = min(int(u_col * (tex.shape[1] - w)), tex.shape[1] - w - 1)
    crop = tex[r0:r0 + h, c0:c0 + w].astype(np.float64)
    return np.uint8(np.clip(a * img.astype(np.float64) + b * crop, 0, 255))


def _frost(img, severity, seed, index, frost=None):
    from .frost import FrostTextures, load_frost_textures

    if frost is None:
        frost = load_frost_textures()
    elif not isinstance(frost, FrostTextures):
        frost = load_frost_textures(frost)
    textures = frost.at_scale(1.0).textures  # the photographs as they are; rescaled per image size below
    u = _keyed("frost", severity, seed, index).uniform_cpu(3)[0]
    idx = min(int(u[0] * 5), 4)  # randint(5): frost1..frost5
    return frost_apply(img, CONSTANTS["imagenet"]["frost"][severity - 1], textures[idx], 1.0 - u[1], 1.0 - u[2])


def elastic_apply(img: np.ndarray, alpha: float, noise_dx: np.ndarray, noise_dy: np.ndarray) -> np.ndarray:
    """imagecorruptions' elastic transform given its two noise fields (U(+-0.005 H), H x W, dx first): each smoothed
    by a Gaussian of sigma 0.01 x (H, W) (mode reflect, truncate 3) and scaled by ``alpha``; the float32 image
    resampled at (row + dy, col + dx) with order-1 ``map_coordinates`` (mode reflect)."""
    from scipy.ndimage import gaussian_filter, map_coordinates

    h, w = img.shape[:2]
    sigma = np.array((h, w)) * 0.01
    dx = (gaussian_filter(noise_dx, sigma, mode="reflect", truncate=3) * alpha).astype(np.float32)
    dy = (gaussian_filter(noise_dy, sigma, mode="reflect", truncate=3) * alpha).astype(np.float32)
    x32 = img.astype(np.float32) / 255.0
    xs, ys, zs = np.meshgrid(np.arange(w), np.arange(h), np.arange(3))
    coords = (np.reshape(ys + dy[..., None], (-1, 1)), np.reshape(xs + dx[..., None], (-1, 1)),
              np.reshape(zs, (-1, 1)))
    out = map_coordinates(x32, coords, order=1, mode="reflect").reshape(x32.shape)
    return np.uint8(np.clip(out, 0, 1) * 255)


def _elastic(img, severity, seed, index):
    h, w = img.shape[:2]
    rng = _keyed("elastic_transform", severity, seed, index)
    bound = 0.005 * h
    fields = [(-bound + 2 * bound * rng.uniform_cpu(h * w, stream=s)[0]).reshape(h, w) for s in (1, 2)]
    return elastic_apply(img, ELASTIC_ALPHA[severity - 1], *fields)


def motion_blur_float(a: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """imagecorruptions' motion blur in float64: the one-sided Gaussian line kernel of ImageMagick (width
    2 ceil(radius) + 1) along ``angle`` with edge replication, without ImageMagick's 8-bit quantisation; the sum
    stops at the first tap whose shift reaches the image's height or width (as observed)."""
    from ._ops import im_motion_kernel, im_motion_offsets

    k = im_motion_kernel(radius, sigma)
    ox, oy = im_motion_offsets(len(k), np.array([float(angle)]))
    h, w = a.shape[:2]
    out = np.zeros(a.shape, np.float64)
    for i in range(len(k)):
        dy, dx = int(oy[0, i]), int(ox[0, i])
        if abs(dy) >= h or abs(dx) >= w:
            break
        rows = np.clip(np.arange(h) + dy, 0, h - 1)
        cols = np.clip(np.arange(w) + dx, 0, w - 1)
        out += k[i] * a[rows][:, cols]
    return out


def _motion(img, severity, seed, index):
    radius, sigma = CONSTANTS["imagenet"]["motion_blur"][severity - 1]
    angle = -45.0 + 90.0 * float(_keyed("motion_blur", severity, seed, index).uniform_cpu(1)[0, 0])
    return np.uint8(np.clip(motion_blur_float(img.astype(np.float64), radius, sigma, angle), 0, 255))


def snow_apply(img: np.ndarray, params, normal: np.ndarray, angle: float) -> np.ndarray:
    """imagecorruptions' snow given its standard-normal field (H x W) and streak angle (degrees): the layer
    N(mean, std) zoomed by :func:`clipped_zoom`, thresholded, clipped, motion blurred in float
    (:func:`motion_blur_float`) and rounded to 8 bits, added with its 180-degree rotation to the brightened
    image."""
    import cv2

    mean, std, zoom, thr, radius, sigma, blend = params
    h, w = img.shape[:2]
    x = img.astype(np.float32) / 255.0
    layer = clipped_zoom(mean + std * normal, zoom)
    layer[layer < thr] = 0
    streaks = np.round(motion_blur_float(np.clip(layer, 0, 1), radius, sigma, angle) * 255) / 255
    streaks = streaks[..., None]
    gray = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).reshape(h, w, 1)
    x = blend * x + (1 - blend) * np.maximum(x, gray * 1.5 + 0.5)
    return np.uint8(np.clip(x + streaks + np.rot90(streaks, k=2), 0, 1) * 255)


def _snow(img, severity, seed, index):
    from scipy.special import ndtri

    h, w = img.shape[:2]
    rng = _keyed("snow", severity, seed, index)
    normal = ndtri(rng.uniform_cpu(h * w, stream=1)[0]).reshape(h, w)
    angle = -135.0 + 90.0 * float(rng.uniform_cpu(1, stream=2)[0, 0])
    return snow_apply(img, CONSTANTS["imagenet"]["snow"][severity - 1], normal, angle)


_OWN: dict[str, Callable] = {"defocus_blur": lambda img, sev, seed, index: defocus_apply(
                                 img, CONSTANTS["imagenet"]["defocus_blur"][sev - 1]),
                             "frost": _frost, "motion_blur": _motion, "elastic_transform": _elastic, "snow": _snow,
                             "pixelate": lambda img, sev, seed, index: pixelate_apply(
                                 img, CONSTANTS["imagenet"]["pixelate"][sev - 1])}
_PIL_RESULT = ("pixelate", "jpeg_compression")


def _apply(name: str, img: np.ndarray, severity: int, seed, index: int, frost=None) -> np.ndarray:
    """uint8 (H, W, 3) result of one corruption on one RGB image."""
    seed = _fresh_seed() if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CompatTypeError(f"seed must be an integer or None, got {seed!r}")
    if name == "frost":
        return _frost(img, severity, seed, index, frost)
    if name in _OWN:
        return _OWN[name](img, severity, seed, index)
    return _suite(name, img, severity, seed, index)


def corrupt(image, severity: int = 1, corruption_name: str | None = None, corruption_number: int = -1, *,
            seed: int | None = None, index: int = 0, frost=None) -> np.ndarray:
    """imagecorruptions' ``corrupt``: one uint8 image (H, W), (H, W, 1) or (H, W, 3), at least 32x32, at
    ``severity`` 1..5 of ``corruption_name`` (or position ``corruption_number`` in :data:`corruption_tuple`) with
    the ImageNet-C constants; returns uint8 (H, W, 3). ``seed``, ``index``, ``frost``: see the module docstring."""
    img = _check_image(image)
    sev = _check_severity(severity)
    if corruption_name is not None:
        if corruption_name not in corruption_dict:
            raise CompatKeyError(corruption_name)
        name = corruption_name
    elif corruption_number != -1:
        try:
            name = ALL[corruption_number]
        except IndexError:
            raise CompatIndexError(f"corruption_number {corruption_number!r} is out of range "
                                   f"(0..{len(ALL) - 1})") from None
        except TypeError:
            raise CompatTypeError(f"corruption_number must be an integer, got {corruption_number!r}") from None
    else:
        raise CorruptionError("Either corruption_name or corruption_number must be passed")
    return _apply(name, img, sev, seed, index, frost)


def _function(name: str) -> Callable:
    def corruption(x, severity: int = 1, *, seed: int | None = None, index: int = 0, frost=None):
        out = _apply(name, _as_array(x), _check_severity(severity), seed, index, frost)
        if name in _PIL_RESULT:
            from PIL import Image

            return Image.fromarray(out)
        return out.astype(np.float64)

    corruption.__name__ = corruption.__qualname__ = name
    corruption.__doc__ = (f"imagecorruptions' ``{name}(x, severity=1)``: x a PIL image or uint8 array; returns "
                          + ("a PIL image." if name in _PIL_RESULT else "a float array of the 0..255 values."))
    return corruption


corruption_tuple: tuple = tuple(_function(n) for n in ALL)
corruption_dict: dict = {f.__name__: f for f in corruption_tuple}
