"""An independent port of the reference generators ``make_imagenet_c.py`` (224 px) and ``make_tinyimagenet_c.py``
(64 px) of hendrycks/robustness, for the fidelity tests. Written here from the published algorithms, with today's
library spellings (``channel_axis=-1`` for ``multichannel=True``, ``np.float64`` for ``np.float_``,
``np.frombuffer``), calling NumPy / SciPy / scikit-image / OpenCV / Pillow as the generators call them.

Every function takes a uint8 (S, S, 3) RGB image (S = the generator's size: 224 or 64), the severity constant and,
for the random ones, a ``np.random.RandomState``; it returns what the generator saves before the JPEG step:
``np.uint8(result)`` (truncation). Two steps the tests cannot run as the generators did are ported instead:

* ImageMagick's ``MotionBlurImage`` (motion_blur, snow; through Wand): its algorithm in NumPy (one-sided Gaussian
  line kernel of 2*ceil(radius)+1 taps, offsets ceil(i*cos - 0.5), edge pixels repeated, Q16 quantisation and
  8-bit output), as ``docs/CORRUPTIONS.md`` 2.8 describes it;
* the PNG round trips around it are lossless and left out.

The constants are typed here from the scripts, independently of ``corruptions.registry`` (a test compares them).
"""
from __future__ import annotations

import io
import math

import cv2
import numpy as np
from PIL import Image
from scipy.ndimage import map_coordinates
from scipy.ndimage import zoom as scizoom
from skimage import color as sk_color
from skimage import util as sk_util
from skimage.filters import gaussian

# ---------------------------------------------------------------------------------------------- constants

IN = {
    "gaussian_noise": [.08, .12, 0.18, 0.26, 0.38],
    "shot_noise": [60, 25, 12, 5, 3],
    "impulse_noise": [.03, .06, .09, 0.17, 0.27],
    "speckle_noise": [.15, .2, 0.35, 0.45, 0.6],
    "gaussian_blur": [1, 2, 3, 4, 6],
    "glass_blur": [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)],
    "defocus_blur": [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)],
    "motion_blur": [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)],
    "zoom_blur": [np.arange(1, 1.11, 0.01), np.arange(1, 1.16, 0.01), np.arange(1, 1.21, 0.02),
                  np.arange(1, 1.26, 0.02), np.arange(1, 1.31, 0.03)],
    "fog": [(1.5, 2), (2, 2), (2.5, 1.7), (2.5, 1.5), (3, 1.4)],
    "frost": [(1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)],
    "snow": [(0.1, 0.3, 3, 0.5, 10, 4, 0.8), (0.2, 0.3, 2, 0.5, 12, 4, 0.7), (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
             (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)],
    "spatter": [(0.65, 0.3, 4, 0.69, 0.6, 0), (0.65, 0.3, 3, 0.68, 0.6, 0), (0.65, 0.3, 2, 0.68, 0.5, 0),
                (0.65, 0.3, 1, 0.65, 1.5, 1), (0.67, 0.4, 1, 0.65, 1.5, 1)],
    "contrast": [0.4, .3, .2, .1, .05],
    "brightness": [.1, .2, .3, .4, .5],
    "saturate": [(0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2)],
    "jpeg_compression": [25, 18, 15, 10, 7],
    "pixelate": [0.6, 0.5, 0.4, 0.3, 0.25],
    "elastic_transform": [(244 * 2, 244 * 0.7, 244 * 0.1), (244 * 2, 244 * 0.08, 244 * 0.2),
                          (244 * 0.05, 244 * 0.01, 244 * 0.02), (244 * 0.07, 244 * 0.01, 244 * 0.02),
                          (244 * 0.12, 244 * 0.01, 244 * 0.02)],
}
TIN = {
    "gaussian_noise": [0.04, 0.08, .12, .15, .18],
    "shot_noise": [250, 100, 50, 30, 15],
    "impulse_noise": [.01, .02, .05, .08, .14],
    "speckle_noise": [.15, .2, 0.25, 0.3, 0.35],
    "gaussian_blur": [.5, .75, 1, 1.25, 1.5],
    "glass_blur": [(0.1, 1, 1), (0.5, 1, 1), (0.6, 1, 2), (0.7, 2, 1), (0.9, 2, 2)],
    "defocus_blur": [(0.5, 0.6), (1, 0.1), (1.5, 0.1), (2.5, 0.01), (3, 0.1)],
    "motion_blur": [(10, 1), (10, 1.5), (10, 2), (10, 2.5), (12, 3)],
    "zoom_blur": [np.arange(1, 1.06, 0.01), np.arange(1, 1.11, 0.01), np.arange(1, 1.16, 0.01),
                  np.arange(1, 1.21, 0.01), np.arange(1, 1.26, 0.01)],
    "fog": [(.4, 3), (.7, 3), (1, 2.5), (1.5, 2), (2, 1.75)],
    "frost": [(1, 0.3), (0.9, 0.4), (0.8, 0.45), (0.75, 0.5), (0.7, 0.55)],
    "snow": [(0.1, 0.2, 1, 0.6, 8, 3, 0.8), (0.1, 0.2, 1, 0.5, 10, 4, 0.8), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.7),
             (0.25, 0.3, 2.25, 0.6, 12, 6, 0.65), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.6)],
    "spatter": [(0.62, 0.1, 0.7, 0.7, 0.6, 0), (0.65, 0.1, 0.8, 0.7, 0.6, 0), (0.65, 0.3, 1, 0.69, 0.6, 0),
                (0.65, 0.1, 0.7, 0.68, 0.6, 1), (0.65, 0.1, 0.5, 0.67, 0.6, 1)],
    "contrast": [.4, .3, .2, .1, 0.05],
    "brightness": [.1, .2, .3, .4, .5],
    "saturate": [(0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (30, 0.2)],
    "jpeg_compression": [65, 58, 50, 40, 25],
    "pixelate": [0.9, 0.8, 0.7, 0.6, 0.5],
    "elastic_transform": [(64 * 0, 64 * 0, 64 * 0.08), (64 * 0.05, 64 * 0.3, 64 * 0.06),
                          (64 * 0.1, 64 * 0.08, 64 * 0.06), (64 * 0.1, 64 * 0.03, 64 * 0.03),
                          (64 * 0.16, 64 * 0.03, 64 * 0.02)],
}
TABLES = {224: IN, 64: TIN}
FROST_SCALE = {224: None, 64: 0.3}  # ImageNet crops the photograph itself; Tiny-ImageNet resizes it x0.3 first


# ---------------------------------------------------------------------------------------------- input steps


def imagenet_input(im: Image.Image) -> np.ndarray:
    """torchvision Resize(256) then CenterCrop(224) of a PIL image (int(256 * long / short); round((H-224)/2))."""
    w, h = im.size
    if (w <= h and w != 256) or (h <= w and h != 256):
        im = im.resize((256, int(256 * h / w)) if w < h else (int(256 * w / h), 256), Image.BILINEAR)
    w, h = im.size
    top, left = int(round((h - 224) / 2.0)), int(round((w - 224) / 2.0))
    return np.asarray(im.crop((left, top, left + 224, top + 224)))


def tiny_input(im: Image.Image) -> np.ndarray:
    """torchvision Resize((64, 64)) of a PIL image."""
    return np.asarray(im.resize((64, 64), Image.BILINEAR))


def save_jpeg85(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.uint8(x)).save(buf, format="JPEG", quality=85, optimize=True)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- helpers


def disk(radius, alias_blur):
    if radius <= 8:
        ax, ksize = np.arange(-8, 8 + 1), (3, 3)
    else:
        ax, ksize = np.arange(-radius, radius + 1), (5, 5)
    xx, yy = np.meshgrid(ax, ax)
    k = np.array((xx ** 2 + yy ** 2) <= radius ** 2, dtype=np.float32)
    k /= np.sum(k)
    return cv2.GaussianBlur(k, ksize=ksize, sigmaX=alias_blur)


def clipped_zoom(img, z):
    h = img.shape[0]
    ch = int(np.ceil(h / z))
    top = (h - ch) // 2
    img = scizoom(img[top:top + ch, top:top + ch], (z, z, 1), order=1)
    trim = (img.shape[0] - h) // 2
    return img[trim:trim + h, trim:trim + h]


def plasma_fractal(rs, mapsize, wibbledecay):
    m = np.empty((mapsize, mapsize), dtype=np.float64)
    m[0, 0] = 0
    step, wibble = mapsize, 100.0

    def wibbled(a):
        return a / 4 + wibble * rs.uniform(-wibble, wibble, a.shape)

    while step >= 2:
        corner = m[0:mapsize:step, 0:mapsize:step]
        sq = corner + np.roll(corner, shift=-1, axis=0)
        sq += np.roll(sq, shift=-1, axis=1)
        m[step // 2:mapsize:step, step // 2:mapsize:step] = wibbled(sq)
        dr, ul = m[step // 2:mapsize:step, step // 2:mapsize:step], m[0:mapsize:step, 0:mapsize:step]
        m[0:mapsize:step, step // 2:mapsize:step] = wibbled(
            (dr + np.roll(dr, 1, axis=0)) + (ul + np.roll(ul, -1, axis=1)))
        m[step // 2:mapsize:step, 0:mapsize:step] = wibbled(
            (dr + np.roll(dr, 1, axis=1)) + (ul + np.roll(ul, -1, axis=0)))
        step //= 2
        wibble /= wibbledecay
    m -= m.min()
    return m / m.max()


def im_motion_blur(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """ImageMagick MotionBlurImage of a uint8 (H, W[, C]) image, 8-bit out (see the module notes)."""
    width = 2 * int(math.ceil(radius)) + 1
    k = np.array([math.exp(-(i * i) / (2.0 * sigma * sigma)) / (2.5066282746310002 * sigma) for i in range(width)])
    k = k / k.sum()
    rad = math.pi * angle / 180.0
    px, py = width * math.sin(rad), width * math.cos(rad)
    hyp = math.hypot(px, py)
    h, w = img.shape[:2]
    acc = np.zeros(img.shape, np.float64)
    src = img.astype(np.float64) * 257.0
    for i in range(width):
        ox, oy = math.ceil(i * py / hyp - 0.5), math.ceil(i * px / hyp - 0.5)
        rows = np.clip(np.arange(h) + oy, 0, h - 1)
        cols = np.clip(np.arange(w) + ox, 0, w - 1)
        acc += k[i] * src[rows][:, cols]
    q = np.floor(np.clip(acc, 0, 65535) + 0.5)
    return (q // 257).astype(np.uint8)


# ---------------------------------------------------------------------------------------------- corruptions


def gaussian_noise(x, c, rs):
    x = np.array(x) / 255.
    return np.uint8(np.clip(x + rs.normal(size=x.shape, scale=c), 0, 1) * 255)


def shot_noise(x, c, rs):
    x = np.array(x) / 255.
    return np.uint8(np.clip(rs.poisson(x * c) / float(c), 0, 1) * 255)


def impulse_noise(x, c, rs):
    x = sk_util.random_noise(np.array(x) / 255., mode='s&p', amount=c, rng=rs.randint(2 ** 31))
    return np.uint8(np.clip(x, 0, 1) * 255)


def speckle_noise(x, c, rs):
    x = np.array(x) / 255.
    return np.uint8(np.clip(x + x * rs.normal(size=x.shape, scale=c), 0, 1) * 255)


def gaussian_blur(x, c, rs=None):
    return np.uint8(np.clip(gaussian(np.array(x) / 255., sigma=c, channel_axis=-1), 0, 1) * 255)


def glass_shuffle(x, d, iterations, draw):
    """The generators' loop literally: ``draw()`` gives (dx, dy) as ``np.random.randint(-d, d, size=(2,))``."""
    x = x.copy()
    s = x.shape[0]
    for _ in range(iterations):
        for h in range(s - d, d, -1):
            for w in range(s - d, d, -1):
                dx, dy = draw(h, w)
                hp, wp = h + dy, w + dx
                x[h, w], x[hp, wp] = x[hp, wp], x[h, w]
    return x


def glass_blur(x, c, rs, draw=None):
    x = np.uint8(gaussian(np.array(x) / 255., sigma=c[0], channel_axis=-1) * 255)
    x = glass_shuffle(x, c[1], c[2], draw or (lambda h, w: rs.randint(-c[1], c[1], size=(2,))))
    return np.uint8(np.clip(gaussian(x / 255., sigma=c[0], channel_axis=-1), 0, 1) * 255)


def defocus_blur(x, c, rs=None):
    x = np.array(x) / 255.
    k = disk(radius=c[0], alias_blur=c[1])
    ch = np.array([cv2.filter2D(x[:, :, d], -1, k) for d in range(3)]).transpose((1, 2, 0))
    return np.uint8(np.clip(ch, 0, 1) * 255)


def motion_blur(x, c, rs):
    return im_motion_blur(np.asarray(x), c[0], c[1], rs.uniform(-45, 45))


def zoom_blur(x, c, rs=None):
    x = (np.array(x) / 255.).astype(np.float32)
    out = np.zeros_like(x)
    for z in c:
        out += clipped_zoom(x, z)
    return np.uint8(np.clip((x + out) / (len(c) + 1), 0, 1) * 255)


def fog(x, c, rs):
    s = x.shape[0]
    x = np.array(x) / 255.
    max_val = x.max()
    mapsize = 256 if s == 224 else s
    x += c[0] * plasma_fractal(rs, mapsize, c[1])[:s, :s][..., np.newaxis]
    return np.uint8(np.clip(x * max_val / (max_val + c[0]), 0, 1) * 255)


def frost(x, c, rs, photos):
    """``photos``: the five frost photographs as ``cv2.imread`` gives them (BGR)."""
    s = x.shape[0]
    f = photos[rs.randint(5)]
    if FROST_SCALE[s] is not None:
        f = cv2.resize(f, (0, 0), fx=FROST_SCALE[s], fy=FROST_SCALE[s])
    r0, c0 = rs.randint(0, f.shape[0] - s), rs.randint(0, f.shape[1] - s)
    f = f[r0:r0 + s, c0:c0 + s][..., [2, 1, 0]]
    return np.uint8(np.clip(c[0] * np.array(x) + c[1] * f, 0, 255))


def snow(x, c, rs):
    s = x.shape[0]
    x = np.array(x, dtype=np.float32) / 255.
    layer = rs.normal(size=x.shape[:2], loc=c[0], scale=c[1])
    layer = clipped_zoom(layer[..., np.newaxis], c[2])
    layer[layer < c[3]] = 0
    layer = (np.clip(layer.squeeze(), 0, 1) * 255).astype(np.uint8)
    layer = im_motion_blur(layer, c[4], c[5], rs.uniform(-135, -45)) / 255.
    layer = layer[..., np.newaxis]
    x = c[6] * x + (1 - c[6]) * np.maximum(x, cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).reshape(s, s, 1) * 1.5 + 0.5)
    return np.uint8(np.clip(x + layer + np.rot90(layer, k=2), 0, 1) * 255)


def spatter(x, c, rs):
    x = np.array(x, dtype=np.float32) / 255.
    liquid = rs.normal(size=x.shape[:2], loc=c[0], scale=c[1])
    liquid = gaussian(liquid, sigma=c[2])
    liquid[liquid < c[3]] = 0
    if c[5] == 0:
        liquid = (liquid * 255).astype(np.uint8)
        dist = 255 - cv2.Canny(liquid, 50, 150)
        dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
        _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
        dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
        dist = cv2.equalizeHist(dist)
        dist = cv2.filter2D(dist, cv2.CV_8U, np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]]))
        dist = cv2.blur(dist, (3, 3)).astype(np.float32)
        m = cv2.cvtColor(liquid * dist, cv2.COLOR_GRAY2BGRA)
        m /= np.max(m, axis=(0, 1))
        m *= c[4]
        color = np.concatenate((175 / 255. * np.ones_like(m[..., :1]), 238 / 255. * np.ones_like(m[..., :1]),
                                238 / 255. * np.ones_like(m[..., :1])), axis=2)
        color = cv2.cvtColor(color, cv2.COLOR_BGR2BGRA)
        x = cv2.cvtColor(x, cv2.COLOR_BGR2BGRA)
        return np.uint8(cv2.cvtColor(np.clip(x + m * color, 0, 1), cv2.COLOR_BGRA2BGR) * 255)
    m = np.where(liquid > c[3], 1, 0)
    m = gaussian(m.astype(np.float32), sigma=c[4])
    m[m < 0.8] = 0
    color = np.concatenate((63 / 255. * np.ones_like(x[..., :1]), 42 / 255. * np.ones_like(x[..., :1]),
                            20 / 255. * np.ones_like(x[..., :1])), axis=2)
    color *= m[..., np.newaxis]
    x *= (1 - m[..., np.newaxis])
    return np.uint8(np.clip(x + color, 0, 1) * 255)


def contrast(x, c, rs=None):
    x = np.array(x) / 255.
    means = np.mean(x, axis=(0, 1), keepdims=True)
    return np.uint8(np.clip((x - means) * c + means, 0, 1) * 255)


def brightness(x, c, rs=None):
    x = sk_color.rgb2hsv(np.array(x) / 255.)
    x[:, :, 2] = np.clip(x[:, :, 2] + c, 0, 1)
    return np.uint8(np.clip(sk_color.hsv2rgb(x), 0, 1) * 255)


def saturate(x, c, rs=None):
    x = sk_color.rgb2hsv(np.array(x) / 255.)
    x[:, :, 1] = np.clip(x[:, :, 1] * c[0] + c[1], 0, 1)
    return np.uint8(np.clip(sk_color.hsv2rgb(x), 0, 1) * 255)


def jpeg_compression(x, c, rs=None):
    buf = io.BytesIO()
    Image.fromarray(x).save(buf, 'JPEG', quality=c)
    return np.uint8(Image.open(buf))


def pixelate(x, c, rs=None):
    s = x.shape[0]
    im = Image.fromarray(x).resize((int(s * c), int(s * c)), Image.BOX)
    return np.uint8(im.resize((s, s), Image.BOX))


def elastic_transform(image, c, rs):
    image = np.array(image, dtype=np.float32) / 255.
    shape = image.shape
    size = shape[:2]
    center, square = np.float32(size) // 2, min(size) // 3
    pts1 = np.float32([center + square, [center[0] + square, center[1] - square], center - square])
    pts2 = pts1 + rs.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
    image = cv2.warpAffine(image, cv2.getAffineTransform(pts1, pts2), size[::-1], borderMode=cv2.BORDER_REFLECT_101)
    dx = (gaussian(rs.uniform(-1, 1, size=size), c[1], mode='reflect', truncate=3) * c[0]).astype(np.float32)
    dy = (gaussian(rs.uniform(-1, 1, size=size), c[1], mode='reflect', truncate=3) * c[0]).astype(np.float32)
    dx, dy = dx[..., np.newaxis], dy[..., np.newaxis]
    xx, yy, zz = np.meshgrid(np.arange(shape[1]), np.arange(shape[0]), np.arange(shape[2]))
    idx = np.reshape(yy + dy, (-1, 1)), np.reshape(xx + dx, (-1, 1)), np.reshape(zz, (-1, 1))
    return np.uint8(np.clip(map_coordinates(image, idx, order=1, mode='reflect').reshape(shape), 0, 1) * 255)


CORRUPTIONS = {f.__name__: f for f in (
    gaussian_noise, shot_noise, impulse_noise, speckle_noise, gaussian_blur, glass_blur, defocus_blur, motion_blur,
    zoom_blur, fog, frost, snow, spatter, contrast, brightness, saturate, jpeg_compression, pixelate,
    elastic_transform)}
DETERMINISTIC = ("gaussian_blur", "defocus_blur", "zoom_blur", "contrast", "brightness", "saturate",
                 "jpeg_compression", "pixelate")
