"""Sweeps: stable job ids, idempotent runs into one store, Slurm script, and the CLI's error handling."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from robustbench_dgsa import store
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.jobs.sweep import EvalSettings, is_finished, job_id, load_jobs, plan, run, status, write_plan

TINY = {"model.dim": "16", "model.depth": "1", "model.heads": "2", "model.head_hidden": "16",
        "train.epochs": "1", "train.batch_size": "32", "data.max_train": "96", "data.max_test": "32"}


def test_plan_ids_stable_and_distinct():
    a = plan(["vit", "dgvit"], [0, 1], ["synthetic-vision"], "tiny", TINY)
    b = plan(["vit", "dgvit"], [0, 1], ["synthetic-vision"], "tiny", dict(reversed(list(TINY.items()))))
    assert [j.id for j in a] == [j.id for j in b]
    assert len({j.id for j in a}) == 4
    assert a[0].id == job_id("vit", "synthetic-vision", "tiny", 0, TINY)
    c = plan(["vit"], [0], ["synthetic-vision"], "tiny", {**TINY, "train.lr": "1e-3"})
    assert c[0].id not in {j.id for j in a}


def test_plan_skips_modality_mismatch_and_validates():
    jobs = plan(["vit", "dgt"], [0], ["synthetic-vision", "synthetic-text"], "tiny")
    assert {(j.model, j.dataset) for j in jobs} == {("vit", "synthetic-vision"), ("dgt", "synthetic-text")}
    with pytest.raises(UserError, match="unknown dataset"):
        plan(["vit"], [0], ["nope"], "tiny")
    with pytest.raises(UserError, match="unknown model"):
        plan(["nope"], [0], ["synthetic-vision"], "tiny")
    with pytest.raises(UserError, match="preset"):
        plan(["vit"], [0], ["synthetic-vision"], "huge")


def test_write_plan_appends_and_keeps_order(tmp_path):
    sd = tmp_path / "sw"
    first = write_plan(sd, plan(["vit"], [0, 1], ["synthetic-vision"], "tiny", TINY))
    more = write_plan(sd, plan(["vit"], [0, 1, 2], ["synthetic-vision"], "tiny", TINY))
    assert [j.id for j in more[:2]] == [j.id for j in first] and len(more) == 3
    assert [j.id for j in load_jobs(sd)] == [j.id for j in more]
    with pytest.raises(UserError, match="other settings"):
        write_plan(sd, first, data_root="/elsewhere")


def test_run_trains_evaluates_and_skips_finished(tmp_path):
    sd = tmp_path / "sw"
    jobs = plan(["vit", "dvit"], [0], ["synthetic-vision"], "tiny", {**TINY, "train.device": "cpu"})
    write_plan(sd, jobs, evaluation=EvalSettings(corruptions=["contrast"], severities=[2]), device="cpu")
    first = run(sd)
    assert sorted(first["ran"]) == sorted(j.id for j in jobs) and not first["failed"]
    assert all(is_finished(sd, j) for j in jobs)
    df = store.load_results(sd / "store")
    assert set(df.model) == {"vit", "dvit"} and set(df.kind) == {"train", "eval"}
    ev = df[(df.kind == "eval") & (df.metric == "accuracy")]
    assert sorted(zip(ev.model, ev.condition)) == sorted(
        [("vit", "clean"), ("vit", "contrast"), ("dvit", "clean"), ("dvit", "contrast")])
    n_rows = len(df)
    second = run(sd)                                            # idempotent: nothing to do
    assert second["ran"] == [] and sorted(second["skipped"]) == sorted(j.id for j in jobs)
    assert len(store.load_results(sd / "store")) == n_rows
    assert status(sd)["finished"] and not status(sd)["pending"]


# --- CLI -----------------------------------------------------------------------------------------------------

def _cli(*args):
    from robustbench_dgsa.cli import app
    return CliRunner().invoke(app, list(args))


def test_cli_bad_input_is_one_line_and_nonzero(tmp_path, run_cli_cases):
    """Through the real entry point (cli.main): one clear line on stderr, exit code 2, no traceback."""
    cases = [
        (["train", "--model", "vit", "--dataset", "no-such-data", "--out", str(tmp_path / "a")], "unknown dataset"),
        (["train", "--model", "nope", "--dataset", "synthetic-vision", "--out", str(tmp_path / "b")], "unknown model"),
        (["evaluate", "--checkpoint", str(tmp_path / "missing.safetensors")], "checkpoint not found"),
        (["train", "--model", "vit", "--dataset", "cifar10", "--data-root", str(tmp_path), "--out",
          str(tmp_path / "c")], "cifar"),
        (["evaluate", "--checkpoint", str(tmp_path / "junk.safetensors")], "not a safetensors checkpoint"),
        (["sweep", "run", str(tmp_path / "nosweep")], "jobs.jsonl"),
    ]
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 20)
    for (args, expect), (code, err) in zip(cases, run_cli_cases([a for a, _ in cases])):
        err = err.strip()
        assert code == 2, (args, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("error:") and expect.lower() in err.lower(), err


def test_cli_errors_are_user_errors(tmp_path):
    r = _cli("train", "--model", "vit", "--dataset", "synthetic-vision", "--out", str(tmp_path), "--seeds", "4-1")
    assert isinstance(r.exception, UserError) and "seeds" in str(r.exception)
    r = _cli("train", "--model", "vit", "--dataset", "synthetic-vision", "--out", str(tmp_path),
             "--set", "model.colour=red")
    assert isinstance(r.exception, UserError) and "colour" in str(r.exception)
    r = _cli("evaluate", "--checkpoint", str(tmp_path / "x"), "--data-root", str(tmp_path / "none"))
    assert isinstance(r.exception, UserError) and "data root not found" in str(r.exception)
    r = _cli("sweep", "run", str(tmp_path / "nosweep"))
    assert isinstance(r.exception, UserError) and "jobs.jsonl" in str(r.exception)
    r = _cli("sweep", "run-one", str(tmp_path / "nosweep"), "--index", "0")
    assert isinstance(r.exception, UserError)


def test_cli_train_evaluate_json(tmp_path):
    out = tmp_path / "runs"
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    r = _cli("train", "--model", "vit", "--dataset", "synthetic-vision", "--seeds", "0-1", "--out", str(out),
             "--device", "cpu", "--json", "-q", *sets)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert [x["seed"] for x in summary["runs"]] == [0, 1]
    ck = summary["runs"][1]["checkpoint"]
    assert ck.endswith("vit-synthetic-vision-s1/checkpoint.safetensors")
    assert 0 <= summary["runs"][0]["final"]["test_accuracy"] <= 1
    r = _cli("evaluate", "--checkpoint", ck, "--corruptions", "brightness", "--severity", "1-2",
             "--store", str(out / "store"), "--device", "cpu", "--json", "-q")
    assert r.exit_code == 0, r.output
    ev = json.loads(r.stdout)
    assert [row["condition"] for row in ev["table"]] == ["clean", "brightness", "brightness"]
    df = store.load_results(out / "store")
    assert set(df.seed) == {0, 1} and set(df.kind) == {"train", "eval"}


def test_cli_sweep_plan_run(tmp_path):
    sd = tmp_path / "sw"
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    r = _cli("sweep", "plan", str(sd), "--models", "transformer", "--datasets", "synthetic-text", "--seeds", "0",
             "--text-noise", "all", "--severity", "1", "--device", "cpu", "--json", *sets,
             "--set", "model.max_len=32")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["jobs"]) == 1
    r = _cli("sweep", "run-one", str(sd), "--index", "0", "--json")
    assert r.exit_code == 0, r.output
    r = _cli("sweep", "run", str(sd), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["ran"] == []
    df = store.load_results(sd / "store")
    assert {"cer", "wer"} <= set(df.metric)
