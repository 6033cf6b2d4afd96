"""Silently wrong results, and inputs checked before any work (issue 22, items 12-17).

Every case runs the real entry point (``robustbench_dgsa.cli.main``, the error boundary included) and asserts the
exit code, exactly one ``error:`` line on stderr, no traceback, and that nothing was written: no file in the
working folder and no change to the shared fixtures (the store above all: a broken model or a broken row is
never stored or computed on). Fixtures: one tiny ViT trained on the synthetic set and evaluated into a store
(as in ``test_bad_inputs.py``), damaged copies of its checkpoint and store, a regenerated corruption folder and
damaged copies of it, and a finished two-job sweep.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from typer.testing import CliRunner

from robustbench_dgsa.cli import app

USAGE, RUN = 2, 1
TINY_SET = ["--set", "model.dim=16", "--set", "model.depth=1", "--set", "model.heads=2",
            "--set", "model.head_hidden=16", "--set", "data.max_train=64", "--set", "data.max_test=32"]
REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------- helpers

def _snapshot(folders: list[Path]) -> dict[str, tuple[int, int]]:
    snap = {}
    for folder in folders:
        for p in ([folder, *folder.rglob("*")] if folder.is_dir() else [folder] if folder.exists() else []):
            st = p.lstat()
            snap[str(p)] = (st.st_size, st.st_mtime_ns) if p.is_file() else (-1, 0)
    return snap


def _one_error(code: int, out: str, err: str, expected: int, notes: bool = False) -> str:
    """The one ``error:`` line of a run; ``notes``: ``note:`` lines the command prints on purpose may precede it."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not (notes and ln.startswith("note:"))]
    assert "Traceback" not in err, err
    assert code == expected, f"exit {code}, expected {expected}; stderr:\n{err}\nstdout:\n{out}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"expected one 'error:' line, got:\n{err}"
    return lines[0]


def _invoke(args: list[str]) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output


def _rewrite_checkpoint(src: Path, dst: Path, change) -> Path:
    """A copy of checkpoint ``src`` with its tensors passed through ``change(name, tensor)`` (same header)."""
    with safe_open(str(src), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: change(k, f.get_tensor(k)) for k in f.keys()}
    save_file(tensors, str(dst), metadata=meta)
    return dst


def _store_copy(src: Path, dst: Path, edit) -> Path:
    """A copy of store ``src`` with one more rows file: the first eval accuracy row, passed through ``edit``."""
    shutil.copytree(src, dst)
    (dst / "results.parquet").unlink(missing_ok=True)
    rows = [json.loads(ln) for p in sorted((dst / "rows").glob("eval-*.jsonl")) for ln in p.read_text().splitlines()]
    row = next(r for r in rows if r["metric"] == "accuracy" and r["condition"] != "clean")
    extra = edit(dict(row))
    name = f"{extra['run_id']}.jsonl"
    with open(dst / "rows" / name, "a", encoding="utf-8") as f:
        f.write(json.dumps(extra) + "\n")
    return dst


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("safety_results")
    p: dict[str, Path] = {}
    _invoke(["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny", "--epochs", "1",
             "--device", "cpu", *TINY_SET, "--out", str(d / "run"), "--quiet"])
    p["run"] = d / "run"
    p["ckpt"] = next((d / "run").rglob("checkpoint.safetensors"))
    p["store"] = next(q.parent for q in (d / "run").rglob("rows") if q.is_dir())
    _invoke(["evaluate", "--checkpoint", str(p["ckpt"]), "--corruption", "contrast", "--severity", "1",
             "--device", "cpu", "--store", str(p["store"]), "--quiet"])
    _checkpoints(d, p)
    _stores(d, p)
    _corruption_dirs(d, p)
    _frost_dirs(d, p)
    np.save(d / "images.npy", np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    p["npy"] = d / "images.npy"
    return p


def _checkpoints(d: Path, p: dict[str, Path]) -> None:
    (d / "ck").mkdir()
    p["nan_ckpt"] = _rewrite_checkpoint(p["ckpt"], d / "ck" / "nan.safetensors",
                                        lambda k, t: torch.full_like(t, float("nan")) if t.is_floating_point() else t)
    first = {"done": False}

    def to_int8(name, t):
        if t.is_floating_point() and t.ndim == 2 and not first["done"]:
            first["done"] = True
            return t.round().to(torch.int8)
        return t
    p["int8_ckpt"] = _rewrite_checkpoint(p["ckpt"], d / "ck" / "int8.safetensors", to_int8)
    # finite weights whose logits overflow to inf: the classifier's weights at 3e38
    p["inf_logits_ckpt"] = _rewrite_checkpoint(
        p["ckpt"], d / "ck" / "overflow.safetensors",
        lambda k, t: torch.full_like(t, 3e38) if k.startswith("head") and t.is_floating_point() else t)
    (d / "mod").mkdir()
    (d / "mod" / "tinymod.py").write_text("import torch\n\ndef make():\n    return torch.nn.Sequential("
                                          "torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 6))\n")
    state = {"1.weight": torch.full((6, 3 * 32 * 32), float("nan")), "1.bias": torch.zeros(6)}
    torch.save(state, d / "mod" / "nan.pth")
    save_file(state, str(d / "mod" / "nan.safetensors"))
    save_file({"1.weight": torch.zeros((6, 3 * 32 * 32), dtype=torch.int8), "1.bias": torch.zeros(6)},
              str(d / "mod" / "int8.safetensors"))
    p["mod"] = d / "mod"


def _stores(d: Path, p: dict[str, Path]) -> None:
    fresh = lambda r, **kw: {**r, "run_id": "eval-20990101T000000-bad000", "created": "2099-01-01T00:00:00+00:00",
                             **kw}  # noqa: E731
    p["store_7_5"] = _store_copy(p["store"], d / "s_7_5", lambda r: fresh(r, value=7.5))
    p["store_inf"] = _store_copy(p["store"], d / "s_inf", lambda r: fresh(r, value=float("inf")))
    p["store_ninf"] = _store_copy(p["store"], d / "s_ninf", lambda r: fresh(r, value=float("-inf")))
    p["store_nan"] = _store_copy(p["store"], d / "s_nan", lambda r: fresh(r, value=float("nan")))
    p["store_neg"] = _store_copy(p["store"], d / "s_neg", lambda r: fresh(r, value=-0.25))
    # the same cell twice in one evaluation run, with different values (0.5 and 0.1 in the issue)
    p["store_dup"] = _store_copy(p["store"], d / "s_dup", lambda r: {**r, "value": 1.0 - r["value"] / 2})


def _corruption_dirs(d: Path, p: dict[str, Path]) -> None:
    """A regenerated corruption folder of the first 32 test images (what evaluate uses), and damaged copies."""
    from robustbench_dgsa.data import load_dataset
    test = load_dataset("synthetic-vision", "test")
    x, y = np.asarray(test.x)[:32], np.asarray(test.y)[:32]
    np.savez(d / "test32.npz", x=x, y=y)
    good = d / "cdir_good"
    _invoke(["corrupt", "--input", str(d / "test32.npz"), "--corruption", "contrast", "--severity", "1",
             "--out", str(good), "--quiet"])
    p["cdir_good"] = good
    (d / "cdir_empty").mkdir()
    p["cdir_empty"] = d / "cdir_empty"
    bad_manifest = shutil.copytree(good, d / "cdir_bad_manifest")
    (bad_manifest / "manifest.json").write_text("{not json")
    p["cdir_bad_manifest"] = bad_manifest
    tampered = shutil.copytree(good, d / "cdir_tampered")
    f = next(q for q in tampered.glob("contrast*.npy"))
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    p["cdir_tampered"] = tampered
    xc = np.load(next(good.glob("contrast*.npy")))                       # 32 rows, severity 1
    official = np.concatenate([xc] * 5)                                 # official layout: 5 blocks, no manifest
    for name, arr, labels in (("cdir_short_labels", official, np.tile(y, 5)[:100]),
                              ("cdir_float16", official.astype(np.float16), np.tile(y, 5)),
                              ("cdir_10_rows", official[:10], np.tile(y, 5)[:10]),
                              ("cdir_few_images", official[:20], np.tile(y[:4], 5))):
        folder = d / name
        folder.mkdir()
        np.save(folder / "contrast.npy", arr)
        np.save(folder / "labels.npy", labels.astype(np.int64))
        p[name] = folder
    link = d / "cdir_symlink"
    link.mkdir()
    (link / "contrast.npy").symlink_to("/etc/passwd")
    np.save(link / "labels.npy", np.tile(y, 5).astype(np.int64))
    p["cdir_symlink"] = link


def _frost_dirs(d: Path, p: dict[str, Path]) -> None:
    from corruptions.frost import FROST_FILES
    p["a_file"] = d / "a_file.txt"
    p["a_file"].write_text("I am a file\n")
    partial = d / "frost_partial"
    partial.mkdir()
    (partial / FROST_FILES[0]).write_bytes(b"x")
    p["frost_partial"] = partial
    junk = d / "frost_junk"
    junk.mkdir()
    for name in FROST_FILES:
        (junk / name).write_bytes(b"this is not an image")
    p["frost_junk"] = junk


def _watched(fx: dict[str, Path], tmp_path: Path) -> list[Path]:
    return [tmp_path, *(v for k, v in fx.items())]


def _run(run_main, fx, tmp_path, args: list[str], expected: int, notes: bool = False) -> str:
    filled = [a.format(**{k: str(v) for k, v in fx.items()}) if "{" in a else a for a in args]
    before = _snapshot(_watched(fx, tmp_path))
    code, out, err = run_main(filled, tmp_path)
    line = _one_error(code, out, err, expected, notes)
    assert _snapshot(_watched(fx, tmp_path)) == before, "files were created or changed"
    return line


# --------------------------------------------------------------------------------------------- 12: broken numbers

@pytest.mark.parametrize("ckpt, words", [("nan_ckpt", "non-finite"), ("int8_ckpt", "int8")])
def test_broken_checkpoint_weights_are_refused(ckpt, words, fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, ["evaluate", "--checkpoint", f"{{{ckpt}}}", "--device", "cpu",
                                         "--store", "s"], USAGE)
    assert words in line and str(fx[ckpt]) in line


def test_nonfinite_logits_are_a_failure_and_nothing_is_stored(fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, ["evaluate", "--checkpoint", "{inf_logits_ckpt}", "--device", "cpu",
                                         "--store", "{store}"], RUN)
    assert "not finite" in line and "stored" in line


@pytest.mark.parametrize("weights, words", [("nan.pth", "non-finite"), ("nan.safetensors", "non-finite"),
                                            ("int8.safetensors", "int8")])
def test_broken_outside_weights_are_refused(weights, words, fx, tmp_path, run_main, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(fx["mod"]))
    line = _run(run_main, fx, tmp_path, ["evaluate", "--module", "tinymod:make", "--weights", f"{{mod}}/{weights}",
                                         "--dataset", "synthetic-vision", "--device", "cpu", "--store", "s"], USAGE,
                notes=weights.endswith(".pth"))  # the .pth route says how it reads the file, on purpose
    assert words in line and weights in line


STORE_CASES = [(s, cmd) for s in ("store_7_5", "store_inf", "store_ninf", "store_nan", "store_neg")
               for cmd in ("compare", "report", "export")]


@pytest.mark.parametrize("bad_store, command", STORE_CASES, ids=[f"{c}-{s}" for s, c in STORE_CASES])
def test_store_values_outside_0_1_or_nonfinite_are_errors(bad_store, command, fx, tmp_path, run_main):
    args = {"compare": ["compare", "--store", f"{{{bad_store}}}"],
            "report": ["report", "--store", f"{{{bad_store}}}", "--out", "rep"],
            "export": ["export", "--store", f"{{{bad_store}}}", "--out", "e", "--dataset", "cifar10"]}[command]
    line = _run(run_main, fx, tmp_path, args, USAGE)
    assert "eval-20990101T000000-bad000.jsonl line 1" in line and "accuracy" in line


def test_store_value_check_covers_parquet_tables(fx, tmp_path, run_main):
    """A compacted table (results.parquet, the runs' JSONL gone) with an accuracy of 7.5 is refused too."""
    from robustbench_dgsa import store
    folder = shutil.copytree(fx["store"], tmp_path / "st")
    df = store.load_results(folder)
    df.loc[df.index[(df.kind == "eval") & (df.metric == "accuracy")][-1], "value"] = 7.5
    df.to_parquet(folder / "results.parquet", index=False)
    shutil.rmtree(folder / "rows")
    code, out, err = run_main(["compare", "--store", str(folder)], tmp_path)
    line = _one_error(code, out, err, USAGE)
    assert "results.parquet row" in line and "outside [0, 1]" in line


# --------------------------------------------------------------------------------------------- broken rows (issue 35)

def _without(key):
    return lambda r: {k: v for k, v in r.items() if k != key}


BROKEN_ROWS = {   # id: (change to a copy of a stored eval accuracy row, words the error names)
    "value-null": (lambda r: {**r, "value": None}, "no value"),
    "no-metric": (_without("metric"), "no metric"),
    "no-kind": (_without("kind"), "no kind"),
    "eval-no-n": (_without("n"), "no n"),
    "severity-99": (lambda r: {**r, "severity": 99}, "severity 99"),
    "severity-0-corrupted": (lambda r: {**r, "severity": 0}, "severity 0"),
    "clean-severity-3": (lambda r: {**r, "condition": "clean", "severity": 3}, "severity 3"),
    "n-0": (lambda r: {**r, "n": 0}, "n = 0"),
    "n-negative": (lambda r: {**r, "n": -5}, "n = -5"),
    "unknown-condition": (lambda r: {**r, "condition": "sunburn"}, "unknown condition 'sunburn'"),
    "unknown-kind": (lambda r: {**r, "kind": "guess"}, "unknown kind 'guess'"),
}


@pytest.mark.parametrize("case", list(BROKEN_ROWS))
def test_broken_row_is_an_error_naming_file_and_line(case, fx, tmp_path, run_main):
    """Issue 35, item 2: the store's one reader checks every row. Each of these loaded with exit 0 before (a null
    value as NaN, a row without ``metric`` dropped, severity 99, ``n`` <= 0, an unknown condition ...); now
    ``compare`` stops with one ``error:`` line naming the rows file and line, exit 2, nothing written."""
    change, words = BROKEN_ROWS[case]
    bad = _store_copy(fx["store"], tmp_path / "bad", lambda r: {**change(r), "run_id": "eval-20990101T000000-bad000"})
    line = _run(run_main, fx, tmp_path, ["compare", "--store", str(bad)], USAGE)
    assert "eval-20990101T000000-bad000.jsonl line 1" in line and words in line, line


def test_broken_row_in_a_parquet_table_is_an_error(fx, tmp_path, run_main):
    """The same check on results.parquet (a store shipped compacted): a row of severity 99 is refused by row."""
    from robustbench_dgsa import store
    folder = shutil.copytree(fx["store"], tmp_path / "st")
    df = store.load_results(folder)
    df.loc[df.index[(df.kind == "eval") & (df.condition != "clean")][-1], "severity"] = 99
    df.to_parquet(folder / "results.parquet", index=False)
    shutil.rmtree(folder / "rows")
    line = _run(run_main, fx, tmp_path, ["compare", "--store", str(folder)], USAGE)
    assert "results.parquet row" in line and "severity 99" in line


def test_torn_last_line_is_skipped_with_a_warning(fx, tmp_path, run_main):
    """The one tolerance, on purpose: a writer killed mid-append leaves a torn last line (no newline). The rows
    before it are used and a ``warning:`` line names the file and line; it is never dropped silently."""
    folder = shutil.copytree(fx["store"], tmp_path / "st")
    rows_file = sorted((folder / "rows").glob("eval-*.jsonl"))[0]
    whole = rows_file.read_text(encoding="utf-8")
    rows_file.write_text(whole + whole.splitlines()[0][:40], encoding="utf-8")  # torn: no newline after it
    code, out, err = run_main(["compare", "--store", str(folder)], tmp_path)
    assert code == 0, err
    n = len(whole.splitlines()) + 1
    warned = [ln for ln in err.splitlines() if ln.startswith("warning:") and "torn last line" in ln]
    assert len(warned) == 1 and f"{rows_file.name} line {n}" in warned[0], err


def test_committed_evidence_store_still_loads(tmp_path):
    """The row check accepts every row of the committed campaign store: its JSONL, and its results.parquet alone
    (a copy without rows/, so every Parquet row is checked)."""
    from robustbench_dgsa import store
    evidence = REPO / "results" / "evidence" / "store"
    if not (evidence / "results.parquet").is_file():
        pytest.skip("results/evidence/store not in this checkout")
    (tmp_path / "parquet_only").mkdir()
    shutil.copy(evidence / "results.parquet", tmp_path / "parquet_only" / "results.parquet")
    sizes = [len(store.load_results(folder)) for folder in (evidence, tmp_path / "parquet_only")]
    assert sizes[0] > 5000 and sizes[1] > 5000


# --------------------------------------------------------------------------------------------- 13: duplicate cells

@pytest.mark.parametrize("command", ["export", "compare", "report"])
def test_a_cell_with_two_values_in_one_run_is_an_error(command, fx, tmp_path, run_main):
    args = {"compare": ["compare", "--store", "{store_dup}"],
            "report": ["report", "--store", "{store_dup}", "--out", "rep"],
            "export": ["export", "--store", "{store_dup}", "--out", "e", "--dataset", "cifar10"]}[command]
    line = _run(run_main, fx, tmp_path, args, USAGE)
    assert "cell vit/synthetic-vision seed 0 contrast@1 accuracy test" in line
    assert "2 different values in run eval-" in line


def test_a_later_evaluation_run_replaces_a_cell(fx, tmp_path):
    """The documented rule for re-runs: of two evaluation runs of a cell, the latest one counts (no average)."""
    from robustbench_dgsa import store
    from robustbench_dgsa.analysis import metrics
    folder = _store_copy(fx["store"], tmp_path / "st", lambda r: {**r, "run_id": "eval-20990101T000000-new000",
                                                                 "created": "2099-01-01T00:00:00+00:00",
                                                                 "value": 0.125})
    rows = metrics.eval_rows(store.load_results(folder))
    cell = rows[(rows.condition == "contrast") & (rows.severity == 1)]
    assert list(cell["value"]) == [0.125]


# --------------------------------------------------------------------------------------------- 14: ignored values

@pytest.mark.parametrize("args", [
    ["compare", "--store", "{store}", "--source", "bogus"],
    ["export", "--store", "{store}", "--out", "e", "--dataset", "cifar10", "--source", "bogus"],
], ids=["compare", "export"])
def test_unknown_source_is_refused_with_the_valid_values(args, fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, args, USAGE)
    assert "bogus" in line and "official, regenerated, on-the-fly" in line


EMPTY_PATHS = {
    "corrupt-out": ["corrupt", "--input", "{npy}", "--corruption", "contrast", "--severity", "1", "-o", ""],
    "corrupt-preview": ["corrupt", "--input", "{npy}", "--corruption", "contrast", "--severity", "1",
                        "--preview", ""],
    "compare-store": ["compare", "--store", ""],
    "compare-csv": ["compare", "--store", "{store}", "--csv", ""],
    "report-out": ["report", "--store", "{store}", "--out", ""],
    "export-out": ["export", "--store", "{store}", "--out", " ", "--dataset", "cifar10"],
    "evaluate-store": ["evaluate", "--checkpoint", "{ckpt}", "--store", ""],
    "evaluate-checkpoint": ["evaluate", "--checkpoint", ""],
    "train-out": ["train", "--model", "vit", "--dataset", "synthetic-vision", "--out", ""],
    "sweep-plan-dir": ["sweep", "plan", "", "--model", "vit", "--dataset", "synthetic-vision"],
}


@pytest.mark.parametrize("case", list(EMPTY_PATHS))
def test_empty_paths_are_refused(case, fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, EMPTY_PATHS[case], USAGE)
    assert "empty path" in line


def test_closed_stdout_is_a_failure():
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(["bash", "-c", f"exec {sys.executable} -m robustbench_dgsa models >&-"],
                         capture_output=True, text=True, env=env, timeout=120)
    line = _one_error(res.returncode, res.stdout, res.stderr, RUN)
    assert "standard output" in line
    ok = subprocess.run(["bash", "-c", f"exec {sys.executable} -m robustbench_dgsa models > /dev/null"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and not ok.stderr.strip(), ok.stderr


def test_broken_pipe_on_stdout_is_a_failure():
    """The reader of stdout is gone before the output is written (``| head -0`` style): one line, exit 1."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "robustbench_dgsa", "models", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    line = _one_error(proc.returncode, "", err.decode(), RUN)
    assert "broken pipe" in line


# --------------------------------------------------------------------------------------------- 15: resume

@pytest.mark.parametrize("change, words", [
    (["--model", "dvit", *TINY_SET], "finished run of vit"),
    (["--model", "vit", *TINY_SET, "--set", "model.head_hidden=32"], "config"),
    (["--model", "vit", *TINY_SET, "--seed", "1"], "seed 1"),
], ids=["other-model", "other-config", "other-seed"])
def test_resume_of_another_finished_run_is_refused(change, words, fx, tmp_path, run_main):
    args = ["train", *change, "--dataset", "synthetic-vision", "--preset", "tiny", "--epochs", "1",
            "--device", "cpu", "--resume", "--out", "{run}", "--quiet"]
    line = _run(run_main, fx, tmp_path, args, USAGE)
    assert words in line and str(fx["run"]) in line


def test_resume_of_the_same_finished_run_does_nothing(fx, tmp_path, run_main):
    before = _snapshot([fx["run"]])
    code, out, err = run_main(["train", "--model", "vit", *TINY_SET, "--dataset", "synthetic-vision", "--preset",
                               "tiny", "--epochs", "1", "--device", "cpu", "--resume", "--out", str(fx["run"])],
                              tmp_path)
    assert code == 0, err
    assert "nothing to do" in err
    assert _snapshot([fx["run"]]) == before


# --------------------------------------------------------------------------------------------- 16: swapped jobs

@pytest.fixture(scope="module")
def swapped_sweep(tmp_path_factory) -> Path:
    """A finished two-job sweep (vit seeds 0 and 1) whose two checkpoints were then swapped."""
    from robustbench_dgsa.jobs.sweep import EvalSettings, is_finished, load_jobs, plan, run, write_plan
    sd = tmp_path_factory.mktemp("swapped") / "sw"
    tiny = {"model.dim": "16", "model.depth": "1", "model.heads": "2", "model.head_hidden": "16",
            "train.epochs": "1", "data.max_train": "64", "data.max_test": "32", "train.device": "cpu"}
    write_plan(sd, plan(["vit"], [0, 1], ["synthetic-vision"], "tiny", tiny),
               evaluation=EvalSettings(corruptions=["contrast"], severities=[1]), device="cpu")
    summary = run(sd, workers=1)
    jobs = load_jobs(sd)
    assert not summary["failed"] and all(is_finished(sd, j) for j in jobs)
    a, b = (sd / "runs" / j.id / "checkpoint.safetensors" for j in jobs)
    tmp = a.with_name("swap.tmp")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    return sd


def test_swapped_checkpoints_are_not_finished_jobs(swapped_sweep, tmp_path, run_main):
    from robustbench_dgsa.jobs.sweep import is_finished, load_jobs
    assert not any(is_finished(swapped_sweep, j) for j in load_jobs(swapped_sweep))
    code, out, err = run_main(["sweep", "status", str(swapped_sweep), "--json"], tmp_path)
    assert code == 0, err
    assert json.loads(out)["finished"] == []


@pytest.mark.parametrize("index", [0, 1])
def test_running_a_job_over_another_jobs_results_is_refused(index, swapped_sweep, tmp_path, run_main):
    before = _snapshot([swapped_sweep, tmp_path])
    code, out, err = run_main(["sweep", "run-one", str(swapped_sweep), "--index", str(index)], tmp_path)
    line = _one_error(code, out, err, USAGE)
    assert "not this job's" in line and "checkpoint.safetensors is run train-" in line
    assert _snapshot([swapped_sweep, tmp_path]) == before, "files were created or changed"


# --------------------------------------------------------------------------------------------- 17: before any work

@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_reproduce_on_a_missing_device_writes_nothing(fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, ["reproduce", "--quick", "--device", "cuda:0", "--out", "rp"], USAGE)
    assert "CUDA is not available" in line
    assert not (tmp_path / "rp").exists()


def test_good_corruption_dir_is_evaluated(fx, tmp_path, run_main):
    """The control for the bad folders below: the intact folder is read and its accuracy stored."""
    code, out, err = run_main(["evaluate", "--checkpoint", str(fx["ckpt"]), "--corruption-dir", str(fx["cdir_good"]),
                               "--corruption", "contrast", "--severity", "1", "--device", "cpu", "--store", "s",
                               "--quiet"], tmp_path)
    assert code == 0, err
    assert (tmp_path / "s" / "rows").is_dir()


@pytest.mark.parametrize("folder, words", [
    ("cdir_empty", "not in this directory"),
    ("cdir_bad_manifest", "manifest"),
    ("cdir_tampered", "contrast"),
    ("cdir_short_labels", "labels.npy has 100 entries"),
    ("cdir_float16", "expected uint8"),
    ("cdir_10_rows", "block 2 differs from block 1"),
    ("cdir_few_images", "fewer than the test split needs"),
    ("cdir_symlink", "not a readable .npy file"),
])
def test_bad_corruption_dir_is_refused_before_any_evaluation(folder, words, fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, ["evaluate", "--checkpoint", "{ckpt}", "--corruption-dir", f"{{{folder}}}",
                                         "--corruption", "contrast", "--severity", "1", "--device", "cpu",
                                         "--store", "s"], USAGE)
    assert words in line, line
    assert "accuracy" not in line


@pytest.mark.parametrize("frost_dir, words", [
    ("{a_file}", "is a file, not a folder"),
    ("nope", "does not exist"),
    ("{frost_partial}", "lacks"),
    ("{frost_junk}", "not a readable image"),
])
@pytest.mark.parametrize("command", ["evaluate", "corrupt"])
def test_bad_frost_dir_is_refused_at_entry(command, frost_dir, words, fx, tmp_path, run_main):
    args = {"evaluate": ["evaluate", "--checkpoint", "{ckpt}", "--device", "cpu", "--store", "s"],
            "corrupt": ["corrupt", "--input", "{npy}", "--out", "o"]}[command]
    line = _run(run_main, fx, tmp_path, [*args, "--corruption", "frost", "--severity", "1", "--frost-dir", frost_dir],
                USAGE)
    assert words in line, line


@pytest.mark.parametrize("extra, words", [
    (["--dataset", "synthetic-vision", "--set", "model.name=nope"], "model.name=nope"),
    (["--dataset", "synthetic-vision", "--set", "data.dataset=../x"], "data.dataset=../x"),
    (["--dataset", "npz:../x.npz"], "../x.npz does not exist"),
    (["--dataset", "../x"], "does not exist"),
    (["--dataset", "synthetic-vision", "--model", "nope"], "unknown model 'nope'"),
], ids=["model-override", "dataset-override", "missing-npz", "traversal", "unknown-model"])
def test_sweep_plan_checks_models_and_datasets_at_plan_time(extra, words, fx, tmp_path, run_main):
    line = _run(run_main, fx, tmp_path, ["sweep", "plan", "sw", "--model", "vit", *extra], USAGE)
    assert words in line
    assert not (tmp_path / "sw").exists()


def test_hand_edited_job_with_unknown_model_is_refused_on_load(fx, tmp_path, run_main):
    sd = tmp_path / "sw"
    code, _, err = run_main(["sweep", "plan", "sw", "--model", "vit", "--dataset", "synthetic-vision"], tmp_path)
    assert code == 0, err
    lines = (sd / "jobs.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace('"model": "vit"', '"model": "nope"')
    (sd / "jobs.jsonl").write_text("\n".join(lines) + "\n")
    line = _run(run_main, fx, tmp_path, ["sweep", "run", "sw"], USAGE)
    assert "jobs.jsonl line 1" in line and "nope" in line


# --------------------------------------------------------------------------------------------- issue 35, items 4-10

_TINY_TRAIN = ["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny", "--epochs", "1",
               "--device", "cpu", *TINY_SET, "--quiet"]


def _without_progress(err: str) -> str:
    """stderr without train's progress lines (``[train] ...``, printed also under --quiet)."""
    return "\n".join(ln for ln in err.splitlines() if not ln.startswith("[train]"))


def _safetensors_disk_full(*args, **kwargs):
    """What safetensors raises when the disk fills while it writes (after writing part of the file)."""
    from safetensors import SafetensorError
    Path(args[1]).write_bytes(b"\0" * 1000)
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def _oserror_disk_full(*args, **kwargs):
    import errno
    Path(args[1]).write_bytes(b"\0" * 1000)
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("writer", [_safetensors_disk_full, _oserror_disk_full], ids=["safetensors", "oserror"])
@pytest.mark.parametrize("at", ["checkpoint", "state"])
def test_disk_full_during_train_is_one_line_and_leaves_no_run_folder(writer, at, tmp_path, run_main, monkeypatch):
    """Item 5: ENOSPC while train writes its checkpoint or its state (safetensors wraps it in its own error): the
    one disk-full line, exit 1, and no half-made run folder or temporary file."""
    import safetensors.torch

    from robustbench_dgsa.models import checkpoint
    if at == "checkpoint":
        monkeypatch.setattr(checkpoint, "save_file", writer)
    else:
        monkeypatch.setattr(safetensors.torch, "save_file", writer)
    code, out, err = run_main([*_TINY_TRAIN, "--out", "run"], tmp_path)
    line = _one_error(code, out, _without_progress(err), RUN)
    assert "no space left on the device" in line and "internal error" not in line, line
    assert sorted(p.name for p in tmp_path.rglob("*")) == [], "a half-made run folder was left"


_HELD_TRAIN = """
import sys, time
from pathlib import Path
from robustbench_dgsa.engine import train as engine
release = Path(sys.argv[1])
first_epoch = engine._run_epoch

def held_epoch(run, epoch, progress):      # this run holds its folder until the test releases it
    Path(str(release) + ".started").write_text("x")
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    first_epoch(run, epoch, progress)

engine._run_epoch = held_epoch
from robustbench_dgsa.cli import main
sys.argv = ["dgsa-bench", *sys.argv[2:]]
main()
"""


def test_two_trains_into_one_folder_the_second_stops_with_one_line(tmp_path):
    """Item 4: two real ``train`` processes into one --out at once: the first trains and records one run, the
    second stops at once with one ``error:`` line (exit 2, as ``sweep run-one`` on a locked job) and records
    nothing."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    release = tmp_path / "release"
    args = [*_TINY_TRAIN, "--out", "run"]
    first = subprocess.Popen([sys.executable, "-c", _HELD_TRAIN, str(release), *args], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not Path(str(release) + ".started").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        second = subprocess.run([sys.executable, "-m", "robustbench_dgsa", *args], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=300)
        line = _one_error(second.returncode, second.stdout, _without_progress(second.stderr), USAGE)
        assert "another train is running into run" in line, line
    finally:
        release.write_text("go")
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    store = tmp_path / "run" / "store"
    assert len(list((store / "runs").glob("train-*.json"))) == 1, "two run records for one checkpoint"
    assert len(list((store / "rows").glob("train-*.jsonl"))) == 1
    assert not (tmp_path / "run" / "job.lock").exists(), "the lock outlived the run"


def _dead_owner_token() -> str:
    """An owner token (host, pid, start) of a process that has ended: what a killed writer's leftovers carry."""
    from corruptions.atomic import _host_tag
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return f"{_host_tag()}-{gone.pid}-12345-abcdef"


def test_resume_removes_the_temporary_files_a_killed_train_left(tmp_path, run_main):
    """Item 7: kill -9 during an atomic write leaves ``.train_state.safetensors.<owner>.tmp``; the next --resume
    removes a dead writer's temporary files (and keeps a live writer's)."""
    from corruptions.atomic import owner_token
    code, _, err = run_main([*_TINY_TRAIN, "--out", "run"], tmp_path)
    assert code == 0, err
    run = tmp_path / "run"
    left = [run / f".train_state.safetensors.{_dead_owner_token()}.tmp",
            run / f".checkpoint.safetensors.{_dead_owner_token()}.tmp"]
    for p in left:
        p.write_bytes(b"\0" * 512)                          # a half-written state, as the kill left it
    live = run / f".checkpoint.safetensors.{owner_token()}.tmp"   # this (live) process is writing it
    live.write_bytes(b"\0" * 512)
    code, _, err = run_main([*_TINY_TRAIN, "--out", "run", "--resume"], tmp_path)
    assert code == 0, err
    assert not any(p.exists() for p in left), "a killed run's temporary files survived the resume"
    assert live.exists(), "a live writer's temporary file was removed"


def test_a_job_restarted_after_its_evaluation_records_it_once(swapped_sweep, tmp_path):
    """Item 7: a job killed after its evaluation was stored but before its record (``job_done.json``, the store's
    finished record) is run again: its evaluation is found in the store under the job's lock and reused, not
    recorded a second time (check, then write)."""
    from robustbench_dgsa import store
    from robustbench_dgsa.jobs.sweep import is_finished, load_jobs, run
    sd = tmp_path / "sw"
    shutil.copytree(swapped_sweep, sd)
    job = load_jobs(sd)[0]
    jdir = sd / "runs" / job.id
    for j in load_jobs(sd):                                   # undo the fixture's swap: the jobs are whole again
        (sd / "runs" / j.id / "job_done.json").unlink()
    a, b = (sd / "runs" / j.id / "checkpoint.safetensors" for j in load_jobs(sd))
    a.rename(a.with_name("swap.tmp"))
    b.rename(a)
    a.with_name("swap.tmp").rename(b)
    evals = lambda: sorted(r for r, rec in store.load_runs(sd / "store").items() if rec["kind"] == "eval")  # noqa
    before = evals()
    for name in (f.name for f in store.finished_dir(sd / "store").glob("*.json")):
        store.finished_dir(sd / "store").joinpath(name).unlink()   # as a kill before the records leaves it
    summary = run(sd, workers=1)
    assert not summary["failed"] and all(is_finished(sd, j) for j in load_jobs(sd))
    assert evals() == before, "an evaluation was recorded twice"
    done = json.loads((jdir / "job_done.json").read_text())
    assert done["eval_run_id"] in before and done["evaluation"]["clean_accuracy"] is not None
    assert [row["condition"] for row in done["evaluation"]["table"]] == ["clean", "contrast"]


# --------------------------------------------------------------------------------------------- batch sizes (issue 35)

def _cells_and_preds(store_dir: Path):
    from robustbench_dgsa import store
    rows = store.load_results(store_dir)
    acc = rows[rows.metric == "accuracy"]
    cells = {(c, int(s)): float(v) for c, s, v in zip(acc.condition, acc.severity, acc.value)}
    preds = store.load_predictions(store_dir).sort_values(["condition", "severity", "index"])
    return cells, preds[["condition", "severity", "index", "pred"]].to_numpy().tolist()


def test_evaluate_batch_size_100_equals_64(fx, tmp_path, run_main):
    """``evaluate --batch-size 100`` (RobustBench's clean_accuracy default; not a multiple of the CPU's 64-example
    forward chunk) on 250 examples: the same cells and predictions as at 64. It crashed with "operands could not
    be broadcast" before issue 35's fix (a batch of 100 yielded 128 outputs)."""
    found = {}
    for bs in (64, 100):
        code, out, err = run_main(["evaluate", "--checkpoint", str(fx["ckpt"]), "--corruption", "contrast",
                                   "--severity", "1", "--max-examples", "250", "--batch-size", str(bs),
                                   "--device", "cpu", "--store", f"s{bs}", "--quiet"], tmp_path)
        assert code == 0 and "Traceback" not in err, err
        found[bs] = _cells_and_preds(tmp_path / f"s{bs}")
    assert found[64] == found[100]
    assert len(found[64][1]) == 2 * 250 and set(found[64][0]) == {("clean", 0), ("contrast", 1)}


def test_robustbench_shaped_benchmark_takes_batch_size_100(tmp_path):
    """``robustbench_dgsa.robustbench.benchmark(..., batch_size=100)`` on a RobustBench data folder of 130 images
    (random pixels; the 15 corruption files of 5 x 130): the same (clean, robust) accuracies as at 64."""
    import pickle

    from robustbench_dgsa.report.export import ROBUSTBENCH_CORRUPTIONS
    from robustbench_dgsa.robustbench import benchmark
    n, rng = 130, np.random.default_rng(0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10)).eval()
    torch.nn.init.normal_(model[1].weight)          # predictions spread over the classes on random pixels
    x = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    with torch.no_grad():                           # labels: the model's own answer on half the images
        y = model(torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255).argmax(1).numpy()
    y[::2] = rng.integers(0, 10, len(y[::2]))
    (tmp_path / "cifar-10-batches-py").mkdir()
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:  # RobustBench's own (pickled) format
        pickle.dump({b"data": x.transpose(0, 3, 1, 2).reshape(n, 3072), b"labels": [int(v) for v in y]}, f)
    cdir = tmp_path / "CIFAR-10-C"
    cdir.mkdir()
    np.save(cdir / "labels.npy", np.tile(y, 5).astype(np.uint8))
    for name in ROBUSTBENCH_CORRUPTIONS:
        np.save(cdir / f"{name}.npy", rng.integers(0, 256, (5 * n, 32, 32, 3), dtype=np.uint8))
    got = {bs: benchmark(model, n_examples=n, dataset="cifar10", threat_model="corruptions", data_dir=str(tmp_path),
                         batch_size=bs, device="cpu") for bs in (64, 100)}
    assert got[100] == got[64] and 0.4 < got[64][0] < 1 and got[64][1] < got[64][0]
