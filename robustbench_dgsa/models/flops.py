"""Parameter and FLOP counting.

FLOP convention (``count_flops``): analytic forward FLOPs for ONE sample, 2 FLOPs per multiply-add, counting
every matrix product — patch-embedding convolution, all Linear layers (Q/K/V/O, DGSA gate, FFN, classifier
head on the CLS vector) and the attention score (Q Kᵀ) and value (A V) products. Not counted: bias adds,
softmax, normalisations, activations, the λ/gate scaling of the maps, residual adds, embedding lookups.
This is exactly what ``torch.utils.flop_counter.FlopCounterMode`` counts for the model's explicit attention
path (``tests/test_models.py`` checks the two agree).

Attention products per layer (N tokens, width D, h heads, d' = D/(2h)):
  MHSA        scores 2·N²·D, values 2·N²·D.
  DiffAttn / DGSA (explicit path, ``path="explicit"``, the default): two score maps of width d' per head
  = 2·N²·D; one value product with the combined map (width 2d') = 2·N²·D.
  The fused path (``path="fused"``) multiplies V by both maps: values 4·N²·D (with the ``"sdpa-split"`` kernel,
  used on CPU for long sequences, each branch's scores are computed twice more: +2·N²·D, not counted here).
  The models' fused path also computes only the CLS row in the last block (not reflected here).

The paper's Table 9 "FLOPs / Img" (e.g. 1.441 G for ViT at 224/16) counts multiply-adds (fvcore/ptflops
convention): compare it with ``count_flops(...) / 2``.
"""
from __future__ import annotations

from torch import nn

from robustbench_dgsa.config import ModelConfig, gelu_hidden, swiglu_half, validate_model
from robustbench_dgsa.models.attention_registry import get_attention
from robustbench_dgsa.util.errors import UserError


def count_params(model: nn.Module) -> int:
    """Number of parameters (each shared tensor once)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def num_tokens(cfg: ModelConfig, seq_len: int | None = None) -> int:
    """Tokens seen by attention, CLS included: 1 + (H/p)² for images, 1 + seq_len (default max_len) for text."""
    if cfg.modality == "image":
        if seq_len is not None:
            raise UserError("seq_len applies to text models only; an image model's token count follows from "
                            "image_size and patch_size")
        return 1 + (cfg.image_size // cfg.patch_size) ** 2
    L = cfg.max_len if seq_len is None else int(seq_len)
    if not 1 <= L <= cfg.max_len:
        raise UserError(f"seq_len must be in 1..{cfg.max_len} (max_len), got {seq_len}")
    return 1 + L


def count_flops(cfg: ModelConfig, seq_len: int | None = None, *, path: str = "explicit") -> int:
    """Forward FLOPs per sample (see the module docstring for the convention). ``seq_len``: text input length
    without CLS (default ``max_len``); ``path``: "explicit" (default) or "fused" attention."""
    validate_model(cfg)
    if path not in ("explicit", "fused"):
        raise ValueError(f"path must be 'explicit' or 'fused', got {path!r}")
    N = num_tokens(cfg, seq_len)
    D, h = cfg.dim, cfg.heads
    flops = 0
    if cfg.modality == "image":
        patches = N - 1
        flops += 2 * patches * (cfg.in_chans * cfg.patch_size ** 2) * D
    per_layer = 0
    if get_attention(cfg.attention).head_split == 1:   # MHSA's count (a plugin's own maths may differ)
        per_layer += 2 * N * D * 3 * D + 2 * N * D * D         # W_qkv, W_o
        per_layer += 2 * N * N * D + 2 * N * N * D             # Q Kᵀ, A V
    else:
        per_layer += 4 * (2 * N * D * D)                       # W_q, W_k, W_v, W_o
        per_layer += 2 * N * N * D                             # two maps, each h·N²·d'
        per_layer += (2 if path == "fused" else 1) * 2 * N * N * D   # value product(s), h·N²·2d' each
        if cfg.attention == "dgsa":
            per_layer += 2 * N * D * h                         # gate W_g: D -> h
    if cfg.ffn == "gelu":
        hidden = gelu_hidden(D, cfg.ffn_ratio)
        per_layer += 2 * N * D * hidden * 2
    else:
        half = swiglu_half(D, cfg.ffn_ratio)
        per_layer += 2 * N * D * (2 * half) + 2 * N * half * D
    flops += cfg.depth * per_layer
    flops += 2 * D * cfg.head_hidden + 2 * cfg.head_hidden * cfg.num_classes   # head on the CLS vector
    return flops
