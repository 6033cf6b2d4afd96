"""DGViT's one-change ablations (the second campaign): each registered config differs from DGViT in the one field
its docstring names, and the two new switches (a Q-residual for DiffAttn, a learnable λ_init) do what they say."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from robustbench_dgsa.models import create_model, get_model_config
from robustbench_dgsa.models.attention import DifferentialAttention, GatedDifferentialAttention

SMALL = dict(dim=32, depth=2, heads=2, head_hidden=16, num_classes=5, image_size=16, patch_size=4)


def _diff_fields(a: str, b: str) -> dict:
    da, db = dataclasses.asdict(get_model_config(a)), dataclasses.asdict(get_model_config(b))
    return {k: (da[k], db[k]) for k in da if da[k] != db[k] and k != "name"}


@pytest.mark.parametrize("name, fields", [
    ("dgvit_nogate", {"attention": ("diff", "dgsa")}),
    ("dgvit_noqres", {"q_residual": (False, True)}),
    ("dgvit_learnlambda", {"lambda_init": ("learnable", "fixed")}),
    ("vit_swiglu", {"attention": ("mhsa", "dgsa"), "lambda_init": ("layer", "fixed"), "q_residual": (False, True)}),
])
def test_each_ablation_differs_from_dgvit_in_the_named_field_only(name, fields):
    assert _diff_fields(name, "dgvit") == fields


def _x(seed: int = 0, shape=(3, 7, 32)) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("cls", [DifferentialAttention, GatedDifferentialAttention])
def test_q_residual_adds_the_queries_to_the_output(cls):
    torch.manual_seed(0)
    with_res = cls(32, 2, 1, 0.8, q_residual=True).double()
    without = cls(32, 2, 1, 0.8, q_residual=False).double()
    without.load_state_dict(with_res.state_dict())
    x = _x()
    q = x @ with_res.q_proj.weight.T
    for fused in (True, False):
        with_res.fused = without.fused = fused
        torch.testing.assert_close(with_res(x) - without(x), q, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", [DifferentialAttention, GatedDifferentialAttention])
def test_learnable_lambda_init_is_a_trained_parameter_that_acts_as_the_constant(cls):
    torch.manual_seed(0)
    learn = cls(32, 2, 1, 0.8, learnable_lambda_init=True).double()
    assert learn.lambda_init_param.item() == pytest.approx(0.8)
    fixed = cls(32, 2, 1, 0.5).double()
    state = {k: v for k, v in learn.state_dict().items() if k != "lambda_init_param"}
    fixed.load_state_dict(state)
    with torch.no_grad():
        learn.lambda_init_param.fill_(0.5)
    x = _x(1)
    torch.testing.assert_close(learn(x), fixed(x), rtol=0, atol=1e-12)   # the parameter is the constant it holds
    learn(x).square().sum().backward()
    assert learn.lambda_init_param.grad is not None and learn.lambda_init_param.grad.abs().item() > 0
    assert "lambda_init_param" not in dict(fixed.named_parameters())


def test_learnable_lambda_model_has_one_parameter_per_layer_starting_at_its_value():
    m = create_model("dgvit_learnlambda", **SMALL, lambda_init_value=0.7)
    params = {n: p for n, p in m.named_parameters() if n.endswith("lambda_init_param")}
    assert len(params) == SMALL["depth"] and all(p.item() == pytest.approx(0.7) for p in params.values())


@pytest.mark.parametrize("name", ["dgvit_nogate", "dgvit_noqres", "dgvit_learnlambda"])
def test_ablation_fused_and_explicit_paths_agree(name):
    torch.manual_seed(0)
    m = create_model(name, **SMALL).double().eval()
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    fused = m(x)
    m.set_attention_impl("explicit")
    explicit, maps = m(x, return_attention=True)
    torch.testing.assert_close(fused, explicit, rtol=0, atol=1e-10)
    assert maps
