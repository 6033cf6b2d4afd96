"""Embedded synthetic datasets: determinism, balance, salient regions / tokens."""
from __future__ import annotations


import numpy as np
import pytest

from robustbench_dgsa.data import ImageData, TextData, load_dataset, make_synthetic_text, make_synthetic_vision, tokenize
from robustbench_dgsa.data.synthetic import KEYWORDS, PATCH, TEXT_CLASS_NAMES, class_colour, class_glyph
from robustbench_dgsa.util.errors import UserError


def test_vision_deterministic():
    # speed is a benchmark target (benchmarks/), not a timed test: a loaded machine made this flaky
    a = load_dataset("synthetic-vision", "train", seed=7)
    b = load_dataset("synthetic-vision", "test", seed=7)
    assert isinstance(a, ImageData) and a.x.shape == (2000, 32, 32, 3) and a.x.dtype == np.uint8
    assert b.x.shape == (500, 32, 32, 3) and a.salient.shape == (2000, 32, 32) and a.salient.dtype == np.bool_
    a2 = load_dataset("synthetic-vision", "train", seed=7)
    assert np.array_equal(a.x, a2.x) and np.array_equal(a.y, a2.y) and np.array_equal(a.salient, a2.salient)
    assert not np.array_equal(a.x[:500], b.x)  # train and test are different draws
    assert not np.array_equal(load_dataset("synthetic-vision", "train", seed=8).x, a.x)
    assert np.bincount(a.y).tolist() == [334, 334, 333, 333, 333, 333]
    assert a.mean == b.mean and a.std == b.std and len(a.mean) == 3  # train-split statistics for both
    c = load_dataset("synthetic-vision", "train", seed=7, n_train=100, num_classes=4)
    assert len(c) == 100 and c.classes == a.classes[:4] and c.mean == load_dataset(
        "synthetic-vision", "test", seed=7, num_classes=4).mean


def test_vision_salient_patch_holds_the_class_glyph():
    x, y, sal = make_synthetic_vision("test", 3, n_test=200, num_classes=10)
    assert (sal.sum(axis=(1, 2)) == PATCH * PATCH).all()
    for i in range(len(y)):
        rows, cols = np.nonzero(sal[i])
        r0, c0 = rows.min(), cols.min()
        assert rows.max() - r0 == PATCH - 1 and cols.max() - c0 == PATCH - 1  # one 8x8 box
        patch = x[i, r0:r0 + PATCH, c0:c0 + PATCH].astype(float) / 255
        glyph, colour = class_glyph(y[i]), class_colour(y[i])
        # stripe pixels carry the class colour (up to jitter), the rest of the box a muted version
        assert np.abs(patch[glyph].mean(0) - colour).max() < 0.1
        assert np.abs(patch[~glyph].mean(0) - (0.5 + 0.35 * (colour - 0.5))).max() < 0.1
    # colour pairs differ only in stripe orientation
    assert np.array_equal(class_glyph(np.array([0, 2, 4])), np.repeat(class_glyph(0)[None], 3, 0))
    assert np.array_equal(class_glyph(1), class_glyph(0).T) and np.array_equal(class_colour(0), class_colour(1))


def test_vision_options_validated():
    with pytest.raises(UserError):
        make_synthetic_vision("train", num_classes=11)
    with pytest.raises(UserError):
        make_synthetic_vision("validation")


def test_text_deterministic_and_salient_tokens():
    a = load_dataset("synthetic-text", "train", seed=1)
    assert isinstance(a, TextData) and len(a) == 2000 and a.classes == TEXT_CLASS_NAMES
    assert np.bincount(a.y).tolist() == [500] * 4
    b = load_dataset("synthetic-text", "train", seed=1)
    assert a.texts == b.texts and a.salient == b.salient and np.array_equal(a.y, b.y)
    assert load_dataset("synthetic-text", "train", seed=2).texts != a.texts
    assert len(load_dataset("synthetic-text", "test", seed=1)) == 500
    all_kw = {w for ws in KEYWORDS.values() for w in ws}
    for text, label, pos in zip(a.texts, a.y, a.salient):
        words = text.split()
        assert tokenize(text) == words
        assert 1 <= len(pos) <= 3 and pos == sorted(pos)
        assert all(words[p] in KEYWORDS[TEXT_CLASS_NAMES[label]] for p in pos)
        assert {j for j, w in enumerate(words) if w in all_kw} == set(pos)  # no keyword outside salient


def test_text_options():
    texts, y, sal = make_synthetic_text("test", 0, n_test=30, num_classes=2, min_words=5, max_words=5,
                                        max_keywords=1, max_distractors=0)
    assert len(texts) == 30 and set(y.tolist()) == {0, 1}
    assert all(len(t.split()) == 6 and len(s) == 1 for t, s in zip(texts, sal))
    with pytest.raises(UserError):
        make_synthetic_text("train", num_classes=5)


def test_loading_a_split_again_reuses_it_as_independent_copies(monkeypatch):
    """The loader remembers a few generated splits (the main job loads each several times per job): the generator
    runs once per argument set, and each load returns its own arrays, so a caller changing them changes nothing
    the next load returns."""
    from robustbench_dgsa.data import registry, synthetic

    calls = []
    real = synthetic.make_synthetic_vision

    def counted(*a, **k):
        if k["n_train"] != 2000:                                # (the normalisation's 2,000-image split aside)
            calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(synthetic, "make_synthetic_vision", counted)
    monkeypatch.setattr(registry, "_GENERATED", {})
    opts = {"n_train": 40, "n_test": 20}
    a = registry.load_dataset("synthetic-vision", "train", seed=3, **opts)
    a.x[:] = 0
    a.y[:] = 0
    b = registry.load_dataset("synthetic-vision", "train", seed=3, **opts)
    assert len(calls) == 1
    x, y, _ = real("train", 3, n_train=40, n_test=20)
    assert np.array_equal(b.x, x) and np.array_equal(b.y, y)
    registry.load_dataset("synthetic-vision", "train", seed=4, **opts)
    assert len(calls) == 2                                     # another seed is another split
    monkeypatch.setattr(registry, "_GENERATED_MAX_BYTES", 40 * 32 * 32 * 3 - 1)   # a 40-image split: too big
    registry.load_dataset("synthetic-vision", "train", seed=5, **opts)
    registry.load_dataset("synthetic-vision", "train", seed=5, **opts)
    assert len(calls) == 4                                     # generated each time, never held twice
    t1 = registry.load_dataset("synthetic-text", "test", n_test=10)
    t1.texts[0] = "changed"
    t2 = registry.load_dataset("synthetic-text", "test", n_test=10)
    assert t2.texts == synthetic.make_synthetic_text("test", 0, n_test=10)[0]
