"""One verdict per registered claim (:mod:`robustbench_dgsa.analysis.claims`), from the store's accuracy cells.

For each claim and each matched seed s, d_s = the claim's statistic for (model, baseline) of seed s (points) and
x_s = d_s − threshold. Primary test: the one-sample t-test of mean(x) = 0 (= the paired t over matched seeds),
two-sided; an ``equivalent`` claim uses TOST with bounds ±margin instead. Holm-corrected within the claim's family
(the registry's ``family``); the report also shows Holm over every tested claim of the report (the campaign-wide
family) and marks each verdict that changes under it.

Verdict (fixed words): "supported" = Holm p < α **and** at least 80 % of seeds in the claimed direction (for
equivalence: within ±margin); "contradicted" = Holm p < α, mean opposite to the claim and at least 80 % of seeds
opposite; otherwise "inconclusive at this scale", with the condition that failed in ``reason``. Fewer than 3
matched seeds: "not testable (n < 3)"; a synthetic dataset: "no claim (synthetic data)".

Beside each verdict (never gates): the sign count k of n, the exact sign-flip p with its minimum at this n, the
seed-only 95 % t-interval, and a two-level bootstrap 95 % CI — 2,000 resamples (fixed seed) of the seeds and,
within each, one multinomial resample of the test examples shared by every model and condition (the store's
per-example predictions); MDD and seeds-for-80 %-power at the α the verdict used (Holm's α / (m − i + 1)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa import store
from robustbench_dgsa.analysis import metrics, small_n, stats
from robustbench_dgsa.analysis.claims import BENCHMARK, NOISE, Claim, Registry
from robustbench_dgsa.analysis.small_n import MAX_SEEDS, detectable_effect, seeds_needed

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive at this scale"
NOT_TESTABLE = f"not testable (n < {stats.MIN_TESTABLE_SEEDS})"
NO_CLAIM = "no claim (synthetic data)"
SYNTHETIC_SENTENCE = ("Synthetic data supports no claim about the paper: the synthetic datasets are a pipeline "
                      "check, so their differences get no verdict.")
PCT = 100.0
COLUMNS = ["id", "label", "source", "quote", "operationalisation", "dataset", "model", "baseline", "statistic",
           "direction", "threshold", "margin", "family", "primary", "claimed", "synthetic", "n", "mean_model",
           "mean_baseline", "diff", "sd", "ci_lo", "ci_hi", "boot_lo", "boot_hi", "test", "p", "family_size",
           "p_holm", "alpha_used", "k", "sign_p", "sign_p_min", "mdd", "seeds_needed", "seeds_needed_capped",
           "sens_p", "p_holm_campaign", "verdict_campaign", "verdict", "reason"]


def is_synthetic(dataset: str) -> bool:
    """Synthetic data (a pipeline check) supports no claim about the paper."""
    return str(dataset).startswith("synthetic")


@dataclass
class Cells:
    """Accuracy (points) per model × matched seed × cell of one dataset; ``run_ids`` for the bootstrap."""
    dataset: str
    cells: list[tuple[str, int]]
    seeds: dict[str, list[int]]
    acc: dict[str, np.ndarray]                       # model -> (n_seeds, n_cells), NaN where missing
    run_ids: dict[tuple[str, int], str] = field(default_factory=dict)
    modality: str = "image"

    def index(self, cond: str, sev: int) -> int:
        return self.cells.index((cond, sev))


def dataset_cells(rows: pd.DataFrame, dataset: str) -> Cells:
    """The accuracy cells of ``dataset`` from store rows (:func:`metrics.eval_rows`: de-duplicated, latest run)."""
    return _cells_from(metrics.eval_rows(rows, dataset=dataset), dataset)


def _cells_from(r: pd.DataFrame, dataset: str) -> Cells:
    """Cells from rows with model, seed, condition, severity, value (a fraction), run_id."""
    cells = sorted({(str(c), int(s)) for c, s in zip(r["condition"], r["severity"])},
                   key=lambda cs: (cs[0] != metrics.CLEAN, cs))
    pos = {c: i for i, c in enumerate(cells)}
    out = Cells(dataset, cells, {}, {},
                modality="image" if set(r["condition"]) & set(metrics.BENCHMARK_CORRUPTIONS) else "text")
    for model, g in r.groupby("model", sort=True):
        seeds = sorted({int(s) for s in g["seed"]})
        a = np.full((len(seeds), len(cells)), np.nan)
        si = {s: i for i, s in enumerate(seeds)}
        for s, c, v, sv, run in zip(g["seed"], g["condition"], g["value"], g["severity"], g["run_id"]):
            a[si[int(s)], pos[(str(c), int(sv))]] = float(v) * PCT
            out.run_ids.setdefault((str(model), int(s)), str(run))
        out.seeds[str(model)], out.acc[str(model)] = seeds, a
    return out


def threat_cell(condition: str, eps: float, attack: str) -> str:
    """The cell name of robust accuracy under a threat model at ``eps`` with ``attack`` (severity 0)."""
    return f"{condition}@{float(eps):.6g}:{attack}"


def adversarial_cells(results: pd.DataFrame, dataset: str) -> Cells:
    """Robust-accuracy cells of ``dataset`` (``kind: adversarial`` accuracy rows): one cell per threat model x eps
    x attack (:func:`threat_cell`), the eps-0 step as the clean cell; of a cell measured by several runs of a
    model and seed, the latest run wins."""
    r = results[(results["kind"] == "adversarial") & (results["metric"] == "accuracy")
                & (results["dataset"] == dataset)]
    r = r.assign(cell=[metrics.CLEAN if float(e) == 0 else threat_cell(str(c), float(e), str(a))
                       for c, e, a in zip(r["condition"], r["eps"], r["attack"])])
    r = r.sort_values("created", kind="stable").drop_duplicates(["model", "seed", "cell"], keep="last")
    frame = pd.DataFrame({"model": r["model"], "seed": r["seed"], "condition": r["cell"], "severity": 0,
                          "value": r["value"], "run_id": r["run_id"]})
    out = _cells_from(frame, dataset)
    out.run_ids.clear()                  # per-example pairing of attacked images: not in the bootstrap
    out.modality = "image"
    return out


def _cells_key(claim: Claim) -> tuple[str, bool]:
    """Which cells a claim reads: (dataset, threat-model claim)."""
    return claim.dataset, claim.eps is not None


def expand(claim: Claim, cells: Cells) -> tuple[list[str], list[int]]:
    """The claim's conditions (keywords expanded) and severities on this dataset."""
    if claim.eps is not None:
        return [threat_cell(c, claim.eps, claim.attack) for c in claim.conditions], [0]
    present = {c for c, _ in cells.cells}
    conds: list[str] = []
    for c in claim.conditions:
        if c == BENCHMARK:
            conds += [x for x in metrics.BENCHMARK_CORRUPTIONS]
        elif c == NOISE:
            conds += sorted(present - {metrics.CLEAN} - set(metrics.IMAGE_CORRUPTIONS))
        else:
            conds.append(c)
    return conds, list(claim.severities)


def _grid(claim: Claim, cells: Cells) -> tuple[np.ndarray, list[str]] | None:
    """Cell index matrix (conditions × severities), or None when a cell is missing (or the claim's keyword names
    no condition present: text noise on a clean-only store)."""
    conds, sevs = expand(claim, cells)
    if not conds or not sevs:
        return None
    try:
        return np.array([[cells.index(c, s) for s in sevs] for c in conds]), conds
    except ValueError:
        return None


def contrast(claim: Claim, a: np.ndarray, b: np.ndarray, grid: np.ndarray, conds: Sequence[str],
             clean: int | None) -> np.ndarray:
    """The claim's statistic (points) over the last axis of per-cell accuracies ``a`` (model) and ``b`` (baseline),
    any leading shape; the formulas are in :mod:`robustbench_dgsa.analysis.claims`."""
    st = claim.statistic
    if st == "retention":
        return PCT * (a[..., grid].mean((-2, -1)) / a[..., clean] - b[..., grid].mean((-2, -1)) / b[..., clean])
    if st == "relative_mce":
        ratio = (PCT - a[..., grid]).sum(-1) / (PCT - b[..., grid]).sum(-1)
        return PCT * (ratio.mean(-1) - 1.0)
    gain = (a[..., grid] - b[..., grid]).mean(-1)              # (..., n_conditions)
    if st == "mean":
        return gain.mean(-1)
    if st == "kth_smallest_gain":
        return np.sort(gain, axis=-1)[..., claim.k - 1]
    named = np.array([c in claim.named for c in conds])
    if st == "named_minus_median":
        return gain[..., named].mean(-1) - np.median(gain[..., ~named], axis=-1)
    return gain[..., named].min(-1) - gain[..., ~named].max(-1)          # named_min_minus_max


def _matched(cells: Cells, claim: Claim) -> tuple[list[int], np.ndarray, np.ndarray]:
    sa, sb = cells.seeds.get(claim.model, []), cells.seeds.get(claim.baseline, [])
    seeds = sorted(set(sa) & set(sb))
    a = cells.acc[claim.model][[sa.index(s) for s in seeds]] if seeds else np.empty((0, len(cells.cells)))
    b = cells.acc[claim.baseline][[sb.index(s) for s in seeds]] if seeds else np.empty((0, len(cells.cells)))
    return seeds, a, b


def test_claim(claim: Claim, cells: Cells) -> dict | None:
    """The primary test of one claim (before Holm); None when the store lacks a model or a cell of it."""
    if claim.model not in cells.acc or claim.baseline not in cells.acc:
        return None
    g = _grid(claim, cells)
    if g is None:
        return None
    grid, conds = g
    clean = cells.index(metrics.CLEAN, 0) if (metrics.CLEAN, 0) in cells.cells else None
    if claim.statistic == "retention" and clean is None:
        return None
    seeds, a, b = _matched(cells, claim)
    d = contrast(claim, a, b, grid, conds, clean)
    if not np.isfinite(d).all():
        return None
    n = len(seeds)
    x = d - claim.threshold
    mean, sd, p_t, half = small_n.t_test(x)
    eq = claim.direction == "equivalent"
    rec = {"n": n, "diff": float(d.mean()) if n else math.nan, "sd": sd, "ci_lo": float(d.mean()) - half,
           "ci_hi": float(d.mean()) + half, "per_seed": d, "seeds": seeds,
           "mean_model": _level(claim, a, grid, clean), "mean_baseline": _level(claim, b, grid, clean),
           "k": small_n.sign_count(d if eq else x, claim.direction, claim.margin)}
    if eq:
        rec.update(test=f"TOST ±{claim.margin:g} pp", p=small_n.tost_p(d, claim.margin) if n >= 2 else math.nan,
                   sign_p=small_n.sign_flip_tost_p(d, claim.margin) if n else math.nan,
                   sign_p_min=small_n.min_sign_flip_p(n, "greater"), sens_p=p_t)
    else:
        rec.update(test="paired t", p=p_t, sign_p=small_n.sign_flip_p(x) if n else math.nan,
                   sign_p_min=small_n.min_sign_flip_p(n), sens_p=math.nan)
    return rec


def _level(claim: Claim, acc: np.ndarray, grid: np.ndarray, clean: int | None) -> float:
    """The model's own level beside Δ: its mean accuracy over the claim's cells (points; retention: kept %)."""
    if not len(acc):
        return math.nan
    if claim.statistic == "retention":
        return float((PCT * acc[:, grid].mean((-2, -1)) / acc[:, clean]).mean())
    return float(acc[:, grid].mean())


def verdict(claim: Claim, rec: dict, p_holm: float, alpha: float, synthetic: bool) -> tuple[str, str]:
    """(verdict, reason) in fixed words; see the module docstring."""
    n = rec["n"]
    if synthetic:
        return NO_CLAIM, "synthetic data supports no claim about the paper"
    if n < stats.MIN_TESTABLE_SEEDS:
        return NOT_TESTABLE, f"{n} matched seed(s)"
    need = math.ceil(small_n.MIN_SIGN_FRACTION * n - 1e-9)
    sig = math.isfinite(p_holm) and p_holm < alpha
    k = rec["k"]
    if claim.direction == "equivalent":
        if sig and k >= need:
            return SUPPORTED, ""
        return INCONCLUSIVE, (f"TOST Holm p {p_holm:.3f} ≥ {alpha:g}" if not sig else
                              f"equivalent by TOST but only {k} of {n} seeds within ±{claim.margin:g} pp")
    sign = 1 if claim.direction == "greater" else -1
    x_mean = rec["diff"] - claim.threshold
    if sig and sign * x_mean > 0 and k >= need:
        return SUPPORTED, ""
    if sig and sign * x_mean < 0 and n - k >= need:
        return CONTRADICTED, ""
    if not sig:
        return INCONCLUSIVE, f"Holm p {p_holm:.3f} ≥ {alpha:g}"
    return INCONCLUSIVE, (f"Holm p < {alpha:g} but only {k if sign * x_mean > 0 else n - k} of {n} seeds on the "
                          f"side of the mean (needs {need})")


# -------------------------------------------------------------------------------------------------- families
@dataclass
class Verdicts:
    """One row per claim (:data:`COLUMNS`; points, not fractions), the claims the store cannot test with why,
    the synthetic datasets, and the settings."""
    table: pd.DataFrame
    untested: list[tuple[Claim, str]] = field(default_factory=list)
    synthetic: list[str] = field(default_factory=list)
    alpha: float = 0.05
    power: float = 0.8
    bootstrap_note: str = ""


def _power_cols(rec: dict, alpha_used: float, power: float, direction: str, verdict_: str,
                threshold: float = 0.0) -> dict:
    """MDD and seeds-for-power at the α the verdict used (t-based claims; equivalence: NaN)."""
    n, sd = rec["n"], rec["sd"]
    out = {"mdd": math.nan, "seeds_needed": math.nan, "seeds_needed_capped": False}
    if direction == "equivalent" or n < stats.MIN_TESTABLE_SEEDS or not math.isfinite(alpha_used):
        return out
    out["mdd"] = detectable_effect(n, alpha_used, power) * sd if sd > 0 else 0.0
    x = abs(rec["diff"] - threshold)
    if verdict_ == INCONCLUSIVE and sd > 0 and x >= 5e-3:
        out["seeds_needed"], out["seeds_needed_capped"] = seeds_needed(x / sd, alpha_used, power)
    return out


def compute_verdicts(results: pd.DataFrame, registry: Registry, alpha: float = 0.05, power: float = 0.8,
                     store_dir: str | Path | None = None, resamples: int = small_n.BOOT_RESAMPLES) -> Verdicts:
    """Test every claim of ``registry`` the store can test; one row per claim (see the module docstring).
    ``store_dir``: where the per-example predictions are (no two-level CI without them)."""
    rows = metrics.eval_rows(results)
    attacked = results[results["kind"] == "adversarial"]
    present = {(d, False) for d in rows["dataset"]} | {(d, True) for d in attacked["dataset"]}
    out = Verdicts(pd.DataFrame(columns=COLUMNS), alpha=alpha, power=power)
    out.synthetic = sorted({d for d, _ in present if is_synthetic(d)})
    by_ds: dict[tuple[str, bool], Cells] = {}
    recs: list[tuple[Claim, dict]] = []
    for c in registry.claims:
        if c.testable:
            out.untested.append((c, c.testable))
            continue
        key = _cells_key(c)
        if key not in present:
            continue
        cells = by_ds.setdefault(key, adversarial_cells(attacked, c.dataset) if key[1]
                                 else dataset_cells(rows, c.dataset))
        rec = test_claim(c, cells)
        if rec is None:
            if c.model in cells.acc or c.baseline in cells.acc:
                out.untested.append((c, _why_untested(c, cells)))
            continue
        recs.append((c, rec))
    if not recs:
        return out
    _holm(recs, alpha, power)
    out.bootstrap_note = _bootstrap(recs, by_ds, store_dir, resamples)
    out.table = pd.DataFrame([_row(c, r) for c, r in recs], columns=COLUMNS)
    return out


def _why_untested(c: Claim, cells: Cells) -> str:
    """Why the store cannot test ``c``: the model it lacks, else a cell."""
    missing = [m for m in (c.model, c.baseline) if m not in cells.acc]
    if missing:
        return f"no {'adversarial ' if c.eps is not None else ''}runs of {' or '.join(missing)} on {c.dataset} " \
               "in this store"
    if c.eps is not None:
        return f"no {c.attack} rows at {'/'.join(c.conditions)} eps {c.eps:.6g} on {c.dataset}"
    return f"the store lacks a cell it needs on {c.dataset}"


def _holm(recs: list[tuple[Claim, dict]], alpha: float, power: float) -> None:
    """Holm within each claim's family and over all of them (campaign-wide); verdicts under both."""
    fams: dict[str, list[int]] = {}
    for i, (c, r) in enumerate(recs):
        fams.setdefault(c.family, []).append(i)
    testable = [i for i, (c, r) in enumerate(recs) if r["n"] >= stats.MIN_TESTABLE_SEEDS]
    for members, key in [(m, "") for m in fams.values()] + [(testable, "_campaign")]:
        ps = [recs[i][1]["p"] if recs[i][1]["n"] >= stats.MIN_TESTABLE_SEEDS else math.nan for i in members]
        adj, a_used = stats.holm(ps), small_n.holm_alpha(ps, alpha)
        for j, i in enumerate(members):
            c, r = recs[i]
            syn = is_synthetic(c.dataset)
            v, why = verdict(c, r, float(adj[j]), alpha, syn)
            r["p_holm" + key], r["verdict" + key] = float(adj[j]), v
            if not key:
                r.update(family_size=int(np.isfinite(ps).sum()), alpha_used=float(a_used[j]), reason=why,
                         synthetic=syn, **_power_cols(r, float(a_used[j]), power, c.direction, v, c.threshold))
    for c, r in recs:
        r.setdefault("p_holm_campaign", math.nan)
        r.setdefault("verdict_campaign", r["verdict"])


def _row(c: Claim, r: dict) -> dict:
    return {**{k: r.get(k, math.nan) for k in COLUMNS}, "id": c.id, "label": c.label or c.statistic,
            "source": c.source, "quote": c.quote, "operationalisation": c.operationalisation,
            "dataset": c.dataset, "model": c.model, "baseline": c.baseline, "statistic": c.statistic,
            "direction": c.direction, "threshold": c.threshold, "margin": c.margin, "family": c.family,
            "primary": c.primary, "claimed": c.claimed}


# ------------------------------------------------------------------------------------------------ bootstrap
def _correct(store_dir: Path, run_id: str, cells: list[tuple[str, int]], index: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """(cells × examples) 0/1 correctness of one evaluation run, examples in ``index`` order (or sorted)."""
    path = store.predictions_path(store_dir, run_id, "test")
    if not path.is_file():
        return None
    p = store.read_predictions_file(path, columns=["run_id", "condition", "severity", "index", "label", "pred"])
    if p.empty:
        return None
    p = p[p["run_id"] == run_id]
    lookup = {c: i for i, c in enumerate(cells)}
    conds = pd.Categorical(p["condition"].astype(str))
    sev = p["severity"].to_numpy().astype(np.int64)
    table = np.full((len(conds.categories), int(sev.max(initial=0)) + 1), -1, dtype=np.int64)
    for ci, c in enumerate(conds.categories):
        for s in range(table.shape[1]):
            table[ci, s] = lookup.get((str(c), s), -1)
    pos = table[conds.codes, sev]
    keep = pos >= 0
    idx = p["index"].to_numpy()[keep]
    if index is None:
        index = np.unique(idx)
    col = np.searchsorted(index, idx)
    if (col >= index.size).any() or not (index[np.minimum(col, index.size - 1)] == idx).all():
        return None
    out = np.full((len(cells), index.size), np.nan, dtype=np.float32)
    out[pos[keep], col] = (p["label"].to_numpy()[keep] == p["pred"].to_numpy()[keep])
    return (out, index) if np.isfinite(out).all() else None


def _bootstrap(recs: list[tuple[Claim, dict]], by_ds: dict[tuple[str, bool], Cells],
               store_dir: str | Path | None, resamples: int) -> str:
    """Fill ``boot_lo`` / ``boot_hi`` of every claim whose runs have per-example predictions; returns a note
    naming what was left without (empty when none). Threat-model claims get none (their attacked images are
    not resampled)."""
    missing = []
    for (ds, threat), cells in by_ds.items():
        mine = [(c, r) for c, r in recs if _cells_key(c) == (ds, threat) and r["n"] >= 2]
        if not mine:
            continue
        acc = _boot_acc(cells, mine, store_dir, resamples) if store_dir is not None and not threat else None
        if acc is None:
            missing.append(f"{ds} (adversarial claims)" if threat else ds)
            continue
        rng = np.random.default_rng(small_n.BOOT_SEED + 1)
        for c, r in mine:
            grid, conds = _grid(c, cells)
            clean = cells.index(metrics.CLEAN, 0) if (metrics.CLEAN, 0) in cells.cells else None
            seeds, n = r["seeds"], r["n"]
            a = acc[c.model][:, [cells.seeds[c.model].index(s) for s in seeds]]
            b = acc[c.baseline][:, [cells.seeds[c.baseline].index(s) for s in seeds]]
            d = contrast(c, a, b, grid, conds, clean)                  # (B, n)
            pick = rng.integers(0, n, size=(d.shape[0], n))
            r["boot_lo"], r["boot_hi"] = small_n.percentile_ci(np.take_along_axis(d, pick, 1).mean(1))
    return ("no two-level CI for " + ", ".join(missing) + " (per-example predictions missing or not matching "
            "the stored cells)") if missing else ""


def _boot_acc(cells: Cells, mine: list[tuple[Claim, dict]], store_dir: str | Path, resamples: int
              ) -> dict[str, np.ndarray] | None:
    """model -> (resamples × seeds × cells) accuracy (points) under shared multinomial resamples of the test
    examples; None when a run's predictions are missing or disagree with its stored accuracies."""
    models = sorted({m for c, _ in mine for m in (c.model, c.baseline)})
    need = sorted({int(i) for c, _ in mine for i in _grid(c, cells)[0].ravel()}
                  | ({cells.index(metrics.CLEAN, 0)} if (metrics.CLEAN, 0) in cells.cells else set()))
    mats, index = [], None
    for m in models:
        for s in cells.seeds[m]:
            run = cells.run_ids.get((m, s))
            got = _correct(Path(store_dir), run, cells.cells, index) if run else None
            if got is None:
                return None
            mat, index = got
            mat = mat[need]
            stored = cells.acc[m][cells.seeds[m].index(s)][need]
            if not np.allclose(mat.mean(1, dtype=np.float64) * PCT, stored, atol=1e-6, equal_nan=False):
                return None
            mats.append(mat)
    big = np.concatenate(mats, 0)                                     # (runs·cells, examples)
    rng = np.random.default_rng(small_n.BOOT_SEED)
    parts = []
    for start in range(0, resamples, 250):
        w = small_n.bootstrap_weights(index.size, min(250, resamples - start), rng)
        parts.append(w @ big.T * (PCT / index.size))
    flat = np.concatenate(parts, 0)                                   # (B, runs·cells)
    out, at, nc = {}, 0, len(need)
    for m in models:
        k = len(cells.seeds[m])
        full = np.full((flat.shape[0], k, len(cells.cells)), np.nan)
        full[:, :, need] = flat[:, at * nc:(at + k) * nc].reshape(flat.shape[0], k, nc)
        out[m] = full
        at += k
    return out


def severity_sensitivity(claim: Claim, cells: Cells) -> list[tuple[int, dict]]:
    """The claim's test at each severity alone (sensitivity analysis: raw p, no verdict)."""
    out = []
    for s in claim.severities:
        rec = test_claim(replace(claim, severities=(s,)), cells)
        if rec is not None:
            out.append((s, rec))
    return out


__all__ = ["Cells", "Verdicts", "compute_verdicts", "contrast", "dataset_cells", "severity_sensitivity",
           "test_claim", "verdict", "MAX_SEEDS"]
