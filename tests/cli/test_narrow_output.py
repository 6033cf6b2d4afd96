"""What fits a newcomer's terminal: ``compare`` tables within 100 columns unless --wide, and ``--help`` whose
command list reflows each description (no ragged line breaks carried over from the docstrings)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robustbench_dgsa.cli import app

sys.path.insert(0, str(Path(__file__).parent))
from test_compare_cli import _make_store  # noqa: E402  (the compare tests' store)

runner = CliRunner()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return _make_store(tmp_path_factory.mktemp("narrow") / "store", seeds=5)


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_compare_fits_100_columns_by_default_and_wide_shows_every_column(small_store):
    args = ["compare", "--store", str(small_store), "--condition", "clean,gaussian_noise,fog:3"]
    narrow = runner.invoke(app, args)
    assert narrow.exit_code == 0, narrow.output
    assert _widest(narrow.stdout) <= 100
    for title in ("Seed summary", "Pairwise differences", "Friedman test", "Average ranks"):
        assert title in narrow.stdout
    assert "dataset=cifar10" in narrow.stdout                     # the constant column, named in the title
    wide = runner.invoke(app, [*args, "--wide"])
    assert wide.exit_code == 0, wide.output
    assert _widest(wide.stdout) > 100 and "│ cifar10 │" in wide.stdout


@pytest.mark.parametrize("argv", [[], ["sweep"]], ids=["top", "sweep"])
def test_help_command_list_has_no_ragged_breaks(argv):
    """Every line of a command's description in the list is filled: the next line's first word would not fit."""
    res = runner.invoke(app, [*argv, "--help"], env={"COLUMNS": "80", "TERM": "dumb"}, terminal_width=80)
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if "Commands" in ln)
    box = [ln for ln in lines[start + 1:] if ln.startswith("│")]
    entries: list[list[str]] = []
    width = 0
    for raw in box:
        inner = raw[1:-1]
        m = re.match(r"^ (\S+)(\s+)(.*?)\s*$", inner)
        if m:
            entries.append([m.group(3)])
            col = len(m.group(1)) + len(m.group(2)) + 1
            width = len(inner) - col - 1
        else:
            entries[-1].append(inner.strip())
    assert box and entries
    for entry in entries:
        for a, b in zip(entry, entry[1:]):
            assert len(a) + 1 + len(b.split()[0]) > width, (a, b)
