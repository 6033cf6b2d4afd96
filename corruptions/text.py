"""Text noise at severities 1-5, and the character / word error rates it realises (docs/METHODS.md, Text noise).

Ten noise types plus ``mixed``:

* character level (a per-character probability ``p``; whitespace is never touched, so word boundaries stay):
  ``char_insert`` (a random lowercase letter after a character), ``char_delete``, ``char_substitute`` (a
  different letter/digit of the same kind), ``char_swap`` (two adjacent characters of one word, swaps never
  overlap), ``keyboard`` (a QWERTY-neighbour typo, case kept), ``ocr`` (OCR confusions such as rn<->m,
  cl<->d, vv<->w, o<->0, l<->1, e<->c, s<->5; ``p`` is per confusable site);
* word level (a per-word probability ``p``; words are whitespace-separated tokens): ``word_dropout`` (never
  drops every word of a text), ``word_swap`` (adjacent words, swaps never overlap), ``word_repeat``,
  ``word_inject`` (a token from the fixed list :data:`INJECT_WORDS` after the word);
* ``mixed``: all ten, one after the other, each at ``p/6`` (character types) or ``p/4`` (word types).

The probabilities live in :data:`TEXT_NOISE_TABLE`, versioned by :data:`TEXT_NOISE_VERSION`; change either and
bump the version. Randomness is keyed by (seed, noise type, severity, example index) through NumPy's
``SeedSequence``/PCG64, so any subset of a corpus (``indices``) is noised exactly as in the full run.

Realised noise: :func:`character_error_rate` / :func:`word_error_rate` are corpus-level Levenshtein rates
(total edits / total reference length), computed with the bit-parallel algorithm of Myers (1999) in the form
of Hyyrö (2001) on Python integers (how fast: ``benchmarks/MEASUREMENTS.md``).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .atomic import commit_staged, owner_token, partial_path
from .errors import CorruptionError, OutputExistsError

TEXT_NOISE_VERSION = "1"

#: longest example (characters) that :func:`write_text_noise` takes: its error rates cost O(n²/64) per example
#: (seconds at this length), so a runaway input (a whole file on one line) is refused up front instead
#: of running for hours. The noise itself is linear-time; :func:`add_text_noise` has no such limit.
MAX_TEXT_CHARS = 100_000

CHAR_TYPES = ("char_insert", "char_delete", "char_substitute", "char_swap", "keyboard", "ocr")
WORD_TYPES = ("word_dropout", "word_swap", "word_repeat", "word_inject")
TEXT_NOISE_TYPES = CHAR_TYPES + WORD_TYPES + ("mixed",)
TEXT_NOISE_GROUPS = {"char": CHAR_TYPES, "word": WORD_TYPES}

# Per-severity probabilities (severity 1..5). "unit" says what the probability applies to.
# Swaps change two characters/words per event and OCR sites cover most frequent letters (some replacements
# are two characters), so their probabilities are scaled to put the realised CER (character types) or WER
# (word types) of every type near the others' at each severity, on English text.
_P_CHAR = (0.03, 0.06, 0.10, 0.15, 0.20)
_P_SWAP = (0.02, 0.04, 0.07, 0.105, 0.14)
_P_WORD = (0.05, 0.10, 0.15, 0.20, 0.30)
_P_WSWAP = (0.035, 0.07, 0.10, 0.135, 0.20)
TEXT_NOISE_TABLE: dict[str, dict] = {
    "char_insert": {"unit": "character", "p": _P_CHAR},
    "char_delete": {"unit": "character", "p": _P_CHAR},
    "char_substitute": {"unit": "letter or digit", "p": _P_CHAR},
    "char_swap": {"unit": "adjacent character pair within a word", "p": _P_SWAP},
    "keyboard": {"unit": "letter or digit", "p": _P_CHAR},
    "ocr": {"unit": "OCR-confusable site", "p": (0.028, 0.056, 0.095, 0.14, 0.19)},
    "word_dropout": {"unit": "word", "p": _P_WORD},
    "word_swap": {"unit": "adjacent word pair", "p": _P_WSWAP},
    "word_repeat": {"unit": "word", "p": _P_WORD},
    "word_inject": {"unit": "word", "p": _P_WORD},
    "mixed": {"unit": "p/6 per character type then p/4 per word type, applied in sequence",
              "p": (0.04, 0.08, 0.12, 0.18, 0.25)},
}

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_UPPER = _LOWER.upper()
_DIGITS = "0123456789"

# QWERTY geometry: key x positions with the usual row stagger; neighbours are the keys left/right in the same
# row and the keys of adjacent rows whose centres are less than one key apart.
_ROWS = (("1234567890", 0.0), ("qwertyuiop", 0.5), ("asdfghjkl", 0.75), ("zxcvbnm", 1.25))


def _keyboard_neighbours() -> dict[str, str]:
    pos = {}
    for r, (keys, off) in enumerate(_ROWS):
        for j, k in enumerate(keys):
            pos[k] = (r, j + off)
    out: dict[str, str] = {}
    for k, (r, x) in pos.items():
        nb = [k2 for k2, (r2, x2) in pos.items() if k2 != k and
              ((r2 == r and abs(x2 - x) == 1.0) or (abs(r2 - r) == 1 and abs(x2 - x) < 1.0))]
        out[k] = "".join(sorted(nb))
    return out


KEYBOARD_NEIGHBOURS: dict[str, str] = _keyboard_neighbours()
_KEY_LUT = np.array([chr(c).lower() in KEYBOARD_NEIGHBOURS for c in range(128)] + [False], dtype=bool)

# OCR confusions: pattern -> replacements. Two-character patterns are matched first.
OCR_CONFUSIONS: dict[str, tuple[str, ...]] = {
    "rn": ("m",), "cl": ("d",), "vv": ("w",), "ri": ("n",), "li": ("h",),
    "m": ("rn",), "d": ("cl",), "w": ("vv",), "n": ("ri",), "h": ("li", "b"),
    "o": ("0",), "O": ("0", "D"), "0": ("o", "O"), "D": ("O",), "Q": ("O",),
    "l": ("1", "I"), "I": ("l", "1"), "1": ("l", "I"), "i": ("l", "1"), "j": ("i",),
    "e": ("c",), "c": ("e",), "a": ("o",), "s": ("5",), "S": ("5",), "5": ("S", "s"),
    "B": ("8",), "8": ("B",), "b": ("h", "6"), "6": ("b", "G"), "G": ("6",),
    "g": ("9", "q"), "q": ("g", "9"), "9": ("g",), "u": ("v",), "v": ("u",), "y": ("v",),
    "t": ("f",), "f": ("t",), "z": ("2",), "Z": ("2",), "2": ("z", "Z"), "E": ("F",), "F": ("E",),
}
_OCR_RE = re.compile("|".join(re.escape(k) for k in sorted(OCR_CONFUSIONS, key=lambda s: (-len(s), s))))

# Injected tokens for word_inject: fixed, so injection does not depend on which texts are in the batch.
INJECT_WORDS: tuple[str, ...] = tuple("""
the of and to in is was for that it with as on be at by this had not are but from or have an they which one
you were her all she there would their we him been has when who will more no if out so said what up its about
into than them can only other new some could time these two may then do first any my now such like our over
man me even most made after also did many before must through back years where much your way well down should
because each just those people how too little state good very make world still own see men work long get here
between both life being under never day same another know while last might us great old year off come since
against go came right used take three""".split())


def resolve_text_noise(spec: str | Sequence[str]) -> list[str]:
    """``"all"`` (the ten single types and ``mixed``), ``"char"``, ``"word"``, or names (comma-separated or a
    list). Unknown names raise :class:`CorruptionError` listing the valid ones. Order follows the input,
    duplicates removed."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for raw in items:
        name = str(raw).strip().lower().replace("-", "_")
        if not name:
            continue
        if name == "all":
            names: Sequence[str] = TEXT_NOISE_TYPES
        elif name in TEXT_NOISE_GROUPS:
            names = TEXT_NOISE_GROUPS[name]
        elif name in TEXT_NOISE_TYPES:
            names = (name,)
        else:
            raise CorruptionError(f"unknown text noise type {raw!r}; valid: {', '.join(TEXT_NOISE_TYPES)}, "
                                  f"or the groups char, word, all")
        out.extend(n for n in names if n not in out)
    if not out:
        raise CorruptionError(f"no text noise type given; valid: {', '.join(TEXT_NOISE_TYPES)}, char, word, all")
    return out


def noise_probability(noise_type: str, severity: int) -> float:
    _check_type_severity(noise_type, severity)
    return float(TEXT_NOISE_TABLE[noise_type]["p"][severity - 1])


def _check_type_severity(noise_type: str, severity) -> None:
    if noise_type not in TEXT_NOISE_TABLE:
        raise CorruptionError(f"unknown text noise type {noise_type!r}; valid: {', '.join(TEXT_NOISE_TYPES)}")
    if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)) or not 1 <= int(severity) <= 5:
        raise CorruptionError(f"severity must be an integer 1..5, got {severity!r}")


def _rng(seed: int, noise_type: str, severity: int, index: int) -> np.random.Generator:
    key = zlib.crc32(f"text-noise/{TEXT_NOISE_VERSION}/{noise_type}".encode())
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), key, int(severity), int(index)])))


# ---------------------------------------------------------------------------------------------- char level


# Every Unicode whitespace character is at or below U+3000: a lookup table over 0..0x3000 (+1 sentinel).
_WS_LUT = np.array([chr(c).isspace() for c in range(0x3001)] + [False], dtype=bool)
_ASCII_ALNUM = np.array([chr(c).isalnum() for c in range(128)], dtype=bool)


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _nonspace_mask(text: str) -> np.ndarray:
    return ~_WS_LUT[np.minimum(_codes(text), 0x3001)]


def _alnum_mask(text: str) -> np.ndarray:
    codes = _codes(text)
    out = _ASCII_ALNUM[np.minimum(codes, 127)] & (codes < 128)
    for i in np.flatnonzero(codes >= 128):  # rare in the corpora: decide per character
        out[i] = text[i].isalnum()
    return out


def _char_insert(text: str, p: float, rng: np.random.Generator) -> str:
    n = len(text)
    u, r = rng.random(n), rng.random(n)
    sites = np.flatnonzero((u < p) & _nonspace_mask(text)) if n else ()
    if not len(sites):
        return text
    parts, last = [], 0
    for i in sites:
        parts.append(text[last:i + 1])
        parts.append(_LOWER[int(r[i] * 26)])
        last = i + 1
    parts.append(text[last:])
    return "".join(parts)


def _char_delete(text: str, p: float, rng: np.random.Generator) -> str:
    n = len(text)
    u = rng.random(n)
    if not n:
        return text
    drop = (u < p) & _nonspace_mask(text)
    if not drop.any():
        return text
    return "".join(c for c, d in zip(text, drop) if not d)


def _same_kind_other(c: str, r: float) -> str:
    alphabet = _UPPER if c in _UPPER else _DIGITS if c in _DIGITS else _LOWER
    choices = alphabet.replace(c, "") if c in alphabet else alphabet
    return choices[int(r * len(choices))]


def _char_substitute(text: str, p: float, rng: np.random.Generator) -> str:
    n = len(text)
    u, r = rng.random(n), rng.random(n)
    if not n:
        return text
    eligible = _alnum_mask(text)
    sites = np.flatnonzero((u < p) & eligible)
    if not len(sites):
        return text
    chars = list(text)
    for i in sites:
        chars[i] = _same_kind_other(chars[i], r[i])
    return "".join(chars)


def _char_swap(text: str, p: float, rng: np.random.Generator) -> str:
    n = len(text)
    u = rng.random(n)
    if n < 2:
        return text
    ns = _nonspace_mask(text)
    chars = list(text)
    diff = np.fromiter((a != b for a, b in zip(text, text[1:])), dtype=bool, count=n - 1)
    sites = np.flatnonzero((u[:-1] < p) & ns[:-1] & ns[1:] & diff)
    last = -2
    for i in sites:
        if i <= last + 1:  # overlaps the previous swap
            continue
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
        last = i
    return "".join(chars)


def _keyboard(text: str, p: float, rng: np.random.Generator) -> str:
    n = len(text)
    u, r = rng.random(n), rng.random(n)
    if not n:
        return text
    eligible = _KEY_LUT[np.minimum(_codes(text), 128)]
    sites = np.flatnonzero((u < p) & eligible)
    if not len(sites):
        return text
    chars = list(text)
    for i in sites:
        c = chars[i]
        nb = KEYBOARD_NEIGHBOURS[c.lower()]
        k = nb[int(r[i] * len(nb))]
        chars[i] = k.upper() if c.isupper() else k
    return "".join(chars)


def _ocr(text: str, p: float, rng: np.random.Generator) -> str:
    n = len(text)
    u, r = rng.random(n), rng.random(n)
    parts, last, changed = [], 0, False
    for m in _OCR_RE.finditer(text):
        i = m.start()
        if u[i] >= p:
            continue
        opts = OCR_CONFUSIONS[m.group()]
        parts.append(text[last:i])
        parts.append(opts[int(r[i] * len(opts))])
        last = m.end()
        changed = True
    if not changed:
        return text
    parts.append(text[last:])
    return "".join(parts)


# ---------------------------------------------------------------------------------------------- word level

_TOKEN_RE = re.compile(r"(\s+)")


def _split_words(text: str) -> tuple[str, list[list[str]]]:
    """(leading whitespace, [[word, whitespace after it], ...])."""
    pieces = _TOKEN_RE.split(text)
    lead = ""
    if pieces and pieces[0] == "":
        pieces = pieces[1:]
        if pieces:
            lead = pieces[0]
            pieces = pieces[1:]
    items = []
    for k in range(0, len(pieces), 2):
        if pieces[k] == "":
            continue
        items.append([pieces[k], pieces[k + 1] if k + 1 < len(pieces) else ""])
    return lead, items


def _join_words(lead: str, items: list[list[str]]) -> str:
    return lead + "".join(w + s for w, s in items)


def _word_dropout(text: str, p: float, rng: np.random.Generator) -> str:
    lead, items = _split_words(text)
    u = rng.random(len(items))
    drop = u < p
    if not drop.any():
        return text
    if drop.all():
        drop[int(np.argmax(u))] = False  # keep one word: the one least likely to be dropped
    kept = [list(it) for it, d in zip(items, drop) if not d]
    kept[-1][1] = items[-1][1]  # the text's trailing whitespace stays at the end
    return _join_words(lead, kept)


def _word_swap(text: str, p: float, rng: np.random.Generator) -> str:
    lead, items = _split_words(text)
    n = len(items)
    u = rng.random(n)
    if n < 2:
        return text
    last, changed = -2, False
    for i in np.flatnonzero(u[:-1] < p):
        if i <= last + 1 or items[i][0] == items[i + 1][0]:
            continue
        items[i][0], items[i + 1][0] = items[i + 1][0], items[i][0]
        last, changed = i, True
    return _join_words(lead, items) if changed else text


def _word_repeat(text: str, p: float, rng: np.random.Generator) -> str:
    lead, items = _split_words(text)
    u = rng.random(len(items))
    if not (u < p).any():
        return text
    out = []
    for (w, s), x in zip(items, u):
        if x < p:
            out.append([w, " "])
        out.append([w, s])
    return _join_words(lead, out)


def _word_inject(text: str, p: float, rng: np.random.Generator) -> str:
    lead, items = _split_words(text)
    u, r = rng.random(len(items)), rng.random(len(items))
    if not (u < p).any():
        return text
    out = []
    for (w, s), x, y in zip(items, u, r):
        if x < p:
            out.append([w, " "])
            out.append([INJECT_WORDS[int(y * len(INJECT_WORDS))], s])
        else:
            out.append([w, s])
    return _join_words(lead, out)


_FUNCS = {
    "char_insert": _char_insert, "char_delete": _char_delete, "char_substitute": _char_substitute,
    "char_swap": _char_swap, "keyboard": _keyboard, "ocr": _ocr,
    "word_dropout": _word_dropout, "word_swap": _word_swap, "word_repeat": _word_repeat,
    "word_inject": _word_inject,
}


def _mixed(text: str, p: float, rng: np.random.Generator) -> str:
    for name in WORD_TYPES:
        text = _FUNCS[name](text, p / len(WORD_TYPES), rng)
    for name in CHAR_TYPES:
        text = _FUNCS[name](text, p / len(CHAR_TYPES), rng)
    return text


_FUNCS["mixed"] = _mixed


def add_text_noise(texts: Sequence[str] | str, noise_type: str, severity: int, *, seed: int = 0,
                   indices: Iterable[int] | None = None) -> list[str]:
    """Noisy copies of ``texts`` (a list of str; a single str is treated as a list of one).

    ``indices`` are the examples' positions in the full corpus (default ``0..len-1``): example ``i`` always
    gets the same noise for the same (seed, type, severity), whatever else is in the batch.
    """
    _check_type_severity(noise_type, severity)
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    bad = next((k for k, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise CorruptionError(f"texts must be strings; item {bad} is {type(texts[bad]).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CorruptionError(f"seed must be a non-negative integer, got {seed!r}")
    idx = list(range(len(texts))) if indices is None else [int(i) for i in indices]
    if len(idx) != len(texts):
        raise CorruptionError(f"indices has {len(idx)} entries for {len(texts)} texts")
    if any(i < 0 for i in idx):
        raise CorruptionError("indices must be non-negative")
    p = float(TEXT_NOISE_TABLE[noise_type]["p"][int(severity) - 1])
    fn = _FUNCS[noise_type]
    return [fn(t, p, _rng(int(seed), noise_type, int(severity), i)) for t, i in zip(texts, idx)]


def check_text_lengths(texts: Sequence[str]) -> None:
    """CorruptionError naming the first example longer than :data:`MAX_TEXT_CHARS` characters."""
    long = next((k for k, t in enumerate(texts) if len(t) > MAX_TEXT_CHARS), None)
    if long is not None:
        raise CorruptionError(f"example {long} has {len(texts[long]):,} characters, over the limit of "
                              f"{MAX_TEXT_CHARS:,} per example; split long texts into shorter examples")


# ---------------------------------------------------------------------------------------------- error rates

try:  # optional for the standalone library: the pure-Python fallback gives the same distances
    from rapidfuzz.distance import Levenshtein as _rapidfuzz_levenshtein
except ImportError:  # pragma: no cover - exercised where rapidfuzz is absent
    _rapidfuzz_levenshtein = None


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance (unit insert/delete/substitute) between two sequences of hashable items
    (two strings, or two token lists): rapidfuzz's C++ implementation when installed (a dependency of
    dgsa-bench; much faster on long documents), else :func:`edit_distance_python` (same integers)."""
    if _rapidfuzz_levenshtein is not None:
        return int(_rapidfuzz_levenshtein.distance(a, b))
    return edit_distance_python(a, b)


def edit_distance_python(a: Sequence, b: Sequence) -> int:
    """:func:`edit_distance` in pure Python, bit-parallel (Myers): O(len(a)·len(b)/word) integer operations."""
    # Trim the common prefix and suffix: cheap, and sparse noise leaves long ones.
    lo, la, lb = 0, len(a), len(b)
    while lo < la and lo < lb and a[lo] == b[lo]:
        lo += 1
    while la > lo and lb > lo and a[la - 1] == b[lb - 1]:
        la -= 1
        lb -= 1
    a, b = a[lo:la], b[lo:lb]
    if len(a) < len(b):
        a, b = b, a
    m = len(b)  # the shorter one is the bit-vector pattern
    if m == 0:
        return len(a)
    peq: dict = {}
    for i, c in enumerate(b):
        peq[c] = peq.get(c, 0) | (1 << i)
    full = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, score = full, 0, m
    for c in a:
        eq = peq.get(c, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq     # may carry past bit m-1: masked below
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = (ph << 1) | 1                     # D[0][j] = j: global distance
        mh <<= 1
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def _as_lists(refs, hyps) -> tuple[list[str], list[str]]:
    if isinstance(refs, str):
        refs = [refs]
    if isinstance(hyps, str):
        hyps = [hyps]
    refs, hyps = list(refs), list(hyps)
    if len(refs) != len(hyps):
        raise CorruptionError(f"{len(refs)} references but {len(hyps)} hypotheses")
    return refs, hyps


def character_error_rate(refs: Sequence[str] | str, hyps: Sequence[str] | str) -> float:
    """Corpus CER: total character edit distance / total reference characters (0.0 for empty refs)."""
    refs, hyps = _as_lists(refs, hyps)
    total = sum(len(r) for r in refs)
    edits = sum(edit_distance(r, h) for r, h in zip(refs, hyps))
    return edits / total if total else float(edits > 0)


def word_error_rate(refs: Sequence[str] | str, hyps: Sequence[str] | str) -> float:
    """Corpus WER over whitespace tokens: total word edit distance / total reference words."""
    refs, hyps = _as_lists(refs, hyps)
    total, edits = 0, 0
    for r, h in zip(refs, hyps):
        rw, hw = r.split(), h.split()
        total += len(rw)
        edits += edit_distance(rw, hw)
    return edits / total if total else float(edits > 0)


def realised_error_rates(refs: Sequence[str], hyps: Sequence[str], *, max_examples: int | None = None) -> dict:
    """``{"cer", "wer", "n_measured", "n_total"}``. With ``max_examples`` the rates are measured on that many
    examples spread evenly over the corpus (deterministic) and ``n_measured`` says so."""
    refs, hyps = _as_lists(refs, hyps)
    n = len(refs)
    if max_examples is not None and 0 < max_examples < n:
        pick = np.unique(np.linspace(0, n - 1, int(max_examples)).round().astype(int))
        refs = [refs[i] for i in pick]
        hyps = [hyps[i] for i in pick]
    return {"cer": character_error_rate(refs, hyps), "wer": word_error_rate(refs, hyps),
            "n_measured": len(refs), "n_total": n}


# ---------------------------------------------------------------------------------------------- writing

TEXT_MANIFEST_FORMAT = "corruptions-text/1"


def write_text_noise(texts: Sequence[str], labels: Sequence | None, out_dir, noise_types: str | Sequence[str],
                     severities: Sequence[int], *, seed: int = 0, overwrite: bool = False,
                     max_measure: int | None = 1000, input_description: str | None = None,
                     progress=None) -> dict:
    """Write ``clean.jsonl`` and one ``<type>_s<severity>.jsonl`` per condition (lines ``{"index", "text",
    "label"}``) plus ``manifest.json`` (version, table, seed, realised CER/WER, SHA-256 of every file) into
    ``out_dir``; returns the manifest dict.

    CER/WER are measured on ``max_measure`` examples spread evenly over the corpus (all when None or 0); the
    manifest says how many. All files are written under temporary names and renamed together, the manifest
    last; existing outputs without ``overwrite`` raise CorruptionError naming them and nothing is touched.
    ``progress``: optional wrapper ``progress(iterable, total=..., description=...)``.
    """
    types, sevs, texts, labels, out = _check_text_noise_args(texts, labels, out_dir, noise_types, severities)
    conditions = [(t, s) for t in types for s in sevs]
    names = ["clean.jsonl"] + [f"{t}_s{s}.jsonl" for t, s in conditions] + ["manifest.json"]
    existing = [nm for nm in names if (out / nm).exists()]
    if existing and not overwrite:
        raise OutputExistsError(out, existing)
    # all validation before any file exists
    add_text_noise(texts[:1], types[0], sevs[0], seed=seed)

    made_dir = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    st = _TextStaging(out, owner_token(), labels)
    sample = None if not max_measure else int(max_measure)
    try:
        st.stage("clean.jsonl", texts, {"noise": None, "severity": 0})
        it = conditions if progress is None else progress(conditions, total=len(conditions),
                                                          description="text noise")
        for t, s in it:
            noisy = add_text_noise(texts, t, s, seed=seed)
            rates = realised_error_rates(texts, noisy, max_examples=sample)
            st.stage(f"{t}_s{s}.jsonl", noisy, {"noise": t, "severity": s,
                                                 "p": TEXT_NOISE_TABLE[t]["p"][s - 1], **rates})
        manifest = _text_manifest(types, sevs, seed, texts, labels, st.files, sample, input_description)
        st.commit(manifest)
    except BaseException:
        for tmp in st.staged.values():
            tmp.unlink(missing_ok=True)
        if made_dir:
            try:
                out.rmdir()  # only if empty
            except OSError:
                pass
        raise
    return manifest


def _check_text_noise_args(texts, labels, out_dir, noise_types, severities):
    """The checked inputs of :func:`write_text_noise`: ``(types, sevs, texts, labels, out)``."""
    types = resolve_text_noise(noise_types)
    sevs = [int(s) for s in severities]
    for s in sevs:
        _check_type_severity(types[0], s)
    if len(set(sevs)) != len(sevs) or not sevs:
        raise CorruptionError(f"severities must be distinct and non-empty, got {list(severities)}")
    texts = list(texts)
    if not texts:
        raise CorruptionError("no texts to corrupt")
    bad = next((k for k, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise CorruptionError(f"texts must be strings; item {bad} is {type(texts[bad]).__name__}")
    check_text_lengths(texts)
    if labels is not None:
        labels = [v.item() if isinstance(v, np.generic) else v for v in labels]
        if len(labels) != len(texts):
            raise CorruptionError(f"{len(labels)} labels for {len(texts)} texts")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CorruptionError(f"{out} exists and is not a directory")
    return types, sevs, texts, labels, out


@dataclass
class _TextStaging:
    """The hidden partial files of one :func:`write_text_noise` run (``staged``: final name -> partial path)
    and their manifest entries (``files``)."""
    out: Path
    token: str
    labels: list | None
    staged: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)

    def stage(self, name: str, rows: list[str], meta: dict) -> None:
        tmp = partial_path(self.out / name, self.token)
        self.staged[name] = tmp
        h = hashlib.sha256()
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for i, t in enumerate(rows):
                line = json.dumps({"index": i, "text": t, "label": None if self.labels is None else self.labels[i]},
                                  ensure_ascii=False) + "\n"
                f.write(line)
                h.update(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        self.files[name] = {"sha256": h.hexdigest(), "bytes": tmp.stat().st_size, "rows": len(rows), **meta}

    def commit(self, manifest: dict) -> None:
        """Rename every staged file into place (the old manifest removed first) and write the manifest last."""
        commit_staged(self.out, self.staged, "manifest.json", manifest)


def _text_manifest(types: list[str], sevs: list[int], seed: int, texts: list[str], labels, files: dict,
                   sample: int | None, input_description: str | None) -> dict:
    text_hash = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    return {
        "format": TEXT_MANIFEST_FORMAT,
        "description": "text noise (regenerated)",
        "text_noise_version": TEXT_NOISE_VERSION,
        "table": {t: {"unit": TEXT_NOISE_TABLE[t]["unit"], "p": list(TEXT_NOISE_TABLE[t]["p"])} for t in types},
        "noise_types": types,
        "severities": sevs,
        "seed": int(seed),
        "n": len(texts),
        "randomness": "keyed by (seed, noise type, severity, example index): any subset is noised identically",
        "error_rates": "corpus-level Levenshtein CER (characters) and WER (whitespace tokens) of each noisy "
                       "file against clean.jsonl" + (f", measured on up to {sample} examples spread evenly "
                                                     f"over the corpus" if sample else ", all examples"),
        "input": {"description": input_description, "n": len(texts), "texts_sha256": text_hash,
                  "has_labels": labels is not None},
        "files": files,
        "library_versions": {"python": platform.python_version(), "numpy": np.__version__},
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
