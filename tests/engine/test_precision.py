"""Precision (issue 30): what ``amp="auto"`` resolves to, and the resolved precision as part of a run's identity
(rows, run records, checkpoint, state, done.json; resume; finished-run checks; old stores; analysis; hashes)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from robustbench_dgsa import store
from robustbench_dgsa.config import RunConfig, resolve_config
from robustbench_dgsa.engine import predict
from robustbench_dgsa.engine.predict import compiled, cpu_native_bf16, resolve_precision
from robustbench_dgsa.models import get_model_config
from robustbench_dgsa.util.errors import UserError

REPO = Path(__file__).resolve().parents[2]
_READ_FLAGS = predict._cpuinfo_flags
CPU = torch.device("cpu")
TINY = {"model.dim": 16, "model.depth": 1, "model.heads": 2, "model.head_hidden": 16, "train.epochs": 2,
        "train.batch_size": 32, "train.device": "cpu", "data.max_train": 96, "data.max_test": 32}


def _cpu(monkeypatch, capability: str, flags: dict | None):
    """Simulate a CPU: ATen's dispatched capability and torch.cpu.get_capabilities() (None: not in this torch)."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    if flags is None:
        def missing():
            raise AttributeError("get_capabilities")
        monkeypatch.setattr(torch.cpu, "get_capabilities", missing)
    else:
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: dict(flags))


# --- resolution ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, want", [({"avx512_bf16": True}, "bf16"), ({"amx_bf16": True}, "bf16"),
                                         ({"avx512_bf16": False, "amx_bf16": False, "avx512_f": True}, "fp32"),
                                         ({}, "fp32")])
def test_auto_is_bf16_exactly_where_the_cpu_computes_it(monkeypatch, flags, want):
    _cpu(monkeypatch, "AVX512", flags)
    assert resolve_precision(CPU, "auto") == want
    assert resolve_precision(CPU, "off") == "fp32" and resolve_precision(CPU, "bf16") == "bf16"  # unchanged


@pytest.mark.parametrize("capability", ["AVX2", "DEFAULT", "NO AVX"])
def test_auto_is_fp32_below_avx512_kernels_even_with_bf16_hardware(monkeypatch, capability):
    """CI's second pass (ATEN_CPU_CAPABILITY=default) on a bf16 CPU: emulated bf16, so fp32."""
    _cpu(monkeypatch, capability, {"avx512_bf16": True, "amx_bf16": True})
    assert resolve_precision(CPU, "auto") == "fp32"
    assert "capability" in cpu_native_bf16()[1]


def test_fallback_reads_proc_cpuinfo_flags(monkeypatch, tmp_path):
    _cpu(monkeypatch, "AVX512", None)
    monkeypatch.setattr(predict, "_cpuinfo_flags", lambda: {"avx512f", "avx512_bf16"})
    assert resolve_precision(CPU, "auto") == "bf16" and "/proc/cpuinfo" in cpu_native_bf16()[1]
    monkeypatch.setattr(predict, "_cpuinfo_flags", lambda: {"avx512f", "avx2"})
    assert resolve_precision(CPU, "auto") == "fp32"
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n\nprocessor\t: 1\n")
    assert _READ_FLAGS(str(info)) >= {"avx512_bf16", "avx2"}
    assert _READ_FLAGS(str(tmp_path / "absent")) == set()


def test_this_machine_agrees_with_pytorchs_own_check():
    """The real detector: bf16 iff ATen runs AVX512 kernels and torch says AVX512-BF16 or AMX-BF16."""
    native = torch.backends.cpu.get_cpu_capability() == "AVX512" and (
        torch.cpu._is_avx512_bf16_supported() or bool(torch.cpu.get_capabilities().get("amx_bf16")))
    assert cpu_native_bf16()[0] == native
    assert resolve_precision(CPU, "auto") == ("bf16" if native else "fp32")
    with pytest.raises(UserError, match="unknown amp setting"):
        resolve_precision(CPU, "fp16")


@pytest.mark.parametrize("capability, flags, warned", [("AVX2", {"avx512_bf16": True}, True),
                                                        ("AVX512", {}, True),
                                                        ("AVX512", {"amx_bf16": True}, False)])
def test_bf16_forced_on_a_cpu_that_emulates_it_says_so(monkeypatch, capability, flags, warned):
    """`train.amp=bf16` where bf16 is emulated is allowed (same numbers as elsewhere) but slower than fp32: one
    warning naming why; fp32, CUDA and native bf16 say nothing."""
    _cpu(monkeypatch, capability, flags)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        predict.warn_if_emulated(CPU, "bf16")
        predict.warn_if_emulated(CPU, "fp32")
        predict.warn_if_emulated(torch.device("cuda"), "bf16")
    texts = [str(w.message) for w in seen]
    assert len(texts) == int(warned)
    if warned:
        assert "emulated" in texts[0] and ("capability" in texts[0] or "AVX512-BF16" in texts[0])


def test_compile_falls_back_to_the_plain_forward_with_one_warning(monkeypatch):
    model = torch.nn.Linear(4, 3)

    def broken(m):
        def call(*a, **k):
            raise RuntimeError("no C compiler")
        return call
    monkeypatch.setattr(torch, "compile", broken)
    fwd = compiled(model, True, "the test model")
    x = torch.randn(5, 4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out1, out2 = fwd(x), fwd(x)
    assert torch.equal(out1, model(x)) and torch.equal(out2, model(x))
    assert len(seen) == 1 and "torch.compile is unavailable for the test model" in str(seen[0].message)
    assert compiled(model, False) is None


# --- identity: hashes, stores ------------------------------------------------------------------------------

def test_committed_config_hashes_are_unchanged():
    """The evidence store's run records and the shipped zoo cards: each stored config still hashes to the hash
    recorded with it (train.compile is a new field; amp is unchanged)."""
    runs = [r for r in store.load_runs(REPO / "results" / "evidence" / "store").values() if r.get("kind") == "train"]
    assert len(runs) >= 45
    for r in runs:
        assert RunConfig.from_dict(r["config"]).hash() == r["config_hash"]
    # the cards' configs, hashed by the code before issue 30 (the image cards' equal their training.config_hash;
    # the text cards' configs differ from what they trained with in data-decided fields)
    before = {"vit-cifar10": "2e955a78ac61", "dvit-cifar10": "32325cd08da8", "dgvit-cifar10": "de43ab1c1ec8",
              "transformer-imdb": "b01b61201d54", "dt-imdb": "1912294cef58", "dgt-imdb": "2c2f168e3aec"}
    for name, want in before.items():
        d = json.loads((REPO / "robustbench_dgsa" / "zoo" / f"{name}.json").read_text())
        assert RunConfig.from_dict(d["config"]).hash() == want, name
    cfg = resolve_config(get_model_config("vit"), "cifar10", "evidence")
    on = resolve_config(get_model_config("vit"), "cifar10", "evidence", overrides={"train.compile": "on"})
    assert on.train.compile is True and on.hash() == cfg.hash()


def test_rows_without_precision_read_fp32(tmp_path):
    """Stores written before the column existed (JSONL rows and a Parquet table without it) read as fp32."""
    old = {"run_id": "eval-old", "kind": "eval", "model": "vit", "dataset": "cifar10", "split": "test",
           "condition": "clean", "severity": 0, "seed": 0, "metric": "accuracy", "value": 0.5, "n": 10}
    (tmp_path / "a" / "rows").mkdir(parents=True)
    (tmp_path / "a" / "rows" / "eval-old.jsonl").write_text(json.dumps(old) + "\n")
    assert set(store.load_results(tmp_path / "a")["precision"]) == {"fp32"}
    (tmp_path / "b").mkdir()
    cols = [c for c in store.COLUMNS if c != "precision"]
    store.normalize(pd.DataFrame([old]))[cols].to_parquet(store.results_path(tmp_path / "b"))
    assert set(store.load_results(tmp_path / "b")["precision"]) == {"fp32"}


def test_analysis_refuses_to_pool_precisions(tmp_path):
    from robustbench_dgsa.analysis.metrics import clean_accuracy
    for run, precision, value in (("eval-a", "fp32", 0.5), ("eval-b", "bf16", 0.6)):
        w = store.RunWriter(tmp_path, run, base=dict(kind="eval", model="vit", dataset="cifar10", split="test",
                                                     seed=0 if run == "eval-a" else 1, precision=precision))
        w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=value, n=10)])
    df = store.load_results(tmp_path)
    with pytest.raises(UserError, match="vit on cifar10 were computed in bf16 and fp32"):
        clean_accuracy(df, "cifar10")
    assert clean_accuracy(df, "cifar10", precision="bf16")["value"].tolist() == [0.6]
    assert clean_accuracy(df, "cifar10", precision="fp32")["value"].tolist() == [0.5]


# --- identity: training runs -------------------------------------------------------------------------------

def _cfg():
    return resolve_config(get_model_config("vit"), "synthetic-vision", "tiny", overrides=TINY)


def _weights(ckpt: Path) -> dict:
    from safetensors.torch import load_file
    return load_file(str(ckpt))


def test_precision_is_recorded_everywhere_and_resumes_bit_identically(tmp_path):
    """A bf16 run: rows, run record, checkpoint meta, state and done.json say bf16; the config hash is that of the
    config (the pin does not enter it); killed after epoch 1 and resumed with another request, it keeps bf16 and
    ends bit-identical to the uninterrupted run."""
    from robustbench_dgsa.engine.train import train
    from robustbench_dgsa.engine.train_state import load_state
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    full = train(_cfg(), 0, tmp_path / "full", amp="bf16", progress=False)
    assert full.precision == "bf16"
    df = store.load_results(tmp_path / "full" / "store")
    assert set(df["precision"]) == {"bf16"} and len(df) > 5
    rec = store.load_runs(tmp_path / "full" / "store")[full.run_id]
    assert rec["precision"] == "bf16" and rec["compiled"] is False
    assert read_checkpoint_meta(full.checkpoint)[1]["precision"] == "bf16"
    state = load_state(tmp_path / "full" / "train_state.safetensors")
    assert state["precision"] == "bf16"
    # master weights and optimizer state stay float32 under bf16 autocast
    assert {t.dtype for t in _weights(full.checkpoint).values()} == {torch.float32}
    moments = [t for st in state["optimizer"]["state"].values() for k, t in st.items() if k != "step"]
    assert moments and {t.dtype for t in moments} == {torch.float32}
    assert json.loads((tmp_path / "full" / "done.json").read_text())["precision"] == "bf16"

    train(_cfg(), 0, tmp_path / "cut", amp="bf16", progress=False, stop_after_epoch=1)
    resumed = train(_cfg(), 0, tmp_path / "cut", amp="off", resume=True, progress=False)
    assert resumed.precision == "bf16" and resumed.config_hash == full.config_hash
    a, b = _weights(full.checkpoint), _weights(resumed.checkpoint)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.final["test_accuracy"] == full.final["test_accuracy"]


def test_a_finished_fp32_run_is_not_the_bf16_one(tmp_path):
    from robustbench_dgsa.engine.train import train
    done = train(_cfg(), 0, tmp_path / "r", amp="off", progress=False)
    assert done.precision == "fp32"
    assert set(store.load_results(tmp_path / "r" / "store")["precision"]) == {"fp32"}
    with pytest.raises(UserError, match="computed in fp32, but bf16 was asked for"):
        train(_cfg(), 0, tmp_path / "r", amp="bf16", resume=True, progress=False)
    again = train(_cfg(), 0, tmp_path / "r", amp="off", resume=True, progress=False)
    assert again.run_id == done.run_id and again.precision == "fp32"


def test_jobs_compare_the_precision_they_finished_in():
    """The committed evidence campaign (finished records in its store, no run folders): a fp32 request finds
    every job finished, a bf16 request none; reproduce pins the evidence preset to fp32."""
    from robustbench_dgsa.jobs.job import Job, read_done
    from robustbench_dgsa.jobs.reproduce import make_plan, pinned_amp
    root = REPO / "results" / "evidence"
    jobs = [Job.from_dict(json.loads(line)) for line in (root / "jobs.jsonl").read_text().splitlines()[:3]]
    assert all(read_done(root, j, "fp32") is not None for j in jobs)
    assert all(read_done(root, j, "bf16") is None for j in jobs)
    assert pinned_amp(make_plan(root / "x", preset="evidence", seeds=[0])) == "off"
    assert pinned_amp(make_plan(root / "x", preset="tiny", seeds=[0])) is None


def test_compile_option_reaches_the_training_step_and_the_evaluation(monkeypatch, tmp_path):
    """train.compile=on (the CLI's --compile) sends the training step and evaluation forwards through
    torch.compile (stubbed here: compiling takes minutes), is recorded, and leaves the config hash alone."""
    from robustbench_dgsa.cli.train_cmd import _overrides
    from robustbench_dgsa.engine.evaluate import evaluate
    from robustbench_dgsa.engine.train import train
    assert _overrides(None, None, None, None, False, None, True) == {"train.compile": True}
    calls = []

    def fake_compile(model):
        def forward(*a, **k):
            calls.append(model.training)
            return model(*a, **k)
        return forward
    monkeypatch.setattr(torch, "compile", fake_compile)
    cfg = resolve_config(get_model_config("vit"), "synthetic-vision", "tiny",
                         overrides={**TINY, "train.epochs": 1, "train.compile": "on"})
    res = train(cfg, 0, tmp_path / "c", amp="off", progress=False)
    assert True in calls                                   # training steps (train mode) went through it
    assert store.load_runs(tmp_path / "c" / "store")[res.run_id]["compiled"] is True
    plain = resolve_config(get_model_config("vit"), "synthetic-vision", "tiny", overrides={**TINY, "train.epochs": 1})
    assert res.config_hash == train(plain, 0, tmp_path / "p", amp="off", progress=False).config_hash
    calls.clear()
    ev = evaluate(res.checkpoint, store_dir=tmp_path / "e", progress=False, amp="off", compile_model=True)
    assert calls and set(calls) == {False}                 # evaluation forwards, in eval mode
    assert store.load_runs(tmp_path / "e")[ev.run_id]["compiled"] is True
    assert set(store.load_results(tmp_path / "e")["precision"]) == {"fp32"}


def test_reproduce_takes_config_overrides_for_every_job(tmp_path):
    """reproduce's --set: the overrides reach every job's config (a precision choice among them), a given key
    replaces the size's own (short keys too), the precision pin follows it, and a bad key is one line."""
    from typer.testing import CliRunner

    from robustbench_dgsa.cli.app import app
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.jobs.reproduce import make_plan, pinned_amp
    from robustbench_dgsa.models import get_model_config
    plan = make_plan(tmp_path / "x", seeds=[0], overrides={"train.amp": "off", "max_test": "40"})
    assert plan.overrides["train.amp"] == "off" and plan.overrides["data.max_test"] == "40"
    for job in plan.jobs:
        cfg = resolve_config(get_model_config(job.model), job.dataset, job.preset, overrides=job.overrides)
        assert cfg.train.amp == "off" and cfg.data.max_test == 40
    plain = make_plan(tmp_path / "x", seeds=[0])
    assert {j.id for j in plan.jobs}.isdisjoint(j.id for j in plain.jobs)   # part of the jobs' identity
    assert pinned_amp(make_plan(tmp_path / "x", preset="evidence", seeds=[0], overrides={"amp": "bf16"})) is None
    out = tmp_path / "never"
    res = CliRunner().invoke(app, ["reproduce", "--quick", "--set", "train.nonsense=1", "--out", str(out)])
    assert res.exit_code != 0 and "train.nonsense" in str(res.exception) and not out.exists()   # cli.main: 1 line
