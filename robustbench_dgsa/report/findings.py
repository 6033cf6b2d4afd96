"""The report's "Findings": one verdict per registered claim (:mod:`robustbench_dgsa.analysis.verdicts`), opened by
a forest plot, then the verdict table, the claims as registered (the paper's sentence, how its words became a
test), and the sensitivity analyses. Nothing here is typed by hand: every number, count and verdict comes from the
statistics, each rounded once by the table formatters.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from robustbench_dgsa.analysis import claims as clm
from robustbench_dgsa.analysis import metrics, small_n
from robustbench_dgsa.analysis import verdicts as vd
from robustbench_dgsa.models.registry import MODEL_FACTS
from robustbench_dgsa.report.forest import forest_figure
from robustbench_dgsa.report.labels import dataset_label, display_name
from robustbench_dgsa.report.published import paper_variant, published_value
from robustbench_dgsa.report.tables import Table, fmt_num, fmt_p

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report

COLUMNS = ["Claim", "Source", "Dataset", "Comparison", "Claimed", "n", "Ours (%): DG / base", "Δ (pp) [seed 95% CI]",
           "Two-level 95% CI", "Paper Δ (pp)", "Test · family (m)", "p (Holm)", "α used", "Seeds in direction",
           "Sign-flip p (min)", "MDD at α used (pp)", "Seeds for 80% power", "Campaign-wide Holm p", "Verdict"]
README_COLUMNS = ["Claim", "Dataset", "Comparison", "Δ (pp) [seed 95% CI]", "Two-level 95% CI", "Paper Δ (pp)",
                  "p (Holm)", "Seeds in direction", "Verdict"]
_PAPER_TABLES = {"image": ("1", "2"), "text": ("3",)}
_CLAIMED = {"greater": "Δ > {t}", "less": "Δ < {t}", "equivalent": "|Δ| < {m}"}


def _signed(v: float, scale: float = 1.0) -> str:
    """``+1.23`` / ``-0.40`` (two decimals, rounded once; −0.00 prints as +0.00); "—" for NaN."""
    if v is None or not math.isfinite(v):
        return "—"
    return f"{round(v * scale, 2) + 0.0:+.2f}"


def paper_clean_accuracy(rep: Report, pub: pd.DataFrame, cfgs: dict[str, dict[str, Any]]
                         ) -> dict[tuple[str, str], float]:
    """The paper's clean accuracy (points) per (dataset, model), for the variant (proj., drop) of the config the
    runs used — the row Tables 1 and 3 show beside ours."""
    out: dict[tuple[str, str], float] = {}
    ev = rep.df[(rep.df["kind"] == "eval") & (rep.df["condition"] == metrics.CLEAN)]
    for (ds, model), g in ev.groupby(["dataset", "model"], sort=True):
        if model not in MODEL_FACTS:
            continue
        hashes = sorted(set(g["config_hash"]) - {""})
        cfg = cfgs.get(hashes[0]) if hashes else None
        proj, drop = paper_variant(cfg["model"] if cfg else None)
        p = published_value(pub, ds, model, tables=_PAPER_TABLES.get(MODEL_FACTS[model].modality, ("1",)),
                            proj=proj, drop=drop)
        if p is not None:
            out[(ds, model)] = float(p["mean"])
    return out


def _registry(rep: Report) -> clm.Registry:
    """The built-in claims, the store's claims.toml, and generic claims for datasets no claim names (synthetic
    data gets these too, then "no claim")."""
    reg = clm.claims_for_store(rep.store_dir)
    named = {c.dataset for c in reg.claims}
    rows = rep.df[(rep.df["kind"] == "eval")]
    for ds in sorted(set(rows["dataset"]) - named - {""}):
        models = set(rows.loc[rows["dataset"] == ds, "model"])
        clm.generic_claims(reg, ds, models)
    return reg


def findings_section(rep: Report, pub: pd.DataFrame, cfgs: dict[str, dict[str, Any]]) -> None:
    """Add the Findings (forest plot, verdicts, claims as registered, sensitivity) to ``rep``."""
    reg = _registry(rep)
    v = vd.compute_verdicts(rep.df, reg, store_dir=rep.store_dir)
    if v.table.empty:
        rep.skip("findings", "Findings", "no claim of the paper can be tested from this store (it needs DGViT "
                 "with ViT or DViT, or DGT with Transformer or DT, evaluated on one dataset)")
        return
    paper = paper_clean_accuracy(rep, pub, cfgs)
    ds_order = {d: i for i, d in enumerate(dict.fromkeys(v.table["dataset"]))}
    t = v.table.assign(_o=[(not c, ds_order[d], not p, i) for i, (c, d, p) in
                           enumerate(zip(v.table["claimed"], v.table["dataset"], v.table["primary"]))])
    t = t.sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)
    clean = {c.id for c in reg.claims if c.statistic == "mean" and c.conditions == (metrics.CLEAN,)}
    t["paper_diff"] = [paper.get((d, m), math.nan) - paper.get((d, b), math.nan) if i in clean else math.nan
                       for i, d, m, b in zip(t["id"], t["dataset"], t["model"], t["baseline"])]
    real = t[~t["synthetic"].astype(bool)]
    rows = rep.df[rep.df["kind"] == "eval"]
    if real.empty:
        rep.collapsed.add("findings")
    labels = {fam: f"F{i}" for i, fam in enumerate(dict.fromkeys(t["family"]), 1)}
    # the forest plot shows the verdicts; synthetic data gets none, so it gets no plot either
    fig = forest_figure(real, [_row_label(r) for r in real.to_dict("records")]) if len(real) else None
    if fig is not None:
        rep.figure("findings", "findings_forest", "Findings at a glance: every claim's Δ, its intervals, the "
                   "paper's Δ and the verdict", fig, rows, caption=_forest_caption(v, real))
    recs = [_row(r, labels) for r in t.to_dict("records")]
    rep.table("findings", "findings_claims", "Findings: one verdict per claim",
              Table(COLUMNS, recs, "Findings: one verdict per claim", _notes(v, t, labels),
                    align="llllllrrrrlrrrrrrrl"), rows)
    rep.artefacts[-1].caption = _lead(v)
    _registry_table(rep, reg, v, rows)
    _sensitivity_table(rep, reg, t, rows)


def _row_label(r: dict[str, Any]) -> str:
    return (f"{display_name(r['model'])} − {display_name(r['baseline'])} · {dataset_label(r['dataset'])} · "
            f"{r['label']} [{_claimed(r)}]")


def _claimed(r: dict[str, Any]) -> str:
    return _CLAIMED[r["direction"]].format(t=f"{r['threshold']:g}", m=f"{r['margin']:g}")


def _row(r: dict[str, Any], labels: dict[str, str]) -> list[str]:
    lev = (f"{fmt_num(r['mean_model'])} / {fmt_num(r['mean_baseline'])}"
           if math.isfinite(r["mean_model"]) else "—")
    ci = f" [{_signed(r['ci_lo'])}, {_signed(r['ci_hi'])}]" if math.isfinite(r["ci_lo"]) else ""
    boot = f"[{_signed(r['boot_lo'])}, {_signed(r['boot_hi'])}]" if math.isfinite(r["boot_lo"]) else "—"
    need = "—"
    if math.isfinite(r["seeds_needed"]):
        need = f"> {int(r['seeds_needed']):,}" if r["seeds_needed_capped"] else f"{int(r['seeds_needed']):,}"
    sign_p = (f"{fmt_p(r['sign_p'])} ({fmt_p(r['sign_p_min'])})" if math.isfinite(r["sign_p"]) else "—")
    camp = fmt_p(r["p_holm_campaign"])
    if r["verdict_campaign"] != r["verdict"]:
        camp += f" → {r['verdict_campaign']}"
    verdict = r["verdict"] + (f" ({r['reason']})" if r["reason"] else "")
    return [r["label"], r["source"], dataset_label(r["dataset"]),
            f"{display_name(r['model'])} − {display_name(r['baseline'])}", _claimed(r), str(int(r["n"])), lev,
            _signed(r["diff"]) + ci, boot, _signed(r["paper_diff"]),
            f"{r['test']} · {labels[r['family']]} ({int(r['family_size'])})", fmt_p(r["p_holm"]),
            fmt_p(r["alpha_used"]), f"{int(r['k'])} of {int(r['n'])}", sign_p, fmt_num(r["mdd"]), need, camp,
            verdict]


def _lead(v: vd.Verdicts) -> str:
    """The sentence a reader needs first: the verdict counts on real data; the synthetic caveat."""
    real = v.table[~v.table["synthetic"].astype(bool)]
    out = []
    if len(real):
        def counts(t: pd.DataFrame) -> str:
            c = t["verdict"].value_counts()
            return ", ".join(f"{int(c.get(w, 0))} {w}" for w in (vd.SUPPORTED, vd.CONTRADICTED, vd.INCONCLUSIVE,
                                                                  vd.NOT_TESTABLE) if c.get(w, 0))
        paper, extra = real[real["claimed"].astype(bool)], real[~real["claimed"].astype(bool)]
        changed = int((real["verdict"] != real["verdict_campaign"]).sum())
        out.append(f"Real data ({', '.join(dataset_label(d) for d in dict.fromkeys(real['dataset']))}): "
                   f"{len(paper)} claim(s) of the paper tested — {counts(paper)}"
                   + (f"; {len(extra)} suite measure(s) the paper does not claim — {counts(extra)}" if len(extra)
                      else "")
                   + f". Under the campaign-wide family ({len(real)} tests) {changed} verdict(s) change.")
    if v.synthetic:
        out.append(vd.SYNTHETIC_SENTENCE + " Synthetic here: " + ", ".join(dataset_label(d) for d in v.synthetic)
                   + ".")
    return " ".join(out)


def _forest_caption(v: vd.Verdicts, real: pd.DataFrame) -> str:
    return ("One row per claim: Δ = gated model − baseline (points; retention: points of clean accuracy kept; "
            "relative mCE: % of the baseline's corruption error), mean over matched seeds; thick bar = 95% "
            "t-interval over seeds, thin bar = two-level bootstrap 95% CI (seeds × test examples, "
            f"{small_n.BOOT_RESAMPLES:,} resamples); ✕ = the paper's Δ where it publishes one; dashed = the claim's "
            "threshold; the label at the right is the verdict. Claims differ in measure, so compare each row with "
            "its own threshold, not rows with each other." + (f" {v.bootstrap_note}." if v.bootstrap_note else ""))


def _family_words(t: pd.DataFrame, fam: str) -> str:
    sub = t[t["family"] == fam]
    return f"{fam} ({int(sub['family_size'].iloc[0])} tests: {', '.join(sub['id'])})"


def _notes(v: vd.Verdicts, t: pd.DataFrame, labels: dict[str, str]) -> list[str]:
    a = f"{v.alpha:g}"
    out = [
        "Δ = gated model − baseline over matched seeds (seed s fixes the training subset and data order of every "
        "model), in the claim's measure (points); Claimed = the direction the sentence asserts, as registered "
        "(see 'Claims as registered').",
        "Test: the one primary test of the claim — paired t over matched seeds (two-sided), or TOST for a claim of "
        f"no difference — Holm-corrected within its family F# (size m). Verdict: {vd.SUPPORTED} = Holm p < {a} AND "
        f"at least {small_n.MIN_SIGN_FRACTION:.0%} of seeds in the claimed direction; {vd.CONTRADICTED} = Holm p "
        f"< {a}, Δ on the other side and at least {small_n.MIN_SIGN_FRACTION:.0%} of seeds there; otherwise "
        f"{vd.INCONCLUSIVE}, with the condition that failed in brackets.",
        "Beside the test, never a gate: Seeds in direction = k of n; Sign-flip p = the exact permutation p over all "
        "2^n sign flips, with the smallest p it can reach at this n in brackets (2/2^n: with 5 seeds 0.062, so it "
        f"can never be < {a}); Two-level 95% CI = percentile bootstrap over seeds and, within each resample, the "
        f"test examples ({small_n.BOOT_RESAMPLES:,} resamples, seed {small_n.BOOT_SEED}): it adds test-set "
        "sampling, which the seed-only t-interval leaves out.",
        f"α used = Holm's threshold for the claim's rank in its family, α/(m − i + 1); MDD = the smallest |Δ| the "
        f"paired t detects with {v.power:.0%} power at that α with these n seeds for the observed SD of the "
        "per-seed differences; Seeds for 80% power (inconclusive claims only) at the same α.",
        "Campaign-wide Holm p = Holm over every claim tested in this report; '→ verdict' marks a verdict that "
        "changes under that family.",
        "Holm families: " + "; ".join(f"{labels[f]} = {_family_words(t, f)}" for f in labels) + ".",
        "Paper Δ: the paper's clean accuracy (published.csv) of the variant the runs used, DG − baseline; the paper "
        "prints no number for the other claims (Figure 4 is a plot). Retention and relative mCE are the suite's "
        "own measures, not claimed by the paper.",
        "The 'Statistical comparisons' section's Welch tests (unpaired) and per-cell tests are sensitivity "
        "analyses of the same data, not separate claims.",
    ]
    if v.untested:
        by_reason: dict[str, list[str]] = {}
        for c, why in v.untested:
            by_reason.setdefault(why, []).append(f"{c.id} ({c.label or c.source})")
        out.append("Not tested: " + "; ".join(f"{why}: {', '.join(ids)}" for why, ids in by_reason.items()) + ".")
    return out


def _registry_table(rep: Report, reg: clm.Registry, v: vd.Verdicts, rows: pd.DataFrame) -> None:
    """Every claim as registered: its sentence, where, primary/secondary, family, the operationalisation."""
    tested = set(v.table["id"])
    recs = []
    for c in reg.claims:
        if c.id in tested or c.testable:
            recs.append([c.id, c.source, f"“{c.quote}”" if c.quote else clm.NOT_CLAIMED,
                         "primary" if c.primary else "secondary", c.family or "—",
                         c.operationalisation or "—", c.testable or "tested"])
    for src, quote in (clm.NOT_TESTABLE_HERE if "cifar10" in set(v.table["dataset"]) else ()):
        recs.append(["cifar100 (Figure 4b)", src, f"“{quote}”", "secondary", "—", "—", clm.NOT_TESTABLE_REASON])
    cols = ["Claim id", "Source", "The paper's sentence", "Role", "Family", "Operationalisation (written before "
            "the results)", "Status"]
    rep.table("findings", "findings_registry", "Claims as registered",
              Table(cols, recs, "Claims as registered",
                    ["From the claim registry (robustbench_dgsa/analysis/claims.py) and the store's claims.toml; "
                     "a claim's test follows from its operationalisation."], align="lllllll"), rows)


def _sensitivity_table(rep: Report, reg: clm.Registry, t: pd.DataFrame, rows: pd.DataFrame) -> None:
    """Labelled sensitivity analyses (no verdicts): mCA / mNA claims per severity; the two-sided t reading of an
    equivalence claim."""
    recs = []
    by_id = {c.id: c for c in reg.claims}
    cells_by: dict[str, vd.Cells] = {}
    for r in t[~t["synthetic"].astype(bool)].to_dict("records"):
        c = by_id[r["id"]]
        if c.direction == "equivalent" and math.isfinite(r["sens_p"]):
            recs.append([r["label"], dataset_label(r["dataset"]), f"{display_name(c.model)} − "
                         f"{display_name(c.baseline)}", "two-sided paired t ('no significant difference')",
                         _signed(r["diff"]), fmt_p(r["sens_p"]), f"{int(r['k'])} of {int(r['n'])}"])
        if c.statistic == "mean" and c.conditions in ((clm.BENCHMARK,), (clm.NOISE,)):
            cells = cells_by.setdefault(c.dataset, vd.dataset_cells(metrics.eval_rows(rep.df), c.dataset))
            for s, rec in vd.severity_sensitivity(c, cells):
                recs.append([f"{r['label']} at severity {s}", dataset_label(r["dataset"]),
                             f"{display_name(c.model)} − {display_name(c.baseline)}", "paired t, unadjusted",
                             _signed(rec["diff"]) + f" [{_signed(rec['ci_lo'])}, {_signed(rec['ci_hi'])}]",
                             fmt_p(rec["p"]), f"{int(rec['k'])} of {int(rec['n'])}"])
    if recs:
        cols = ["Analysis", "Dataset", "Comparison", "Test", "Δ (pp) [seed 95% CI]", "p (unadjusted)",
                "Seeds in direction"]
        rep.table("findings", "findings_sensitivity", "Sensitivity analyses (no verdicts)",
                  Table(cols, recs, "Sensitivity analyses (no verdicts)",
                        ["Each row re-reads one claim's data another way; none is a claim and none gets a verdict. "
                         "p-values are unadjusted."], align="llllrrr"), rows)


def cut_columns(markdown: str, columns: list[str], drop_source: str | None = clm.NOT_CLAIMED) -> str:
    """The Markdown table ``markdown`` restricted to ``columns`` (cell text unchanged), less the rows whose Source
    is ``drop_source``: how README's "What we found" table is cut from findings_claims.md."""
    lines = [ln for ln in markdown.splitlines() if ln.startswith("|")]
    split = lambda ln: [c.strip() for c in ln.strip().strip("|").split(" | ")]  # noqa: E731
    head = split(lines[0])
    esc = lambda c: c.replace("[", "\\[").replace("]", "\\]")  # noqa: E731
    keep = [head.index(c) if c in head else head.index(esc(c)) for c in columns]
    src = head.index("Source")
    out = ["| " + " | ".join(head[i] for i in keep) + " |", "|" + "|".join(":--" for _ in keep) + "|"]
    out += ["| " + " | ".join(split(ln)[i] for i in keep) + " |" for ln in lines[2:]
            if split(ln)[src] != drop_source]
    return "\n".join(out)
