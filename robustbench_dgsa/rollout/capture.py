"""Attention maps from outside vision transformers, so rollout treats them like the suite's own models.

timm's ``VisionTransformer`` computes attention with fused ``scaled_dot_product_attention`` (no maps). While
capturing, :func:`capture_attention` switches each block's ``attn.fused_attn`` off (timm then takes its explicit
softmax path, the same numbers up to float rounding) and records the softmax map that enters ``attn.attn_drop``
(a forward hook; dropout is the identity in eval mode); afterwards the flags are restored and the hooks
removed, also when the forward pass fails.

:class:`TimmViTAdapter` wraps such a model with the interface :mod:`robustbench_dgsa.rollout.runs` uses: a
``config`` (name, modality, image_size, patch_size, depth, heads, attention="mhsa", in_chans, num_classes)
and ``forward(x, key_padding_mask=None, return_attention=False)`` returning ``(logits, maps)`` with
``maps[l] = {"attn": (B, heads, N, N)}``. Only models with exactly one prefix token (the class token) and a
square patch grid are accepted: rollout reads the class token's row over the patch tokens.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from robustbench_dgsa.models.external import Preprocess
from robustbench_dgsa.util.errors import UserError


@dataclass(frozen=True)
class ExternalViTConfig:
    name: str
    image_size: int
    patch_size: int
    depth: int
    heads: int
    num_classes: int
    in_chans: int = 3
    modality: str = "image"
    attention: str = "mhsa"


def is_timm_vit(model: Any) -> bool:
    """Duck-typed: a patch embedding and blocks whose ``attn`` has timm's ``fused_attn`` switch and ``attn_drop``."""
    blocks = getattr(model, "blocks", None)
    if not isinstance(model, nn.Module) or getattr(model, "patch_embed", None) is None or blocks is None:
        return False
    try:
        attns = [b.attn for b in blocks]
    except (AttributeError, TypeError):
        return False
    return bool(attns) and all(hasattr(a, "fused_attn") and isinstance(getattr(a, "attn_drop", None), nn.Module)
                               for a in attns)


@contextlib.contextmanager
def capture_attention(vit: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Within the block, every forward pass of ``vit`` appends its per-layer softmax maps (B, heads, N, N) to the
    yielded list, first layer first."""
    if not is_timm_vit(vit):
        raise UserError(f"{type(vit).__name__} is not a timm VisionTransformer (no blocks[i].attn with fused_attn)")
    attns = [b.attn for b in vit.blocks]
    saved = [a.fused_attn for a in attns]
    maps: list[torch.Tensor] = []

    def hook(_module, inputs, _output):
        maps.append(inputs[0].detach())

    handles = [a.attn_drop.register_forward_hook(hook) for a in attns]
    try:
        for a in attns:
            a.fused_attn = False
        yield maps
    finally:
        for a, flag in zip(attns, saved):
            a.fused_attn = flag
        for h in handles:
            h.remove()


class TimmViTAdapter(nn.Module):
    """A timm ViT behind the suite's model interface (see the module docstring)."""

    def __init__(self, vit: nn.Module, name: str | None = None):
        super().__init__()
        if not is_timm_vit(vit):
            raise UserError(f"{type(vit).__name__} is not a timm VisionTransformer")
        prefix = int(getattr(vit, "num_prefix_tokens", 1))
        if prefix != 1 or getattr(vit, "cls_token", None) is None:
            raise UserError(f"rollout needs a ViT with exactly one class token; this one has {prefix} prefix "
                            "token(s)" + ("" if getattr(vit, "cls_token", None) is not None else " and no class token"))
        if getattr(vit, "dynamic_img_size", False):
            raise UserError("rollout of a timm ViT with dynamic_img_size is not supported (fixed grid needed)")
        pe = vit.patch_embed
        grid = tuple(int(g) for g in pe.grid_size)
        img = tuple(int(s) for s in pe.img_size)
        patch = tuple(int(p) for p in pe.patch_size)
        if grid[0] != grid[1] or img[0] != img[1] or patch[0] != patch[1]:
            raise UserError(f"rollout needs a square patch grid, got {grid} patches on {img} images")
        arch = (getattr(vit, "pretrained_cfg", None) or {}).get("architecture") or type(vit).__name__
        self.vit = vit
        self.config = ExternalViTConfig(name=name or str(arch), image_size=img[0], patch_size=patch[0],
                                        depth=len(vit.blocks), heads=int(vit.blocks[0].attn.num_heads),
                                        num_classes=int(getattr(vit, "num_classes", 0)),
                                        in_chans=int(getattr(pe.proj, "in_channels", 3)))

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, return_attention: bool = False):
        if key_padding_mask is not None:
            raise UserError("a vision model takes no key_padding_mask")
        if not return_attention:
            return self.vit(x)
        with capture_attention(self.vit) as maps:
            logits = self.vit(x)
        if len(maps) != self.config.depth:
            raise RuntimeError(f"captured {len(maps)} attention maps for {self.config.depth} blocks")
        return logits, [{"attn": m} for m in maps]


def as_rollout_model(model: nn.Module, name: str | None = None) -> nn.Module:
    """The suite's models as they are; a timm ViT wrapped in :class:`TimmViTAdapter`; anything else: UserError."""
    if isinstance(model, TimmViTAdapter) or (getattr(model, "config", None) is not None
                                             and hasattr(model.config, "attention")):
        return model
    if is_timm_vit(model):
        return TimmViTAdapter(model, name)
    raise UserError(f"rollout needs one of the suite's models or a timm VisionTransformer, got "
                    f"{type(model).__name__}")


def default_preprocess(model: nn.Module, timm_norm: bool = False) -> dict[str, Any] | None:
    """For an adapted timm ViT: raw [0, 1] input resized to its input size (the suite's one input convention,
    RobustBench's), or with ``timm_norm`` timm's normalisation too; None for the suite's own models (their
    checkpoints carry their preprocessing)."""
    if isinstance(model, TimmViTAdapter):
        if timm_norm:
            return Preprocess.from_timm(model.vit).to_record()
        return Preprocess(image_size=model.config.image_size, in_chans=model.config.in_chans).to_record()
    return None
