"""RobustBench's helpers in robustbench_dgsa.robustbench, against RobustBench's documented behaviour (RobustBench
itself is not importable in CI): signatures, return types and dtypes, the -C loaders' order (first
ceil(n / #corruptions) of each corruption's severity block, in the given order; shuffle = np.random.permutation
of that concatenation, then cut to n), local files only, one clear error for an unknown model or dataset; the
train-mode warning; benchmark on in-memory (x, y) / Dataset data."""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from robustbench_dgsa import robustbench as rbh

BLOCK = 20  # rows per severity block of the synthetic CIFAR-C files (the official ones hold 10,000)


@pytest.fixture
def cifar_c(tmp_path):
    """<tmp>/CIFAR-10-C in the official layout: <corruption>.npy uint8 (5 * BLOCK, 32, 32, 3), labels.npy uint8
    tiled 5 times; pixel [s, row] encodes (corruption, severity, row) so the order can be read back."""
    d = tmp_path / "CIFAR-10-C"
    d.mkdir()
    labels = (np.arange(BLOCK) * 7 % 10).astype(np.uint8)
    np.save(d / "labels.npy", np.tile(labels, 5))
    for k, c in enumerate(rbh.CORRUPTIONS[:3]):
        x = np.zeros((5 * BLOCK, 32, 32, 3), np.uint8)
        for s in range(5):
            for r in range(BLOCK):
                x[s * BLOCK + r, ..., 0], x[s * BLOCK + r, ..., 1], x[s * BLOCK + r, ..., 2] = k, s + 1, r
        np.save(d / f"{c}.npy", x)
    return tmp_path, labels


def _decode(x: torch.Tensor) -> list[tuple[int, int, int]]:
    v = (x[:, :, 0, 0] * 255).round().to(torch.int64)
    return [tuple(int(t) for t in row) for row in v]


def test_signatures_follow_robustbench():
    def params(f):
        return [(p.name, p.default) for p in inspect.signature(f).parameters.values()]
    assert params(rbh.clean_accuracy) == [("model", inspect._empty), ("x", inspect._empty), ("y", inspect._empty),
                                          ("batch_size", 100), ("device", None)]
    for f in (rbh.load_cifar10c, rbh.load_cifar100c):
        assert params(f) == [("n_examples", inspect._empty), ("severity", 5), ("data_dir", "./data"),
                             ("shuffle", False), ("corruptions", rbh.CORRUPTIONS)]
    assert [p for p, _ in params(rbh.load_imagenetc)][:5] == ["n_examples", "severity", "data_dir", "shuffle",
                                                              "corruptions"]
    assert [p for p, _ in params(rbh.load_cifar10)] == ["n_examples", "data_dir", "transforms_test"]
    assert [p for p, _ in params(rbh.load_clean_dataset)] == ["dataset", "n_examples", "data_dir", "prepr"]
    assert [p for p, _ in params(rbh.load_model)][:4] == ["model_name", "model_dir", "dataset", "threat_model"]
    assert len(rbh.CORRUPTIONS) == 15 and rbh.CORRUPTIONS[0] == "shot_noise"


def test_load_cifar10c_order_types_and_shuffle(cifar_c):
    root, labels = cifar_c
    names = list(rbh.CORRUPTIONS[:3])
    x, y = rbh.load_cifar10c(10, severity=2, data_dir=str(root), corruptions=names)
    assert x.dtype == torch.float32 and y.dtype == torch.int64 and tuple(x.shape) == (10, 3, 32, 32)
    assert float(x.min()) >= 0 and float(x.max()) <= 1
    # ceil(10 / 3) = 4 rows of each corruption's severity-2 block, in the given order, cut to 10
    want = [(k, 2, r) for k in range(3) for r in range(4)][:10]
    assert _decode(x) == want
    assert y.tolist() == [int(labels[r]) for _, _, r in want]
    np.random.seed(0)
    xs, ys = rbh.load_cifar10c(10, severity=2, data_dir=str(root), corruptions=names, shuffle=True)
    np.random.seed(0)
    perm = np.random.permutation(np.arange(12))
    full = [(k, 2, r) for k in range(3) for r in range(4)]
    assert _decode(xs) == [full[i] for i in perm][:10]
    assert ys.tolist() == [int(labels[full[i][2]]) for i in perm][:10]
    x5, _ = rbh.load_cifar10c(2, data_dir=str(root), corruptions=names[:1])  # severity 5 by default
    assert _decode(x5) == [(0, 5, 0), (0, 5, 1)]


def test_bad_requests_are_one_clear_error(cifar_c, tmp_path):
    root, _ = cifar_c
    with pytest.raises(ValueError, match="severity"):
        rbh.load_cifar10c(10, severity=6, data_dir=str(root))
    with pytest.raises(ValueError, match="unknown corruption"):
        rbh.load_cifar10c(10, data_dir=str(root), corruptions=["bogus"])
    with pytest.raises(ValueError, match="not found"):
        rbh.load_cifar100c(10, data_dir=str(root))  # nothing downloaded
    with pytest.raises(rbh.BenchmarkArgumentError, match="unknown dataset"):
        rbh.load_clean_dataset("mnist", 10, str(root))
    with pytest.raises(rbh.BenchmarkArgumentError, match="unknown model 'Standard'.*DGViT"):
        rbh.load_model("Standard", dataset="cifar10", threat_model="corruptions")
    with pytest.raises(rbh.BenchmarkArgumentError, match="threat_model 'Linf'"):
        rbh.load_model("DGViT", threat_model="Linf")
    with pytest.raises(rbh.BenchmarkArgumentError, match="not found"):
        rbh.load_cifar100(10, data_dir=str(tmp_path / "empty"))


def test_load_imagenetc_layout(tmp_path):
    from PIL import Image
    root = tmp_path / "ImageNet-C"
    for k, c in enumerate(("fog", "snow")):
        for j, w in enumerate(("n01440764", "n01443537")):
            d = root / c / "3" / w
            d.mkdir(parents=True)
            for f in range(2):
                Image.fromarray(np.full((224, 224, 3), 10 * k + 3 * j + f, np.uint8)).save(d / f"img{f}.png")
    x, y = rbh.load_imagenetc(5, severity=3, data_dir=str(tmp_path), corruptions=["fog", "snow"], prepr="none")
    assert x.dtype == torch.float32 and tuple(x.shape) == (5, 3, 224, 224) and y.dtype == torch.int64
    assert (x[:, 0, 0, 0] * 255).round().tolist() == [0, 1, 3, 10, 11]  # 3 per corruption, sorted wnid, file
    assert y.tolist() == [0, 0, 1, 0, 0]
    x2, _ = rbh.load_imagenetc(2, severity=3, data_dir=str(tmp_path), corruptions=["fog"])  # Res256Crop224
    assert tuple(x2.shape) == (2, 3, 224, 224)


class _Toy(nn.Module):
    """Predicts the class from the mean of channel 0 (an independent, known rule)."""

    def forward(self, x):
        m = x[:, 0].mean(dim=(1, 2))
        return torch.stack([-(m - k / 10.0).abs() for k in range(10)], dim=1)


def test_clean_accuracy_counts_argmax_matches():
    x = torch.stack([torch.full((3, 32, 32), k / 10.0) for k in range(10)])
    y = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 0, 0])
    for bs in (1, 3, 100):
        assert rbh.clean_accuracy(_Toy(), x, y, batch_size=bs) == pytest.approx(0.8)
    assert rbh.clean_accuracy(_Toy(), x, y, device="cpu") == pytest.approx(0.8)


def test_load_cifar10_real_files_and_zoo_model(shared_data):
    x, y = rbh.load_cifar10(64, data_dir=str(shared_data / "cifar10"))
    exact = np.load(shared_data / "cifar10" / "cifar10-test-exact-first1017.npz")
    assert x.dtype == torch.float32 and y.dtype == torch.int64 and tuple(x.shape) == (64, 3, 32, 32)
    assert np.array_equal((x * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy(), exact["x"][:64])
    assert y.tolist() == exact["y"][:64].tolist() and y[0] == 3  # test[0] is a cat
    xc, yc = rbh.load_clean_dataset("cifar10", 64, str(shared_data / "cifar10"))
    assert torch.equal(xc, x) and torch.equal(yc, y)
    model = rbh.load_model("DGViT", dataset="cifar10", threat_model="corruptions")
    assert not model.training and rbh.load_model("dgvit-cifar10") is not None
    acc = rbh.clean_accuracy(model, x, y, batch_size=32)
    # the zoo model with the suite's own evaluation of the same images and preprocessing
    from robustbench_dgsa.models.zoo import load_pretrained
    ext = load_pretrained("dgvit-cifar10")
    xb = (x - torch.tensor(ext.preprocess.mean).view(1, 3, 1, 1)) / torch.tensor(ext.preprocess.std).view(1, 3, 1, 1)
    with torch.no_grad():
        want = float((ext.model(xb).argmax(1) == y).float().mean())
    assert acc == pytest.approx(want) and acc > 0.3


def test_benchmark_takes_tensors_and_datasets_and_warns_in_train_mode():
    from torch.utils.data import TensorDataset
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(0, 256, (6, 3, 32, 32)).astype(np.float32) / 255.0)
    y = torch.tensor([0, 1, 2, 3, 4, 5])
    model = _Toy().train()
    with pytest.warns(rbh.ModelModeWarning, match="not\\* in eval mode"):
        clean, robust = rbh.benchmark(model, n_examples=100, dataset=(x, y), batch_size=4)
    assert isinstance(rbh.ModelModeWarning("x"), UserWarning)
    assert clean == pytest.approx(rbh.clean_accuracy(_Toy(), x, y))
    assert 0.0 <= robust <= 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", rbh.ModelModeWarning)
        clean2, robust2 = rbh.benchmark(_Toy().eval(), n_examples=100, dataset=TensorDataset(x, y), batch_size=4)
    assert (clean2, robust2) == (clean, robust)
    import robustbench_dgsa as rb
    rows = rb.benchmark(_Toy().eval(), (x, y), corruption=None, device="cpu")
    assert float(rows.attrs["table"]["accuracy"].iloc[0]) == pytest.approx(clean)
    with pytest.raises(ValueError, match="to_disk"):
        rbh.benchmark(_Toy(), dataset=(x, y), to_disk=True, model_name="toy")
