"""Library errors are neutral: no message outside the CLI names a command-line flag; the CLI adds the flag.

The library spells a keyword argument the user may set as ``name=value`` (``pass resume=True to continue it``)
and lists its name in the error's ``options``; the CLI's error boundary (``robustbench_dgsa.cli.main``) says it
as its own flag (``pass --resume to continue it``, :func:`robustbench_dgsa.cli.options.spell_flags`).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

# Strings that name flags but are command lines, not messages: (module, flag) -> why.
ALLOWED = {
    ("robustbench_dgsa/jobs/slurm.py", "--index"): "the sbatch script's command line `sweep run-one DIR --index`",
    ("robustbench_dgsa/jobs/sweep.py", "--index"): "the argv of a `sweep run-one` worker process",
}
# Modules that are command-line programs of their own (argparse), so their flags are their own.
OWN_COMMAND_LINE = {"robustbench_dgsa/jobs/zoo.py": "python -m robustbench_dgsa.jobs.zoo"}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, kinds) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _argv_token(text: str) -> bool:
    """A string that is one argument of a command line (``"--porcelain"``) or an #SBATCH directive."""
    return bool(re.fullmatch(r"--[\w-]+(=\S*)?", text)) or text.startswith("#SBATCH ")


def flag_strings(repo: Path = REPO) -> list[str]:
    """``path:line: flag in 'text'`` for each string literal of the library (docstrings aside) naming a flag."""
    files = [p for p in sorted((repo / "robustbench_dgsa").rglob("*.py")) if "cli" not in p.relative_to(repo).parts]
    files += sorted((repo / "corruptions").rglob("*.py"))
    found = []
    for path in files:
        rel = path.relative_to(repo).as_posix()
        if rel in OWN_COMMAND_LINE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
                continue
            if _argv_token(node.value):
                continue
            for flag in FLAG.findall(node.value):
                if (rel, flag) not in ALLOWED:
                    found.append(f"{rel}:{node.lineno}: {flag} in {node.value[:80]!r}")
    return found


def test_the_scan_sees_a_flag_in_a_message(tmp_path):
    """The scan is live: a planted message naming a flag is found (and a docstring naming one is not)."""
    pkg = tmp_path / "robustbench_dgsa" / "engine"
    pkg.mkdir(parents=True)
    (tmp_path / "corruptions").mkdir()
    (pkg / "x.py").write_text('"""Uses --resume."""\ndef f():\n    raise ValueError("pass --resume to go on")\n')
    assert flag_strings(tmp_path) == ["robustbench_dgsa/engine/x.py:3: --resume in 'pass --resume to go on'"]


def test_library_messages_name_no_flags():
    found = flag_strings()
    assert not found, "library strings naming CLI flags (say name=value and set options=; the CLI maps it):\n" + \
        "\n".join(found)


def test_allowlist_is_still_needed():
    """Every allowed (module, flag) pair still occurs, so the list does not outlive its reason."""
    for rel, flag in ALLOWED:
        assert flag in (REPO / rel).read_text(encoding="utf-8"), (rel, flag)


@pytest.mark.parametrize("message, options, expected", [
    ("x already holds a training run; pass resume=True to continue it", ("resume",),
     "x already holds a training run; pass --resume to continue it"),
    ("name it with dataset=cifar10|cifar100", ("dataset",), "name it with --dataset cifar10|cifar100"),
    ("try a lower learning rate (train.lr) or gradient clipping (train.grad_clip=1)", ("train.lr", "train.grad_clip"),
     "try a lower learning rate (--lr) or gradient clipping (--set train.grad_clip=1)"),
    ("choose one with store_dataset=NAME", ("store_dataset",), "choose one with --store-dataset NAME"),
    ("use device=cpu", ("device",), "use --device cpu"),
    ("pass resume=True; seed=3 is the run's", ("resume",), "pass --resume; seed=3 is the run's"),  # only options
    ("max_resume=True stays", ("resume",), "max_resume=True stays"),  # whole names only
])
def test_spell_flags(message, options, expected):
    from robustbench_dgsa.cli.options import spell_flags
    assert spell_flags(message, options) == expected


def test_options_survive_pickling():
    """Errors cross process boundaries (parallel jobs): the names of the options go with them."""
    import pickle

    from robustbench_dgsa.util.errors import DataError
    e = pickle.loads(pickle.dumps(DataError("pass download=True", options="download")))
    assert e.options == ("download",) and str(e) == "pass download=True"


# ----------------------------------------------------------------------------- the flag reaches the CLI user

def _one_error_line(code: int, err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def _snapshot(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_corrupt_into_existing_output_names_overwrite(tmp_path, run_main):
    """The library's OutputExistsError says overwrite=True; the CLI user reads --overwrite."""
    from corruptions import layout
    from corruptions.errors import OutputExistsError

    x = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    layout.regenerate(x, None, out, "contrast", "1")
    with pytest.raises(OutputExistsError, match="pass overwrite=True") as info:
        layout.regenerate(x, None, out, "contrast", "1", seed=3)
    assert "--" not in str(info.value)
    before = _snapshot(tmp_path)
    code, _, err = run_main(["corrupt", "-i", str(tmp_path / "x.npy"), "-o", str(out), "--corruption", "contrast",
                             "-s", "1", "--seed", "3", "-q"], tmp_path)
    assert "pass --overwrite to replace it" in _one_error_line(code, err)
    assert _snapshot(tmp_path) == before


def test_missing_dataset_names_download(tmp_path, run_main):
    """The library's DataError says download=True; the CLI user reads --download (and nothing is written)."""
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.util.errors import DataError

    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(DataError, match="pass download=True") as info:
        load_dataset("cifar10", "test", data_root=root)
    assert "--" not in str(info.value) and info.value.options == ("download",)
    before = _snapshot(tmp_path)
    code, _, err = run_main(["train", "--model", "vit", "--dataset", "cifar10", "--data-root", str(root),
                             "--preset", "tiny", "--out", str(tmp_path / "run")], tmp_path)
    line = _one_error_line(code, err)
    assert "pass --download to fetch them" in line and "download=True" not in line
    assert _snapshot(tmp_path) == before
