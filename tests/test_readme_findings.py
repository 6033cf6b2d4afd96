"""README's "What we found" quotes the evidence report's Findings: its table is cut from
results/evidence-v2/findings_claims.md (the claims of the paper; columns as :data:`README_COLUMNS`), and every
number its prose uses appears in the report's Findings section (hand-written words, computed numbers)."""
from __future__ import annotations

import re
from pathlib import Path

from robustbench_dgsa.report.findings import README_COLUMNS, cut_columns

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "results" / "evidence-v2"
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?")


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## What we found", 1)[1].split("\n## ", 1)[0]


def _findings_text() -> str:
    index = (EVIDENCE / "index.md").read_text(encoding="utf-8")
    return index.split("## Findings", 1)[1].split("\n## ", 1)[0]


def _numbers(text: str) -> set[str]:
    return {n.replace("−", "-").lstrip("+").rstrip(",") for n in NUMBER.findall(text)}


def test_readme_table_is_cut_from_the_findings():
    table = "\n".join(ln for ln in _section().splitlines() if ln.startswith("|"))
    assert table == cut_columns((EVIDENCE / "findings_claims.md").read_text(encoding="utf-8"), README_COLUMNS)


def test_every_number_in_the_readme_prose_appears_in_the_findings():
    prose = "\n".join(ln for ln in _section().splitlines() if not ln.startswith("|"))
    prose = re.sub(r"\([^()]*\.md\)|`[^`]*`", "", prose)          # link targets and code are not numbers
    missing = sorted(_numbers(prose) - _numbers(_findings_text()))
    assert not missing, missing
