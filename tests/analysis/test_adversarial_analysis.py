"""Adversarial robustness statistics and report section (issue 36), from synthetic store rows (no attack run)."""
from __future__ import annotations

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.analysis import adversarial as A

LADDER = [(0.0, "none"), (0.5 / 255, "apgd-ce+apgd-t"), (1 / 255, "apgd-ce+apgd-t"), (8 / 255, "autoattack")]


def _populate(sd, gain=0.05, seeds=(0, 1, 2, 3, 4)):
    rng = np.random.default_rng(0)
    for model, base in (("vit", 0.50), ("dvit", 0.51), ("dgvit", 0.51 + gain)):
        for seed in seeds:
            w = store.RunWriter(sd, store.new_run_id("adv"), dict(kind="adversarial", model=model,
                                                                  dataset="cifar10", split="test", seed=seed))
            shift = float(rng.normal(0, 0.005))
            w.add_rows([dict(condition="linf", severity=0, metric="accuracy", n=100, eps=e, attack=a,
                             value=max(0.0, base + shift - 60 * e)) for e, a in LADDER]
                       + [dict(condition="linf", severity=0, metric="median_min_norm", n=100, attack="fab",
                               value=0.004 + shift / 10)])


def test_accuracy_vs_eps_and_paired_tests_find_a_real_gap(tmp_path):
    _populate(tmp_path, gain=0.05)
    df = store.load_results(tmp_path)
    acc = A.accuracy_vs_eps(df)
    one = acc[(acc["model"] == "dgvit") & (np.isclose(acc["eps"], 1 / 255))].iloc[0]
    assert one["n_seeds"] == 5 and one["ci_lo"] < one["mean"] < one["ci_hi"]
    tests = A.paired_tests(df)
    assert set(tests["baseline"]) == {"vit", "dvit"} and (tests["diff"] > 0.03).all()
    assert (tests["verdict"] == "significant").all() and not tests["paper_claims"].any()
    assert A.claim_verdict(tests).startswith("supported")


def test_no_gap_is_not_supported_and_two_seeds_not_testable(tmp_path):
    _populate(tmp_path / "a", gain=0.0)
    assert A.claim_verdict(A.paired_tests(store.load_results(tmp_path / "a"))).startswith("not supported")
    _populate(tmp_path / "b", gain=0.05, seeds=(0, 1))
    assert A.claim_verdict(A.paired_tests(store.load_results(tmp_path / "b"))).startswith("not testable")


@pytest.mark.slow
def test_report_gets_the_section_only_with_adversarial_rows(tmp_path):
    pytest.importorskip("matplotlib")
    from robustbench_dgsa.report.build import build_report
    _populate(tmp_path / "store", gain=0.05, seeds=(0, 1, 2))
    out = build_report(tmp_path / "store", tmp_path / "rep")
    index = (out / "index.md").read_text()
    assert "Adversarial robustness" in index and "APGD-CE" in index
    assert (out / "adversarial_cifar10_linf.png").is_file() and (out / "adversarial_tests.md").is_file()
    assert "is more robust to small Linf" in (out / "adversarial_tests.md").read_text()
