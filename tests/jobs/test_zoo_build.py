"""The zoo builder (jobs/zoo.py) end to end on the synthetic sets with tiny models (conftest ``tiny_zoo``):
train -> float16 export -> evaluation of the exported file -> card; a second build skips the finished entries."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from robustbench_dgsa.jobs.zoo import MODELS, build_zoo
from robustbench_dgsa.models.zoo import list_pretrained, load_pretrained, resolve_pretrained, weights_digest
from robustbench_dgsa.util.errors import UserError


def test_cards_describe_the_shipped_float16_weights(tiny_zoo):
    zoo, _, cards, _ = tiny_zoo
    assert [c.model for c in cards] == list(MODELS)
    for card in cards:
        path = zoo / card.weights_file
        tensors = load_file(str(path))
        assert card.weights_sha256 == weights_digest(path)
        assert card.params == sum(t.numel() for t in tensors.values())
        assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.float16}
        assert json.loads((zoo / f"{card.name}.json").read_text())["weights_sha256"] == card.weights_sha256
        assert 0.0 <= card.metrics["clean_accuracy"] <= 1.0 and card.training["preset"] == "tiny"
        assert "not from either evidence campaign" in card.training["numbers_from"]   # where its numbers are from
    vit = cards[0]
    # all 19 corruptions x 5 severities, on every test image, with the real frost photographs
    assert vit.metrics["conditions_all19"] == 95 and vit.metrics["mca_conditions"] == 75
    assert vit.metrics["corrupted_images_per_condition"] == vit.metrics["n_test"]
    assert "frost" in vit.metrics["frost_source"] and vit.metrics["frost_files_sha256"]


def test_load_pretrained_bare_name(tiny_zoo):
    zoo = tiny_zoo[0]
    assert resolve_pretrained("vit", zoo).name == "vit-synthetic-vision"
    with pytest.raises(UserError, match="no pretrained model 'vit_swiglu'"):
        resolve_pretrained("vit_swiglu", zoo)
    ext = load_pretrained("dgt", zoo_dir=zoo)
    assert not ext.model.training and next(ext.model.parameters()).dtype == torch.float32
    assert ext.info["card"]["name"] == "dgt-synthetic-text" and ext.source == "pretrained:dgt-synthetic-text"
    assert [c.model for c in list_pretrained("image", zoo)] == ["vit", "dvit", "dgvit"]


@pytest.mark.parametrize("entry,dataset", [("vit", "synthetic-vision"), ("dgt", "synthetic-text")])
def test_benchmark_of_a_pretrained_model_gives_the_cards_clean_accuracy(tiny_zoo, entry, dataset):
    """rb.load_pretrained(...) goes straight into rb.benchmark (preprocessing / tokenizer come with it). Both
    routes run the same evaluation core on the same inputs in the same batches, hence the same predictions."""
    import robustbench_dgsa as rb
    ext = rb.load_pretrained(entry, zoo_dir=tiny_zoo[0])
    rows = rb.benchmark(ext, dataset, corruption=None, progress=False, amp="off")   # the card was made in fp32
    clean = rows[(rows.condition == "clean") & (rows.metric == "accuracy")]
    card = ext.info["card"]
    assert int(clean.n.iloc[0]) == card["metrics"]["n_test"]
    assert float(clean.value.iloc[0]) == card["metrics"]["clean_accuracy"]


def test_second_build_skips_finished_entries(tiny_zoo, monkeypatch):
    zoo, kw, cards, data = tiny_zoo
    import robustbench_dgsa.engine.train as train_module

    def boom(*a, **k):
        raise AssertionError("a finished zoo entry was trained again")
    monkeypatch.setattr(train_module, "train", boom)
    again = build_zoo(data, **kw)
    assert [c.weights_sha256 for c in again] == [c.weights_sha256 for c in cards]


def test_refresh_rewrites_cards_without_training_or_evaluating(tiny_zoo, monkeypatch):
    zoo, kw, cards, data = tiny_zoo
    import robustbench_dgsa.engine.evaluate as evaluate_module
    import robustbench_dgsa.jobs.zoo as zoo_job

    def boom(*a, **k):
        raise AssertionError("refreshing a card evaluated again")
    monkeypatch.setattr(evaluate_module, "evaluate", boom)
    monkeypatch.setattr(zoo_job, "export_fp16", boom)
    again = build_zoo(data, **{**kw, "refresh_cards": True})
    for old, new in zip(cards, again):
        assert new.weights_sha256 == old.weights_sha256
        assert {k: v for k, v in new.metrics.items() if k != "per_corruption"} == \
            {k: v for k, v in old.metrics.items() if k != "per_corruption"}
        assert new.training["curve"] and new.training["curve"][-1]["epoch"] == new.training["epochs"]
        # the build machine's data folder appears nowhere: paths are relative to DATA_ROOT, the command too
        assert str(data) not in json.dumps(new.to_dict())
        assert new.training["command"].endswith(f"--data-root DATA_ROOT --model {new.model}")


def test_evaluate_pretrained_cli_gives_the_cards_clean_accuracy(tiny_zoo, tmp_path, monkeypatch, run_main):
    """`dgsa-bench evaluate --pretrained dgvit`: the shipped checkpoint through the checkpoint route, into the
    default store of the working folder (never a folder inside the installed package)."""
    import robustbench_dgsa.models.zoo as zoo_module
    zoo = tiny_zoo[0]
    monkeypatch.setattr(zoo_module, "ZOO_DIR", zoo)
    card = resolve_pretrained("dgvit", zoo)
    code, out, err = run_main(["evaluate", "--pretrained", "dgvit", "--max-examples", str(card.metrics["n_test"]),
                               "--amp", "off", "--json", "--quiet"], tmp_path)   # the card was made in fp32
    assert code == 0, err
    doc = json.loads(out)
    assert doc["clean_accuracy"] == card.metrics["clean_accuracy"]
    assert (tmp_path / "runs" / "store").is_dir() and not (zoo / "store").exists()
    code, _, err = run_main(["evaluate", "--pretrained", "dgvit", "--checkpoint", "x.safetensors"], tmp_path)
    assert code == 2 and "exactly one of --checkpoint, --pretrained" in err
