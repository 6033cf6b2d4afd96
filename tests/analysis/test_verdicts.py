"""One verdict per registered claim: the claims' statistics against hand calculations, the verdict rule (Holm p
AND ≥ 80 % of seeds), the small-n numbers beside it (sign count, exact sign-flip p, MDD at the Holm α, two-level
bootstrap CI), user claims from ``<store>/claims.toml``, and the Findings' place in the report.

Stores are written with :class:`store.RunWriter` as the evaluation code writes them. Every corrupted cell of a
run is ``clean − 0.05·severity − drop``, so mCA = clean − 0.15 − drop exactly.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as sps

from robustbench_dgsa import store
from robustbench_dgsa.analysis import claims as C
from robustbench_dgsa.analysis import metrics as M
from robustbench_dgsa.analysis import small_n as S
from robustbench_dgsa.analysis import verdicts as V
from robustbench_dgsa.config import resolve_config
from robustbench_dgsa.models import get_model_config
from robustbench_dgsa.report.build import build_report
from robustbench_dgsa.util.errors import UserError

NOISE = np.array([0.004, -0.003, 0.002, -0.001, 0.0005])       # per-seed jitter, SD ~0.0028
PAPER = Path(__file__).resolve().parents[3] / "shared" / "papers" / "dgsa-paper.txt"


def write_model(store_dir: Path, ds: str, model: str, clean: list[float], conditions: list[str],
                drop: float = 0.0, provenance: bool = False) -> None:
    """One evaluation run per seed (seed i gets ``clean[i]``) with every condition × severity 1..5."""
    cfg = resolve_config(get_model_config(model), ds, "tiny") if provenance else None
    for seed, c in enumerate(clean):
        base = dict(model=model, dataset=ds, seed=seed, kind="eval", split="test", n=1000,
                    config_hash=cfg.hash() if cfg else "")
        w = store.RunWriter(store_dir, f"eval-{ds}-{model}-{seed}", base)
        if cfg:
            w.write_provenance({"kind": "eval", "config": cfg.to_dict(), "config_hash": cfg.hash(), "seed": seed})
        w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=c, source="official")]
                   + [dict(condition=k, severity=s, metric="accuracy", value=c - .05 * s - drop, source="regenerated")
                      for k in conditions for s in M.SEVERITIES])


def image_store(store_dir: Path, dg_offset: float, seeds: int = 5, ds: str = "cifar10", provenance: bool = False,
                dvit: bool = True) -> Path:
    """ViT at 0.70 + jitter; DGViT = ViT + ``dg_offset`` + the jitter reversed, its corrupted cells a further
    ``dg_offset / 2`` up; DViT = ViT + 0.01."""
    vit = 0.70 + NOISE[:seeds]
    write_model(store_dir, ds, "vit", list(vit), list(M.BENCHMARK_CORRUPTIONS), provenance=provenance)
    if dvit:
        write_model(store_dir, ds, "dvit", list(vit + 0.01), list(M.BENCHMARK_CORRUPTIONS), provenance=provenance)
    write_model(store_dir, ds, "dgvit", list(vit + dg_offset + NOISE[::-1][:seeds]), list(M.BENCHMARK_CORRUPTIONS),
                drop=-dg_offset / 2, provenance=provenance)
    return store_dir


def _verdicts(store_dir: Path, registry: C.Registry | None = None) -> V.Verdicts:
    return V.compute_verdicts(store.load_results(store_dir), registry or C.claims_for_store(store_dir),
                              store_dir=store_dir, resamples=200)


def _row(t: pd.DataFrame, cid: str) -> pd.Series:
    r = t[t["id"] == cid]
    assert len(r) == 1, (cid, list(t["id"]))
    return r.iloc[0]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """CIFAR-10 with a large DGViT gain (5 seeds, run configs) and the same on synthetic-vision, and its report."""
    root = tmp_path_factory.mktemp("verdicts")
    s = image_store(root / "store", dg_offset=0.05, provenance=True)
    image_store(s, dg_offset=0.05, ds="synthetic-vision")
    return s, build_report(s, root / "report")


# ------------------------------------------------------------------------------------------ verdicts
def test_large_gain_is_supported_with_the_small_n_numbers_beside_it(report):
    v = _verdicts(report[0])
    t = v.table
    r = _row(t, "cifar10:clean:vit")
    assert r["verdict"] == V.SUPPORTED and r["test"] == "paired t" and r["n"] == 5
    assert r["diff"] == pytest.approx(100 * (0.05 + NOISE.mean()), abs=1e-9)          # points
    assert _row(t, "cifar10:mCA:vit")["diff"] == pytest.approx(r["diff"] + 2.5, abs=1e-9)
    # the primary family: clean and mCA × (DGViT − ViT, DGViT − DViT)
    assert r["family"] == "cifar10 · primary" and r["family_size"] == 4
    assert r["k"] == 5 and r["sign_p"] == pytest.approx(2 / 32) and r["sign_p_min"] == pytest.approx(2 / 32)
    # the α the verdict used is Holm's for its rank; the MDD is at that α
    fam = t[t["family"] == "cifar10 · primary"]
    ranks = fam["p"].rank(method="first").astype(int)
    assert r["alpha_used"] == pytest.approx(0.05 / (4 - int(ranks[r.name]) + 1))
    assert r["mdd"] == pytest.approx(S.detectable_effect(5, r["alpha_used"]) * r["sd"], rel=1e-9)
    # no predictions in this store: no two-level CI, and the note says so
    assert math.isnan(r["boot_lo"]) and "cifar10" in v.bootstrap_note
    # one claim, one verdict: every id once
    assert t["id"].is_unique


def test_large_loss_is_contradicted(tmp_path):
    t = _verdicts(image_store(tmp_path / "s", dg_offset=-0.05, dvit=False)).table
    for cid in ("cifar10:clean:vit", "cifar10:mCA:vit"):
        assert _row(t, cid)["verdict"] == V.CONTRADICTED and _row(t, cid)["k"] == 0


def _power_by_hand(d: float, n: int, alpha: float) -> float:
    df, tc = n - 1, sps.t.ppf(1 - alpha / 2, n - 1)
    nc = d * math.sqrt(n)
    return float(sps.nct.sf(tc, df, nc) + sps.nct.cdf(-tc, df, nc))


def test_tiny_noisy_difference_is_inconclusive_with_the_hand_mdd_at_the_holm_alpha(tmp_path):
    r = _row(_verdicts(image_store(tmp_path / "s", dg_offset=0.0003, dvit=False)).table, "cifar10:clean:vit")
    assert r["verdict"] == V.INCONCLUSIVE and r["reason"].startswith("Holm p")
    diffs = 100 * (NOISE[::-1] + 0.0003)
    sd = float(np.std(diffs, ddof=1))
    assert r["sd"] == pytest.approx(sd, abs=1e-12)
    a = r["alpha_used"]
    d_star = optimize.brentq(lambda d: _power_by_hand(d, 5, a) - 0.8, 0.1, 4.0, xtol=1e-14)
    assert abs(r["mdd"] - d_star * sd) < 1e-6
    effect = abs(diffs.mean()) / sd
    need = int(r["seeds_needed"])
    assert _power_by_hand(effect, need, a) >= 0.8 > _power_by_hand(effect, need - 1, a)


def test_significant_but_too_few_seeds_in_the_direction_is_inconclusive_and_says_why():
    claim = C.Claim("x", "", "Table 1", "cifar10", "dgvit", "vit", "mean")
    rec = {"n": 5, "k": 3, "diff": 1.0}
    v, why = V.verdict(claim, rec, p_holm=0.01, alpha=0.05, synthetic=False)
    assert v == V.INCONCLUSIVE and "3 of 5" in why and "needs 4" in why
    assert V.verdict(claim, {**rec, "k": 4}, 0.01, 0.05, False) == (V.SUPPORTED, "")
    assert V.verdict(claim, {**rec, "k": 4}, 0.06, 0.05, False)[0] == V.INCONCLUSIVE
    assert V.verdict(claim, {**rec, "n": 2}, 0.01, 0.05, False)[0] == V.NOT_TESTABLE
    assert V.verdict(claim, rec, 0.01, 0.05, True)[0] == V.NO_CLAIM


def test_campaign_wide_family_marks_the_verdicts_it_changes(report):
    t = _verdicts(report[0]).table
    real = t[~t["synthetic"].astype(bool)]
    assert (real["p_holm_campaign"] >= real["p_holm"] - 1e-12).all()
    changed = real[real["verdict"] != real["verdict_campaign"]]
    assert (changed["p_holm_campaign"] >= 0.05).all() and (changed["p_holm"] < 0.05).all()


# ------------------------------------------------------------------------------------------ statistics
def test_statistics_match_their_formulas():
    rng = np.random.default_rng(0)
    cells = [("clean", 0)] + [(c, s) for c in M.BENCHMARK_CORRUPTIONS for s in (1, 2)]
    a, b = rng.uniform(20, 80, (3, len(cells))), rng.uniform(20, 80, (3, len(cells)))
    cd = V.Cells("cifar10", cells, {"dgvit": [0, 1, 2], "vit": [0, 1, 2]}, {"dgvit": a, "vit": b})
    base = C.Claim("t", "", "Figure 4a", "cifar10", "dgvit", "vit", "mean", (C.BENCHMARK,), (1, 2))
    grid, conds = V._grid(base, cd)
    gain = np.stack([(a[:, [cd.index(c, 1), cd.index(c, 2)]] - b[:, [cd.index(c, 1), cd.index(c, 2)]]).mean(1)
                     for c in M.BENCHMARK_CORRUPTIONS], 1)
    f = lambda **kw: V.contrast(replace(base, **kw), a, b, grid, conds, 0)  # noqa: E731
    assert np.allclose(f(), gain.mean(1))
    assert np.allclose(f(statistic="kth_smallest_gain", k=3), np.sort(gain, 1)[:, 2])
    named = np.isin(conds, ["fog", "contrast"])
    assert np.allclose(f(statistic="named_minus_median", named=("fog", "contrast")),
                       gain[:, named].mean(1) - np.median(gain[:, ~named], 1))
    assert np.allclose(f(statistic="named_min_minus_max", named=("fog", "contrast")),
                       gain[:, named].min(1) - gain[:, ~named].max(1))
    sel = [i for i, c in enumerate(cells) if c[1] > 0]
    assert np.allclose(f(statistic="retention"),
                       100 * (a[:, sel].mean(1) / a[:, 0] - b[:, sel].mean(1) / b[:, 0]))
    ratio = np.stack([(100 - a[:, [cd.index(c, 1), cd.index(c, 2)]]).sum(1)
                      / (100 - b[:, [cd.index(c, 1), cd.index(c, 2)]]).sum(1) for c in M.BENCHMARK_CORRUPTIONS], 1)
    assert np.allclose(f(statistic="relative_mce"), 100 * (ratio.mean(1) - 1))


def test_exact_sign_flip_p_and_its_minimum():
    x = np.array([0.3, -0.1, 0.5, 0.2, 0.4, -0.05])
    ref = sps.permutation_test((x,), np.mean, permutation_type="samples", n_resamples=np.inf,
                               alternative="two-sided").pvalue
    assert S.sign_flip_p(x) == pytest.approx(ref)
    assert S.sign_flip_p(np.ones(5)) == pytest.approx(2 / 32) == S.min_sign_flip_p(5)
    assert S.min_sign_flip_p(5) > 0.05                      # five seeds can never pass a 0.05 gate


def test_holm_alpha_is_the_threshold_of_each_rank():
    p = [0.04, 0.001, np.nan, 0.02]
    assert np.allclose(S.holm_alpha(p)[[1, 3, 0]], [0.05 / 3, 0.05 / 2, 0.05 / 1])
    assert math.isnan(S.holm_alpha(p)[2])


def test_tost_decides_equivalence_within_the_margin():
    assert S.tost_p([0.1, -0.1, 0.05, 0.0, -0.05], 1.0) < 0.01
    assert S.tost_p([1.5, 1.2, 1.4, 1.1, 1.3], 1.0) > 0.5


def test_two_level_bootstrap_over_seeds_and_examples(tmp_path):
    """Predictions reproduce the stored cells; the CI is fixed by its seed, covers Δ, and is wider than the
    examples alone would allow when seeds vary."""
    s, rng, n = tmp_path / "s", np.random.default_rng(1), 400
    labels = rng.integers(0, 10, n)
    for model, p_ok in (("vit", 0.6), ("dgvit", 0.7)):
        for seed in range(3):
            ok = rng.random(n) < p_ok + 0.02 * seed
            pred = np.where(ok, labels, (labels + 1) % 10)
            w = store.RunWriter(s, f"eval-{model}-{seed}", dict(model=model, dataset="cifar10", seed=seed,
                                                                  kind="eval", split="test", n=n))
            w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=float(ok.mean()),
                             source="official")])
            w.write_predictions("test", pd.DataFrame({"condition": "clean", "severity": 0, "index": np.arange(n),
                                                      "label": labels, "pred": pred}))
    reg = C.Registry()
    reg.register(C.Claim("c", "q", "Table 1", "cifar10", "dgvit", "vit", "mean", family="f"))
    one, two = _verdicts(s, reg), _verdicts(s, reg)
    r = one.table.iloc[0]
    assert one.bootstrap_note == "" and r["boot_lo"] < r["diff"] < r["boot_hi"]
    assert (r["boot_lo"], r["boot_hi"]) == (two.table.iloc[0]["boot_lo"], two.table.iloc[0]["boot_hi"])


# ------------------------------------------------------------------------------------------ registry
def test_user_claims_from_the_store_are_tested_the_same_way(tmp_path):
    s = image_store(tmp_path / "s", dg_offset=0.05, dvit=False)
    (s / C.CLAIMS_FILE).write_text('[[claim]]\nid = "mine"\nquote = "DGViT wins under fog"\ndataset = "cifar10"\n'
                                   'model = "dgvit"\nbaseline = "vit"\nstatistic = "mean"\nconditions = ["fog"]\n'
                                   'severities = [1, 2, 3, 4, 5]\n')
    r = _row(_verdicts(s).table, "mine")
    assert r["source"] == "user claim" and r["family"] == "cifar10 · user claims" and r["verdict"] == V.SUPPORTED
    (s / C.CLAIMS_FILE).write_text('[[claim]]\nid = "cifar10:clean:vit"\ndataset = "cifar10"\nmodel = "dgvit"\n'
                                   'baseline = "vit"\nstatistic = "mean"\n')
    with pytest.raises(UserError, match="registered twice"):
        C.claims_for_store(s)
    (s / C.CLAIMS_FILE).write_text('[[claim]]\nid = "x"\ndataset = "cifar10"\nmodel = "dgvit"\nbaseline = "vit"\n'
                                   'statistic = "median"\n')
    with pytest.raises(UserError, match="statistic"):
        C.claims_for_store(s)


def test_registry_holds_every_cifar10c_sentence_and_labels_the_suite_measures():
    quotes = [c.quote for c in C.BUILTIN.claims if c.source == "Figure 4a"]
    for words in ("nearly all corruption types", "particularly strong gains", "fog and contrast",
                  "marginally better on impulse_noise", "disappears at higher severities", "only corruption"):
        assert any(words in q for q in quotes), words
    extra = [c for c in C.BUILTIN.claims if c.statistic in ("retention", "relative_mce")]
    assert extra and all(c.source == C.NOT_CLAIMED and not c.claimed and not c.primary for c in extra)
    assert all(c.operationalisation for c in C.BUILTIN.claims)
    if PAPER.is_file():                                  # quoted verbatim
        text = " ".join(PAPER.read_text(encoding="utf-8").split())
        for c in C.BUILTIN.claims:
            if c.claimed:
                assert c.quote in text, c.quote
        for _, q in C.NOT_TESTABLE_HERE:
            assert q[:80] in text


# ------------------------------------------------------------------------------------------ report
def test_forest_plot_opens_the_findings_then_one_verdict_per_claim(report):
    out = report[1]
    md = (out / "index.md").read_text()
    assert re.findall(r"^## (.+)$", md, flags=re.M)[0] == "Findings"
    section = md.split("## Findings", 1)[1].split("\n## ", 1)[0]
    assert section.index("findings_forest.png") < section.index("findings_claims")
    claims = (out / "findings_claims.md").read_text()
    rows = [ln for ln in claims.splitlines() if ln.startswith("| clean accuracy | Table 1 | CIFAR-10 |")]
    assert len(rows) == 2 and all("5 of 5" in ln and "0.062 (0.062)" in ln for ln in rows)
    syn = [ln for ln in claims.splitlines() if "synthetic" in ln.lower() and ln.startswith("|")]
    assert syn and all(V.NO_CLAIM in ln for ln in syn)
    reg = (out / "findings_registry.md").read_text()
    assert "not testable here: no CIFAR-100 data" in reg and "at least 13 of the 15" in reg


def test_second_campaign_claims_isolate_one_change_each_and_run_when_their_models_are_stored(tmp_path):
    """The second campaign's claims (registered before it ran): each compares DGViT with one registered model, is
    primary with one test, and is tested once that model is in the store; without it the Findings name the
    missing model instead of a verdict."""
    ablations = {"cifar10:gate:clean": "dgvit_nogate", "cifar10:gate:mCA": "dgvit_nogate",
                 "cifar10:ffn-matched:clean": "vit_swiglu", "cifar10:ffn-matched:mCA": "vit_swiglu",
                 "cifar10:q-residual:clean": "dgvit_noqres", "cifar10:fixed-lambda:clean": "dgvit_learnlambda"}
    by_id = {c.id: c for c in C.BUILTIN.claims}
    for cid, other in ablations.items():
        c = by_id[cid]
        assert (c.model, c.baseline, c.primary, c.direction) == ("dgvit", other, True, "greater")
        get_model_config(other)                                   # a registered model
    for ds, base in (("fashion-mnist", "vit"), ("fashion-mnist", "dvit"), ("imdb", "transformer"), ("imdb", "dt")):
        assert {f"{ds}:clean:{base}", f"{ds}:{'mNA' if ds == 'imdb' else 'mCA'}:{base}"} <= set(by_id)
    store_dir = image_store(tmp_path / "s", 0.02)
    v = _verdicts(store_dir)
    untested = {c.id: why for c, why in v.untested}
    assert untested["cifar10:gate:clean"] == "no runs of dgvit_nogate on cifar10 in this store"
    assert "cifar10:gate:clean" not in set(v.table["id"])
    write_model(store_dir, "cifar10", "dgvit_nogate", list(0.70 + NOISE), list(M.BENCHMARK_CORRUPTIONS))
    v = _verdicts(store_dir)
    row = _row(v.table, "cifar10:gate:clean")
    assert row["family"] == "cifar10 · isolating the gate" and row["n"] == 5
    assert row["diff"] == pytest.approx(2.0, abs=0.1)                # accuracies are stored as counts of 1000
    assert "cifar10:gate:clean" not in {c.id for c, _ in v.untested}


def test_a_clean_only_text_store_tests_clean_and_leaves_the_noise_claims_untested(tmp_path):
    """A text pilot (clean only, the registered IMDB claims): the mNA claims name no noise condition present, so
    they are untested with the reason, never a crash; the clean claims are tested."""
    for model, acc in (("transformer", [0.77, 0.78, 0.76]), ("dgt", [0.78, 0.79, 0.79]), ("dt", [0.76, 0.77, 0.75])):
        write_model(tmp_path, "imdb", model, acc, [])
    v = _verdicts(tmp_path)
    assert set(v.table["id"]) == {"imdb:clean:transformer", "imdb:clean:dt"}
    assert {c.id for c, _ in v.untested} >= {"imdb:mNA:transformer", "imdb:mNA:dt"}
    assert all("cell" in why for c, why in v.untested if c.id.startswith("imdb:mNA"))
