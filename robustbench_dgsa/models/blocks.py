"""Building blocks shared by the vision and text models: FFNs, the pre-norm block, the classifier head
(docs/METHODS.md, Models).

* GELU FFN: Linear(D -> r·D) -> GELU -> dropout -> Linear(r·D -> D)
* SwiGLU ×R: Linear(D -> R·D)+bias, split into halves a, b, SiLU(a) ⊙ b, dropout, Linear(R·D/2 -> D)+bias
* ``ffn_dropout2`` (the paper's "dropout ×2"): a second dropout after the last Linear.
* Block (pre-norm): x = x + Attn(LN(x)); x = x + FFN(LN(x)).
* Head: Linear(D -> head_hidden) -> GELU -> dropout -> Linear(head_hidden -> C), applied to the CLS vector.

Hidden widths: GELU hidden = round(r·D); SwiGLU half width = round(R·D/2), first Linear 2·half (so R = 16/3
at D = 256 gives halves of 683 and a 1366-wide first Linear).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
import torch.nn.functional as F

from robustbench_dgsa.models.attention import layer_lambda_init
from robustbench_dgsa.models.attention_registry import get_attention
from ..config import ModelConfig, gelu_hidden, swiglu_half  # the widths a config implies (checked there)

FFN_TYPES = ("gelu", "swiglu")
MODALITIES = ("image", "text")


def lambda_init_for(cfg: ModelConfig, layer_idx: int) -> float:
    """λ_init of layer ``layer_idx`` (0-based) under ``cfg.lambda_init`` / ``cfg.lambda_init_value``."""
    return layer_lambda_init(layer_idx, cfg.lambda_init, cfg.lambda_init_value)


def build_attention(cfg: ModelConfig, layer_idx: int = 0) -> nn.Module:
    """The attention layer named by ``cfg.attention`` for layer ``layer_idx`` (0-based), built from the config's
    fields (the layers themselves take explicit arguments)."""
    return get_attention(cfg.attention).build(cfg, layer_idx)


def _keep_mask(shape: torch.Size, p: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Boolean keep mask, each element kept with probability 1 − p, from the default generator.

    fp32 / fp64 activations: one 31-bit random integer r per element (``random_`` on int32), kept when
    r ≥ round(p·2³¹) — within 2⁻³² of 1 − p. bf16 / fp16 activations: four 15-bit integers per 63-bit random
    word (``random_`` on int64, read as 16-bit lanes, each lane's top bit dropped), kept when u ≥ round(p·2¹⁵) —
    within 2⁻¹⁶ of 1 − p, far inside the rounding of the bf16 scale 1/(1−p) itself (2⁻⁹ relative), and a
    quarter of the random draws, which run on one thread (a bf16 Transformer step at two threads spent 15 % of
    its time in them; ``benchmarks/MEASUREMENTS.md``). The fp32 stream is the one the committed runs used."""
    if dtype not in (torch.bfloat16, torch.float16):
        return torch.empty(shape, dtype=torch.int32, device=device).random_() >= int(round(p * 2 ** 31))
    n = shape.numel()
    words = torch.empty(-(-n // 4), dtype=torch.int64, device=device).random_()   # 63 random bits each
    lanes = words.view(torch.int16)[:n]
    return ((lanes & 0x7FFF) >= int(round(p * 2 ** 15))).view(shape)


class _CpuDropout(torch.autograd.Function):
    """Inverted dropout with a keep mask from random integers (:func:`_keep_mask`) and kept elements scaled by
    1/(1−p) — the distribution of ``nn.Dropout``. On CPU ``random_`` on integers is faster than ``bernoulli_``
    (``benchmarks/MEASUREMENTS.md``). Like PyTorch's CPU dropout it keeps the scaled float mask for the backward
    pass. Random numbers come from the default CPU generator, so ``torch.manual_seed`` makes them
    reproducible."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        keep = _keep_mask(x.shape, p, x.dtype, x.device)
        mask = keep.to(x.dtype).mul_(1.0 / (1.0 - p))
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (mask,) = ctx.saved_tensors
        return grad * mask, None


class Dropout(nn.Dropout):
    """``nn.Dropout`` that costs nothing when inactive (eval mode or p = 0) and, in training on CPU, draws its
    mask faster (:class:`_CpuDropout`; same Bernoulli(1 − p) keep distribution and 1/(1 − p) scaling). On other
    devices it is ``F.dropout``.

    Args:
        p: probability of zeroing an element (as ``nn.Dropout``).
        inplace: zero in place (then the CPU fast path is not used).
    """

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return x * 0.0
        if x.device.type == "cpu" and not self.inplace:
            return _CpuDropout.apply(x, self.p)
        return F.dropout(x, self.p, True, self.inplace)


class GeluFFN(nn.Module):
    """GELU FFN: Linear(D -> round(r·D)) -> GELU -> dropout -> Linear(-> D) [-> dropout].

    Args:
        dim: model width D.
        ratio: hidden width as a multiple r of D.
        dropout: dropout probability after the activation (and after the last Linear with ``dropout2``).
        dropout2: the paper's "dropout ×2": a second dropout after the last Linear.
    """

    def __init__(self, dim: int, ratio: float, dropout: float, dropout2: bool = False) -> None:
        super().__init__()
        hidden = gelu_hidden(dim, ratio)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop = Dropout(dropout)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = Dropout(dropout) if dropout2 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return self.drop2(self.fc2(self.drop(self.act(self.fc1(x)))))


class SwiGLUFFN(nn.Module):
    """SwiGLU FFN ×R: Linear(D -> 2·round(R·D/2)), halves a, b, SiLU(a) ⊙ b -> dropout -> Linear(-> D) [-> dropout].

    Args:
        dim: model width D.
        ratio: width R of the first Linear as a multiple of D (the paper's "proj.": 2, 4 or 16/3).
        dropout: dropout probability after the gated product (and after the last Linear with ``dropout2``).
        dropout2: the paper's "dropout ×2": a second dropout after the last Linear.
    """

    def __init__(self, dim: int, ratio: float, dropout: float, dropout2: bool = False) -> None:
        super().__init__()
        half = swiglu_half(dim, ratio)
        self.fc1 = nn.Linear(dim, 2 * half)
        self.drop = Dropout(dropout)
        self.fc2 = nn.Linear(half, dim)
        self.drop2 = Dropout(dropout) if dropout2 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        a, b = self.fc1(x).chunk(2, dim=-1)
        return self.drop2(self.fc2(self.drop(F.silu(a) * b)))


def build_ffn(cfg: ModelConfig) -> nn.Module:
    cls = GeluFFN if cfg.ffn == "gelu" else SwiGLUFFN
    return cls(cfg.dim, cfg.ffn_ratio, cfg.dropout, cfg.ffn_dropout2)


class Block(nn.Module):
    """Pre-norm transformer block: x = x + Attn(LN(x)); x = x + FFN(LN(x)).

    Args:
        cfg: the model config (width, attention type and its options, FFN type, ratio and dropout).
        layer_idx: 0-based depth of the block (sets the attention's λ_init under the "layer" schedule).
    """

    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = build_attention(cfg, layer_idx)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.ffn = build_ffn(cfg)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, return_maps: bool = False,
                queries: int | None = None):
        """``queries``: outputs for the first ``queries`` tokens only (attention still reads every token)."""
        out = self.attn(self.norm1(x), key_padding_mask, return_maps, queries)
        maps = None
        if return_maps:
            out, maps = out
        if queries is not None:
            x = x[:, :queries]
        x = x + out
        x = x + self.ffn(self.norm2(x))
        return (x, maps) if return_maps else x


class ClassifierHead(nn.Module):
    """Linear(D -> head_hidden) -> GELU -> dropout -> Linear(head_hidden -> C) on the CLS vector.

    Args:
        cfg: the model config (``dim``, ``head_hidden``, ``dropout``, ``num_classes``).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.dim, cfg.head_hidden)
        self.act = nn.GELU()
        self.drop = Dropout(cfg.dropout)
        self.fc2 = nn.Linear(cfg.head_hidden, cfg.num_classes)

    def forward(self, cls: Tensor) -> Tensor:
        return self.fc2(self.drop(self.act(self.fc1(cls))))


class ClassifierBase(nn.Module):
    """Common tail of both model families: CLS + positions already added; run blocks, read CLS, classify."""

    config: ModelConfig
    num_tokens: int
    #: the classifier reads only the CLS vector, so the last block needs only the CLS row: its attention
    #: queries, output projection and FFN run on that one token (same logits and gradients, ~1/depth less
    #: work). Off on the explicit path (``set_attention_impl("explicit")``) and whenever maps are returned.
    cls_only_last_block: bool = True
    #: the eval-mode forward draws no random numbers and changes no state, so evaluation on the CPU may run
    #: several forward calls at once in threads (``engine.predict.cpu_forward_workers``); a model a user brings
    #: declares the same attribute to get it
    concurrent_forward: bool = True

    @property
    def activations_per_example(self) -> int:
        """Elements of one layer's activations for one example (tokens × width): how many examples a CPU
        forward call gets in evaluation (``engine.predict.cpu_call_examples``); a model a user brings may
        declare the same attribute."""
        return int(self.num_tokens) * int(self.config.dim)

    def _init_tokens_and_blocks(self, cfg: ModelConfig) -> None:
        """CLS token and learned positions for ``self.num_tokens`` tokens (truncated normal, std 0.02), their
        dropout, then the blocks and the head (called after the model's own embedding, in this order)."""
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_tokens, cfg.dim))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.pos_drop = Dropout(cfg.dropout)
        self._init_blocks(cfg)

    def _init_blocks(self, cfg: ModelConfig) -> None:
        self.blocks = nn.ModuleList([Block(cfg, i) for i in range(cfg.depth)])
        self.head = ClassifierHead(cfg)

    def _encode(self, x: Tensor, key_padding_mask: Tensor | None, return_attention: bool):
        maps: list[dict[str, Tensor]] = []
        last = len(self.blocks) - 1
        for i, blk in enumerate(self.blocks):
            if return_attention:
                x, m = blk(x, key_padding_mask, True)
                maps.append(m)
            else:
                x = blk(x, key_padding_mask, False, 1 if i == last and self.cls_only_last_block else None)
        logits = self.head(x[:, 0])
        return (logits, maps) if return_attention else logits

    def no_weight_decay(self) -> set[str]:
        """Names of the parameters AdamW should not decay when biases and normalisation weights are exempt
        (``train.decay_bias_and_norm = false``): every bias (``bias``, ``*_bias``) and every parameter of a
        normalisation layer (LayerNorm, the heads' RMSNorm)."""
        names: set[str] = set()
        for prefix, module in self.named_modules():
            is_norm = isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm)) \
                or "norm" in type(module).__name__.lower()
            for name, _ in module.named_parameters(recurse=False):
                if name == "bias" or name.endswith("_bias") or is_norm:
                    names.add(f"{prefix}.{name}" if prefix else name)
        return names

    def set_attention_impl(self, impl: str) -> "ClassifierBase":
        """"fused" (fast kernels, CLS-only last block; default) or "explicit" (forms the maps, full last block)
        for every layer."""
        from robustbench_dgsa.models.attention import set_attention_impl
        set_attention_impl(self, impl)
        self.cls_only_last_block = impl == "fused"
        return self
