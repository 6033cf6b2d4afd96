"""Speed paths of the models keep the maths: kernel choice, CLS-only last block, first-queries attention, dropout."""
from __future__ import annotations

import pytest
import torch

from robustbench_dgsa.config import ModelConfig
from robustbench_dgsa.models import create_model, get_model_config
from robustbench_dgsa.models.attention import choose_kernel
from robustbench_dgsa.models.blocks import build_attention
from robustbench_dgsa.models.blocks import Dropout

TOL = 1e-10
SMALL = dict(dim=32, depth=3, heads=2, head_hidden=16, num_classes=5, dropout=0.0)



def test_kernel_choice_per_device_and_length():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for kind in ("mhsa", "diff", "dgsa"):
        assert choose_kernel(kind, cuda, 65, True) == "sdpa"                 # GPU: always SDPA
        assert choose_kernel(kind, cuda, 257, False) == "sdpa"
    for grad in (True, False):
        assert choose_kernel("mhsa", cpu, 65, grad) == "sdpa"                # MHSA: SDPA is never slower
        assert choose_kernel("mhsa", cpu, 257, grad) == "sdpa"
    for kind in ("diff", "dgsa"):
        assert choose_kernel(kind, cpu, 65, True) == "math"                  # short: explicit maths
        assert choose_kernel(kind, cpu, 129, True) == "sdpa"                 # middle: shared V
        assert choose_kernel(kind, cpu, 257, True) == "sdpa-split"           # long: V in halves
        assert choose_kernel(kind, cpu, 65, False) == "math"
        assert choose_kernel(kind, cpu, 129, False) == "sdpa-split"


def test_kernel_choice_under_cpu_bf16_autocast():
    """bf16 on the CPU: explicit maths in training (SDPA's flash backward is the slow part) and in the
    evaluation of every mechanism (chunked without gradients); beyond the measured length as in fp32."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for kind in ("mhsa", "diff", "dgsa"):
            for n in (17, 65, 129, 257):
                assert choose_kernel(kind, cpu, n, True) == "math"
                assert choose_kernel(kind, cpu, n, False) == "math"
            assert choose_kernel(kind, cuda, 65, True) == "sdpa"
        assert choose_kernel("mhsa", cpu, 513, True) == "sdpa"
        assert choose_kernel("dgsa", cpu, 513, True) == "sdpa-split"
    with torch.autocast("cpu", dtype=torch.float16):
        assert choose_kernel("mhsa", cpu, 65, True) == "sdpa"
    assert choose_kernel("mhsa", cpu, 65, True) == "sdpa"                    # autocast off again


@pytest.mark.parametrize("attention", ["mhsa", "diff", "dgsa"])
def test_bf16_training_kernel_matches_sdpa_in_bf16(attention):
    """The kernel bf16 training now takes gives SDPA's outputs and gradients to bf16 rounding."""
    torch.manual_seed(0)
    m = build_attention(ModelConfig(attention=attention, dim=32, heads=2, lambda_init="fixed"), 1)
    x = torch.randn(4, 65, 32)
    out = {}
    for kernel in ("math", "sdpa"):
        m.kernel = kernel
        m.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = m(x)
        y.float().square().mean().backward()
        out[kernel] = (y.float(), [p.grad.clone() for p in m.parameters()])
    torch.testing.assert_close(out["math"][0], out["sdpa"][0], rtol=0.05, atol=0.02)
    for a, b in zip(out["math"][1], out["sdpa"][1]):
        torch.testing.assert_close(a, b, rtol=0.1, atol=0.02)


@pytest.mark.parametrize("attention,extra", [("mhsa", {}), ("diff", {}), ("dgsa", {"q_residual": True}),
                                             ("dgsa", {"q_residual": False})])
@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_first_queries_equal_full_rows(attention, extra, kernel):
    torch.manual_seed(0)
    m = build_attention(ModelConfig(attention=attention, dim=32, heads=2, lambda_init="fixed", **extra), 1).double()
    m.kernel = kernel
    x = torch.randn(3, 9, 32, dtype=torch.float64)
    kpm = torch.zeros(3, 9, dtype=torch.bool)
    kpm[1, 5:] = True
    for mask in (None, kpm):
        full = m(x, mask)
        for nq in (1, 4):
            part = m(x, mask, queries=nq)
            assert part.shape == (3, nq, 32)
            assert (part - full[:, :nq]).abs().max().item() <= TOL


def _grads(model, x):
    model.zero_grad(set_to_none=True)
    logits = model(x)
    (logits * torch.linspace(-1, 1, logits.numel(), dtype=logits.dtype).view_as(logits)).sum().backward()
    return logits.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", ["vit", "dvit", "dgvit", "transformer", "dt", "dgt"])
def test_cls_only_last_block_keeps_logits_and_gradients(name):
    torch.manual_seed(1)
    cfg = get_model_config(name)
    geometry = dict(image_size=8, patch_size=4) if cfg.modality == "image" else dict(vocab_size=40, max_len=10)
    model = create_model(cfg, **SMALL, **geometry).double().train()
    if cfg.modality == "image":
        x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    else:
        x = torch.randint(1, 40, (2, 10))
        x[1, 6:] = 0                                                          # padding
    assert model.cls_only_last_block
    y_fast, g_fast = _grads(model, x)
    model.cls_only_last_block = False
    y_full, g_full = _grads(model, x)
    assert (y_fast - y_full).abs().max().item() <= TOL
    assert g_fast.keys() == g_full.keys()
    for n in g_full:
        assert (g_fast[n] - g_full[n]).abs().max().item() <= TOL, n
    model.set_attention_impl("explicit")
    assert not model.cls_only_last_block                                      # explicit = the full reference
    model.set_attention_impl("fused")
    assert model.cls_only_last_block


def test_dropout_distribution_scaling_gradient_and_seed():
    x = torch.ones(200_000, dtype=torch.float64, requires_grad=True)
    drop = Dropout(0.25).train()
    torch.manual_seed(7)
    y = drop(x)
    kept = y != 0
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))       # inverted scaling
    rate = kept.double().mean().item()
    assert abs(rate - 0.75) < 4 * (0.75 * 0.25 / x.numel()) ** 0.5           # Bernoulli(0.75), 4 SD
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())                                   # grad = mask · 1/(1−p)
    torch.manual_seed(7)
    assert torch.equal(drop(x.detach()), y.detach())                         # same seed, same mask
    assert torch.equal(drop.eval()(x), x)                                    # eval: identity
    assert Dropout(0.0).train()(x) is x                                      # p = 0: no work at all
    assert isinstance(drop, torch.nn.Dropout)


def test_dropout_fp32_mask_is_the_committed_31_bit_stream():
    """fp32 activations keep the stream the committed runs used: one int32 draw per element, r >= round(p·2³¹)."""
    from robustbench_dgsa.models.blocks import _keep_mask
    torch.manual_seed(3)
    mask = _keep_mask(torch.Size((37, 41)), 0.1, torch.float32, torch.device("cpu"))
    torch.manual_seed(3)
    assert torch.equal(mask, torch.empty(37, 41, dtype=torch.int32).random_() >= int(round(0.1 * 2 ** 31)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dropout_reduced_precision_mask_distribution_independence_and_seed(dtype):
    """bf16 / fp16 activations: four 15-bit draws per 63-bit word. Each element is kept with probability
    1 − round(p·2¹⁵)/2¹⁵, neighbours (lanes of one word) independently, scaled by 1/(1−p) in the dtype."""
    p, n = 0.1, 400_003                                   # n not a multiple of 4: the last word is cut
    x = torch.ones(n, dtype=dtype, requires_grad=True)
    drop = Dropout(p).train()
    torch.manual_seed(11)
    y = drop(x)
    assert y.dtype == dtype and y.shape == x.shape
    kept = y != 0
    assert torch.equal(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    q = 1 - round(p * 2 ** 15) / 2 ** 15
    sd = (q * (1 - q) / n) ** 0.5
    assert abs(kept.double().mean().item() - q) < 4 * sd
    k = kept[: n - n % 4].view(-1, 4).double()           # the four lanes of each word
    for a in range(4):
        assert abs(k[:, a].mean().item() - q) < 4 * (q * (1 - q) / len(k)) ** 0.5, a
        for b in range(a + 1, 4):                          # P(both kept) = q² for independent lanes
            both = (k[:, a] * k[:, b]).mean().item()
            assert abs(both - q * q) < 4 * (q * q * (1 - q * q) / len(k)) ** 0.5, (a, b)
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())
    torch.manual_seed(11)
    assert torch.equal(drop(x.detach()), y.detach())


# -- fused kernels on accelerators need aligned rows (found on an H200, torch 2.11: DGSA at D=32, h=2 crashed) ----
def _aligned(t: torch.Tensor, align: int) -> bool:
    return t.storage_offset() % align == 0 and all(s % align == 0 for s in t.stride()[:-1]) and t.stride(-1) == 1


def test_sdpa_aligned_copies_only_misaligned_accelerator_tensors():
    from robustbench_dgsa.models.attention import sdpa_aligned
    rows = torch.empty(4, 98, dtype=torch.bfloat16, device="meta")          # 98 bf16 = 196 bytes per row
    view = rows[:, :8]
    assert not _aligned(view, 8)
    fixed = sdpa_aligned(view)
    assert _aligned(fixed, 8) and fixed.shape == view.shape
    good = torch.empty(4, 96, dtype=torch.bfloat16, device="meta")[:, 8:16]   # 192-byte rows, 16-byte offset
    assert sdpa_aligned(good) is good
    cpu = torch.empty(4, 98)[:, 1:9]
    assert sdpa_aligned(cpu) is cpu                                             # CPU kernels read any stride


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind,dim,heads", [("dgsa", 32, 2), ("diff", 48, 2), ("dgsa", 96, 4), ("mhsa", 40, 2)])
def test_fused_attention_hands_sdpa_aligned_inputs_off_the_cpu(monkeypatch, kind, dim, heads, dtype):
    """On a non-CPU device (meta: shapes and strides without data) every SDPA call gets 16-byte aligned rows,
    whatever the GEMM output's width (3D + h for DGSA's gate logits), or, where the head width itself is not a
    multiple of 16 bytes, contiguous rows (PyTorch's own head-width checks then pick a kernel that reads them)."""
    from robustbench_dgsa.models.attention_registry import get_attention
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, *a, **kw):
        seen.append((q, k, v))
        return real(q, k, v, *a, **kw)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    layer = get_attention(kind).cls(dim, heads).to("meta", dtype)
    layer(torch.empty(3, 17, dim, device="meta", dtype=dtype))
    assert seen
    for q, k, v in seen:
        for t in (q, k, v):
            assert _aligned(t, 16 // t.element_size()) or t.is_contiguous(), (t.shape, t.stride(), t.storage_offset())


def test_dgsa_combines_float32_maps_with_a_bfloat16_gate():
    """Under CUDA autocast the explicit maps leave softmax in float32 while the gate is bfloat16 (H200, torch
    2.11: the explicit path raised); the combination takes the gate in the maps' dtype."""
    from robustbench_dgsa.models.attention import GatedDifferentialAttention
    g = torch.Generator().manual_seed(0)
    pos, neg = torch.rand(2, 3, 5, 5, generator=g), torch.rand(2, 3, 5, 5, generator=g)
    gate = torch.rand(2, 3, 5, 1, generator=g).to(torch.bfloat16)
    out = GatedDifferentialAttention._combine(pos, neg, gate, 1.0 - gate)
    g32 = gate.float()
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, g32 * pos - (1.0 - g32) * neg)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dgsa_combine_in_reduced_precision_matches_the_broadcast_lerp(dtype):
    """In bf16 / fp16 the gate is expanded to the outputs' shape before lerp (faster on the CPU). Values and
    gradients must be those of lerp with the broadcast gate, to within one rounding of the dtype: the two go
    through different CPU kernels (vectorised or not), which this test does not assume round identically."""
    from robustbench_dgsa.models.attention import GatedDifferentialAttention
    g = torch.Generator().manual_seed(1)
    o = torch.randn(3, 4, 2, 9, 6, generator=g).to(dtype)
    gate = torch.rand(3, 4, 9, 1, generator=g).to(dtype)
    leaves = [t.clone().requires_grad_() for t in (o, gate)]
    ref_leaves = [t.clone().requires_grad_() for t in (o, gate)]
    pos, neg = leaves[0].unbind(2)
    out = GatedDifferentialAttention._combine(pos, neg, leaves[1], 1.0 - leaves[1])
    rpos, rneg = ref_leaves[0].unbind(2)
    ref = torch.lerp(-rneg, rpos, ref_leaves[1])
    eps = torch.finfo(dtype).eps

    def assert_within_one_rounding(got, want):
        assert got.dtype == want.dtype == dtype
        torch.testing.assert_close(got.double(), want.double(), rtol=eps, atol=eps * want.double().abs().max().item())
    assert_within_one_rounding(out, ref)
    upstream = torch.randn(out.shape, generator=g).to(dtype)
    out.backward(upstream)
    ref.backward(upstream)
    for a, b in zip(leaves, ref_leaves):
        assert_within_one_rounding(a.grad, b.grad)
