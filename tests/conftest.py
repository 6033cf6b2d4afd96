"""Shared fixtures. Real-data tests use ../shared/data and skip cleanly when it is absent."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Tiny models in tests: one intra-op thread is faster than two (no OpenMP hand-off per small matmul) and
# keeps timings stable when the machine is shared. Set before torch is imported so subprocesses inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path | None:
    """``$DGSA_SHARED_DATA`` or ``<repo>/../shared/data``; None when absent."""
    env = os.environ.get("DGSA_SHARED_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Also for when torch was imported before OMP_NUM_THREADS took effect (e.g. by a plugin)."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


#: address-space bound for the bad-input tests (RLIMIT_AS): a normal tiny train/evaluate peaks near 4 GiB of
#: virtual memory (torch and its thread arenas reserve more than they touch), so 8 GiB leaves room for it while an
#: allocation sized by bad input (a label of 10^12, a 10^6-pixel image side) fails the test instead of the machine
MEMORY_BOUND = 8 << 30


@pytest.fixture
def memory_bound():
    """Cap the address space of this process (and the processes it starts) at :data:`MEMORY_BOUND` (the
    RLIMIT_AS soft limit) for one test, restored afterwards. Yields the bound in bytes."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = MEMORY_BOUND if hard == resource.RLIM_INFINITY else min(MEMORY_BOUND, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield bound
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("real data (../shared/data) not available")
    return path


@pytest.fixture()
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def compile_latex(tmp_path):
    """A function compiling each given ``.tex`` table with pdflatex under the report's stated preamble; returns
    {file name: problem} for tables that fail or overflow the line width. Skips the test without pdflatex."""
    import shutil
    import subprocess

    from robustbench_dgsa.report.tables import LATEX_PREAMBLE

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not on PATH")

    def run(tex_files) -> dict:
        problems = {}
        for i, tex in enumerate(sorted(tex_files)):
            doc = tmp_path / f"doc{i}.tex"
            doc.write_text("\\documentclass{article}\n" + LATEX_PREAMBLE + "\n\\begin{document}\n\\input{"
                           + str(tex) + "}\n\\end{document}\n")
            res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
                                 cwd=tmp_path, capture_output=True, text=True, timeout=120)
            log = (tmp_path / f"doc{i}.log").read_text(errors="replace") if (tmp_path / f"doc{i}.log").exists() else ""
            if res.returncode != 0:
                err = [ln for ln in log.splitlines() if ln.startswith("!")]
                problems[tex.name] = "does not compile: " + (err[0] if err else res.stdout[-300:])
            elif "Overfull \\hbox" in log:
                problems[tex.name] = "overflows: " + log[log.index("Overfull \\hbox"):][:80]
        return problems
    return run


_MAIN_LOOP = """
import contextlib, io, json, sys
from robustbench_dgsa.cli import main
out = []
for args in json.loads(sys.argv[1]):
    sys.argv = ["dgsa-bench", *args]
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code
    out.append([code, buf.getvalue()])
print(json.dumps(out))
"""


def _run_cli_cases(cases: list[list[str]]) -> list[tuple[int, str]]:
    """Run each argument list through the real entry point (cli.main, error boundary included) in ONE
    subprocess; returns (exit code, stderr) per case."""
    p = subprocess.run([sys.executable, "-c", _MAIN_LOOP, json.dumps(cases)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return [(int(c), err) for c, err in json.loads(p.stdout)]


@pytest.fixture(scope="session")
def run_cli_cases():
    return _run_cli_cases


@pytest.fixture
def run_main(capsys):
    """Run the real entry point (cli.main, error boundary included) in this process with ``args`` from folder
    ``cwd``; returns (exit code, stdout, stderr). In-process, so a test can monkeypatch the library under it."""
    def run(args: list[str], cwd: Path) -> tuple[int, str, str]:
        from robustbench_dgsa.cli import main

        old_argv, old_cwd = sys.argv, os.getcwd()
        sys.argv = ["dgsa-bench", *args]
        os.chdir(cwd)
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv = old_argv
            os.chdir(old_cwd)
        out, err = capsys.readouterr()
        return code, out, err
    return run


class _Payload:
    """Unpickling this creates ``marker`` (what an attacker's pickle would do, harmlessly)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant_pickle(path: Path, marker: Path) -> None:
    """A torch-style pickle at ``path`` whose loading creates ``marker``; checked to be live with a plain
    pickle.load first."""
    import pickle

    probe = marker.with_name(marker.name + ".probe")
    pickle.loads(pickle.dumps({"payload": _Payload(probe)}))["payload"].close()
    assert probe.exists()  # the payload really runs when unpickled
    probe.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"version": 1, "model": {}, "payload": _Payload(marker)}))


@pytest.fixture(scope="session")
def plant_pickle():
    """plant_pickle(path, marker): write a live malicious pickle; a test then checks ``marker`` never appears."""
    return _plant_pickle


@pytest.fixture(scope="session")
def tiny_zoo(tmp_path_factory):
    """A zoo of six tiny models built by the real builder (jobs/zoo.py) on the synthetic sets: ViT/DViT/DGViT on
    synthetic-vision, Transformer/DT/DGT on synthetic-text. Needs the real frost photographs (the builder's
    corrupted set uses them). Returns (zoo folder, builder kwargs, cards, data root)."""
    import shutil
    from robustbench_dgsa.jobs.zoo import build_zoo
    data = shared_data_dir()
    if data is None or not (data / "corruptions" / "frost").is_dir():
        pytest.skip("../shared/data/corruptions/frost not available")
    root = tmp_path_factory.mktemp("tiny-zoo")
    shutil.copytree(data / "corruptions" / "frost", root / "data" / "corruptions" / "frost")
    kw = dict(work=root / "work", out=root / "zoo", progress=False, preset="tiny",
              datasets={"image": "synthetic-vision", "text": "synthetic-text"})
    cards = build_zoo(root / "data", **kw)
    return root / "zoo", kw, cards, root / "data"
