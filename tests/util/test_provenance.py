"""Provenance: the version from the distribution metadata; the commit only from the package's own checkout."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import robustbench_dgsa
from robustbench_dgsa.util import provenance

PKG = Path(robustbench_dgsa.__file__).resolve().parent


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def _state_when_imported_from(site: Path) -> str:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from robustbench_dgsa.util import provenance as p; "
            "assert p.__file__.startswith(sys.argv[1]), p.__file__; print(p.git_state()[0])")
    return subprocess.run([sys.executable, "-c", code, str(site)], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not on PATH")
def test_an_installed_copy_inside_another_git_project_records_no_commit(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q")
    (other / "README").write_text("someone else's project\n")
    _git(other, "add", "README")
    _git(other, "commit", "-qm", "x")
    their_commit = _git(other, "rev-parse", "HEAD")
    # 1. a site folder inside their work tree; 2. the package directly at their top level (no pyproject of ours)
    for site in (other / "venv" / "site-packages", other):
        site.mkdir(parents=True, exist_ok=True)
        shutil.copytree(PKG, site / "robustbench_dgsa", ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
        assert _state_when_imported_from(site) == "unknown" != their_commit


def test_version_comes_from_the_distribution_metadata():
    from importlib import metadata
    assert provenance.package_version() == metadata.version("robustbench-dgsa")
    assert provenance.collect()["package_version"] == provenance.package_version()
