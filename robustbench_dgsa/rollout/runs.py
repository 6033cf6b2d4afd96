"""Attention rollout applied to models on data: heatmaps, salient mass, drift, stored rollout sets.

* :func:`image_rollout` / :func:`text_rollout` run a model with ``return_attention=True`` (explicit maps,
  eval mode, no grad, float32 — never bf16, whose rounding distorts products over layers) and apply
  :func:`robustbench_dgsa.rollout.core.rollout` with a :class:`~robustbench_dgsa.rollout.core.RolloutSpec`
  (``mode=None`` = the model's default: MHSA → positive (== classic), DiffAttn/DGSA → signed).
* :func:`salient_mass`: per image, the fraction of rollout mass inside the salient region.
  **Definition** (recorded as ``mass=positive`` in the store's ``source``): the heatmap's positive part
  h⁺ = max(h, 0) is the mass, ``Σ h⁺·mask / Σ h⁺`` (NaN where Σ h⁺ = 0). For non-negative modes this is the
  plain mass fraction; for signed maps it is where the excitatory relevance goes (inhibition is not mass).
  ``how="abs"`` uses |h| instead (``mass=abs``). The chance level is the salient area fraction (the
  mass fraction of a uniform heatmap), recorded beside it as ``rollout_mass_chance``.
* :func:`rollout_drift`: per image, the Pearson correlation between the clean and the corrupted rollout
  (over the patch-grid CLS relevance, before upsampling); 1 = the map did not move, so **higher = more
  stable**. NaN for a constant map. Images only: text noise inserts and deletes tokens, so clean and noisy
  token maps do not align position by position.
* :func:`save_rollout_set` / :func:`load_rollout_sets`: the stable on-disk interface the report draws
  Figures 2 and 3 from (never re-running models): ``<store>/rollouts/<run_id>__<model>.npz``, written
  atomically, numpy-only content (``allow_pickle=False``), meta as JSON inside (``meta_json``).
* :func:`rollout_metrics_run`: salient mass on a synthetic set (condition "clean") and drift per
  corruption × severity, written as ``kind="rollout"`` rows, plus a rollout set for the figures.

Rollout-set file format (version 1), arrays in the ``.npz``:

=============  ==========================================================================================
``meta_json``  0-d unicode: JSON with ``format_version``, ``kind`` ("image"|"text"), ``run_id``, ``model``,
               ``dataset``, ``seed``, ``spec`` (mode, head_fusion, discard_ratio, tag, signed), ``classes``,
               ``data_key`` (sha256 of the images / texts: sets with equal keys show the same inputs),
               plus caller fields (checkpoint, config_hash, indices, ...)
``labels``     int64 (K,);  ``preds`` int64 (K,) (−1 = unknown); ``probs`` float32 (K,) max softmax prob
image kind:    ``images`` uint8 (K,H,W,C); ``heatmaps`` float32 (K,H,W); optional ``salient`` bool (K,H,W)
text kind:     ``tokens`` unicode (T,) all texts' tokens concatenated; ``scores`` float32 (T,);
               ``offsets`` int64 (K+1,) (text i = [offsets[i], offsets[i+1])); optional ``salient`` bool (T,)
=============  ==========================================================================================
"""
from __future__ import annotations

import hashlib
import io
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch
from corruptions.api import corrupt
from corruptions.errors import CorruptionError
from corruptions.registry import ALL as ALL_CORRUPTIONS, BENCHMARK

from robustbench_dgsa.data import load_dataset, readers
from robustbench_dgsa.data.vocab import UNK_ID, tokenize
from robustbench_dgsa.engine.predict import (forward_batches, prepare_images, prepare_texts, preprocess_from_meta,
                                             resolve_device, vocab_from_preprocess)
from robustbench_dgsa.models.checkpoint import load_checkpoint
from robustbench_dgsa.store import RunWriter, new_run_id, rollout_set_path, rollouts_dir
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.jsonio import to_jsonable
from robustbench_dgsa.rollout.capture import as_rollout_model, default_preprocess
from robustbench_dgsa.rollout.core import RolloutSpec, cls_relevance, relevance_grid, rollout, token_relevance, upsample

FORMAT_VERSION = 1
MAX_SIDE = 1024  # images (and so heatmaps) are bounded to this many pixels on their longer side
MASS_DEFINITIONS = ("positive", "abs")
_MAP_BUDGET_BYTES = 256 * 2 ** 20  # attention maps held at once per batch (all layers, all map kinds)


# --- model helpers -----------------------------------------------------------------------------------

def model_attention(model: torch.nn.Module) -> str:
    return getattr(getattr(model, "config", None), "attention", "mhsa")


def resolve_spec(model: torch.nn.Module, mode: str | None = None, head_fusion: str = "mean",
                 discard_ratio: float = 0.0) -> RolloutSpec:
    """The rollout spec for ``model`` (``mode=None`` = its default); bad values raise :class:`UserError`."""
    try:
        return RolloutSpec.resolve(model_attention(model), mode, head_fusion, discard_ratio)
    except ValueError as e:
        raise UserError(str(e)) from None


def _device(model: torch.nn.Module, device: Any) -> torch.device:
    if device is None:
        try:
            return next(model.parameters()).device
        except StopIteration:
            return torch.device("cpu")
    return resolve_device(device)


def _batch_size(model: torch.nn.Module, n_tokens: int) -> int:
    cfg = model.config
    from robustbench_dgsa.models.attention_registry import get_attention
    kinds = 3 if get_attention(cfg.attention).branch_maps else 1        # "attn" (+ "a_pos", "a_neg")
    per_example = cfg.depth * cfg.heads * n_tokens * n_tokens * 4 * kinds
    return int(max(1, min(256, _MAP_BUDGET_BYTES // max(per_example, 1))))


@torch.no_grad()
def _rollout_batches(model, x: torch.Tensor, mask: torch.Tensor | None, spec: RolloutSpec, device: torch.device,
                     batch_size: int | None):
    """Yield (joint (b,N,N) float32 cpu, logits (b,C) float32 cpu) over batches, model in eval mode (fp32, the
    padding kept: token positions are the map's rows)."""
    model.to(device)
    n_tokens = (x.shape[1] + 1) if x.dim() == 2 else None
    if n_tokens is None:
        cfg = model.config
        n_tokens = (cfg.image_size // cfg.patch_size) ** 2 + 1
    bs = batch_size or _batch_size(model, n_tokens)
    for logits, maps in forward_batches(model, x, mask, batch_size=bs, device=device, amp="off", trim=False,
                                        return_attention=True):
        maps = [{k: (v.float() if isinstance(v, torch.Tensor) else v) for k, v in layer.items()}
                for layer in maps]
        joint = rollout(maps, spec=spec)
        yield joint.float().cpu(), logits.float().cpu()


# --- images ------------------------------------------------------------------------------------------

@dataclass
class ImageRollout:
    """Everything one image-rollout pass gives. ``relevance``: (K, g, g) patch-grid CLS relevance."""
    heatmaps: np.ndarray      # (K, H, W) float32, upsampled to the input images' size
    relevance: np.ndarray     # (K, g, g) float32
    preds: np.ndarray         # (K,) int64
    probs: np.ndarray         # (K, C) float32 softmax
    spec: RolloutSpec


def _prepare_images(images: np.ndarray, preprocess: dict[str, Any], model) -> torch.Tensor:
    """Channels fixed by :mod:`robustbench_dgsa.data.readers`' policy (alpha composited over white; RGB ->
    luma for one-channel models); resizing (never cropping) and grayscale replication are left to
    :func:`robustbench_dgsa.engine.predict.prepare_images`, the same path as training."""
    chans = int(preprocess.get("in_chans") or model.config.in_chans)
    # no centre crop (timm's crop_pct): the heatmap must cover the whole image it is drawn over
    pre = {**preprocess, "image_size": int(preprocess.get("image_size") or model.config.image_size),
           "in_chans": chans, "crop_pct": None}
    imgs = np.asarray(images)
    if imgs.ndim == 3:  # (K,H,W) grayscale stack
        imgs = imgs[..., None]
    if imgs.shape[-1] in (2, 4):
        imgs = readers.flatten_alpha(imgs)
    if chans == 1 and imgs.shape[-1] == 3:
        imgs = readers.rgb_to_gray(imgs)
    return prepare_images(imgs, pre)


def bound_images(images: np.ndarray, max_side: int = MAX_SIDE) -> np.ndarray:
    """The stack with each image's longer side reduced to ``max_side`` (antialiased bilinear, as
    :func:`robustbench_dgsa.data.readers.downscale`); unchanged when already small enough."""
    imgs = np.asarray(images)
    if max(imgs.shape[1:3]) <= max_side:
        return imgs
    squeeze = imgs.ndim == 4 and imgs.shape[-1] == 1
    flat = imgs[..., 0] if squeeze else imgs
    out = np.stack([readers.downscale(np.ascontiguousarray(im), max_side) for im in flat])
    return out[..., None] if squeeze else out


def image_rollout_full(model, images_uint8: np.ndarray, preprocess: dict[str, Any], *, mode: str | None = None,
                       head_fusion: str = "mean", discard_ratio: float = 0.0, device: Any = None,
                       batch_size: int | None = None, spec: RolloutSpec | None = None) -> ImageRollout:
    """Rollout of a vision model on uint8 images (K,H,W,C) (any size: resized to the model's input).

    Heatmaps are upsampled (bilinear) back to the images' H×W, so they overlay the images as given. Images
    with a side over :data:`MAX_SIDE` are first downscaled to it (:func:`bound_images`), so a huge image costs
    neither minutes nor gigabytes and its heatmaps stay bounded (then they overlay the downscaled images;
    ``dgsa-bench rollout`` reads images at that bound to begin with).
    A timm ``VisionTransformer`` works too (its attention maps are captured, see :mod:`.capture`).
    """
    model = as_rollout_model(model)
    if getattr(model.config, "modality", "image") != "image":
        raise UserError(f"{model.config.name} is a text model; image rollout needs a vision model")
    spec = spec or resolve_spec(model, mode, head_fusion, discard_ratio)
    imgs = np.asarray(images_uint8)
    if imgs.ndim not in (3, 4) or len(imgs) == 0:
        raise UserError(f"expected a non-empty image stack (K,H,W[,C]), got shape {imgs.shape}")
    if imgs.ndim == 4 and imgs.shape[-1] in (2, 4):
        imgs = readers.flatten_alpha(imgs)
    imgs = bound_images(imgs)
    x = _prepare_images(imgs, preprocess, model)
    H, W = imgs.shape[1:3]
    grids, logits = [], []
    for joint, lg in _rollout_batches(model, x, None, spec, _device(model, device), batch_size):
        grids.append(relevance_grid(cls_relevance(joint)))
        logits.append(lg)
    grid = torch.cat(grids)
    lg = torch.cat(logits)
    heat = upsample(grid, (H, W))
    probs = torch.softmax(lg, dim=1)
    return ImageRollout(heatmaps=heat.numpy().astype(np.float32), relevance=grid.numpy().astype(np.float32),
                        preds=lg.argmax(1).numpy().astype(np.int64), probs=probs.numpy().astype(np.float32),
                        spec=spec)


def image_rollout(model, images_uint8: np.ndarray, preprocess: dict[str, Any], *, mode: str | None = None,
                  head_fusion: str = "mean", discard_ratio: float = 0.0, device: Any = None,
                  batch_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(heatmaps (K,H,W) float32, preds (K,) int64); see :func:`image_rollout_full` for the rest."""
    r = image_rollout_full(model, images_uint8, preprocess, mode=mode, head_fusion=head_fusion,
                           discard_ratio=discard_ratio, device=device, batch_size=batch_size)
    return r.heatmaps, r.preds


def rollout_heatmap(model: Any, image: Any, *, mode: str | None = None, head_fusion: str = "mean",
                    discard_ratio: float = 0.0, timm_norm: bool = False, preprocess: dict[str, Any] | None = None,
                    device: Any = None) -> np.ndarray:
    """One image's attention-rollout heatmap, (H, W) float32 at the image's size (``rb.rollout``).

    ``model``: one of the suite's models, a checkpoint path, or a timm ``VisionTransformer`` (maps captured from
    its attention modules). ``image``: a uint8 (H, W, 3) / (H, W) array, a PIL image or an image file (read by the
    one reader, at most :data:`MAX_SIDE` px on the longer side). ``mode``: signed / positive / a_pos / a_neg / raw
    (default per model, as the CLI). A timm ViT gets raw [0, 1] input resized to its input size unless
    ``timm_norm``; a checkpoint brings its own preprocessing; a bare suite model needs ``preprocess``.
    """
    if isinstance(model, (str, Path)):
        model, _, pre = _load(model, preprocess, None)
    else:
        model = as_rollout_model(model)
        pre = preprocess or default_preprocess(model, timm_norm)
        if pre is None:
            raise UserError("rollout of a bare suite model needs its preprocess record (mean/std); pass the "
                            "checkpoint path instead, or preprocess=")
    arr = _image_array(image)
    return image_rollout_full(model, arr[None], pre, mode=mode, head_fusion=head_fusion,
                              discard_ratio=discard_ratio, device=device).heatmaps[0]


def _image_array(image: Any) -> np.ndarray:
    if isinstance(image, (str, Path)):
        return readers.read_image(image, max_side=MAX_SIDE)
    if hasattr(image, "mode") and hasattr(image, "size") and not isinstance(image, np.ndarray):  # a PIL image
        return readers.pil_to_array(image)
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3):
        raise UserError(f"image must be a uint8 (H, W[, C]) array, a PIL image or a file, got {arr.dtype} "
                        f"{arr.shape}")
    return arr


# --- text --------------------------------------------------------------------------------------------

@dataclass
class TextRollout:
    tokens: list[list[str]]   # per text: its tokens as the model saw them (truncated to max_len)
    scores: list[np.ndarray]  # per text: float32 CLS relevance per token
    preds: np.ndarray
    probs: np.ndarray
    spec: RolloutSpec
    unknown: list[np.ndarray] = field(default_factory=list)  # per text: bool, token mapped to <unk>


def text_rollout_full(model, texts: Sequence[str], preprocess: dict[str, Any], *, mode: str | None = None,
                      head_fusion: str = "mean", discard_ratio: float = 0.0, device: Any = None,
                      batch_size: int | None = None, spec: RolloutSpec | None = None) -> TextRollout:
    """Rollout of a text model: per text the tokens (``data.vocab.tokenize``, truncated to max_len, so the
    i-th token is the i-th id the model saw) and the CLS relevance of each."""
    if getattr(model.config, "modality", "text") != "text":
        raise UserError(f"{model.config.name} is a vision model; text rollout needs a text model")
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise UserError("text rollout needs at least one text")
    spec = spec or resolve_spec(model, mode, head_fusion, discard_ratio)
    max_len = int(preprocess["max_len"])
    ids, mask = prepare_texts(texts, preprocess)
    vocab = vocab_from_preprocess(preprocess)
    scores: list[np.ndarray] = []
    logits = []
    start = 0
    for joint, lg in _rollout_batches(model, ids, mask, spec, _device(model, device), batch_size):
        b = joint.shape[0]
        scores.extend(s.astype(np.float32) for s in token_relevance(joint, mask[start:start + b]))
        logits.append(lg)
        start += b
    lg = torch.cat(logits)
    tokens = [tokenize(t)[:max_len] for t in texts]
    unknown = [np.asarray([i == UNK_ID for i in vocab.token_ids(tok)], dtype=bool) for tok in tokens]
    for tok, sc in zip(tokens, scores):
        if len(tok) != len(sc):  # would mean the tokeniser and the encoder disagree
            raise RuntimeError(f"token/score length mismatch ({len(tok)} vs {len(sc)})")
    return TextRollout(tokens=tokens, scores=scores, preds=lg.argmax(1).numpy().astype(np.int64),
                       probs=torch.softmax(lg, 1).numpy().astype(np.float32), spec=spec, unknown=unknown)


def text_rollout(model, texts: Sequence[str], preprocess: dict[str, Any], *, mode: str | None = None,
                 head_fusion: str = "mean", discard_ratio: float = 0.0, device: Any = None,
                 batch_size: int | None = None) -> tuple[list[list[str]], list[np.ndarray]]:
    """(tokens per text, scores per token); see :func:`text_rollout_full` for predictions and the spec."""
    r = text_rollout_full(model, texts, preprocess, mode=mode, head_fusion=head_fusion,
                          discard_ratio=discard_ratio, device=device, batch_size=batch_size)
    return r.tokens, r.scores


# --- numbers -----------------------------------------------------------------------------------------

def salient_mass(heatmaps: Any, masks: Any, how: str = "positive") -> np.ndarray:
    """Per map, the fraction of rollout mass inside the salient region (see the module docstring).

    ``heatmaps`` (K, ...) and boolean ``masks`` of the same shape (images: (K,H,W); or a list of 1-D token
    score arrays with 1-D token masks). ``how``: "positive" (mass = max(h, 0)) or "abs" (mass = |h|).
    NaN where a map has no mass.
    """
    if how not in MASS_DEFINITIONS:
        raise ValueError(f"unknown mass definition {how!r} (valid: {', '.join(MASS_DEFINITIONS)})")
    out = []
    for h, m in zip(heatmaps, masks):
        h = np.asarray(h, dtype=np.float64)
        m = np.asarray(m, dtype=bool)
        if h.shape != m.shape:
            raise ValueError(f"heatmap shape {h.shape} != mask shape {m.shape}")
        w = np.maximum(h, 0.0) if how == "positive" else np.abs(h)
        tot = w.sum()
        out.append(float(w[m].sum() / tot) if tot > 0 else float("nan"))
    return np.asarray(out, dtype=np.float64)


def top_fraction_mass(heatmap: Any, fraction: float = 0.1) -> float:
    """Share of the positive mass held by the top ``fraction`` of entries (a concentration number)."""
    w = np.sort(np.maximum(np.asarray(heatmap, dtype=np.float64).ravel(), 0.0))[::-1]
    tot = w.sum()
    if tot <= 0:
        return float("nan")
    k = max(1, int(round(fraction * w.size)))
    return float(w[:k].sum() / tot)


def heatmap_correlation(a: Any, b: Any) -> np.ndarray:
    """Per-map Pearson correlation of two stacks (K, ...) of maps; NaN where either map is constant."""
    a = np.asarray(a, dtype=np.float64).reshape(len(a), -1)
    b = np.asarray(b, dtype=np.float64).reshape(len(b), -1)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    a = a - a.mean(1, keepdims=True)
    b = b - b.mean(1, keepdims=True)
    den = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * b).sum(1) / den
    r[den <= 1e-300] = np.nan
    return np.clip(r, -1.0, 1.0)


def _corrupt_fn(corruption: str | Callable[[np.ndarray], np.ndarray], severity: int, seed: int,
                indices: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    if callable(corruption):
        return corruption
    def fn(x: np.ndarray) -> np.ndarray:
        return corrupt(x, corruption, severity, seed=seed, indices=indices)
    return fn


def rollout_drift(model, images: np.ndarray, corruption: str | Callable[[np.ndarray], np.ndarray],
                  severity: int, preprocess: dict[str, Any], *, mode: str | None = None,
                  head_fusion: str = "mean", discard_ratio: float = 0.0, seed: int = 0,
                  indices: np.ndarray | None = None, clean: ImageRollout | None = None, device: Any = None,
                  batch_size: int | None = None) -> np.ndarray:
    """Per image, Pearson r between the clean and corrupted rollouts (patch grid). 1 = unchanged map.

    ``corruption``: a CIFAR-C name (``corruptions.api.corrupt(x, name, severity, seed=seed, indices=indices)``;
    ``indices`` = the images' dataset indices, so the random draws match the regenerated sets) or a callable
    uint8 → uint8. Pass ``clean`` (an :class:`ImageRollout` of the same images and spec) to reuse it.
    """
    spec = clean.spec if clean is not None else resolve_spec(model, mode, head_fusion, discard_ratio)
    if clean is None:
        clean = image_rollout_full(model, images, preprocess, spec=spec, device=device, batch_size=batch_size)
    corrupted = _corrupt_fn(corruption, severity, seed, indices)(np.asarray(images))
    cor = image_rollout_full(model, corrupted, preprocess, spec=spec, device=device, batch_size=batch_size)
    return heatmap_correlation(clean.relevance, cor.relevance)


# --- stored rollout sets -----------------------------------------------------------------------------

@dataclass
class RolloutSet:
    """One stored rollout set (see the module docstring for the file format)."""
    path: Path
    kind: str                      # "image" | "text"
    run_id: str
    model: str
    dataset: str
    seed: int
    spec: RolloutSpec
    labels: np.ndarray
    preds: np.ndarray
    probs: np.ndarray
    meta: dict[str, Any]
    images: np.ndarray | None = None       # (K,H,W,C) uint8
    heatmaps: np.ndarray | None = None     # (K,H,W) float32
    tokens: list[list[str]] | None = None
    scores: list[np.ndarray] | None = None
    salient: Any = None                    # images: (K,H,W) bool; text: list of bool arrays

    @property
    def mode(self) -> str:
        return self.spec.mode

    @property
    def signed(self) -> bool:
        return self.spec.signed

    @property
    def data_key(self) -> str:
        return self.meta.get("data_key", "")

    @property
    def classes(self) -> list[str] | None:
        return self.meta.get("classes")

    def __len__(self) -> int:
        return len(self.labels)


def data_key(images: np.ndarray | None = None, texts: Sequence[Any] | None = None) -> str:
    """sha256 (first 16 hex) identifying the inputs of a rollout set (equal keys: same images / texts)."""
    h = hashlib.sha256()
    if images is not None:
        a = np.ascontiguousarray(np.asarray(images, dtype=np.uint8))
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    if texts is not None:
        for t in texts:
            h.update((json.dumps(t, ensure_ascii=False) + "\n").encode())
    return h.hexdigest()[:16]


def save_rollout_set(store_dir: str | Path, run_id: str, *, kind: str, model: str, dataset: str, seed: int,
                     mode: RolloutSpec | str, labels: Sequence[int], preds: Sequence[int] | None = None,
                     images: np.ndarray | None = None, heatmaps: np.ndarray | None = None,
                     tokens: Sequence[Sequence[str]] | None = None, scores: Sequence[Sequence[float]] | None = None,
                     probs: Sequence[float] | None = None, salient: Any = None,
                     meta: dict[str, Any] | None = None) -> Path:
    """Write ``<store_dir>/rollouts/<run_id>__<model>.npz`` atomically; returns the path.

    ``mode``: the :class:`RolloutSpec` used (or its tag). Image sets need ``images`` and ``heatmaps``;
    text sets ``tokens`` and ``scores`` (one list per text). ``probs``: the predicted class's probability.
    """
    spec = mode if isinstance(mode, RolloutSpec) else RolloutSpec.from_tag(mode) if "|" in str(mode) \
        else RolloutSpec(str(mode))
    labels = np.asarray(labels, dtype=np.int64)
    K = len(labels)
    preds_a = np.full(K, -1, dtype=np.int64) if preds is None else np.asarray(preds, dtype=np.int64)
    probs_a = np.full(K, np.nan, dtype=np.float32) if probs is None else np.asarray(probs, dtype=np.float32)
    if probs_a.ndim == 2:  # full softmax given: keep the predicted class's probability
        probs_a = probs_a.max(1)
    if len(preds_a) != K or len(probs_a) != K:
        raise ValueError("labels, preds and probs must have the same length")
    arrays: dict[str, np.ndarray] = {"labels": labels, "preds": preds_a, "probs": probs_a}
    info: dict[str, Any] = dict(meta or {})
    if kind == "image":
        if images is None or heatmaps is None:
            raise ValueError("an image rollout set needs images and heatmaps")
        imgs = np.asarray(images)
        if imgs.dtype != np.uint8:
            raise ValueError("images must be uint8")
        if imgs.ndim == 3:
            imgs = imgs[..., None]
        hm = np.asarray(heatmaps, dtype=np.float32)
        if len(imgs) != K or len(hm) != K:
            raise ValueError(f"{len(imgs)} images / {len(hm)} heatmaps for {K} labels")
        arrays["images"] = imgs
        arrays["heatmaps"] = hm
        if salient is not None:
            arrays["salient"] = np.asarray(salient, dtype=bool)
        info.setdefault("data_key", data_key(images=imgs))
    elif kind == "text":
        if tokens is None or scores is None:
            raise ValueError("a text rollout set needs tokens and scores")
        toks = [[str(t) for t in tt] for tt in tokens]
        scs = [np.asarray(s, dtype=np.float32) for s in scores]
        if len(toks) != K or len(scs) != K:
            raise ValueError(f"{len(toks)} token lists / {len(scs)} score lists for {K} labels")
        for t, s in zip(toks, scs):
            if len(t) != len(s):
                raise ValueError("each text needs one score per token")
        offsets = np.zeros(K + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(t) for t in toks])
        flat = [t for tt in toks for t in tt]
        arrays["tokens"] = np.asarray(flat, dtype=str) if flat else np.zeros(0, dtype="<U1")
        arrays["scores"] = np.concatenate(scs) if scs else np.zeros(0, dtype=np.float32)
        arrays["offsets"] = offsets
        if salient is not None:
            sal = [np.asarray(s, dtype=bool) for s in salient]
            arrays["salient"] = np.concatenate(sal) if sal else np.zeros(0, dtype=bool)
        info.setdefault("data_key", data_key(texts=toks))
    else:
        raise ValueError(f"kind must be 'image' or 'text', got {kind!r}")
    info.update({"format_version": FORMAT_VERSION, "kind": kind, "run_id": run_id, "model": model,
                 "dataset": dataset, "seed": int(seed), "spec": spec.to_dict()})
    arrays["meta_json"] = np.asarray(json.dumps(to_jsonable(info, fallback=str), sort_keys=True))
    path = rollout_set_path(store_dir, run_id, model)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic.write_bytes(path, buf.getvalue())
    return path


def read_rollout_set(path: str | Path) -> RolloutSet:
    """Read one rollout-set file; :class:`UserError` when it is not one."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(str(data["meta_json"]))
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        raise UserError(f"not a rollout set: {p} ({type(e).__name__}: {e})") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise UserError(f"rollout set {p} has format version {meta.get('format_version')!r}; "
                        f"this version reads {FORMAT_VERSION}")
    sd = meta["spec"]
    spec = RolloutSpec(sd["mode"], sd["head_fusion"], sd["discard_ratio"])
    rs = RolloutSet(path=p, kind=meta["kind"], run_id=meta["run_id"], model=meta["model"],
                    dataset=meta["dataset"], seed=int(meta["seed"]), spec=spec, labels=data["labels"],
                    preds=data["preds"], probs=data["probs"], meta=meta)
    if rs.kind == "image":
        rs.images, rs.heatmaps = data["images"], data["heatmaps"]
        rs.salient = data.get("salient")
    else:
        off = data["offsets"]
        flat_t = data["tokens"].tolist()
        flat_s = data["scores"]
        rs.tokens = [flat_t[off[i]:off[i + 1]] for i in range(len(off) - 1)]
        rs.scores = [flat_s[off[i]:off[i + 1]] for i in range(len(off) - 1)]
        if "salient" in data:
            sal = data["salient"]
            rs.salient = [sal[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    return rs


def load_rollout_sets(store_dir: str | Path, *, kind: str | None = None, dataset: str | None = None,
                      models: Iterable[str] | None = None) -> list[RolloutSet]:
    """All rollout sets under ``<store_dir>/rollouts`` (sorted by file name), optionally filtered.

    Unreadable files are skipped with a warning (a store may hold a torn file from a killed run only as a
    temporary file, which is not matched; anything else unreadable is reported, not fatal).
    """
    folder = rollouts_dir(store_dir)
    out: list[RolloutSet] = []
    wanted = set(models) if models is not None else None
    for p in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
        try:
            rs = read_rollout_set(p)
        except UserError as e:
            warnings.warn(str(e))
            continue
        if kind and rs.kind != kind:
            continue
        if dataset and rs.dataset != dataset:
            continue
        if wanted is not None and rs.model not in wanted:
            continue
        out.append(rs)
    return out


# --- metrics run -------------------------------------------------------------------------------------

def _load(checkpoint_or_model: Any, preprocess: dict[str, Any] | None, meta: dict[str, Any] | None):
    if isinstance(checkpoint_or_model, torch.nn.Module):
        model = as_rollout_model(checkpoint_or_model, (meta or {}).get("model"))
        meta = dict(meta or {})
        meta.setdefault("model", model.config.name)
        if preprocess is None:
            preprocess = meta.get("preprocess") or default_preprocess(model)
        if preprocess is None:
            raise UserError("rollout of a bare model needs its preprocess record (mean/std or vocab)")
        return model, meta, preprocess
    p = Path(checkpoint_or_model)
    if not p.exists():
        raise UserError(f"checkpoint not found: {p}")
    model, ck_meta = load_checkpoint(p)
    ck_meta = {**ck_meta, **(meta or {}), "checkpoint": str(p.resolve())}   # the run record: relative to the store
    return model, ck_meta, preprocess or preprocess_from_meta(ck_meta)


def rollout_metrics_run(checkpoint_or_model: Any, store_dir: str | Path, dataset: str | None = None, *,
                        corruptions: Sequence[str] | None = None, severities: Sequence[int] = (1, 2, 3, 4, 5),
                        modes: Sequence[str] | None = None, head_fusion: str = "mean",
                        discard_ratio: float = 0.0, max_examples: int = 200, n_figure: int = 8,
                        data_seed: int = 0, corruption_seed: int = 0, mass: str = "positive",
                        run_id: str | None = None, preprocess: dict[str, Any] | None = None,
                        meta: dict[str, Any] | None = None, device: Any = None, progress: bool = False
                        ) -> dict[str, Any]:
    """Salient mass (clean) and drift (per corruption × severity) of one model on a synthetic test set.

    Writes ``kind="rollout"`` rows to ``store_dir`` — per mode: ``rollout_mass`` and ``rollout_mass_chance``
    (condition "clean", severity 0) and, for images, ``rollout_drift`` (condition = corruption, severity s);
    ``value`` = mean over examples (NaNs dropped), ``n`` = examples behind it, ``source`` = the spec tag
    plus ``|mass=<definition>`` for the mass rows. Also stores the first ``n_figure`` examples of the first
    mode as a rollout set. ``modes=None`` = the model's default mode plus ``positive`` (comparable across
    models). ``corruptions=None`` = the 15 benchmark corruptions; ``[]`` = none. Returns a summary dict.
    """
    model, meta, preprocess = _load(checkpoint_or_model, preprocess, meta)
    cfg = model.config
    dataset = _metrics_dataset(cfg, dataset, mass)
    data = load_dataset(dataset, "test", seed=data_seed)
    n = min(int(max_examples), len(data.y))
    default = resolve_spec(model).mode
    mode_list = list(dict.fromkeys(modes or [default, "positive"]))
    specs = [resolve_spec(model, m, head_fusion, discard_ratio) for m in mode_list]
    if corruptions is None:
        corruptions = list(BENCHMARK)
    unknown = [c for c in corruptions if c not in ALL_CORRUPTIONS]
    if unknown and cfg.modality == "image":
        raise UserError(f"unknown corruption(s) {', '.join(unknown)} (valid: {', '.join(ALL_CORRUPTIONS)})")
    run_id = run_id or new_run_id("rollout")
    writer = RunWriter(store_dir, run_id, base={
        "kind": "rollout", "model": str(meta.get("model", cfg.name)), "config_hash": str(meta.get("config_hash", "")),
        "dataset": dataset, "split": "test", "seed": int(meta.get("seed", -1)), "epoch": -1})
    summary: dict[str, Any] = {"run_id": run_id, "model": meta.get("model", cfg.name), "dataset": dataset,
                               "n": n, "modes": {}}
    for si, spec in enumerate(specs):
        clean = _clean_pass(model, data, n, preprocess, spec, mass, device)
        rows = [dict(metric="rollout_mass", value=clean.mass, n=clean.n_mass, condition="clean", severity=0,
                     source=f"{spec.tag}|mass={mass}"),
                dict(metric="rollout_mass_chance", value=clean.chance, n=n, condition="clean", severity=0,
                     source=f"{spec.tag}|mass={mass}")]
        info: dict[str, Any] = {"mass": clean.mass, "chance": clean.chance, "drift": {}, "skipped": {}}
        if cfg.modality == "image":
            rows += _drift_rows(model, clean, corruptions, severities, preprocess, spec, info,
                                seed=corruption_seed, device=device, progress=progress)
        writer.add_rows(rows)
        summary["modes"][spec.tag] = info
        if si == 0 and n_figure > 0:
            summary["rollout_set"] = str(_save_figure_set(store_dir, run_id, model, meta, dataset, spec, clean,
                                                          np.asarray(data.y)[:n], getattr(data, "classes", None),
                                                          min(n_figure, n), mass))
    writer.write_provenance({"kind": "rollout", "model": summary["model"], "dataset": dataset,
                             "checkpoint": meta.get("checkpoint", ""), "specs": [s.to_dict() for s in specs],
                             "mass_definition": mass, "corruptions": list(corruptions),
                             "severities": [int(s) for s in severities], "max_examples": n,
                             "data_seed": data_seed, "corruption_seed": corruption_seed,
                             "device": str(device) if device is not None else None})
    return summary


def _metrics_dataset(cfg: Any, dataset: str | None, mass: str) -> str:
    """The synthetic set of the model's modality (or the one named, checked); the mass definition checked."""
    dataset = dataset or ("synthetic-vision" if cfg.modality == "image" else "synthetic-text")
    if mass not in MASS_DEFINITIONS:
        raise UserError(f"unknown mass definition {mass!r} (valid: {', '.join(MASS_DEFINITIONS)})")
    if not dataset.startswith("synthetic"):
        raise UserError(f"rollout metrics need a dataset with known salient regions (synthetic-vision, "
                        f"synthetic-text); got {dataset!r}")
    want_modality = "image" if dataset == "synthetic-vision" else "text"
    if cfg.modality != want_modality:
        raise UserError(f"{cfg.name} is a{'n image' if cfg.modality == 'image' else ' text'} model; "
                        f"dataset {dataset!r} needs a{'n image' if want_modality == 'image' else ' text'} model")
    return dataset


@dataclass
class _CleanPass:
    """One mode's rollout of the first ``n`` clean test examples and their salient mass."""
    mass: float                        # mean salient mass over the examples where it is defined
    n_mass: int                        # examples behind ``mass``
    chance: float                      # mean salient fraction (the mass of a uniform map)
    figure: dict[str, Any]             # per-example arrays for the stored rollout set (first k taken)
    images: np.ndarray | None = None   # image models: the clean images and their rollout (for drift)
    rollout: ImageRollout | None = None


def _clean_pass(model, data: Any, n: int, preprocess: dict[str, Any], spec: RolloutSpec, mass: str,
                device: Any) -> _CleanPass:
    if model.config.modality == "image":
        images = np.asarray(data.x)[:n]
        masks = np.asarray(data.salient)[:n]
        clean = image_rollout_full(model, images, preprocess, spec=spec, device=device)
        values = salient_mass(clean.heatmaps, masks, how=mass)
        chance = masks.reshape(n, -1).mean(1)
        figure = dict(images=images, heatmaps=clean.heatmaps, preds=clean.preds, probs=clean.probs, salient=masks)
    else:
        images, clean = None, None
        texts = list(data.texts)[:n]
        tr = text_rollout_full(model, texts, preprocess, spec=spec, device=device)
        tok_masks = []
        for i in range(n):
            m = np.zeros(len(tr.tokens[i]), dtype=bool)
            pos = [p for p in data.salient[i] if p < len(m)]
            m[pos] = True
            tok_masks.append(m)
        values = salient_mass(tr.scores, tok_masks, how=mass)
        chance = np.asarray([m.mean() if len(m) else np.nan for m in tok_masks])
        figure = dict(tokens=tr.tokens, scores=tr.scores, preds=tr.preds, probs=tr.probs, salient=tok_masks)
    ok = np.isfinite(values)
    return _CleanPass(mass=float(values[ok].mean()) if ok.any() else float("nan"), n_mass=int(ok.sum()),
                      chance=float(np.nanmean(chance)), figure=figure, images=images, rollout=clean)


def _drift_rows(model, clean: _CleanPass, corruptions: Sequence[str], severities: Sequence[int],
                preprocess: dict[str, Any], spec: RolloutSpec, info: dict[str, Any], *, seed: int, device: Any,
                progress: bool) -> list[dict[str, Any]]:
    """``rollout_drift`` rows per (corruption, severity); fills ``info["drift"]`` / ``info["skipped"]``."""
    rows = []
    idx = np.arange(len(clean.images))
    for c in corruptions:
        if c in info["skipped"]:
            continue
        for s in severities:
            try:
                r = rollout_drift(model, clean.images, c, int(s), preprocess, clean=clean.rollout, seed=seed,
                                  indices=idx, device=device)
            except CorruptionError as e:  # e.g. frost without its texture files: skip this corruption
                if c not in ALL_CORRUPTIONS:
                    raise UserError(str(e)) from None
                warnings.warn(f"rollout drift: skipping {c}: {e}")
                info["skipped"][c] = str(e)
                break
            okr = np.isfinite(r)
            v = float(r[okr].mean()) if okr.any() else float("nan")
            rows.append(dict(metric="rollout_drift", value=v, n=int(okr.sum()), condition=c,
                             severity=int(s), source=spec.tag))
            info["drift"][f"{c}/{s}"] = v
            if progress:
                from robustbench_dgsa.util.progress import log
                log(f"  {spec.tag} drift {c} s{s}: {v:.3f}")   # a status line on stderr, never stdout
    return rows


def _save_figure_set(store_dir: str | Path, run_id: str, model, meta: dict[str, Any], dataset: str,
                     spec: RolloutSpec, clean: _CleanPass, y: np.ndarray, classes: Any, k: int, mass: str) -> Path:
    """The first ``k`` examples of the first mode as a rollout set (the report's figures read it)."""
    cfg = model.config
    return save_rollout_set(
        store_dir, run_id, kind=cfg.modality, model=str(meta.get("model", cfg.name)), dataset=dataset,
        seed=int(meta.get("seed", -1)), mode=spec, labels=y[:k],
        meta={"classes": classes or meta.get("classes"),  # labels are the data's
              "config_hash": meta.get("config_hash", ""), "checkpoint": meta.get("checkpoint", ""),
              "indices": np.arange(k).tolist(), "split": "test", "mass_definition": mass},
        **{key: v[:k] for key, v in clean.figure.items()})
