"""Issue 22, items 8-11, 18, 19: bounded work and memory, one line instead of internal errors, strict parsing,
and processes / partial files that do not outlive a killed run.

Every case runs the real entry point (``robustbench_dgsa.cli.main``, the error boundary included) under an
address-space bound (the ``memory_bound`` fixture: an allocation sized by bad input fails the test, not the
machine) and asserts the exit code, exactly one ``error:`` line on stderr, no traceback, and that no file was
created or changed in the working folder or the input folder.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("memory_bound")

USAGE = 2
TINY = ["--preset", "tiny", "--device", "cpu", "--set", "model.dim=16", "--set", "model.depth=1",
        "--set", "model.heads=2", "--set", "model.head_hidden=16", "--set", "data.max_train=32",
        "--set", "data.max_test=16"]
VIT = ["train", "-m", "vit", "-d", "synthetic-vision", "-o", "run", *TINY]


@pytest.fixture(scope="module")
def inp(tmp_path_factory) -> dict[str, Path]:
    """Input files (nothing here may change): arrays, texts, configs, a checkpoint header, a planned sweep."""
    from safetensors.torch import save_file
    import torch

    d = tmp_path_factory.mktemp("safety_inputs")
    p: dict[str, Path] = {"dir": d}
    y = np.arange(8, dtype=np.int64)
    y[3] = 10**12  # one label of 10^12: a class list or count sized by it would need terabytes
    p["big_label"] = d / "big_label.npz"
    np.savez(p["big_label"], x=np.zeros((8, 32, 32, 3), np.uint8), y=y)
    p["img"] = d / "img.npy"
    np.save(p["img"], np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    p["txt"] = d / "t.txt"
    p["txt"].write_text("a fine film\na dull film\n", encoding="utf-8")
    p["long_txt"] = d / "long.txt"  # one example over the 100,000-character limit (the had 10 MB)
    p["long_txt"].write_text("short line\n" + "word " * 40_001 + "\n", encoding="utf-8")
    p["deep_json"] = d / "deep.json"
    p["deep_json"].write_text('{"train": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    p["deep_ckpt"] = d / "deep.safetensors"
    save_file({"w": torch.zeros(1)}, str(p["deep_ckpt"]),
              metadata={"format_version": "1", "model_config": "[" * 100_000 + "]" * 100_000, "meta": "{}"})
    from robustbench_dgsa.cli import main
    sweep = d / "sweep"
    try:
        main(["sweep", "plan", str(sweep), "-m", "vit", "-d", "synthetic-vision", *TINY])
    except SystemExit as e:
        assert e.code == 0
    p["sweep"] = sweep
    return p


def _snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    snap = {}
    for folder in folders:
        for q in sorted(folder.rglob("*")):
            st = q.lstat()
            snap[str(q)] = (st.st_size, st.st_mtime_ns) if q.is_file() else (-1, 0)
    return snap


def _fill(args: list[str], inp: dict[str, Path]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in inp.items()}) if "{" in a else a for a in args]


CASES: list[tuple[str, list[str], str]] = [
    # item 8: labels validated on read, before anything is sized by them
    ("label-1e12-corrupt", ["corrupt", "-i", "{big_label}", "-o", "out", "--corruption", "contrast", "-s", "1"],
     "below 1,000,000"),
    ("label-1e12-train", ["train", "-m", "vit", "-d", "npz:{big_label}", "-o", "run", *TINY], "below 1,000,000"),
    # item 9: an example longer than the bound, refused before any output
    ("corrupt-text-long-example", ["corrupt-text", "-i", "{long_txt}", "-o", "out"], "100,000"),
    # item 10: every number has an upper bound; models are sized before they are built
    ("train-epochs-2**63", [*VIT, "--epochs", "9223372036854775808"], "--epochs"),
    ("train-lr-1e308", [*VIT, "--lr", "1e308"], "--lr"),
    ("train-seed-2**64", [*VIT, "--seed", "18446744073709551616"], "--seed"),
    ("train-seed-range-too-many", [*VIT, "--seed", "0-4294967295"], "--seed"),
    ("train-set-epochs-over", [*VIT, "--set", "train.epochs=100001"],
     "train.epochs: expected an integer in [1, 100000]"),
    ("train-set-lr-over", [*VIT, "--set", "train.lr=1e308"], "train.lr"),
    ("train-set-image-size-over", [*VIT, "--set", "model.image_size=1000000"], "model.image_size"),
    ("evaluate-corruption-seed-2**32", ["evaluate", "--checkpoint", "x.safetensors", "--corruption-seed",
                                       "4294967296"], "--corruption-seed"),
    ("models-image-size", ["models", "--image-size", "1000000"], "--image-size"),
    ("models-max-len", ["models", "--max-len", "1000000000"], "--max-len"),
    ("models-vocab-size", ["models", "--vocab-size", "10000000000000"], "--vocab-size"),
    ("models-num-classes", ["models", "--num-classes", "18446744073709551616"], "--num-classes"),
    ("models-too-many-params-tokens", ["models", "-m", "vit", "--image-size", "4096", "--patch-size", "1"],
     "parameters"),
    ("models-too-many-params-width", ["models", "-m", "vit", "--set", "dim=65536", "--set", "depth=1024"],
     "parameters"),
    # item 18: one line instead of an internal error
    ("corrupt-text-encoding-hex", ["corrupt-text", "-i", "{txt}", "-o", "out", "--encoding", "hex"], "encoding"),
    ("corrupt-text-encoding-rot13", ["corrupt-text", "-i", "{txt}", "-o", "out", "--encoding", "rot13"],
     "encoding"),
    ("train-config-200k-deep", [*VIT, "--config", "{deep_json}"], "nested too deeply"),
    ("evaluate-checkpoint-header-100k-deep", ["evaluate", "--checkpoint", "{deep_ckpt}", "--corruption",
                                             "contrast", "-s", "1", "--device", "cpu"], "nested too deeply"),
    ("evaluate-module-json-loads", ["evaluate", "--module", "json:loads", "--dataset", "synthetic-vision",
                                    "--device", "cpu"], "json:loads"),
    # item 19: strict parsing
    ("train-seed-blank-item", [*VIT, "--seed", "0,,1"], "blank item"),
    ("corrupt-corruption-blank-item", ["corrupt", "-i", "{img}", "-o", "out", "--corruption", "contrast,"],
     "blank item"),
    ("train-set-arabic-indic-digits", [*VIT, "--set", "model.dim=\u0666\u0664"], "model.dim"),
    ("train-set-fullwidth-lr", [*VIT, "--set", "train.lr=\uff11e-3"], "train.lr"),
    ("train-seed-arabic-indic-digits", [*VIT, "--seed", "\u0661"], "--seed"),
    ("sweep-run-devices-repeated", ["sweep", "run", "{sweep}", "--devices", "0,0"], "twice"),
    ("sweep-run-devices-blank", ["sweep", "run", "{sweep}", "--devices", "0,"], "blank item"),
]


@pytest.mark.parametrize("case_id, args, says", [pytest.param(*c, id=c[0]) for c in CASES])
def test_bad_input_is_one_line_before_any_work(case_id, args, says, inp, tmp_path, run_main):
    before = _snapshot(tmp_path, inp["dir"])
    code, out, err = run_main(_fill(args, inp), tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == USAGE, f"exit {code}; stderr:\n{err}\nstdout:\n{out}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"expected one 'error:' line, got:\n{err}"
    assert says in lines[0], lines[0]
    assert _snapshot(tmp_path, inp["dir"]) == before, "files were created or changed"


def test_gpu_ids_without_cuda_are_refused(inp, tmp_path, run_main):
    import torch
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    before = _snapshot(tmp_path, inp["dir"])
    code, _, err = run_main(["sweep", "run", str(inp["sweep"]), "--devices", "0"], tmp_path)
    assert code == USAGE and err.strip().startswith("error:") and "no CUDA GPU" in err, err
    assert len(err.strip().splitlines()) == 1
    assert _snapshot(tmp_path, inp["dir"]) == before


def test_submission_refused_by_sbatch_is_one_line_and_leaves_no_pickle(inp, tmp_path, run_main, monkeypatch):
    pytest.importorskip("submitit")
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("sbatch", "srun"):  # submitit picks Slurm when srun is on PATH; sbatch refuses the job
        (fake / tool).write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n")
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    work = tmp_path / "work"
    work.mkdir()
    before = _snapshot(work, inp["dir"])
    code, _, err = run_main(["sweep", "slurm", str(inp["sweep"]), "--submitit", "--gpus", "0", "--cpus", "1"], work)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == USAGE and len(lines) == 1 and lines[0].startswith("error:"), err
    assert "invalid partition" in lines[0] and "Traceback" not in err
    assert _snapshot(work, inp["dir"]) == before, "the failed submission left files (a .pkl?)"


def test_compare_prints_names_that_look_like_markup_as_they_are(tmp_path, run_main):
    from robustbench_dgsa import store
    names = ["/abs/model", "[/bold]m[red]x"]
    rng = np.random.default_rng(0)
    for k, model in enumerate(names):
        for seed in range(2):
            w = store.RunWriter(tmp_path / "store", f"eval-{k}-{seed}",
                                base=dict(kind="eval", model=model, dataset="cifar10", seed=seed, split="test",
                                          metric="accuracy", n=100))
            w.add_rows([dict(condition="clean", severity=0, value=0.8 + 0.01 * rng.standard_normal())])
    code, out, err = run_main(["compare", "--store", str(tmp_path / "store")], tmp_path)
    assert code == 0 and "internal error" not in err and "Traceback" not in err, err
    assert "/abs/model" in out and "[/bold]m[red]x" in out


def test_warnings_are_one_clean_line_each_and_quiet_keeps_only_result_warnings(inp, tmp_path, run_main,
                                                                              monkeypatch):
    import warnings

    from corruptions.errors import ResultWarning

    from robustbench_dgsa.jobs import corrupt as corrupt_job

    real = corrupt_job.load_text_input

    def noisy(*a, **kw):
        for _ in range(2):  # the same warnings twice: each shown once
            warnings.warn("a library\nwarning", UserWarning)
            warnings.warn("mean of empty slice", RuntimeWarning)
            warnings.warn("frost is procedural here", ResultWarning)
        return real(*a, **kw)

    monkeypatch.setattr(corrupt_job, "load_text_input", noisy)
    args = ["corrupt-text", "-i", str(inp["txt"]), "-o", "out", "--text-noise", "char_insert", "-s", "1"]
    for extra, expected in (([], ["warning: a library warning", "warning: mean of empty slice",
                                  "warning: frost is procedural here"]),
                            (["-q"], ["warning: frost is procedural here"]),
                            ([], ["warning: a library warning", "warning: mean of empty slice",
                                  "warning: frost is procedural here"])):  # a later command warns again
        code, _, err = run_main([*args, *extra, "--overwrite"], tmp_path)
        assert code == 0, err
        assert [ln for ln in err.splitlines() if ln.startswith("warning")] == expected, err
        assert "Warning" not in err and ".py" not in err, err


def test_procedural_frost_is_one_warning_line_under_quiet(inp, tmp_path, run_main):
    from corruptions import frost
    if frost._imagecorruptions_files() is not None:
        pytest.skip("imagecorruptions installed: frost uses the real photographs")
    code, _, err = run_main(["corrupt", "-i", str(inp["img"]), "-o", "out", "--corruption", "frost", "-s", "1",
                             "-q"], tmp_path)
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning:") and "procedural" in lines[0], err
    assert ".py" not in err and "UserWarning" not in err


# --- item 11: nothing outlives a killed run ----------------------------------------------------------------------

def _gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":  # exited, waiting for its new parent to reap it
            return True
        time.sleep(0.1)
    return False


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    """The next line of ``proc``'s stdout; fails the test after ``timeout`` seconds instead of hanging."""
    import select
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return proc.stdout.readline()


def _kill_all(pids: list[int]) -> None:
    """Clean up after a failed check: the given processes (this test's own), by pid."""
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


_POOL_PARENT = textwrap.dedent("""
    import os, sys, time
    from robustbench_dgsa.jobs.reproduce import _Pool
    from busy import work
    with _Pool(2) as pool:
        for i in range(2):  # a task each, queued before the kill: a worker left alive would run it for 120 s
            pool.submit(work, f"started{i}")
        while len(pool.pool._processes) < 2:
            time.sleep(0.05)
        time.sleep(1)  # the workers are starting (the initializer imports torch): killed now, they must end too
        print(" ".join(map(str, pool.pool._processes)), flush=True)
        time.sleep(120)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pool_workers_die_with_a_killed_parent(tmp_path):
    """reproduce's worker pool (the real _Pool): kill -9 the parent, its workers end within a few seconds, also
    while still starting up (an idle worker would end on its closed queue anyway; these have tasks queued)."""
    (tmp_path / "busy.py").write_text("import time\n\ndef work(marker):\n    time.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), OMP_NUM_THREADS="1")
    parent = subprocess.Popen([sys.executable, "-c", _POOL_PARENT], stdout=subprocess.PIPE, text=True, env=env,
                              cwd=tmp_path)
    try:
        workers = [int(p) for p in _read_line(parent, 120).split()]
        assert workers and parent.pid not in workers
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        alive = [w for w in workers if not _gone_within(w, 8.0)]
        assert not alive, f"workers {alive} outlived their killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        _kill_all(locals().get("workers", []))


_DIE_WITH = textwrap.dedent("""
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c",
        "import os, time; from robustbench_dgsa.util.procs import die_with_parent; "
        "die_with_parent(os.getppid()); print(os.getpid(), flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    print(child.stdout.readline().strip(), flush=True)
    time.sleep(120)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_job_process_dies_with_a_killed_runner(tmp_path):
    """The guard sweep's job processes use: kill -9 the runner, the job process ends."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    runner = subprocess.Popen([sys.executable, "-c", _DIE_WITH], stdout=subprocess.PIPE, text=True, env=env)
    try:
        child = int(_read_line(runner, 60))
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
        assert _gone_within(child, 5.0), "the job process outlived its killed runner"
    finally:
        if runner.poll() is None:
            runner.kill()
        _kill_all([locals().get("child", 0)])


def test_a_dead_owners_partial_is_cleaned_on_the_immediate_rerun_a_live_ones_is_kept(inp, tmp_path, run_main):
    from corruptions.atomic import _host_tag, owner_token, partial_path
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: the owner of a killed run
    left = partial_path(out / "fog.n4.s1.npy", f"{_host_tag()}-{dead.pid}-12345-abcdef")
    left.write_bytes(b"\0" * 4096)  # just written: far younger than any age rule
    live = partial_path(out / "fog.n4.s1.npy", owner_token())  # this test process: alive
    live.write_bytes(b"\0" * 4096)
    code, _, err = run_main(["corrupt", "-i", str(inp["img"]), "-o", str(out), "--corruption", "contrast",
                             "-s", "1", "-q"], tmp_path)
    assert code == 0, err
    assert not left.exists(), "a dead owner's partial file was kept"
    assert live.exists(), "a live owner's partial file was deleted"
    assert (out / "contrast.n4.s1.npy").is_file()


def test_owner_records_tell_dead_from_alive():
    from corruptions.atomic import _host_tag, owner_token, token_owner_dead
    assert token_owner_dead(owner_token()) is False
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert token_owner_dead(f"{_host_tag()}-{p.pid}-1-ab") is True
    assert token_owner_dead(f"{_host_tag()}-{os.getpid()}-1-ab") is True  # pid reused by a later process
    assert token_owner_dead("0a1b2c3d") is None  # an old random token: unknown (the age rule applies)
    other = "000000" if _host_tag() != "000000" else "111111"
    assert token_owner_dead(f"{other}-{os.getpid()}-1-ab") is None  # another host: unknown


def test_json_config_case_is_really_deep(inp):
    """The deep-config case means what it says: plain json cannot read the file."""
    with pytest.raises(RecursionError):
        json.loads(inp["deep_json"].read_text())


# --------------------------------------------------------------------------------------------- issue 35, items 9, 10

def _one_line(code: int, err: str, expected: int = USAGE) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == expected, f"exit {code}; stderr:\n{err}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"expected one 'error:' line, got:\n{err}"
    return lines[0]


def _npy_header_only(path: Path, shape: tuple[int, ...], data: bytes = b"") -> Path:
    """A .npy whose header declares ``shape`` (uint8) followed by ``data`` only (230 bytes in the issue)."""
    from numpy.lib import format as npy_format
    with open(path, "wb") as f:
        npy_format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
        f.write(data)
    return path


def _npz_lying_member(path: Path, shape: tuple[int, ...]) -> Path:
    """An .npz whose ``x.npy`` member declares ``shape`` but stores a few bytes of data."""
    import io
    import zipfile
    from numpy.lib import format as npy_format
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False, "shape": shape})
    buf.write(b"\0" * 64)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", buf.getvalue())
    return path


@pytest.mark.parametrize("case", ["npy-huge-shape", "npz-member-lies", "npz-bomb"])
def test_array_headers_are_checked_before_reading_or_decompressing(case, tmp_path, run_main, monkeypatch):
    """Item 9: a 230-byte .npy declaring a huge shape, an .npz member declaring more than it stores, and an .npz
    whose array inflates far beyond its stored size (a decompression bomb; the floor lowered so the test stays
    small) are refused from their headers with one line, before any allocation or decompression."""
    from robustbench_dgsa.data import readers
    src = tmp_path / "in"
    src.mkdir()
    if case == "npy-huge-shape":
        f = _npy_header_only(src / "huge.npy", (10**6, 4096, 4096, 3))
        assert f.stat().st_size < 300
        says = "header declares"
    elif case == "npz-member-lies":
        f = _npz_lying_member(src / "lies.npz", (2000, 256, 256, 3))
        says = "the archive stores"
    else:
        f = src / "bomb.npz"
        np.savez_compressed(f, x=np.zeros((64, 256, 256, 3), np.uint8))   # 12 MiB that deflate ~1000 times
        monkeypatch.setattr(readers, "INFLATION_FLOOR", 1 << 20)
        says = "decompression bomb"
    code, _, err = run_main(["corrupt", "--input", str(f), "--corruption", "contrast", "--severity", "1",
                             "--out", "o"], tmp_path)
    line = _one_line(code, err)
    assert says in line and f.name in line, line
    assert "out of memory" not in line
    assert not (tmp_path / "o").exists()


def _image_folder(root: Path, splits: tuple[str, ...], classes: bool = True) -> Path:
    from PIL import Image
    for split in splits:
        d = root / split / "cat" if classes else root / split
        d.mkdir(parents=True)
        if classes:
            Image.new("RGB", (32, 32), (200, 10, 10)).save(d / "a.png")
    return root


@pytest.mark.parametrize("layout, says", [
    ("root", "has no split folder 'train'"),
    ("train-only", "has no split folder 'test'"),
    ("no-classes", "has no class folders"),
    ("npz-lies", "the archive stores"),
    ("good", None),
])
def test_sweep_plan_checks_each_datasets_layout_as_train_would(layout, says, tmp_path, run_main):
    """Item 10: ``sweep plan -d folder:/`` planned without a word; the plan now checks each dataset's layout (its
    split and class folders, its array headers) for the splits a job reads, before writing jobs.jsonl."""
    data = {"root": "folder:/",
            "train-only": f"folder:{_image_folder(tmp_path / 'f1', ('train',))}",
            "no-classes": f"folder:{_image_folder(tmp_path / 'f2', ('train', 'test'), classes=False)}",
            "npz-lies": f"npz:{_npz_lying_member(tmp_path / 'lies.npz', (2000, 256, 256, 3))}",
            "good": f"folder:{_image_folder(tmp_path / 'f3', ('train', 'test'))}"}[layout]
    code, _, err = run_main(["sweep", "plan", "sw", "-m", "vit", "-d", data, *TINY], tmp_path)
    if says is None:
        assert code == 0, err
        assert (tmp_path / "sw" / "jobs.jsonl").is_file()
        return
    line = _one_line(code, err)
    assert says in line, line
    assert not (tmp_path / "sw").exists()
