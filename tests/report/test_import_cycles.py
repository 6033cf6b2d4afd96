"""No import circle inside the report package, type-only imports (``if TYPE_CHECKING:``) included: `Report` lives
in :mod:`robustbench_dgsa.report.document`, which imports neither labels nor caveats (they import it)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "robustbench_dgsa" / "report"


def _graph() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for py in PKG.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("robustbench_dgsa.report."):
                deps.add(node.module.rsplit(".", 1)[1])
            elif isinstance(node, ast.ImportFrom) and node.module == "robustbench_dgsa.report":
                deps |= {a.name for a in node.names}
        out[py.stem] = deps
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_report_package_has_no_import_circle_type_only_included():
    g = _graph()
    assert "Report" in (PKG / "document.py").read_text() and not (PKG / "artefacts.py").exists()
    assert _cycle(g) is None, " -> ".join(_cycle(g))


def test_the_cycle_finder_sees_a_circle():
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
