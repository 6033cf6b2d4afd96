"""`dgsa-bench rollout IMAGE` and `rollout --text` with no model option use the shipped models (here a tiny zoo
built by the real builder, put in place of the package's); --pretrained picks one; --dataset/--index picks a
test image of a dataset."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image


@pytest.fixture
def zoo(tiny_zoo, monkeypatch):
    import robustbench_dgsa.models.zoo as zoo_module
    monkeypatch.setattr(zoo_module, "ZOO_DIR", tiny_zoo[0])
    return tiny_zoo


@pytest.fixture
def png(tmp_path):
    path = tmp_path / "photo.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (48, 40, 3), dtype=np.uint8)).save(path)
    return path


def test_image_with_no_model_option_uses_the_shipped_trio(zoo, png, tmp_path, run_main):
    code, out, err = run_main(["rollout", str(png)], tmp_path)
    assert code == 0, err
    assert "using the shipped models vit-synthetic-vision, dvit-synthetic-vision, dgvit-synthetic-vision" in err
    doc = json.loads((tmp_path / "photo_rollout.json").read_text())
    assert [m["model"] for m in doc["models"]] == ["vit", "dvit", "dgvit"]
    assert [m["source"] for m in doc["models"]] == [f"pretrained:{m}-synthetic-vision" for m in ("vit", "dvit", "dgvit")]
    assert all(m["seed"] == 0 and 0.0 < m["prob"] <= 1.0 and m["pred_class"] for m in doc["models"])
    assert [m["mode"] for m in doc["models"]] == ["positive", "signed", "signed"]
    assert np.load(tmp_path / "photo_rollout.npy").shape == (3, 48, 40)
    assert Image.open(tmp_path / "photo_rollout.png").size[0] > 400       # image + three heatmap columns


def test_text_with_no_model_option_uses_the_shipped_trio(zoo, tmp_path, run_main):
    code, out, err = run_main(["rollout", "--text", "a gripping, beautifully acted film"], tmp_path)
    assert code == 0, err
    doc = json.loads((tmp_path / "text_rollout.json").read_text())
    assert [m["model"] for m in doc["models"]] == ["transformer", "dt", "dgt"]
    assert doc["models"][0]["tokens"][:3] == ["a", "gripping", ","] or len(doc["models"][0]["tokens"]) >= 5
    assert (tmp_path / "text_rollout.html").is_file()


def test_pretrained_by_bare_name_and_mode(zoo, png, tmp_path, run_main):
    code, out, err = run_main(["rollout", str(png), "--pretrained", "dgvit", "--mode", "positive", "-o",
                               str(tmp_path / "one.png")], tmp_path)
    assert code == 0, err
    doc = json.loads((tmp_path / "one.json").read_text())
    assert [(m["model"], m["mode"]) for m in doc["models"]] == [("dgvit", "positive")]
    assert "using the shipped models" not in err


def test_dataset_index_image(zoo, tmp_path, run_main):
    code, out, err = run_main(["rollout", "--dataset", "synthetic-vision", "--index", "3", "--pretrained", "vit"],
                              tmp_path)
    assert code == 0, err
    pngs = sorted(p.name for p in tmp_path.glob("synthetic-vision-test-3-*.png"))
    assert len(pngs) == 2 and any(p.endswith("_rollout.png") for p in pngs)


@pytest.mark.parametrize("args,expect", [
    (["--pretrained", "nope"], "no pretrained model 'nope'"),
    (["--pretrained", "dgt"], "is a text model"),
    (["--index", "3"], "--index goes with --dataset"),
])
def test_bad_pretrained_use_is_one_line(zoo, png, tmp_path, run_main, args, expect):
    code, out, err = run_main(["rollout", str(png), *args], tmp_path)
    assert code == 2 and expect in err and len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1
    assert "Traceback" not in err and not list(tmp_path.glob("*_rollout.*"))
