"""Functions are read at once (ARCHITECTURE.md): none over 80 lines unless a ``# long:`` comment on its first
lines says why. The check reads the source with ``ast``; nothing is imported."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 80
REASON = "# long:"
HEAD_LINES = 4          # the reason goes on the def line or within the next few lines

# Long functions in files other people are changing now (issue 9): they keep their length until those
# changes land; each entry names one function. Remove an entry when the function is split or has a reason.
ALLOWED: set[str] = set()


def long_functions(root: Path = REPO) -> list[str]:
    """``path::name (N lines)`` for every function over :data:`MAX_LINES` lines without a reason comment."""
    found = []
    for folder in ("robustbench_dgsa", "corruptions"):
        for path in sorted((root / folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            for node in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                n = node.end_lineno - node.lineno + 1     # from the def line (decorators not counted)
                head = lines[node.lineno - 1: node.lineno - 1 + HEAD_LINES]
                if n > MAX_LINES and not any(REASON in line for line in head):
                    found.append(f"{path.relative_to(root).as_posix()}::{node.name} ({n} lines)")
    return found


def test_no_long_function_without_a_reason():
    bad = [f for f in long_functions() if f.split(" (")[0] not in ALLOWED]
    assert not bad, f"functions over {MAX_LINES} lines without a '{REASON} <reason>' comment: {bad}"


def test_allow_list_is_current():
    """An entry whose function was split (or deleted) leaves the list, so the list cannot hide new ones."""
    still_long = {f.split(" (")[0] for f in long_functions()}
    assert ALLOWED <= still_long, f"no longer long, remove from ALLOWED: {sorted(ALLOWED - still_long)}"


def test_the_check_sees_a_long_function(tmp_path):
    pkg = tmp_path / "robustbench_dgsa"
    pkg.mkdir()
    (tmp_path / "corruptions").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (pkg / "m.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    {REASON} a table\n{body}\n")
    assert long_functions(tmp_path) == [f"robustbench_dgsa/m.py::f ({MAX_LINES + 1} lines)"]
