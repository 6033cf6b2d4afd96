"""Text noise (corruptions.text): determinism, subset independence, what each type does, monotone realised
noise, and CER/WER against hand-computed values."""
from __future__ import annotations

import json
import random
import tarfile
from collections import Counter

import pytest

from corruptions import text as tn
from corruptions.errors import CorruptionError

SYNTH = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "Modern clowns in 1990 were 0ften hilarious, said Dr. Smith.",
    "a",
    "",
    "  leading and trailing spaces  ",
    "multiple   spaces\tand\ttabs\nand a newline",
] + [" ".join(rng.choice(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
                          "lambda", "mu"]) for _ in range(40)) for rng in map(random.Random, range(40))]


def _is_subsequence(short, long) -> bool:
    it = iter(long)
    return all(any(c == d for d in it) for c in short)


def _rt_lines(shared_data, n=200):
    with tarfile.open(shared_data / "text" / "rt-polaritydata.tar.xz") as tf:
        pos = tf.extractfile("rt-polaritydata/rt-polarity.pos").read().decode("cp1252").splitlines()
        neg = tf.extractfile("rt-polaritydata/rt-polarity.neg").read().decode("cp1252").splitlines()
    return [line.strip() for line in pos[:n // 2] + neg[:n // 2]]


# ---------------------------------------------------------------------------------------------- API


def test_types_and_table_are_consistent():
    assert set(tn.TEXT_NOISE_TYPES) == set(tn.TEXT_NOISE_TABLE)
    assert len(tn.TEXT_NOISE_TYPES) == 11
    for t, row in tn.TEXT_NOISE_TABLE.items():
        p = row["p"]
        assert len(p) == 5 and all(0 < a < b <= 1 for a, b in zip(p, p[1:])), t
    assert isinstance(tn.TEXT_NOISE_VERSION, str)
    assert tn.resolve_text_noise("all") == list(tn.TEXT_NOISE_TYPES)
    assert tn.resolve_text_noise("word,char_swap,word_swap") == list(tn.WORD_TYPES) + ["char_swap"]


@pytest.mark.parametrize("bad", ["typo", "char", ""])
def test_unknown_type_lists_valid_names(bad):
    with pytest.raises(CorruptionError, match="keyboard"):
        tn.add_text_noise(["abc"], bad, 1)


@pytest.mark.parametrize("sev", [0, 6, -1, 2.5, True, "3"])
def test_bad_severity(sev):
    with pytest.raises(CorruptionError, match="severity"):
        tn.add_text_noise(["abc"], "keyboard", sev)


def test_bad_inputs():
    with pytest.raises(CorruptionError):
        tn.add_text_noise([b"bytes"], "keyboard", 1)
    with pytest.raises(CorruptionError):
        tn.add_text_noise(["a", "b"], "keyboard", 1, indices=[0])
    with pytest.raises(CorruptionError):
        tn.add_text_noise(["a"], "keyboard", 1, seed=-1)
    with pytest.raises(CorruptionError):
        tn.resolve_text_noise("keyboard,nope")


@pytest.mark.parametrize("noise", tn.TEXT_NOISE_TYPES)
def test_deterministic_and_subset_independent(noise):
    full = tn.add_text_noise(SYNTH, noise, 4, seed=7)
    assert full == tn.add_text_noise(SYNTH, noise, 4, seed=7)
    part = tn.add_text_noise(SYNTH[10:20], noise, 4, seed=7, indices=range(10, 20))
    assert part == full[10:20]
    assert tn.add_text_noise(SYNTH, noise, 4, seed=8) != full
    assert tn.add_text_noise(SYNTH, noise, 5, seed=7) != full
    assert all(isinstance(t, str) for t in full)
    assert full[3] == ""  # empty text stays empty


# ---------------------------------------------------------------------------------------------- semantics


def _noisy_pairs(noise, sev=5, seed=0):
    return list(zip(SYNTH, tn.add_text_noise(SYNTH, noise, sev, seed=seed)))


def test_char_delete_only_removes_non_whitespace():
    changed = 0
    for a, b in _noisy_pairs("char_delete"):
        assert _is_subsequence(b, a) and len(b) <= len(a)
        assert [c for c in a if c.isspace()] == [c for c in b if c.isspace()]
        changed += a != b
    assert changed > 30


def test_char_insert_only_adds_lowercase_letters():
    for a, b in _noisy_pairs("char_insert"):
        assert _is_subsequence(a, b)
        extra = Counter(b) - Counter(a)
        assert all(c in "abcdefghijklmnopqrstuvwxyz" for c in extra)
        assert [c for c in a if c.isspace()] == [c for c in b if c.isspace()]


def test_char_substitute_keeps_kind_and_length():
    for a, b in _noisy_pairs("char_substitute"):
        assert len(a) == len(b)
        for ca, cb in zip(a, b):
            if ca != cb:
                assert ca.isalnum()
                assert (ca.isdigit() and cb.isdigit()) or (ca.isupper() and cb.isupper()) or \
                    (ca.islower() and cb.islower())


def test_char_swap_preserves_multiset_and_whitespace():
    changed = 0
    for a, b in _noisy_pairs("char_swap"):
        assert sorted(a) == sorted(b)
        assert [i for i, c in enumerate(a) if c.isspace()] == [i for i, c in enumerate(b) if c.isspace()]
        diffs = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        # changes come in adjacent swapped pairs
        k = 0
        while k < len(diffs):
            i = diffs[k]
            assert diffs[k + 1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
            k += 2
        changed += bool(diffs)
    assert changed > 30


def test_keyboard_substitutions_are_neighbours():
    nb = tn.KEYBOARD_NEIGHBOURS
    assert set("qwertyuiopasdfghjklzxcvbnm1234567890") == set(nb)
    for k, v in nb.items():  # the relation is symmetric
        assert all(k in nb[o] for o in v), k
    assert set(nb["g"]) == set("tyfhvb") and set(nb["a"]) == set("qwsz")
    n_changed = 0
    for a, b in _noisy_pairs("keyboard"):
        assert len(a) == len(b)
        for ca, cb in zip(a, b):
            if ca != cb:
                n_changed += 1
                assert cb.lower() in nb[ca.lower()]
                assert ca.isupper() == cb.isupper()
    assert n_changed > 100


def test_ocr_uses_the_confusion_table():
    assert tn.add_text_noise(["xkx pxp kxk"], "ocr", 5) == ["xkx pxp kxk"]  # nothing confusable
    outs = tn.add_text_noise(["rn rn rn rn rn rn rn rn rn rn"] * 20, "ocr", 5, seed=3)
    tokens = Counter(t for o in outs for t in o.split())
    assert set(tokens) <= {"rn", "m"} and tokens["m"] > 0
    outs = tn.add_text_noise(["0 1 l O S 5"] * 30, "ocr", 5)
    allowed = {w: {w, *tn.OCR_CONFUSIONS[w]} for w in "01lOS5"}
    for o in outs:
        for w, v in zip("0 1 l O S 5".split(), o.split()):
            assert v in allowed[w]


def test_word_dropout_only_removes_words_and_keeps_one():
    for a, b in _noisy_pairs("word_dropout"):
        assert _is_subsequence(b.split(), a.split())
        if a.split():
            assert b.split()
    assert tn.add_text_noise(["solo"], "word_dropout", 5) == ["solo"]
    many = tn.add_text_noise(["one two"] * 200, "word_dropout", 5)
    assert all(m.split() for m in many)


def test_word_swap_preserves_word_multiset():
    changed = 0
    for a, b in _noisy_pairs("word_swap"):
        assert Counter(a.split()) == Counter(b.split())
        changed += a != b
    assert changed > 20


def test_word_repeat_and_inject_only_add_words():
    for a, b in _noisy_pairs("word_repeat"):
        wa, wb = a.split(), b.split()
        assert _is_subsequence(wa, wb)
        # every extra word repeats its neighbour
        assert all(w in wa for w in wb)
    for a, b in _noisy_pairs("word_inject"):
        wa, wb = a.split(), b.split()
        assert _is_subsequence(wa, wb)
        extra = Counter(wb) - Counter(wa)
        assert all(w in tn.INJECT_WORDS for w in extra)


def test_unchanged_whitespace_when_no_word_op_fires():
    text = "multiple   spaces\tand\ttabs\nand a newline"
    for noise in tn.WORD_TYPES:
        out = tn.add_text_noise([text] * 50, noise, 1, seed=1)
        assert text in out  # some examples untouched, byte-identical


def test_severity_monotone_on_synthetic_text():
    for noise in tn.TEXT_NOISE_TYPES:
        rates = [tn.realised_error_rates(SYNTH, tn.add_text_noise(SYNTH, noise, s, seed=2)) for s in range(1, 6)]
        key = "wer" if noise in tn.WORD_TYPES else "cer"
        vals = [r[key] for r in rates]
        assert all(a < b for a, b in zip(vals, vals[1:])), (noise, vals)


@pytest.mark.realdata
def test_severity_monotone_on_rotten_tomatoes(shared_data):
    lines = _rt_lines(shared_data)
    assert len(lines) == 200
    for noise in tn.TEXT_NOISE_TYPES:
        cer, wer = [], []
        for s in range(1, 6):
            r = tn.realised_error_rates(lines, tn.add_text_noise(lines, noise, s, seed=0))
            cer.append(r["cer"])
            wer.append(r["wer"])
        assert all(a < b for a, b in zip(cer, cer[1:])), (noise, cer)
        assert all(a < b for a, b in zip(wer, wer[1:])), (noise, wer)
        # realised noise is of the order of the table's probability (calibration sanity)
        p5 = tn.TEXT_NOISE_TABLE[noise]["p"][4]
        main = wer[4] if noise in tn.WORD_TYPES else cer[4]
        assert 0.5 * p5 < main < 2.0 * p5, (noise, main, p5)


# ---------------------------------------------------------------------------------------------- CER / WER


def _dp(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_edit_distance_hand_examples():
    assert tn.edit_distance("kitten", "sitting") == 3
    assert tn.edit_distance("flaw", "lawn") == 2
    assert tn.edit_distance("", "abc") == 3
    assert tn.edit_distance("abc", "") == 3
    assert tn.edit_distance("same", "same") == 0
    assert tn.edit_distance("ab", "ba") == 2
    assert tn.edit_distance(["the", "cat"], ["a", "cat"]) == 1


@pytest.mark.parametrize("fn", ["edit_distance", "edit_distance_python"])
def test_edit_distance_matches_dynamic_programming(fn):
    """Both the rapidfuzz path and the pure-Python fallback equal the textbook DP (strings and token lists)."""
    dist = getattr(tn, fn)
    rnd = random.Random(0)
    for _ in range(400):
        a = "".join(rnd.choice("abc ") for _ in range(rnd.randint(0, 90)))
        b = "".join(rnd.choice("abcd ") for _ in range(rnd.randint(0, 90)))
        assert dist(a, b) == _dp(a, b), (a, b)
        assert dist(a.split(), b.split()) == _dp(a.split(), b.split()), (a, b)
    long_a = "".join(rnd.choice("acgt") for _ in range(300))
    long_b = "".join(rnd.choice("acgt") for _ in range(280))
    assert dist(long_a, long_b) == _dp(long_a, long_b)


def test_cer_wer_hand_examples():
    assert tn.character_error_rate(["kitten"], ["sitting"]) == pytest.approx(3 / 6)
    assert tn.character_error_rate("kitten", "sitting") == pytest.approx(0.5)
    # corpus level: total edits / total reference length
    assert tn.character_error_rate(["ab", "abcd"], ["a", "abcd"]) == pytest.approx(1 / 6)
    assert tn.word_error_rate(["the cat sat"], ["the sat"]) == pytest.approx(1 / 3)
    assert tn.word_error_rate(["a b c"], ["a c b"]) == pytest.approx(2 / 3)
    assert tn.word_error_rate(["a b", "c d e f"], ["a b", "c x e f g"]) == pytest.approx(2 / 6)
    assert tn.word_error_rate(["x"], ["x"]) == 0.0
    assert tn.character_error_rate([""], [""]) == 0.0
    with pytest.raises(CorruptionError):
        tn.word_error_rate(["a"], ["a", "b"])
    r = tn.realised_error_rates(["ab"] * 10, ["ab"] * 9 + ["b"], max_examples=3)
    assert r["n_measured"] == 3 and r["n_total"] == 10


def test_write_text_noise(tmp_path):
    texts = SYNTH[:12]
    labels = [i % 2 for i in range(12)]
    man = tn.write_text_noise(texts, labels, tmp_path / "o", "keyboard,word_dropout", [1, 3], seed=4)
    files = sorted(p.name for p in (tmp_path / "o").iterdir())
    assert files == sorted(["clean.jsonl", "keyboard_s1.jsonl", "keyboard_s3.jsonl", "word_dropout_s1.jsonl",
                            "word_dropout_s3.jsonl", "manifest.json"])
    import hashlib
    for name, entry in man["files"].items():
        assert hashlib.sha256((tmp_path / "o" / name).read_bytes()).hexdigest() == entry["sha256"]
    rows = [json.loads(line) for line in (tmp_path / "o" / "keyboard_s3.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rows] == list(range(12)) and [r["label"] for r in rows] == labels
    assert [r["text"] for r in rows] == tn.add_text_noise(texts, "keyboard", 3, seed=4)
    assert man["files"]["keyboard_s3.jsonl"]["cer"] == pytest.approx(
        tn.character_error_rate(texts, [r["text"] for r in rows]))
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["text_noise_version"] == tn.TEXT_NOISE_VERSION
    before = (tmp_path / "o" / "clean.jsonl").stat().st_mtime_ns
    with pytest.raises(CorruptionError, match="overwrite"):
        tn.write_text_noise(texts, labels, tmp_path / "o", "keyboard", [1], seed=4)
    assert (tmp_path / "o" / "clean.jsonl").stat().st_mtime_ns == before
    assert not list((tmp_path / "o").glob(".*partial"))


def test_write_text_noise_never_renames_over_a_fifo(tmp_path):
    """The staged files go in through the one atomic writer (corruptions.atomic.commit_staged): a FIFO at an
    output name is refused before anything moves, even with overwrite; the old manifest and the FIFO stay."""
    import os
    import stat
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    out = tmp_path / "o"
    tn.write_text_noise(SYNTH[:4], None, out, "keyboard", [1], seed=0)
    manifest = (out / "manifest.json").read_bytes()
    (out / "keyboard_s1.jsonl").unlink()
    os.mkfifo(out / "keyboard_s1.jsonl")
    with pytest.raises(CorruptionError, match="FIFO"):
        tn.write_text_noise(SYNTH[:4], None, out, "keyboard", [1], seed=1, overwrite=True)
    assert stat.S_ISFIFO(os.lstat(out / "keyboard_s1.jsonl").st_mode)
    assert (out / "manifest.json").read_bytes() == manifest
    assert not list(out.glob(".*partial"))


def test_write_text_noise_interrupted_leaves_nothing(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = tn.add_text_noise

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] > 2:  # 1: validation, 2: first condition, 3: crash
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(tn, "add_text_noise", flaky)
    with pytest.raises(KeyboardInterrupt):
        tn.write_text_noise(SYNTH[:5], None, tmp_path / "o", "keyboard,ocr", [1], seed=0)
    assert not (tmp_path / "o").exists()
