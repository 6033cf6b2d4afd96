"""The forest plot that opens Findings: one row per claim, Δ with its seed-only 95% t-interval (thick) and its
two-level bootstrap 95% CI (thin), the paper's Δ (✕) where it publishes one, the claim's threshold (dashed) and
the verdict as the row's label at the right. Style and saver: :mod:`robustbench_dgsa.util.figures`."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from robustbench_dgsa.report.figures import style
from robustbench_dgsa.util.figures import grow_to_fit_texts

VERDICT_COLOURS = {"supported": "#1a7f37", "contradicted": "#b42318"}
GREY = "#5a6270"


def _finite(*vals: float) -> list[float]:
    return [float(v) for v in vals if v is not None and math.isfinite(float(v))]


def forest_figure(t: pd.DataFrame, labels: Sequence[str]) -> Figure | None:
    """``t``: verdict rows (diff, ci_lo, ci_hi, boot_lo, boot_hi, paper_diff, threshold, direction, margin,
    verdict, reason); ``labels``: one row label each. None when there is nothing to draw."""
    if t.empty:
        return None
    recs = t.to_dict("records")
    n = len(recs)
    xs = [x for r in recs for x in _finite(r["diff"], r["ci_lo"], r["ci_hi"], r["boot_lo"], r["boot_hi"],
                                           r["paper_diff"], r["threshold"])]
    lo, hi = (min(xs), max(xs)) if xs else (-1.0, 1.0)
    pad = 0.06 * max(hi - lo, 1.0)
    with style():
        height = 0.8 + 0.27 * n
        width = max(10.5, 6.0 + 0.06 * max(len(str(lab)) for lab in labels))    # 7.5 pt labels: ~0.06 in a char
        fig = Figure(figsize=(width, height + 0.4), layout="constrained")   # room for labels, verdicts, legend
        ax = fig.add_subplot()
        y = np.arange(n)[::-1]
        for yi, r in zip(y, recs):
            colour = VERDICT_COLOURS.get(r["verdict"], GREY)
            if math.isfinite(r["boot_lo"]):
                ax.plot([r["boot_lo"], r["boot_hi"]], [yi, yi], color=colour, linewidth=1.0, alpha=0.8)
            if math.isfinite(r["ci_lo"]):
                ax.plot([r["ci_lo"], r["ci_hi"]], [yi, yi], color=colour, linewidth=3.2, alpha=0.55,
                        solid_capstyle="butt")
            ax.plot([r["diff"]], [yi], "o", color=colour, markersize=4)
            if math.isfinite(r["paper_diff"]):
                ax.plot([r["paper_diff"]], [yi], "x", color="black", markersize=5)
            ref = [-r["margin"], r["margin"]] if r["direction"] == "equivalent" else [r["threshold"]]
            for x in ref:
                ax.plot([x, x], [yi - 0.4, yi + 0.4], color="black", linestyle="--", linewidth=0.7)
            ax.text(1.02, yi, r["verdict"], transform=ax.get_yaxis_transform(), va="center", fontsize=7.5,
                    color=colour)
        ax.axvline(0.0, color="#9aa3ad", linewidth=0.6, zorder=0)
        ax.set_yticks(y)
        ax.set_yticklabels(list(labels), fontsize=7.5)
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_xlabel("Δ = gated model − baseline (points)")
        fig.legend(handles=_legend_handles(), loc="outside lower center", ncols=4, fontsize=7.5, frameon=False)
    return grow_to_fit_texts(fig)


def _legend_handles() -> list[Line2D]:
    """What the marks mean (the colours are the verdicts, written at each row's right)."""
    return [Line2D([], [], color=GREY, linewidth=3.2, alpha=0.55, label="Δ with its seed-only 95% CI"),
            Line2D([], [], color=GREY, linewidth=1.0, label="two-level bootstrap 95% CI (seeds × test examples)"),
            Line2D([], [], color="black", marker="x", linestyle="none", label="the paper's Δ"),
            Line2D([], [], color="black", linestyle="--", linewidth=0.7, label="the claim's threshold / margin")]
