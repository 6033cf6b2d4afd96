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
from .blocks import ClassifierBase, ClassifierHead


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
        tokens = self._embed(x)
        B = tokens.shape[0]
        mask = None
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, self.num_patches):
                raise UserError(f"{self.config.name}: key_padding_mask must be (B, {self.num_patches}), "
                                f"got {tuple(key_padding_mask.shape)}")
            cls_col = torch.zeros(B, 1, dtype=torch.bool, device=key_padding_mask.device)
            mask = torch.cat([cls_col, key_padding_mask.bool()], dim=1)
        return self._encode(tokens, mask, return_attention)

    def _embed(self, x: Tensor) -> Tensor:
        """Checked images -> CLS + patch tokens + positions, after the positional dropout (B, 1 + P, D)."""
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
        return self.pos_drop(tokens)

    # --- timm's model protocol (as timm's VisionTransformer has it) ---------------------------------------------
    global_pool = "token"
    num_prefix_tokens = 1

    @property
    def num_features(self) -> int:
        """Width of :meth:`forward_features`' tokens (timm's ``num_features``; no final norm here)."""
        return int(self.config.dim)

    @property
    def head_hidden_size(self) -> int:
        """Width of ``forward_head(x, pre_logits=True)``: the CLS vector."""
        return int(self.config.dim)

    @property
    def embed_dim(self) -> int:
        return int(self.config.dim)

    @property
    def num_classes(self) -> int:
        """Logits of the classifier (0 after ``reset_classifier(0)``)."""
        return 0 if isinstance(self.head, nn.Identity) else int(self.head.fc2.out_features)

    def forward_features(self, x: Tensor) -> Tensor:
        """Normalised images -> every token after the last block (B, 1 + P, D): CLS first, as timm's ViT."""
        tokens = self._embed(x)
        for blk in self.blocks:
            tokens = blk(tokens, None, False)
        return tokens

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """Tokens from :meth:`forward_features` -> logits from the CLS token (its vector with ``pre_logits``)."""
        cls = x[:, 0]
        return cls if pre_logits else self.head(cls)

    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """A new, freshly initialised output layer for ``num_classes`` (the head's hidden layer is kept); 0 removes
        the head (the model then returns the CLS vector), as in timm."""
        if global_pool not in (None, "token"):
            raise UserError(f"{self.config.name}: global_pool must be 'token' (the CLS token), got {global_pool!r}")
        num_classes = int(num_classes)
        if num_classes < 0:
            raise UserError(f"num_classes must be >= 0, got {num_classes}")
        if num_classes == 0:
            self.head = nn.Identity()
            return
        if isinstance(self.head, nn.Identity):
            self.head = ClassifierHead(dataclasses.replace(self.config, num_classes=num_classes))
        else:
            self.head.fc2 = nn.Linear(self.head.fc2.in_features, num_classes)
        self.config = dataclasses.replace(self.config, num_classes=num_classes)
