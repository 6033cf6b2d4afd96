"""The corruption library's contracts: registry, spec parsing, keyed randomness, ``corrupt`` I/O,
determinism and subset independence, bad input, frost texture lookup, standalone import."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import corruptions as C
from corruptions import api, frost, rng
from corruptions.errors import CorruptionError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    g = np.random.default_rng(0)
    base = g.integers(0, 256, (7, 4, 4, 3)).astype(np.float32)
    x = np.kron(base, np.ones((1, 8, 8, 1), np.float32)) + g.normal(0, 15, (7, 32, 32, 3))
    return np.clip(x, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def textures():
    return frost.FrostTextures(source="procedural", textures=frost.procedural_textures())


# ---------------------------------------------------------------------------------------------- registry


def test_registry_contents():
    assert isinstance(C.CONSTANTS_VERSION, str) and C.CONSTANTS_VERSION.startswith("cifar-c-")
    assert C.BENCHMARK == ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
                           "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
                           "elastic_transform", "pixelate", "jpeg_compression")
    assert C.EXTRA == ("speckle_noise", "gaussian_blur", "spatter", "saturate")
    assert C.ALL == C.BENCHMARK + C.EXTRA and tuple(C.CORRUPTIONS) == C.ALL
    assert C.GROUPS["noise"] == ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise")
    assert C.GROUPS["blur"] == ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "gaussian_blur")
    assert C.GROUPS["weather"] == ("snow", "frost", "fog", "brightness", "spatter")
    assert C.GROUPS["digital"] == ("contrast", "elastic_transform", "pixelate", "jpeg_compression", "saturate")
    assert set(C.DETERMINISTIC) == {"gaussian_blur", "defocus_blur", "zoom_blur", "contrast", "brightness",
                                    "saturate", "jpeg_compression", "pixelate"}
    for name, spec in C.CORRUPTIONS.items():
        assert spec.name == name and len(spec.params) == 5
        assert spec.benchmark == (name in C.BENCHMARK) and spec.random == (name not in C.DETERMINISTIC)


def test_registry_constants_are_the_cifar_values():
    p = {n: s.params for n, s in C.CORRUPTIONS.items()}
    assert p["gaussian_noise"] == (0.04, 0.06, 0.08, 0.09, 0.10)
    assert p["shot_noise"] == (500, 250, 100, 75, 50)
    assert p["impulse_noise"] == (0.01, 0.02, 0.03, 0.05, 0.07)
    assert p["speckle_noise"] == (0.06, 0.1, 0.12, 0.16, 0.2)
    assert p["gaussian_blur"] == (0.4, 0.6, 0.7, 0.8, 1)
    assert p["glass_blur"] == ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2))
    assert p["defocus_blur"] == ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1))
    assert p["motion_blur"] == ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5))
    assert [len(z) for z in p["zoom_blur"]] == [7, 12, 16, 21, 26]
    assert p["zoom_blur"][1][-1] == pytest.approx(1.11) and p["zoom_blur"][4][-1] == pytest.approx(1.25)
    assert p["fog"] == ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75))
    assert p["frost"] == ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45))
    assert p["snow"][0] == (0.1, 0.2, 1, 0.6, 8, 3, 0.95) and p["snow"][4] == (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)
    assert p["spatter"][0] == (0.62, 0.1, 0.7, 0.7, 0.5, 0) and p["spatter"][4] == (0.65, 0.1, 0.5, 0.68, 0.6, 1)
    assert p["contrast"] == (0.75, 0.5, 0.4, 0.3, 0.15)
    assert p["brightness"] == (0.05, 0.1, 0.15, 0.2, 0.3)
    assert p["saturate"] == ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2))
    assert p["jpeg_compression"] == (80, 65, 58, 50, 40)
    assert p["pixelate"] == (0.95, 0.9, 0.85, 0.75, 0.65)
    assert [tuple(round(v, 6) for v in c) for c in p["elastic_transform"]] == [
        (0, 0, 2.56), (1.6, 6.4, 2.24), (2.56, 1.92, 1.92), (3.2, 1.28, 1.6), (3.2, 0.96, 0.96)]


def test_resolve_corruptions():
    assert C.resolve_corruptions("contrast") == ["contrast"]
    assert C.resolve_corruptions("fog, contrast") == ["fog", "contrast"]
    assert C.resolve_corruptions("noise") == list(C.GROUPS["noise"])
    assert C.resolve_corruptions(["blur", "gaussian_blur"]) == list(C.GROUPS["blur"])
    assert C.resolve_corruptions("benchmark") == list(C.BENCHMARK)
    assert C.resolve_corruptions("extra") == list(C.EXTRA)
    assert C.resolve_corruptions("all") == list(C.ALL)
    assert C.resolve_corruptions("ALL")[:2] == ["gaussian_noise", "shot_noise"]
    with pytest.raises(CorruptionError) as e:
        C.resolve_corruptions("contrast,fogg")
    msg = str(e.value)
    assert "fogg" in msg and "gaussian_noise" in msg and "saturate" in msg and "weather" in msg
    assert "\n" not in msg
    for bad in ("", [], ["contrast", 3]):
        with pytest.raises(CorruptionError):
            C.resolve_corruptions(bad)


def test_parse_severities():
    assert C.parse_severities("3") == [3]
    assert C.parse_severities(3) == [3]
    assert C.parse_severities("1-5") == [1, 2, 3, 4, 5]
    assert C.parse_severities("1,3,5") == [1, 3, 5]
    assert C.parse_severities("5, 1-2") == [1, 2, 5]
    assert C.parse_severities([2, 2, 4]) == [2, 4]
    assert C.parse_severities(np.int64(4)) == [4]
    assert C.parse_severities("all") == C.parse_severities(" ALL ") == [1, 2, 3, 4, 5]
    assert C.parse_severities(["1-2", 5]) == [1, 2, 5]
    assert C.parse_severities("3,1", keep_order=True) == [3, 1]  # the writers' block order
    with pytest.raises(CorruptionError, match="repeat"):
        C.parse_severities([1, 1], keep_order=True)
    for bad in ("0", 0, 6, "6", "1-6", "x", "", "2.5", 2.5, True, "3-1", [], [0, 1], None):
        with pytest.raises(CorruptionError, match="severity must be in 1..5"):
            C.parse_severities(bad)


# ---------------------------------------------------------------------------------------------- keyed randomness


def test_mix64_matches_python_reference():
    vals = [0, 1, 2, 12345, 2**63 - 1, -(2**63), -1, 0x9E3779B97F4A7C15 - 2**64, 987654321987654321]
    t = torch.tensor(vals, dtype=torch.int64)
    got = rng.mix64(t.clone()).tolist()
    for v, g in zip(vals, got):
        assert g & (2**64 - 1) == rng.mix64_py(v)


def test_uniforms_are_keyed_and_well_spread():
    keys = rng.image_keys(rng.base_key(0, "fog", 2), torch.arange(50))
    u = rng.uniform_from_keys(keys, 2000)
    assert u.dtype == torch.float64 and 0 < u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.005 and abs(u.var().item() - 1 / 12) < 0.002
    assert torch.equal(rng.uniform_from_keys(keys[10:20], 2000), u[10:20])
    assert torch.equal(rng.uniform_from_keys(keys, 100), u[:, :100])  # counter-based: prefix-stable
    assert not torch.equal(rng.uniform_from_keys(keys, 100, stream=1), u[:, :100])
    assert rng.base_key(0, "fog", 2) != rng.base_key(1, "fog", 2) != rng.base_key(0, "fog", 3)
    c = np.corrcoef(u[:, :-1].ravel().numpy(), u[:, 1:].ravel().numpy())[0, 1]
    assert abs(c) < 0.01


# ---------------------------------------------------------------------------------------------- corrupt()


@pytest.mark.parametrize("name", C.ALL)
def test_determinism_subset_and_seeds(name, images, textures):
    sev = 5 if name != "glass_blur" else 4
    full = C.corrupt(images, name, sev, seed=3, frost=textures)
    assert full.dtype == np.uint8 and full.shape == images.shape
    assert np.array_equal(full, C.corrupt(images, name, sev, seed=3, frost=textures))
    sub = C.corrupt(images[2:5], name, sev, seed=3, indices=[2, 3, 4], frost=textures)
    assert np.array_equal(sub, full[2:5])
    rev = C.corrupt(images[::-1].copy(), name, sev, seed=3, indices=np.arange(7)[::-1], frost=textures)
    assert np.array_equal(rev[::-1], full)
    one = C.corrupt(images[4], name, sev, seed=3, indices=4, frost=textures)  # single (H, W, 3) image
    assert one.shape == images[4].shape and np.array_equal(one, full[4])
    other = C.corrupt(images, name, sev, seed=4, frost=textures)
    if C.CORRUPTIONS[name].random:
        assert not np.array_equal(other, full)
    else:
        assert np.array_equal(other, full)


def test_chunking_does_not_change_results(images, monkeypatch):
    names = ["gaussian_noise", "glass_blur", "fog", "elastic_transform", "zoom_blur"]
    ref = {n: C.corrupt(images, n, 3, seed=1) for n in names}
    monkeypatch.setitem(api._CHUNK_MAX_IMAGES, "cpu", 2)
    for n in names:
        assert np.array_equal(C.corrupt(images, n, 3, seed=1), ref[n])
    parts = list(C.corrupt_batches(images, "fog", 3, batch_size=3, seed=1))
    assert [len(p) for p in parts] == [3, 3, 1]
    assert np.array_equal(np.concatenate(parts), ref["fog"])


@pytest.mark.parametrize("name", ["shot_noise", "motion_blur", "snow", "pixelate", "spatter", "saturate"])
def test_numpy_tensor_parity(name, images):
    a = C.corrupt(images, name, 2, seed=5)
    t = C.corrupt(torch.from_numpy(images), name, 2, seed=5)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and t.device.type == "cpu"
    assert np.array_equal(a, t.numpy())
    nc = np.asfortranarray(images)  # non-contiguous input
    assert np.array_equal(C.corrupt(nc, name, 2, seed=5), a)
    assert np.array_equal(C.corrupt(images, name, 2, seed=5, device="cpu"), a)


def test_other_sizes(textures):
    """Sizes without a reference need the constants named (one line), then work with a SizeWarning."""
    g = np.random.default_rng(1)
    for shape in ((2, 28, 28, 3), (2, 40, 48, 3)):
        x = g.integers(0, 256, shape).astype(np.uint8)
        with pytest.raises(CorruptionError, match="no default constants.*cifar, tiny-imagenet, imagenet"):
            C.corrupt(x, "contrast", 3)
        with pytest.warns(C.SizeWarning, match="CIFAR-10-C constants"):
            C.corrupt(x, "contrast", 2, constants="cifar")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", C.SizeWarning)
            for name in C.ALL:
                out = C.corrupt(x, name, 3, constants="cifar", frost=textures)
                assert out.shape == x.shape and out.dtype == np.uint8
    with pytest.raises(CorruptionError, match="unknown constants"):
        C.corrupt(np.zeros((1, 32, 32, 3), np.uint8), "contrast", 1, constants="cifar10")
    with pytest.raises(CorruptionError, match="frost"), warnings.catch_warnings():
        warnings.simplefilter("ignore", C.SizeWarning)
        C.corrupt(np.zeros((1, 70, 70, 3), np.uint8), "frost", 1, constants="cifar", frost=textures)


def test_empty_batch():
    out = C.corrupt(np.zeros((0, 32, 32, 3), np.uint8), "fog", 1)
    assert out.shape == (0, 32, 32, 3)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(images=np.zeros((2, 32, 32, 3), np.float32)), "dtype uint8"),
        (dict(images=np.zeros((2, 32, 32), np.uint8)), r"\(N, H, W, 3\)"),
        (dict(images=np.zeros((2, 32, 32, 4), np.uint8)), r"\(N, H, W, 3\)"),
        (dict(images=np.zeros((2, 3, 32, 32), np.uint8)), r"\(N, H, W, 3\)"),
        (dict(images=np.zeros((2, 4, 4, 3), np.uint8)), "at least"),
        (dict(images=[[1, 2, 3]]), "NumPy array or torch tensor"),
        (dict(images=torch.zeros((2, 32, 32, 3))), "dtype uint8"),
        (dict(name="fogg"), "unknown corruption 'fogg'.*gaussian_noise.*saturate"),
        (dict(severity=0), "severity must be in 1..5"),
        (dict(severity=6), "severity must be in 1..5"),
        (dict(severity="3"), None),
        (dict(severity=True), "severity must be in 1..5"),
        (dict(indices=[0, 1, 2]), "indices"),
        (dict(indices=[0.5, 1.5]), "indices"),
        (dict(seed=1.5), "seed"),
        (dict(device="tpu"), "device"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(images=np.zeros((2, 32, 32, 3), np.uint8), name="fog", severity=2)
    args.update(kwargs)
    if match is None:  # accepted spellings
        C.corrupt(args.pop("images"), args.pop("name"), args.pop("severity"), **args)
        return
    with pytest.raises(CorruptionError, match=match) as e:
        C.corrupt(args.pop("images"), args.pop("name"), args.pop("severity"), **args)
    assert "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)


def test_bad_frost_argument():
    with pytest.raises(CorruptionError, match="FrostTextures"):
        C.corrupt(np.zeros((1, 32, 32, 3), np.uint8), "frost", 1, frost="frost_dir")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(images, textures):
    for name in C.ALL:
        cpu = C.corrupt(images, name, 3, seed=2, frost=textures)
        gpu = C.corrupt(torch.from_numpy(images).cuda(), name, 3, seed=2, frost=textures)
        assert gpu.device.type == "cuda"
        diff = np.abs(gpu.cpu().numpy().astype(int) - cpu)
        # only transcendental library calls may differ in the last ulp between devices
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3, name


# ---------------------------------------------------------------------------------------------- frost textures


def _write_textures(d: Path):
    import cv2

    g = np.random.default_rng(2)
    sizes = {"frost1.png": (600, 900), "frost2.png": (315, 560), "frost3.png": (315, 560),
             "frost4.jpg": (350, 527), "frost5.jpg": (495, 660)}
    for name, (h, w) in sizes.items():
        cv2.imwrite(str(d / name), g.integers(0, 256, (h, w, 3)).astype(np.uint8))


def test_frost_dir_lookup_and_errors(tmp_path):
    with pytest.raises(CorruptionError, match="does not exist"):
        frost.load_frost_textures(tmp_path / "nope")
    _write_textures(tmp_path)
    (tmp_path / "frost4.jpg").unlink()
    (tmp_path / "frost2.png").unlink()
    with pytest.raises(CorruptionError, match="frost2.png, frost4.jpg"):
        frost.load_frost_textures(tmp_path)
    _write_textures(tmp_path)
    ft = frost.load_frost_textures(tmp_path)
    assert ft.source == f"dir:{tmp_path.resolve()}" and not ft.is_procedural
    assert ft.shapes == frost.FROST_SHAPES
    assert set(ft.file_sha256) == set(frost.FROST_FILES) and len(ft.digest) == 64
    (tmp_path / "frost3.png").write_bytes(b"not an image")
    with pytest.raises(CorruptionError, match="frost3.png"):
        frost.load_frost_textures(tmp_path)


def test_frost_default_lookup_imagecorruptions_then_procedural(tmp_path, monkeypatch):
    site = tmp_path / "site"
    pkg = site / "imagecorruptions" / "frost"
    pkg.mkdir(parents=True)
    _write_textures(pkg)
    info = site / "imagecorruptions-1.1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: imagecorruptions\nVersion: 1.1.2\n")
    (info / "RECORD").write_text("".join(f"imagecorruptions/frost/{f},,\n" for f in frost.FROST_FILES + ("frost6.jpg",)))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(frost, "_DEFAULT", None)
    ft = frost.load_frost_textures()
    assert ft.source == "imagecorruptions:1.1.2"
    assert frost.load_frost_textures() is ft  # cached
    assert "imagecorruptions" not in sys.modules  # found through metadata, never imported

    monkeypatch.setattr(frost, "_DEFAULT", None)
    monkeypatch.setattr(frost, "_imagecorruptions_files", lambda: None)
    with pytest.warns(UserWarning, match="PROCEDURAL"):
        ft = frost.load_frost_textures()
    assert ft.source == "procedural" and ft.is_procedural
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = C.corrupt(np.zeros((2, 32, 32, 3), np.uint8), "frost", 2)  # cached: no second warning
    assert out.any()


# ---------------------------------------------------------------------------------------------- standalone


def test_package_is_standalone():
    code = (
        "import sys, numpy as np, corruptions\n"
        "x = np.zeros((2, 32, 32, 3), np.uint8)\n"
        "for n in ('fog', 'contrast', 'jpeg_compression'): corruptions.corrupt(x, n, 2)\n"
        "bad = [m for m in sys.modules if m.startswith('robustbench_dgsa')]\n"
        "assert not bad, bad\n"
        "assert 'skimage' not in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_kernels_compile_without_a_writable_cache(monkeypatch):
    """A read-only install with no writable cache folder still gets working kernels (compiled per process)."""
    import numba.core.caching as caching

    from corruptions._jit import kernel

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])

    def add_one(a):
        return a + 1.0

    with pytest.raises(RuntimeError):   # what numba does with nothing writable, and what kernel() must absorb
        caching.FunctionCache(add_one)
    assert kernel(add_one)(1.5) == 2.5


def test_cpu_chunks_are_sized_by_pixels():
    # 64 images at 32 px as before; at 224 px a chunk of the same pixel count (10 images), never fewer than one
    assert api.chunk_images("cpu", 32, 32) == 64
    assert api.chunk_images("cpu", 64, 64) == 64
    assert api.chunk_images("cpu", 224, 224) == 10
    assert api.chunk_images("cpu", 4000, 3000) == 1
    assert api.chunk_images("cuda", 224, 224) > 100


def test_chunk_results_are_written_in_place_or_copied():
    # corrupt()'s chunk loop offers each chunk's slice of the output (corruptions._output); a result written into it
    # stays, any other result (e.g. when an intermediate of the same shape took the slice) is copied over it
    from corruptions import _output

    x = torch.from_numpy(np.random.default_rng(0).integers(0, 200, (7, 9, 9, 3)).astype(np.uint8))
    taken = []

    def in_place(xc, param, rng):
        buf = _output.output_array(tuple(xc.shape))
        taken.append(buf)
        buf[...] = xc.numpy() + 2
        return torch.from_numpy(buf)

    def intermediate_took_it(xc, param, rng):
        scratch = _output.output_array(tuple(xc.shape))
        scratch[...] = 99
        return xc + 1

    for fn, add in ((in_place, 2), (intermediate_took_it, 1)):
        out = torch.from_numpy(np.zeros((7, 9, 9, 3), np.uint8))
        api._run_chunks(x, out, fn, None, None, (), torch.device("cpu"))
        assert torch.equal(out, x + add)
        if fn is in_place:  # every chunk wrote straight into its slice of the output
            assert taken and all(np.shares_memory(b, out.numpy()) for b in taken)
    _output.offer(np.zeros((2, 3), np.uint8))
    first = _output.output_array((2, 3))
    assert first.shape == (2, 3) and _output.output_array((2, 3)) is not first  # taken once
    _output.offer(np.zeros((2, 3), np.uint8))
    assert _output.output_array((3, 2)).shape == (3, 2)  # another shape: a new array
    _output.offer(None)
