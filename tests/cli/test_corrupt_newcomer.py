"""``corrupt`` like the other commands: frost's photographs found under --data-root by the one rule, a single
photograph taken (corrupted copies + a preview grid), and a no-input error that shows a call that works."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from robustbench_dgsa.cli import app
from robustbench_dgsa.util.errors import UserError

runner = CliRunner()


def _fake_frost(folder: Path) -> Path:
    """Five textured 'photographs' named as the reference's (the loader needs the names, not the pictures)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    for name in ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg"):
        Image.fromarray(rng.integers(0, 256, (300, 300, 3), dtype=np.uint8)).save(folder / name)
    return folder


def test_frost_rule_given_folder_then_data_root_then_none(tmp_path):
    from robustbench_dgsa.data.locate import frost_dir_for
    assert frost_dir_for(None, tmp_path) is None                        # no corruptions/frost under the root
    assert frost_dir_for(None, None) is None
    frost = _fake_frost(tmp_path / "corruptions" / "frost")
    assert frost_dir_for(None, tmp_path) == frost
    assert frost_dir_for(tmp_path / "mine", tmp_path) == tmp_path / "mine"   # an explicit folder wins


def test_evaluate_and_corrupt_share_the_frost_rule():
    """One place: the engine's on-the-fly frost and the corrupt job both call data.locate.frost_dir_for."""
    root = Path(__file__).resolve().parents[2] / "robustbench_dgsa"
    for rel in ("engine/evaluate.py", "jobs/corrupt.py", "jobs/reproduce.py", "jobs/zoo.py"):
        text = (root / rel).read_text()
        assert "frost_dir_for" in text, rel
        assert '"corruptions" / "frost"' not in text, rel


def test_corrupt_finds_frost_under_data_root(tmp_path):
    _fake_frost(tmp_path / "root" / "corruptions" / "frost")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8))
    res = runner.invoke(app, ["corrupt", "-i", str(tmp_path / "x.npy"), "--corruption", "frost", "-s", "1",
                              "-o", str(tmp_path / "out"), "--data-root", str(tmp_path / "root"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout[res.stdout.index("{"):])
    assert summary["frost_source"].startswith("dir:") and summary["frost_source"].endswith("corruptions/frost")
    assert "procedural" not in res.output


def test_corrupt_takes_one_photograph(tmp_path):
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (40, 60, 3), dtype=np.uint8)).save(tmp_path / "p.png")
    out = tmp_path / "out"
    res = runner.invoke(app, ["corrupt", "-i", str(tmp_path / "p.png"), "--corruption", "fog,contrast", "-s", "2,4",
                              "-o", str(out), "--constants", "cifar", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout[res.stdout.index("{"):])
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([f"p_{c}_s{s}.png" for c in ("fog", "contrast") for s in (2, 4)] + ["p_preview.png"])
    from corruptions import corrupt
    x = np.asarray(Image.open(tmp_path / "p.png"))
    got = np.asarray(Image.open(out / "p_fog_s4.png"))
    assert np.array_equal(got, corrupt(x[None], "fog", 4, constants="cifar", seed=0, indices=[0])[0])
    assert summary["constants"] == "cifar" and len(summary["files"]) == 4
    again = runner.invoke(app, ["corrupt", "-i", str(tmp_path / "p.png"), "--corruption", "fog", "-s", "2",
                                "-o", str(out)])
    assert isinstance(again.exception, UserError) and again.exception.options == ("overwrite",)


def test_no_input_error_shows_a_call_that_works(tmp_path, monkeypatch):
    res = runner.invoke(app, ["corrupt", "--severity", "1-5"])
    assert isinstance(res.exception, UserError)
    message = str(res.exception)
    assert "for example: dgsa-bench corrupt " in message
    example = shlex.split(message.split("for example: ", 1)[1])[1:]
    monkeypatch.chdir(tmp_path)
    ok = runner.invoke(app, example)
    assert ok.exit_code == 0, ok.output
    assert any(p.suffix == ".png" for p in tmp_path.iterdir())


@pytest.mark.parametrize("suffix", [".jpg", ".png"])
def test_is_image_file(tmp_path, suffix):
    from robustbench_dgsa.jobs.corrupt import is_image_file
    p = tmp_path / f"a{suffix}"
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(p)
    assert is_image_file(str(p)) and not is_image_file(str(tmp_path)) and not is_image_file("cifar10")
