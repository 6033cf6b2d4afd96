"""Sigmoid attention (Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid Self-Attention"):
softmax replaced by an element-wise sigmoid(Q Kᵀ/√d + b), b = −log N by default, and SigViT, a ViT built on it.
A dgsa-bench plugin: public names only (robustbench_dgsa.models)."""
import math

import torch
from torch import nn

from robustbench_dgsa.models import apply_model_overrides, get_model_config, register_attention, register_model


@register_attention("sigmoid", rollout_mode="positive", display_name="Sigmoid", colour="#D55E00")
class SigmoidAttention(nn.Module):
    def __init__(self, dim: int, heads: int, layer_idx: int = 0, bias: float | None = None) -> None:
        super().__init__()
        self.heads, self.head_dim, self.bias = heads, dim // heads, bias   # bias None: −log N (the paper's)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None, return_maps=False, queries=None):
        B, N, D = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q = q[:, :, :queries] if queries else q                            # the CLS-only last block asks for 1
        b = -math.log(N) if self.bias is None else self.bias
        a = torch.sigmoid(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + b)
        if key_padding_mask is not None:                                   # padded keys get weight 0
            a = a.masked_fill(key_padding_mask.bool()[:, None, None, :], 0.0)
        y = self.proj((a @ v).transpose(1, 2).reshape(B, q.shape[2], D))
        return (y, {"attn": a}) if return_maps else y


@register_model(display_name="SigViT")
def sigvit():
    """SigViT: ViT (GELU FFN ×4) with sigmoid attention."""
    return apply_model_overrides(get_model_config("vit"), name="sigvit", attention="sigmoid")
