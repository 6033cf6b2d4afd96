"""The report's attention-rollout section: Figures 2 (images) and 3 (text) drawn from the rollout sets stored
in the results store (never re-running a model), and the rollout numbers (salient mass, drift under
corruption)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from robustbench_dgsa.models.registry import model_order
from robustbench_dgsa.report.labels import condition_label, condition_order, dataset_label, display_name, seed_words
from robustbench_dgsa.report.tables import Table, fmt_mean_sd, fmt_num
from robustbench_dgsa.rollout.plots import render_figure2, render_figure3
from robustbench_dgsa.rollout.runs import load_rollout_sets
from robustbench_dgsa.store import rollouts_dir
from robustbench_dgsa.util.paths import safe_name
from robustbench_dgsa.util.provenance import sha256_file

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report


def rollout_figures(rep: Report) -> None:
    """Figures 2 and 3 from the rollout sets stored under ``<store>/rollouts`` (never re-running a model)."""

    allowed = set(rep.df["dataset"])
    sets = [s for s in load_rollout_sets(rep.store_dir) if s.dataset in allowed]
    for kind, fig_no in (("image", 2), ("text", 3)):
        dsets = sorted({s.dataset for s in sets if s.kind == kind})
        if not dsets:
            rep.skip("rollout", f"Figure {fig_no}",
                     f"no stored {kind} rollout sets in {rep.rel(rollouts_dir(rep.store_dir))}")
        for ds in dsets:
            label = dataset_label(ds)
            stem = safe_name(f"fig{fig_no}_rollout_{ds}")
            png, pdf = rep.out_dir / f"{stem}.png", rep.out_dir / f"{stem}.pdf"
            files = {"PNG": png.name, "PDF": pdf.name}
            if kind == "image":
                desc = render_figure2(sets, png, pdf, dataset=ds, max_images=4)
                caption = (f"Attention rollout on {label}. Rows: test images (true class at the left); columns: "
                           "the image, then each model's rollout overlaid, with the rollout mode in brackets. One "
                           "scale per model column (colour bar below it): signed modes use the diverging map, "
                           "symmetric about 0 (white = 0, red = excitatory, blue = inhibitory); positive modes the "
                           "sequential viridis map (dark = lowest).")
                if desc is not None and desc.get("salient_outlined"):
                    caption += " Dashed outline: the known salient region of the synthetic image."
            else:
                html_path = rep.out_dir / f"{stem}.html"
                desc = render_figure3(sets, png, pdf, html_path, dataset=ds)
                files["HTML"] = html_path.name
                caption = ("One test text, tokens shaded by each model's rollout relevance (the HTML version shows "
                           "each token's score on hover). Signed modes: diverging map, white = 0, red = positive, "
                           "blue = negative; positive modes: sequential map, white = lowest.")
                if desc is not None:
                    caption = f"{label} test example {desc['index']} (true label: {desc['label']}). " + caption
            if desc is None:
                continue
            caption += " " + _shown_seeds(desc)
            rows = rep.df[rep.df["run_id"].isin(desc["runs"])]
            extra = {"rollout_sets": [{"file": rep.rel(f), "sha256": sha256_file(f)} for f in desc["files"]],
                     "figure": {k: v for k, v in desc.items() if k != "files"}}
            rep.files("rollout", stem, f"Figure {fig_no} — {label}", files, rows, caption, image=png.name,
                      extra=extra)


def _shown_seeds(desc: dict[str, Any]) -> str:
    """Which trained model (seed) each column of a rollout figure shows."""
    seeds = list(desc.get("seeds") or [])
    if not seeds:
        return ""
    if len(set(seeds)) == 1:
        return f"Every column shows the model trained with seed {seeds[0]} (one seed, not an average over seeds)."
    return "Seeds shown: " + ", ".join(f"{display_name(m)} seed {s}" for m, s in zip(desc["models"], seeds)) + "."


def rollout_numbers(rep: Report) -> None:
    ro = rep.df[rep.df["kind"] == "rollout"]
    if ro.empty or not ro["metric"].isin(["rollout_mass", "rollout_drift"]).any():
        rep.skip("rollout", "Rollout numbers", "no rollout rows (salient mass / drift) in the store")
        return
    ro = ro.assign(mode=[src.split("|")[0] for src in ro["source"]])

    def cell(g: pd.DataFrame, m: str, digits: int = 3) -> str:
        v = g.loc[g["model"] == m].groupby("seed")["value"].mean().to_numpy(float)
        v = v[np.isfinite(v)]
        if not len(v):
            return "—"
        return fmt_mean_sd(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else None, digits)

    for ds, d in ro.groupby("dataset", sort=True):
        label = dataset_label(ds)
        over, title_seeds = seed_words(sorted(set(d.loc[d["metric"].isin(["rollout_mass", "rollout_drift"]),
                                                           "seed"])))
        mass = d[d["metric"] == "rollout_mass"]
        chance = d[d["metric"] == "rollout_mass_chance"]
        if len(mass):
            models = model_order(mass["model"])
            recs = []
            for mode, g in mass.groupby("mode", sort=True):
                ch = chance.loc[chance["mode"] == mode, "value"]
                recs.append([mode, fmt_num(float(ch.mean()), 3) if len(ch) else "—"] + [cell(g, m) for m in models])
            title = f"Rollout salient mass: {label}{title_seeds}"
            notes = ["Fraction of the rollout's positive relevance inside the known salient region (images) or "
                     "tokens (text) of the synthetic test set; chance = the salient share of the input (what a "
                     f"uniform map scores). Higher = more focused on the signal. {over} Mode (docs/METHODS.md, "
                     "Attention rollout): positive = positive part, comparable across models; signed = L1-normalised "
                     "signed rollout "
                     "(the differential models' default); '—' = mode not run for that model."]
            t = Table(["Mode", "Chance"] + [display_name(m) for m in models], recs, title, notes)
            rep.table("rollout", f"rollout_mass_{ds}", title, t, pd.concat([mass, chance]).drop(columns="mode"))
        drift = d[d["metric"] == "rollout_drift"]
        if len(drift):
            models = model_order(drift["model"])
            per_cond = drift.groupby(["mode", "model", "seed", "condition"], as_index=False)["value"].mean()
            recs = []
            for mode, g in per_cond.groupby("mode", sort=True):
                for c in condition_order(g["condition"], "image") + ["all"]:
                    gc = g if c == "all" else g[g["condition"] == c]
                    recs.append([mode, "mean of all" if c == "all" else condition_label(rep, ds, c)]
                                + [cell(gc, m) for m in models])
            title = f"Rollout drift under corruption: {label}{title_seeds}"
            notes = ["Pearson correlation between each image's clean and corrupted rollout map (patch grid), "
                     f"averaged over images and severities. {over} 1 = the map did not move; "
                     "lower = the corruption moved the model's attention more."]
            t = Table(["Mode", "Corruption"] + [display_name(m) for m in models], recs, title, notes,
                      align="ll" + "r" * len(models))
            rep.table("rollout", f"rollout_drift_{ds}", title, t, drift.drop(columns="mode"))
