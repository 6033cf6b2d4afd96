"""Models declare what AdamW must not decay (no_weight_decay(), as timm's models do); training's parameter groups
come from that declaration."""
from __future__ import annotations

import pytest
import torch

from robustbench_dgsa.engine.train import _param_groups
from robustbench_dgsa.models import create_model
from robustbench_dgsa.models.attention import HeadRMSNorm

SIX = ["vit", "dvit", "dgvit", "transformer", "dt", "dgt"]


def _small(name: str):
    return create_model(name, dim=32, depth=2, heads=2, head_hidden=16, num_classes=3)


@pytest.mark.parametrize("name", SIX)
def test_exempt_parameters_are_the_biases_and_norm_weights(name):
    model = _small(name)
    exempt = model.no_weight_decay()
    modules = dict(model.named_modules())
    norm_types = (torch.nn.LayerNorm, HeadRMSNorm)
    for n, p in model.named_parameters():
        owner, _, leaf = n.rpartition(".")
        is_bias = leaf == "bias" or leaf.endswith("_bias")
        assert (n in exempt) == (is_bias or isinstance(modules[owner], norm_types)), n
    assert any(".subln." in k for k in exempt) == (name not in ("vit", "transformer"))  # DiffAttn's head norm
    # attention projections, embeddings, DiffAttn's lambdas and the CLS token stay decayed
    assert not any(k.endswith(("qkv.weight", "q_proj.weight", "gate.weight")) for k in exempt)
    assert not any("lambda" in k or "cls" in k or "pos_embed" in k for k in exempt)


@pytest.mark.parametrize("name", ["vit", "dgt"])
def test_param_groups_follow_the_declaration(name):
    model = _small(name)
    exempt = model.no_weight_decay()
    by_id = {id(p): n for n, p in model.named_parameters()}
    decay, rest = _param_groups(model, 0.05, decay_bias_and_norm=False)
    assert decay["weight_decay"] == 0.05 and rest["weight_decay"] == 0.0
    assert {by_id[id(p)] for p in rest["params"]} == exempt
    assert {by_id[id(p)] for p in decay["params"]} == set(by_id.values()) - exempt
    (everything,) = _param_groups(model, 0.05, decay_bias_and_norm=True)
    assert len(everything["params"]) == len(by_id)


def test_any_module_without_a_declaration_decays_everything():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    decay, rest = _param_groups(model, 0.1, decay_bias_and_norm=False)
    assert len(decay["params"]) == 4 and rest["params"] == []
