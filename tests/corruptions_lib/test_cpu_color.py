"""The compiled CPU kernels (corruptions/_cpu_color.py) against the torch implementations they replace on
the CPU (which remain the CUDA path): called directly on CPU tensors, both must give the same bytes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import corruptions as C
from corruptions import digital, noise, weather
from corruptions.rng import KeyedRandom

P = {name: spec.params for name, spec in C.CORRUPTIONS.items()}


def _colour_images(step: int = 61) -> torch.Tensor:
    """Every ``step``-th of the 2**24 RGB colours, plus ties for the maximum, greys and extremes, as
    32x32 images: all of skimage's HSV branches, hue sectors and clipping cases."""
    allc = np.arange(0, 1 << 24, step, dtype=np.int64)
    px = [np.stack([(allc >> 16) & 255, (allc >> 8) & 255, allc & 255], -1)]
    a, b = np.meshgrid(np.arange(256), np.arange(0, 256, 3))
    a, b = a.ravel(), b.ravel()
    px += [np.stack(t, -1) for t in ((a, a, b), (a, b, a), (b, a, a), (a, b, b), (a, a, a))]
    px = np.concatenate(px).astype(np.uint8)
    px = np.concatenate([px, px[: (-len(px)) % 1024]])
    return torch.from_numpy(px.reshape(-1, 32, 32, 3))


def _random_images(n: int = 96, seed: int = 0, shape=(32, 32)) -> torch.Tensor:
    g = np.random.default_rng(seed)
    return torch.from_numpy(g.integers(0, 256, (n, *shape, 3)).astype(np.uint8))


@pytest.fixture(scope="module")
def colours() -> torch.Tensor:
    return _colour_images()


@pytest.mark.parametrize("sev", range(1, 6))
def test_brightness_kernel_equals_torch(colours, sev):
    c = P["brightness"][sev - 1]
    for x in (colours, _random_images(3, 5, (9, 13))):  # the second ends in a partial block of pixels
        assert torch.equal(weather.brightness(x, c), weather.brightness_torch(x, c))


@pytest.mark.parametrize("sev", range(1, 6))
def test_saturate_kernel_equals_torch(colours, sev):
    p = P["saturate"][sev - 1]
    for x in (colours, _random_images(3, 5, (9, 13))):
        assert torch.equal(digital.saturate(x, p), digital.saturate_torch(x, p))


def _every_byte_images(n: int = 64) -> torch.Tensor:
    """n images holding every byte value equally often (all 256 rows of the noise tables)."""
    g = np.random.default_rng(1)
    return torch.from_numpy(g.permutation(np.arange(n * 32 * 32 * 3) % 256).astype(np.uint8).reshape(n, 32, 32, 3))


@pytest.mark.parametrize("name,tables", [("gaussian_noise", noise._gaussian_tables),
                                         ("shot_noise", noise._shot_tables),
                                         ("speckle_noise", noise._speckle_tables)])
def test_alias_sample_kernel_equals_torch(name, tables):
    x = _every_byte_images()
    for sev, c in enumerate(P[name], 1):
        rng = KeyedRandom(3, name, sev, np.arange(100, 100 + len(x)))
        sampler = tables(c)
        assert torch.equal(sampler.sample(x, rng), sampler.sample_torch(x, rng)), sev


def test_impulse_kernel_equals_torch():
    x = _every_byte_images()
    for sev, c in enumerate(P["impulse_noise"], 1):
        rng = KeyedRandom(3, "impulse_noise", sev, np.arange(len(x)))
        assert torch.equal(noise.impulse_noise(x, c, rng), noise.impulse_noise_torch(x, c, rng)), sev


def test_contrast_kernel_equals_torch(colours):
    flats = torch.stack([torch.full((32, 32, 3), v, dtype=torch.uint8) for v in (0, 1, 127, 128, 254, 255)])
    for x in (colours[:200], flats, _random_images(), _random_images(8, 1, (28, 40))):
        for c in P["contrast"]:
            assert torch.equal(digital.contrast(x, c), digital.contrast_torch(x, c)), (tuple(x.shape), c)
    x4 = _random_images(6, 6, (32, 32)).repeat(1, 1, 1, 2)[..., :4].contiguous()  # the channel-generic sums
    assert torch.equal(digital.contrast(x4, 0.3), digital.contrast_torch(x4, 0.3))


def _pixelate_torch(x: torch.Tensor, c: float) -> torch.Tensor:
    _, h, w, _ = x.shape
    small = digital.pil_resize_box_torch(x, int(h * c), int(w * c))
    return digital.pil_resize_box_torch(small, h, w)


def test_pixelate_kernel_equals_torch(colours):
    for x in (colours[:300], _random_images(), _random_images(5, 2, (28, 40)), _random_images(3, 3, (9, 64))):
        for c in P["pixelate"]:
            assert torch.equal(digital.pixelate(x, c), _pixelate_torch(x, c)), (tuple(x.shape), c)


@pytest.mark.parametrize("size", [(32, 32), (20, 32), (32, 20), (17, 23), (45, 64), (8, 8), (32, 31)])
def test_box_resize_kernel_equals_torch(size):
    x = _random_images(7, 4, (32, 32))
    assert torch.equal(digital.pil_resize_box(x, *size), digital.pil_resize_box_torch(x, *size))


def test_box_resize_kernel_other_channel_counts():
    g = np.random.default_rng(8)
    for c in (1, 4, 6):  # 6: two groups of packed channels
        x = torch.from_numpy(g.integers(0, 256, (5, 32, 32, c)).astype(np.uint8))
        assert torch.equal(digital.pil_resize_box(x, 21, 27), digital.pil_resize_box_torch(x, 21, 27))


def _uniform(m: int) -> float:
    """The float64 uniform of a 53-bit draw m, as corruptions.rng.uniform_from_keys computes it."""
    return (float(m) + 0.5) * 2.0**-53


def test_uniform_threshold_is_the_float_comparison():
    # u(m) < t exactly when m < threshold, at both sides of every threshold, incl. where m + 0.5 rounds (m >= 2**52)
    from corruptions._cpu_color import uniform_threshold
    for t in (0.015, 0.03, 0.135, 0.27, 0.5, 0.5 + 2.0**-53, 0.7, 1.0 - 2.0**-53, 1.0, 2.0**-60):
        thr = uniform_threshold(t)
        for m in (thr - 2, thr - 1, thr, thr + 1):
            if 0 <= m < 1 << 53:
                assert (_uniform(m) < t) == (m < thr), (t, m)
    assert uniform_threshold(1.5) == 1 << 53 and uniform_threshold(0.0) == 0


def test_alias_kernel_decisions_match_the_float_test_at_the_edges():
    # the integer test of alias_keyed_kernel against sample_torch's float arithmetic, for draws placed on both sides
    # of each threshold, below and above 2**52 (where m + 0.5 rounds), and the largest draw (u = 1.0)
    from corruptions._cpu_color import _scaled_draw, alias_thresholds
    g = np.random.default_rng(0)
    probs = np.concatenate([g.random(200), [0.0, 1.0, 2.0**-50, 1 - 2.0**-52]])
    thr = alias_thresholds(probs)
    for p, t in zip(probs, thr):
        for k in (3, 200, 255):
            for f_units in {max(int(t) - 1, 0), int(t), int(t) + 1}:
                for m in ((k << 45) + f_units // 2, (k << 45) + f_units // 2 + (1 << 52) * (k < 128)):
                    m = min(m, (1 << 53) - 1)
                    q = _uniform(m) * 256.0
                    kf = min(int(np.floor(q)), 255)
                    float_keeps = (q - kf) < p
                    s = int(_scaled_draw(np.uint64(m)))
                    ki = min(s >> 46, 255)
                    assert ki == kf
                    assert (s - (ki << 46) < t) == float_keeps, (p, k, m)
    s = int(_scaled_draw(np.uint64((1 << 53) - 1)))
    assert min(s >> 46, 255) == 255 and s - (255 << 46) >= alias_thresholds(np.array([1.0]))[0]


def _pillow_images(n: int, shape, seed: int) -> np.ndarray:
    """Random bytes with flat black and white blocks (clip8 at both ends)."""
    x = np.random.default_rng(seed).integers(0, 256, (n, *shape, 3)).astype(np.uint8)
    x[:, : shape[0] // 3, : shape[1] // 3] = 0
    x[:, -(shape[0] // 3):, -(shape[1] // 3):] = 255
    return x


@pytest.mark.parametrize("shape", [(37, 53), (53, 37), (224, 224), (64, 64), (32, 32), (31, 224)])
def test_pixelate_kernel_equals_pillow(shape):
    """The CPU path against Pillow itself: BOX down to int(size * c), then back, for the severities of every
    regime, on sizes with odd and unequal sides."""
    h, w = shape
    x = _pillow_images(2 if h * w > 10000 else 6, shape, h * w)
    cs = sorted({c for table in C.CORRUPTIONS["pixelate"].constants.values() for c in table})
    for c in cs:
        ours = digital.pixelate(torch.from_numpy(x), c).numpy()
        pil = np.stack([np.asarray(Image.fromarray(im).resize((int(w * c), int(h * c)), Image.BOX)
                                   .resize((w, h), Image.BOX)) for im in x])
        assert np.array_equal(ours, pil), (shape, c)


@pytest.mark.parametrize("size_in,size_out", [((37, 53), (20, 61)), ((224, 224), (134, 112)), ((17, 23), (45, 64)),
                                              ((32, 31), (8, 8)), ((9, 64), (9, 5)), ((40, 28), (40, 28))])
def test_box_resize_kernel_equals_pillow(size_in, size_out):
    """``pil_resize_box`` on the CPU against ``Image.resize(..., Image.BOX)``, RGB and grayscale, down and up."""
    x = _pillow_images(3, size_in, 7)
    (oh, ow), grey = size_out, np.ascontiguousarray(x[..., :1])
    ours = digital.pil_resize_box(torch.from_numpy(x), oh, ow).numpy()
    assert np.array_equal(ours, np.stack([np.asarray(Image.fromarray(im).resize((ow, oh), Image.BOX)) for im in x]))
    ours = digital.pil_resize_box(torch.from_numpy(grey), oh, ow).numpy()[..., 0]
    pil = np.stack([np.asarray(Image.fromarray(im[..., 0]).resize((ow, oh), Image.BOX)) for im in grey])
    assert np.array_equal(ours, pil)
