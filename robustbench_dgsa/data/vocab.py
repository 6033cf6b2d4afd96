"""Word-level text pipeline: tokenisation, vocabulary, encoding (docs/METHODS.md, Data).

Tokenisation (:func:`tokenize`), in this order:

1. lowercase;
2. ``<br />`` / ``<br>`` line breaks (IMDB) become spaces;
3. the literal separator ``<sep>`` is kept as one token (MNLI joins premise and hypothesis with it);
4. any other HTML tag (``<`` + letter ... ``>``, e.g. ``<i>``, ``</a>``) is removed;
5. tokens are found with the regex ``\\w+(?:['’]\\w+)*|[^\\w\\s]``: runs of letters/digits/underscore, with internal
   apostrophes kept (``don't``, ``century's``), and every other non-space character as its own token
   (punctuation: ``"great!"`` -> ``great``, ``!``).

On text made only of lowercase words separated by spaces (the synthetic sets) this equals ``text.split()``, so
word positions there are also token positions.

Vocabulary (:class:`Vocab`): ids ``<pad>`` = 0, ``<unk>`` = 1, ``<sep>`` = 2, then the words. The models prepend their
own learned CLS vector, so there is no CLS id. ``Vocab.build`` keeps words with frequency >= ``min_freq``, at
most ``max_size`` of them (specials not counted), ordered by frequency (descending) and then alphabetically, so the
result is deterministic. ``to_list()`` / ``from_list()`` round-trip exactly; the trainer stores the list in the
checkpoint so that evaluation and rollout use the same ids.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import torch

from robustbench_dgsa.util.errors import UserError

PAD, UNK, SEP = "<pad>", "<unk>", "<sep>"
SPECIALS = (PAD, UNK, SEP)
PAD_ID, UNK_ID, SEP_ID = 0, 1, 2

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"</?[a-z][^<>]*>", re.IGNORECASE)
_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lowercase word/punctuation tokens of ``text`` (see the module docstring for the exact rules)."""
    text = _BR.sub(" ", text.lower())
    parts = text.split(SEP)
    out: list[str] = []
    for i, part in enumerate(parts):
        if i:
            out.append(SEP)
        out.extend(_TOKEN.findall(_TAG.sub(" ", part)))
    return out


class Vocab:
    """Token <-> id mapping with ``<pad>`` = 0, ``<unk>`` = 1, ``<sep>`` = 2."""

    pad_id = PAD_ID
    unk_id = UNK_ID
    sep_id = SEP_ID

    def __init__(self, itos: Sequence[str]):
        itos = list(itos)
        if tuple(itos[:3]) != SPECIALS:
            raise UserError(f"vocabulary must start with {list(SPECIALS)}, got {itos[:3]}")
        if len(set(itos)) != len(itos):
            dup = sorted({t for t in itos if itos.count(t) > 1})[:5]
            raise UserError(f"vocabulary has duplicate tokens: {dup}")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(itos)}

    # --- construction --------------------------------------------------------------------------------------
    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 2, max_size: int | None = 60000, *,
              tokenized: bool = False) -> "Vocab":
        """Build from training texts (or token lists if ``tokenized``).

        Keeps words seen at least ``min_freq`` times, the ``max_size`` most frequent (ties broken
        alphabetically); ``max_size`` counts real words only, so ``len(vocab) <= max_size + 3``.
        """
        counts: Counter[str] = Counter()
        for t in texts:
            counts.update(t if tokenized else tokenize(t))
        for s in SPECIALS:
            counts.pop(s, None)
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max(0, int(max_size))]
        return cls(list(SPECIALS) + words)

    @classmethod
    def from_list(cls, tokens: Sequence[str]) -> "Vocab":
        return cls(tokens)

    def to_list(self) -> list[str]:
        return list(self.itos)

    # --- mapping -------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"

    def token_ids(self, tokens: Sequence[str]) -> list[int]:
        get = self.stoi.get
        return [get(t, UNK_ID) for t in tokens]

    def lookup_tokens(self, ids: Iterable[int]) -> list[str]:
        """Tokens for ids (accepts a list, a 1-D tensor or array)."""
        n = len(self.itos)
        out = []
        for i in ids:
            i = int(i)
            out.append(self.itos[i] if 0 <= i < n else UNK)
        return out

    def encode(self, texts: Sequence[str] | str, max_len: int = 256, *, tokenized: bool = False):
        """Encode texts to ``(ids, pad_mask)``.

        ``ids``: LongTensor (N, L); ``pad_mask``: BoolTensor (N, L), True where padding. Each text is tokenised,
        mapped (unknown words -> ``<unk>``), truncated to its first ``max_len`` tokens and right-padded with
        ``<pad>``. ``L = min(max_len, longest encoded text)``, at least 1 (an empty text is all padding; the
        model's CLS token is always there to attend to). Pass token lists with ``tokenized=True``.
        """

        if isinstance(texts, str):
            texts = [texts]
        if max_len < 1:
            raise UserError(f"max_len must be >= 1, got {max_len}")
        seqs = [self.token_ids(t if tokenized else tokenize(t))[:max_len] for t in texts]
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        length = max(1, int(lengths.max(initial=1)))
        mask = np.arange(length) >= lengths[:, None]          # True where padding
        ids = np.full((len(seqs), length), PAD_ID, dtype=np.int64)
        ids[~mask] = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
        return torch.from_numpy(ids), torch.from_numpy(mask)
