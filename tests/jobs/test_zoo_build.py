"""The zoo builder (jobs/zoo.py) end to end on the synthetic sets with tiny models: train -> float16 export ->
evaluation of the exported file -> card; a second build skips the finished entries."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from robustbench_dgsa.jobs.zoo import build_zoo
from robustbench_dgsa.models.zoo import list_pretrained, load_pretrained, resolve_pretrained, weights_digest
from robustbench_dgsa.util.errors import UserError

SHARED_FROST = Path(__file__).resolve().parents[3] / "shared" / "data" / "corruptions" / "frost"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not SHARED_FROST.is_dir():
        pytest.skip("../shared/data/corruptions/frost not available")
    root = tmp_path_factory.mktemp("zoo")
    shutil.copytree(SHARED_FROST, root / "data" / "corruptions" / "frost")
    kw = dict(models=["vit", "dgt"], work=root / "work", out=root / "zoo", progress=False, preset="tiny",
              datasets={"image": "synthetic-vision", "text": "synthetic-text"})
    cards = build_zoo(root / "data", **kw)
    return root, kw, cards


def test_cards_describe_the_shipped_float16_weights(built):
    root, _, cards = built
    assert [c.name for c in cards] == ["vit-synthetic-vision", "dgt-synthetic-text"]
    for card in cards:
        path = root / "zoo" / card.weights_file
        tensors = load_file(str(path))
        assert card.weights_sha256 == weights_digest(path)
        assert card.params == sum(t.numel() for t in tensors.values())
        assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.float16}
        assert json.loads((root / "zoo" / f"{card.name}.json").read_text())["weights_sha256"] == card.weights_sha256
        assert 0.0 <= card.metrics["clean_accuracy"] <= 1.0 and card.training["preset"] == "tiny"
    vit = cards[0]
    # all 19 corruptions x 5 severities, on every test image, with the real frost photographs
    assert vit.metrics["conditions_all19"] == 95 and vit.metrics["mca_conditions"] == 75
    assert vit.metrics["corrupted_images_per_condition"] == vit.metrics["n_test"]


def test_load_pretrained_bare_name(built):
    root, _, cards = built
    zoo = root / "zoo"
    assert resolve_pretrained("vit", zoo).name == "vit-synthetic-vision"
    with pytest.raises(UserError, match="no pretrained model 'dvit'"):
        resolve_pretrained("dvit", zoo)
    ext = load_pretrained("dgt", zoo_dir=zoo)
    assert not ext.model.training and next(ext.model.parameters()).dtype == torch.float32
    assert ext.info["card"]["name"] == "dgt-synthetic-text" and ext.source == "pretrained:dgt-synthetic-text"
    assert [c.name for c in list_pretrained("image", zoo)] == ["vit-synthetic-vision"]


@pytest.mark.parametrize("entry,dataset", [("vit", "synthetic-vision"), ("dgt", "synthetic-text")])
def test_benchmark_of_a_pretrained_model_gives_the_cards_clean_accuracy(built, entry, dataset):
    """rb.load_pretrained(...) goes straight into rb.benchmark (preprocessing / tokenizer come with it). Both
    routes run the same evaluation core on the same inputs in the same batches, hence the same predictions."""
    import robustbench_dgsa as rb
    root, _, cards = built
    ext = rb.load_pretrained(entry, zoo_dir=root / "zoo")
    rows = rb.benchmark(ext, dataset, corruption=None, progress=False)
    clean = rows[(rows.condition == "clean") & (rows.metric == "accuracy")]
    card = ext.info["card"]
    assert int(clean.n.iloc[0]) == card["metrics"]["n_test"]
    assert float(clean.value.iloc[0]) == card["metrics"]["clean_accuracy"]


def test_second_build_skips_finished_entries(built, monkeypatch):
    root, kw, cards = built
    import robustbench_dgsa.engine.train as train_module

    def boom(*a, **k):
        raise AssertionError("a finished zoo entry was trained again")
    monkeypatch.setattr(train_module, "train", boom)
    again = build_zoo(root / "data", **kw)
    assert [c.weights_sha256 for c in again] == [c.weights_sha256 for c in cards]
