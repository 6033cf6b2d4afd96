"""Attention mechanisms (docs/METHODS.md, Models): fused vs explicit paths, λ, gate, Q-residual, masks."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from robustbench_dgsa.models.attention import (DifferentialAttention, GatedDifferentialAttention, MultiheadSelfAttention,
                                               layer_lambda_init)
from robustbench_dgsa.models.blocks import build_attention, lambda_init_for
from robustbench_dgsa.config import ModelConfig

TOL = 1e-10
# float64 results of one computation through two batchings / kernels: a few ulps apart at most
CROSS_PATH_TOL = 1e-13



def _cfg(attention: str, **kw) -> ModelConfig:
    base = dict(attention=attention, dim=32, heads=2, lambda_init="layer")
    base.update(kw)
    return ModelConfig(**base)


def _padding_mask() -> torch.Tensor:
    kpm = torch.zeros(3, 9, dtype=torch.bool)
    kpm[1, 6:] = True
    kpm[2, 2:] = True
    return kpm


def _run(module, x, kpm, fused: bool):
    module.fused = fused
    module.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    y = module(x, kpm)
    w = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)
    (y * w).sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in module.named_parameters()}
    return y.detach(), x.grad.detach(), grads


_CASES = [("mhsa", {}, "sdpa"), ("mhsa", {}, "math")] + [
    (attention, extra, kernel)
    for attention, extra in [("diff", {}), ("diff", {"lambda_init": "fixed"}),
                             ("dgsa", {"lambda_init": "fixed", "q_residual": True}),
                             ("dgsa", {"lambda_init": "fixed", "q_residual": False, "gate_bias_init": "diff"})]
    for kernel in ("sdpa", "sdpa-split", "math")
]


@pytest.mark.parametrize("attention,extra,kernel", _CASES)
@pytest.mark.parametrize("masked", [False, True])
def test_fused_matches_explicit_float64(attention, extra, kernel, masked):
    torch.manual_seed(0)
    module = build_attention(_cfg(attention, **extra), layer_idx=2).double()
    # "sdpa": one SDPA call per branch (shared V); "sdpa-split": V in d' halves; "math": maps not returned
    module.kernel = kernel
    if attention == "dgsa":
        with torch.no_grad():              # make the gate input-dependent also with gate_bias_init="diff"
            module.gate.weight.normal_(0, 0.3)
    x = torch.randn(3, 9, 32, dtype=torch.float64)
    kpm = _padding_mask() if masked else None
    y_f, gx_f, gp_f = _run(module, x, kpm, fused=True)
    y_e, gx_e, gp_e = _run(module, x, kpm, fused=False)
    assert (y_f - y_e).abs().max().item() <= TOL
    assert (gx_f - gx_e).abs().max().item() <= TOL
    assert gp_f.keys() == gp_e.keys()
    for name in gp_f:
        assert (gp_f[name] - gp_e[name]).abs().max().item() <= TOL, name


_CHUNK_CASES = [("mhsa", {}), ("diff", {}), ("dgsa", {"lambda_init": "fixed", "q_residual": True})]


def _math_module(attention: str, extra: dict, seed: int):
    """A float64 layer 1 of ``attention`` on the "math" kernel; DGSA's gate made input-dependent."""
    torch.manual_seed(seed)
    module = build_attention(_cfg(attention, **extra), layer_idx=1).double()
    module.kernel = "math"
    if attention == "dgsa":
        with torch.no_grad():
            module.gate.weight.normal_(0, 0.3)
    return module


@pytest.mark.parametrize("attention,extra", _CHUNK_CASES)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("queries", [None, 1])
def test_no_grad_math_in_batch_chunks_matches_explicit(monkeypatch, attention, extra, masked, queries):
    """Without autograd the "math" kernel runs over chunks of the batch (cache-sized score maps); forcing one
    image per chunk must give the explicit path's outputs, with padding masks and CLS-only queries."""
    import robustbench_dgsa.models.attention as attention_module

    module = _math_module(attention, extra, seed=1)
    x = torch.randn(3, 9, 32, dtype=torch.float64)
    kpm = _padding_mask() if masked else None
    with torch.no_grad():
        module.fused = False
        y_explicit = module(x, kpm, queries=queries)
        module.fused = True
        y_whole = module(x, kpm, queries=queries)
        monkeypatch.setattr(attention_module, "_MAPS_PER_CHUNK", 1)   # one image per chunk
        monkeypatch.setattr(attention_module, "_MHSA_MAPS_PER_CHUNK", 1)
        y_chunks = module(x, kpm, queries=queries)
    assert (y_whole - y_explicit).abs().max().item() <= TOL
    assert (y_chunks - y_explicit).abs().max().item() <= TOL
    # Not torch.equal: a batched matmul may pick another BLAS kernel (blocking, FMA order) for one image than for
    # three, so the chunked and whole-batch products can differ in the last bits (2-4e-16 seen on AMD EPYC);
    # the chunking itself must add nothing beyond that rounding.
    assert (y_chunks - y_whole).abs().max().item() <= CROSS_PATH_TOL


@pytest.mark.parametrize("attention,extra", _CHUNK_CASES)
@pytest.mark.parametrize("masked", [False, True])
def test_grad_math_in_batch_chunks_matches_explicit(monkeypatch, attention, extra, masked):
    """With autograd on the CPU the "math" kernel runs over equal chunks of the batch once its maps exceed
    _GRAD_MAPS_PER_CHUNK; forced to chunk (here 2 + 1 images: the last chunk shorter), outputs and the gradients
    of inputs and parameters must be the explicit path's, with padding masks."""
    import robustbench_dgsa.models.attention as attention_module

    module = _math_module(attention, extra, seed=2)
    x = torch.randn(3, 9, 32, dtype=torch.float64)
    kpm = _padding_mask() if masked else None
    calls = []
    real = attention_module._in_batch_chunks

    def counting(rows_out, *args):
        return real(lambda rows: calls.append(rows) or rows_out(rows), *args)
    monkeypatch.setattr(attention_module, "_in_batch_chunks", counting)
    y_whole, gx_whole, gp_whole = _run(module, x, kpm, fused=True)
    assert calls == [slice(None)]                      # the default budget: one call for 3 small images
    maps_per_image = (1 if attention == "mhsa" else 2) * 2 * 9 * 9
    monkeypatch.setattr(attention_module, "_GRAD_MAPS_PER_CHUNK", 2 * maps_per_image)
    calls.clear()
    y_chunks, gx_chunks, gp_chunks = _run(module, x, kpm, fused=True)
    assert calls == [slice(0, 2), slice(2, 4)]
    y_e, gx_e, gp_e = _run(module, x, kpm, fused=False)
    for got, whole in ((y_chunks, y_whole), (gx_chunks, gx_whole)):
        assert (got - whole).abs().max().item() <= CROSS_PATH_TOL
    assert (y_chunks - y_e).abs().max().item() <= TOL and (gx_chunks - gx_e).abs().max().item() <= TOL
    for name in gp_e:
        assert (gp_chunks[name] - gp_e[name]).abs().max().item() <= TOL, name
        assert (gp_chunks[name] - gp_whole[name]).abs().max().item() <= CROSS_PATH_TOL, name


def test_maps_shapes_rows_and_padding():
    torch.manual_seed(1)
    x = torch.randn(3, 9, 32, dtype=torch.float64)
    kpm = _padding_mask()
    for attention in ("mhsa", "diff", "dgsa"):
        m = build_attention(_cfg(attention, lambda_init="fixed"), 0).double()
        y, maps = m(x, kpm, return_maps=True)
        assert y.shape == x.shape
        assert maps["attn"].shape == (3, 2, 9, 9)
        pad = kpm[:, None, None, :].expand_as(maps["attn"])
        assert torch.all(maps["attn"][pad] == 0)                      # padded keys: exactly 0 weight
        if attention == "mhsa":
            assert torch.allclose(maps["attn"].sum(-1), torch.ones(3, 2, 9, dtype=torch.float64))
            continue
        for key in ("a_pos", "a_neg"):
            assert maps[key].shape == (3, 2, 9, 9)
            assert torch.all(maps[key][pad] == 0)
            assert torch.allclose(maps[key].sum(-1), torch.ones(3, 2, 9, dtype=torch.float64))
        if attention == "diff":
            lam = maps["lambda"]
            assert lam.ndim == 0
            assert torch.allclose(maps["attn"], maps["a_pos"] - lam * maps["a_neg"])
            assert torch.allclose(maps["attn"].sum(-1), (1 - lam).expand(3, 2, 9))
        else:
            g = maps["gate"]
            assert g.shape == (3, 2, 9) and torch.all((g > 0) & (g < 1))
            assert torch.allclose(maps["attn"].sum(-1), 2 * g - 1)   # rows sum to 2g − 1


def test_lambda_init_schedule_and_reparameterisation():
    cfg = _cfg("diff", lambda_init="layer")
    assert lambda_init_for(cfg, 0) == pytest.approx(0.2)
    for layer in range(8):
        assert lambda_init_for(cfg, layer) == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * layer))
    assert lambda_init_for(_cfg("diff", lambda_init="fixed", lambda_init_value=0.7), 5) == 0.7
    torch.manual_seed(0)
    m = build_attention(_cfg("diff", dim=256, heads=8), 3)
    assert m.branch_dim == 16 and m.lambda_q1.shape == (16,)
    vecs = torch.cat([m.lambda_q1, m.lambda_k1, m.lambda_q2, m.lambda_k2])
    assert 0.05 < vecs.std().item() < 0.15                           # N(0, 0.1)
    with torch.no_grad():
        for p in (m.lambda_q1, m.lambda_k1, m.lambda_q2, m.lambda_k2):
            p.zero_()
    assert m.lambda_value().item() == pytest.approx(0.8 - 0.6 * math.exp(-0.9))   # λ = λ_init(layer 3)
    # one λ per layer shared by the heads: four d'-vectors, nothing per head
    n_lambda = sum(p.numel() for n, p in m.named_parameters() if n.startswith("lambda_"))
    assert n_lambda == 4 * 16
    assert m.subln.weight.shape == (32,) and m.subln.eps == 1e-5  # RMSNorm over 2d', shared by heads


def _copy_shared(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            getattr(dst, name).weight.copy_(getattr(src, name).weight)
        dst.subln.weight.copy_(src.subln.weight)


@pytest.mark.parametrize("lambda_init", ["fixed", "layer"])
def test_dgsa_with_diff_gate_init_equals_diffattn(lambda_init):
    torch.manual_seed(3)
    cfg_d = _cfg("diff", lambda_init=lambda_init, lambda_init_value=0.8)
    cfg_g = _cfg("dgsa", lambda_init=lambda_init, lambda_init_value=0.8, gate_bias_init="diff", q_residual=False)
    diff = build_attention(cfg_d, 4).double()
    dgsa = build_attention(cfg_g, 4).double()
    _copy_shared(diff, dgsa)
    with torch.no_grad():
        dgsa.gate.bias.fill_(-math.log(diff.lambda_init))              # re-set in float64 (init ran in float32)
        for p in (diff.lambda_q1, diff.lambda_k1, diff.lambda_q2, diff.lambda_k2):
            p.zero_()                                                  # λ = λ_init exactly
    lam = diff.lambda_init
    assert dgsa.lambda_init == lam
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    kpm = torch.zeros(2, 7, dtype=torch.bool)
    kpm[1, 5:] = True
    y_d, m_d = diff(x, kpm, return_maps=True)
    y_g, m_g = dgsa(x, kpm, return_maps=True)
    assert torch.allclose(m_g["gate"], torch.full_like(m_g["gate"], 1 / (1 + lam)), atol=1e-15, rtol=0)
    # g A+ − (1−g) A− = (A+ − λ A−)/(1+λ): DiffAttn's combination up to the scale RMSNorm removes
    assert (m_g["attn"] * (1 + lam) - m_d["attn"]).abs().max().item() <= 1e-12
    assert torch.allclose(y_g, y_d, rtol=1e-2, atol=2e-3)                # only RMSNorm eps differs
    diff.subln.eps = dgsa.subln.eps = 0.0                               # exact scale invariance
    assert (dgsa(x, kpm) - diff(x, kpm)).abs().max().item() <= TOL


def test_q_residual_adds_queries():
    torch.manual_seed(4)
    with_res = build_attention(_cfg("dgsa", lambda_init="fixed", q_residual=True), 0).double()
    without = build_attention(_cfg("dgsa", lambda_init="fixed", q_residual=False), 0).double()
    without.load_state_dict(with_res.state_dict())
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    assert torch.allclose(with_res(x) - without(x), with_res.q_proj(x), atol=1e-12)


def test_projection_bias_rules_and_gate_shape():
    mhsa = build_attention(_cfg("mhsa"))
    assert mhsa.qkv.bias is not None and mhsa.proj.bias is not None
    assert mhsa.qkv.weight.shape == (96, 32)
    dgsa = build_attention(_cfg("dgsa", lambda_init="fixed"))
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert getattr(dgsa, name).bias is None
    assert dgsa.gate.weight.shape == (2, 32) and dgsa.gate.bias.shape == (2,)   # W_g: D -> h
    assert not any(n.startswith("lambda_") for n, _ in dgsa.named_parameters())  # no learnable λ
    d = build_attention(_cfg("dgsa", lambda_init="fixed", lambda_init_value=0.8, gate_bias_init="diff"))
    assert torch.allclose(d.gate.bias, torch.full((2,), math.log(1 / 0.8)))     # logit(1/(1+λ)) = −log λ
    assert torch.all(d.gate.weight == 0)
    from robustbench_dgsa.util.errors import UserError
    with pytest.raises(UserError, match="model.attention: expected one of mhsa, diff, dgsa"):
        build_attention(_cfg("nope"))


def test_bf16_autocast_runs_on_cpu():
    torch.manual_seed(0)
    for attention in ("mhsa", "diff", "dgsa"):
        m = build_attention(_cfg(attention, lambda_init="fixed"), 1)
        x = torch.randn(2, 6, 32)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = m(x, _padding_mask()[:2, :6])
        assert torch.isfinite(y.float()).all()


def test_layers_take_explicit_arguments():
    """The attention layers are plain nn.Modules with explicit arguments (no ModelConfig), as in timm; the config ->
    layer mapping lives in blocks.build_attention and builds the same layers."""
    import robustbench_dgsa.models.attention as attention_module
    assert "robustbench_dgsa.config" not in Path(attention_module.__file__).read_text()
    torch.manual_seed(5)
    explicit = GatedDifferentialAttention(32, 2, 3, layer_lambda_init(3), q_residual=True, gate_bias_init="diff")
    torch.manual_seed(5)
    built = build_attention(_cfg("dgsa", q_residual=True, gate_bias_init="diff"), 3)
    assert type(built) is GatedDifferentialAttention and built.lambda_init == explicit.lambda_init
    assert all(torch.equal(a, b) for a, b in zip(explicit.state_dict().values(), built.state_dict().values()))
    assert DifferentialAttention(32, 2, 4).lambda_init == pytest.approx(0.8 - 0.6 * math.exp(-1.2))
    assert MultiheadSelfAttention(32, 4).head_dim == 8
    with pytest.raises(ValueError, match="divisible"):
        DifferentialAttention(30, 2)
