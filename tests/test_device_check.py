"""benchmarks/device_check.py's stage runner: a stage over its time limit is killed with everything it started,
recorded as timed out with the figures it had written, the next stage runs, and device_check.json is complete
after every stage. The stages are replaced by small Python commands (no torch), so this takes a few seconds; the
real stages run in CI as ``python benchmarks/device_check.py --device cpu --quick`` (.ci/run)."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "device_check.py"


@pytest.fixture()
def dc(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))          # the script puts benchmarks/ on sys.path
    spec = importlib.util.spec_from_file_location("device_check_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # imports the standard library only (no torch in the parent)
    return mod


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


WRITE_ROW = """
import json, os, sys
def write(path, value, ok=True):
    tmp = path + ".tmp"
    open(tmp, "w").write(json.dumps({"rows": [{"item": "figure", "value": value, "ok": ok}], "data": {},
                                     "notes": [], "env": {"torch": "fake"}}))
    os.replace(tmp, path)
"""


def _fake_stages(pid_file: Path, json_path: Path) -> dict[str, list[str]]:
    """correctness: writes a figure, starts a grandchild that records its pid, then sleeps past any limit;
    speed: reads device_check.json and records the correctness stage's status as its figure;
    scaleout: fails with exit status 3; realrun: records a failed check."""
    sleeper = (WRITE_ROW + f"import subprocess, time\nwrite(sys.argv[1], 'before the limit')\n"
               f"g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
               f"open({str(pid_file)!r}, 'w').write(str(g.pid))\ntime.sleep(60)\n")
    reader = (WRITE_ROW + f"doc = json.load(open({str(json_path)!r}))\n"
              "write(sys.argv[1], doc['stages']['correctness']['status'] + ' / ' + "
              "doc['stages']['correctness']['rows'][0]['value'])\n")
    crash = "import sys; print('boom line'); sys.exit(3)\n"
    failing = WRITE_ROW + "write(sys.argv[1], 'wrong', ok=False)\n"
    return {"correctness": sleeper, "speed": reader, "scaleout": crash, "realrun": failing}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie still answers kill(0): look at its state
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def test_stage_over_its_limit_is_killed_recorded_and_the_next_runs(dc, tmp_path, monkeypatch):
    out = tmp_path / "out"
    pid_file = tmp_path / "grandchild.pid"
    codes = _fake_stages(pid_file, out / "device_check.json")
    monkeypatch.setattr(dc, "stage_command", lambda name, args, part, json_path: _child(codes[name]) + [str(part)])
    monkeypatch.setitem(dc.LIMITS, "quick", {"correctness": 2.0, "speed": 20, "scaleout": 20, "realrun": 20})
    t0 = time.monotonic()
    rc = dc.main(["--device", "cpu", "--quick", "--out", str(out)])
    assert time.monotonic() - t0 < 30
    assert rc == 1
    doc = json.loads((out / "device_check.json").read_text())
    st = doc["stages"]
    assert list(st) == ["correctness", "speed", "scaleout", "realrun"]
    c = st["correctness"]
    assert c["status"] == "timed out" and c["limit_s"] == 2.0 and 2.0 <= c["seconds"] < 15
    assert c["rows"][0]["value"] == "before the limit"        # the figures written before the kill are kept
    assert not _alive(int(pid_file.read_text()))               # the stage's own children were killed too
    # the JSON was complete after the first stage: the second stage read the first one's record from it
    assert st["speed"]["status"] == "passed"
    assert st["speed"]["rows"][0]["value"] == "timed out / before the limit"
    assert st["scaleout"]["status"] == "error" and st["scaleout"]["exit_code"] == 3
    assert "boom line" in st["scaleout"]["notes"][-1]
    assert st["realrun"]["status"] == "failed"
    assert doc["torch"] == {"torch": "fake"} and "finished" in doc
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == sorted(
        ["device_check.json", "device_check.md"] + [f"{s}.log" for s in st])   # few files: the device returns 8
    md = (out / "device_check.md").read_text()
    assert "| correctness | (stage) |" in md and "timed out" in md and "**FAIL**" in md


def test_a_stage_killed_while_exiting_after_all_its_checks_counts_by_its_checks(dc, tmp_path, monkeypatch):
    done = (WRITE_ROW.replace('"env": {"torch": "fake"}}', '"env": {}, "done": True}')
            + "import time\nwrite(sys.argv[1], 'all done')\ntime.sleep(60)\n")
    monkeypatch.setattr(dc, "stage_command", lambda name, args, part, json_path: _child(done) + [str(part)])
    monkeypatch.setitem(dc.LIMITS, "quick", dict.fromkeys(dc.STAGES, 1.5))
    assert dc.main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "speed"]) == 0
    rec = json.loads((tmp_path / "device_check.json").read_text())["stages"]["speed"]
    assert rec["status"] == "passed" and rec["exit_code"] is None and "finished" in rec["notes"][-1]


def test_unused_time_goes_to_the_next_stage(dc, tmp_path, monkeypatch):
    """correctness returns at once; speed needs 3 s of its own 2 s limit plus what correctness left."""
    codes = {"correctness": WRITE_ROW + "write(sys.argv[1], 'quick')\n",
             "speed": WRITE_ROW + "import time\ntime.sleep(3)\nwrite(sys.argv[1], 'slow')\n"}
    monkeypatch.setattr(dc, "stage_command", lambda name, args, part, json_path: _child(codes[name]) + [str(part)])
    monkeypatch.setitem(dc.LIMITS, "quick", {"correctness": 4.0, "speed": 2.0, "scaleout": 1, "realrun": 1})
    assert dc.main(["--device", "cpu", "--quick", "--out", str(tmp_path), "--only", "correctness,speed"]) == 0
    st = json.loads((tmp_path / "device_check.json").read_text())["stages"]
    assert st["speed"]["status"] == "passed" and st["speed"]["own_limit_s"] == 2.0
    assert st["speed"]["limit_s"] == pytest.approx(6.0 - st["correctness"]["seconds"], abs=0.11)


def test_only_reruns_a_part_and_keeps_the_other_records(dc, tmp_path, monkeypatch):
    out = tmp_path / "out"
    ok = WRITE_ROW + "write(sys.argv[1], 'v1 | with a pipe')\n"
    monkeypatch.setattr(dc, "stage_command", lambda name, args, part, json_path: _child(ok) + [str(part)])
    assert dc.main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    ok2 = WRITE_ROW + "write(sys.argv[1], 'v2')\n"
    monkeypatch.setattr(dc, "stage_command", lambda name, args, part, json_path: _child(ok2) + [str(part)])
    assert dc.main(["--device", "cpu", "--quick", "--out", str(out), "--only", "speed"]) == 0
    st = json.loads((out / "device_check.json").read_text())["stages"]
    assert st["speed"]["rows"][0]["value"] == "v2" and st["realrun"]["rows"][0]["value"] == "v1 | with a pipe"
    md = (out / "device_check.md").read_text()
    assert "v1 \\| with a pipe" in md                         # a pipe in a figure does not split the table row


def test_limits_fit_six_minutes_and_two(dc):
    assert sum(dc.LIMITS["full"].values()) <= 360
    assert sum(dc.LIMITS["quick"].values()) < 120
    assert set(dc.LIMITS["full"]) == set(dc.LIMITS["quick"]) == set(dc.STAGES)


@pytest.mark.parametrize("argv, message", [(["--only", "nope"], "--only: unknown stage 'nope'"),
                                           (["--device", "tpu"], "--device must be cpu"),
                                           (["--limit-scale", "0"], "--limit-scale must be > 0")])
def test_bad_arguments_are_one_error_line(dc, argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        dc.main(argv + ["--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_out_defaults_to_the_out_variable(dc, monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert dc.parse_args(["--device", "cpu"]).out == str(tmp_path)
    monkeypatch.delenv("OUT")
    assert dc.parse_args(["--device", "cpu"]).out == "device_check"


def test_prepare_copies_the_carried_files(dc, tmp_path, monkeypatch):
    src = tmp_path / "shared"
    for f in dc.CARRIED:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_bytes(f.encode())
    dest = tmp_path / "devdata"
    assert dc.prepare(dest, src) == 0
    assert all((dest / f).read_bytes() == f.encode() for f in dc.CARRIED)
    (src / dc.CARRIED[0]).unlink()
    assert dc.prepare(tmp_path / "other", src) == 2 and not (tmp_path / "other").exists()


@pytest.fixture()
def stages(dc):
    import device_check_stages            # beside the script (on sys.path once the script is loaded)
    return device_check_stages


def test_backend_names_from_aten_operators(stages):
    assert stages.backend_of(["aten::_scaled_dot_product_flash_attention_for_cpu"]) == "flash"
    assert stages.backend_of(["aten::_scaled_dot_product_efficient_attention",
                              "aten::_efficient_attention_backward"]) == "mem-efficient"
    assert stages.backend_of(["aten::_scaled_dot_product_cudnn_attention"]) == "cudnn"
    assert stages.backend_of(["aten::_scaled_dot_product_attention_math"]) == "math"
    assert stages.backend_of([]) == "explicit products (no SDPA call)"


def test_projection_of_reproduce_paper(stages, dc, tmp_path):
    """5 seeds x (epochs x fit / train rate + (epochs x val + test x conditions) / inference rate), + corrupting."""
    speed = {"table9_meter": [{"model": m, "geometry": "32/4", "samples_per_s": 3000.0} for m in stages.VISION],
             "vs_timm": {"32/4 infer": {"our ViT": 20000.0, "DViT": 20000.0, "DGViT": 20000.0}},
             "text": {m: {"train_samples_per_s": 800.0, "infer_fp32_samples_per_s": 4000.0} for m in stages.TEXT},
             "corruptions_32": {"cpu": {"regenerate_10k_s": 100.0}}}
    rec = dc.Recorder(tmp_path / "part.json")
    ctx = type("Ctx", (), {"quick": False, "cuda": False, "device": SimpleNamespace(type="cpu"),
                           "earlier": staticmethod(lambda stage: speed)})()
    stages.project_paper(rec, ctx)
    got = rec.data["projection_paper"]
    # CIFAR-10: 100 epochs, 10 % validation, 10,000 test images x (1 + 19 x 5) conditions
    vision = 5 * (100 * 45_000 / 3000 + (100 * 5_000 + 10_000 * 96) / 20000)
    # IMDB: 10 epochs, 20 % validation, 25,000 test texts x (1 + 11 noises x 5) conditions
    text = 5 * (10 * 20_000 / 800 + (10 * 5_000 + 25_000 * 56) / 4000)
    assert got["seconds_per_model_5_seeds"]["dgvit"] == pytest.approx(vision)
    assert got["seconds_per_model_5_seeds"]["dt"] == pytest.approx(text)
    assert got["total_s"] == pytest.approx(3 * vision + 3 * text + 100.0)
    no_speed = type("Ctx", (), {"quick": False, "cuda": False, "earlier": staticmethod(lambda stage: {})})()
    stages.project_paper(rec, no_speed)
    assert rec.rows[-1]["value"].startswith("not projected")


def test_paper_table9_ratio_read_from_the_published_values(stages):
    pub = stages.paper_table9()
    assert pub["dgvit"]["throughput"] / pub["vit"]["throughput"] == pytest.approx(0.59, abs=0.005)
