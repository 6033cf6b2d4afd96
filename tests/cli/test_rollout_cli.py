"""``dgsa-bench rollout``: files written for images (RGB, grayscale, compare) and texts; clear errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from robustbench_dgsa.cli import app

REPO = Path(__file__).resolve().parents[2]
TINY = dict(dim=16, depth=2, heads=2, head_hidden=16, num_classes=3)


def _save(tmp: Path, name: str, **kw) -> Path:
    from robustbench_dgsa.models.checkpoint import save_checkpoint
    from robustbench_dgsa.models import create_model, get_model_config
    torch.manual_seed(0)
    cfg = get_model_config(name)
    if cfg.modality == "image":
        model = create_model(name, **TINY, image_size=16, patch_size=4, **kw)
        pre = {"modality": "image", "mean": [0.5] * 3, "std": [0.25] * 3, "image_size": 16, "in_chans": 3}
    else:
        from robustbench_dgsa.data.vocab import Vocab
        vocab = Vocab.build(["the striker scored a goal", "rain and thunderstorm"], min_freq=1)
        model = create_model(name, **TINY, vocab_size=len(vocab), max_len=16, **kw)
        pre = {"modality": "text", "vocab": vocab.to_list(), "max_len": 16}
    path = tmp / f"{name}.safetensors"
    save_checkpoint(path, model, {"model": name, "classes": ["cat", "dog", "eel"], "seed": 0, "preprocess": pre,
                                  "dataset": "synthetic", "config_hash": "x", "run_id": "r"})
    return path


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("ckpt")
    return {n: _save(tmp, n) for n in ("vit", "dvit", "dgvit", "transformer", "dgt")}


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("img")
    rng = np.random.default_rng(0)
    rgb = tmp / "photo.png"
    Image.fromarray(rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)).save(rgb)
    gray = tmp / "gray.png"
    Image.fromarray(rng.integers(0, 256, (28, 28), dtype=np.uint8), "L").save(gray)
    fake = tmp / "notes.png"
    fake.write_text("this is a text file, not a PNG\n")
    return {"rgb": rgb, "gray": gray, "fake": fake}


def run(args: list[str]):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_image_rollout_writes_png_npy_json(ckpts, images, tmp_path):
    out = tmp_path / "dg.png"
    res = run(["rollout", str(images["rgb"]), "--checkpoint", str(ckpts["dgvit"]), "--out", str(out), "--json"])
    doc = json.loads(res.stdout)
    m = doc["models"][0]
    assert m["mode"] == "signed" and m["spec"] == "signed|mean|d0" and m["pred_class"] in ("cat", "dog", "eel")
    assert 0 < m["prob"] <= 1 and 0 < m["top10_mass"] <= 1
    assert out.read_bytes()[:4] == b"\x89PNG"
    heat = np.load(out.with_suffix(".npy"))
    assert heat.shape == (40, 30) and heat.dtype == np.float32          # the image's own resolution
    assert json.loads(out.with_suffix(".json").read_text())["heatmaps_shape"] == [40, 30]


def test_grayscale_image_and_options(ckpts, images, tmp_path):
    out = tmp_path / "g.png"
    res = run(["rollout", str(images["gray"]), "-c", str(ckpts["vit"]), "--out", str(out), "--mode", "positive",
               "--head-fusion", "max", "--discard-ratio", "0.5", "--json"])
    assert json.loads(res.stdout)["models"][0]["spec"] == "positive|max|d0.5"
    assert np.load(out.with_suffix(".npy")).shape == (28, 28)


def test_compare_side_by_side(ckpts, images, tmp_path):
    out = tmp_path / "cmp.png"
    run(["rollout", str(images["rgb"]), "--compare", str(ckpts["vit"]), str(ckpts["dvit"]), str(ckpts["dgvit"]),
         "--out", str(out)])
    assert out.exists() and np.load(out.with_suffix(".npy")).shape == (3, 40, 30)
    doc = json.loads(out.with_suffix(".json").read_text())
    assert [m["model"] for m in doc["models"]] == ["vit", "dvit", "dgvit"]
    assert [m["mode"] for m in doc["models"]] == ["positive", "signed", "signed"]


def test_text_rollout_writes_html_and_png(ckpts, tmp_path):
    out = tmp_path / "t.png"
    run(["rollout", "--text", "The striker scored a goal <b>today</b>!", "-c", str(ckpts["transformer"]),
         "--compare", str(ckpts["dgt"]), "--out", str(out)])
    assert out.read_bytes()[:4] == b"\x89PNG"
    page = out.with_suffix(".html").read_text()
    assert "(a) Transformer" in page and "(b) DGT" in page and ">striker<" in page
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["models"][0]["tokens"] == ["the", "striker", "scored", "a", "goal", "today", "!"]
    assert len(doc["models"][1]["scores"]) == 7


def test_untrained_model_warns(images, tmp_path):
    out = tmp_path / "u.png"
    res = run(["rollout", str(images["rgb"]), "--model", "dvit", "--out", str(out)])
    assert "UNTRAINED" in res.output and out.exists()


BAD_CASES = {
    "missing": (lambda c, im, t: ["rollout", str(t / "nope.png"), "-c", str(c["vit"])], "image not found"),
    "unreadable": (lambda c, im, t: ["rollout", str(im["fake"]), "-c", str(c["vit"])], "cannot read image"),
    "no-checkpoint": (lambda c, im, t: ["rollout", str(im["rgb"]), "-c", str(t / "missing.safetensors")],
                      "checkpoint not found"),
    "text-model": (lambda c, im, t: ["rollout", str(im["rgb"]), "-c", str(c["dgt"])], "text model"),
    "image-model-text": (lambda c, im, t: ["rollout", "--text", "hi", "-c", str(c["vit"])], "image model"),
}


def _check_error(returncode: int, stderr: str, expect: str, tmp_path: Path) -> None:
    assert returncode != 0
    err_lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1, stderr
    assert expect in " ".join(stderr.split()), stderr
    assert "Traceback" not in stderr
    assert not list(tmp_path.glob("*_rollout.*"))


def test_unreadable_image_subprocess(ckpts, images, tmp_path):
    """The real entry point in a fresh process: a text file named .png gives one line and exit 2."""
    args, expect = BAD_CASES["unreadable"]
    p = subprocess.run([sys.executable, "-c", "from robustbench_dgsa.cli import main; main()",
                        *args(ckpts, images, tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)})
    _check_error(p.returncode, p.stderr, expect, tmp_path)


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_gives_one_clear_line(case, ckpts, images, tmp_path, monkeypatch, capsys):
    """Same entry point (``main()``) in process, for every bad-input case."""
    from robustbench_dgsa.cli import main
    args, expect = BAD_CASES[case]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["dgsa-bench", *args(ckpts, images, tmp_path)])
    with pytest.raises(SystemExit) as exc:
        main()
    _check_error(exc.value.code or 0, capsys.readouterr().err, expect, tmp_path)
