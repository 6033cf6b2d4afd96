"""One run's data, prepared: the official splits loaded, the training fold subsampled and split into train and
validation (stratified, seeded), the test examples chosen, and everything turned into model inputs.

Two steps, so that the model config is settled between them from what the data says (classes, image size)
without this layer knowing the models:

    splits = load_splits(cfg.data, seed)                 # raw data + which examples go where
    prepared = encode_splits(splits, cfg_with_model_filled_in)   # tensors, vocabulary, preprocess record

* the official training fold is first subsampled (stratified, seeded) to ``max_train / (1 - val_fraction)``
  examples when ``max_train`` is set, then split ``val_fraction`` stratified into validation, so the training
  part has about ``max_train`` examples and validation keeps its proportion;
* the test split is the official one; ``max_test`` keeps N of it as ``test_subset`` says (:func:`select_test`).
* a dataset the registry marks ``streams`` (ImageNet) is never held in memory: its splits are file lists
  (:class:`.imagenet.ImageFiles`) and the prepared data carries torch datasets that decode in DataLoader workers
  (:class:`StreamSplits`) instead of input tensors.

Also here, because every consumer of a checkpoint applies it: the ``preprocess`` record of a checkpoint
(:func:`preprocess_record`) and its application (:func:`prepare_images`, :func:`prepare_texts`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from robustbench_dgsa.config import DataConfig, RunConfig, check_value
from robustbench_dgsa.util.errors import UserError
from .registry import get_info, load_dataset
from .splits import stratified_split, stratified_subsample
from .vision import to_model_input
from .vocab import Vocab


# --- the preprocess record and its application ---------------------------------------------------------------

def preprocess_record(data: Any, model_config: Any, vocab: Any = None) -> dict[str, Any]:
    """The ``preprocess`` entry of a checkpoint's meta, from the training data and the model config."""
    if model_config.modality == "image":
        return {"modality": "image", "mean": [float(v) for v in np.atleast_1d(data.mean)],
                "std": [float(v) for v in np.atleast_1d(data.std)],
                "image_size": int(model_config.image_size), "in_chans": int(model_config.in_chans)}
    return {"modality": "text", "vocab": list(vocab.to_list()), "max_len": int(model_config.max_len)}


def prepare_images(x_uint8: np.ndarray, preprocess: dict[str, Any]) -> torch.Tensor:
    """uint8 (N,H,W[,C]) -> normalised float (N,C,H,W), resized / channel-replicated as the model expects."""
    return to_model_input(np.asarray(x_uint8), preprocess["mean"], preprocess["std"],
                          image_size=preprocess.get("image_size"), in_chans=int(preprocess.get("in_chans", 3)),
                          crop_pct=preprocess.get("crop_pct"),
                          interpolation=preprocess.get("interpolation", "bilinear"))


_VOCAB_CACHE: dict[int, Any] = {}


def vocab_from_preprocess(preprocess: dict[str, Any]):
    key = id(preprocess["vocab"])
    cached = _VOCAB_CACHE.get(key)
    if cached is None or cached[0] is not preprocess["vocab"]:
        cached = (preprocess["vocab"], Vocab.from_list(preprocess["vocab"]))
        _VOCAB_CACHE.clear()
        _VOCAB_CACHE[key] = cached
    return cached[1]


def prepare_texts(texts: Sequence[str], preprocess: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Texts -> (ids LongTensor (N,L), key_padding_mask BoolTensor (N,L), True = padding)."""
    vocab = vocab_from_preprocess(preprocess)
    ids, mask = vocab.encode(list(texts), int(preprocess["max_len"]))
    return torch.as_tensor(ids, dtype=torch.long), torch.as_tensor(mask, dtype=torch.bool)


def select_test(y: np.ndarray, max_test: int | None, subset: str = "first") -> np.ndarray:
    """Indices of the test examples to use: all, or ``max_test`` of them chosen as ``subset`` says.

    * ``"first"`` (default): the first N in official order, as RobustBench's ``n_examples`` takes them, even
      when they miss a class (:func:`subset_note` says so).
    * ``"stratified"``: a class-stratified subsample with a fixed seed (0), returned in official order.
    * ``"auto"``: the first N, or the stratified subsample when the first N miss a class (for test sets stored
      class by class, e.g. IMDB, 20 Newsgroups; the text presets ask for it).

    The choice depends only on the labels, N and ``subset``, so every model and seed sees the same examples;
    :func:`subset_label` names it for run records and reports.
    """
    subset = check_value("data", "test_subset", subset, text=False)  # the config's rules for both
    max_test = check_value("data", "max_test", max_test, text=False)
    y = np.asarray(y)
    n = len(y)
    if max_test is None or max_test >= n:
        return np.arange(n)
    first = np.arange(max_test)
    if subset == "first" or (subset == "auto" and len(np.unique(y[first])) == len(np.unique(y))):
        return first
    return np.sort(np.asarray(stratified_subsample(y, max_test, 0), dtype=np.int64))



# --- one run's splits ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Splits:
    """The official splits of one run's dataset and which examples go where (indices into them, sorted)."""
    data: DataConfig
    train_full: Any                    # ImageData or TextData: the official training fold
    test_full: Any                     # the official test split
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray

    @property
    def classes(self) -> list[str]:
        return list(self.train_full.classes)

    @property
    def image_size(self) -> int | None:
        """The images' height (None for text); a streamed set's standard crop size."""
        if getattr(self.train_full, "streaming", False):
            return int(self.train_full.image_size)
        x = getattr(self.train_full, "x", None)
        return None if x is None else int(np.asarray(x).shape[1])


def load_splits(d: DataConfig, seed: int) -> Splits:
    """Load ``d.dataset``'s official train and test splits and choose the train / validation / test examples."""
    stream = {"stream": True} if get_info(d.dataset).streams else {}
    train_full = load_dataset(d.dataset, "train", data_root=d.data_root, download=d.download, **stream)
    test_full = load_dataset(d.dataset, "test", data_root=d.data_root, download=d.download, **stream)
    y_all = np.asarray(train_full.y, dtype=np.int64)
    pool = np.arange(len(y_all))
    if d.max_train is not None:
        want = int(math.ceil(d.max_train / max(1e-9, 1.0 - d.val_fraction)))
        if want < len(y_all):
            pool = np.sort(np.asarray(stratified_subsample(y_all, want, seed), dtype=np.int64))
    if d.val_fraction > 0:
        tr_rel, va_rel = stratified_split(y_all[pool], d.val_fraction, seed)
        tr_idx, va_idx = pool[np.asarray(tr_rel)], pool[np.asarray(va_rel)]
    else:
        tr_idx, va_idx = pool, pool[:0]
    te_idx = select_test(test_full.y, d.max_test, d.test_subset)
    if len(tr_idx) == 0:
        raise UserError(f"dataset {d.dataset!r}: no training examples left after the split")
    return Splits(d, train_full, test_full, tr_idx, va_idx, te_idx)


@dataclass(frozen=True)
class StreamSplits:
    """A streamed dataset's splits: torch datasets (item: an index into the official split, or ``(index, seed)``
    for a seeded random transform; value: (normalised image, label)) and the chosen indices of each split."""
    train: Any                         # the training transform (or the evaluation one without augmentation)
    val: Any                           # the training fold with the evaluation transform
    test: Any
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray


@dataclass
class PreparedData:
    cfg: RunConfig                     # the run config with num_classes / image_size / vocab_size filled in
    x_train: torch.Tensor | None       # None for a streamed dataset (see ``stream``)
    m_train: torch.Tensor | None       # text key-padding masks (True = pad); None for images
    y_train: torch.Tensor
    x_val: torch.Tensor | None
    m_val: torch.Tensor | None
    y_val: torch.Tensor
    x_test: torch.Tensor | None
    m_test: torch.Tensor | None
    y_test: torch.Tensor
    classes: list[str]
    preprocess: dict[str, Any]
    source: str
    summary: dict[str, Any]
    stream: StreamSplits | None = None  # a streamed dataset's torch datasets instead of x_* tensors


def encode_splits(s: Splits, cfg: RunConfig) -> PreparedData:
    """Model inputs of the chosen examples for ``cfg.model`` (whose classes and image size are settled); text
    builds its vocabulary on the training part, and the returned ``cfg`` (a copy) records its size."""
    stream = None
    if getattr(s.train_full, "streaming", False):
        preprocess = preprocess_record(s.train_full, cfg.model)
        stream = _stream_splits(s, int(cfg.model.image_size), augment=bool(s.data.augment))
        x_tr = x_va = x_te = m_tr = m_va = m_te = None
        content_hash = _hash_texts(list(s.train_full.files), list(s.test_full.files), [str(s.train_full.y.tolist()),
                                                                                      str(s.test_full.y.tolist())])
    elif cfg.model.modality == "image":
        preprocess = preprocess_record(s.train_full, cfg.model)
        x_tr, x_va, x_te = (_chunked(prepare_images, full.x, idx, preprocess) for full, idx in
                            ((s.train_full, s.train_idx), (s.train_full, s.val_idx), (s.test_full, s.test_idx)))
        m_tr = m_va = m_te = None
        content_hash = _hash_arrays(np.asarray(s.train_full.x), np.asarray(s.test_full.x))
    else:
        texts, test_texts = list(s.train_full.texts), list(s.test_full.texts)
        vocab = Vocab.build([texts[i] for i in s.train_idx], min_freq=s.data.min_freq, max_size=s.data.max_vocab)
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=int(len(vocab))))
        preprocess = preprocess_record(s.train_full, cfg.model, vocab)
        parts = ((texts, s.train_idx), (texts, s.val_idx), (test_texts, s.test_idx))
        (x_tr, m_tr), (x_va, m_va), (x_te, m_te) = (prepare_texts([t[i] for i in idx], preprocess) for t, idx in parts)
        content_hash = _hash_texts(texts, test_texts)
    y_all = np.asarray(s.train_full.y, dtype=np.int64)
    y_te_all = np.asarray(s.test_full.y, dtype=np.int64)
    source = str(getattr(s.train_full, "source", "") or "")
    summary = {"dataset": s.data.dataset, "source": source, "n_train": int(len(s.train_idx)),
               "n_val": int(len(s.val_idx)), "n_test": int(len(s.test_idx)), "n_train_official": int(len(y_all)),
               "n_test_official": int(len(y_te_all)), "classes": s.classes, "content_sha256": content_hash,
               "split_sha256": _hash_arrays(s.train_idx, s.val_idx, s.test_idx), "data_root": s.data.data_root}
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.long)  # noqa: E731
    return PreparedData(cfg, x_tr, m_tr, t(y_all[s.train_idx]), x_va, m_va, t(y_all[s.val_idx]), x_te, m_te,
                        t(y_te_all[s.test_idx]), s.classes, preprocess, source, summary, stream)


def _stream_splits(s: Splits, image_size: int, *, augment: bool) -> StreamSplits:
    """The torch datasets of a streamed dataset at the model's image size (training transform with ``augment``)."""
    return StreamSplits(s.train_full.dataset(image_size, train=augment),
                        s.train_full.dataset(image_size, train=False), s.test_full.dataset(image_size, train=False),
                        s.train_idx, s.val_idx, s.test_idx)


def _chunked(fn, x: Any, idx: np.ndarray, preprocess: dict[str, Any], chunk: int = 8192) -> torch.Tensor:
    """fn over x[idx] in chunks (bounded peak memory while converting uint8 -> float)."""
    parts = [fn(np.asarray(x[idx[s:s + chunk]]), preprocess) for s in range(0, len(idx), chunk)]
    if parts:
        return torch.cat(parts)
    return fn(np.asarray(x[idx[:1]]), preprocess)[:0]


def _hash_arrays(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _hash_texts(*lists: list[str]) -> str:
    h = hashlib.sha256()
    for texts in lists:
        for s in texts:
            h.update(s.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        h.update(b"\1")
    return h.hexdigest()
