"""The robustness summary per dataset: clean accuracy, mCA, mCE, retention, corruption groups and the extra
corruptions (images) or mNA (text); the corruption error relative to a reference model; for text, the realised
character / word error rates beside each model's accuracy."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.models.registry import model_order, reference_model
from robustbench_dgsa.report.labels import (ACC_SCALE, FROST_GROUP, PROCEDURAL_FROST_NOTE, condition_label,
                                            condition_order, dataset_label, display_name, seed_words)
from robustbench_dgsa.report.tables import Table, fmt_mean_sd, fmt_num

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report


def robustness_tables(rep: Report, datasets: dict[str, str], reference: str | None) -> None:
    for ds, modality in datasets.items():
        title = f"Robustness summary: {dataset_label(ds)}"
        d = rep.rows_of(ds)
        rows = metrics.eval_rows(d, dataset=ds)
        if rows.empty or not (rows["condition"] != metrics.CLEAN).any():
            rep.skip("robustness", title, "no corrupted / noisy evaluation rows")
            continue
        summ = metrics.robustness_summary(d, dataset=ds, partial=True)
        models = model_order(summ["model"])
        raw = d[d["kind"] == "eval"]

        def ms(model: str, col: str, scale: float = ACC_SCALE) -> str:
            v = summ.loc[summ["model"] == model, col].astype(float).dropna().to_numpy() * scale
            if not len(v):
                return "—"
            return fmt_mean_sd(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else None)

        over, title_seeds = seed_words(sorted(set(rows["seed"])))
        title += title_seeds
        notes = [f"{over} Accuracies in %.",
                 "† Retention = robust accuracy / clean accuracy, in %: a ratio, not a ranking of robustness — it "
                 "favours a weak model (a model at chance accuracy keeps 100 % of it under any corruption); read it "
                 "beside Clean and mCA / mNA."]
        if modality == "image":
            frost = rep.procedural_frost(ds) and (rows["condition"] == "frost").any()
            mark = (lambda c: f"{c}‡") if frost else (lambda c: c)  # noqa: E731
            cols = ["Model", "Clean", mark("mCA"), mark("mCE"), "Retention†",
                    *(mark(g) if g == FROST_GROUP else g for g in metrics.CORRUPTION_GROUPS),
                    f"extra ({len(metrics.EXTRA_CORRUPTIONS)})"]
            if frost:
                notes.append(f"‡ {PROCEDURAL_FROST_NOTE}")
            recs = []
            for m in models:
                recs.append([display_name(m), ms(m, "clean"), ms(m, "mCA"), ms(m, "mCE"), ms(m, "retention"),
                             *(ms(m, g) for g in metrics.CORRUPTION_GROUPS), ms(m, "extra")])
            cells = summ["mCA_cells"].max()
            if (~summ["mCA_complete"]).any():
                notes.append(f"mCA over the benchmark cells present ({int(cells)} of 75): not comparable with a "
                             "full 15 × 5 mCA. Missing: " + str(summ.loc[~summ["mCA_complete"], "mCA_missing"]
                                                                   .iloc[0])[:300])
            notes.append("mCE is unnormalised (1 − mCA). Groups: Hendrycks & Dietterich's noise / blur / weather / "
                         "digital; the 4 extra corruptions never enter mCA.")
        else:
            cols = ["Model", "Clean", "mNA", "Retention†"]
            recs = [[display_name(m), ms(m, "clean"), ms(m, "mNA"), ms(m, "retention")] for m in models]
            if (~summ["mNA_complete"]).any():
                notes.append("mNA over the noise cells present (some types/severities missing).")
            notes.append("mNA = mean accuracy over the noise types present × severities 1–5.")
        t = Table(cols, recs, title, notes)
        rep.table("robustness", f"robustness_{ds}", title, t, raw)
        if modality == "image":
            ref = reference if reference in models else reference_model(models, modality)
            if ref is not None and ref in models:
                rep.attempt("robustness", f"Relative CE ({dataset_label(ds)})",
                            lambda ds=ds, ref=ref, raw=raw: _relative_ce(rep, ds, ref, raw))
        else:
            _text_noise_table(rep, ds, raw)


def _relative_ce(rep: Report, ds: str, ref: str, raw: pd.DataFrame) -> None:
    per, summary = metrics.reference_ce(rep.rows_of(ds), ref, dataset=ds)
    if per.empty:
        rep.skip("robustness", f"Relative CE ({dataset_label(ds)})", "no benchmark corruption cells")
        return
    conds = condition_order(per["corruption"], "image")
    models = model_order(per["model"])
    ce = {(r.model, r.corruption): r.ce for r in per.itertuples(index=False)}
    rel = dict(zip(summary["model"], summary["rel_mCE"]))
    recs = [["rel. mCE (mean)"] + [fmt_num(float(rel[m]) * 100, 1) if m in rel else "—" for m in models]]
    for c in conds:
        recs.append([condition_label(rep, ds, c)] + [fmt_num(float(ce[(m, c)]) * 100, 1) if (m, c) in ce else "—"
                                                      for m in models])
    title = f"Corruption error relative to {display_name(ref)}: {dataset_label(ds)}"
    notes = [f"CE_c = Σ_s err_model(c, s) / Σ_s err_{display_name(ref)}(c, s) on seed-averaged errors, in %; "
             f"rel. mCE = mean CE over the benchmark corruptions present. The reference is a user choice; "
             f"this is not the AlexNet-normalised mCE."]
    if not summary["complete"].all():
        notes.append("Not all 15 benchmark corruptions × 5 severities are present: rel. mCE is partial.")
    if "frost" in conds and rep.procedural_frost(ds):
        recs[0][0] += "‡"
        notes.append(f"‡ {PROCEDURAL_FROST_NOTE}")
    t = Table(["Corruption"] + [display_name(m) for m in models], recs, title, notes)
    rep.table("robustness", f"relative_ce_{ds}", title, t, raw)


def _text_noise_table(rep: Report, ds: str, raw: pd.DataFrame) -> None:
    title = f"Text noise: realised error rates and accuracy ({dataset_label(ds)})"
    d = rep.rows_of(ds)
    acc = metrics.cell_accuracy(d, dataset=ds, kinds=["text"])
    if acc.empty:
        return
    rates = {}
    for metric in ("cer", "wer"):
        r = metrics.eval_rows(d, dataset=ds, metric=metric)
        r = r[r["condition"] != metrics.CLEAN]
        rates[metric] = r.groupby(["condition", "severity"])["value"].mean()
    by = acc.groupby(["condition", "severity", "model"])["value"].mean().unstack("model")
    models = model_order(acc["model"])
    recs = []
    for (cond, sev) in sorted(by.index, key=lambda k: (condition_order(acc["condition"], "text").index(k[0]), k[1])):
        row = [cond.replace("_", " "), str(int(sev))]
        for metric in ("cer", "wer"):
            s = rates[metric]
            row.append(fmt_num(float(s.loc[(cond, sev)]) * 100, 1) if (cond, sev) in s.index else "—")
        for m in models:
            v = by.loc[(cond, sev)].get(m, float("nan"))
            row.append(fmt_num(float(v) * ACC_SCALE, 1))
        recs.append(row)
    notes = ["CER / WER: realised character / word error rate of the noisy test texts against the clean ones, "
             "in %, averaged over the runs that measured it; accuracy: mean over seeds, in %."]
    t = Table(["Noise", "Severity", "CER (%)", "WER (%)"] + [f"{display_name(m)} acc. (%)" for m in models],
              recs, title, notes, align="lr" + "r" * (2 + len(models)))
    rep.table("robustness", f"text_noise_{ds}", title, t, raw)
