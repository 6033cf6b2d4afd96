"""Loaders on the real copies in ../shared/data (skipped when absent).

A private cache folder is used for the session, so the first load of each archive is exercised (the CIFAR-10
JPEG test split alone, about 3 s; IMDB streams its archive once, about 5 s) and the second load must come
from the cache. The CIFAR-10 and IMDB training splits (50,000 JPEG decodes; the whole IMDB archive) are left
out of the default run; set DGSA_TEST_FULL_REALDATA=1 to include them.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from robustbench_dgsa.data import load_dataset

pytestmark = pytest.mark.realdata
FULL = bool(os.environ.get("DGSA_TEST_FULL_REALDATA"))


@pytest.fixture(scope="module")
def root(shared_data, tmp_path_factory):
    old = os.environ.get("DGSA_CACHE")
    os.environ["DGSA_CACHE"] = str(tmp_path_factory.mktemp("dgsa-cache"))
    yield shared_data
    if old is None:
        os.environ.pop("DGSA_CACHE", None)
    else:
        os.environ["DGSA_CACHE"] = old


def test_cifar10_jpeg_test_and_exact_subset(root):
    te = load_dataset("cifar10", "test", data_root=root)
    assert te.x.shape == (10000, 32, 32, 3) and np.bincount(te.y).tolist() == [1000] * 10
    assert "JPEG quality 75" in te.source
    t = time.perf_counter()
    again = load_dataset("cifar10", "test", data_root=root)
    assert time.perf_counter() - t < 2.0 and np.array_equal(again.x, te.x)  # from the .npy cache
    ex = load_dataset("cifar10", "test-exact", data_root=root)
    assert ex.x.shape == (1017, 32, 32, 3) and ex.y[0] == 3 and ex.classes[3] == "cat"
    assert np.bincount(ex.y).tolist() == [105, 93, 100, 104, 92, 87, 114, 102, 110, 110]
    assert "exact" in ex.source and "subset" in ex.source
    assert np.array_equal(te.y[:1017], ex.y)  # JPEG copy is in official order
    mae = np.abs(te.x[:1017].astype(np.int16) - ex.x.astype(np.int16)).mean()
    assert 5.0 < mae < 6.5  # the README's 5.8/255; a shifted mapping would give ~69


@pytest.mark.skipif(not FULL, reason="set DGSA_TEST_FULL_REALDATA=1 (50,000 JPEG decodes)")
def test_cifar10_jpeg_train(root):
    tr = load_dataset("cifar10", "train", data_root=root)
    assert tr.x.shape == (50000, 32, 32, 3) and np.bincount(tr.y).tolist() == [5000] * 10
    assert np.bincount(tr.y[:10000]).tolist() == [1005, 974, 1032, 1016, 999, 937, 1030, 1001, 1025, 981]


def test_fashion_mnist(root):
    te = load_dataset("fashion-mnist", "test", data_root=root)
    assert te.x.shape == (10000, 28, 28, 1) and te.y[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    assert np.bincount(te.y).tolist() == [1000] * 10
    tr = load_dataset("fashion-mnist", "train", data_root=root)
    assert len(tr) == 60000 and np.bincount(tr.y).tolist() == [6000] * 10
    assert tr.mean[0] == pytest.approx(0.2860, abs=1e-3) and tr.std[0] == pytest.approx(0.3530, abs=1e-3)
    assert abs(tr.x.mean() / 255 - 0.2860) < 1e-3  # the published constant matches the data


def test_imdb(root):
    te = load_dataset("imdb", "test", data_root=root)
    assert len(te) == 25000 and np.bincount(te.y).tolist() == [12500, 12500]
    first_pos = int(np.flatnonzero(te.y == 1)[0])  # test/pos/0_10.txt: the lowest id among positives
    assert te.texts[first_pos].startswith("I went and saw this movie last night")
    t = time.perf_counter()
    again = load_dataset("imdb", "test", data_root=root)
    assert time.perf_counter() - t < 5.0 and again.texts == te.texts  # from the cache


@pytest.mark.skipif(not FULL, reason="set DGSA_TEST_FULL_REALDATA=1 (reads the whole archive)")
def test_imdb_train(root):
    tr = load_dataset("imdb", "train", data_root=root)
    assert len(tr) == 25000 and np.bincount(tr.y).tolist() == [12500, 12500]


def test_20newsgroups(root):
    te = load_dataset("20newsgroups", "test", data_root=root)
    assert np.bincount(te.y).tolist() == [319, 389, 394, 392, 385, 395, 390, 396, 398, 397, 399, 396, 393, 396,
                                          394, 398, 364, 376, 310, 251]
    assert te.classes[0] == "alt.atheism" and te.classes[-1] == "talk.religion.misc"
    assert len(load_dataset("20newsgroups", "train", data_root=root)) == 11314
    raw = load_dataset("20newsgroups", "test", data_root=root, remove=())
    assert raw.texts[0].startswith("From:") and not te.texts[0].startswith("From:")


def test_rotten_tomatoes_hf_split(root):
    sizes = {s: load_dataset("rotten-tomatoes", s, data_root=root) for s in ("train", "validation", "test")}
    assert [len(d) for d in sizes.values()] == [8530, 1066, 1066]
    tr = sizes["train"]
    assert tr.texts[0].startswith("the rock is destined to be the 21st century's new \" conan \"")
    assert tr.texts[4265] == "simplistic , silly and tedious ."  # neg[0], after the 4,265 positives
    assert tr.y[:4265].tolist() == [1] * 4265 and tr.y[4265:].tolist() == [0] * 4265
    assert sizes["validation"].y.tolist() == [1] * 533 + [0] * 533
