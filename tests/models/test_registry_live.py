"""The model registry is live: a model registered after import is listed, created and benchmarked by name."""
from __future__ import annotations

import pytest

import robustbench_dgsa as rb
from robustbench_dgsa.models import registry


@pytest.fixture
def extra_model(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def tiny_dgvit_for_test():
        cfg = registry.get_model_config("dgvit")
        cfg.name, cfg.dim, cfg.depth, cfg.heads, cfg.head_hidden = "tiny_dgvit_for_test", 16, 1, 2, 16
        return cfg

    registry.register_model(tiny_dgvit_for_test)
    return "tiny_dgvit_for_test"


def test_a_model_registered_later_is_listed_and_created(extra_model):
    assert extra_model in rb.list_models() and extra_model in rb.list_models("image")
    assert extra_model not in rb.list_models("text")
    assert extra_model in registry.model_names() and extra_model not in registry.MODEL_NAMES
    model = rb.create_model(extra_model)
    assert sum(p.numel() for p in model.parameters()) > 0


def test_unknown_model_message_lists_later_registrations(extra_model):
    with pytest.raises(Exception, match="tiny_dgvit_for_test"):
        registry.get_model_config("no_such_model")
