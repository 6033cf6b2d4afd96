"""``dgsa-bench evaluate --threat-model linf|l2`` (issue 36): bad input is one error line and exit 2 with nothing
written; a tiny outside model is attacked (APGD-CE, 8 images) into the store, eps in pixel units."""
from __future__ import annotations

import json

import pytest

from robustbench_dgsa import store

pytest.importorskip("pyautoattack", reason="pyautoattack (the [adversarial] extra) not installed")

FACTORY = """
import torch
from torch import nn

def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 6))
"""


@pytest.fixture
def factory(tmp_path, monkeypatch):
    (tmp_path / "advtiny.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "advtiny:tiny"


BASE = ["evaluate", "--dataset", "synthetic-vision", "--max-examples", "8", "--device", "cpu"]


@pytest.mark.parametrize("extra,msg", [
    (["--threat-model", "linf", "--eps", "-0.1"], "eps must be >= 0"),
    (["--threat-model", "linf", "--eps", "1.5"], "at most 1"),
    (["--threat-model", "l7"], "unknown threat model"),
    (["--threat-model", "linf", "--attack", "pgd"], "unknown attack"),
    (["--eps", "0.1"], "go with --threat-model linf, l2 or a"),
    (["--threat-model", "l2", "--eps-ladder"], "threat model L2 has no eps ladder (threat models with one: Linf"),
])
def test_bad_input_is_one_error_line_exit_2(run_main, tmp_path, factory, extra, msg):
    code, out, err = run_main([*BASE, "--module", factory, "--store", str(tmp_path / "s"), *extra], tmp_path)
    assert code == 2 and err.count("error:") == 1 and msg in err, err
    assert not (tmp_path / "s").exists()


def test_evaluate_linf_into_the_store(run_main, tmp_path, factory):
    code, out, err = run_main([*BASE, "--module", factory, "--store", str(tmp_path / "s"), "--threat-model",
                               "linf", "--eps", "0.05", "--attack", "apgd-ce", "--attack-seed", "7", "--json"],
                              tmp_path)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["rows"][0]["attack"] == "APGD-CE only (not AutoAttack)" and doc["rows"][0]["n"] == 8
    df = store.load_results(tmp_path / "s")
    row = df[df["kind"] == "adversarial"].iloc[0]
    assert row["condition"] == "linf" and abs(row["eps"] - 0.05) < 1e-12 and row["attack"] == "apgd-ce"
    rec = store.load_runs(tmp_path / "s")[doc["run_id"]]
    assert rec["attack_seed"] == 7 and rec["library_version"] == "0.2.0"
    pred = store.load_predictions(tmp_path / "s", doc["run_id"])
    assert (pred["norm"] <= 0.05 + 1e-6).all()
