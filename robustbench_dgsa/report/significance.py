"""The report's statistical comparisons (:func:`robustbench_dgsa.analysis.compare.run_compare`), all sensitivity
analyses of the Findings' claims (each claim's one primary test and verdict are in Findings): the seed-level Welch
tests (n, test, Holm family and effect size beside every p; fewer than 3 seeds per model: "not testable"); tests over corruption cells are shown as consistency across conditions of the same trained models,
with the Friedman average ranks and, for three or more models, an average-rank diagram whose bars are the
post-hoc Wilcoxon–Holm decisions of the table beside it."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.analysis.compare import CELLS_CAVEAT, run_compare
from robustbench_dgsa.models.registry import model_order, reference_model
from robustbench_dgsa.report.figures import cd_diagram
from robustbench_dgsa.report.labels import ACC_SCALE, dataset_label, display_name
from robustbench_dgsa.report.tables import Table, fmt_num, fmt_p

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report


def significance_tables(rep: Report, datasets: dict[str, str], reference: str | None) -> None:
    """The comparisons of ``dgsa-bench compare`` (:func:`analysis.compare.run_compare`), formatted for the report:
    first the seed-level tests (sensitivity: Welch), then the cell-level tests as consistency across conditions."""

    for ds, modality in datasets.items():
        label = dataset_label(ds)
        d = rep.rows_of(ds)
        raw = d[d["kind"] == "eval"]
        models = model_order(metrics.eval_rows(d, dataset=ds)["model"])
        if len(models) < 2:
            rep.skip("significance", f"Comparisons ({label})", "fewer than two models evaluated")
            continue
        ref = reference if reference in models else reference_model(models, modality)
        # reversed order: every pair reads "later (gated / differential) model − earlier (vanilla) model"
        cmp = run_compare(d, dataset=ds, models=list(reversed(models)), reference=ref, all_pairs=True,
                          partial=True, store_label=rep.rel(rep.store_dir))
        n_seeds = int(cmp.info["n_seeds"].get(ds, 0))
        _seed_table(rep, ds, cmp, raw, n_seeds)
        kind = "text-noise" if modality == "text" else "benchmark corruption"
        _cell_tables(rep, ds, cmp, raw, n_seeds, kind)
        rep.warnings += [f"{label}: {w}" for w in _not_in_caveats(cmp.warnings)]
        rep.cell_tests |= bool(cmp.tables.get("wilcoxon_cells") is not None)


#: compare's warnings that the report's caveats already state once for all datasets (seeds below the paper's,
#: cell-level tests sharing models) or that repeat another warning (an incomplete mCA is also "partial")
_SAID_IN_CAVEATS = (re.compile(r"^fewer than \d+ seeds: "), re.compile(re.escape(CELLS_CAVEAT)),
                    re.compile(r"^\S+: (mCA|mNA) incomplete for "))


def _not_in_caveats(warnings: Sequence[str]) -> list[str]:
    """``warnings`` less those the caveats block (or another warning) already says: each said once."""
    return [w for w in warnings if not any(rx.search(w) for rx in _SAID_IN_CAVEATS)]


def _seed_table(rep: Report, ds: str, cmp, raw: pd.DataFrame, n_seeds: int) -> None:
    label = dataset_label(ds)
    pw = cmp.tables.get("pairwise")
    if pw is None or not len(pw):
        rep.skip("significance", f"Seed-level tests ({label})", "no comparable per-seed measures")
        return
    recs = [[r.condition, f"{display_name(r.model_a)} − {display_name(r.model_b)}", f"{r.n_a}/{r.n_b}",
             fmt_num(r.diff * ACC_SCALE, 2),
             f"[{fmt_num(r.ci_lo * ACC_SCALE, 2)}, {fmt_num(r.ci_hi * ACC_SCALE, 2)}]" if np.isfinite(r.ci_lo)
             else "—",
             r.test, fmt_num(r.t, 2), fmt_num(r.df, 1), fmt_p(r.p), fmt_p(r.p_holm), fmt_num(r.g, 2), r.verdict]
            for r in pw.itertuples(index=False)]
    title = f"Seed-level tests (sensitivity analysis, unpaired Welch): {label}"
    fam = [f for f in cmp.families if "t-test" in f]
    notes = ["A sensitivity analysis, not a claim: each claim of the paper has one primary test (paired t over "
             "matched seeds, Holm within its family) and one verdict, in Findings; this table treats the seeds as "
             "unpaired (Welch), so its p-values differ. "
             "Δ = A − B in percentage points (mCE: lower is better) with its 95% CI; n = seeds of A/B (independent "
             "training runs); effect size g = Hedges' g. Significant = Holm-adjusted p < 0.05 within the "
             "family below; a comparison with fewer than 3 seeds per model shows its numbers but is 'not testable' "
             "(left out of the family, never called significant)."] + fam
    if n_seeds < 3:
        notes.append(f"{n_seeds} seed{'s' if n_seeds != 1 else ''} per model: no comparison here is testable.")
    t = Table(["Measure", "A − B", "n (A/B)", "Δ (pp)", "95% CI", "Test", "t", "df", "p", "p (Holm)",
               "Hedges' g", "Welch (sensitivity)"], recs, title, notes, align="llrrrlrrrrrl")
    rep.table("significance", f"significance_seeds_{ds}", title, t, raw)


def _cell_tables(rep: Report, ds: str, cmp, raw: pd.DataFrame, n_seeds: int, kind: str) -> None:
    label = dataset_label(ds)
    post = "posthoc_wilcoxon" in cmp.tables
    wil = cmp.tables.get("posthoc_wilcoxon", cmp.tables.get("wilcoxon_cells"))
    if wil is None or not len(wil):
        rep.skip("significance", f"Consistency across conditions ({label})", "no corrupted / noisy cells")
        return
    recs = [[f"{display_name(r.model_a)} vs {display_name(r.model_b)}", str(r.n_cells),
             f"{r.wins}/{r.ties}/{r.losses}", fmt_num(r.median_diff * ACC_SCALE, 2), fmt_num(r.W, 1),
             fmt_p(r.p), fmt_p(r.p_holm), f"{r.min_p:.2g}", r.verdict] for r in wil.itertuples(index=False)]
    title = f"Consistency across {kind} conditions (same trained models): {label}"
    fam = [f for f in cmp.families if "Wilcoxon" in f and ("post-hoc" in f) == post]
    notes = [f"Wilcoxon signed-rank over (condition, severity) cells, accuracies averaged over {n_seeds} seed(s). "
             "The cells are conditions of the same trained models, not independent samples: a small p says the "
             "difference is consistent across conditions, not that it holds for new training runs (the Findings' "
             "paired tests are the claims). W/T/L = cells where A is better / equal / worse; effect size = median Δ over "
             "cells (pp); min p = the smallest p attainable with that many non-tied cells."] + fam
    t = Table(["A vs B", "Cells", "W/T/L", "median Δ (pp)", "W", "p", "p (Holm)", "min p", "Verdict"],
              recs, title, notes, align="lrcrrrrrl")
    rep.table("significance", f"significance_cells_{ds}", title, t, raw)
    fr, ranks = cmp.tables.get("friedman"), cmp.tables.get("avg_ranks")
    if fr is None or ranks is None or not len(fr[fr["dataset"] == ds]):
        return
    info = fr[fr["dataset"] == ds].iloc[0]
    rk = ranks[ranks["dataset"] == ds]
    recs = [[display_name(r.model), fmt_num(r.avg_rank, 2), fmt_num(r.mean * ACC_SCALE, 2)]
            for r in rk.itertuples(index=False)]
    title = f"Average ranks over {kind} cells (Friedman): {label}"
    notes = [f"Friedman χ² = {fmt_num(info['statistic'], 3)}, {_p_eq(info['p'])}, k = {info['k']} models, "
             f"N = {info['n_blocks']} cells of the same trained models ({n_seeds} seed(s)); effect size Kendall's "
             f"W = {fmt_num(info['kendall_w'], 2)}; verdict: {info['verdict']}. Rank 1 = best. A test over cells "
             "measures "
             "consistency across conditions, not independent evidence."]
    t = Table(["Model", "Average rank", "Mean acc. (%)"], recs, title, notes)
    rep.table("significance", f"friedman_{ds}", title, t, raw)
    for name, avg, cliques, note in cmp.cd_diagrams:
        if not name.startswith(f"{ds} "):
            continue
        if cliques is None:   # no bars would read as "every pair differs": no diagram at all
            rep.skip("significance", f"Average-rank diagram: {label}",
                     f"not drawn: not testable (n < 3) — {n_seeds} seed{'s' if n_seeds != 1 else ''} per model")
            continue
        named = {display_name(m): float(v) for m, v in avg.items()}
        bars = [[display_name(m) for m in g] for g in cliques]
        fig = cd_diagram(named, bars, note=note)
        what = ("Bars join models that the post-hoc Wilcoxon–Holm table above did not tell apart (the same tests "
                "and correction, so the two cannot disagree)." if bars else
                "No bars: every pair differs — the post-hoc Wilcoxon–Holm table above told every pair of models "
                "apart (Holm-adjusted p < 0.05).")
        rep.figure("significance", f"cd_diagram_{ds}", f"Average-rank diagram: {label}", fig, raw,
                   f"Average rank (1 = best) of each model over {int(info['n_blocks'])} seed-averaged {kind} "
                   f"cells. {what}")


def _p_eq(p: float) -> str:
    """"p = 0.123" or "p < 0.001" for running text."""
    text = fmt_p(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"
