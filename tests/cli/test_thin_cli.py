"""The command line is thin and speaks to users (issue 21): every command's --help is free of the suite's
internals (no "SPEC", no module paths, no ``<bool>`` on flags), and every command module stays small, because
its work lives in one library entry point (options -> one library call -> render)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from robustbench_dgsa.cli import app

CLI_DIR = Path(__file__).resolve().parents[2] / "robustbench_dgsa" / "cli"

#: the most lines a command module (cli/*_cmd.py) may have: Typer signatures, option checks and rendering fit;
#: library logic does not (on main at ef4eb9c corrupt_cmd.py had 462 lines, train_cmd.py 407, rollout_cmd.py 253,
#: compare_cmd.py 223)
LINE_BUDGET = 220


def _command_paths() -> list[list[str]]:
    """Every command and subcommand, as the words after ``dgsa-bench`` (the root as [])."""
    found: list[list[str]] = []

    def walk(cmd, prefix: list[str]) -> None:
        found.append(prefix)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*prefix, name])
    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _command_paths()


def test_every_command_is_found():
    names = {" ".join(p) for p in COMMANDS}
    assert {"", "models", "corrupt", "corrupt-text", "train", "evaluate", "rollout", "compare", "report",
            "reproduce", "export", "sweep", "sweep plan", "sweep run", "sweep run-one", "sweep status",
            "sweep slurm"} <= names, names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "dgsa-bench")
def test_help_speaks_to_users(path):
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "240"})
    assert res.exit_code == 0, res.output
    text = res.output
    assert "Usage:" in text
    assert "<bool>" not in text, "a flag shows a value type"
    assert "SPEC" not in text, "the help cites a document that is not in the repository"
    assert "robustbench_dgsa." not in text, "the help names a module path"


def test_flags_are_plain_and_values_keep_their_type():
    text = CliRunner().invoke(app, ["reproduce", "--help"], env={"COLUMNS": "240"}).output
    assert re.search(r"--quick\s+Smallest", text), text  # the flag, then straight its help
    assert re.search(r"--out\s+-o\s+<path>", text), text
    text = CliRunner().invoke(app, ["corrupt", "--help"], env={"COLUMNS": "240"}).output
    assert re.search(r"--chunk-size\s+<int", text), text


@pytest.mark.parametrize("module", sorted(CLI_DIR.glob("*_cmd.py")), ids=lambda p: p.name)
def test_command_modules_are_thin(module):
    n = len(module.read_text(encoding="utf-8").splitlines())
    assert n <= LINE_BUDGET, f"{module.name}: {n} lines > {LINE_BUDGET}; move its library logic out of the CLI"


def test_one_module_per_command():
    """train, evaluate and the sweep group each have their own module."""
    names = {p.name for p in CLI_DIR.glob("*_cmd.py")}
    assert {"train_cmd.py", "evaluate_cmd.py", "sweep_cmd.py"} <= names, names
