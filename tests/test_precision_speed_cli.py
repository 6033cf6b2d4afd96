"""benchmarks/precision_speed.py: a smoke run writes its rows, and the round-by-round ratio it reports is the
median of the paired rounds' throughput ratios."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "precision_speed.py"


def test_smoke_run_reports_paired_round_ratios(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--models", "vit", "--modes", "eval", "--threads", "1",
                           "--variants", "fp32,bf16", "--steps", "1", "--rounds", "3", "--warmup", "1",
                           "--eval-batches", "1", "--json", str(out)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = {r["variant"]: r for r in json.loads(out.read_text())["rows"]}
    fp32, bf16 = rows["fp32"], rows["bf16"]
    assert len(fp32["round_wall"]) == len(bf16["round_wall"]) == 3
    assert fp32["wall"] == max(fp32["round_wall"])
    expected = statistics.median(a / b for a, b in zip(bf16["round_wall"], fp32["round_wall"]))
    assert abs(bf16["vs_fp32_round_median"] - expected) < 1e-12
    assert fp32["vs_fp32_round_median"] is None
    assert "per round x" in proc.stdout


def test_an_unknown_model_is_a_usage_error_without_traceback():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--models", "nosuchmodel", "--quick"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    assert "unknown model 'nosuchmodel'" in proc.stderr and "Traceback" not in proc.stderr
