"""benchmarks/bf16_equivalence.py: paired bf16 − fp32 differences per (model, seed), their CIs, TOST and the
keep-bf16 rule, on two small synthetic stores (one of them partial)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.analysis.metrics import BENCHMARK_CORRUPTIONS

REPO = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("bf16_equivalence", REPO / "benchmarks" / "bf16_equivalence.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(store_dir: Path, precision: str, clean: dict, mca: dict, skip_cells: set = frozenset()) -> None:
    """Eval rows of (model, seed) -> clean accuracy and a constant accuracy on every benchmark cell."""
    for (model, seed), acc in clean.items():
        w = store.RunWriter(store_dir, f"eval-{model}-{seed}", base=dict(
            kind="eval", model=model, dataset="cifar10", split="test", seed=seed, precision=precision))
        rows = [dict(condition="clean", severity=0, metric="accuracy", value=acc, n=100)]
        rows += [dict(condition=c, severity=s, metric="accuracy", value=mca[(model, seed)], n=100, source="regenerated")
                 for c in BENCHMARK_CORRUPTIONS for s in range(1, 6) if (model, seed, c, s) not in skip_cells]
        w.add_rows(rows)


def test_paired_differences_tost_and_the_rule(tmp_path):
    mod = _module()
    seeds = range(5)
    base = {("vit", s): 0.50 + 0.01 * s for s in seeds} | {("dgvit", s): 0.55 + 0.01 * s for s in seeds}
    shift = {("vit", s): d for s, d in zip(seeds, (0.001, -0.002, 0.003, 0.0, 0.002))}      # tiny: equivalent
    shift |= {("dgvit", s): d for s, d in zip(seeds, (0.03, -0.01, 0.04, 0.00, 0.02))}     # spread: not within 1.5
    _write(tmp_path / "fp32", "fp32", base, {k: v - 0.1 for k, v in base.items()})
    bf = {k: v + shift[k] for k, v in base.items()}
    # the bf16 store is partial: dgvit seed 4 misses one corruption cell (no mCA), vit seed 4 has no rows at all
    _write(tmp_path / "bf16", "bf16", {k: v for k, v in bf.items() if k != ("vit", 4)},
           {k: v - 0.1 for k, v in bf.items()}, skip_cells={("dgvit", 4, "fog", 3)})
    table, prec = mod.run(tmp_path / "fp32", tmp_path / "bf16")
    assert prec["fp32"]["evaluation"] == ["fp32"] and prec["bf16"]["evaluation"] == ["bf16"]
    row = {(r.model, r.measure): r for r in table.itertuples()}
    vit_clean, dg_clean = row[("vit", mod.MEASURES[0])], row[("dgvit", mod.MEASURES[0])]
    dg_mca = row[("dgvit", mod.MEASURES[1])]
    assert vit_clean.n == 4 and vit_clean.seeds == [0, 1, 2, 3]
    d = np.array([0.1, -0.2, 0.3, 0.0])
    assert vit_clean.mean_diff == pytest.approx(d.mean()) and vit_clean.sd == pytest.approx(d.std(ddof=1))
    from scipy import stats
    h = stats.t.ppf(0.95, 3) * d.std(ddof=1) / 2
    assert vit_clean.ci90 == pytest.approx((d.mean() - h, d.mean() + h))
    assert vit_clean.ci95[0] < vit_clean.ci90[0] and vit_clean.equivalent and vit_clean.tost_p < 0.05
    assert dg_clean.n == 5 and dg_mca.n == 4           # the incomplete run has no mCA
    assert dg_clean.mean_diff == pytest.approx(1.6) and not dg_clean.within_keep
    verdict = mod.decision(table)
    assert verdict.startswith("set auto = fp32") and "dgvit clean accuracy" in verdict
    assert mod.decision(table[table.model == "vit"]).startswith("keep auto = bf16")
    text = mod.render(table, prec, 1.0, 1.5, "cifar10")
    assert "bf16 arm: training" in text and "decision" in text


def test_a_store_without_evaluations_yet_is_not_decidable(tmp_path):
    mod = _module()
    _write(tmp_path / "fp32", "fp32", {("vit", 0): 0.5, ("vit", 1): 0.6}, {("vit", 0): 0.4, ("vit", 1): 0.5})
    (tmp_path / "bf16").mkdir()
    table, _ = mod.run(tmp_path / "fp32", tmp_path / "bf16")
    assert table.empty and mod.decision(table).startswith("not decidable")
    assert mod.main([str(tmp_path / "fp32"), str(tmp_path / "bf16")]) == 0


def test_clean_only_arm_is_decided_on_clean_accuracy(tmp_path):
    """An arm evaluated clean only: with --measure clean the missing mCA does not make the rule undecidable."""
    mod = _module()
    base = {("vit", s): 0.50 + 0.01 * s for s in range(3)}
    _write(tmp_path / "fp32", "fp32", base, {k: v - 0.1 for k, v in base.items()})
    bf = {k: v + d for (k, v), d in zip(base.items(), (0.001, -0.002, 0.002))}
    _write(tmp_path / "bf16", "bf16", bf, {}, skip_cells={("vit", s, c, v) for s in range(3)
                                                          for c in BENCHMARK_CORRUPTIONS for v in range(1, 6)})
    table, _ = mod.run(tmp_path / "fp32", tmp_path / "bf16")
    assert mod.decision(table).startswith("not decidable")           # mCA has no complete pair
    table, _ = mod.run(tmp_path / "fp32", tmp_path / "bf16", measure="clean")
    assert list(table.measure) == [mod.MEASURES[0]] and mod.decision(table).startswith("keep auto = bf16")
