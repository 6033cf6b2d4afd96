"""The Findings: verdicts of the paper's claims from a store with known per-seed values, the minimum detectable
difference against a hand calculation from the noncentral t, and the section's place at the top of the report.

Stores are written with :class:`store.RunWriter` as the evaluation code writes them. Every corrupted cell of a
run is ``clean − 0.05·severity − drop``, so mCA = clean − 0.15 − drop and retention = mCA / clean exactly.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from robustbench_dgsa import store
from robustbench_dgsa.analysis import findings as F
from robustbench_dgsa.analysis import metrics as M
from robustbench_dgsa.config import resolve_config
from robustbench_dgsa.models import get_model_config
from robustbench_dgsa.report.build import build_report
from robustbench_dgsa.report.published import load_published, paper_variant, published_value

NOISE = np.array([0.004, -0.003, 0.002, -0.001, 0.0005])       # per-seed jitter, SD ~0.0028
VERDICT_WORDS = (F.SUPPORTED, F.CONTRADICTED, F.INCONCLUSIVE)


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
    """ViT at 0.70 + jitter; DGViT = ViT + ``dg_offset`` + the jitter reversed (per-seed differences
    ``dg_offset + NOISE[::-1]``), its corrupted cells a further ``dg_offset / 2`` up; DViT = ViT + 0.01."""
    vit = 0.70 + NOISE[:seeds]
    write_model(store_dir, ds, "vit", list(vit), list(M.BENCHMARK_CORRUPTIONS), provenance=provenance)
    if dvit:
        write_model(store_dir, ds, "dvit", list(vit + 0.01), list(M.BENCHMARK_CORRUPTIONS), provenance=provenance)
    write_model(store_dir, ds, "dgvit", list(vit + dg_offset + NOISE[::-1][:seeds]), list(M.BENCHMARK_CORRUPTIONS),
                drop=-dg_offset / 2, provenance=provenance)
    return store_dir


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One store (CIFAR-10 with a large DGViT gain, 5 seeds, run configs; the same on synthetic-vision) and its
    report."""
    root = tmp_path_factory.mktemp("findings")
    s = image_store(root / "store", dg_offset=0.05, provenance=True)
    image_store(s, dg_offset=0.05, ds="synthetic-vision")
    return s, build_report(s, root / "report")


def _findings(store_dir: Path) -> F.Findings:
    return F.compute_findings(store.load_results(store_dir))


def _row(t, measure: str, baseline: str = "vit", model: str = "dgvit"):
    r = t[(t["measure"] == measure) & (t["model"] == model) & (t["baseline"] == baseline)]
    assert len(r) == 1, (measure, baseline, t[["measure", "model", "baseline"]])
    return r.iloc[0]


def test_large_gain_over_five_seeds_is_supported(report):
    f = _findings(report[0])
    real = f.table[f.table["dataset"] == "cifar10"]
    assert set(real["measure"]) == {"clean", "mCA", "retention (mCA/clean)", *(f"severity {s}" for s in range(1, 6))}
    assert set(real["verdict"]) == {F.SUPPORTED}
    for m in ("clean", "mCA", "retention (mCA/clean)", "severity 3"):
        r = _row(real, m)
        assert r["n"] == 5 and r["test"] == "paired t" and r["p_holm"] < 0.05 and r["diff"] > 0 and r["g"] > 0
    r = _row(real, "clean")
    assert r["diff"] == pytest.approx(0.05 + NOISE.mean(), abs=1e-12)
    assert _row(real, "mCA")["diff"] == pytest.approx(r["diff"] + 0.025, abs=1e-12)   # cells a further +0.025
    # Holm within the family: clean, mCA, retention × (DGViT − ViT, DGViT − DViT) = 6 tests; severities: 10
    assert r["family_size"] == 6 and _row(real, "severity 1")["family_size"] == 10
    assert r["p_holm"] >= r["p"]
    assert math.isnan(r["seeds_needed"])     # only inconclusive claims say how many seeds they need


def test_large_loss_is_contradicted(tmp_path):
    f = _findings(image_store(tmp_path / "s", dg_offset=-0.05, dvit=False))
    for m in ("clean", "mCA", "severity 5"):
        assert _row(f.table, m)["verdict"] == F.CONTRADICTED


def _power_by_hand(d: float, n: int) -> float:
    df, tc = n - 1, sps.t.ppf(0.975, n - 1)
    nc = d * math.sqrt(n)
    return float(sps.nct.sf(tc, df, nc) + sps.nct.cdf(-tc, df, nc))


def test_tiny_noisy_difference_is_inconclusive_with_the_hand_mdd(tmp_path):
    f = _findings(image_store(tmp_path / "s", dg_offset=0.0003, dvit=False))
    r = _row(f.table, "clean")
    assert r["verdict"] == F.INCONCLUSIVE
    diffs = NOISE[::-1] + 0.0003
    sd = float(np.std(diffs, ddof=1))
    assert r["sd_diff"] == pytest.approx(sd, abs=1e-15)
    d_star = optimize.brentq(lambda d: _power_by_hand(d, 5) - 0.8, 0.1, 3.0, xtol=1e-14)
    assert abs(r["mdd"] * 100 - d_star * sd * 100) < 1e-6          # in accuracy points
    assert r["mdd"] > abs(r["diff"])                                # undetectable at 5 seeds: that's why
    effect = abs(diffs.mean()) / sd
    need = int(r["seeds_needed"])
    assert _power_by_hand(effect, need) >= 0.8 > _power_by_hand(effect, need - 1)
    assert need > 5 and not r["seeds_needed_capped"]


def test_no_seeds_needed_for_a_zero_difference():
    assert math.isnan(F.seeds_needed(0.0)[0])
    assert F.seeds_needed(1e-6) == (float(F.MAX_SEEDS), True)


def test_two_seeds_are_not_testable(tmp_path):
    f = _findings(image_store(tmp_path / "s", dg_offset=0.05, seeds=2, dvit=False))
    assert set(f.table["verdict"]) == {F.NOT_TESTABLE}
    assert f.table["p_holm"].isna().all() and f.table["mdd"].isna().all()


def test_missing_model_and_incomplete_cells_are_listed_not_tested(tmp_path):
    s = tmp_path / "s"
    write_model(s, "cifar10", "vit", [.7, .71, .72], ["fog"])
    write_model(s, "cifar10", "dgvit", [.75, .76, .77], ["fog"])
    f = _findings(s)
    assert set(f.table["measure"]) == {"clean"}
    assert any("DViT" in u for u in f.untested) and any(u.startswith("mCA") for u in f.untested)


def test_synthetic_data_gets_no_verdict_and_the_report_says_so(report):
    f = _findings(report[0])
    syn = f.table[f.table["dataset"] == "synthetic-vision"]
    assert len(syn) == 16 and set(syn["verdict"]) == {F.NO_CLAIM} and f.synthetic == ["synthetic-vision"]
    md = (report[1] / "index.md").read_text()
    section = md.split("## Findings", 1)[1].split("\n## ", 1)[0]
    assert "Synthetic data supports no claim about the paper" in section
    lines = [ln for ln in section.splitlines() if ln.startswith("| DGViT better than ") and "synthetic" in ln]
    assert len(lines) == 16
    for line in lines:
        assert line.rstrip(" |").endswith(F.NO_CLAIM) and not any(w in line for w in VERDICT_WORDS)


def test_findings_open_the_report_with_the_paper_beside_ours(report):
    out = report[1]
    md = (out / "index.md").read_text()
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert headings[0] == "Findings", headings
    html = (out / "index.html").read_text()
    first = html.index("<h2")
    assert html.startswith('<h2 id="findings"', first)
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))                # no artefact anchor repeats a section's
    section = md.split("## Findings", 1)[1].split("\n## ", 1)[0]
    assert "Real data (CIFAR-10): 6 headline claim(s) tested — 6 supported, 0 contradicted" in section
    # the paper's Table 1 difference for the variant the runs used, from published.csv
    pub = load_published()
    cfg = resolve_config(get_model_config("dgvit"), "cifar10", "tiny").to_dict()["model"]
    proj, drop = paper_variant(cfg)
    dg = published_value(pub, "cifar10", "dgvit", tables=("1", "2"), proj=proj, drop=drop)
    vit = published_value(pub, "cifar10", "vit", tables=("1", "2"))
    rows = section.splitlines()
    line = next(ln for ln in rows if ln.startswith("| DGViT better than ViT (Table 1) | CIFAR-10"))
    assert f"{dg['mean']:.2f} / {vit['mean']:.2f} ({dg['mean'] - vit['mean']:+.2f})" in line
    assert line.rstrip(" |").endswith(F.SUPPORTED)
    rob = next(ln for ln in rows if ln.startswith("| DGViT better than ViT (robustness) | CIFAR-10 | mCA"))
    assert "| — |" in rob                          # the paper publishes no mCA to set beside ours
    assert (out / "findings_claims.md").is_file() and (out / "findings_severity.tex").is_file()
