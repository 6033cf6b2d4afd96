"""One option vocabulary across every command (cli/options.py) and the one error boundary (cli.main)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import typer.main

from robustbench_dgsa.cli import app, main
from robustbench_dgsa.cli import options as opt
from robustbench_dgsa.util.errors import UserError

# Spellings of one idea: at most one of each group may be visible in a command's --help.
SYNONYMS = [
    {"--corruption", "--corruptions"},
    {"--severity", "--severities"},
    {"--seed", "--seeds"},
    {"--text-noise", "--noise"},
    {"--max-examples", "--limit", "--max-test", "--n-examples"},
    {"--model", "--models"},
    {"--dataset", "--datasets"},
    {"--out", "--output", "--output-dir"},
    {"--json", "--as-json"},
    {"--quiet", "--silent"},
]
OLD_SPELLINGS = {name for names in opt.HIDDEN_ALIASES.values() for name in names}


def _commands():
    """(path, click command) for every command and sub-command of the app, groups included."""
    root = typer.main.get_command(app)
    stack = [("", root)]
    while stack:
        path, cmd = stack.pop()
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            stack.append((f"{path} {name}".strip(), sub))


def _visible(cmd) -> list[str]:
    return [o for p in cmd.params if not getattr(p, "hidden", False) and p.param_type_name == "option"
            for o in (*p.opts, *p.secondary_opts)]


def test_every_command_is_walked():
    paths = {p for p, _ in _commands()}
    assert {"train", "evaluate", "corrupt", "corrupt-text", "rollout", "compare", "report", "reproduce", "models",
            "sweep plan", "sweep run", "sweep run-one", "sweep status", "sweep slurm"} <= paths


def test_no_synonym_pair_is_visible_in_any_command():
    for path, cmd in _commands():
        visible = set(_visible(cmd))
        for group in SYNONYMS:
            both = group & visible
            assert len(both) <= 1, f"{path or 'dgsa-bench'}: synonyms {sorted(both)} both visible"
        old = visible & OLD_SPELLINGS
        assert not old, f"{path}: old spelling(s) {sorted(old)} visible in --help"


def test_a_short_flag_means_one_thing_everywhere():
    meaning: dict[str, set[str]] = {}
    for path, cmd in _commands():
        for p in cmd.params:
            if getattr(p, "hidden", False) or p.param_type_name != "option":
                continue
            longs = [o for o in p.opts if o.startswith("--")]
            for short in (o for o in p.opts if not o.startswith("--")):
                meaning.setdefault(short, set()).update(longs)
    for short, longs in meaning.items():
        assert len(longs) == 1, f"{short} means {sorted(longs)}"
        assert opt.SHORT_FLAGS.get(short) in longs, f"{short} -> {longs} is not in options.SHORT_FLAGS"


def test_hidden_old_spellings_exist_wherever_the_canonical_option_does():
    for path, cmd in _commands():
        names = {o for p in cmd.params if p.param_type_name == "option" for o in p.opts}
        hidden = {o for p in cmd.params if getattr(p, "hidden", False) for o in p.opts}
        for canonical, aliases in opt.HIDDEN_ALIASES.items():
            if canonical in names - hidden:
                for a in aliases:
                    assert a in names, f"{path}: {a} (old spelling of {canonical}) is not accepted"


# ------------------------------------------------------------------------------------------------ parsers


def test_parsers():
    assert opt.parse_severities("1-5") == opt.parse_severities("all") == opt.parse_severities(None) == [1, 2, 3, 4, 5]
    assert opt.parse_severities("5,1-2") == [1, 2, 5]
    assert opt.parse_severities(["3", "1"]) == [1, 3]
    assert opt.parse_seeds("0-4") == [0, 1, 2, 3, 4] and opt.parse_seeds("7,2,2") == [2, 7]
    assert opt.parse_seeds(None) == [0] and opt.parse_one_seed("3") == 3
    assert opt.parse_corruptions("blur,fog")[:4] == ["defocus_blur", "glass_blur", "motion_blur", "zoom_blur"]
    assert opt.parse_corruptions(None) is None
    assert opt.parse_text_noise("char,ocr")[-1] == "ocr"
    assert opt.split_list(["vit,dvit", "dgvit", "vit"]) == ["vit", "dvit", "dgvit"]
    assert opt.check_device("CUDA:1") == "cuda:1"
    from corruptions.errors import CorruptionError
    for bad, fn, flag in (("6", opt.parse_severities, "--severity"), ("fgo", opt.parse_corruptions, "--corruption"),
                          ("typo", opt.parse_text_noise, "--text-noise")):
        with pytest.raises(CorruptionError, match=flag):
            fn(bad)
    for bad in ("4-1", "x", "-1", ""):
        with pytest.raises(UserError, match="--seed"):
            opt.parse_seeds(bad)
    with pytest.raises(UserError, match="one seed"):
        opt.parse_one_seed("0-2")
    for bad in ("gpu", "cuda:", "cuda:x", "tpu"):
        with pytest.raises(UserError, match="--device"):
            opt.check_device(bad)


# ------------------------------------------------------------------------------------------------ running main


def _main(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ex:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return ex.value.code, out, err


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_version(capsys):
    from robustbench_dgsa import __version__
    code, out, err = _main(capsys, "--version")
    assert code == 0 and out.strip() == f"dgsa-bench {__version__}"


@pytest.fixture
def capture(monkeypatch):
    """Replace library entry points by recorders (the CLI imports them at call time)."""
    calls: dict[str, dict] = {}

    def recorder(name, result=None):
        def fn(*args, **kwargs):
            calls[name] = {"args": args, **kwargs}
            if isinstance(result, BaseException):
                raise result
            return result
        return fn

    def install(module: str, attr: str, result=None):
        import importlib
        monkeypatch.setattr(importlib.import_module(module), attr, recorder(attr, result))
    return calls, install


class _Stop(Exception):
    """Raised by a recorder to end a command once its arguments are captured."""


def test_rollout_severity_range_and_old_spellings(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.rollout.runs", "rollout_metrics_run", _Stop())
    base = ["rollout", "--metrics", "--model", "vit", "--store", tmp_path / "store"]
    for extra in (["--severity", "1-5", "--corruption", "fog,blur"],
                  ["--severities", "1-5", "--corruptions", "fog,blur"],
                  ["-s", "all", "--corruption", "fog", "--max-examples", "200"]):
        calls.clear()
        code, _, err = _main(capsys, *base, *extra)
        assert code == 1 and "_Stop" in err  # reached the library with parsed values
        assert calls["rollout_metrics_run"]["severities"] == [1, 2, 3, 4, 5]
    assert calls["rollout_metrics_run"]["corruptions"] == ["fog"]


def test_rollout_image_accepts_severity_range(tmp_path, capsys):
    from PIL import Image
    img = tmp_path / "img.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(img)
    code, out, err = _main(capsys, "rollout", img, "--model", "vit", "--severity", "1-5", "--device", "cpu",
                           "--out", tmp_path / "r.png")
    assert code == 0, err
    assert (tmp_path / "r.png").is_file() and "wrote" in out


def test_evaluate_old_and_new_spellings_agree(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.engine.evaluate", "evaluate", _Stop())
    seen = []
    for args in (["--corruption", "noise", "--severity", "2-3", "--max-examples", "7", "--text-noise", "char"],
                 ["--corruptions", "noise", "--severities", "2,3", "--max-test", "7", "--noise", "char"]):
        code, _, _ = _main(capsys, "evaluate", "-c", tmp_path / "ck.safetensors", *args)
        assert code == 1
        c = calls["evaluate"]
        seen.append((c["corruptions"], c["severities"], c["max_test"], c["text_noise"]))
    assert seen[0] == seen[1]
    assert seen[0][0] == ["gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"][:len(seen[0][0])]
    assert seen[0][1:3] == ([2, 3], 7)


def test_sweep_plan_and_reproduce_parse_lists(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.jobs.sweep", "write_plan", [])
    code, _, err = _main(capsys, "sweep", "plan", tmp_path / "sw", "--models", "vit,dvit", "--model", "dgvit",
                         "--datasets", "synthetic-vision", "--seeds", "0-2", "--corruption", "fog", "-s", "1-2")
    assert code == 0, err
    jobs = calls["write_plan"]["args"][1]
    assert sorted({j.model for j in jobs}) == ["dgvit", "dvit", "vit"] and sorted({j.seed for j in jobs}) == [0, 1, 2]
    ev = calls["write_plan"]["evaluation"]
    assert ev.corruptions == ["fog"] and ev.severities == [1, 2]

    install("robustbench_dgsa.jobs.reproduce", "reproduce", _Stop())
    code, _, _ = _main(capsys, "reproduce", "--out", tmp_path / "r", "--seeds", "0-1", "--models", "vit,dgt",
                       "--severities", "1-5", "--corruptions", "benchmark", "--max-test", "9")
    assert code == 1
    r = calls["reproduce"]
    assert r["seeds"] == [0, 1] and r["models"] == ["vit", "dgt"] and r["severities"] == [1, 2, 3, 4, 5]
    assert len(r["corruptions"]) == 15 and r["max_test"] == 9


def test_giving_new_and_old_spelling_together_is_a_usage_error(capsys):
    code, _, err = _main(capsys, "evaluate", "-c", "x", "--severity", "1", "--severities", "2")
    assert code == 2 and "not both" in _one_line(err)


@pytest.mark.parametrize("args, needle", [
    (["reproduce", "--quick", "--corruption", "fogg"], "--corruption"),
    (["reproduce", "--quick", "--text-noise", "typoo"], "--text-noise"),
    (["reproduce", "--corruption", "fgo"], "--corruption"),
    (["evaluate", "-c", "x", "--severity", "1-9"], "--severity"),
    (["evaluate", "-c", "x", "--text-noise", "nope"], "--text-noise"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--seed", "3-1"], "--seed"),
    (["corrupt", "-i", "x.npy", "-o", "OUT", "--seed", "0-3"], "one seed"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--batch-size", "0"], "--batch-size"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--batch-size", "-5"], "--batch-size"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--lr", "-1"], "--lr"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--lr", "0"], "--lr"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--epochs", "0"], "--epochs"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--epochs", "-1"], "--epochs"),
    (["train", "-m", "vit", "-d", "synthetic-vision", "-o", "OUT", "--device", "gpu"], "--device"),
    (["evaluate", "-c", "x", "--batch-size", "0"], "--batch-size"),
    (["evaluate", "-c", "x", "--device", "cuda:x"], "--device"),
    (["rollout", "--metrics", "-m", "vit", "--device", "tpu"], "--device"),
    (["corrupt", "-i", "x.npy", "-o", "OUT", "--device", "tpu"], "--device"),
    (["sweep", "run", "OUT", "--workers", "-3"], "--workers"),
    (["sweep", "slurm", "OUT", "--gpus", "-1"], "--gpus"),
    (["corrupt-text", "-i", "x.txt", "-o", "OUT", "--encoding", "bogus"], "--encoding"),
    (["corrupt", "-i", "x.npy", "-o", "OUT", "--max-examples", "0"], "--max-examples"),
    (["corrupt", "-i", "x.npy", "-o", "OUT", "--limit", "0"], "--limit"),
    (["models", "--image-size", "0"], "--image-size"),
    (["train", "-d", "synthetic-vision", "-o", "OUT"], "--model"),
    (["evaluate", "-c", "x", "--no-such-flag"], "--no-such-flag"),
    (["no-such-command"], "no-such-command"),
])
def test_bad_values_are_one_line_and_exit_2_before_any_work(tmp_path, capsys, args, needle):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    code, out, err = _main(capsys, *args)
    assert code == 2, err
    assert needle in _one_line(err)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ output paths


def _writers(tmp: Path, target: Path, kind: str) -> list[list]:
    """Every writing command with ``target`` as its output folder (kind 'dir') or file (kind 'file')."""
    x = tmp / "x.npy"
    np.save(x, np.zeros((2, 8, 8, 3), np.uint8))
    txt = tmp / "t.txt"
    txt.write_text("one line\nanother line\n")
    img = tmp / "i.png"
    if not img.exists():
        from PIL import Image
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(img)
    (tmp / "store").mkdir(exist_ok=True)
    if kind == "dir":
        return [["corrupt", "-i", x, "-o", target, "--corruption", "contrast", "-s", "1"],
                ["corrupt-text", "-i", txt, "-o", target, "--text-noise", "ocr", "-s", "1"],
                ["train", "-m", "vit", "-d", "synthetic-vision", "-o", target],
                ["train", "-m", "vit", "-d", "synthetic-vision", "-o", tmp / "fine", "--store", target],
                ["evaluate", "-c", tmp / "missing.safetensors", "--store", target],
                ["rollout", "--metrics", "-m", "vit", "--store", target],
                ["report", "--store", tmp / "store", "--out", target],
                ["reproduce", "--out", target],
                ["sweep", "plan", target, "-m", "vit", "-d", "synthetic-vision"]]
    png = target if target.suffix else target.with_suffix(".png")
    return [["corrupt", "-i", x, "--preview", png, "--corruption", "contrast", "-s", "1"],
            ["rollout", img, "-m", "vit", "--out", png],
            ["compare", "--store", tmp / "store", "--csv", target],
            ["compare", "--store", tmp / "store", "--latex", target]]


def test_output_folder_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("keep me")
    for args in _writers(tmp_path, f, "dir") + _writers(tmp_path, f / "sub", "dir"):
        code, _, err = _main(capsys, *args)
        assert code == 2, (args, err)
        line = _one_line(err)
        assert str(f) in line and ("is a file" in line), (args, line)
    assert f.read_text() == "keep me"


def test_output_file_that_is_a_folder(tmp_path, capsys):
    d = tmp_path / "a-folder.png"
    d.mkdir()
    for args in _writers(tmp_path, d, "file"):
        code, _, err = _main(capsys, *args)
        assert code == 2, (args, err)
        line = _one_line(err)
        assert str(d) in line and "is a folder" in line, (args, line)
    assert not any(d.iterdir())


def test_read_only_output(tmp_path, capsys, monkeypatch):
    """The check itself (os.access is faked: the suite may run as root, who can write anywhere)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro and mode & os.W_OK else real(p, mode))
    for args in _writers(tmp_path, ro, "dir") + _writers(tmp_path, ro / "new", "dir") \
            + _writers(tmp_path, ro / "f.png", "file"):
        code, _, err = _main(capsys, *args)
        assert code == 2, (args, err)
        line = _one_line(err)
        assert str(ro) in line and "read-only" in line, (args, line)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_read_only_output_for_real(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, _, err = _main(capsys, *_writers(tmp_path, ro / "new", "dir")[0])
        assert code == 2 and "read-only" in _one_line(err)
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------------------------------------------ the boundary


@pytest.mark.parametrize("exc, code, needle", [
    (PermissionError(13, "Permission denied", "/data/out/x.npy"), 1, "/data/out/x.npy: permission denied"),
    (IsADirectoryError(21, "Is a directory", "/data/out"), 1, "/data/out: is a folder"),
    (NotADirectoryError(20, "Not a directory", "/data/f/x"), 1, "a file is in the way"),
    (OSError(28, "No space left on device", "/data/out/big"), 1, "no space left"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), 2, "cannot decode"),
    (EOFError("Compressed file ended before the end-of-stream marker was reached"), 1, "truncated"),
    (UserError("severity must be 1..5, got 7"), 2, "severity must be 1..5"),
    (MemoryError(), 1, "out of memory"),
    (__import__("json").JSONDecodeError("Expecting value", "{x", 1), 2, "malformed JSON"),
    (__import__("PIL.Image").Image.DecompressionBombError("Image size (10**10 pixels) exceeds limit"), 2,
     "too large"),
    (RuntimeError("a genuine bug"), 1, "--debug"),
])
def test_failures_inside_a_command_are_one_line(tmp_path, capsys, capture, exc, code, needle):
    calls, install = capture
    install("robustbench_dgsa.engine.evaluate", "evaluate", exc)
    got, out, err = _main(capsys, "evaluate", "-c", tmp_path / "ck.safetensors")
    assert got == code, err
    assert needle in _one_line(err)
    assert out == ""


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(tmp_path, capsys, capture, where):
    calls, install = capture
    install("robustbench_dgsa.engine.evaluate", "evaluate", RuntimeError("a genuine bug"))
    args = ["evaluate", "-c", tmp_path / "ck.safetensors"]
    code, _, err = _main(capsys, *(["--debug", *args] if where == "before" else [*args, "--debug"]))
    assert code == 1 and "Traceback" in err and "RuntimeError: a genuine bug" in err
    code, _, err = _main(capsys, *args)  # --debug does not stick to the next run
    assert "Traceback" not in err


def test_ctrl_c_in_a_resumable_command_says_how_to_resume(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.engine.train", "train", KeyboardInterrupt())
    out = tmp_path / "run dir"
    code, _, err = _main(capsys, "train", "-m", "vit", "-d", "synthetic-vision", "-o", out, "--epochs", "1")
    assert code == 130
    line = _one_line(err)
    assert line.startswith("interrupted; resume with: dgsa-bench train") and line.endswith("--resume")
    assert f"'{out}'" in line  # quoted for the shell


def test_ctrl_c_elsewhere_is_one_word(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.engine.evaluate", "evaluate", KeyboardInterrupt())
    code, _, err = _main(capsys, "evaluate", "-c", tmp_path / "ck.safetensors")
    assert code == 130 and _one_line(err) == "interrupted"


def test_sweep_run_ctrl_c_resumes_with_the_same_line(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.jobs.sweep", "run", KeyboardInterrupt())
    code, _, err = _main(capsys, "sweep", "run", tmp_path)
    assert code == 130 and _one_line(err) == f"interrupted; resume with: dgsa-bench sweep run {tmp_path}"


def test_reproduce_ctrl_c_resumes_with_the_same_line(tmp_path, capsys, capture):
    calls, install = capture
    install("robustbench_dgsa.jobs.reproduce", "reproduce", KeyboardInterrupt())
    code, _, err = _main(capsys, "reproduce", "--out", tmp_path / "r", "--quick")
    assert code == 130
    assert _one_line(err) == f"interrupted; resume with: dgsa-bench reproduce --out {tmp_path / 'r'} --quick"


def test_result_tables_go_to_stdout(tmp_path, capsys, capture):
    import pandas as pd
    calls, install = capture

    class Res:
        run_id, store_dir = "r1", tmp_path
        table = pd.DataFrame([{"condition": "clean", "severity": 0, "accuracy": 0.5, "n": 4, "cer": float("nan"),
                               "wer": float("nan"), "source": "clean"}])
    install("robustbench_dgsa.engine.evaluate", "evaluate", Res())
    code, out, err = _main(capsys, "evaluate", "-c", tmp_path / "ck.safetensors")
    assert code == 0 and "clean" in out and "0.5000" in out and "0.5000" not in err
