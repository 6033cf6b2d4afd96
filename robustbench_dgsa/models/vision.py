"""Vision models (ViT, DViT, DGViT and variants): one class, the attention mechanism comes from the config.

Patch embedding Conv2d(in_chans, D, p, p)+bias, a learnable CLS token prepended, learned positional embedding
over 1 + (H/p)² tokens, dropout, ``depth`` pre-norm blocks, no final norm, classifier head on the CLS vector.
Grayscale (1-channel) input is replicated to 3 channels inside ``forward`` when the model has ``in_chans == 3``.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from ..config import ModelConfig, validate_model
from robustbench_dgsa.util.errors import UserError
from .blocks import ClassifierBase


class VisionTransformer(ClassifierBase):
    """A vision transformer classifier (ViT, DViT, DGViT, ...), as the module docstring describes.

    Args:
        cfg: the model config (``modality="image"``), checked first
            (:func:`robustbench_dgsa.config.validate_model`); the model keeps a copy as ``config``.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        validate_model(cfg)
        if cfg.modality != "image":
            raise UserError(f"model config {cfg.name!r} has modality {cfg.modality!r}, not 'image'")
        self.config = dataclasses.replace(cfg)
        self.grid = cfg.image_size // cfg.patch_size
        self.num_patches = self.grid * self.grid
        self.num_tokens = 1 + self.num_patches
        self.patch_embed = nn.Conv2d(cfg.in_chans, cfg.dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self._init_tokens_and_blocks(cfg)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, return_attention: bool = False):
        """x: float (B, C, H, W), already normalised. ``key_padding_mask`` (B, num_patches), True = ignore
        (rarely needed for images). Returns logits (B, C), or (logits, per-layer maps) with
        ``return_attention=True`` (see ``robustbench_dgsa.models.attention``)."""
        cfg = self.config
        if x.ndim != 4:
            raise UserError(f"{cfg.name}: expected images (B, C, H, W), got shape {tuple(x.shape)}")
        if x.shape[1] == 1 and cfg.in_chans == 3:
            x = x.expand(-1, 3, -1, -1)
        if x.shape[1] != cfg.in_chans:
            raise UserError(f"{cfg.name}: expected {cfg.in_chans} channel(s), got {x.shape[1]}")
        if x.shape[-2:] != (cfg.image_size, cfg.image_size):
            raise UserError(f"{cfg.name}: built for {cfg.image_size}x{cfg.image_size} images, "
                            f"got {x.shape[-2]}x{x.shape[-1]}")
        B = x.shape[0]
        tokens = self.patch_embed(x).flatten(2).transpose(1, 2)          # (B, P, D)
        tokens = torch.cat([self.cls_token.expand(B, -1, -1), tokens], dim=1) + self.pos_embed
        tokens = self.pos_drop(tokens)
        mask = None
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, self.num_patches):
                raise UserError(f"{cfg.name}: key_padding_mask must be (B, {self.num_patches}), "
                                f"got {tuple(key_padding_mask.shape)}")
            cls_col = torch.zeros(B, 1, dtype=torch.bool, device=key_padding_mask.device)
            mask = torch.cat([cls_col, key_padding_mask.bool()], dim=1)
        return self._encode(tokens, mask, return_attention)
