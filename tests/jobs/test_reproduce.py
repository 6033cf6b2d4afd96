"""The main job at its smallest size (``quick``), end to end inside the test suite, then resumed."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robustbench_dgsa import store
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.jobs.reproduce import make_plan, reproduce

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce") / "out"
    phases: list[str] = []
    # two seeds: the report must then mark nothing significant (checked below)
    folder = reproduce(out, quick=True, seeds=(0, 1), progress=False, on_phase=lambda name, s: phases.append(name))
    return folder, phases


def test_quick_main_job_end_to_end(quick_run):
    out, phases = quick_run
    assert phases == ["corrupt", "train_evaluate", "rollout", "bench", "report"]
    md = (out / "index.md").read_text()
    for needle in ("Figure 4", "Figure 5", "Table 1", "Table 3", "Table 9", "Figure 2", "Figure 3",
                   "Robustness summary", "Wilcoxon", "Rollout salient mass"):
        assert needle in md, needle
    for name in ("fig4_severity_synthetic-vision.png", "fig4_severity_synthetic-text.pdf",
                 "fig5_curves_synthetic-vision.pdf", "table1_accuracy_vision.md", "table3_accuracy_text.tex",
                 "table9_efficiency.md", "fig2_rollout_synthetic-vision.png", "fig3_rollout_synthetic-text.html"):
        assert (out / name).is_file(), name
    for link in re.findall(r"\]\(([^)]+)\)", md):
        assert link.startswith("#") or (out / link).is_file(), link     # contents anchors, or files
    df = store.load_results(out / "store")
    ev = df[df["kind"] == "eval"]
    assert set(ev["model"]) == {"vit", "dvit", "dgvit", "transformer", "dt", "dgt"}
    assert set(ev["seed"]) == {0, 1}                             # the fixture asks for two seeds
    img = ev[(ev["dataset"] == "synthetic-vision") & (ev["metric"] == "accuracy")]
    assert set(img["condition"]) == {"clean", "gaussian_noise", "fog"} and set(img["severity"]) == {0, 1, 3}
    txt = ev[(ev["dataset"] == "synthetic-text")]
    assert {"cer", "wer"} <= set(txt["metric"])
    bench = df[df["kind"] == "bench"]
    assert set(bench["metric"]) == {"params", "flops", "train_throughput", "latency_ms", "peak_memory_mb",
                                    "load_avg_1m"}   # the machine load the timings were measured under
    timed = bench[bench["metric"] != "load_avg_1m"]
    assert (timed["value"] > 0).all() and bench["model"].nunique() == 6
    assert (bench.loc[bench["metric"] == "load_avg_1m", "value"] >= 0).all()
    assert (df["kind"] == "rollout").any()
    timings = json.loads((out / "timings.json").read_text())
    assert timings["phases"]["total"] > 0
    # the rollouts are counted: one set per model and dataset, made right after their jobs, and timed
    assert timings["rollouts"] == 6 and timings["phases"]["rollout"] > 0
    assert timings["within"]["rollout"] == "train_evaluate"


def test_cli_rerun_resumes_and_prints_summary(quick_run):
    """Re-running the same main job (through the CLI) skips training, evaluation, rollouts and benchmarks."""
    from typer.testing import CliRunner

    from robustbench_dgsa.cli import app
    out, _ = quick_run
    before = sorted(p.name for p in (out / "store" / "rows").glob("*.jsonl"))
    ckpts = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/checkpoint.safetensors")}
    assert len(ckpts) == 12                                     # 6 models x the fixture's 2 seeds
    res = CliRunner().invoke(app, ["reproduce", "--quick", "--seed", "0-1", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (out / "store" / "rows").glob("*.jsonl")) == before
    assert {p: p.stat().st_mtime_ns for p in ckpts} == ckpts
    phases = json.loads((out / "timings.json").read_text())["phases"]
    assert phases["train_evaluate"] < 30 and phases["bench"] < 10   # nothing re-ran (a re-run takes minutes)
    doc = json.loads(res.output[res.output.index("{"):])
    assert Path(doc["report"]).name == "index.html"
    models = {r["model"] for r in doc["summary"]}
    assert models == {"ViT", "DViT", "DGViT", "Transformer", "DT", "DGT"}
    assert {r["robust"] for r in doc["summary"]} == {"mCA", "mNA"}


def test_plan_validates_names(tmp_path):
    with pytest.raises(UserError, match="unknown dataset"):
        make_plan(tmp_path, image_dataset="cifar11")
    with pytest.raises(UserError, match="not a text dataset"):
        make_plan(tmp_path, text_dataset="cifar10")
    with pytest.raises(UserError, match="unknown model"):
        make_plan(tmp_path, models="vit,resnet")
    with pytest.raises(UserError, match="unknown preset"):
        make_plan(tmp_path, preset="huge")
    plan = make_plan(tmp_path, text_dataset="none")
    assert plan.models == ["vit", "dvit", "dgvit"] and len(plan.corruptions) == 19 and len(plan.jobs) == 9
    plan = make_plan(tmp_path, preset="paper", models="dgt", image_dataset="none")
    assert plan.datasets == {"text": ["imdb"]} and len(plan.text_noise) == 11
    plan = make_plan(tmp_path, image_dataset="none", text_dataset="synthetic-text,imdb", models="dgt", seeds=[0, 1])
    assert plan.datasets == {"text": ["synthetic-text", "imdb"]}
    assert [(j.dataset, j.seed) for j in plan.jobs] == [("synthetic-text", 0), ("synthetic-text", 1), ("imdb", 0),
                                                        ("imdb", 1)]
    assert all("data.data_root" not in j.overrides and "train.device" not in j.overrides for j in plan.jobs)


def test_quick_report_tables_compile_and_claim_nothing(quick_run, compile_latex):
    """The quick job has two seeds: every comparison is 'not testable', and every .tex compiles."""
    out, _ = quick_run
    text = "".join(p.read_text() for p in out.glob("*.md")) + "".join(p.read_text() for p in out.glob("*.tex"))
    assert "not testable: 2 seeds" in text
    assert not re.search(r"\| significant \||Significant\W+yes|\bsignificantly\b", text)
    assert compile_latex(list(out.glob("*.tex"))) == {}


def test_worker_processes_do_not_change_results(tmp_path):
    """The same small main job in one process and in a pool of two gives identical numbers."""
    kw = dict(quick=True, models="vit,transformer", seeds=[0], device="cpu", progress=False)
    frames = []
    for workers in (1, 2):
        out = reproduce(tmp_path / f"w{workers}", workers=workers, **kw)
        assert json.loads((out / "timings.json").read_text())["workers"] == workers
        df = store.load_results(out / "store")
        df = df[df["kind"].isin(["train", "eval"])]
        frames.append(sorted(zip(df["kind"], df["model"], df["split"], df["condition"], df["severity"],
                                 df["metric"], df["epoch"], df["value"].round(12).fillna(-1.0))))
    assert frames[0] == frames[1] and len(frames[0]) > 20
