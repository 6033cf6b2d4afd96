"""User-facing text cites the project's own methods page (docs/METHODS.md), not a specification outside the
repository, and every cited section exists."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
METHODS = REPO / "docs" / "METHODS.md"
SPEC_CITATION = re.compile(r"SPEC(?:\.md)?\s*(?:§|section\s*)?\d")
# "docs/METHODS.md, Models" or "docs/METHODS.md, Models (Attention)": the section is the words after the comma
METHODS_CITATION = re.compile(r"docs/METHODS\.md, ([A-Z][a-z]+(?:\s+[a-z]+)?)")
# The command-line help and the report are rewritten elsewhere; their citations are checked once they move.
NOT_YET = ("robustbench_dgsa/cli/", "robustbench_dgsa/report/")


def _sources() -> list[Path]:
    pkg = REPO / "robustbench_dgsa"
    files = [REPO / "README.md", *sorted(pkg.rglob("*.py")), *sorted((pkg / "presets").glob("*.toml")),
             *sorted((REPO / "corruptions").rglob("*.py"))]
    return [p for p in files if not p.relative_to(REPO).as_posix().startswith(NOT_YET)]


def test_no_citation_of_the_spec():
    found = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p in _sources()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if SPEC_CITATION.search(line)]
    assert not found, "cite docs/METHODS.md (SPEC is not in the repository):\n" + "\n".join(found)


def test_cited_sections_exist():
    headings = {m.group(1).strip() for m in re.finditer(r"^## (.+)$", METHODS.read_text(encoding="utf-8"), re.M)}
    cited = {(p.relative_to(REPO).as_posix(), m.group(1)) for p in _sources()
             for m in METHODS_CITATION.finditer(p.read_text(encoding="utf-8"))}
    assert cited, "the scan finds the citations"
    text = {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8") for p in _sources()}
    missing = [(path, section) for path, section in cited if section not in headings
               and not any(h.startswith(section) for h in headings)]
    assert not missing, f"sections not in docs/METHODS.md ({sorted(headings)}): {missing}"
    assert "docs/METHODS.md" in text["README.md"]
