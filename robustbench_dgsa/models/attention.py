"""Self-attention mechanisms side by side: MHSA, DiffAttn (Ye et al. 2024) and DGSA (this suite's subject).

docs/METHODS.md, Models (Attention), in code. Notation: input X (B, N, D), h heads.

* :class:`MultiheadSelfAttention` (``attention="mhsa"``): W_qkv D->3D with bias, W_o D->D with bias,
  head dim d_h = D/h, map softmax(Q Kᵀ/√d_h).
* :class:`DifferentialAttention` (``"diff"``): W_q, W_k, W_v, W_o D->D without bias. Each head has two
  query/key branches of width d' = D/(2h) and one value of width 2d'. Maps A1, A2 = softmax(Q_i K_iᵀ/√d'),
  combination (A1 − λ A2) V with λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init (four vectors in R^d', init
  N(0, 0.1), one λ per layer shared by the heads). Head outputs: RMSNorm over 2d' (eps 1e-5, one affine
  weight shared by the heads), times (1 − λ_init), concatenated, W_o.
* :class:`GatedDifferentialAttention` (``"dgsa"``): DiffAttn's projections and head norm, no learnable λ;
  combination (g ⊙ A+ − (1−g) ⊙ A−) V with g = σ(X W_g + b_g), W_g: D->h (one gate per query token and
  head). Optional residual from the queries: Y = Q + O W_o (``q_residual``).

Head layout (as in the reference DiffAttn code): the D outputs of W_q / W_k are read as (h, 2, d'), i.e. head i's
branches are the consecutive sub-heads 2i (A1 / A+) and 2i+1 (A2 / A−); W_v's outputs are read as (h, 2d').

Two numerically equivalent paths:

* fused (default): the fastest kernel for the device and sequence length (``kernel``, see below), typically
  ``scaled_dot_product_attention`` calls that never form the N×N maps. The gate and λ are scalars per (query
  row, head), so (g A+ − (1−g) A−) V = g (A+ V) − (1−g) (A− V): one SDPA call per branch sharing the 2d'-wide
  V ("sdpa"), or, where a kernel needs equal head dims (PyTorch's CPU flash kernel), V in two d' halves
  ("sdpa-split"). A key-padding mask goes into the same calls as a boolean ``attn_mask``. Short sequences on
  CPU use "math": the explicit path's products without returning the maps.
* explicit: forms softmax maps, masks padded keys with −inf (so they get exactly 0 weight), combines them and
  multiplies by V; returns the maps for rollout and analysis.

In float64 both paths agree to ~1e-15 (outputs and gradients); ``tests/models/test_attention.py`` checks ≤1e-10.
Attention dropout is not used (the methods have none), which keeps the two paths identical in training mode too.

Kernel choice on the fast path (``kernel="auto"``, see :func:`choose_kernel`): the maps' maths is also a kernel —
"math" runs the explicit path's products without returning the maps. On the CPU, for DiffAttn / DGSA, "math"
is used at 65 tokens in training, SDPA with a shared V at 129 tokens, SDPA with V split at 257; without
gradients "math" and "split" tie at 65 tokens and "split" wins above (the measurements:
``benchmarks/MEASUREMENTS.md``). For MHSA SDPA is as fast as the explicit maths in
training at 65 tokens and faster everywhere else, so MHSA always uses SDPA in float32. Under CPU bf16 autocast
(``amp`` resolved to bf16) the order changes: SDPA's CPU flash kernel computes its backward slowly in bf16, so
training and evaluation use "math" for every mechanism up to 257 tokens; without gradients it runs over chunks
of the batch whose maps fit in the cache (MHSA's evaluation: 1.3× SDPA's throughput at a ViT's 65 tokens and
1.2-1.3× at 256 text tokens), with them over equal chunks once the maps exceed 2^23 elements (text models'
training at 257 tokens: 1.15-1.6× one call). On CUDA SDPA is always used.
The differential models' Q, K, V (and DGSA's gate) come from one GEMM over the concatenated weights; the
parameters (and so state dicts and checkpoints) stay separate Linear layers.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ATTENTION_TYPES = ("mhsa", "diff", "dgsa")
LAMBDA_INIT_MODES = ("layer", "fixed", "learnable")
GATE_BIAS_INITS = ("default", "diff")

Maps = dict[str, Tensor]


def layer_lambda_init(layer_idx: int, mode: str = "layer", value: float = 0.8) -> float:
    """λ_init of layer ``layer_idx`` (0-based): 0.8 − 0.6·exp(−0.3·l) (``mode="layer"``, the DiffAttn paper's
    schedule) or ``value`` (``mode="fixed"``; ``"learnable"``: the starting value of a per-layer parameter)."""
    if mode == "layer":
        return 0.8 - 0.6 * math.exp(-0.3 * layer_idx)
    if mode in ("fixed", "learnable"):
        return float(value)
    raise ValueError(f"lambda_init must be one of {LAMBDA_INIT_MODES}, got {mode!r}")


class HeadRMSNorm(nn.Module):
    """RMSNorm over the last dim (2d' per head); one affine weight shared by all heads. Computed in float32
    (or float64) even under bf16 autocast.

    Args:
        dim: width of the normalised (last) dimension, 2d' for a differential head.
        eps: added to the mean square before the square root.
    """

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def normalize(self, x: Tensor) -> Tensor:
        """x / RMS(x) over the last dim, without the affine weight."""
        xf = x if x.dtype in (torch.float32, torch.float64) else x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.normalize(x) * self.weight.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


KERNELS = ("auto", "sdpa", "math")
# CPU crossovers (tokens incl. CLS) for DiffAttn / DGSA; see the module docstring for the measurements
CPU_MATH_MAX_TOKENS_TRAIN = 96
CPU_SHARED_MAX_TOKENS_TRAIN = 192
CPU_MATH_MAX_TOKENS_INFER = 80


#: under CPU bf16 autocast the explicit maths beats SDPA's CPU flash kernel (its bf16 backward above all) in
#: training and (chunked, without gradients) in evaluation for every mechanism, measured up to this many tokens
CPU_BF16_MATH_MAX_TOKENS = 257


def cpu_bf16_autocast() -> bool:
    """True inside ``torch.autocast("cpu", dtype=torch.bfloat16)`` (the suite's bf16 precision on the CPU)."""
    return torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16


def choose_kernel(kind: str, device: torch.device, n_tokens: int, grad: bool) -> str:
    """Fast-path kernel for attention ``kind`` at ``n_tokens`` tokens: "math" (explicit products, no maps
    returned), "sdpa" (MHSA; DiffAttn/DGSA with a shared 2d'-wide V) or "sdpa-split" (V in two d' halves).
    Under CPU bf16 autocast "math" up to :data:`CPU_BF16_MATH_MAX_TOKENS` tokens, for every mechanism."""
    if device.type != "cpu":
        return "sdpa"
    if n_tokens <= CPU_BF16_MATH_MAX_TOKENS and cpu_bf16_autocast():
        return "math"
    if kind == "mhsa":
        return "sdpa"
    if grad:
        if n_tokens <= CPU_MATH_MAX_TOKENS_TRAIN:
            return "math"
        return "sdpa" if n_tokens <= CPU_SHARED_MAX_TOKENS_TRAIN else "sdpa-split"
    return "math" if n_tokens <= CPU_MATH_MAX_TOKENS_INFER else "sdpa-split"


#: bytes to which fused attention kernels on accelerators need every row of Q, K and V aligned
SDPA_ALIGN_BYTES = 16


def sdpa_aligned(t: Tensor) -> Tensor:
    """``t`` itself, or a contiguous copy where a fused kernel on an accelerator could not read it: a row stride
    or start offset that is not a multiple of :data:`SDPA_ALIGN_BYTES`. DGSA's Q and K are views into one GEMM
    output whose rows are 3D + h wide (the gate logits ride along), so at D=32, h=2 they are 98 bf16 elements:
    on an H200 with torch 2.11, cuDNN attention then failed ("misaligned address", poisoning the CUDA context)
    and the memory-efficient kernel refused ("query is not correctly aligned"). A copy costs O(B·N·D), the
    attention O(B·N²·D). CPU tensors are returned as they are (the CPU kernels read any stride)."""
    if t.device.type == "cpu":
        return t
    align = max(1, SDPA_ALIGN_BYTES // t.element_size())
    if t.storage_offset() % align or any(s % align for s in t.stride()[:-1]) or t.stride(-1) != 1:
        return t.contiguous()
    return t


def _sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float) -> Tensor:
    """``F.scaled_dot_product_attention`` on inputs aligned for the accelerators' fused kernels."""
    return F.scaled_dot_product_attention(sdpa_aligned(q), sdpa_aligned(k), sdpa_aligned(v), attn_mask=mask,
                                          scale=scale)


# score-map elements per chunk of the no-grad "math" kernel: 2 maps x 8 heads x 65² x 7 images = 0.47M floats,
# 1.9 MB, inside a 4 MB L2 (measured at 65 tokens: 2^18-2^20 cost the same, the whole batch ~25 % more)
_MAPS_PER_CHUNK = 1 << 19
# ... and of MHSA's: under CPU bf16 at 256 tokens, 2^20 (4 sequences of 4 heads) evaluates 1.2-1.3x faster than
# SDPA and than the unchunked products, 2^18 in between (benchmarks/MEASUREMENTS.md)
_MHSA_MAPS_PER_CHUNK = 1 << 20
# ... and with autograd on the CPU (both kinds): a batch whose maps exceed 2^23 elements runs in equal chunks,
# concatenated. Measured under bf16 at 257 tokens, two threads, batch 32 (two chunks of 16): DT / DGT train
# 1.5x, the Transformer 1.15x faster than one call, and steadier between runs; 2^22 the same. At the zoo's
# image sizes (batch 128, 65 tokens) the maps stay under 2^23, so their training is not chunked.
_GRAD_MAPS_PER_CHUNK = 1 << 23


def _batch_rows(c: Any, rows: slice) -> Any:
    """Rows ``rows`` of a per-image tensor (a coefficient (B, h, N, 1), a padding mask); scalars, 0-dim tensors
    and None as they are."""
    return c[rows] if isinstance(c, Tensor) and c.dim() > 0 else c


def _in_batch_chunks(rows_out: Callable[[slice], Tensor], batch: int, maps_per_item: int, budget: int,
                     device: torch.device) -> Tensor:
    """The "math" kernels' batch loop: ``rows_out(rows)`` is the attention output of those batch rows. When the
    whole batch's maps (``maps_per_item`` elements each) fit in the budget, one call. Without autograd, over
    chunks whose maps fit in ``budget`` (cache-sized), written into one output; with autograd on the CPU, over
    equal chunks within :data:`_GRAD_MAPS_PER_CHUNK`, concatenated (elsewhere one call)."""
    if torch.is_grad_enabled():
        if device.type != "cpu" or batch * maps_per_item <= _GRAD_MAPS_PER_CHUNK:
            return rows_out(slice(None))
        pieces = -(-batch * maps_per_item // _GRAD_MAPS_PER_CHUNK)
        step = -(-batch // min(pieces, batch))
        return torch.cat([rows_out(slice(s, s + step)) for s in range(0, batch, step)])
    step = max(1, budget // maps_per_item)
    if step >= batch:
        return rows_out(slice(None))
    first = rows_out(slice(0, step))
    out = first.new_empty((batch, *first.shape[1:]))
    out[:step] = first
    for s in range(step, batch, step):
        out[s:s + step] = rows_out(slice(s, s + step))
    return out


def _sdpa_mask(key_padding_mask: Tensor | None) -> Tensor | None:
    """(B, N) True = padding  ->  (B, 1, 1, N) boolean attn_mask, True = may attend (SDPA's convention)."""
    if key_padding_mask is None:
        return None
    return (~key_padding_mask.bool())[:, None, None, :]


def _softmax_map(q: Tensor, k: Tensor, scale: float, key_padding_mask: Tensor | None) -> Tensor:
    """Explicit softmax(q kᵀ · scale) over keys; padded keys get −inf scores, hence exactly 0 weight."""
    scores = torch.matmul(q, k.transpose(-2, -1))
    if scale != 1.0:
        scores = scores * scale
    if key_padding_mask is not None:   # (B, 1, ..., 1, N): batch leading, broadcast over heads, branches, queries
        mask = key_padding_mask.bool().view(scores.shape[0], *([1] * (scores.dim() - 2)), scores.shape[-1])
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


class MultiheadSelfAttention(nn.Module):
    """Vanilla multi-head self-attention (``attention="mhsa"``)."""

    kind = "mhsa"

    def __init__(self, dim: int, heads: int, layer_idx: int = 0) -> None:
        """Args:
            dim: model width D (divisible by ``heads``).
            heads: number of heads h (head width D/h).
            layer_idx: 0-based depth of the layer (recorded; MHSA does not depend on it).
        """
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.dim, self.heads, self.layer_idx = dim, heads, layer_idx
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.fused = True  # False: explicit path even when no maps are requested (benchmarks, tests)
        self.kernel = "auto"  # fast-path kernel: "auto" (choose_kernel), "sdpa" or "math"
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def _qkv(self, x: Tensor, queries: int | None) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, h, Nq, d_h) for the first ``queries`` tokens (all when None), k and v (B, h, N, d_h)."""
        B, N, D = x.shape
        h, hd = self.heads, self.head_dim
        if queries is None or queries >= N:
            q, k, v = self.qkv(x).view(B, N, 3, h, hd).permute(2, 0, 3, 1, 4).unbind(0)
            return q, k, v
        w, b = self.qkv.weight, self.qkv.bias
        q = F.linear(x[:, :queries], w[:D], b[:D]).view(B, queries, h, hd).transpose(1, 2)
        k, v = F.linear(x, w[D:], b[D:]).view(B, N, 2, h, hd).permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, return_maps: bool = False,
                queries: int | None = None) -> Tensor | tuple[Tensor, Maps]:
        """``queries``: compute the outputs of the first ``queries`` tokens only (keys/values: all tokens)."""
        B, N, D = x.shape
        q, k, v = self._qkv(x, queries)
        maps: Maps = {}
        kernel = self.kernel if self.kernel != "auto" else choose_kernel(self.kind, x.device, N,
                                                                           torch.is_grad_enabled())
        if self.fused and not return_maps and kernel != "math":
            o = _sdpa(q, k, v, _sdpa_mask(key_padding_mask), self.scale)
        elif self.fused and not return_maps:
            o = self._math(q, k, v, key_padding_mask)
        else:
            a = _softmax_map(q, k, self.scale, key_padding_mask)
            o = torch.matmul(a, v)
            if return_maps:
                maps = {"attn": a}
        y = self.proj(o.transpose(1, 2).reshape(B, q.shape[2], D))
        return (y, maps) if return_maps else y

    def _math(self, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None) -> Tensor:
        """The "math" kernel: softmax(QKᵀ)V without returning the map, over chunks of the batch
        (:func:`_in_batch_chunks`: cache-sized without autograd, :data:`_GRAD_MAPS_PER_CHUNK` with it on the
        CPU); each image's products are the same, so are the values (up to the BLAS kernel's last bits). The
        scale 1/√d_h multiplies Q (N·d_h products per head) instead of the scores (N²): under CPU bf16, 3-7 %
        faster (Transformer, ViT; two threads, interleaved)."""
        q = q * self.scale

        def rows_out(rows: slice) -> Tensor:
            return torch.matmul(_softmax_map(q[rows], k[rows], 1.0, _batch_rows(key_padding_mask, rows)), v[rows])
        return _in_batch_chunks(rows_out, q.shape[0], self.heads * q.shape[2] * k.shape[2], _MHSA_MAPS_PER_CHUNK,
                                q.device)


class _DifferentialBase(nn.Module):
    """Shared parts of DiffAttn and DGSA: bias-free projections, two branches per head, head RMSNorm."""

    kind = ""

    def __init__(self, dim: int, heads: int, layer_idx: int = 0, lambda_init: float | None = None, *,
                 q_residual: bool = False, learnable_lambda_init: bool = False) -> None:
        """Args:
            dim: model width D (divisible by 2·``heads``: each head has two branches of width d' = D/(2h)).
            heads: number of heads h.
            layer_idx: 0-based depth of the layer.
            lambda_init: λ_init of this layer; default the DiffAttn schedule 0.8 − 0.6·exp(−0.3·layer_idx).
            q_residual: add the (un-attended) queries to the layer's output, Y = Q + O W_o.
            learnable_lambda_init: λ_init is a trained scalar parameter of the layer (``lambda_init_param``),
                starting at ``lambda_init`` (the paper's appendix B.5 ablation); default a constant.
        """
        super().__init__()
        if dim % (2 * heads):
            raise ValueError(f"dim {dim} is not divisible by 2*heads = {2 * heads} "
                             f"(differential attention uses d' = D/(2h))")
        self.dim, self.heads, self.layer_idx = dim, heads, layer_idx
        self.branch_dim = dim // (2 * heads)          # d'
        self.scale = self.branch_dim ** -0.5
        self.lambda_init = float(lambda_init) if lambda_init is not None else layer_lambda_init(layer_idx)
        self.q_residual = bool(q_residual)
        self.lambda_init_param = nn.Parameter(torch.tensor(self.lambda_init)) if learnable_lambda_init else None
        self.fused = True
        # fast-path kernel: "math" = the explicit products without returning maps; "sdpa" = one SDPA call per
        # branch with the whole 2d'-wide V; "sdpa-split" = V in two d' halves, two calls per branch (for kernels
        # that need equal head dims, e.g. PyTorch's CPU flash kernel); "auto" = choose_kernel (device, tokens).
        self.kernel = "auto"
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        self.subln = HeadRMSNorm(2 * self.branch_dim, eps=1e-5)

    # -- subclass hooks ---------------------------------------------------------------------------------
    def _extra_rows(self) -> tuple[Tensor, Tensor] | None:
        """(weight, bias) of extra outputs computed in the same GEMM as Q, K, V (DGSA: the gate logits)."""
        return None

    def _coefficients(self, extra: Tensor | None, dtype: torch.dtype) -> tuple[Any, Any, Maps]:
        """(c_pos, c_neg, extra maps): output = c_pos·(A_pos V) − c_neg·(A_neg V); c_* broadcast to (B,h,N,1).
        ``extra``: the outputs of :meth:`_extra_rows`' rows, (B, N, rows)."""
        raise NotImplementedError

    def current_lambda_init(self) -> float | Tensor:
        """λ_init as the layer uses it now: the constant, or the trained parameter (``learnable_lambda_init``)."""
        return self.lambda_init if self.lambda_init_param is None else self.lambda_init_param

    @staticmethod
    def _combine(pos: Tensor, neg: Tensor, c_pos: Any, c_neg: Any) -> Tensor:
        """c_pos·pos − c_neg·neg (maps or map-times-V outputs)."""
        return c_pos * pos - c_neg * neg

    # -- forward ----------------------------------------------------------------------------------------
    def _project(self, x: Tensor, queries: int | None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """x W_qᵀ, x W_kᵀ/√d', x W_vᵀ (and the extra rows' outputs) from one GEMM over the concatenated weights
        (Q and the extra rows for the first ``queries`` tokens only when given). The score scale 1/√d' is
        folded into W_k (D² multiplies instead of 2·B·h·N² on the scores). The extra rows' bias is added to
        their few output columns afterwards: a bias in the GEMM itself (addmm) first copies the broadcast bias
        into the whole (B·N, 3D + extra) output."""
        D = self.dim
        wq, wk, wv = self.q_proj.weight, self.k_proj.weight * self.scale, self.v_proj.weight
        extra_rows = self._extra_rows()
        n_extra = 0 if extra_rows is None else extra_rows[0].shape[0]
        if queries is not None and queries < x.shape[1]:
            k, v = F.linear(x, torch.cat([wk, wv])).split(D, dim=-1)
            xq = x[:, :queries]
            if extra_rows is None:
                return F.linear(xq, wq), k, v, None
            q, extra = F.linear(xq, torch.cat([wq, extra_rows[0]])).split([D, n_extra], dim=-1)
            return q, k, v, extra + extra_rows[1].to(extra.dtype)
        if extra_rows is None:
            q, k, v = F.linear(x, torch.cat([wq, wk, wv])).split(D, dim=-1)
            return q, k, v, None
        q, k, v, extra = F.linear(x, torch.cat([wq, wk, wv, extra_rows[0]])).split([D, D, D, n_extra], dim=-1)
        return q, k, v, extra + extra_rows[1].to(extra.dtype)

    def _branch(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, split: bool) -> Tensor:
        """softmax(q kᵀ/√d') V by SDPA without forming the map."""
        if not split:
            return _sdpa(q, k, v, mask, 1.0)   # k carries 1/√d'
        va, vb = v.split(self.branch_dim, dim=-1)
        return torch.cat([_sdpa(q, k, va, mask, 1.0), _sdpa(q, k, vb, mask, 1.0)], dim=-1)

    def _math(self, q: Tensor, k: Tensor, v: Tensor, c_pos: Any, c_neg: Any,
              key_padding_mask: Tensor | None) -> Tensor:
        """The "math" kernel: the explicit path's products without returning the maps, over chunks of the batch
        (:func:`_in_batch_chunks`). Without autograd the chunks' two score maps fit in the L2 cache (the whole
        batch's do not: 64 images × 8 heads × 2 × 65² floats are 17 MB); with it on the CPU, chunks within
        :data:`_GRAD_MAPS_PER_CHUNK`. Each image's products are the same, so are the values (up to the BLAS
        kernel's last bits)."""
        def rows_out(rows: slice) -> Tensor:
            return self._math_rows(q[rows], k[rows], v[rows], _batch_rows(c_pos, rows), _batch_rows(c_neg, rows),
                                   _batch_rows(key_padding_mask, rows))
        return _in_batch_chunks(rows_out, v.shape[0], 2 * self.heads * q.shape[3] * k.shape[3], _MAPS_PER_CHUNK,
                                v.device)

    def _math_rows(self, q: Tensor, k: Tensor, v: Tensor, c_pos: Any, c_neg: Any,
                   key_padding_mask: Tensor | None) -> Tensor:
        """Maps laid out (B, h, 2, Nq, N): both branches are rows of one (2·Nq, N) matrix per head, so one
        product with the head's V serves both (no copy of V per branch), combined on the outputs."""
        h, Nq, N, dv = self.heads, q.shape[3], k.shape[3], v.shape[-1]
        maps = _softmax_map(q, k, 1.0, key_padding_mask)   # k carries 1/√d'
        o = torch.matmul(maps.view(-1, h, 2 * Nq, N), v).view(-1, h, 2, Nq, dv)
        o_pos, o_neg = o.unbind(2)   # (unbind's backward stacks the two gradients; two selects would zero-fill twice)
        return self._combine(o_pos, o_neg, c_pos, c_neg)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None, return_maps: bool = False,
                queries: int | None = None) -> Tensor | tuple[Tensor, Maps]:
        """``queries``: compute the outputs of the first ``queries`` tokens only (keys/values: all tokens)."""
        B, N, D = x.shape
        h, dp = self.heads, self.branch_dim
        q_flat, k_flat, v_flat, extra = self._project(x, queries)
        Nq = q_flat.shape[1]
        # (B, N, h, 2, d') -> (B, h, 2, N, d'): branch 0 = A1 / A+, branch 1 = A2 / A-
        q = q_flat.view(B, Nq, h, 2, dp).permute(0, 2, 3, 1, 4)
        k = k_flat.view(B, N, h, 2, dp).permute(0, 2, 3, 1, 4)
        v = v_flat.view(B, N, h, 2 * dp).transpose(1, 2)   # (B, h, N, 2d')
        c_pos, c_neg, extra_maps = self._coefficients(extra, x.dtype)
        kernel = self.kernel if self.kernel != "auto" else choose_kernel(self.kind, x.device, N,
                                                                           torch.is_grad_enabled())
        maps: Maps = {}
        if self.fused and not return_maps and kernel != "math":
            mask = _sdpa_mask(key_padding_mask)
            split = kernel == "sdpa-split"
            o = self._combine(self._branch(q[:, :, 0], k[:, :, 0], v, mask, split),
                              self._branch(q[:, :, 1], k[:, :, 1], v, mask, split),
                              c_pos, c_neg)
        elif self.fused and not return_maps:
            o = self._math(q, k, v, c_pos, c_neg, key_padding_mask)
        else:
            a_pos, a_neg = _softmax_map(q, k, 1.0, key_padding_mask).unbind(2)   # both branches; k carries 1/√d'
            a = self._combine(a_pos, a_neg, c_pos, c_neg)
            o = torch.matmul(a, v)
            if return_maps:
                maps = {"attn": a, "a_pos": a_pos, "a_neg": a_neg, **extra_maps}
        # head RMSNorm; its affine weight (shared by the heads) and (1 − λ_init) scale W_o's columns instead
        col_scale = (self.subln.weight * (1.0 - self.current_lambda_init())).repeat(h)
        y = F.linear(self.subln.normalize(o).transpose(1, 2).reshape(B, Nq, D), self.out_proj.weight * col_scale)
        if self.q_residual:
            y = y + q_flat
        return (y, maps) if return_maps else y


class DifferentialAttention(_DifferentialBase):
    """Multi-head differential attention (``attention="diff"``): (A1 − λ A2) V, λ learnable, shared by heads."""

    kind = "diff"

    def __init__(self, dim: int, heads: int, layer_idx: int = 0, lambda_init: float | None = None, *,
                 q_residual: bool = False, learnable_lambda_init: bool = False) -> None:
        """λ's four vectors are drawn from N(0, 0.1²).

        Args:
            dim: model width D (divisible by 2·``heads``: each head has two branches of width d' = D/(2h)).
            heads: number of heads h.
            layer_idx: 0-based depth of the layer.
            lambda_init: λ_init of this layer; default the DiffAttn schedule 0.8 − 0.6·exp(−0.3·layer_idx).
            q_residual: add the (un-attended) queries to the layer's output, Y = Q + O W_o (DGViT's residual;
                with λ_init fixed at 0.8 this is DGViT's gate-less twin).
            learnable_lambda_init: λ_init is a trained scalar parameter, starting at ``lambda_init``.
        """
        super().__init__(dim, heads, layer_idx, lambda_init, q_residual=q_residual,
                         learnable_lambda_init=learnable_lambda_init)
        self.lambda_q1 = nn.Parameter(torch.empty(self.branch_dim).normal_(0.0, 0.1))
        self.lambda_k1 = nn.Parameter(torch.empty(self.branch_dim).normal_(0.0, 0.1))
        self.lambda_q2 = nn.Parameter(torch.empty(self.branch_dim).normal_(0.0, 0.1))
        self.lambda_k2 = nn.Parameter(torch.empty(self.branch_dim).normal_(0.0, 0.1))

    def lambda_value(self) -> Tensor:
        """λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init (0-dim tensor)."""
        l1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1))
        l2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2))
        return l1 - l2 + self.current_lambda_init()

    def _coefficients(self, extra: Tensor | None, dtype: torch.dtype) -> tuple[Any, Any, Maps]:
        lam = self.lambda_value().to(dtype)
        return 1.0, lam, {"lambda": lam}


class GatedDifferentialAttention(_DifferentialBase):
    """Multi-head differential gated self-attention (``attention="dgsa"``): (g A+ − (1−g) A−) V."""

    kind = "dgsa"

    def __init__(self, dim: int, heads: int, layer_idx: int = 0, lambda_init: float | None = None, *,
                 q_residual: bool = False, gate_bias_init: str = "default",
                 learnable_lambda_init: bool = False) -> None:
        """Args:
            dim: model width D (divisible by 2·``heads``: each head has two branches of width d' = D/(2h)).
            heads: number of heads h.
            layer_idx: 0-based depth of the layer.
            lambda_init: λ_init of this layer; default the DiffAttn schedule 0.8 − 0.6·exp(−0.3·layer_idx).
            q_residual: add the (un-attended) queries to the layer's output, Y = Q + O W_o.
            gate_bias_init: "default" (PyTorch's Linear init) or "diff" (W_g = 0, b_g = −log λ_init: the gate
                starts as DiffAttn's combination, up to a scale).
            learnable_lambda_init: λ_init (here only the head outputs' (1 − λ_init) scale) is a trained scalar
                parameter starting at ``lambda_init`` (the paper's appendix B.5 ablation).
        """
        super().__init__(dim, heads, layer_idx, lambda_init, q_residual=q_residual,
                         learnable_lambda_init=learnable_lambda_init)
        self.gate = nn.Linear(dim, heads, bias=True)   # W_g, b_g: one gate per (token, head)
        self.gate_bias_init = gate_bias_init
        if gate_bias_init == "diff":
            # g = 1/(1+λ_init) for every token: g A+ − (1−g) A− = (A+ − λ_init A−)/(1+λ_init), DiffAttn's
            # combination up to a scale the head RMSNorm removes. W_g starts at 0 so this holds exactly.
            with torch.no_grad():
                self.gate.weight.zero_()
                self.gate.bias.fill_(-math.log(self.lambda_init))   # logit(1/(1+λ)) = −log λ
        elif gate_bias_init != "default":
            raise ValueError(f"gate_bias_init must be one of {GATE_BIAS_INITS}, got {gate_bias_init!r}")

    def gate_values(self, x: Tensor) -> Tensor:
        """g = σ(X W_g + b_g) as (B, h, N)."""
        return torch.sigmoid(self.gate(x)).transpose(1, 2)

    def _extra_rows(self) -> tuple[Tensor, Tensor]:
        return self.gate.weight, self.gate.bias               # gate logits X W_gᵀ + b_g in the Q/K/V GEMM

    def _coefficients(self, extra: Tensor | None, dtype: torch.dtype) -> tuple[Any, Any, Maps]:
        g = torch.sigmoid(extra).transpose(1, 2)                # (B, h, N)
        g4 = g.unsqueeze(-1)                                    # (B, h, N, 1): scales query rows
        return g4, 1.0 - g4, {"gate": g}

    @staticmethod
    def _combine(pos: Tensor, neg: Tensor, c_pos: Any, c_neg: Any) -> Tensor:
        """g·pos − (1−g)·neg as one lerp from −neg to pos with weight g (c_pos = g, c_neg = 1 − g). lerp wants
        the weight in the maps' dtype: under CUDA autocast the explicit maps come out of softmax in float32 while
        g is bfloat16 (on an H200 the explicit path failed: "expected dtype float for `weight`"). In bf16 / fp16
        the weight is expanded to the maps' shape first: the CPU's reduced-precision lerp with a broadcast weight
        is ~3x slower than with a full one (the same values to within one rounding, bit for bit where measured; in
        float32 the broadcast one is faster)."""
        weight = c_pos.to(pos.dtype)
        if pos.dtype in (torch.bfloat16, torch.float16) and weight.shape != pos.shape:
            weight = weight.expand_as(pos).contiguous()
        return torch.lerp(-neg, pos, weight)


def set_attention_impl(model: nn.Module, impl: str) -> nn.Module:
    """Switch every attention module of ``model`` (any registered mechanism with a ``fused`` attribute) to the
    "fused" (SDPA) or "explicit" (maps) path."""
    from robustbench_dgsa.models.attention_registry import attention_classes
    if impl not in ("fused", "explicit"):
        raise ValueError(f"impl must be 'fused' or 'explicit', got {impl!r}")
    classes = attention_classes()
    for m in model.modules():
        if isinstance(m, classes) and hasattr(m, "fused"):
            m.fused = impl == "fused"
    return model
