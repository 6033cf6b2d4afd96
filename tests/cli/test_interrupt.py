"""Ctrl-C in the middle of a command (issue 12, item 5): one line, exit 130, nothing half-written.

A step deep inside each command is patched to raise KeyboardInterrupt after the command has already written
some of its output; the real entry point (``robustbench_dgsa.cli.main``, the error boundary) runs it. Left
behind may only be what resume needs (train: the last finished epoch's checkpoint and state); never a
temporary or ``.partial`` file, never a file that looks complete but is not, never store rows of a run that
did not finish.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TINY_SET = ["--set", "model.dim=16", "--set", "model.depth=1", "--set", "model.heads=2",
            "--set", "model.head_hidden=16", "--set", "data.max_train=64", "--set", "data.max_test=32"]


def _interrupt_on_call(monkeypatch, module, name: str, n: int) -> dict[str, int]:
    """Replace ``module.name`` by a wrapper that raises KeyboardInterrupt on its n-th call."""
    real = getattr(module, name)
    calls = {"n": 0}

    def wrapper(*a, **kw):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(*a, **kw)
    monkeypatch.setattr(module, name, wrapper)
    return calls


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _no_temporaries(root: Path) -> None:
    """No temporary, partial or other hidden file; the run folder's lock guard (an empty file filelock keeps, as in
    every job folder: ``train`` locks its --out with the job runner's lock) is a lock, not a half-written file."""
    from robustbench_dgsa.jobs.job import LOCK_GUARD
    left = [p for p in _files(root) if p.endswith((".partial", ".tmp"))
            or (Path(p).name.startswith(".") and Path(p).name != LOCK_GUARD)]
    assert not left, f"temporary files left behind: {left}"


def _one_line(err: str) -> str:
    """The interruption line: the last on stderr, the only one of its kind; before it at most the command's
    own log lines (``[train] epoch 1/2 ...``), no error and no traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and "Traceback" not in err, err
    assert sum(ln.startswith("interrupted") for ln in lines) == 1 and lines[-1].startswith("interrupted"), err
    assert all(ln.startswith("[") for ln in lines[:-1]), err
    return lines[-1]


def test_corrupt_interrupted_leaves_no_partial_files(tmp_path, monkeypatch, run_main):
    import corruptions.api
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 256, (6, 32, 32, 3), dtype=np.uint8))
    calls = _interrupt_on_call(monkeypatch, corruptions.api, "corrupt", 4)  # after 3 chunks were written
    code, _, err = run_main(["corrupt", "--input", "x.npy", "--corruption", "contrast,brightness", "--severity", "1,2",
                       "--out", "o", "--quiet"], tmp_path)
    assert calls["n"] == 4, "the patched step was never reached"
    assert code == 130 and _one_line(err) == "interrupted"
    out = tmp_path / "o"
    if out.exists():
        _no_temporaries(out)
        npys = {p.name for p in out.glob("*.npy")}
        if (out / "manifest.json").exists():  # finished files may stay, each whole and vouched for
            from corruptions.layout import check_manifest
            check_manifest(out)
            assert npys <= set(json.loads((out / "manifest.json").read_text())["files"]), _files(out)
        else:
            assert not npys, _files(out)
    # and a re-run completes what is missing
    monkeypatch.undo()
    code, _, err = run_main(["corrupt", "--input", "x.npy", "--corruption", "contrast,brightness", "--severity", "1,2",
                       "--out", "o", "--quiet"], tmp_path)
    assert code == 0, err
    from corruptions.layout import check_manifest
    check_manifest(out)
    files = json.loads((out / "manifest.json").read_text())["files"]
    assert {f.split(".")[0] for f in files} == {"contrast", "brightness"} and set(files) <= set(_files(out))
    _no_temporaries(out)


def test_train_interrupted_keeps_only_what_resume_needs(tmp_path, monkeypatch, run_main):
    from robustbench_dgsa.engine import train as train_mod
    args = ["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny", "--epochs", "2",
            "--device", "cpu", *TINY_SET, "--out", "run", "--quiet"]
    calls = _interrupt_on_call(monkeypatch, train_mod, "evaluate_split", 2)  # validation of epoch 2
    code, _, err = run_main(args, tmp_path)
    assert calls["n"] == 2
    line = _one_line(err)
    assert code == 130 and line.startswith("interrupted; resume with: dgsa-bench train") and line.endswith("--resume")
    run = tmp_path / "run"
    _no_temporaries(run)
    state = [p for p in _files(run) if "rows" not in p]
    ckpts = [p for p in state if p.endswith("checkpoint.safetensors")]
    assert len(ckpts) == 1, state
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    _, meta = load_checkpoint(run / ckpts[0])
    assert meta["epoch"] == 1, meta  # the last finished epoch's checkpoint: what --resume starts from
    monkeypatch.undo()
    code, _, err = run_main(args + ["--resume"], tmp_path)
    assert code == 0, err
    _, meta = load_checkpoint(run / ckpts[0])
    assert meta["epoch"] == 2


def _small_store(store_dir: Path) -> None:
    from robustbench_dgsa import store
    rng = np.random.default_rng(0)
    for k, model in enumerate(("vit", "dvit", "dgvit")):
        for seed in range(3):
            w = store.RunWriter(store_dir, f"eval-{model}-{seed}",
                                dict(model=model, dataset="synthetic-vision", seed=seed, kind="eval", split="test",
                                     n=100, source="on-the-fly"))
            clean = .8 + .02 * k + rng.normal(0, .01)
            w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=clean)]
                       + [dict(condition=c, severity=s, metric="accuracy", value=clean - .05 * s)
                          for c in ("contrast", "fog") for s in range(1, 6)])
            t = store.RunWriter(store_dir, f"train-{model}-{seed}",
                                dict(model=model, dataset="synthetic-vision", seed=seed, kind="train"))
            t.add_rows([dict(split="val", metric="accuracy", epoch=e, value=.5 + .1 * e) for e in (1, 2)])


def test_evaluate_interrupted_leaves_the_store_as_it_was(tmp_path, monkeypatch, run_main):
    from robustbench_dgsa.engine import evaluate as eval_mod
    code, _, err = run_main(["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny", "--epochs",
                       "1", "--device", "cpu", *TINY_SET, "--out", "run", "--quiet"], tmp_path)
    assert code == 0, err
    store_dir = tmp_path / "run" / "store"
    before = {p: (s, (store_dir / p).stat().st_mtime_ns) for p, s in _files(store_dir).items()}
    calls = _interrupt_on_call(monkeypatch, eval_mod, "_predict_on_the_fly", 2)
    code, _, err = run_main(["evaluate", "--checkpoint", "run/checkpoint.safetensors", "--corruption", "contrast,fog",
                       "--severity", "1", "--device", "cpu", "--store", "run/store", "--quiet"], tmp_path)
    assert calls["n"] == 2
    assert code == 130 and _one_line(err) == "interrupted"
    after = {p: (s, (store_dir / p).stat().st_mtime_ns) for p, s in _files(store_dir).items()}
    assert after == before, set(after) ^ set(before)
    assert sorted(p.name for p in store_dir.iterdir()) == sorted({Path(p).parts[0] for p in before}), \
        "an empty folder was left in the store"


def test_report_interrupted_leaves_no_half_report(tmp_path, monkeypatch, run_main):
    from robustbench_dgsa.report import build
    _small_store(tmp_path / "store")
    # a finished report first: an interrupted rebuild must leave it as it was
    code, _, err = run_main(["report", "--store", "store", "--out", "rep"], tmp_path)
    assert code == 0, err
    rep = tmp_path / "rep"
    first = {p: (rep / p).read_bytes() for p in _files(rep)}
    calls = _interrupt_on_call(monkeypatch, build, "curve_figures", 1)  # after tables and figures were written
    code, _, err = run_main(["report", "--store", "store", "--out", "rep", "--title", "second"], tmp_path)
    assert calls["n"] == 1
    assert code == 130 and _one_line(err) == "interrupted"
    assert {p: (rep / p).read_bytes() for p in _files(rep)} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep", "store"], "a staging folder was left behind"
    # a report interrupted in a new folder leaves no folder that looks like a report
    monkeypatch.undo()
    _interrupt_on_call(monkeypatch, build, "curve_figures", 1)
    code, _, err = run_main(["report", "--store", "store", "--out", "rep2"], tmp_path)
    assert code == 130
    assert not (tmp_path / "rep2").exists() or not any((tmp_path / "rep2").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "rep2") == ["rep", "store"]
