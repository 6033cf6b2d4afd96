"""Figure 4 (accuracy vs severity per corruption or noise type, one line per model) and Figure 5 (training and
validation curves per model), each with a 95% t-interval band over seeds."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.analysis.plateau import GAIN_POINTS, WINDOW, plateau_table
from robustbench_dgsa.models.registry import model_order
from robustbench_dgsa.report.figures import curves_figure, severity_figure
from robustbench_dgsa.report.labels import (ACC_SCALE, PROCEDURAL_FROST_NOTE, condition_label, condition_order,
                                            dataset_label, model_labels)

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report


_SOURCE_LABELS = {"regenerated": "CIFAR-C corruptions, regenerated", "on-the-fly": "CIFAR-C corruptions, on the fly",
                  "official": "official CIFAR-C files"}


def severity_figures(rep: Report, datasets: dict[str, str]) -> None:
    for ds, modality in datasets.items():
        title_short = f"Figure 4 — {dataset_label(ds)}"
        rows = metrics.eval_rows(rep.rows_of(ds), dataset=ds)
        if rows.empty or not (rows["condition"] != metrics.CLEAN).any():
            rep.skip("severity", title_short, "no corrupted / noisy evaluation rows")
            continue
        rows = rows.assign(value=rows["value"] * ACC_SCALE)
        clean = rows[rows["condition"] == metrics.CLEAN]
        cor = rows[(rows["condition"] != metrics.CLEAN) & (rows["severity"] >= 1)]
        conds = condition_order(cor["condition"], modality)
        models = model_order(rows["model"])
        if modality == "text":
            mean_panel = (f"mean of {len(conds)} noise types", conds)
            cond_labels = {c: c.replace("_", " ") for c in conds}
            what = "text noise"
        else:
            bench = [c for c in conds if c in metrics.BENCHMARK_CORRUPTIONS]
            mean_panel = (f"mean of {len(bench)} benchmark corruptions", bench) if bench else None
            cond_labels = {c: condition_label(rep, ds, c) + (" (extra)" if c in metrics.EXTRA_CORRUPTIONS else "")
                           for c in conds}
            srcs = sorted(set(cor["source"]) - {""})
            what = ", ".join(_SOURCE_LABELS.get(s, s) for s in srcs) or "corruptions"
        seeds = sorted(set(rows["seed"]))
        title = (f"{dataset_label(ds)}: accuracy vs severity ({what}); "
                 f"mean and 95% t-interval over {len(seeds)} seed{'s' if len(seeds) != 1 else ''}.")
        fig = severity_figure(cor, clean, conds, models, labels=model_labels(models),
                              mean_panel=mean_panel, condition_labels=cond_labels)
        if fig is None:
            rep.skip("severity", title_short, "nothing to draw")
            continue
        d = rep.rows_of(ds)
        raw = d[(d["kind"] == "eval") & (d["metric"] == "accuracy")]
        caption = (f"{title} One panel per {'noise type' if modality == 'text' else 'corruption'} "
                   f"(severity 0 = clean), one line per model, band = 95% t-interval over seeds (clipped to "
                   f"[0, 100] %, where a symmetric interval would leave it; the axis spans the data). ")
        if mean_panel:
            caption += (f"The first panel (bold) is the per-seed mean over the "
                        f"{mean_panel[0].split('of ')[-1]}.")
        if "frost" in conds and rep.procedural_frost(ds):
            caption += f" {PROCEDURAL_FROST_NOTE}"
        rep.figure("severity", f"fig4_severity_{ds}", title_short, fig, raw, caption)


def curve_figures(rep: Report, datasets: dict[str, str]) -> None:
    for ds in datasets:
        title_short = f"Figure 5 — {dataset_label(ds)}"
        tr = rep.rows_of(ds)
        tr = tr[(tr["kind"] == "train") & (tr["epoch"] >= 0)]
        sub = tr[tr["metric"].isin(["loss", "accuracy"]) & tr["split"].isin(["train", "val"])]
        if sub.empty:
            rep.skip("curves", title_short, "no per-epoch training rows")
            continue
        sub = sub.sort_values("created", kind="stable").drop_duplicates(
            ["model", "seed", "split", "metric", "epoch"], keep="last")
        plot = sub.assign(value=np.where(sub["metric"] == "accuracy", sub["value"] * ACC_SCALE, sub["value"]))
        models = model_order(sub["model"])
        seeds = sorted(set(sub["seed"]))
        title = (f"{dataset_label(ds)}: training (dashed) and validation (solid) curves; "
                 f"mean and 95% t-interval over {len(seeds)} seed{'s' if len(seeds) != 1 else ''}.")
        fig = curves_figure(plot, models, labels=model_labels(models))
        if fig is None:
            rep.skip("curves", title_short, "nothing to draw")
            continue
        rep.figure("curves", f"fig5_curves_{ds}", title_short, fig, sub,
                   f"{title} Loss and accuracy per epoch on the training and validation splits; colour and "
                   f"marker = model. {plateau_sentence(tr)}")


def plateau_sentence(train_rows) -> str:
    """Where each model's validation accuracy stopped rising (the second campaign's stopping rule), one clause
    per model: the plateau epoch (the median over seeds) of the epochs run."""
    t = plateau_table(train_rows)
    if t.empty:
        return ""
    parts = []
    for m in model_order(t["model"]):
        g = t[t["model"] == m]
        reached, n = g["plateau"].dropna(), int(g["epochs"].max())
        when = f"not reached in {n} epochs" if reached.empty else f"epoch {int(reached.median())} of {n}"
        if 0 < len(reached) < len(g):
            when += f" (in {len(reached)} of {len(g)} seeds)"
        parts.append(f"{model_labels([m])[m]}: {when}")
    return (f"Plateau (first epoch whose validation accuracy gained < {GAIN_POINTS:g} points over the previous "
            f"{WINDOW} epochs{', median over seeds' if t['seed'].nunique() > 1 else ''}): " + "; ".join(parts) + ".")
