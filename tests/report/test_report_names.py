"""What a reader of a report sees: no internal document names ("SPEC §7"), no provenance line of nothing for the
tables typed in from the paper (where the numbers come from instead), and a main-job time line that counts its
rollouts."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from robustbench_dgsa.report.build import build_report

sys.path.insert(0, str(Path(__file__).parent))
from test_report import make_store  # noqa: E402  (the report tests' store builder)

EMPTY_SHA = "e3b0c44298fc"   # sha256 of nothing


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("names")
    store_dir = make_store(root / "store", seeds=(0, 1, 2), epochs=2)
    return Path(build_report(store_dir, root / "report"))


def _rendered(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())
            if p.suffix in (".md", ".html", ".tex", ".json")}


def test_no_rendered_report_names_the_internal_spec(report):
    files = _rendered(report)
    assert any(n.startswith("paper_table9") for n in files) and "index.md" in files   # the tables that said it
    hits = [n for n, text in files.items() if "SPEC" in text]
    assert hits == []


def test_typed_in_tables_say_where_their_numbers_come_from(report):
    index = (report / "index.md").read_text(encoding="utf-8")
    assert "Made from 0 rows" not in index and EMPTY_SHA not in index
    assert "Made from the paper's printed numbers, typed in from its text" in index
    assert "Made from 0 rows" not in (report / "index.html").read_text(encoding="utf-8")


def test_published_values_name_no_internal_document():
    from robustbench_dgsa.report.published import PUBLISHED_CSV
    assert "SPEC" not in PUBLISHED_CSV.read_text(encoding="utf-8")


def test_time_line_counts_the_rollouts():
    from robustbench_dgsa.cli.report_cmd import _time_line
    t = {"phases": {"corrupt": 9.0, "train_evaluate": 300.0, "rollout": 21.5, "bench": 20.0, "report": 50.0,
                    "total": 370.0}, "phase_order": ["corrupt", "train_evaluate", "rollout", "bench", "report"],
         "within": {"corrupt": "train_evaluate", "rollout": "train_evaluate"}, "rollouts": 6}
    assert "rollout 21.5s for 6 rollout set(s) within train_evaluate" in _time_line(t)
