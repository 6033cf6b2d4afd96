"""The compiled CPU kernels (corruptions/_cpu_weather.py) against the torch implementations they replace on
the CPU (which stay the CUDA path): same inputs and draws, outputs equal bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import corruptions as C
from corruptions import blur, digital, frost, weather
from corruptions.rng import KeyedRandom

P = {name: spec.params for name, spec in C.CORRUPTIONS.items()}


def _images(n: int, h: int = 32, w: int = 32, seed: int = 0) -> torch.Tensor:
    """Random bytes, blocky images and the extreme flat images 0 and 255."""
    g = np.random.default_rng(seed)
    x = g.integers(0, 256, (n, h, w, 3)).astype(np.uint8)
    x[1::3] = np.repeat(np.repeat(g.integers(0, 256, (len(x[1::3]), h // 4 + 1, w // 4 + 1, 3)), 4, 1), 4, 2)[
        :, :h, :w].astype(np.uint8)
    x[0], x[-1] = 0, 255
    return torch.from_numpy(x)


def _draws(name: str, s: int, n: int, seed: int = 5) -> KeyedRandom:
    return KeyedRandom(seed, name, s, np.arange(n))


# ---------------------------------------------------------------------------------------------- elastic


@pytest.mark.parametrize("shape", [(32, 32), (20, 27)])
def test_elastic_cpu_kernel_equals_torch(shape):
    h, w = shape
    x = _images(24, h, w)
    for s in range(1, 6):
        c = P["elastic_transform"][s - 1]
        jitter, ndx, ndy = digital.elastic_draws(_draws("elastic_transform", s, len(x)), c, h, w)
        ref = digital.elastic_apply(x, c, jitter, ndx, ndy)
        assert torch.equal(digital.elastic_apply_cpu(x, c, jitter, ndx, ndy), ref), (shape, s)


def test_elastic_cpu_kernel_far_displacements():
    """Fields large enough that coordinates leave [-n, 2n) (SciPy's modulo-2n fold) and taps mirror twice."""
    x = _images(8)
    for params in ((300.0, 0.5, 12.0), (40.0, 0.0, 2.0), (5.0, 40.0, 1.0)):
        jitter, ndx, ndy = digital.elastic_draws(_draws("elastic_transform", 4, len(x)), params, 32, 32)
        ref = digital.elastic_apply(x, params, jitter, ndx, ndy)
        assert torch.equal(digital.elastic_apply_cpu(x, params, jitter, ndx, ndy), ref), params


# ---------------------------------------------------------------------------------------------- snow


@pytest.mark.parametrize("shape", [(32, 32), (20, 27)])
def test_snow_cpu_kernel_equals_torch(shape):
    h, w = shape
    x = _images(24, h, w)
    for s in range(1, 6):
        rng = _draws("snow", s, len(x))
        normal = torch.special.ndtri(rng.uniform(h * w)).view(len(x), h, w)
        angles = blur.motion_angles(rng, -135.0, -45.0)
        for c in (P["snow"][s - 1], P["snow"][s - 1][:2] + (2.9,) + P["snow"][s - 1][3:]):  # another zoom
            ref = weather.snow_apply(x, c, normal, angles)
            assert torch.equal(weather.snow_apply_cpu(x, c, normal, angles), ref), (shape, s, c)


def test_snow_layer_kernel_equals_torch():
    """The compiled layer (normals -> zoomed, thresholded uint8 layer) against the torch path, at ImageNet's zooms
    and others, square and not, including geometries with coordinates beyond the crop (the mask)."""
    g = torch.Generator().manual_seed(4)
    imagenet = C.CORRUPTIONS["snow"].constants["imagenet"]
    for h, w in ((224, 224), (32, 32), (26, 30), (7, 5)):
        z = torch.randn(3, h, w, dtype=torch.float64, generator=g)
        for c in imagenet + P["snow"]:
            for zoom in (c[2], 1.1, 1.2000000000000002, 2.5, 2.9):
                cz = c[:2] + (zoom,) + c[3:]
                assert torch.equal(weather.snow_layer_u8_cpu(z, cz), weather.snow_layer_u8(z, cz)), (h, w, cz)


@pytest.mark.parametrize("shape", [(224, 224), (32, 32), (20, 27)])
def test_snow_normals_only_where_the_zoom_reads(shape):
    """``snow_normals`` evaluates ndtri only on the zoom's crop: those values equal the full draw's, the rest is 0,
    and the layer (hence the corruption) is the one the full draw gives."""
    h, w = shape
    for c in C.CORRUPTIONS["snow"].constants["imagenet"] + P["snow"]:
        rng = _draws("snow", 3, 2)
        full = torch.special.ndtri(rng.uniform(h * w)).view(2, h, w)
        part = weather.snow_normals(rng, c[2], 2, h, w)
        kept = part != 0
        assert torch.equal(part[kept], full[kept]) and kept.float().mean() <= 1.0
        assert torch.equal(weather.snow_layer_u8(part, c), weather.snow_layer_u8(full, c)), (shape, c)
        if c[2] >= 2:
            assert kept.float().mean() < 0.3  # the crop is (1 / zoom)^2 of the plane


# ---------------------------------------------------------------------------------------------- spatter


@pytest.mark.parametrize("shape", [(32, 32), (20, 27)])
def test_spatter_cpu_kernels_equal_torch(shape):
    h, w = shape
    x = _images(24, h, w)
    for s in range(1, 6):
        c = P["spatter"][s - 1]
        normal = torch.special.ndtri(_draws("spatter", s, len(x)).uniform(h * w)).view(len(x), h, w)
        for params in (c, (c[0], c[1] * 6, c[2], c[3] - 0.1) + c[4:]):  # also layers above 1 (uint8 wrap)
            ref = weather.spatter_apply(x, params, normal)
            assert torch.equal(weather.spatter_apply_cpu(x, params, normal), ref), (shape, s, params)


# ---------------------------------------------------------------------------------------------- fog


@pytest.mark.parametrize("shape", [(32, 32), (20, 27), (40, 33)])
def test_fog_cpu_kernel_equals_torch(shape):
    h, w = shape
    x = _images(24, h, w)
    size = weather.fog_mapsize(h, w)
    for s in range(1, 6):
        c = P["fog"][s - 1]
        rng = _draws("fog", s, len(x))
        u = rng.uniform(weather.plasma_uniform_count(size))
        ref = weather.fog_apply(x, c, weather.plasma_fractal(u, size, c[1]))
        assert torch.equal(weather.fog_apply_cpu(x, c, rng, size), ref), (shape, s)


# ---------------------------------------------------------------------------------------------- frost


@pytest.mark.parametrize("shape", [(32, 32), (20, 27)])
def test_frost_cpu_kernel_equals_torch(shape):
    h, w = shape
    x = _images(24, h, w)
    textures = frost.FrostTextures(source="procedural", textures=frost.procedural_textures())
    stack = textures.stacked("cpu")
    for s in range(1, 6):
        c = P["frost"][s - 1]
        idx, r0, c0 = weather.frost_draws(_draws("frost", s, len(x)), textures.shapes, h, w)
        ref = weather.frost_apply(x, c, stack, idx, r0, c0)
        assert torch.equal(weather.frost_apply_cpu(x, c, stack, idx, r0, c0), ref), (shape, s)
