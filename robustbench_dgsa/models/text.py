"""Text models (Transformer, DT, DGT and variants): one class, the attention mechanism comes from the config.

Token embedding (vocab_size, D, padding_idx=0), a learnable CLS token prepended, learned positions over
max_len + 1 tokens, dropout, ``depth`` pre-norm blocks, no final norm, classifier head on the CLS vector.
Padded keys are masked inside attention (they get exactly 0 weight); CLS is never masked.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from ..config import ModelConfig, validate_model
from robustbench_dgsa.util.errors import UserError
from .blocks import ClassifierBase

PAD_ID = 0


class TextTransformer(ClassifierBase):
    """A transformer encoder text classifier (Transformer, DT, DGT, ...), as the module docstring describes.

    Args:
        cfg: the model config (``modality="text"``), checked first
            (:func:`robustbench_dgsa.config.validate_model`); the model keeps a copy as ``config``.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        validate_model(cfg)
        if cfg.modality != "text":
            raise UserError(f"model config {cfg.name!r} has modality {cfg.modality!r}, not 'text'")
        self.config = dataclasses.replace(cfg)
        self.num_tokens = cfg.max_len + 1
        self.token_embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=PAD_ID)
        self._init_tokens_and_blocks(cfg)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, return_attention: bool = False):
        """x: LongTensor (B, L) of token ids, L <= max_len. ``key_padding_mask`` (B, L) bool, True = padding;
        when None it is taken from the ids (id 0 is padding). The model prepends CLS (never masked).
        Returns logits (B, C), or (logits, per-layer maps) with ``return_attention=True``."""
        cfg = self.config
        if x.ndim != 2:
            raise UserError(f"{cfg.name}: expected token ids (B, L), got shape {tuple(x.shape)}")
        B, L = x.shape
        if L > cfg.max_len:
            raise UserError(f"{cfg.name}: sequence length {L} exceeds max_len {cfg.max_len}; truncate the input")
        if key_padding_mask is None:
            key_padding_mask = x.eq(PAD_ID)
        elif key_padding_mask.shape != (B, L):
            raise UserError(f"{cfg.name}: key_padding_mask must have the ids' shape {(B, L)}, "
                            f"got {tuple(key_padding_mask.shape)}")
        tokens = self.token_embed(x)
        tokens = torch.cat([self.cls_token.expand(B, -1, -1).to(tokens.dtype), tokens], dim=1)
        tokens = self.pos_drop(tokens + self.pos_embed[:, : L + 1])
        mask: Tensor | None = None
        if bool(key_padding_mask.any()):
            cls_col = torch.zeros(B, 1, dtype=torch.bool, device=x.device)
            mask = torch.cat([cls_col, key_padding_mask.bool().to(x.device)], dim=1)
        return self._encode(tokens, mask, return_attention)
