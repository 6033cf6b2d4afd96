"""The model zoo that ships in the package: every card agrees with its weights, and the six entries are there."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from robustbench_dgsa.models.zoo import ZOO_DIR, list_pretrained, load_pretrained, weights_digest

EXPECTED = {"vit-cifar10", "dvit-cifar10", "dgvit-cifar10", "transformer-imdb", "dt-imdb", "dgt-imdb"}
CARDS = list_pretrained()


def test_the_six_shipped_models_are_there():
    assert {c.name for c in CARDS} == EXPECTED
    assert sorted(p.name for p in ZOO_DIR.iterdir() if p.suffix in (".json", ".safetensors")) == sorted(
        [f"{n}.json" for n in EXPECTED] + [f"{n}.safetensors" for n in EXPECTED])


@pytest.mark.parametrize("card", CARDS, ids=[c.name for c in CARDS])
def test_card_agrees_with_its_weights(card):
    path = ZOO_DIR / card.weights_file
    tensors = load_file(str(path))
    assert weights_digest(path) == card.weights_sha256 and path.stat().st_size == card.weights_bytes
    assert sum(t.numel() for t in tensors.values()) == card.params
    assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.float16} and card.dtype == "float16"
    ext = load_pretrained(card.name)
    assert sum(p.numel() for p in ext.model.state_dict().values()) == card.params
    assert ext.model.config.name == card.model and ext.info["meta"]["dataset"] == card.dataset
    m, t = card.metrics, card.training
    assert 0.0 < m["clean_accuracy"] <= 1.0 and m["n_test"] == {"cifar10": 10000, "imdb": 25000}[card.dataset]
    assert t["command"].startswith("python -m robustbench_dgsa.jobs.zoo") and t["seed"] == 0 and t["preset"] == "zoo"
    assert t["data"]["files"] and all(len(h) == 64 for h in t["data"]["files"].values())
    if card.modality == "image":
        assert m["conditions_all19"] == 95 and m["corrupted_images_per_condition"] == 10000
        assert "frost" in m["frost_source"] and "procedural" not in m["frost_source"]


def test_the_printed_cards_say_their_numbers_are_not_a_campaigns(run_main, tmp_path):
    code, out, _ = run_main(["models", "--pretrained"], tmp_path)
    text = " ".join(out.split())                       # the caption wraps at the console width
    assert code == 0
    assert "Numbers from the zoo build itself (one seed per model), not from either evidence campaign" in text
    assert "results/evidence-v2 (current)" in text and "results/evidence (superseded)" in text
    code, out, _ = run_main(["models", "--pretrained", "--json"], tmp_path)
    cards = json.loads(out)
    assert code == 0 and all("not from either evidence campaign" in c["training"]["numbers_from"] for c in cards)
