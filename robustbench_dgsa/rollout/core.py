"""Attention rollout (Abnar & Zuidema, 2020) for signed and unsigned attention maps — maths only.

Input: the per-layer attention maps a model returns with ``return_attention=True``: a list (one entry per
layer, first layer first) of either

* dicts as the models return them: ``"attn"`` (B,h,N,N) combined map (MHSA softmax; DiffAttn A1 − λA2;
  DGSA g·A+ − (1−g)·A−), and for the differential models ``"a_pos"``/``"a_neg"`` (B,h,N,N), plus
  ``"gate"`` (DGSA) or ``"lambda"`` (DiffAttn); or
* bare arrays (B,h,N,N) (or (h,N,N) for one example), taken as the map the mode needs.

Torch tensors and numpy arrays are both accepted; the result has the input's kind and float dtype
(integer inputs give float64). Token 0 is CLS.

The recipe, per layer (docs/METHODS.md, Attention rollout), for a :class:`RolloutSpec` (mode, head fusion,
discard ratio):

1. **select** the map: ``"attn"`` for modes signed / positive / raw, ``"a_pos"`` or ``"a_neg"`` for the
   branch diagnostics;
2. **per-head transform**: ``positive`` keeps the positive part max(A, 0); other modes keep A as is;
3. **fuse heads**: mean, max or min over the head axis → (B,N,N);
4. **normalise rows**: ``signed`` divides each row by its L1 norm Σ|a_ij| (signs kept; |row|₁ = 1);
   ``positive``/``a_pos``/``a_neg`` divide by the row sum (all entries ≥ 0); ``raw`` divides by the signed
   row sum, which for DiffAttn is ≈ 1−λ and for DGSA 2g−1 (not 1) — a division that can flip signs or blow
   up near 0, hence the warning it emits on signed maps. Rows with norm ≤ 1e-12 are left as they are;
5. **discard** (``discard_ratio`` r > 0): per example and layer, over all N×N entries of the fused,
   normalised map, the ⌊r·N²⌋ entries of lowest magnitude |a_ij| are set to 0 — the idea of the reference
   implementation (jacobgil/vit-explain), which never discards the CLS→CLS entry (0, 0); neither do we
   (it is excluded from the candidates, so exactly ⌊r·N²⌋ entries are zeroed, at most N²−1). Rows are then
   normalised again as in step 4. Ties are broken by position (lowest flat index first);
6. **residual**: A ← (A + I)/2, then rows renormalised as in step 4 (a no-op for unit rows with a
   non-negative diagonal; for signed rows with a negative diagonal it restores |row|₁ = 1);
7. **multiply** layers: J = A_L · … · A_2 · A_1 (``joint``); J[b, 0, 1:] is the CLS relevance of the input
   tokens (:func:`cls_relevance`).

Normalising *before* the identity is added keeps the residual weight at exactly 1/2 (Abnar & Zuidema's
0.5·W + 0.5·I). The reference implementation normalises after adding I, which gives the identity weight
1/(1+s) with s the mass kept by the discard; with ``discard_ratio=0`` both are the same, and for MHSA
``positive`` (the default there) is then exactly the classic rollout.

Modes:

``signed``   default for DiffAttn and DGSA; keeps inhibition (negative weights) visible.
``positive`` positive part, rows renormalised to 1; comparable with ViT; default for MHSA (== classic).
``a_pos``    the excitatory / first branch map A+ (A1) alone, classic rollout (diagnostic).
``a_neg``    the inhibitory / second branch map A− (A2) alone, classic rollout (diagnostic).
``raw``      the combined map with the classic recipe (rows divided by their signed sum); warns.

Every caller records :attr:`RolloutSpec.tag` (e.g. ``"signed|mean|d0"``) with each heatmap.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

MODES = ("signed", "positive", "a_pos", "a_neg", "raw")
HEAD_FUSIONS = ("mean", "max", "min")
SIGNED_MODES = ("signed", "raw")
_EPS = 1e-12



class RolloutWarning(UserWarning):
    """Emitted by the ``raw`` mode on maps whose rows do not sum to 1."""


def default_mode(attention: str) -> str:
    """The primary rollout mode for an attention type, as it was registered (``register_attention``'s
    ``rollout_mode``): mhsa → positive (== classic), diff/dgsa → signed."""
    return _entry(attention).rollout_mode


def _entry(attention: str) -> Any:
    from robustbench_dgsa.models.attention_registry import get_attention
    from robustbench_dgsa.util.errors import UserError
    try:
        return get_attention(attention)
    except UserError:
        from robustbench_dgsa.models.attention_registry import attention_names
        raise ValueError(f"unknown attention type {attention!r} (valid: {', '.join(attention_names())})") from None


@dataclass(frozen=True)
class RolloutSpec:
    """How a rollout was computed; :attr:`tag` is recorded with every heatmap."""
    mode: str = "signed"
    head_fusion: str = "mean"
    discard_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown rollout mode {self.mode!r} (valid: {', '.join(MODES)})")
        if self.head_fusion not in HEAD_FUSIONS:
            raise ValueError(f"unknown head fusion {self.head_fusion!r} (valid: {', '.join(HEAD_FUSIONS)})")
        r = float(self.discard_ratio)
        if not (0.0 <= r < 1.0) or math.isnan(r):
            raise ValueError(f"discard ratio must be in [0, 1), got {self.discard_ratio!r}")
        object.__setattr__(self, "discard_ratio", r)

    @property
    def signed(self) -> bool:
        """True when heatmaps of this mode can be negative (render with a diverging colormap centred at 0)."""
        return self.mode in SIGNED_MODES

    @property
    def tag(self) -> str:
        """Compact, parseable record: ``"<mode>|<fusion>|d<ratio>"``, e.g. ``"signed|mean|d0.9"``."""
        return f"{self.mode}|{self.head_fusion}|d{self.discard_ratio:g}"

    @classmethod
    def from_tag(cls, tag: str) -> "RolloutSpec":
        try:
            mode, fusion, d = tag.split("|")
            return cls(mode, fusion, float(d[1:]))
        except (ValueError, IndexError):
            raise ValueError(f"not a rollout tag: {tag!r}") from None

    @classmethod
    def resolve(cls, attention: str, mode: str | None = None, head_fusion: str = "mean",
                discard_ratio: float = 0.0) -> "RolloutSpec":
        """Spec with ``mode=None`` replaced by the attention type's default; branch modes need diff/dgsa."""
        mode = mode or default_mode(attention)
        if mode in ("a_pos", "a_neg") and not _entry(attention).branch_maps:
            raise ValueError(f"rollout mode {mode!r} needs a differential model (DiffAttn/DGSA); "
                             f"{_entry(attention).display_name} has no branch maps")
        return cls(mode, head_fusion, discard_ratio)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "head_fusion": self.head_fusion, "discard_ratio": self.discard_ratio,
                "tag": self.tag, "signed": self.signed}


def infer_attention(maps: Sequence[Any]) -> str:
    """Attention type from the keys of the models' per-layer dicts ("gate" → dgsa, "lambda"/branches → diff)."""
    first = maps[0] if len(maps) else None
    if isinstance(first, dict):
        if "gate" in first:
            return "dgsa"
        if "lambda" in first or "a_pos" in first:
            return "diff"
    return "mhsa"


# --- helpers -----------------------------------------------------------------------------------------

def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        t = torch.as_tensor(np.asarray(x))
    if not t.is_floating_point():
        t = t.to(torch.float64)
    return t


def _select(layer: Any, mode: str) -> Any:
    if isinstance(layer, dict):
        key = {"a_pos": "a_pos", "a_neg": "a_neg"}.get(mode, "attn")
        if key not in layer:
            raise ValueError(f"rollout mode {mode!r} needs the per-layer {key!r} maps, which this model does not "
                             f"return (keys: {', '.join(sorted(layer))})")
        return layer[key]
    return layer


def _row_norm(a: torch.Tensor, how: str) -> torch.Tensor:
    """Row norms of (..., N, N) maps: "l1" = Σ|a|, "sum" = Σa (signed)."""
    return a.abs().sum(-1, keepdim=True) if how == "l1" else a.sum(-1, keepdim=True)


def normalize_rows(a: torch.Tensor, how: str = "l1") -> torch.Tensor:
    """Divide each row by its L1 norm (``"l1"``) or its sum (``"sum"``); rows with |norm| ≤ 1e-12 unchanged."""
    n = _row_norm(a, how)
    safe = torch.where(n.abs() > _EPS, n, torch.ones_like(n))
    return a / safe


def fuse_heads(a: Any, how: str = "mean") -> Any:
    """(B,h,N,N) → (B,N,N) by mean, max or min over heads. numpy in → numpy out."""
    is_np = not isinstance(a, torch.Tensor)
    t = _as_tensor(a)
    if how == "mean":
        out = t.mean(1)
    elif how == "max":
        out = t.amax(1)
    elif how == "min":
        out = t.amin(1)
    else:
        raise ValueError(f"unknown head fusion {how!r} (valid: {', '.join(HEAD_FUSIONS)})")
    return out.numpy() if is_np else out


def discard_lowest(a: Any, ratio: float) -> Any:
    """Zero the ⌊ratio·N²⌋ lowest-|value| entries of each (N,N) map in (B,N,N), never the CLS→CLS entry."""
    is_np = not isinstance(a, torch.Tensor)
    t = _as_tensor(a).clone()
    B, N, _ = t.shape
    k = min(int(math.floor(ratio * N * N + 1e-9)), N * N - 1)
    if k <= 0:
        return t.numpy() if is_np else t
    flat = t.reshape(B, N * N)
    mag = flat.abs()
    mag[:, 0] = float("inf")  # CLS -> CLS is never discarded (as the reference implementation)
    # stable sort: ties broken by flat position
    idx = torch.sort(mag, dim=1, stable=True).indices[:, :k]
    flat.scatter_(1, idx, 0.0)
    out = flat.reshape(B, N, N)
    return out.numpy() if is_np else out


# --- rollout -----------------------------------------------------------------------------------------

def layer_transition(m: Any, spec: RolloutSpec) -> torch.Tensor:
    """One layer's (B,N,N) rollout matrix: steps 2–6 of the module recipe applied to (B,h,N,N) maps."""
    t = _as_tensor(m)
    if t.dim() == 3:
        t = t.unsqueeze(0)
    if t.dim() != 4 or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"attention maps must be (B, heads, N, N); got shape {tuple(t.shape)}")
    if spec.mode == "positive":
        t = t.clamp(min=0)
    a = fuse_heads(t, spec.head_fusion)
    how = "l1" if spec.mode == "signed" else "sum"
    if spec.mode == "raw" and bool((a < 0).any()):
        warnings.warn("rollout mode 'raw' on a signed map: its rows sum to 1-λ (DiffAttn) or 2g-1 (DGSA), not 1; "
                      "dividing by that sum can flip signs or blow up near 0 — use mode 'signed' (L1 rows) "
                      "or 'positive'", RolloutWarning, stacklevel=3)
    a = normalize_rows(a, how)
    if spec.discard_ratio > 0:
        a = normalize_rows(discard_lowest(a, spec.discard_ratio), how)
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    a = normalize_rows((a + eye) / 2, how)
    return a


def rollout(maps: Sequence[Any], mode: str | None = None, head_fusion: str = "mean",
            discard_ratio: float = 0.0, *, spec: RolloutSpec | None = None) -> Any:
    """Joint attention (B, N, N) over all layers (rows: output tokens, columns: input tokens).

    ``mode=None`` picks the default of the attention type inferred from the maps (dict keys):
    MHSA → ``positive`` (== classic rollout), DiffAttn/DGSA → ``signed``; for bare arrays ``signed`` when
    any entry is negative, else ``positive`` (the two agree on non-negative maps). Pass ``spec`` to give all three
    settings at once. Result: numpy if the first layer's map is numpy, else torch (float dtype of the input).
    """
    if len(maps) == 0:
        raise ValueError("rollout needs at least one layer of attention maps")
    if spec is None:
        if isinstance(maps[0], dict):
            spec = RolloutSpec.resolve(infer_attention(maps), mode, head_fusion, discard_ratio)
        else:  # bare arrays: "signed" if any entry is negative, else "positive" (identical on such maps)
            if mode is None:
                mode = "signed" if any(bool((_as_tensor(m) < 0).any()) for m in maps) else "positive"
            spec = RolloutSpec(mode, head_fusion, discard_ratio)
    first = _select(maps[0], spec.mode)
    is_np = not isinstance(first, torch.Tensor)
    joint = None
    for layer in maps:
        a = layer_transition(_select(layer, spec.mode), spec)
        joint = a if joint is None else torch.matmul(a, joint)
    return joint.numpy() if is_np else joint


def cls_relevance(joint: Any) -> Any:
    """The CLS row of the joint attention over the input tokens: (B, N, N) → (B, N−1) (or (N,N) → (N−1,))."""
    return joint[..., 0, 1:]


def relevance_grid(relevance: Any, grid: int | None = None) -> Any:
    """(B, g·g) patch relevance → (B, g, g) in row-major patch order (the patch embedding's flatten order)."""
    n = relevance.shape[-1]
    g = grid or int(round(math.sqrt(n)))
    if g * g != n:
        raise ValueError(f"{n} patch tokens do not form a square grid")
    return relevance.reshape(*relevance.shape[:-1], g, g)


def upsample(grid_maps: Any, size: int | tuple[int, int]) -> Any:
    """Bilinear upsampling (align_corners=False) of (B, g, g) maps to (B, H, W)."""
    is_np = not isinstance(grid_maps, torch.Tensor)
    t = _as_tensor(grid_maps)
    squeeze = t.dim() == 2
    if squeeze:
        t = t.unsqueeze(0)
    hw = (size, size) if isinstance(size, int) else tuple(size)
    out = F.interpolate(t.unsqueeze(1), size=hw, mode="bilinear", align_corners=False).squeeze(1)
    if squeeze:
        out = out.squeeze(0)
    return out.numpy() if is_np else out


def image_heatmaps(joint: Any, size: int | tuple[int, int]) -> Any:
    """Joint attention of a vision model (B, 1+g², 1+g²) → CLS relevance upsampled to (B, H, W)."""
    return upsample(relevance_grid(cls_relevance(joint)), size)


def token_relevance(joint: Any, pad_mask: Any | None = None) -> list[np.ndarray]:
    """Joint attention of a text model (B, 1+L, 1+L) → per example the CLS relevance of its non-pad tokens.

    ``pad_mask`` (B, L), True = padding; padded positions are dropped (their relevance is 0 anyway).
    """
    rel = cls_relevance(joint)
    rel = rel.detach().cpu().numpy() if isinstance(rel, torch.Tensor) else np.asarray(rel)
    if pad_mask is None:
        return [r.copy() for r in rel]
    pm = pad_mask.detach().cpu().numpy() if isinstance(pad_mask, torch.Tensor) else np.asarray(pad_mask)
    return [r[~m.astype(bool)].copy() for r, m in zip(rel, pm)]
