"""Dataset loaders on small files written here in each official layout; errors; splits; preprocessing."""
from __future__ import annotations

import csv
import gzip
import io
import json
import pickle
import struct
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from robustbench_dgsa.data import (DATASETS, ImageData, TextData, cache_root, extract_archive, get_info,
                                   load_dataset, stratified_split, stratified_subsample, to_model_input)
from robustbench_dgsa.util.errors import DataError, UserError


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DGSA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DGSA_DATA_ROOT", raising=False)


def one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


# --- writers for the official layouts ---------------------------------------------------------------------------

def cifar_images(n: int, offset: int) -> np.ndarray:
    """(n, 3072) rows in CIFAR's CHW order; pixel (i, r, c, ch) = (offset + i + 7 * ch + r) % 256."""
    i = np.arange(n)[:, None, None, None]
    ch = np.arange(3)[None, :, None, None]
    r = np.arange(32)[None, None, :, None]
    c = np.zeros(32)[None, None, None, :]
    return ((offset + i + 7 * ch + r + c) % 256).astype(np.uint8).reshape(n, 3072)


def write_pickle(path: Path, obj, bytes_keys: bool = False) -> None:
    if bytes_keys:
        obj = {k.encode(): v for k, v in obj.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def write_cifar10(root: Path, per_batch: int = 4, bytes_keys: bool = True, test_labels=None) -> Path:
    d = root / "cifar-10-batches-py"
    for b in range(1, 6):
        write_pickle(d / f"data_batch_{b}", {"batch_label": f"batch {b}", "data": cifar_images(per_batch, 10 * b),
                                             "labels": [(b + i) % 10 for i in range(per_batch)]}, bytes_keys)
    labels = test_labels if test_labels is not None else [3, 8, 8, 0, 6]
    write_pickle(d / "test_batch", {"data": cifar_images(5, 100), "labels": labels}, bytes_keys)
    write_pickle(d / "batches.meta", {"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                                                      "horse", "ship", "truck"]}, bytes_keys)
    return d


def idx_bytes(arr: np.ndarray) -> bytes:
    magic = 2051 if arr.ndim == 3 else 2049
    return struct.pack(">I", magic) + struct.pack(">" + "I" * arr.ndim, *arr.shape) + arr.astype(np.uint8).tobytes()


def write_fashion(d: Path, gz: bool = True, n_test: int = 10) -> None:
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 20), ("t10k", n_test)):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labs = np.array([9, 2, 1, 1, 6, 1, 4, 6, 5, 7] * 2)[:n] if prefix == "t10k" else np.arange(n) % 10
        for kind, arr in (("images-idx3", imgs), ("labels-idx1", labs)):
            name = f"{prefix}-{kind}-ubyte"
            if gz:
                with gzip.open(d / f"{name}.gz", "wb") as f:
                    f.write(idx_bytes(arr))
            else:
                (d / name).write_bytes(idx_bytes(arr))


def write_tree(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def make_tar(path: Path, files: dict[str, bytes | str], mode: str = "w:gz") -> None:
    with tarfile.open(path, mode) as tf:
        for rel, data in files.items():
            b = data.encode("utf-8") if isinstance(data, str) else data
            info = tarfile.TarInfo(rel)
            info.size = len(b)
            tf.addfile(info, io.BytesIO(b))


IMDB_FILES = {
    "aclImdb/train/pos/10_9.txt": "pos ten",
    "aclImdb/train/pos/2_8.txt": "pos two<br />second line",
    "aclImdb/train/neg/1_1.txt": "neg one",
    "aclImdb/test/pos/0_10.txt": "I went and saw this movie last night",
    "aclImdb/test/neg/0_2.txt": "bad movie",
    "aclImdb/test/neg/11_3.txt": "very bad",
    "aclImdb/test/neg/3_4.txt": "not good",
    "aclImdb/README": "readme",
}

NEWS_MSG = ("From: someone@example.com\nSubject: test\n\nIn article <123@x> bob writes:\n> quoted line\n"
            "Real body line one.\nReal body line two.\n-- \nSignature here\n")
NEWS_FILES = {
    "20news-bydate-train/comp.graphics/38000": NEWS_MSG,
    "20news-bydate-train/comp.graphics/37999": "Subject: a\n\nbody a\n",
    "20news-bydate-train/alt.atheism/51060": "Subject: b\n\nbody b caf\xe9\n".encode("latin-1"),
    "20news-bydate-test/alt.atheism/53000": "Subject: c\n\nbody c\n",
    "20news-bydate-test/comp.graphics/9": "Subject: d\n\nbody d\n",
    "20news-bydate-test/comp.graphics/100": "Subject: e\n\nbody e\n",
}


# --- CIFAR ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bytes_keys", [True, False])
def test_cifar10_official_pickles(tmp_path, bytes_keys):
    write_cifar10(tmp_path, bytes_keys=bytes_keys)
    tr = load_dataset("cifar10", "train", data_root=tmp_path)
    assert isinstance(tr, ImageData) and tr.x.shape == (20, 32, 32, 3) and tr.x.dtype == np.uint8
    assert tr.y.dtype == np.int64 and tr.y.tolist() == [(b + i) % 10 for b in range(1, 6) for i in range(4)]
    # CHW -> HWC: pixel (i, r, c, ch) = (offset + i + 7 ch + r) % 256, batch b has offset 10 b
    assert tr.x[5, 3, 17, 2] == (20 + 1 + 14 + 3) % 256 and tr.x[0, 0, 0, 0] == 10
    te = load_dataset("cifar10", "test", data_root=tmp_path)
    assert te.y.tolist() == [3, 8, 8, 0, 6] and te.classes[3] == "cat"
    assert te.mean == pytest.approx((0.4914, 0.4822, 0.4465)) and "official" in te.source
    ex = load_dataset("cifar10", "test-exact", data_root=tmp_path)  # no npz: first 1,017 of the official batch
    assert len(ex) == 5 and "official" in ex.source
    # data root may also be the batches folder itself
    assert load_dataset("cifar10", "test", data_root=tmp_path / "cifar-10-batches-py").y.tolist() == [3, 8, 8, 0, 6]


def test_cifar10_label_count_mismatch(tmp_path):
    write_cifar10(tmp_path, test_labels=[1, 2, 3])
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", "test", data_root=tmp_path)
    assert "5 images but 3 labels" in one_line(e)


def test_cifar10_missing_and_misplaced(tmp_path):
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", "train", data_root=tmp_path / "nope")
    msg = one_line(e)
    assert "does not exist" in msg and "cifar-10-batches-py" in msg and "download=True" in msg
    write_cifar10(tmp_path / "downloads" / "stuff")
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", "train", data_root=tmp_path)
    msg = one_line(e)
    assert f"{tmp_path}/cifar-10-batches-py" in msg and str(tmp_path / "downloads" / "stuff") in msg


def test_cifar10_missing_batch_file(tmp_path):
    d = write_cifar10(tmp_path)
    (d / "data_batch_3").unlink()
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", "train", data_root=tmp_path)
    assert "data_batch_3" in one_line(e)


def fake_torchvision(monkeypatch, cifar10) -> None:
    """Replace torchvision.datasets with a stub (and keep the test from importing the real one)."""
    import types
    tv = types.ModuleType("torchvision")
    tvd = types.ModuleType("torchvision.datasets")
    tvd.CIFAR10 = cifar10
    tv.datasets = tvd
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    monkeypatch.setitem(sys.modules, "torchvision.datasets", tvd)


def test_cifar10_never_downloads_without_flag(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("torchvision must not be called")
    fake_torchvision(monkeypatch, boom)
    with pytest.raises(DataError):
        load_dataset("cifar10", "train", data_root=tmp_path)
    write_cifar10(tmp_path)
    assert len(load_dataset("cifar10", "train", data_root=tmp_path, download=True)) == 20  # local files win


def test_cifar10_download(tmp_path, monkeypatch):
    def offline(*a, **k):
        raise OSError("network unreachable\nsecond line")
    fake_torchvision(monkeypatch, offline)
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", "train", data_root=tmp_path, download=True)
    assert "download" in one_line(e) and "network unreachable" in str(e.value)

    def fetch(root, train=True, download=False):  # writes the official layout, like torchvision
        assert download
        write_cifar10(Path(root))
    fake_torchvision(monkeypatch, fetch)
    assert len(load_dataset("cifar10", "test", data_root=tmp_path / "new", download=True)) == 5


def jpeg_bytes(value: int) -> bytes:
    from PIL import Image
    b = io.BytesIO()
    Image.fromarray(np.full((32, 32, 3), value, dtype=np.uint8)).save(b, "JPEG", quality=75)
    return b.getvalue()


def test_cifar10_jpeg_archive_folder_and_exact(tmp_path):
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    test_labels = [3, 8, 0, 3]
    files = {f"cifar10-jpeg75/test/{classes[c]}/{i:05d}.jpg": jpeg_bytes(40 * i + 10)
             for i, c in enumerate(test_labels)}
    files.update({f"cifar10-jpeg75/train/{classes[c]}/{i:05d}.jpg": jpeg_bytes(200) for i, c in enumerate([1, 9])})
    (tmp_path / "cifar10").mkdir()
    make_tar(tmp_path / "cifar10" / "cifar10-jpeg75.tar.xz", files, "w:xz")
    te = load_dataset("cifar10", "test", data_root=tmp_path)
    assert te.y.tolist() == test_labels and te.x.shape == (4, 32, 32, 3) and "JPEG" in te.source
    assert abs(int(te.x[2].mean()) - 90) <= 3  # official order = file number, not class folder order
    cached = list((cache_root() / "decoded").glob("cifar10-jpeg75-test-*"))
    assert len(cached) == 1
    assert load_dataset("cifar10", "train", data_root=tmp_path).y.tolist() == [1, 9]
    # the extracted folder is read too (and preferred over the archive)
    write_tree(tmp_path / "cifar10", files)
    assert load_dataset("cifar10", "test", data_root=tmp_path).y.tolist() == test_labels
    # the exact subset
    x = np.arange(2 * 32 * 32 * 3, dtype=np.uint8).reshape(2, 32, 32, 3)
    np.savez_compressed(tmp_path / "cifar10" / "cifar10-test-exact-first1017.npz", x=x,
                        y=np.array([3, 8], dtype=np.int64), index=np.arange(2))
    ex = load_dataset("cifar10", "test-exact", data_root=tmp_path)
    assert ex.y.tolist() == [3, 8] and np.array_equal(ex.x, x) and "exact" in ex.source


def test_cifar10_jpeg_folder_gap_in_numbers(tmp_path):
    write_tree(tmp_path, {"cifar10-jpeg75/test/cat/00000.jpg": jpeg_bytes(1),
                          "cifar10-jpeg75/test/dog/00002.jpg": jpeg_bytes(2)})
    with pytest.raises(DataError) as e:
        load_dataset("cifar10", "test", data_root=tmp_path)
    assert "not exactly" in one_line(e)


def test_cifar100(tmp_path):
    d = tmp_path / "cifar-100-python"
    write_pickle(d / "train", {"data": cifar_images(6, 0), "fine_labels": [0, 99, 5, 5, 1, 2],
                               "coarse_labels": [4, 19, 0, 0, 1, 2]}, True)
    write_pickle(d / "test", {"data": cifar_images(2, 3), "fine_labels": [7, 8], "coarse_labels": [1, 3]}, True)
    write_pickle(d / "meta", {"fine_label_names": [f"f{i}" for i in range(100)],
                              "coarse_label_names": [f"c{i}" for i in range(20)]}, True)
    tr = load_dataset("cifar100", "train", data_root=tmp_path)
    assert tr.y.tolist() == [0, 99, 5, 5, 1, 2] and len(tr.classes) == 100 and tr.classes[99] == "f99"
    te = load_dataset("cifar100", "test", data_root=tmp_path, label_mode="coarse")
    assert te.y.tolist() == [1, 3] and len(te.classes) == 20 and te.x.shape == (2, 32, 32, 3)
    with pytest.raises(UserError):
        load_dataset("cifar100", "test", data_root=tmp_path, label_mode="medium")


# --- Fashion-MNIST / SVHN ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("sub,gz", [("fashion-mnist", True), ("FashionMNIST/raw", False), ("", True)])
def test_fashion_mnist_layouts(tmp_path, sub, gz):
    write_fashion(tmp_path / sub if sub else tmp_path, gz=gz)
    te = load_dataset("fashion-mnist", "test", data_root=tmp_path)
    assert te.x.shape == (10, 28, 28, 1) and te.y.tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    assert te.classes[9] == "Ankle boot" and te.mean == pytest.approx((0.2860,))
    assert len(load_dataset("fashion-mnist", "train", data_root=tmp_path)) == 20


def test_fashion_mnist_mismatch_and_bad_magic(tmp_path):
    d = tmp_path / "fashion-mnist"
    write_fashion(d)
    with gzip.open(d / "t10k-labels-idx1-ubyte.gz", "wb") as f:
        f.write(idx_bytes(np.zeros(7, dtype=np.uint8)))
    with pytest.raises(DataError) as e:
        load_dataset("fashion-mnist", "test", data_root=tmp_path)
    assert "10 images" in one_line(e) and "7 labels" in str(e.value)
    with gzip.open(d / "t10k-labels-idx1-ubyte.gz", "wb") as f:
        f.write(b"\x12\x34\x56\x78")
    with pytest.raises(DataError) as e:
        load_dataset("fashion-mnist", "test", data_root=tmp_path)
    assert "magic" in one_line(e)


def test_svhn_mat(tmp_path):
    import scipy.io
    d = tmp_path / "svhn"
    d.mkdir()
    X = np.zeros((32, 32, 3, 3), dtype=np.uint8)
    X[0, 0, 0, :] = [5, 6, 7]
    scipy.io.savemat(d / "test_32x32.mat", {"X": X, "y": np.array([[10], [1], [9]], dtype=np.uint8)})
    te = load_dataset("svhn", "test", data_root=tmp_path)
    assert te.x.shape == (3, 32, 32, 3) and te.y.tolist() == [0, 1, 9] and te.x[:, 0, 0, 0].tolist() == [5, 6, 7]
    scipy.io.savemat(d / "train_32x32.mat", {"X": X, "y": np.array([[1], [2]], dtype=np.uint8)})
    with pytest.raises(DataError) as e:
        load_dataset("svhn", "train", data_root=tmp_path)
    assert "3 images but 2 labels" in one_line(e)


# --- text ----------------------------------------------------------------------------------------------------

def test_imdb_folder_and_archive(tmp_path):
    write_tree(tmp_path / "a", IMDB_FILES)
    te = load_dataset("imdb", "test", data_root=tmp_path / "a")
    assert isinstance(te, TextData) and te.y.tolist() == [0, 0, 0, 1]
    assert te.texts == ["bad movie", "not good", "very bad", "I went and saw this movie last night"]  # ids numeric
    tr = load_dataset("imdb", "train", data_root=tmp_path / "a")
    assert tr.texts == ["neg one", "pos two<br />second line", "pos ten"] and tr.classes == ["neg", "pos"]
    (tmp_path / "b" / "text").mkdir(parents=True)
    make_tar(tmp_path / "b" / "text" / "aclImdb.tar.xz", IMDB_FILES, "w:xz")
    te2 = load_dataset("imdb", "test", data_root=tmp_path / "b")
    assert te2.texts == te.texts and te2.y.tolist() == te.y.tolist() and "aclImdb.tar.xz" in te2.source
    assert load_dataset("imdb", "test", data_root=tmp_path / "b").texts == te.texts  # cached path


def test_20newsgroups(tmp_path):
    write_tree(tmp_path, NEWS_FILES)
    tr = load_dataset("20newsgroups", "train", data_root=tmp_path)
    assert tr.classes == ["alt.atheism", "comp.graphics"] and tr.y.tolist() == [0, 1, 1]
    assert tr.texts[0].strip() == "body b caf\xe9"  # latin-1, headers removed
    assert tr.texts[2] == "Real body line one.\nReal body line two."  # quotes and signature removed
    raw = load_dataset("20newsgroups", "train", data_root=tmp_path, remove=())
    assert raw.texts[2] == NEWS_MSG and "raw" in raw.source
    te = load_dataset("20newsgroups", "test", data_root=tmp_path)
    assert te.y.tolist() == [0, 1, 1] and te.texts[1].strip() == "body d"  # 9 before 100
    (tmp_path / "arch").mkdir()
    make_tar(tmp_path / "arch" / "20news-bydate.tar.gz", NEWS_FILES)
    arch = load_dataset("20newsgroups", "train", data_root=tmp_path / "arch", remove="none")
    assert arch.texts == raw.texts and arch.y.tolist() == raw.y.tolist() and "20news-bydate.tar.gz" in arch.source
    with pytest.raises(UserError):
        load_dataset("20newsgroups", "test", data_root=tmp_path, remove=("signatures",))


def test_rotten_tomatoes_hf_split(tmp_path):
    d = tmp_path / "rt-polaritydata"
    d.mkdir()
    pos = [f"pos {i} " for i in range(10)]
    neg = [f"neg {i}" for i in range(10)]
    pos[0] = "caf\xe9 \u201cquoted\u201d "
    (d / "rt-polarity.pos").write_bytes("\n".join(pos).encode("cp1252") + b"\n")
    (d / "rt-polarity.neg").write_bytes("\n".join(neg).encode("cp1252") + b"\n")
    # i1 = int(10 * 0.8 + 0.5) = 8, i2 = int(10 * 0.9 + 0.5) = 9
    tr = load_dataset("rotten-tomatoes", "train", data_root=tmp_path)
    va = load_dataset("rotten-tomatoes", "validation", data_root=tmp_path)
    te = load_dataset("rotten-tomatoes", "test", data_root=tmp_path)
    assert (len(tr), len(va), len(te)) == (16, 2, 2)
    assert tr.texts[0] == "caf\xe9 \u201cquoted\u201d" and tr.texts[1] == "pos 1" and tr.texts[8] == "neg 0"
    assert tr.y.tolist() == [1] * 8 + [0] * 8 and va.texts == ["pos 8", "neg 8"] and te.texts == ["pos 9", "neg 9"]
    lat = load_dataset("rotten-tomatoes", "train", data_root=tmp_path, encoding="latin-1")
    assert lat.texts[0] == "caf\xe9 \x93quoted\x94"
    s0 = load_dataset("rotten-tomatoes", "test", data_root=tmp_path, split_mode="seeded", seed=0)
    s0b = load_dataset("rotten-tomatoes", "test", data_root=tmp_path, split_mode="seeded", seed=0)
    assert s0.texts == s0b.texts and np.bincount(s0.y).tolist() == [1, 1]
    assert "Hugging Face" in tr.source and "seeded" in s0.source


def test_agnews_csv(tmp_path):
    d = tmp_path / "ag_news_csv"
    d.mkdir()
    with open(d / "train.csv", "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerows([["3", "Wall St. Bears", "Short-sellers, see green"], ["1", "Title, with comma", "Desc"],
                     ["4", "Sci", "Tech"], ["2", "Sport", "Ball"]])
    with open(d / "test.csv", "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows([["2", "a", "b"]])
    tr = load_dataset("agnews", "train", data_root=tmp_path)
    assert tr.y.tolist() == [2, 0, 3, 1] and tr.texts[0] == "Wall St. Bears Short-sellers, see green"
    assert tr.classes == ["World", "Sports", "Business", "Sci/Tech"]
    assert load_dataset("agnews", "test", data_root=tmp_path).texts == ["a b"]
    with open(d / "test.csv", "w", newline="") as f:
        csv.writer(f).writerows([["7", "a", "b"]])
    with pytest.raises(DataError) as e:
        load_dataset("agnews", "test", data_root=tmp_path)
    assert "class 7" in one_line(e)


def test_mnli_tsv(tmp_path):
    d = tmp_path / "MNLI"
    d.mkdir()
    head = "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t" \
           "sentence2_parse\tsentence1\tsentence2"
    (d / "train.tsv").write_text(head + "\tlabel1\tgold_label\n"
                                 "0\t1\t1e\tgov\t(\t(\t(\t(\tA man \"quoted\" runs.\tA person moves.\tentailment\t"
                                 "entailment\n"
                                 "1\t2\t2n\tgov\t(\t(\t(\t(\tP2\tH2\tcontradiction\tcontradiction\n"
                                 "2\t3\t3x\tgov\t(\t(\t(\t(\tP3\tH3\t-\t-\n")
    dev_head = head + "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
    (d / "dev_matched.tsv").write_text(dev_head + "0\t1\t1n\tfic\t(\t(\t(\t(\tP\tH\tneutral\tneutral\tneutral\t"
                                       "neutral\tneutral\tneutral\n")
    tr = load_dataset("mnli", "train", data_root=tmp_path)
    assert tr.texts == ['A man "quoted" runs. <sep> A person moves.', "P2 <sep> H2"] and tr.y.tolist() == [0, 2]
    te = load_dataset("mnli", "test", data_root=tmp_path)
    assert te.y.tolist() == [1] and te.classes == ["entailment", "neutral", "contradiction"]
    with pytest.raises(DataError) as e:
        load_dataset("mnli", "test-mismatched", data_root=tmp_path)
    assert "dev_mismatched.tsv" in one_line(e)


# --- generic sources -------------------------------------------------------------------------------------------

def write_png(path: Path, value, size=(8, 8), mode="RGB") -> None:
    from PIL import Image
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    Image.fromarray(np.full(shape, value, dtype=np.uint8), mode=mode).save(path)


def test_image_folder(tmp_path):
    root = tmp_path / "imgs"
    write_png(root / "train" / "cat" / "img10.png", (10, 20, 30))
    write_png(root / "train" / "cat" / "img2.png", (12, 22, 32))
    write_png(root / "train" / "dog" / "a.png", (200, 100, 50))
    write_png(root / "test" / "dog" / "x.png", (0, 0, 0))
    tr = load_dataset(f"folder:{root}", "train")
    assert tr.classes == ["cat", "dog"] and tr.y.tolist() == [0, 0, 1] and tr.x.shape == (3, 8, 8, 3)
    assert tr.x[0, 0, 0].tolist() == [12, 22, 32]  # natural sort: img2 before img10
    te = load_dataset(str(root), "test")  # a bare path is detected
    assert te.y.tolist() == [1] and te.mean == pytest.approx(tr.mean) and te.classes == ["cat", "dog"]
    assert tr.mean[0] == pytest.approx((10 + 12 + 200) / 3 / 255)
    assert get_info(f"folder:{root}").modality == "image"
    write_png(root / "test" / "dog" / "y.png", (0, 0, 0), size=(9, 8))
    with pytest.raises(DataError) as e:
        load_dataset(f"folder:{root}", "test")
    assert "image_size" in one_line(e)
    rs = load_dataset(f"folder:{root}", "test", image_size=8)
    assert rs.x.shape == (2, 8, 8, 3)
    with pytest.raises(DataError) as e:
        load_dataset(f"folder:{root}", "validation")
    assert "no split folder" in one_line(e)


def test_image_folder_grayscale(tmp_path):
    root = tmp_path / "g"
    write_png(root / "train" / "a" / "1.png", 100, mode="L")
    write_png(root / "train" / "b" / "1.png", 50, mode="L")
    tr = load_dataset(f"folder:{root}", "train")
    assert tr.x.shape == (2, 8, 8, 1) and len(tr.mean) == 1


def test_text_files_csv_jsonl(tmp_path):
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "label"])
        w.writerows([[1, "good film", "pos"], [2, "bad, film", "neg"], [3, "fine", "pos"]])
    with open(tmp_path / "test.csv", "w", newline="") as f:
        csv.writer(f).writerows([["id", "text", "label"], [4, "awful", "neg"]])
    tr = load_dataset(f"csv:{tmp_path}/{{split}}.csv", "train")
    assert tr.classes == ["neg", "pos"] and tr.y.tolist() == [1, 0, 1] and tr.texts[1] == "bad, film"
    te = load_dataset(str(tmp_path), "test")  # a folder with train.csv/test.csv
    assert te.texts == ["awful"] and te.y.tolist() == [0] and te.classes == ["neg", "pos"]
    rows = [{"premise": f"p{i}", "hypothesis": f"h{i}", "y": i % 2 + 1} for i in range(20)]
    (tmp_path / "all.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    a = load_dataset(f"jsonl:{tmp_path}/all.jsonl", "train", text_column="premise,hypothesis", label_column="y",
                     seed=3)
    b = load_dataset(f"{tmp_path}/all.jsonl", "test", text_column=["premise", "hypothesis"], label_column="y",
                     seed=3)
    assert (len(a), len(b)) == (16, 4) and a.classes == ["1", "2"] and np.bincount(b.y).tolist() == [2, 2]
    assert not set(a.texts) & set(b.texts) and a.texts[0].endswith(" <sep> h0")
    with pytest.raises(DataError) as e:
        load_dataset(f"jsonl:{tmp_path}/all.jsonl", "train")
    assert "text_column" in one_line(e)


# --- registry and errors --------------------------------------------------------------------------------------

def test_registry_names_and_errors(tmp_path):
    expected = {"cifar10", "cifar100", "fashion-mnist", "svhn", "imagenet", "tiny-imagenet", "imdb", "20newsgroups",
                "rotten-tomatoes", "agnews", "mnli", "synthetic-vision", "synthetic-text"}
    assert set(DATASETS) == expected
    for info in DATASETS.values():
        assert info.modality in ("image", "text") and "\n" not in info.layout_hint and info.num_classes >= 2
        assert info.classes is None or len(info.classes) == info.num_classes
    with pytest.raises(UserError) as e:
        load_dataset("cifar-11", "train")
    msg = one_line(e)
    assert all(n in msg for n in expected) and "folder:" in msg
    with pytest.raises(UserError) as e:
        load_dataset("synthetic-vision", "validation")
    assert "train, test" in one_line(e)
    with pytest.raises(UserError) as e:
        load_dataset("synthetic-vision", "train", colour="red")
    assert "n_train" in one_line(e)
    for name in ("imdb", "20newsgroups", "rotten-tomatoes", "agnews", "mnli", "svhn", "cifar100", "fashion-mnist"):
        with pytest.raises(DataError) as e:
            load_dataset(name, "test", data_root=tmp_path)
        assert str(tmp_path) in one_line(e)


def test_misplaced_text_files(tmp_path):
    write_tree(tmp_path / "downloads", {"rt-polarity.pos": "a\n", "rt-polarity.neg": "b\n"})
    with pytest.raises(DataError) as e:
        load_dataset("rotten-tomatoes", "train", data_root=tmp_path)
    msg = one_line(e)
    assert "rt-polaritydata/rt-polarity.{pos,neg}" in msg and str(tmp_path / "downloads") in msg


def test_extract_archive_once(tmp_path):
    make_tar(tmp_path / "x.tar.gz", {"top/a.txt": "A", "top/sub/b.txt": "B"})
    d1 = extract_archive(tmp_path / "x.tar.gz")
    d2 = extract_archive(tmp_path / "x.tar.gz")
    assert d1 == d2 and (d1 / "top" / "sub" / "b.txt").read_text() == "B" and (d1 / ".complete").is_file()
    assert not [p for p in d1.parent.iterdir() if p.name.endswith(".tmp")]


# --- splits ----------------------------------------------------------------------------------------------------

def test_stratified_split_exact_and_seeded():
    y = np.array([0] * 50 + [1] * 30 + [2] * 20)
    tr, ho = stratified_split(y, 0.2, seed=1)
    assert np.bincount(y[ho]).tolist() == [10, 6, 4] and len(tr) == 80
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(ho) > 0) and not set(tr) & set(ho)
    tr2, ho2 = stratified_split(y, 0.2, seed=1)
    assert np.array_equal(ho, ho2)
    assert not np.array_equal(ho, stratified_split(y, 0.2, seed=2)[1])
    # a class keeps one training example; fraction 0 and 1
    tr, ho = stratified_split(np.array([0, 0, 0, 1]), 0.5, 0)
    assert 3 in tr and len(ho) == 2
    assert len(stratified_split(y, 0.0, 0)[1]) == 0 and len(stratified_split(y, 1.0, 0)[0]) == 0
    with pytest.raises(UserError):
        stratified_split(y, 1.5, 0)


def test_stratified_subsample():
    y = np.array([0] * 60 + [1] * 30 + [2] * 10)
    idx = stratified_subsample(y, 10, seed=0)
    assert len(idx) == 10 and np.bincount(y[idx]).tolist() == [6, 3, 1] and np.all(np.diff(idx) > 0)
    assert np.array_equal(idx, stratified_subsample(y, 10, seed=0))
    assert len(stratified_subsample(y, 7, 0)) == 7
    assert np.array_equal(stratified_subsample(y, 1000, 0), np.arange(100))


# --- preprocessing ---------------------------------------------------------------------------------------------

def test_to_model_input():
    x = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    x[..., 0] = 255
    t = to_model_input(x, (0.5, 0.5, 0.5), (0.5, 0.25, 0.5))
    assert t.shape == (2, 3, 4, 4) and t.dtype == torch.float32
    assert torch.allclose(t[:, 0], torch.ones(2, 4, 4)) and torch.allclose(t[:, 1], torch.full((2, 4, 4), -2.0))
    g = np.full((3, 5, 5, 1), 51, dtype=np.uint8)
    tg = to_model_input(g, (0.2,), (0.1,), image_size=8, in_chans=3)
    assert tg.shape == (3, 3, 8, 8) and torch.allclose(tg, torch.zeros_like(tg), atol=1e-5)
    assert to_model_input(g[..., 0], (0.2,), (0.1,), in_chans=1).shape == (3, 1, 5, 5)
    with pytest.raises(UserError):
        to_model_input(x, (0.5,) * 3, (0.5,) * 3, in_chans=1)
