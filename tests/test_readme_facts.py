"""README statements that can be checked: the test-suite size it states, the DDP tolerances it quotes (the DDP
test's own constants) and the CPU-only install line (PyTorch's CPU index, torch within the package's bounds)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def _stated_test_count() -> int:
    m = re.search(r"runs everything: more than ([\d,]+) tests, (\d+)–(\d+) minutes on 2 cores", README)
    assert m, "README's Tests section states the suite's size as 'more than N tests, A–B minutes on 2 cores'"
    return int(m.group(1).replace(",", ""))


def _whole_suite(config) -> bool:
    args = [Path(a).resolve() for a in config.args if not a.startswith("-")]
    chosen = not args or args == [REPO] or args == [REPO / "tests"]
    return chosen and not config.option.keyword and not config.option.markexpr and not config.option.deselect


def test_readme_test_count_is_true_for_the_whole_suite(request):
    """Checked when the whole suite is collected (a subset says nothing about the total): more than the stated
    N and under 2 N (beyond that "more than N" is no longer a fair summary: update the README)."""
    n_stated = _stated_test_count()
    if not _whole_suite(request.config):
        pytest.skip("only a part of the suite was collected")
    n = len(request.session.items)
    assert n_stated < n < 2 * n_stated, (n, n_stated)


def test_readme_ddp_tolerances_are_the_tests():
    text = (REPO / "tests" / "engine" / "test_ddp.py").read_text(encoding="utf-8")
    rtol = re.search(r"^RTOL = (\S+)", text, re.M).group(1)
    key = re.search(r"^KEY_BIAS_ATOL = (\S+)", text, re.M).group(1)
    ddp = " ".join(README[README.index("summation order (tested to"):][:1400].split())
    assert f"tested to {rtol} on 2 gloo processes" in ddp
    assert f"the test allows {key}" in ddp
    assert "no gradient through softmax" in ddp and "Table 9" in ddp


def test_readme_cpu_install_line_uses_pytorchs_cpu_index():
    line = next(ln for ln in README.splitlines() if "download.pytorch.org/whl/cpu" in ln)
    assert line == "python -m pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'"torch>=2\.2"', pyproject)                       # what "any torch ≥ 2.2 works" rests on
    assert "any torch ≥ 2.2 works" in README
