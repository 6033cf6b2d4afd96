"""benchmarks/imagecorruptions_speed.py: its command line runs, skips the imagecorruptions side cleanly when that
package is absent, and its summary (ratios, geometric mean, ImageNet-C projection, verdict) is computed right."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "imagecorruptions_speed.py"


def _module():
    spec = importlib.util.spec_from_file_location("imagecorruptions_speed", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # top level imports the standard library only
    return mod


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


def test_help_runs():
    proc = _run("--help")
    assert proc.returncode == 0
    assert "--ic-python" in proc.stdout and "--n-ic" in proc.stdout


def test_bad_size_is_a_usage_error():
    proc = _run("--sizes", "100")
    assert proc.returncode == 2
    assert "--sizes takes 224 and/or 64" in proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("imagecorruptions") is not None,
                    reason="imagecorruptions is installed here: its side would not be skipped")
def test_json_without_imagecorruptions_skips_that_side(capsys, monkeypatch):
    """In-process (torch is imported already: a subprocess would spend its time importing it again)."""
    for key in _module().THREAD_ENV:
        monkeypatch.setenv(key, os.environ.get(key, "1"))      # main() sets them; restored afterwards
    monkeypatch.setattr(sys, "path", list(sys.path))
    rc = _module().main(["--n", "2", "--n-ic", "1", "--sizes", "64", "--corruptions", "contrast", "--severities", "1",
                         "--device", "cpu", "--threads", "1", "--json", "-"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert "SKIPPED" in out["ic_skipped"] and out["ic_python"] is None
    size = out["sizes"]["64"]
    assert "imagecorruptions" not in size and size["regime"] == "tiny-imagenet"
    assert size["suite"]["cpu"]["contrast"]["images_per_s"] > 0
    assert size["summary"]["cpu"]["ratios"] == {}
    assert out["verdict"]["target_missed"] is False
    assert out["machine"]["threads"] == 1 and len(out["loadavg_before"]) == 3


def _size_result(mod, suite_rounds: dict, ic_rounds: dict) -> dict:
    """A size's result as run_all builds it, from per-round images/s of each side."""
    n = len(next(iter(suite_rounds.values())))
    srows = [{k: {"images_per_s": v[r]} for k, v in suite_rounds.items()} for r in range(n)]
    irows = [{k: ({"images_per_s": v[r]} if v else {"error": "boom"}) for k, v in ic_rounds.items()} for r in range(n)]
    return {"rounds": n, "suite": {"cpu": mod.merge_rounds(srows)},
            "imagecorruptions": {"rows": mod.merge_rounds(irows)},
            "round_ratios": {"cpu": mod.round_ratios(srows, irows)}}


def test_summary_geomean_projection_and_verdict():
    mod = _module()
    bench = ["a", "b"]
    # a: per-round ratios 10, 5, 20 -> median 10 (the ratio of the medians, 200 / 15, would be 13.3)
    res = _size_result(mod, {"a": [100.0, 200.0, 300.0], "b": [400.0, 400.0, 400.0], "x": [1.0, 1.0, 1.0]},
                       {"a": [10.0, 40.0, 15.0], "b": [10.0, 20.0, 10.0], "x": None})
    s = mod.summarise(res, bench)["cpu"]
    assert s["ratios"] == {"a": 10.0, "b": 40.0}
    assert math.isclose(s["geomean_benchmark"], 20.0) and s["geomean_count"] == 2
    assert [round(g, 6) for g in s["geomean_per_round"]] == [20.0, 10.0, round(math.sqrt(20 * 40), 6)]
    assert res["suite"]["cpu"]["a"]["rounds_images_per_s"] == [100.0, 200.0, 300.0]
    assert "error" in res["imagecorruptions"]["rows"]["x"]
    assert math.isclose(s["imagenet_c_hours"], mod.IMAGENET_C_IMAGES * 5 * (1 / 200 + 1 / 400) / 3600)
    res["summary"] = {"cpu": s}
    lines, missed = mod.verdict({"224": res}, bench)
    assert missed is False and "20.0x -> MET" in lines[0]
    res = _size_result(mod, {"a": [100.0] * 3, "b": [100.0] * 3}, {"a": [10.0] * 3, "b": [10.0] * 3})
    res["summary"] = mod.summarise(res, bench)      # geometric mean 10x: the 20x target is missed
    lines, missed = mod.verdict({"224": res}, bench)
    assert missed is True and "NOT MET" in lines[0]
