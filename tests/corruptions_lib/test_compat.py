"""corruptions.compat: imagecorruptions' call at any size >= 32 px; corruptions.corrupt unchanged.

The comparisons with imagecorruptions run it as a black box in its own interpreter (``IC_PYTHON``, else
``/tmp/icvenv/bin/python``; skipped when neither can import it): the 8 deterministic corruptions byte for byte at a
non-square size, the random ones given imagecorruptions' own draws (elastic_transform, frost), and the exception
type of every bad input.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from corruptions import compat
from corruptions.errors import CorruptionError
from corruptions.frost import PROCEDURAL, FrostTextures, load_frost_textures, procedural_textures
from corruptions.registry import ALL, DETERMINISTIC

WORKER = Path(__file__).with_name("ic_blackbox_worker.py")
FROST_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "corruptions" / "frost"
H, W = 121, 61  # non-square, odd sides (imagecorruptions' demo photograph is 1200 x 602)


def _ic_python() -> str | None:
    for cand in (os.environ.get("IC_PYTHON"), "/tmp/icvenv/bin/python"):
        if cand and Path(cand).exists():
            ok = subprocess.run([cand, "-c", "import imagecorruptions"], capture_output=True).returncode == 0
            if ok:
                return cand
    return None


def _photo(h: int = H, w: int = W, seed: int = 3) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([128 + 100 * np.sin(xx / 7.0 + c) * np.cos(yy / 11.0) for c in range(3)], -1)
    return np.clip(img + np.random.default_rng(seed).normal(0, 10, img.shape), 0, 255).astype(np.uint8)


def _frost():
    return FrostTextures(PROCEDURAL, procedural_textures())


BAD_CALLS = {
    "rgba": ("rgba", {"severity": 1, "corruption_name": "contrast"}),
    "4d": ("batch", {"severity": 1, "corruption_name": "contrast"}),
    "float": ("float", {"severity": 1, "corruption_name": "contrast"}),
    "small": ("small", {"severity": 1, "corruption_name": "contrast"}),
    "sev0": (None, {"severity": 0, "corruption_name": "contrast"}),
    "sev6": (None, {"severity": 6, "corruption_name": "contrast"}),
    "sev_float": (None, {"severity": 2.0, "corruption_name": "contrast"}),
    "sev_str": (None, {"severity": "2", "corruption_name": "contrast"}),
    "bad_name": (None, {"severity": 1, "corruption_name": "bogus"}),
    "no_name": (None, {"severity": 1}),
    "number_19": (None, {"severity": 1, "corruption_number": 19}),
    "number_float": (None, {"severity": 1, "corruption_number": 1.0}),
}
EXPECTED_TYPES = {"rgba": AttributeError, "4d": AttributeError, "float": AttributeError, "small": AttributeError,
                  "sev0": AttributeError, "sev6": AttributeError, "sev_float": TypeError, "sev_str": AttributeError,
                  "bad_name": KeyError, "no_name": ValueError, "number_19": IndexError, "number_float": TypeError}


def _bad_images(img):
    return {"rgba": np.zeros((40, 50, 4), np.uint8), "batch": np.zeros((2, 40, 50, 3), np.uint8),
            "float": img.astype(np.float32), "small": np.zeros((31, 50, 3), np.uint8)}


@pytest.fixture(scope="module")
def ic_results(tmp_path_factory):
    py = _ic_python()
    if py is None:
        pytest.skip("imagecorruptions is not installed in IC_PYTHON or /tmp/icvenv")
    img = _photo()
    calls = [[f"{n}/{s}", {"severity": s, "corruption_name": n}] for n in DETERMINISTIC for s in (1, 3, 5)]
    calls += [[f"gray/{n}", {"image": "gray", "severity": 3, "corruption_name": n}] for n in ALL]
    calls += [[f"bad/{k}", dict(kw, **({"image": im} if im else {}))] for k, (im, kw) in BAD_CALLS.items()]
    seeded = [[f"elastic/{s}", "elastic_transform", s, 11 + s] for s in (1, 5)]
    seeded += [[f"frost/{s}", "frost", s, 5 + s] for s in (1, 4)]
    seeded += [[f"snow/{s}", "snow", s, 20 + s] for s in (1, 3, 5)]
    seeded += [[f"motion/{s}", "motion_blur", s, 30 + s] for s in (1, 5)]
    seeded += [[f"motion_small/{k}", "motion_blur", 5, 40 + k, "small_img"] for k in range(4)]
    seeded += [[f"glass/{s}", "glass_blur", s, 50 + s, "small_img"] for s in (1, 5)]
    seeded += [[f"spatter/{s}", "spatter", s, 60 + s, "small_img"] for s in (2, 4)]
    d = tmp_path_factory.mktemp("ic")
    np.savez(d / "req.npz", image=img, gray=img[..., 0], calls=np.array(json.dumps(calls)), small_img=_photo(32, 40, 5),
             seeded=np.array(json.dumps(seeded)), **_bad_images(img))
    subprocess.run([py, str(WORKER), str(d / "req.npz"), str(d / "res.npz")], check=True, capture_output=True)
    res = np.load(d / "res.npz")
    return img, {k: res[k] for k in res.files}, json.loads(str(res["meta"]))


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_deterministic_corruptions_equal_imagecorruptions_at_a_non_square_size(ic_results, name):
    img, res, _ = ic_results
    for s in (1, 3, 5):
        ours = compat.corrupt(img, severity=s, corruption_name=name)
        assert ours.dtype == np.uint8 and ours.shape == (H, W, 3)
        assert np.array_equal(ours, res[f"{name}/{s}"]), (name, s)


def test_elastic_and_frost_equal_imagecorruptions_given_its_draws(ic_results):
    img, res, _ = ic_results
    for s in (1, 5):
        dx, dy = res[f"elastic/{s}/draw0/uniform"], res[f"elastic/{s}/draw1/uniform"]
        assert dx.shape == (H, W) and np.abs(dx).max() <= 0.005 * H  # U(+-0.5 % of the height)
        assert np.array_equal(compat.elastic_apply(img, compat.ELASTIC_ALPHA[s - 1], dx, dy), res[f"elastic/{s}"])
    if not FROST_DIR.is_dir():
        pytest.skip("frost photographs not in ../shared/data")
    photos = load_frost_textures(FROST_DIR).at_scale(1.0).textures
    for s in (1, 4):
        idx, r0, c0 = (int(res[f"frost/{s}/draw{k}/randint"]) for k in range(3))
        tw, th = compat.frost_size(photos[idx].shape[:2], H, W)
        ours = compat.frost_apply(img, compat.CONSTANTS["imagenet"]["frost"][s - 1], photos[idx],
                                  (r0 + 0.5) / (th - H), (c0 + 0.5) / (tw - W))
        assert np.array_equal(ours, res[f"frost/{s}"])


def test_snow_and_motion_blur_equal_imagecorruptions_given_its_draws(ic_results):
    img, res, _ = ic_results
    for s in (1, 3, 5):
        p = compat.CONSTANTS["imagenet"]["snow"][s - 1]
        normal = (res[f"snow/{s}/draw0/normal"] - p[0]) / p[1]  # its N(loc, scale) field, standardised
        angle = float(res[f"snow/{s}/draw1/uniform"])
        assert np.array_equal(compat.snow_apply(img, p, normal, angle), res[f"snow/{s}"]), s
    small = _photo(32, 40, 5)  # a kernel longer than the image: the sum stops where a shift reaches its side
    cases = [(img, f"motion/{s}", s) for s in (1, 5)] + [(small, f"motion_small/{k}", 5) for k in range(4)]
    for image, label, s in cases:
        radius, sigma = compat.CONSTANTS["imagenet"]["motion_blur"][s - 1]
        angle = float(res[f"{label}/draw0/uniform"])
        ours = np.uint8(np.clip(compat.motion_blur_float(image.astype(np.float64), radius, sigma, angle), 0, 255))
        differ = np.abs(ours.astype(int) - res[label])
        assert differ.max() <= 1 and (differ > 0).sum() <= 5, (label, int((differ > 0).sum()))  # summation order


def test_glass_blur_and_spatter_equal_imagecorruptions_given_its_draws(ic_results):
    """The suite's implementations (which compat uses for them) fed imagecorruptions' own draws."""
    import torch

    from corruptions.blur import glass_blur_apply
    from corruptions.weather import spatter_apply_cpu
    _, res, _ = ic_results
    small = _photo(32, 40, 5)
    x = torch.from_numpy(small[None].copy())
    h, w = small.shape[:2]
    for s in (1, 5):
        p = compat.CONSTANTS["imagenet"]["glass_blur"][s - 1]
        _, d, iterations = p
        n = iterations * (h - 2 * d) * (w - 2 * d)
        draws = np.stack([res[f"glass/{s}/draw{k}/randint"] for k in range(n)])  # (dx, dy) per pixel, scan order
        choice = (d - 1 - draws[:, 0]) + 2 * d * (d - 1 - draws[:, 1])
        choice = choice.astype(np.int64).reshape(iterations, h - 2 * d, w - 2 * d)[:, ::-1, ::-1].copy()
        assert np.array_equal(glass_blur_apply(x, p, torch.from_numpy(choice)[None])[0].numpy(), res[f"glass/{s}"])
    for s in (2, 4):  # water, mud
        p = compat.CONSTANTS["imagenet"]["spatter"][s - 1]
        normal = (res[f"spatter/{s}/draw0/normal"] - p[0]) / p[1]
        assert np.array_equal(spatter_apply_cpu(x, p, torch.from_numpy(normal)[None])[0].numpy(), res[f"spatter/{s}"])


def test_grayscale_shape_dtype_and_exception_types_match_imagecorruptions(ic_results):
    img, res, meta = ic_results
    frost = _frost()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ALL:
            ours = compat.corrupt(img[..., 0], severity=3, corruption_name=name, seed=1, frost=frost)
            ref = res[f"gray/{name}"]
            assert (ours.shape, ours.dtype) == (ref.shape, ref.dtype) == ((H, W, 3), np.uint8), name
            if name in DETERMINISTIC:
                assert np.array_equal(ours, ref), name
    bad = _bad_images(img)
    for key, (im, kw) in BAD_CALLS.items():
        with pytest.raises(Exception) as e:
            compat.corrupt(bad[im] if im else img, **kw)
        assert meta[f"bad/{key}"] == EXPECTED_TYPES[key].__name__, key  # what imagecorruptions raised
        assert isinstance(e.value, EXPECTED_TYPES[key]) and isinstance(e.value, CorruptionError), key
    assert json.loads(str(res["names"])) == [f.__name__ for f in compat.corruption_tuple]


def test_exception_types_without_imagecorruptions():
    img = _photo(40, 50)
    for key, (im, kw) in BAD_CALLS.items():
        with pytest.raises(EXPECTED_TYPES[key]):
            compat.corrupt(_bad_images(img)[im] if im else img, **kw)


def test_any_size_from_32_px_uses_the_imagenet_constants():
    img = _photo(32, 45)
    out = compat.corrupt(img, 5, "contrast")  # imagecorruptions' positional order
    mean = img.astype(np.float64).mean(axis=(0, 1))
    expected = np.uint8(np.clip((img / 255.0 - mean / 255.0) * 0.05 + mean / 255.0, 0, 1) * 255)
    assert np.array_equal(out, expected)  # ImageNet's contrast at severity 5 is 0.05 (CIFAR's is 0.15)
    assert compat.corrupt(img, severity=2, corruption_number=11).shape == (32, 45, 3)  # 11 = contrast
    # name wins over number; a negative number counts from the end (-1 alone means "not given")
    assert np.array_equal(compat.corrupt(img, 2, "contrast", corruption_number=0), compat.corrupt(img, 2, "contrast"))
    assert np.array_equal(compat.corrupt(img, 2, corruption_number=-2, seed=3),
                          compat.corrupt(img, 2, "spatter", seed=3))


def test_seeding_is_keyed_and_follows_numpys_global_stream():
    img = _photo(48, 40)
    a = compat.corrupt(img, 3, "gaussian_noise", seed=5)
    assert np.array_equal(a, compat.corrupt(img, 3, "gaussian_noise", seed=5))
    assert not np.array_equal(a, compat.corrupt(img, 3, "gaussian_noise", seed=6))
    assert not np.array_equal(a, compat.corrupt(img, 3, "gaussian_noise", seed=5, index=1))
    np.random.seed(1)
    b = compat.corrupt(img, 3, "shot_noise")
    c = compat.corrupt(img, 3, "shot_noise")
    np.random.seed(1)
    assert np.array_equal(b, compat.corrupt(img, 3, "shot_noise")) and not np.array_equal(b, c)


def test_size_handling_per_imagecorruptions():
    from corruptions.weather import fog_mapsize
    # fog: the plasma map is the next power of two >= the longer side (imagecorruptions: 64 at 40x50, 128 at 120x60)
    assert (fog_mapsize(40, 50), fog_mapsize(120, 60), fog_mapsize(1200, 602)) == (64, 128, 2048)
    # frost: the photograph is scaled to cover the image with a 1.1 margin (frost5 is 495 x 660)
    assert compat.frost_size((495, 660), 40, 50) == (727, 545)
    assert compat.frost_size((495, 660), 1200, 602) == (1761, 1321)
    assert compat.frost_size((495, 660), 33, 1300) == (1431, 1073)
    # clipped zoom: per axis, top-left H x W (a 2.25x zoom trims 0, not (out - H) // 2, rows)
    ramp = np.arange(45 * 70, dtype=np.float64).reshape(45, 70)
    z = compat.clipped_zoom(ramp, 2.25)
    assert z.shape == (45, 70) and z[0, 0] == ramp[(45 - 20) // 2, (70 - 32) // 2]
    # pixelate: NEAREST upsampling of the BOX-downsampled image
    img = _photo(37, 53)
    from PIL import Image
    small = np.asarray(Image.fromarray(img).resize((int(53 * 0.25), int(37 * 0.25)), Image.BOX))
    out = compat.corrupt(img, 5, "pixelate")
    assert set(map(tuple, out.reshape(-1, 3))) <= set(map(tuple, small.reshape(-1, 3)))


def test_corruption_dict_functions_and_subsets():
    assert list(compat.corruption_dict) == list(ALL) and len(compat.corruption_tuple) == 19
    assert compat.get_corruption_names() == list(ALL[:15])
    assert compat.get_corruption_names("validation") == ["speckle_noise", "gaussian_blur", "spatter", "saturate"]
    with pytest.raises(ValueError):
        compat.get_corruption_names("bogus")
    from PIL import Image
    img = _photo(40, 44)
    r = compat.corruption_dict["contrast"](Image.fromarray(img), 2)
    assert r.dtype == np.float64 and np.array_equal(np.uint8(r), compat.corrupt(img, 2, "contrast"))
    assert isinstance(compat.corruption_dict["pixelate"](Image.fromarray(img), 2), Image.Image)


def test_frost_substitute_warns_and_a_folder_works(tmp_path, monkeypatch):
    img = _photo(40, 44)
    import corruptions.frost as fr
    monkeypatch.setattr(fr, "_DEFAULT", None)
    monkeypatch.setattr(fr, "_imagecorruptions_files", lambda: None)
    with pytest.warns(UserWarning, match="PROCEDURAL"):
        assert compat.corrupt(img, 1, "frost", seed=0).shape == (40, 44, 3)
    if FROST_DIR.is_dir():
        out = compat.corrupt(img, 1, "frost", seed=0, frost=str(FROST_DIR))
        assert out.shape == (40, 44, 3) and (out >= img).all()  # severity 1: x + 0.4 * texture


# corruptions.corrupt on a fixed input: sha256[:16] recorded from main's code before corruptions.compat existed
# (commit d743878); the suite's size-keyed pipeline must stay byte-identical.
BEFORE = {
    "224/contrast": "6a15d70f1ae24961", "224/fog": "835bec8b60ba7e7d", "224/pixelate": "1e78578c7967d672",
    "224/zoom_blur": "91460817196c14f7", "32/brightness": "e3bac6ee83af1ebe", "32/contrast": "5c6a9f29ef283899",
    "32/defocus_blur": "02153ac7cf069e7e", "32/elastic_transform": "ae8e81352dafab79", "32/fog": "a537e2ad16ebbfc9",
    "32/frost": "d0ac0ab1961c1554", "32/gaussian_blur": "8949d49f320acabd", "32/gaussian_noise": "e06789d6c073e912",
    "32/glass_blur": "e163dbf7d91a315f", "32/impulse_noise": "fb09be7c02bc3f7e",
    "32/jpeg_compression": "9048320dc0ee7045", "32/motion_blur": "f7b4d48fa20b29a6",
    "32/pixelate": "9484d73552613cdd", "32/saturate": "84efcc132a18035c", "32/shot_noise": "e64c86c04c963068",
    "32/snow": "56366b638883bcad", "32/spatter": "9f288606e49139c3", "32/speckle_noise": "2e748621a29badcb",
    "32/zoom_blur": "f952dea77c03d49c", "64/elastic_transform": "a4d0f76b14f287b6", "64/fog": "c1493ed0f4dca9bf",
    "64/frost": "aac23c6b8f573c32", "64/snow": "7b3c3cdc05382c4d",
}


def test_size_keyed_corrupt_is_byte_identical_to_before():
    from corruptions import corrupt
    frost = _frost()
    rng = np.random.default_rng(34)
    inputs = {s: rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8) for s, n in ((32, 3), (64, 1), (224, 1))}
    for key, digest in BEFORE.items():
        size, name = key.split("/")
        y = corrupt(inputs[int(size)], name, 3, seed=7, frost=frost)
        assert hashlib.sha256(y.tobytes()).hexdigest()[:16] == digest, key


def test_compat_imports_nothing_from_the_suite():
    code = "import corruptions.compat, sys; print(any(m.startswith('robustbench_dgsa') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
