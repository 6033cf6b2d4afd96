"""The compiled CPU kernels of the blur corruptions (``corruptions/_cpu_blur.py``) against the torch
implementations they replace on the CPU (still the CUDA path), called directly on CPU tensors: bit for bit,
on random, structured and (when available) real CIFAR-10 images, at odd batch sizes and shapes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import corruptions as C
from corruptions import _ops, blur
from corruptions.rng import KeyedRandom

P = {name: spec.params for name, spec in C.CORRUPTIONS.items()}


def _inputs(n: int = 37, h: int = 32, w: int = 32, c: int = 3, seed: int = 0) -> torch.Tensor:
    """Random bytes, constants (0, 1, 77, 254, 255), 8x8 blocks and ramps: n images (n >= 8)."""
    g = np.random.default_rng(seed)
    x = g.integers(0, 256, (n, h, w, c)).astype(np.uint8)
    for i, v in enumerate((0, 1, 77, 254, 255)):
        x[i] = v
    blocks = g.integers(0, 256, (1, -(-h // 8), -(-w // 8), c))
    x[5] = np.kron(blocks, np.ones((1, 8, 8, 1)))[0, :h, :w].astype(np.uint8)
    x[6] = (np.arange(w) * 255 // max(1, w - 1)).astype(np.uint8)[None, :, None]
    x[7] = (np.arange(h) * 255 // max(1, h - 1)).astype(np.uint8)[:, None, None]
    return torch.from_numpy(x)


@pytest.fixture(scope="module")
def real(shared_data) -> torch.Tensor:
    path = shared_data / "cifar10" / "cifar10-test-exact-first1017.npz"
    if not path.is_file():
        pytest.skip("CIFAR-10 exact test subset not available")
    return torch.from_numpy(np.load(path)["x"][:200])


SHAPES = [(37, 32, 32, 3), (8, 32, 32, 1), (9, 24, 40, 3)]


@pytest.mark.parametrize("shape", SHAPES)
def test_zoom_blur_kernel_equals_torch(shape):
    x = _inputs(*shape)
    for factors in P["zoom_blur"]:
        assert torch.equal(blur.zoom_blur(x, factors), blur.zoom_blur_torch(x, factors))
    assert torch.equal(blur.zoom_blur(x[:1], P["zoom_blur"][4]), blur.zoom_blur_torch(x[:1], P["zoom_blur"][4]))


def test_zoom_blur_kernel_equals_torch_real(real):
    for factors in P["zoom_blur"]:
        assert torch.equal(blur.zoom_blur(real, factors), blur.zoom_blur_torch(real, factors))


def test_zoom_blur_kernel_masked_geometry():
    """Where a coordinate rounds beyond the crop (SciPy's constant 0; never at the CIFAR constants): the
    kernel's masked branch. Found by search: 36 px at 1.20, 26 px at 1.74, 30 px at 1.88."""
    z120, z174, z188 = 1.2000000000000002, 1.7400000000000007, 1.8800000000000008
    assert not _ops.clipped_zoom_axis(36, z120)[4].all()
    x = _inputs(9, 36, 36)
    assert torch.equal(blur.zoom_blur(x, (1.0, z120, z120, 1.1)), blur.zoom_blur_torch(x, (1.0, z120, z120, 1.1)))
    x = _inputs(9, 26, 30)
    assert torch.equal(blur.zoom_blur(x, (z174, 1.3, z188)), blur.zoom_blur_torch(x, (z174, 1.3, z188)))


def _angles(n: int, seed: int = 1, low: float = -45.0, high: float = 45.0) -> np.ndarray:
    a = np.random.default_rng(seed).uniform(low, high, n)
    a[:4] = (low, high, 0.0, (low + high) / 2)[: min(4, n)]
    return a


@pytest.mark.parametrize("shape", SHAPES)
def test_motion_blur_kernel_equals_torch(shape):
    x = _inputs(*shape)
    for radius, sigma in P["motion_blur"] + ((3, 1.0),):
        a = _angles(len(x))
        assert torch.equal(_ops.im_motion_blur(x, radius, sigma, a), _ops.im_motion_blur_torch(x, radius, sigma, a))
    a = _angles(len(x), 2, -135.0, -45.0)  # snow's angles: offsets of both signs on both axes
    assert torch.equal(_ops.im_motion_blur(x, 9, 2.5, a), _ops.im_motion_blur_torch(x, 9, 2.5, a))


def test_motion_blur_kernel_equals_torch_real(real):
    for radius, sigma in P["motion_blur"]:
        a = _angles(len(real), 3)
        assert torch.equal(_ops.im_motion_blur(real, radius, sigma, a),
                           _ops.im_motion_blur_torch(real, radius, sigma, a))


@pytest.mark.parametrize("shape", SHAPES + [(3, 5, 7, 2)])
def test_gaussian_blur_kernel_equals_torch(shape):
    x = _inputs(max(8, shape[0]), *shape[1:])
    for sigma in P["gaussian_blur"] + (0.1, 2.5):
        assert torch.equal(blur.gaussian_blur(x, sigma), blur.gaussian_blur_torch(x, sigma))


def test_gaussian_blur_kernel_equals_torch_real(real):
    for sigma in P["gaussian_blur"]:
        assert torch.equal(blur.gaussian_blur(real, sigma), blur.gaussian_blur_torch(real, sigma))


@pytest.mark.parametrize("mode", ["nearest", "reflect", "mirror"])
def test_scipy_gaussian_kernel_equals_torch(mode):
    """The float64 filter as weather/digital call it: (N, H, W) and (N, H, W, C), any sigma and truncate,
    including radius 0 and radii beyond the image (the boundary maps wrap)."""
    g = torch.Generator().manual_seed(3)
    planes = [torch.rand(5, 32, 32, dtype=torch.float64, generator=g) * 2 - 1,
              torch.randn(4, 9, 13, 2, dtype=torch.float64, generator=g) * 1e3,
              (torch.rand(6, 32, 32, generator=g) > 0.7).to(torch.float64)]
    for x in planes:
        for sigma, truncate in ((0.1, 4.0), (0.5, 3.0), (1.0, 4.0), (1.75, 4.0), (3.2, 3.0), (6.0, 4.0)):
            ours = _ops.scipy_gaussian(x, sigma, dims=(1, 2), mode=mode, truncate=truncate)
            ref = _ops.scipy_gaussian_torch(x, sigma, dims=(1, 2), mode=mode, truncate=truncate)
            assert ours.shape == x.shape and torch.equal(ours, ref)


@pytest.mark.parametrize("shape", [(2, 224, 224), (3, 37, 53), (2, 9, 13, 2)])
def test_folded_gaussian_equals_scipy(shape):
    """The folded filter (one n x n matrix per axis, taken where the kernel is longer than the axes, e.g.
    elastic_transform's sigma 170.8 at 224 px) equals SciPy's gaussian_filter up to rounding, for kernels longer
    and shorter than the axes, and CPU kernel and torch path agree bit for bit."""
    from scipy.ndimage import gaussian_filter

    x = torch.from_numpy(np.random.default_rng(11).uniform(-1, 1, shape))
    for sigma in (170.8, 19.52):
        for mode in ("reflect", "nearest", "mirror"):
            ours = _ops.scipy_gaussian_folded(x, sigma, mode=mode, truncate=3.0)
            assert torch.equal(ours, _ops.scipy_gaussian_folded_torch(x, sigma, mode=mode, truncate=3.0))
            ref = np.stack([gaussian_filter(p, sigma, mode=mode, truncate=3.0, axes=(0, 1)) for p in x.numpy()])
            assert np.abs(ours.numpy() - ref).max() <= 1e-12 * np.abs(ref).max(), (sigma, mode)
            if _ops.folds(sigma, 3.0, shape[1], shape[2]):  # the dispatcher's choice, on CPU and in torch
                assert torch.equal(_ops.scipy_gaussian(x, sigma, mode=mode, truncate=3.0, fold=True), ours)
                assert torch.equal(_ops.scipy_gaussian_torch(x, sigma, mode=mode, truncate=3.0, fold=True), ours)


def test_folded_path_only_where_the_kernel_outgrows_the_axes():
    """Folding is opt-in (elastic_transform's fields) and starts at radius >= max(H, W); without ``fold`` the
    filter stays SciPy's loop bit for bit (the blurs and spatter, bit-exact to scikit-image) at any size."""
    x = torch.from_numpy(np.random.default_rng(2).uniform(-1, 1, (2, 9, 13)))
    direct = _ops.scipy_gaussian_torch(x, 6.0, mode="nearest", truncate=4.0)
    assert torch.equal(_ops.scipy_gaussian(x, 6.0, mode="nearest", truncate=4.0), direct)
    assert not torch.equal(_ops.scipy_gaussian(x, 6.0, mode="nearest", truncate=4.0, fold=True), direct)
    assert not _ops.folds(19.52, 3.0, 224, 224) and not _ops.folds(6.0, 4.0, 224, 224)
    assert not _ops.folds(170.8, 3.0, 224, 600) and _ops.folds(170.8, 3.0, 224, 512)
    assert not _ops.folds(1.0, 4.0, 32, 32) and _ops.folds(6.0, 4.0, 9, 13)


@pytest.mark.parametrize("shape", SHAPES + [(8, 5, 7, 2)])
def test_glass_blur_kernel_equals_torch(shape):
    x = _inputs(*shape)
    n, h, w, _ = x.shape
    g = torch.Generator().manual_seed(5)
    for params in P["glass_blur"] + ((0.7, 1, 3),):
        choices = torch.randint(0, 4, (n, params[2], h - 2, w - 2), generator=g)
        assert torch.equal(blur.glass_blur_apply(x, params, choices), blur.glass_blur_apply_torch(x, params, choices))


def test_glass_blur_kernel_equals_torch_real(real):
    for s, params in enumerate(P["glass_blur"], 1):
        choices = blur.glass_choices(KeyedRandom(7, "glass_blur", s, np.arange(len(real))), params[2], 32, 32)
        assert torch.equal(blur.glass_blur_apply(real, params, choices),
                           blur.glass_blur_apply_torch(real, params, choices))


DEFOCUS_PARAMS = tuple(dict.fromkeys(sum((tuple(C.CORRUPTIONS["defocus_blur"].constants[k]) for k in
                                           ("cifar", "tiny-imagenet", "imagenet")), ()) + ((2, 0.5), (3, 0.3))))


@pytest.mark.parametrize("shape", SHAPES + [(8, 5, 7, 2), (3, 40, 37, 3)])
def test_defocus_blur_kernel_equals_torch(shape):
    """All three constant sets (radius 10: the 5x5 blur and border line sums) at odd shapes, images smaller
    than the padding included, across the kernel's 32-row bands (40 rows)."""
    x = _inputs(*shape) if shape[0] >= 8 else _inputs(8, *shape[1:])[5:]
    for params in DEFOCUS_PARAMS:
        assert torch.equal(blur.defocus_blur(x, params), blur.defocus_blur_torch(x, params)), params


@pytest.mark.parametrize("params", DEFOCUS_PARAMS)
def test_defocus_plan_rebuilds_the_kernel(params):
    """The plan's integer sums and weights, applied to an impulse, give back cv2's float32 kernel K up to its
    float32 rounding (a few float32 ulps), and sum to K's own float64 sum (flat regions floor as with K)."""
    import math

    k = blur.defocus_kernel(*params).astype(np.float64)
    pl = blur.defocus_plan(*params)
    m = 2 * (k.shape[0] + pl.pad) + 1
    x = np.zeros((1, m, m, 1), np.uint8)
    x[0, m // 2, m // 2, 0] = 1
    xt = torch.from_numpy(x).permute(1, 2, 0, 3).reshape(m, m, 1).float()
    idx = torch.arange(-pl.pad, m + pl.pad) % m  # never reaches the impulse through the border
    acc = blur._defocus_sums_torch(xt[idx][:, idx], pl, m, m)[..., 0].double().numpy()
    eff = sum(w * a for w, a in zip(pl.weights, acc))
    eff[m // 2, m // 2] += pl.centre
    h, o = k.shape[0] // 2, m // 2
    eff = eff[::-1, ::-1]  # I(p) = M(impulse - p): the kernel flipped
    assert np.count_nonzero(np.abs(eff) > 1e-30) == np.count_nonzero(np.abs(eff[o - h : o + h + 1, o - h : o + h + 1])
                                                                        > 1e-30)
    diff = eff[o - h : o + h + 1, o - h : o + h + 1] - k
    diff[h, h] -= pl.centre  # the residual sum, folded into the centre tap
    assert np.abs(diff).max() <= 2.5e-7 * k.max() and abs(pl.centre) < 1e-7, (np.abs(diff).max(), pl.centre)
    assert abs(math.fsum(eff.ravel()) - math.fsum(k.ravel())) < 1e-15


def test_defocus_blur_sums_directly_where_running_sums_could_round():
    """Few taps, or a row of 255s over 2**24 in float32 (~65,800 px): the direct float64 sum of the taps."""
    assert blur.defocus_is_direct((0.5, 0.6), 32, 32) and not blur.defocus_is_direct((1.5, 0.1), 32, 32)
    wide = torch.from_numpy(np.random.default_rng(3).integers(0, 256, (1, 2, 65800, 3)).astype(np.uint8))
    assert blur.defocus_is_direct((10, 0.5), 2, 65800) and not blur.defocus_is_direct((10, 0.5), 2, 65700)
    assert torch.equal(blur.defocus_blur(wide, (10, 0.5)), blur.defocus_direct(wide, (10, 0.5)))


def test_defocus_blur_flat_images_floor_like_the_kernel():
    """A flat image v gives floor(255 * sum(K_t * (v / 255))) exactly as the direct float64 sum does; the
    kernels' sums are 1 - 5e-8 .. 1 + 1e-2, so this is v - 1 or v, never a coin toss."""
    x = torch.from_numpy(np.repeat(np.arange(256, dtype=np.uint8), 3).reshape(256, 1, 1, 3).repeat(6, 1).repeat(5, 2))
    for params in DEFOCUS_PARAMS:
        k = blur.defocus_kernel(*params).astype(np.float64)
        want = np.uint8(np.clip(np.arange(256)[:, None] / 255.0 * k.ravel()[None, :], 0, None).sum(1).clip(0, 1)
                        * 255)
        got = blur.defocus_blur(x, params).numpy()
        assert (got == want[:, None, None, None]).all(), params


def test_defocus_blur_kernel_equals_torch_real(real):
    for params in P["defocus_blur"]:
        assert torch.equal(blur.defocus_blur(real, params), blur.defocus_blur_torch(real, params))


def test_clipped_zoom_kernel_equals_torch():
    """``_ops.clipped_zoom_hwb`` (snow's layer) on float64 (H, W, B) of any sign, including a geometry
    with coordinates beyond the crop (the mask) and non-square planes."""
    g = torch.Generator().manual_seed(11)
    for h, w, zooms in ((32, 32, (1.0, 1.02, 1.05, 1.5, 2.0, 4.0)), (36, 36, (1.2000000000000002,)),
                        (26, 30, (1.7400000000000007, 1.3)), (7, 5, (1.1, 2.5))):
        xt = torch.randn(h, w, 40, dtype=torch.float64, generator=g) * 0.3 + 0.4
        for z in zooms:
            assert torch.equal(_ops.clipped_zoom_hwb(xt, z), _ops.clipped_zoom_hwb_torch(xt, z))
