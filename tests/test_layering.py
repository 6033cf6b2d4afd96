"""The house's import rules (ARCHITECTURE.md): data flows one way, nothing imports the CLI, and the
standalone ``corruptions`` library imports nothing of the suite.

The check reads the source with ``ast`` (no imports run), so it sees lazy imports inside functions too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "robustbench_dgsa"

# Lower rank = lower layer. A module may import its own layer and any lower one, never a higher one.
RANK = {
    "util": 0,
    "config": 1, "store": 1,
    "data": 2, "models": 2,
    "engine": 3,
    "rollout": 4, "analysis": 4,
    "report": 5,
    "jobs": 6, "robustbench": 6,   # RobustBench's benchmark(): runs the engine, then (to_disk) the report's export
    "cli": 7,
    "__main__": 8,
}


def _module_parts(path: Path, root: Path = REPO) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, absolute dotted target) for every import in ``path``; ``from a import b`` yields a.b too."""
    parts = _module_parts(path, root)
    is_pkg = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts if is_pkg else parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return found


def _layer(dotted: str) -> str | None:
    bits = dotted.split(".")
    if bits[0] != PACKAGE or len(bits) < 2:
        return None
    return bits[1]


def _python_files(folder: str, root: Path = REPO) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*.py"))


def test_every_layer_has_a_rank():
    layers = {p.relative_to(REPO / PACKAGE).parts[0].removesuffix(".py") for p in _python_files(PACKAGE)}
    layers.discard("__init__")
    assert layers <= set(RANK), f"unranked modules/packages: {sorted(layers - set(RANK))}"


def upward_imports(root: Path = REPO) -> list[str]:
    bad = []
    for path in _python_files(PACKAGE, root):
        parts = _module_parts(path, root)
        if len(parts) < 2:  # the top-level package: the public API may reach every layer (lazily)
            continue
        own = parts[1].removesuffix(".py")
        for line, target in _imports(path, root):
            layer = _layer(target)
            if layer in RANK and own in RANK and RANK[layer] > RANK[own]:
                bad.append(f"{path.relative_to(root)}:{line} ({own}) imports {target} ({layer})")
    return sorted(set(bad))


def test_no_upward_imports():
    bad = upward_imports()
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_nothing_imports_the_cli():
    bad = []
    for path in _python_files(PACKAGE):
        parts = _module_parts(path)
        if len(parts) >= 2 and parts[1] in ("cli", "__main__"):
            continue
        bad += [f"{path.relative_to(REPO)}:{line}" for line, t in _imports(path) if _layer(t) == "cli"]
    assert not bad, "modules importing the CLI: " + ", ".join(bad)


@pytest.mark.parametrize("folder", ["corruptions"])
def test_corruptions_library_is_standalone(folder):
    bad = [f"{p.relative_to(REPO)}:{line} imports {t}" for p in _python_files(folder)
           for line, t in _imports(p) if t == PACKAGE or t.startswith(PACKAGE + ".")]
    assert not bad, "corruptions must not import the suite:\n" + "\n".join(bad)


def test_the_checker_sees_upward_imports(tmp_path):
    """The checker itself can fail: planted upward imports (absolute, relative, lazy) are all reported."""
    util = tmp_path / PACKAGE / "util"
    util.mkdir(parents=True)
    (util / "probe.py").write_text("def f():\n    from robustbench_dgsa.report import build\n", encoding="utf-8")
    (util / "probe2.py").write_text("from ..engine import predict\n", encoding="utf-8")
    (util / "fine.py").write_text("from . import probe\nfrom robustbench_dgsa.util import probe2\n", encoding="utf-8")
    bad = upward_imports(tmp_path)
    assert sorted({b.split(":")[0] for b in bad}) == [f"{PACKAGE}/util/probe.py", f"{PACKAGE}/util/probe2.py"]
