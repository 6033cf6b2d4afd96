"""corruptions as transforms: Corrupt, CorruptedDataset, imagecorruptions-style corrupt() and subsets."""
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

import corruptions
from corruptions import Corrupt, CorruptedDataset, CorruptionError, corrupt, get_corruption_names
from corruptions import api as corruptions_api


def _images(n=6, size=32, seed=0):
    return (np.random.RandomState(seed).rand(n, size, size, 3) * 255).astype(np.uint8)


class _ArrayDataset(torch.utils.data.Dataset):
    def __init__(self, x, y, as_pil=False):
        self.x, self.y, self.as_pil = x, y, as_pil

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = Image.fromarray(self.x[i]) if self.as_pil else self.x[i]
        return img, int(self.y[i])


def test_subsets_match_imagecorruptions():
    assert len(get_corruption_names()) == 15 and get_corruption_names("common") == list(corruptions.BENCHMARK)
    assert get_corruption_names("validation") == ["speckle_noise", "gaussian_blur", "spatter", "saturate"]
    assert get_corruption_names("all") == list(corruptions.ALL) and len(corruptions.ALL) == 19
    assert get_corruption_names("noise") == ["gaussian_noise", "shot_noise", "impulse_noise"]
    assert get_corruption_names("blur") == ["defocus_blur", "glass_blur", "motion_blur", "zoom_blur"]
    assert get_corruption_names("weather") == ["snow", "frost", "fog", "brightness"]
    assert get_corruption_names("digital") == ["contrast", "elastic_transform", "pixelate", "jpeg_compression"]
    with pytest.raises(CorruptionError, match="subset"):
        get_corruption_names("bogus")


def test_imagecorruptions_call_styles_agree():
    x = _images(1)[0]
    ref = corrupt(x, "shot_noise", 4)
    assert np.array_equal(corrupt(x, corruption_name="shot_noise", severity=4), ref)
    assert np.array_equal(corrupt(x, severity=4, corruption_number=1), ref)  # ALL[1] == shot_noise
    assert np.array_equal(corrupt(x, 4, "shot_noise"), ref)  # imagecorruptions' positional order
    assert ref.dtype == np.uint8 and ref.shape == x.shape
    gray = corrupt(x[..., 0], corruption_name="contrast", severity=2)  # HxW -> stacked to HxWx3 as imagecorruptions
    assert gray.shape == (32, 32, 3)
    assert np.array_equal(gray, corrupt(np.stack([x[..., 0]] * 3, -1), "contrast", 2))
    with pytest.raises(CorruptionError, match="corruption_number"):
        corrupt(x, corruption_number=19)
    with pytest.raises(CorruptionError, match="no corruption"):
        corrupt(x)


def test_size_warning_once(monkeypatch):
    monkeypatch.setattr(corruptions_api, "_SIZE_WARNED", set())
    x = _images(1, size=40)[0]
    with pytest.warns(corruptions.SizeWarning, match="40x40"):
        corrupt(x, "brightness", 1, constants="cifar")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corrupt(x, "brightness", 1, constants="cifar")  # second time: silent
        corrupt(_images(1)[0], "brightness", 1)  # 32x32: never warns
        corrupt(_images(1, size=64)[0], "brightness", 1)  # 64x64: the Tiny-ImageNet constants, no warning


@pytest.mark.parametrize("kind", ["numpy", "pil", "uint8_chw", "float_chw"])
def test_corrupt_transform_types_and_keyed_randomness(kind):
    x = _images(5)
    ref = corrupt(x, "gaussian_noise", 3, seed=7)  # indices 0..4
    t = Corrupt("gaussian_noise", 3, seed=7)
    for i in (0, 4):
        img = {"numpy": x[i], "pil": Image.fromarray(x[i]),
               "uint8_chw": torch.from_numpy(x[i]).permute(2, 0, 1),
               "float_chw": torch.from_numpy(x[i]).permute(2, 0, 1).float() / 255}[kind]
        out = t(img, index=i)
        assert type(out) is type(img)
        if kind == "numpy":
            got = out
        elif kind == "pil":
            assert out.mode == "RGB" and out.size == img.size
            got = np.asarray(out)
        elif kind == "uint8_chw":
            assert out.dtype == torch.uint8 and out.shape == img.shape
            got = out.permute(1, 2, 0).numpy()
        else:
            assert out.dtype == torch.float32 and out.shape == img.shape and float(out.max()) <= 1.0
            got = (out.permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
        assert np.array_equal(got, ref[i])
    assert not np.array_equal(t(x[0], index=0), t(x[0], index=1))  # the index keys the draws


def test_corrupt_transform_grayscale_and_compose():
    transforms = pytest.importorskip("torchvision.transforms")
    x = _images(1)[0]
    gray = Image.fromarray(x[..., 0], "L")
    out = Corrupt("contrast", 4)(gray, index=0)
    assert out.mode == "L" and out.size == gray.size
    tf = transforms.Compose([Corrupt("contrast", 4), transforms.ToTensor()])
    y = tf(Image.fromarray(x))
    assert isinstance(y, torch.Tensor) and y.shape == (3, 32, 32)
    expected = torch.from_numpy(corrupt(x, "contrast", 4)).permute(2, 0, 1).float() / 255  # deterministic
    assert torch.allclose(y, expected)
    with pytest.raises(CorruptionError):
        Corrupt("contrast", 6)
    with pytest.raises(CorruptionError):
        Corrupt("contrast", 1)(np.zeros((32, 32, 3), dtype=np.float32), index=0)


def test_dataloader_with_workers_equals_corrupt():
    x = _images(8, seed=3)
    y = np.arange(8) % 3
    ds = CorruptedDataset(_ArrayDataset(x, y, as_pil=True), Corrupt("impulse_noise", 2, seed=11),
                          transform=lambda im: torch.from_numpy(np.asarray(im).copy()))
    loader = torch.utils.data.DataLoader(ds, batch_size=3, shuffle=False, num_workers=2)
    got = torch.cat([b[0] for b in loader]).numpy()
    labels = torch.cat([b[1] for b in loader]).numpy()
    assert np.array_equal(got, corrupt(x, "impulse_noise", 2, seed=11))
    assert np.array_equal(labels, y)
    other = corrupt(x, "impulse_noise", 2, seed=12)
    assert not np.array_equal(got, other)


class _TransformDataset(torch.utils.data.Dataset):
    """Images through a plain transform (no index): what torchvision datasets do with ``transform=``."""

    def __init__(self, x, transform):
        self.x, self.transform = x, transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.transform(Image.fromarray(self.x[i])), i


def _loader_bytes(ds, workers):
    loader = torch.utils.data.DataLoader(ds, batch_size=3, shuffle=False, num_workers=workers,
                                         collate_fn=lambda b: b)
    return [np.asarray(img).tobytes() for batch in loader for img, _ in batch]


def test_plain_transform_is_byte_identical_across_worker_counts():
    """Without an index the image itself keys the draws: num_workers 0 and 2 give the same bytes, and so does
    a call in this process, in any order."""
    x = _images(7, seed=5)
    ds = _TransformDataset(x, Corrupt("shot_noise", 4, seed=2))
    zero, two = _loader_bytes(ds, 0), _loader_bytes(ds, 2)
    assert zero == two
    here = [np.asarray(Corrupt("shot_noise", 4, seed=2)(Image.fromarray(x[i]))).tobytes() for i in (6, 2, 0)]
    assert here == [zero[6], zero[2], zero[0]]
    assert len(set(zero)) == 7 and zero[0] != np.asarray(Image.fromarray(x[0])).tobytes()
    # the seed still keys the draws, and an explicit index still wins
    assert np.asarray(Corrupt("shot_noise", 4, seed=3)(Image.fromarray(x[0]))).tobytes() != zero[0]
    assert np.array_equal(Corrupt("shot_noise", 4, seed=2)(x[0], index=0), corrupt(x[:1], "shot_noise", 4, seed=2)[0])


def test_batches_and_tv_tensors():
    v2 = pytest.importorskip("torchvision.transforms.v2")
    tv_tensors = pytest.importorskip("torchvision.tv_tensors")
    x = _images(4, seed=9)
    t = Corrupt("gaussian_noise", 2, seed=1)
    chw = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
    # a batch (N, C, H, W): each image as on its own (content keys), or keyed index, index+1, ...
    batch = t(chw)
    assert batch.shape == chw.shape and batch.dtype == torch.uint8
    for i in range(4):
        assert torch.equal(batch[i], t(chw[i]))
    keyed = t(chw, index=10).permute(0, 2, 3, 1).numpy()
    assert np.array_equal(keyed, corrupt(x, "gaussian_noise", 2, seed=1, indices=range(10, 14)))
    assert np.array_equal(t(x, index=[3, 1, 2, 0]), corrupt(x, "gaussian_noise", 2, seed=1, indices=[3, 1, 2, 0]))
    floats = t(chw.float() / 255)
    assert floats.dtype == torch.float32 and torch.equal((floats * 255).round().to(torch.uint8), batch)
    with pytest.raises(CorruptionError, match="one per image"):
        t(chw, index=[1, 2])
    # transforms.v2: a tv_tensors.Image stays one, the label of an (image, label) sample passes through
    img = tv_tensors.Image(chw[0])
    pipe = v2.Compose([Corrupt("gaussian_noise", 2, seed=1), v2.ToDtype(torch.float32, scale=True)])
    out, label = pipe(img, 7)
    assert isinstance(out, tv_tensors.Image) and label == 7 and out.dtype == torch.float32
    assert torch.equal((out * 255).round().to(torch.uint8).as_subclass(torch.Tensor), batch[0])
    assert isinstance(t(tv_tensors.Image(chw)), tv_tensors.Image)


_WARN_SCRIPT = """
import warnings, numpy as np, torch
warnings.simplefilter("default")
from corruptions import Corrupt

class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return Corrupt("brightness", 1, constants="cifar")(np.full((40, 40, 3), i, dtype=np.uint8))

for workers in (2, 2):
    for _ in torch.utils.data.DataLoader(DS(), batch_size=2, num_workers=workers):
        pass
Corrupt("brightness", 1, constants="cifar")(np.zeros((40, 40, 3), dtype=np.uint8))
"""


def test_size_warning_once_per_process_tree(tmp_path):
    """Two DataLoaders of two workers each, then the parent: one SizeWarning in all, not one per worker."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "CORRUPTIONS_WARN_TREE"}
    env["PYTHONPATH"] = os.pathsep.join([str(__import__("pathlib").Path(corruptions.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")])
    env["TMPDIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", _WARN_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("SizeWarning") == 1, r.stderr
    assert "once per process tree" in r.stderr
    assert not list(tmp_path.glob("corruptions-sizewarning-*"))  # the tree's root removed its marker
