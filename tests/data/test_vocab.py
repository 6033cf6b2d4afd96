"""Text pipeline: tokenisation, vocabulary building, encoding, round trip."""
from __future__ import annotations

import pytest
import torch

from robustbench_dgsa.data import PAD_ID, SEP_ID, UNK_ID, Vocab, tokenize
from robustbench_dgsa.util.errors import UserError


def test_tokenize_rules():
    assert tokenize("Great movie!<br /><br />I LOVED it.") == ["great", "movie", "!", "i", "loved", "it", "."]
    assert tokenize("Don't <i>stop</i> the century's best") == ["don't", "stop", "the", "century's", "best"]
    assert tokenize("a <sep> b") == ["a", "<sep>", "b"]
    assert tokenize("P1 <SEP> H1") == ["p1", "<sep>", "h1"]
    assert tokenize("x<br>y <BR/>z") == ["x", "y", "z"]
    assert tokenize('" conan "') == ['"', "conan", '"']
    assert tokenize("3 < 4 and 5>2") == ["3", "<", "4", "and", "5", ">", "2"]
    assert tokenize("café naïve") == ["café", "naïve"]
    assert tokenize("") == []
    words = "the quick brown fox jumps"
    assert tokenize(words) == words.split()


def test_build_min_freq_max_size_ties():
    texts = ["b a c", "a b d", "c a e", "b x"]  # a:3 b:3 c:2 d,e,x:1
    v = Vocab.build(texts, min_freq=2)
    assert v.to_list() == ["<pad>", "<unk>", "<sep>", "a", "b", "c"]  # freq desc, then alphabetical
    assert Vocab.build(texts, min_freq=1, max_size=4).to_list()[3:] == ["a", "b", "c", "d"]
    assert len(Vocab.build(texts, min_freq=1, max_size=2)) == 5  # max_size counts real words
    assert Vocab.build(["p <sep> h", "p <sep> h"], min_freq=1).to_list() == ["<pad>", "<unk>", "<sep>", "h", "p"]
    assert Vocab.build([["z", "y"], ["y"]], min_freq=1, tokenized=True).to_list()[3:] == ["y", "z"]


def test_encode_truncation_and_mask():
    v = Vocab.build(["a b c d e"] * 2, min_freq=1)
    ids, mask = v.encode(["a b", "c d e zzz", ""], max_len=3)
    assert ids.dtype == torch.long and mask.dtype == torch.bool and ids.shape == (3, 3)
    a, b, c, d, e = (v.stoi[t] for t in "abcde")
    assert ids.tolist() == [[a, b, PAD_ID], [c, d, e], [PAD_ID] * 3]
    assert mask.tolist() == [[False, False, True], [False, False, False], [True, True, True]]
    ids, mask = v.encode(["a", "b zzz"], max_len=256)
    assert ids.shape == (2, 2) and ids[1].tolist() == [b, UNK_ID] and mask[0].tolist() == [False, True]
    ids, _ = v.encode(["a <sep> b"])
    assert ids[0].tolist() == [a, SEP_ID, b]
    assert v.encode([""], max_len=5)[0].shape == (1, 1)
    assert v.encode("a b")[0].shape == (1, 2)
    with pytest.raises(UserError):
        v.encode(["a"], max_len=0)


def test_round_trip_and_lookup():
    v = Vocab.build(["the cat sat on the mat", "the dog"], min_freq=1)
    w = Vocab.from_list(v.to_list())
    assert w == v and len(w) == len(v) and w.stoi == v.stoi
    ids, _ = v.encode(["the cat unknownword"])
    assert v.lookup_tokens(ids[0]) == ["the", "cat", "<unk>"]
    assert v.lookup_tokens([0, 1, 2, 10_000]) == ["<pad>", "<unk>", "<sep>", "<unk>"]
    with pytest.raises(UserError):
        Vocab.from_list(["a", "b", "c"])
    with pytest.raises(UserError):
        Vocab.from_list(["<pad>", "<unk>", "<sep>", "x", "x"])
