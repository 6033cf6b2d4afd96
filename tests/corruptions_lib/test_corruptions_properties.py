"""Faithfulness of the 19 CIFAR-C corruptions (docs/CORRUPTIONS.md).

* The 8 deterministic corruptions are compared bit for bit with straightforward implementations that call
  SciPy / scikit-image / OpenCV / PIL exactly as the reference script does.
* For the random ones, the deterministic core (given the same random draws) is compared with a literal
  reference port, and the checkable property of CORRUPTIONS.md §6 is tested on the public entry point.
* Distortion grows with severity on real CIFAR-10 images (skipped without ../shared/data).
"""
from __future__ import annotations

import io
import math

import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from scipy.ndimage import map_coordinates
from scipy.ndimage import zoom as scizoom

import corruptions as C
from corruptions import _ops, blur, digital, weather
from corruptions.frost import FROST_FILES, load_frost_textures
from corruptions.rng import KeyedRandom

sk_color = pytest.importorskip("skimage.color")
from skimage.filters import gaussian as sk_gaussian  # noqa: E402

P = {name: spec.params for name, spec in C.CORRUPTIONS.items()}


# ---------------------------------------------------------------------------------------------- inputs


def _synthetic() -> np.ndarray:
    rng = np.random.default_rng(7)
    flats = [np.full((32, 32, 3), v, np.uint8) for v in (0, 1, 77, 128, 254, 255)]
    ramp = np.tile((np.arange(32, dtype=np.uint8) * 8)[None, :, None], (32, 1, 3))
    noise_imgs = list(rng.integers(0, 256, (10, 32, 32, 3)).astype(np.uint8))
    blocks = np.kron(rng.integers(0, 256, (6, 4, 4, 3)), np.ones((1, 8, 8, 1))).astype(np.uint8)
    grey = np.repeat(rng.integers(0, 256, (3, 32, 32, 1)), 3, axis=-1).astype(np.uint8)
    return np.stack(flats + [ramp, ramp.transpose(1, 0, 2)] + noise_imgs + list(blocks) + list(grey))


SYN = _synthetic()


@pytest.fixture(scope="module")
def cifar(shared_data) -> np.ndarray:
    path = shared_data / "cifar10" / "cifar10-test-exact-first1017.npz"
    if not path.is_file():
        pytest.skip("CIFAR-10 exact test subset not available")
    return np.load(path)["x"]


@pytest.fixture(scope="module")
def frost_real(shared_data):
    d = shared_data / "corruptions" / "frost"
    if not all((d / f).is_file() for f in FROST_FILES):
        pytest.skip("frost textures not available")
    return load_frost_textures(d)


# ---------------------------------------------------------------------------------------------- references
# Each is the reference script's function body, with today's library spellings (channel_axis=-1 for
# multichannel=True) and the random draws passed in where the function is random.


def ref_gaussian_blur(x, c):
    return np.uint8(np.clip(sk_gaussian(np.array(x) / 255.0, sigma=c, channel_axis=-1), 0, 1) * 255)


def ref_disk(radius, alias_blur):
    ax = np.arange(-8, 8 + 1)
    xx, yy = np.meshgrid(ax, ax)
    d = np.array((xx**2 + yy**2) <= radius**2, dtype=np.float32)
    d /= np.sum(d)
    return cv2.GaussianBlur(d, ksize=(3, 3), sigmaX=alias_blur)


def ref_defocus_blur(x, c):
    x = np.array(x) / 255.0
    k = ref_disk(*c)
    ch = np.array([cv2.filter2D(x[:, :, d], -1, k) for d in range(3)]).transpose((1, 2, 0))
    return np.uint8(np.clip(ch, 0, 1) * 255)


def ref_clipped_zoom(img, zf):
    h = img.shape[0]
    ch = int(np.ceil(h / zf))
    top = (h - ch) // 2
    img = scizoom(img[top : top + ch, top : top + ch], (zf, zf, 1), order=1)
    t = (img.shape[0] - h) // 2
    return img[t : t + h, t : t + h]


def ref_zoom_blur(x, c):
    x = (np.array(x) / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    for z in c:
        out += ref_clipped_zoom(x, z)
    return np.uint8(np.clip((x + out) / (len(c) + 1), 0, 1) * 255)


def ref_contrast(x, c):
    x = np.array(x) / 255.0
    m = np.mean(x, axis=(0, 1), keepdims=True)
    return np.uint8(np.clip((x - m) * c + m, 0, 1) * 255)


def ref_brightness(x, c):
    x = sk_color.rgb2hsv(np.array(x) / 255.0)
    x[:, :, 2] = np.clip(x[:, :, 2] + c, 0, 1)
    return np.uint8(np.clip(sk_color.hsv2rgb(x), 0, 1) * 255)


def ref_saturate(x, c):
    x = sk_color.rgb2hsv(np.array(x) / 255.0)
    x[:, :, 1] = np.clip(x[:, :, 1] * c[0] + c[1], 0, 1)
    return np.uint8(np.clip(sk_color.hsv2rgb(x), 0, 1) * 255)


def ref_jpeg(x, q):
    buf = io.BytesIO()
    Image.fromarray(x).save(buf, "JPEG", quality=q)
    return np.uint8(Image.open(buf))


def ref_pixelate(x, c):
    im = Image.fromarray(x)
    im = im.resize((int(32 * c), int(32 * c)), Image.BOX)
    return np.uint8(im.resize((32, 32), Image.BOX))


REFERENCE = {
    "gaussian_blur": ref_gaussian_blur,
    "defocus_blur": ref_defocus_blur,
    "zoom_blur": ref_zoom_blur,
    "contrast": ref_contrast,
    "brightness": ref_brightness,
    "saturate": ref_saturate,
    "jpeg_compression": ref_jpeg,
    "pixelate": ref_pixelate,
}


def ref_glass_shuffle(x, choices):
    """The reference loop, literally (tuple assignment on NumPy views), with given draws."""
    x = x.copy()
    h, w = x.shape[:2]
    for it in range(choices.shape[0]):
        for hh in range(h - 1, 1, -1):
            for ww in range(w - 1, 1, -1):
                ch = int(choices[it, hh - 2, ww - 2])
                dx, dy = -(ch & 1), -(ch >> 1)
                hp, wp = hh + dy, ww + dx
                x[hh, ww], x[hp, wp] = x[hp, wp], x[hh, ww]
    return x


def ref_glass_blur(x, c, choices):
    x = np.uint8(sk_gaussian(np.array(x) / 255.0, sigma=c[0], channel_axis=-1) * 255)
    x = ref_glass_shuffle(x, choices)
    return np.uint8(np.clip(sk_gaussian(x / 255.0, sigma=c[0], channel_axis=-1), 0, 1) * 255)


def ref_im_motion_blur(img, radius, sigma, angle):
    """Per-pixel port of ImageMagick's MotionBlurImage (Q16, 8-bit PNG out), edge virtual pixels."""
    width = 2 * int(math.ceil(radius)) + 1
    k = [math.exp(-(i * i) / (2.0 * sigma * sigma)) / (2.50662827463100024161 * sigma) for i in range(width)]
    norm = sum(k)
    k = [v / norm for v in k]
    rad = math.pi * angle / 180.0
    px, py = width * math.sin(rad), width * math.cos(rad)
    hyp = math.hypot(px, py)
    offs = [(math.ceil(i * py / hyp - 0.5), math.ceil(i * px / hyp - 0.5)) for i in range(width)]
    h, w = img.shape[:2]
    out = np.zeros(img.shape, np.uint8)
    for y in range(h):
        for x in range(w):
            acc = np.zeros(img.shape[2])
            for i, (ox, oy) in enumerate(offs):
                p = img[min(max(y + oy, 0), h - 1), min(max(x + ox, 0), w - 1)].astype(np.float64) * 257
                acc = acc + k[i] * p
            q = np.floor(np.clip(acc, 0, 65535) + 0.5)
            out[y, x] = np.floor(q * 255 / 65535).astype(np.uint8)
    return out


def ref_plasma(u, mapsize, wibbledecay):
    """The reference plasma_fractal, consuming the given uniforms in our order (squares, then the two
    diamond families, row-major, per step)."""
    maparray = np.zeros((mapsize, mapsize))
    stepsize, wibble, pos = mapsize, 100.0, [0]

    def wibbledmean(array):
        k = array.size
        r = u[pos[0] : pos[0] + k].reshape(array.shape)
        pos[0] += k
        return array / 4 + wibble * (-wibble + (wibble - -wibble) * r)

    while stepsize >= 2:
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(squareaccum)
        drgrid = maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = (drgrid + np.roll(drgrid, 1, axis=0)) + (ulgrid + np.roll(ulgrid, -1, axis=1))
        maparray[0:mapsize:stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(ltsum)
        ttsum = (drgrid + np.roll(drgrid, 1, axis=1)) + (ulgrid + np.roll(ulgrid, -1, axis=0))
        maparray[stepsize // 2 : mapsize : stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


def _krandom(name, sev, n, seed=0):
    return KeyedRandom(seed, name, sev, np.arange(n))


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


# ---------------------------------------------------------------------------------------------- deterministic: bit for bit


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_deterministic_bit_exact_synthetic(name):
    for s in range(1, 6):
        ours = C.corrupt(SYN, name, s)
        ref = np.stack([REFERENCE[name](im, P[name][s - 1]) for im in SYN])
        assert np.array_equal(ours, ref), f"{name} s{s}: {(ours != ref).sum()} values differ"


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_deterministic_bit_exact_cifar(cifar, name):
    x = cifar[:80]
    for s in range(1, 6):
        ours = C.corrupt(x, name, s)
        ref = np.stack([REFERENCE[name](im, P[name][s - 1]) for im in x])
        diff = ours.astype(int) - ref
        if name == "defocus_blur":
            # OpenCV filters the 17x17 kernel of CV_64F data through a DFT; we apply it as exact integer
            # sums times a few class weights, equal to the kernel up to its float32 rounding. Floors can
            # then differ only where 255*y is within ~1e-6 of an integer (see blur.defocus_blur): allow at
            # most a handful of +-1 values (5e-6 of the values of the first 1017 test images).
            assert np.abs(diff).max() <= 1 and (diff != 0).mean() < 1e-4
        else:
            assert not diff.any(), f"{name} s{s}: {(diff != 0).sum()} values differ"


def _hsv_edge_colours() -> np.ndarray:
    """Colours where skimage's HSV branches meet: ties for the maximum (red/green/blue-max order), greys,
    black, white, hue-sector boundaries (h * 6 near an integer), plus random colours; as 32x32 images."""
    g = np.random.default_rng(5)
    a, b = np.meshgrid(np.arange(0, 256, 5), np.arange(0, 256, 3))
    a, b = a.ravel(), b.ravel()
    ties = np.concatenate([np.stack(t, -1) for t in ((a, a, b), (a, b, a), (b, a, a), (a, b, b), (a, a, a))])
    rnd = g.integers(0, 256, (16384, 3))
    px = np.concatenate([ties, rnd]).astype(np.uint8)
    px = np.concatenate([px, px[: (-len(px)) % 1024]])
    return px.reshape(-1, 32, 32, 3)


@pytest.mark.parametrize("name", ["brightness", "saturate"])
def test_hsv_corruptions_bit_exact_on_branch_edges(name):
    x = _hsv_edge_colours()
    for s in range(1, 6):
        ours = C.corrupt(x, name, s)
        ref = np.stack([REFERENCE[name](im, P[name][s - 1]) for im in x])
        assert np.array_equal(ours, ref), f"{name} s{s}: {(ours != ref).sum()} values differ"


def test_frost_table_equals_the_float64_formula():
    # frost's output byte comes from a (image byte, texture byte) table: check it against the
    # reference's np.uint8(np.clip(a * x + b * crop, 0, 255)) on every pair at every severity
    from corruptions.weather import _frost_table

    v = np.arange(256, dtype=np.float64)
    for a, b in P["frost"]:
        ref = np.uint8(np.clip(a * v[:, None] + b * v[None, :], 0, 255)).ravel()
        assert np.array_equal(_frost_table(float(a), float(b), "cpu").numpy(), ref)


def test_zoom_blur_constant_image_and_table():
    # float32 pipelines land just below an integer: constant 77 gives 76 at severity 2 (CORRUPTIONS.md)
    x = np.full((1, 32, 32, 3), 77, np.uint8)
    assert C.corrupt(x, "zoom_blur", 2).max() == 76
    for s in range(1, 6):
        out = C.corrupt(x, "zoom_blur", s)
        assert out.min() >= 76 and out.max() <= 77  # constant image stays constant (+-1)
    # anchored-crop table of §2.9 (crop side, output side, top offset)
    table = {1.02: (32, 33, 0), 1.04: (31, 32, 0), 1.05: (31, 33, 0), 1.07: (30, 32, 1), 1.11: (29, 32, 1),
             1.15: (28, 32, 2), 1.17: (28, 33, 2), 1.19: (27, 32, 2), 1.21: (27, 33, 2), 1.24: (26, 32, 3),
             1.25: (26, 33, 3)}
    arange = {round(z, 2): z for z in P["zoom_blur"][4]}  # the float arange values, e.g. 1.2500000000000002
    for z, (ch, out, top) in table.items():
        _, h_ch, h_out, _, _, _ = _ops.zoom_geometry(32, 32, arange[z])
        assert (h_ch, h_out, (32 - h_ch) // 2) == (ch, out, top)
    assert [len(f) for f in P["zoom_blur"]] == [7, 12, 16, 21, 26]


def test_pixelate_changes_exactly_the_listed_pairs():
    pairs = {1: [(7, 8), (23, 24)], 2: [(3, 4), (11, 12), (19, 20), (27, 28)],
             3: [(2, 3), (9, 10), (15, 16), (21, 22), (28, 29)],
             4: [(1, 2), (5, 6), (9, 10), (13, 14), (17, 18), (21, 22), (25, 26), (29, 30)],
             5: [(0, 1), (3, 4), (6, 7), (8, 9), (11, 12), (14, 15), (16, 17), (19, 20), (22, 23), (24, 25),
                 (27, 28), (30, 31)]}
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (4, 32, 32, 3)).astype(np.uint8)
    for s, pr in pairs.items():
        out = C.corrupt(x, "pixelate", s)
        lines = sorted(i for p in pr for i in p)
        keep = [i for i in range(32) if i not in lines]
        assert np.array_equal(out[:, keep][:, :, keep], x[:, keep][:, :, keep])
        # round-half-up means, horizontal pass first
        xi = x.astype(np.int64)
        h = xi.copy()
        for a, b in pr:
            h[:, :, a] = h[:, :, b] = (xi[:, :, a] + xi[:, :, b] + 1) // 2
        v = h.copy()
        for a, b in pr:
            v[:, a] = v[:, b] = (h[:, a] + h[:, b] + 1) // 2
        assert np.array_equal(out, v.astype(np.uint8))


def test_contrast_formula():
    x = SYN
    for s, c in enumerate(P["contrast"], 1):
        xf = x / 255.0
        mu = xf.mean(axis=(1, 2), keepdims=True)
        expect = np.clip((xf - mu) * c + mu, 0, 1) * 255
        out = C.corrupt(x, "contrast", s).astype(float)
        assert np.all(out <= expect + 1e-9) and np.all(out > expect - 1 - 1e-9)


def test_brightness_and_saturate_closed_forms():
    x = SYN.astype(np.float64) / 255.0
    v = x.max(-1, keepdims=True)
    for s, c in enumerate(P["brightness"], 1):
        with np.errstate(invalid="ignore", divide="ignore"):
            expect = np.where(v > 0, x * np.minimum(v + c, 1) / v, c) * 255
        out = C.corrupt(SYN, "brightness", s).astype(float)
        assert np.abs(out - expect).max() < 1.0 + 1e-6
    black = C.corrupt(np.zeros((1, 32, 32, 3), np.uint8), "brightness", 5)
    assert (black == 76).all()
    grey = np.full((1, 32, 32, 3), 128, np.uint8)
    assert tuple(C.corrupt(grey, "saturate", 4)[0, 0, 0]) == (128, 115, 115)
    assert tuple(C.corrupt(grey, "saturate", 5)[0, 0, 0]) == (128, 102, 102)
    assert not C.corrupt(np.zeros((1, 32, 32, 3), np.uint8), "saturate", 5).any()
    for s in range(1, 6):  # V (the max channel) is preserved up to the floor
        out = C.corrupt(SYN, "saturate", s)
        assert np.abs(out.max(-1).astype(int) - SYN.max(-1)).max() <= 1


def test_defocus_kernels():
    g = {0.4: (0.0404, 0.9192), 0.5: (0.1065, 0.7870), 0.6: (0.1664, 0.6672)}
    for r, a in P["defocus_blur"][:3]:
        k = blur.defocus_kernel(r, a)
        assert np.count_nonzero(k) == 9
        side, centre = g[a]
        assert k[8, 8] == pytest.approx(centre * centre, abs=2e-4)
        assert k[7, 8] == pytest.approx(side * centre, abs=2e-4)
    plus = blur.defocus_kernel(1, 0.2)
    for dy, dx in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
        assert plus[8 + dy, 8 + dx] == pytest.approx(0.2, abs=1e-5)
    box = blur.defocus_kernel(1.5, 0.1)
    assert np.allclose(box[7:10, 7:10], 1 / 9, atol=1e-5)


def test_gaussian_blur_tap_counts_and_constant():
    for sigma, taps in zip(P["gaussian_blur"], (5, 5, 7, 7, 9)):
        assert len(_ops.scipy_gaussian_weights(sigma, 4.0)) == taps
    x = np.full((2, 32, 32, 3), 200, np.uint8)
    for s in range(1, 6):
        assert np.abs(C.corrupt(x, "gaussian_blur", s).astype(int) - 200).max() <= 1


@pytest.mark.parametrize("codec", ["opencv", "pil-encode", "pil"])
def test_jpeg_is_420_reencode(codec, monkeypatch):
    if codec == "pil":
        monkeypatch.setattr(digital, "_CV2_DECODE_OK", False)  # force PIL's decoder (and encoder)
    elif codec == "pil-encode":
        monkeypatch.setattr(digital, "_CV2_ENCODE_OK", False)  # PIL encodes, OpenCV decodes where it can
    elif not (digital._cv2_decodes_like_pil() and digital._cv2_encodes_like_pil()):
        pytest.skip("OpenCV's JPEG codec differs from PIL's here; the library encodes/decodes with PIL")
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.integers(0, 256, (2, 32, 32, 3)).astype(np.uint8), SYN[:8]])
    for s, q in enumerate(P["jpeg_compression"], 1):
        assert np.array_equal(C.corrupt(x, "jpeg_compression", s), np.stack([ref_jpeg(im, q) for im in x]))
        buf = io.BytesIO()
        Image.fromarray(x[0]).save(buf, "JPEG", quality=q)
        assert Image.open(buf).layer[1][1:3] == (1, 1) and Image.open(buf).layer[0][1:3] == (2, 2)  # 4:2:0


# ---------------------------------------------------------------------------------------------- noise


def test_gaussian_noise_statistics():
    x = np.full((16, 32, 32, 3), 128, np.uint8)
    for s, c in enumerate(P["gaussian_noise"], 1):
        d = (C.corrupt(x, "gaussian_noise", s).astype(float) - 128) / 255
        assert d.std() == pytest.approx(c, rel=0.03)
        se = d.std() * 255 / np.sqrt(d.size)
        assert d.mean() * 255 == pytest.approx(-0.5, abs=4 * se)  # floor bias of -0.5 grey level
        r = np.corrcoef(d[..., 0].ravel(), d[..., 1].ravel())[0, 1]
        assert abs(r) < 0.03  # channels independent


def test_shot_noise_level_set_and_variance():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (8, 32, 32, 3)).astype(np.uint8)
    x[:, :4] = 0
    for s, c in enumerate(P["shot_noise"], 1):
        out = C.corrupt(x, "shot_noise", s)
        levels = set(np.floor(np.clip(np.arange(2 * c) / c, 0, 1) * 255).astype(int))
        assert set(np.unique(out)).issubset(levels)
        assert not out[:, :4].any()  # a zero channel stays zero
    mid = np.full((16, 32, 32, 3), 100, np.uint8)
    for s, c in enumerate(P["shot_noise"], 1):
        y = C.corrupt(mid, "shot_noise", s).astype(float) / 255
        assert y.var() * c / (100 / 255) == pytest.approx(1.0, rel=0.08)
    assert len(np.unique(C.corrupt(x, "shot_noise", 5))) <= 51


@pytest.mark.parametrize("name,v", [("gaussian_noise", 3), ("gaussian_noise", 128), ("shot_noise", 9),
                                    ("shot_noise", 200), ("speckle_noise", 250)])
def test_noise_output_distribution_matches_reference_sampling(name, v):
    """Per element, the output level has the same distribution as the reference's draw-then-floor,
    estimated with NumPy's own generators (total variation distance at Monte Carlo precision)."""
    g = np.random.default_rng(0)
    for s, c in ((1, P[name][0]), (5, P[name][4])):
        x = np.full((96, 32, 32, 3), v, np.uint8)
        ours = np.bincount(C.corrupt(x, name, s, seed=1).ravel(), minlength=256) / x.size
        xf = v / 255.0
        m = x.size
        if name == "gaussian_noise":
            ref = np.clip(xf + g.normal(size=m, scale=c), 0, 1) * 255
        elif name == "speckle_noise":
            ref = np.clip(xf + xf * g.normal(size=m, scale=c), 0, 1) * 255
        else:
            ref = np.clip(g.poisson(xf * c, size=m) / c, 0, 1) * 255
        theirs = np.bincount(np.uint8(ref), minlength=256) / m
        # two independent samples of size m: E[TV] ~ 0.5 * sqrt(4 / (pi m)) * sum(sqrt(p)); allow 2.5x
        bound = 2.5 * 0.5 * np.sqrt(4 / (np.pi * m)) * np.sqrt(theirs).sum()
        assert 0.5 * np.abs(ours - theirs).sum() < bound, (name, v, s)
        assert abs((ours * np.arange(256)).sum() - (theirs * np.arange(256)).sum()) < 0.1 + 6 * np.sqrt(
            (theirs * np.arange(256) ** 2).sum() - (theirs * np.arange(256)).sum() ** 2) / np.sqrt(m)


def test_impulse_noise_bernoulli():
    x = np.full((16, 32, 32, 3), 100, np.uint8)
    for s, c in enumerate(P["impulse_noise"], 1):
        out = C.corrupt(x, "impulse_noise", s)
        assert set(np.unique(out)).issubset({0, 100, 255})
        hit = out != 100
        assert hit.mean() == pytest.approx(c, rel=0.1)
        assert (out == 255).sum() / hit.sum() == pytest.approx(0.5, abs=0.06)
    # channels independent: fraction of pixels with >= 2 channels hit ~ binomial
    out = C.corrupt(np.full((64, 32, 32, 3), 100, np.uint8), "impulse_noise", 5)
    k = (out != 100).sum(-1)
    assert (k >= 2).mean() == pytest.approx(3 * 0.07**2 * 0.93 + 0.07**3, rel=0.2)


def test_speckle_noise():
    x = np.full((16, 32, 32, 3), 100, np.uint8)
    x[:, :2] = 0
    for s, c in enumerate(P["speckle_noise"], 1):
        out = C.corrupt(x, "speckle_noise", s).astype(float)
        assert not out[:, :2].any()
        rel = (out[:, 2:] + 0.5 - 100) / 100  # +0.5 undoes the floor bias on average
        assert rel.std() == pytest.approx(c, rel=0.05)


# ---------------------------------------------------------------------------------------------- glass blur


def test_glass_shuffle_equals_literal_loop():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (3, 32, 32, 3)).astype(np.uint8)
    choices = rng.integers(0, 4, (3, 2, 30, 30))
    ours = blur.glass_shuffle(_t(x), _t(choices)).numpy()
    for i in range(3):
        assert np.array_equal(ours[i], ref_glass_shuffle(x[i], choices[i]))


def test_glass_blur_matches_reference_given_draws():
    kr = _krandom("glass_blur", 5, 4)
    x = SYN[6:10]
    for s in range(1, 6):
        c = P["glass_blur"][s - 1]
        ch = blur.glass_choices(kr, c[2], 32, 32)
        ours = blur.glass_blur_apply(_t(x), c, ch).numpy()
        ref = np.stack([ref_glass_blur(x[i], c, ch[i].numpy()) for i in range(4)])
        assert np.array_equal(ours, ref)


def test_glass_blur_severity1_copies_from_allowed_sources():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (6, 32, 32, 3)).astype(np.uint8)
    out = C.corrupt(x, "glass_blur", 1, seed=11)
    assert np.array_equal(out[:, :2], x[:, :2]) and np.array_equal(out[:, :, :2], x[:, :, :2])
    core = out[:, 2:, 2:]
    cands = [x[:, 2:, 2:], x[:, 2:, 1:-1], x[:, 1:-1, 2:], x[:, 1:-1, 1:-1]]
    ok = np.zeros(core.shape[:3], bool)
    for cnd in cands:
        ok |= (core == cnd).all(-1)
    assert ok.all()
    # all four sources are used, about equally often (pixels with distinct candidates)
    counts = [((core == cnd).all(-1)).mean() for cnd in cands]
    assert min(counts) > 0.2


# ---------------------------------------------------------------------------------------------- motion blur


def test_motion_kernel_weights():
    expect = {(6, 1): [0.570, 0.346, 0.077, 0.006], (6, 1.5): [0.420, 0.336, 0.173, 0.057, 0.012],
              (6, 2): [0.333, 0.294, 0.202, 0.108, 0.045], (9, 2.5): [0.275, 0.254, 0.200, 0.134, 0.077]}
    for (r, s), w in expect.items():
        k = _ops.im_motion_kernel(r, s)
        assert len(k) == 2 * math.ceil(r) + 1
        assert np.allclose(k[: len(w)], w, atol=6e-4)
    k3, k4 = _ops.im_motion_kernel(6, 2), _ops.im_motion_kernel(8, 2)
    assert np.allclose(k3, k4[:13], atol=1e-8) and k4[13:].max() < 1e-8


def test_motion_blur_matches_per_pixel_port():
    rng = np.random.default_rng(6)
    x = np.concatenate([SYN[6:8], rng.integers(0, 256, (1, 32, 32, 3)).astype(np.uint8)])
    angles = np.array([-44.3, 12.7, 38.0])
    for s in (1, 5):
        r, sg = P["motion_blur"][s - 1]
        ours = blur.motion_blur_apply(_t(x), (r, sg), angles).numpy()
        for i in range(3):
            assert np.array_equal(ours[i], ref_im_motion_blur(x[i], r, sg, angles[i]))


@pytest.mark.parametrize("angle,direction", [(0.0, (0, -1)), (45.0, (-1, -1)), (-45.0, (1, -1)),
                                             (90.0, (-1, 0)), (-90.0, (1, 0))])
def test_motion_blur_dot_smears_opposite_the_angle(angle, direction):
    x = np.zeros((1, 32, 32, 3), np.uint8)
    x[0, 16, 16] = 255
    out = _ops.im_motion_blur(_t(x), 6, 2, np.array([angle])).numpy()[0, ..., 0].astype(float)
    ys, xs = np.nonzero(out)
    cy, cx = (ys * out[ys, xs]).sum() / out.sum() - 16, (xs * out[ys, xs]).sum() / out.sum() - 16
    assert np.sign(round(cy, 3)) == direction[0] and np.sign(round(cx, 3)) == direction[1]


def test_motion_blur_angles_in_range():
    kr = _krandom("motion_blur", 3, 500)
    a = blur.motion_angles(kr, -45, 45)
    assert a.min() >= -45 and a.max() < 45 and np.ptp(a) > 80


# ---------------------------------------------------------------------------------------------- fog


def test_plasma_matches_reference_port():
    kr = _krandom("fog", 4, 3)
    n = weather.plasma_uniform_count(32)
    assert n == 1023
    u = kr.uniform(n)
    for decay in (3, 1.75):
        ours = weather.plasma_fractal(u, 32, decay).numpy()
        for i in range(3):
            assert np.array_equal(ours[i], ref_plasma(u[i].numpy(), 32, decay))
        assert (ours.min(axis=(1, 2)) == 0).all() and (ours.max(axis=(1, 2)) == 1).all()


def test_fog_property():
    x = SYN[6:]
    for s, (c0, _) in enumerate(P["fog"], 1):
        out = C.corrupt(x, "fog", s, seed=2).astype(float)
        m = x.max(axis=(1, 2, 3), keepdims=True) / 255.0
        k = m / (m + c0)
        add = out - k * x
        assert np.ptp(add, axis=-1).max() <= 1.0 + 1e-9  # same fog in all channels
        assert add.min() >= -1 - 1e-9 and (add <= c0 * k * 255 + 1e-9).all()
        assert (out <= 255 * m + 1e-9).all()


# ---------------------------------------------------------------------------------------------- frost


@pytest.mark.realdata
def test_frost_black_input_is_scaled_texture_window(frost_real):
    import hashlib

    from corruptions.frost import FROST_SHAPES

    assert frost_real.shapes == FROST_SHAPES
    d = frost_real.source[len("dir:"):]
    for i, f in enumerate(FROST_FILES):  # exactly cv2.imread + resize(fx=fy=0.2) + BGR->RGB
        ref = cv2.resize(cv2.imread(f"{d}/{f}"), (0, 0), fx=0.2, fy=0.2)[..., [2, 1, 0]]
        assert np.array_equal(frost_real.textures[i], ref)
        assert frost_real.file_sha256[f] == hashlib.sha256(open(f"{d}/{f}", "rb").read()).hexdigest()
    black = np.zeros((40, 32, 32, 3), np.uint8)
    kr = _krandom("frost", 3, 40, seed=5)
    idx, r0, c0 = weather.frost_draws(kr, frost_real.shapes, 32, 32)
    assert set(idx) <= set(range(5)) and len(set(idx)) >= 4
    for s, (a, b) in enumerate(P["frost"], 1):
        out = C.corrupt(black, "frost", s, seed=5, frost=frost_real)
        kr = _krandom("frost", s, 40, seed=5)
        idx, r0, c0 = weather.frost_draws(kr, frost_real.shapes, 32, 32)
        for i in range(40):
            t = frost_real.textures[idx[i]]
            assert 0 <= r0[i] <= t.shape[0] - 33 and 0 <= c0[i] <= t.shape[1] - 33
            win = t[r0[i] : r0[i] + 32, c0[i] : c0[i] + 32].astype(np.float64)
            assert np.array_equal(out[i], np.uint8(np.clip(b * win, 0, 255)))
        xin = SYN[6:12]
        o2 = C.corrupt(xin, "frost", s, seed=5, frost=frost_real)
        assert (o2 >= np.floor(a * xin.astype(float))).all()


def test_frost_procedural_is_labelled_and_deterministic():
    from corruptions.frost import FROST_SHAPES, FrostTextures, procedural_textures

    t1, t2 = procedural_textures(), procedural_textures()
    assert all(np.array_equal(a, b) for a, b in zip(t1, t2))
    assert tuple(t.shape[:2] for t in t1) == FROST_SHAPES
    ft = FrostTextures(source="procedural", textures=t1)
    assert ft.is_procedural
    out = C.corrupt(SYN[:4], "frost", 3, frost=ft)
    assert out.shape == SYN[:4].shape


# ---------------------------------------------------------------------------------------------- snow


def test_snow_layer_matches_scipy():
    kr = _krandom("snow", 1, 4)
    z = torch.special.ndtri(kr.uniform(1024)).view(4, 32, 32)
    for s in range(1, 6):
        c = P["snow"][s - 1]
        ours = weather.snow_layer_u8(z, c).numpy()[..., 0]
        for i in range(4):
            layer = c[0] + c[1] * z[i].numpy()
            layer = ref_clipped_zoom(layer[..., None], c[2])
            layer[layer < c[3]] = 0
            ref = (np.clip(layer.squeeze(), 0, 1) * 255).astype(np.uint8)
            assert np.array_equal(ours[i], ref)


def test_snow_base_and_composition():
    x = SYN
    for s in (1, 5):
        c = P["snow"][s - 1]
        x32 = np.array(x, dtype=np.float32) / 255.0
        gray = np.stack([cv2.cvtColor(im, cv2.COLOR_RGB2GRAY) for im in x32])[..., None]
        ref = c[6] * x32 + (1 - c[6]) * np.maximum(x32, gray * 1.5 + 0.5)
        ours = weather.snow_base(_t(x), c[6]).numpy()
        # OpenCV's float RGB2GRAY rounding depends on its SIMD/FMA path: allow 1 float32 ulp
        assert np.abs(ours - ref).max() <= 2e-7
        # with the layer removed (all-zero normal far below threshold), output = floor(base)
        z = torch.full((len(x), 32, 32), -50.0, dtype=torch.float64)
        out = weather.snow_apply(_t(x), c, z, np.zeros(len(x)))
        assert np.array_equal(out.numpy(), _ops.floor_u8(torch.from_numpy(ref).double()).numpy()) or \
            np.abs(out.numpy().astype(int) - np.uint8(np.clip(ref, 0, 1) * 255)).max() <= 1


def test_snow_never_darkens_and_angles():
    for s in range(1, 6):
        out = C.corrupt(SYN, "snow", s, seed=3).astype(int)
        # never darker; the reference's float32 base blend*x + (1-blend)*x can round just below x, so
        # a rare -1 after the floor is the reference's own behaviour (e.g. 0.95f*x + 0.05f*x < x)
        assert (out >= SYN.astype(int) - 1).all() and (out < SYN).mean() < 0.01
    a = blur.motion_angles(_krandom("snow", 2, 400), -135, -45)
    assert a.min() >= -135 and a.max() < -45


# ---------------------------------------------------------------------------------------------- spatter


def ref_spatter(x, c, normal):
    x = np.array(x, dtype=np.float32) / 255.0
    liquid = c[0] + c[1] * normal
    liquid = sk_gaussian(liquid, sigma=c[2])
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
        color = np.concatenate([v / 255.0 * np.ones_like(m[..., :1]) for v in (175, 238, 238)], axis=2)
        color = cv2.cvtColor(color, cv2.COLOR_BGR2BGRA)
        x = cv2.cvtColor(x, cv2.COLOR_BGR2BGRA)
        return np.uint8(cv2.cvtColor(np.clip(x + m * color, 0, 1), cv2.COLOR_BGRA2BGR) * 255)
    m = np.where(liquid > c[3], 1, 0)
    m = sk_gaussian(m.astype(np.float64), sigma=c[4])  # skimage <= 0.14 made this float64
    m[m < 0.8] = 0
    color = np.concatenate([v / 255.0 * np.ones_like(x[..., :1]) for v in (63, 42, 20)], axis=2)
    color *= m[..., np.newaxis]
    x *= 1 - m[..., np.newaxis]
    return np.uint8(np.clip(x + color, 0, 1) * 255)


def test_spatter_matches_reference_given_draws():
    x = np.concatenate([SYN[6:12], SYN[18:22]])
    n = len(x)
    for s in range(1, 6):
        c = P["spatter"][s - 1]
        z = torch.special.ndtri(_krandom("spatter", s, n).uniform(1024)).view(n, 32, 32)
        ours = weather.spatter_apply(_t(x), c, z).numpy()
        for i in range(n):
            assert np.array_equal(ours[i], ref_spatter(x[i], c, z[i].numpy())), (s, i)


def test_spatter_properties():
    x = SYN[6:]
    col = np.array([175, 238, 238], float)
    for s in (1, 2, 3):
        out = C.corrupt(x, "spatter", s, seed=9).astype(float)
        assert (out >= x).all()  # water never darkens
        add = out - x
        unclipped = (out < 255).all(-1) & (add[..., 0] > 8)
        ratio = add[unclipped] / col
        assert np.abs(ratio - ratio.mean(-1, keepdims=True)).max() * col.max() <= 2.5  # 175:238:238
    mud = np.array([63, 42, 20], float)
    for s in (4, 5):
        out = C.corrupt(x, "spatter", s, seed=9).astype(float)
        changed = (out != x).any(-1)
        d0 = np.abs(x - mud).sum(-1)
        d1 = np.abs(out - mud).sum(-1)
        assert (d1[changed] <= d0[changed] + 3).all()  # moved toward mud brown
        w = ((x - out) / np.where(np.abs(x - mud) > 40, x - mud, np.nan))[changed]
        w = w[np.isfinite(w)]
        assert w.size == 0 or (w.min() > 0.75 and w.max() <= 1.02)  # blend weight in [0.8, 1]


# ---------------------------------------------------------------------------------------------- elastic


def test_elastic_matches_reference_given_draws():
    x = SYN[6:12]
    n = len(x)
    img32 = np.array(x, dtype=np.float32) / 255.0
    pts1 = digital.elastic_control_points(32, 32)
    assert np.array_equal(pts1, np.float32([[26, 26], [26, 6], [6, 6]]))
    for s in range(1, 6):
        c = P["elastic_transform"][s - 1]
        jitter, ndx, ndy = digital.elastic_draws(_krandom("elastic_transform", s, n), c, 32, 32)
        assert np.abs(jitter).max() <= c[2]
        mats = np.stack([cv2.getAffineTransform(pts1, pts1 + jitter[i]) for i in range(n)])
        warped = digital.cv2_warp_affine_linear(_t(img32), mats).numpy()
        for i in range(n):
            cvw = cv2.warpAffine(img32[i], mats[i], (32, 32), borderMode=cv2.BORDER_REFLECT_101)
            if tuple(int(v) for v in cv2.__version__.split(".")[:2]) <= (4, 10):
                assert np.array_equal(warped[i], cvw)
            else:  # OpenCV >= 4.11 samples at unquantised coordinates: <= 1/64 px per axis apart
                assert np.abs(warped[i] - cvw).max() <= 1 / 32 + 1e-6
        if c[0] == 0:  # severity 1: pure affine, no field drawn; the reference's field is 0 * U = 0
            assert ndx is None
            ndx = ndy = torch.from_numpy(np.random.default_rng(s).uniform(-1, 1, (n, 32, 32)))
        dx = (sk_gaussian(ndx.numpy()[0], c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
        ours_dx = (_ops.scipy_gaussian(ndx, c[1], dims=(1, 2), mode="reflect", truncate=3) * c[0]).float()
        assert np.array_equal(ours_dx.numpy()[0], dx)
        out = digital.elastic_apply(_t(x), c, jitter, ndx, ndy).numpy()
        for i in range(n):
            dxi = (sk_gaussian(ndx.numpy()[i], c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
            dyi = (sk_gaussian(ndy.numpy()[i], c[1], mode="reflect", truncate=3) * c[0]).astype(np.float32)
            xx, yy, zz = np.meshgrid(np.arange(32), np.arange(32), np.arange(3))
            ind = (np.reshape(yy + dyi[..., None], (-1, 1)), np.reshape(xx + dxi[..., None], (-1, 1)),
                   np.reshape(zz, (-1, 1)))
            ref = map_coordinates(warped[i], ind, order=1, mode="reflect").reshape(32, 32, 3)
            assert np.array_equal(out[i], np.uint8(np.clip(ref, 0, 1) * 255))


def test_elastic_constant_image_stays_constant():
    x = np.full((4, 32, 32, 3), 140, np.uint8)
    for s in range(1, 6):
        out = C.corrupt(x, "elastic_transform", s, seed=1)
        assert out.min() >= 139 and out.max() <= 140


# ---------------------------------------------------------------------------------------------- severity


@pytest.mark.realdata
def test_distortion_grows_with_severity(cifar, frost_real):
    """Mean absolute difference from clean at severity 5 exceeds severity 1, for every corruption.

    Known non-monotone cases in the reference constants are checked for s5 > s1 only: glass blur
    (s3 vs s4 iteration change), snow, frost (s2-s3 vs s4-s5 blend trade-off), saturate (s1-s2 reduce,
    s3 increases saturation less), spatter (water vs mud), elastic (affine jitter shrinks as the
    field grows: s1 is the strongest on CIFAR, so it is the one exception, checked the other way).
    """
    x = cifar[:64]
    mad = {}
    for name in C.ALL:
        mad[name] = [np.abs(C.corrupt(x, name, s, frost=frost_real).astype(float) - x).mean() for s in (1, 5)]
    for name, (m1, m5) in mad.items():
        if name == "elastic_transform":
            assert m1 > m5 > 0  # the reference's affine jitter shrinks with severity (2.56 -> 0.96 px)
        else:
            assert m5 > m1 > 0, f"{name}: {m1:.2f} -> {m5:.2f}"
