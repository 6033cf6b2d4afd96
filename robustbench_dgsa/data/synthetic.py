"""Embedded synthetic datasets with known salient regions / tokens (no downloads; generated in memory).

Both are deterministic functions of ``(seed, split, options)``: the train and test splits come from separate
random streams (``SeedSequence([seed, split code, ...options])``), and classes are exactly balanced.

``synthetic-vision`` (default 6 classes, at most 10; 32x32 RGB, train 2,000 / test 500):
    background = a smooth random field of muted colours (a 4x4 grid, bilinearly upsampled) + Gaussian pixel
    noise (sigma 0.06) + ``n_distractors`` (default 2) grey striped 8x8 patches at random places; the class
    signal = one 8x8 patch at a uniformly random position on the 4-pixel grid, striped (2-pixel stripes) in the class colour on a
    muted version of it. Class ``c`` = colour ``c // 2`` (red, green, blue, yellow, magenta) x stripe
    orientation ``c % 2`` (horizontal, vertical), so colour alone gives at most 50%; the stripes decide the
    rest. ``salient[i]`` is True on exactly that 8x8 box. The grey distractors carry stripes but no colour, so
    the class is decided inside the salient box. The grid keeps the stripes' phase fixed relative to 4x4 ViT
    patches (the box covers exactly 2x2 tokens at 32/4), which lets the tiny models learn the stripes in
    seconds instead of stopping at the colour-only level. Blur/pixelate/noise erase the stripes and contrast/fog/
    brightness the colour, so corruptions lower accuracy with severity.

``synthetic-text`` (default 4 classes, train 2,000 / test 500):
    12-30 filler words from a fixed neutral word list, plus 0-2 distractor words (topic-like but class-neutral:
    "news", "report", ...), plus 1-3 class keywords (from the class's list of 6) inserted at random positions.
    ``salient[i]`` lists the word positions (in ``text.split()``, which equals the tokenisation) of the
    keywords. Classes: sports, science, finance, weather (first ``num_classes`` of them).
"""
from __future__ import annotations

import numpy as np

from robustbench_dgsa.util.errors import UserError

_SPLIT_CODE = {"train": 0, "test": 1}

# ---------------------------------------------------------------------------------------------------------------
# vision

# The class signal: an 8x8 patch striped in the class colour. Class c has colour COLOURS[c // 2] and stripe
# orientation c % 2 (0 horizontal, 1 vertical). Colour alone therefore identifies only a pair of classes (at
# most 50% accuracy); the orientation of 2-pixel stripes decides within the pair. Blur, pixelation and noise
# erase the stripes (accuracy falls towards the colour-only level) and contrast/fog/brightness erase the
# colour, so accuracy falls with severity under most corruptions.
_STRIPES = np.array([[(r // 2) % 2 == 0 for c in range(8)] for r in range(8)], dtype=bool)
GLYPHS = np.stack([_STRIPES, _STRIPES.T])  # (2, 8, 8): horizontal, vertical

# Saturated colours (RGB in [0, 1]).
COLOURS = np.array([
    [0.95, 0.10, 0.10],  # red
    [0.10, 0.85, 0.15],  # green
    [0.15, 0.25, 0.95],  # blue
    [0.95, 0.85, 0.05],  # yellow
    [0.90, 0.10, 0.90],  # magenta
])
_COLOUR_NAMES = ["red", "green", "blue", "yellow", "magenta"]
VISION_CLASS_NAMES = [f"{c}-{o}" for c in _COLOUR_NAMES for o in ("hstripes", "vstripes")]
MAX_VISION_CLASSES = len(VISION_CLASS_NAMES)  # 10


def class_glyph(y: np.ndarray) -> np.ndarray:
    """(N, 8, 8) stripe masks of classes ``y``."""
    return GLYPHS[np.asarray(y) % 2]


def class_colour(y: np.ndarray) -> np.ndarray:
    """(N, 3) colours of classes ``y``."""
    return COLOURS[np.asarray(y) // 2]


PATCH = 8


def _bilinear_matrix(n_out: int, n_in: int) -> np.ndarray:
    """(n_out, n_in) matrix of bilinear interpolation weights (align_corners=False, edge clamped)."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        src = (i + 0.5) * n_in / n_out - 0.5
        lo = int(np.floor(src))
        w = src - lo
        m[i, min(max(lo, 0), n_in - 1)] += 1 - w
        m[i, min(max(lo + 1, 0), n_in - 1)] += w
    return m


def make_synthetic_vision(split: str = "train", seed: int = 0, *, n_train: int = 2000, n_test: int = 500,
                          num_classes: int = 6, image_size: int = 32, noise: float = 0.06,
                          n_distractors: int = 2):
    """Generate the synthetic vision split. Returns ``(x uint8 (N,H,W,3), y int64 (N,), salient bool (N,H,W))``."""
    if split not in _SPLIT_CODE:
        raise UserError(f"synthetic-vision has splits train, test; got {split!r}")
    if not 2 <= num_classes <= MAX_VISION_CLASSES:
        raise UserError(f"synthetic-vision num_classes must be in 2..{MAX_VISION_CLASSES}, got {num_classes}")
    if image_size < 2 * PATCH:
        raise UserError(f"synthetic-vision image_size must be >= {2 * PATCH}, got {image_size}")
    n = int(n_train if split == "train" else n_test)
    if n < 0:
        raise UserError(f"synthetic-vision split size must be >= 0, got {n}")
    rng = np.random.default_rng(np.random.SeedSequence(
        [int(seed) & 0xFFFFFFFF, _SPLIT_CODE[split], num_classes, image_size, 0x5EED]))
    s = image_size
    y = rng.permutation(np.arange(n) % num_classes).astype(np.int64)

    # smooth background colour field + pixel noise
    coarse = rng.uniform(0.3, 0.7, size=(n, 4, 4, 1)) + rng.uniform(-0.1, 0.1, size=(n, 4, 4, 3))
    m = _bilinear_matrix(s, 4)
    img = np.ascontiguousarray((m @ coarse.transpose(0, 3, 1, 2) @ m.T).transpose(0, 2, 3, 1))
    img += rng.normal(0.0, noise, size=img.shape)

    pos = rng.integers(0, (s - PATCH) // 4 + 1, size=(n, 2)) * 4  # on the 4-pixel grid (see docstring)
    jitter = rng.uniform(-0.08, 0.08, size=(n, 3))
    d_pos = rng.integers(0, s - PATCH + 1, size=(n, max(0, n_distractors), 2))
    d_glyph = rng.integers(0, len(GLYPHS), size=(n, max(0, n_distractors)))
    d_grey = rng.uniform(0.3, 0.7, size=(n, max(0, n_distractors)))
    ar = np.arange(PATCH)
    n_idx = np.arange(n)[:, None, None]

    def box(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fancy indices of the 8x8 boxes at positions p (n, 2)."""
        return n_idx, p[:, 0, None, None] + ar[None, :, None], p[:, 1, None, None] + ar[None, None, :]

    for k in range(max(0, n_distractors)):  # grey shapes first, so the class patch is drawn on top
        idx = box(d_pos[:, k])
        patch = img[idx]                                         # (n, 8, 8, 3)
        g = GLYPHS[d_glyph[:, k]][..., None]                     # (n, 8, 8, 1)
        img[idx] = np.where(g, d_grey[:, k, None, None, None], patch)
    idx = box(pos)
    col = np.clip(class_colour(y) + jitter, 0, 1)[:, None, None, :]   # (n, 1, 1, 3)
    g = class_glyph(y)[..., None]
    img[idx] = np.where(g, col, 0.5 + 0.35 * (col - 0.5))
    salient = np.zeros((n, s, s), dtype=bool)
    salient[idx] = True
    x = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    return x, y, salient


# ---------------------------------------------------------------------------------------------------------------
# text

TEXT_CLASS_NAMES = ["sports", "science", "finance", "weather"]
KEYWORDS = {
    "sports": ["goal", "match", "striker", "tournament", "coach", "stadium"],
    "science": ["experiment", "molecule", "laboratory", "hypothesis", "telescope", "physics"],
    "finance": ["stocks", "investor", "dividend", "inflation", "banking", "portfolio"],
    "weather": ["rain", "forecast", "thunderstorm", "humidity", "snowfall", "breeze"],
}
DISTRACTORS = ["news", "report", "today", "update", "story", "local", "official", "latest", "event", "people"]
FILLER = (
    "the a an and or but so then also very quite really just still again often maybe perhaps "
    "this that these those it they we you he she one some many few more most other each every "
    "is was are were be been being has have had do does did will would can could should might "
    "to of in on at by for with from about into over after before under between through during "
    "around near far up down out off here there now later soon early late long short big small "
    "good new old same different first last next little great high low right left real whole "
    "time day year way thing part place case point group number world life hand side kind "
    "morning evening week moment area home room city town road street house door window table "
    "said says think know see look want give take make come go get find tell ask seem feel "
    "try leave call keep let begin show hear play run move live believe bring happen write "
    "sit stand lose pay meet include continue set learn change lead understand watch follow "
    "stop create speak read allow add spend grow open walk win offer remember love consider appear"
).split()


def make_synthetic_text(split: str = "train", seed: int = 0, *, n_train: int = 2000, n_test: int = 500,
                        num_classes: int = 4, min_words: int = 12, max_words: int = 30,
                        max_keywords: int = 3, max_distractors: int = 2):
    """Generate the synthetic text split. Returns ``(texts, y int64 (N,), salient list[list[int]])``."""
    if split not in _SPLIT_CODE:
        raise UserError(f"synthetic-text has splits train, test; got {split!r}")
    if not 2 <= num_classes <= len(TEXT_CLASS_NAMES):
        raise UserError(f"synthetic-text num_classes must be in 2..{len(TEXT_CLASS_NAMES)}, got {num_classes}")
    if not 1 <= min_words <= max_words or max_keywords < 1:
        raise UserError("synthetic-text needs 1 <= min_words <= max_words and max_keywords >= 1")
    n = int(n_train if split == "train" else n_test)
    if n < 0:
        raise UserError(f"synthetic-text split size must be >= 0, got {n}")
    rng = np.random.default_rng(np.random.SeedSequence(
        [int(seed) & 0xFFFFFFFF, _SPLIT_CODE[split], num_classes, 0x7E47]))
    y = rng.permutation(np.arange(n) % num_classes).astype(np.int64)
    texts: list[str] = []
    salient: list[list[int]] = []
    for i in range(n):
        words = [FILLER[j] for j in rng.integers(0, len(FILLER), size=int(rng.integers(min_words, max_words + 1)))]
        for _ in range(int(rng.integers(0, max_distractors + 1))):
            words.insert(int(rng.integers(0, len(words) + 1)), DISTRACTORS[int(rng.integers(0, len(DISTRACTORS)))])
        kw = KEYWORDS[TEXT_CLASS_NAMES[y[i]]]
        marks = [False] * len(words)
        for _ in range(int(rng.integers(1, max_keywords + 1))):
            at = int(rng.integers(0, len(words) + 1))
            words.insert(at, kw[int(rng.integers(0, len(kw)))])
            marks.insert(at, True)
        texts.append(" ".join(words))
        salient.append([j for j, m in enumerate(marks) if m])
    return texts, y, salient
