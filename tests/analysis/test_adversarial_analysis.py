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


def _verdicts(sd):
    from robustbench_dgsa.analysis import claims, verdicts
    return verdicts.compute_verdicts(store.load_results(sd), claims.claims_for_store(sd), store_dir=sd)


def _direct_diff(df, base, eps=1 / 255):
    """DGViT minus ``base`` at eps (points), mean over seeds: computed here from the rows, independently."""
    r = df[(df["kind"] == "adversarial") & (df["metric"] == "accuracy") & ((df["eps"] - eps).abs() < 1e-12)]
    a = r[r["model"] == "dgvit"].set_index("seed")["value"]
    b = r[r["model"] == base].set_index("seed")["value"]
    return float((a - b).mean() * 100)


def test_accuracy_vs_eps_and_the_registered_adversarial_claims_find_a_real_gap(tmp_path):
    _populate(tmp_path, gain=0.05)
    df = store.load_results(tmp_path)
    acc = A.accuracy_vs_eps(df)
    one = acc[(acc["model"] == "dgvit") & (np.isclose(acc["eps"], 1 / 255))].iloc[0]
    assert one["n_seeds"] == 5 and one["ci_lo"] < one["mean"] < one["ci_hi"]
    v = _verdicts(tmp_path)
    t = v.table.set_index("id")
    assert set(t.index) == {"cifar10:linf-1/255:vit", "cifar10:linf-1/255:dvit"}
    for base in ("vit", "dvit"):
        r = t.loc[f"cifar10:linf-1/255:{base}"]
        assert r["n"] == 5 and r["family_size"] == 2 and not r["claimed"] and r["test"] == "paired t"
        assert abs(r["diff"] - _direct_diff(df, base)) < 1e-9 and r["verdict"] == "supported"
    assert "cifar10 (adversarial claims)" in v.bootstrap_note    # attacked images are not resampled


def test_no_gap_is_inconclusive_two_seeds_not_testable_and_another_attack_is_not_the_claims(tmp_path):
    _populate(tmp_path / "a", gain=0.0)
    assert set(_verdicts(tmp_path / "a").table["verdict"]) == {"inconclusive at this scale"}
    _populate(tmp_path / "b", gain=0.05, seeds=(0, 1))
    assert set(_verdicts(tmp_path / "b").table["verdict"]) == {"not testable (n < 3)"}
    global LADDER
    saved, LADDER = LADDER, [(0.0, "none"), (1 / 255, "apgd-ce")]    # APGD-CE alone: not the claim's attack
    try:
        _populate(tmp_path / "c", gain=0.05)
    finally:
        LADDER = saved
    v = _verdicts(tmp_path / "c")
    assert v.table.empty
    assert any("no apgd-ce+apgd-t rows at linf eps 0.00392157" in why for _, why in v.untested)


def test_a_users_threat_model_claim_from_claims_toml(tmp_path):
    _populate(tmp_path, gain=0.05)
    (tmp_path / "claims.toml").write_text(
        '[[claim]]\nid = "mine:linf-half"\ndataset = "cifar10"\nmodel = "dgvit"\nbaseline = "vit"\n'
        'statistic = "retention"\nconditions = ["linf"]\nseverities = [0]\neps = 0.00196078431372549\n'
        'attack = "apgd-ce+apgd-t"\n')
    r = _verdicts(tmp_path).table.set_index("id").loc["mine:linf-half"]
    assert r["n"] == 5 and r["family"] == "cifar10 · user claims" and np.isfinite(r["p"])
    from robustbench_dgsa.analysis import claims
    from robustbench_dgsa.util.errors import UserError
    with pytest.raises(UserError, match="conditions are threat models"):
        claims.register(claims.Claim("bad", "", claims.NOT_CLAIMED, "cifar10", "dgvit", "vit", "mean",
                                     ("linf",), (1,), eps=0.01, attack="apgd-ce"), claims.Registry())
    with pytest.raises(UserError, match="names the attack"):
        claims.register(claims.Claim("bad", "", claims.NOT_CLAIMED, "cifar10", "dgvit", "vit", "mean",
                                     ("linf",), (0,), eps=0.01), claims.Registry())


@pytest.mark.slow
def test_report_gets_the_section_only_with_adversarial_rows(tmp_path):
    pytest.importorskip("matplotlib")
    from robustbench_dgsa.report.build import build_report
    _populate(tmp_path / "store", gain=0.05, seeds=(0, 1, 2))
    out = build_report(tmp_path / "store", tmp_path / "rep")
    index = (out / "index.md").read_text()
    assert "Adversarial robustness" in index and "APGD-CE" in index
    assert (out / "adversarial_cifar10_linf.png").is_file()
    findings = (out / "findings_claims.md").read_text()
    assert "robust accuracy, Linf 1/255" in findings and "cifar10:linf-1/255:vit" in (
        out / "findings_registry.md").read_text()
