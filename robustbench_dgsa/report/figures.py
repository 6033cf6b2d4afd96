"""Figure recipes of the report: fixed style, deterministic output, PNG + PDF.

Every recipe takes tidy rows from the results store (never a model) and returns a matplotlib
:class:`~matplotlib.figure.Figure`, or ``None`` when the rows hold nothing to draw. Colours, markers and line
styles come from the model facts table (:data:`robustbench_dgsa.models.registry.MODEL_FACTS`); the style and
the saver are :mod:`robustbench_dgsa.util.figures` (matplotlib defaults + our style at draw and save time,
PNG at 200 dpi + vector PDF, byte-identical across re-runs). Figures carry no title: the report's caption
says what they show. Lines with bands (Figures 4 and 5) are drawn by ``seaborn.lineplot`` from the per-seed rows:
the mean over seeds and a 95% t-interval over seeds (:func:`robustbench_dgsa.analysis.stats.t_interval`, a
deterministic interval — no bootstrap), in each model's own colour, marker and line style.
"""
from __future__ import annotations

import math
import textwrap
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from robustbench_dgsa.analysis.stats import t_interval
from robustbench_dgsa.models.registry import model_styles
from robustbench_dgsa.util.figures import save_figure, style

__all__ = ["curves_figure", "grid_figure", "save_figure", "severity_figure", "style"]

SPLIT_STYLE = {"train": "--", "val": "-"}


def grid_figure(nrows: int, ncols: int, *, panel: tuple[float, float], left: float = 0.6, right: float = 0.2,
                top: float = 0.9, bottom: float = 0.5, wgap: float = 0.3, hgap: float = 0.55,
                sharex: bool = False, sharey: bool = False) -> tuple[Figure, np.ndarray]:
    """A figure of nrows × ncols panels of ``panel`` (w, h) inches with fixed margins in inches.

    Fixed geometry instead of tight_layout / bbox "tight": one draw per saved file instead of three.
    """
    pw, ph = panel
    width = left + right + ncols * pw + (ncols - 1) * wgap
    height = top + bottom + nrows * ph + (nrows - 1) * hgap
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=sharex, sharey=sharey)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wgap / pw, hspace=hgap / ph)
    return fig, axes


def _per_seed(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One value per seed and ``keys`` (repeated rows are averaged)."""
    return df.groupby(keys + ["seed"], sort=True)["value"].mean().reset_index()


def _ci95(values) -> tuple[float, float]:
    """The band: a 95% t-interval over seeds (a point for one seed)."""
    m, _, lo, hi = t_interval(values)
    return (m, m) if not np.isfinite(lo) else (lo, hi)


def _bounded_ci95(bounds: tuple[float, float]):
    """The band, clipped to ``bounds`` (accuracy: [0, 100]): a t-interval is symmetric and knows no bound."""
    def ci(values) -> tuple[float, float]:
        lo, hi = _ci95(values)
        return max(lo, bounds[0]), min(hi, bounds[1])
    return ci


def _lines(ax, per_seed: pd.DataFrame, x: str, sty, linestyle=None,
           bounds: tuple[float, float] | None = None) -> None:
    """One model's line (mean over seeds) and band (95% t-interval, clipped to ``bounds``) with seaborn, in the
    model's style."""
    import seaborn as sns
    colour, marker, ls = sty
    if per_seed.empty:
        return
    many = per_seed.groupby(x)["seed"].nunique().max() > 1
    band = (_bounded_ci95(bounds) if bounds else _ci95) if many else None
    sns.lineplot(data=per_seed, x=x, y="value", estimator="mean", errorbar=band, ax=ax,
                 color=colour, marker=marker, linestyle=linestyle or ls, markeredgewidth=0, sort=True,
                 err_kws={"alpha": 0.15, "linewidth": 0}, legend=False)
    ax.set_xlabel("")
    ax.set_ylabel("")


def _legend_on_top(fig: Figure, handles: list[Line2D], ncol: int | None = None) -> None:
    """The legend above the panels (panel titles included): grows the figure's top margin to fit, keeping the
    panels' size. The legend wraps into rows of at most ``ncol`` entries."""
    ncol = ncol or min(len(handles), 4)
    rows = math.ceil(len(handles) / ncol)
    height = fig.get_figheight()
    legend_h, panel_title_h = 0.08 + 0.2 * rows, 0.42
    old_top = (1 - fig.subplotpars.top) * height
    new_top = legend_h + panel_title_h
    new_height = height - old_top + new_top
    bottom = fig.subplotpars.bottom * height
    fig.set_figheight(new_height)
    fig.subplots_adjust(top=1 - new_top / new_height, bottom=bottom / new_height)
    fig.legend(handles=handles, loc="upper center", ncol=ncol, frameon=False, borderaxespad=0,
               bbox_to_anchor=(0.5, 1 - 0.05 / new_height), handlelength=2.6)


def _legend_handles(models: Sequence[str], labels: dict[str, str], styles: dict) -> list[Line2D]:
    return [Line2D([], [], color=styles[m][0], marker=styles[m][1], linestyle=styles[m][2], label=labels.get(m, m))
            for m in models]


def _panel_title(text: str, width_in: float) -> str:
    """Wrap a panel title to the panel's width (about 15 characters per inch at 9 pt)."""
    return "\n".join(textwrap.wrap(text, width=max(12, int(width_in * 15)))) or text


def severity_figure(acc: pd.DataFrame, clean: pd.DataFrame, conditions: Sequence[str], models: Sequence[str],
                    *, labels: dict[str, str], mean_panel: tuple[str, Sequence[str]] | None = None,
                    condition_labels: dict[str, str] | None = None, ylabel: str = "accuracy (%)",
                    ncols: int = 5, bounds: tuple[float, float] = (0.0, 100.0)) -> Figure | None:
    """Figure 4: accuracy vs severity, one panel per condition, one line per model, 95% t-interval band over
    seeds (seaborn), clipped to ``bounds``; the y axis spans the data (values and bands) plus a margin, never
    beyond ``bounds``.

    ``acc``: rows (model, seed, condition, severity, value) with value in percent, severity 1..5;
    ``clean``: rows (model, seed, value) drawn at severity 0 of every panel. ``mean_panel`` =
    (title, conditions) adds a first panel with the per-seed mean over those conditions.
    """
    conditions = [c for c in conditions if (acc["condition"] == c).any()]
    if not conditions or acc.empty:
        return None
    models = [m for m in models if (acc["model"] == m).any()]
    styles = model_styles(models)
    condition_labels = condition_labels or {}
    panels: list[tuple[str, pd.DataFrame]] = []
    if mean_panel is not None:
        ptitle, pconds = mean_panel
        sub = acc[acc["condition"].isin(list(pconds))]
        if not sub.empty:
            per_seed = sub.groupby(["model", "seed", "severity"], sort=True)["value"].mean().reset_index()
            panels.append((ptitle, per_seed))
    for c in conditions:
        panels.append((condition_labels.get(c, c), acc[acc["condition"] == c]))

    clean_seeds = _per_seed(clean, ["model"]).assign(severity=0) if not clean.empty else None
    ncols = max(1, min(ncols, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    pw = 2.1
    with style():
        fig, axes = grid_figure(nrows, ncols, panel=(pw, 1.55), left=0.62, right=0.15, top=0.5, bottom=0.5,
                                wgap=0.22, hgap=0.75, sharex=True, sharey=True)
        for i, (ptitle, data) in enumerate(panels):
            ax = axes[i // ncols][i % ncols]
            seeds = _per_seed(data, ["model", "severity"])
            if clean_seeds is not None:
                seeds = pd.concat([clean_seeds[clean_seeds["model"].isin(set(seeds["model"]))], seeds])
            for m in models:
                _lines(ax, seeds[seeds["model"] == m], "severity", styles[m], bounds=bounds)
            ax.set_title(_panel_title(ptitle, pw),
                         fontweight="bold" if (mean_panel is not None and i == 0) else "normal")
            ax.set_xticks(range(0, 6))
            ax.set_xticklabels(["clean", "1", "2", "3", "4", "5"])
            ax.set_xlim(-0.3, 5.3)
        for j in range(len(panels), nrows * ncols):
            axes[j // ncols][j % ncols].set_visible(False)
        axes[0][0].set_ylim(*_data_ylim(axes, len(panels), ncols, bounds))
        for r in range(nrows):
            axes[r][0].set_ylabel(ylabel)
        for cidx in range(ncols):
            # the lowest visible panel of each column carries the x label and tick labels
            for r in reversed(range(nrows)):
                if r * ncols + cidx < len(panels):
                    axes[r][cidx].set_xlabel("severity")
                    axes[r][cidx].xaxis.set_tick_params(labelbottom=True)
                    break
        _legend_on_top(fig, _legend_handles(models, labels, styles))
    return fig


def _data_ylim(axes, n_panels: int, ncols: int, bounds: tuple[float, float]) -> tuple[float, float]:
    """The y range of what the panels drew (lines and bands), with a 4 % margin, inside ``bounds``."""
    lo, hi = math.inf, -math.inf
    for i in range(n_panels):
        ax = axes[i // ncols][i % ncols]
        for art in list(ax.lines) + list(ax.collections):
            if hasattr(art, "get_ydata"):
                y = np.asarray(art.get_ydata(), float)
            else:
                paths = art.get_paths()
                y = np.concatenate([p.vertices[:, 1] for p in paths]) if paths else np.empty(0)
            y = y[np.isfinite(y)]
            if y.size:
                lo, hi = min(lo, float(y.min())), max(hi, float(y.max()))
    if not math.isfinite(lo):
        return bounds[0], bounds[1] if math.isfinite(bounds[1]) else bounds[0] + 1.0
    pad = 0.04 * max(hi - lo, 1.0)
    return max(bounds[0], lo - pad), min(bounds[1], hi + pad)


def curves_figure(train: pd.DataFrame, models: Sequence[str], *, labels: dict[str, str],
                  metrics: Sequence[tuple[str, str]] = (("loss", "loss"), ("accuracy", "accuracy (%)"))
                  ) -> Figure | None:
    """Figure 5: training (dashed) and validation (solid) curves per model (colour and marker from the model
    table), 95% t-interval band over seeds (seaborn). ``train``: rows (model, seed, split, metric, epoch, value);
    accuracy in %.
    """
    metrics = [(m, lab) for m, lab in metrics if (train["metric"] == m).any()]
    if train.empty or not metrics:
        return None
    models = [m for m in models if (train["model"] == m).any()]
    styles = model_styles(models)
    splits = [s for s in ("train", "val") if (train["split"] == s).any()]
    with style():
        fig, axes = grid_figure(1, len(metrics), panel=(3.4, 2.5), left=0.65, right=0.2, top=0.5, bottom=0.5,
                                wgap=0.75)
        axes = axes[0]
        for ax, (metric, ylabel) in zip(axes, metrics):
            sub = train[train["metric"] == metric]
            seeds = _per_seed(sub, ["model", "split", "epoch"])
            bounds = (0.0, 100.0) if metric == "accuracy" else (0.0, math.inf)     # % / a loss is ≥ 0
            for m in models:
                for sp in splits:
                    _lines(ax, seeds[(seeds["model"] == m) & (seeds["split"] == sp)], "epoch", styles[m],
                           linestyle=SPLIT_STYLE.get(sp, "-"), bounds=bounds)
            ax.set_ylim(*_data_ylim(np.array([[ax]]), 1, 1, bounds))
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.set_title(metric)
            epochs = sorted(sub["epoch"].unique())
            if len(epochs) <= 12:
                ax.set_xticks(epochs)
        handles = [Line2D([], [], color=styles[m][0], marker=styles[m][1], linestyle="-", label=labels.get(m, m))
                   for m in models]
        handles += [Line2D([], [], color="black", linestyle=SPLIT_STYLE.get(sp, "-"),
                           label="validation" if sp == "val" else "training") for sp in splits]
        _legend_on_top(fig, handles, ncol=min(len(handles), 5))
    return fig


def _text_width_in(texts: Sequence[str], fontsize: float) -> float:
    """Widest of ``texts`` in inches, measured on the Agg renderer in the report's style."""
    with style():
        fig = Figure(figsize=(4, 1))
        r = FigureCanvasAgg(fig).get_renderer()
        widths = [fig.text(0, 0, t, fontsize=fontsize).get_window_extent(r).width / fig.dpi for t in texts]
    return max(widths, default=0.0)


def cd_diagram(avg_ranks: dict[str, float], cliques: list[list[str]] | None, *, note: str | None = None,
               axis_width: float = 3.6, fontsize: float = 8.5) -> Figure:
    """Average-rank diagram (Demšar 2006 layout): rank axis (1 = best, left), models by average rank, thick bars
    joining models that the pairwise test + Holm did *not* tell apart (``cliques``, e.g.
    :func:`robustbench_dgsa.analysis.stats.holm_cliques`); ``cliques=None`` (not testable: fewer than 3 seeds)
    draws no bars, greys the diagram and marks it "not testable (n < 3)" across its middle, so it cannot be read as
    "every pair differs"; ``note`` says why under the axis. The label margins are measured, so long model names are
    never clipped.
    """
    items = sorted(avg_ranks.items(), key=lambda kv: (kv[1], kv[0]))
    k = len(items)
    if k == 0:
        raise ValueError("no models to draw")
    lo, hi = 1, max(k, 2)
    half = (k + 1) // 2
    left, right = items[:half], items[half:]
    labels_l = [f"{n} ({r:.2f})" for n, r in left]
    labels_r = [f"({r:.2f}) {n}" for n, r in right]
    margin = _text_width_in(labels_l + labels_r, fontsize) + 0.35
    width = 2 * margin + axis_width
    bars = cliques or []
    n_lines = max(len(left), len(right))
    line_h, bar_h = 0.22, 0.1
    height = 0.45 + bar_h * len(bars) + 0.15 + line_h * n_lines + (0.3 if note else 0.1)
    x = lambda r: margin + (r - lo) / (hi - lo) * axis_width  # noqa: E731
    with style():
        fig = Figure(figsize=(width, height))
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        ax.set_axis_off()
        ax.set_xlim(0, width)
        ax.set_ylim(-height, 0)
        top = -0.3
        ax.plot([x(lo), x(hi)], [top, top], color="black", lw=1)
        for r in range(lo, hi + 1):
            ax.plot([x(r), x(r)], [top, top + 0.06], color="black", lw=1)
            ax.text(x(r), top + 0.09, str(r), ha="center", va="bottom", fontsize=fontsize)
        for i, group in enumerate(bars):
            rs = [dict(items)[m] for m in group]
            y = top - 0.12 - bar_h * i
            ax.plot([x(min(rs)) - 0.04, x(max(rs)) + 0.04], [y, y], color="black", lw=3, solid_capstyle="butt")
        y0 = top - 0.12 - bar_h * len(bars) - 0.15
        for i, ((name, r), label) in enumerate(zip(left, labels_l)):
            y = y0 - line_h * i
            ax.plot([x(r), x(r), x(lo) - 0.12], [top, y, y], color="black", lw=0.8)
            ax.text(x(lo) - 0.16, y, label, ha="right", va="center", fontsize=fontsize)
        for i, ((name, r), label) in enumerate(zip(reversed(right), reversed(labels_r))):
            y = y0 - line_h * i
            ax.plot([x(r), x(r), x(hi) + 0.12], [top, y, y], color="black", lw=0.8)
            ax.text(x(hi) + 0.16, y, label, ha="left", va="center", fontsize=fontsize)
        if note:
            ax.text(width / 2, -height + 0.12, note, ha="center", va="bottom", fontsize=fontsize - 1, color="#444444")
        if cliques is None:
            for artist in [*ax.lines, *ax.texts[:-1 if note else None]]:
                artist.set_alpha(0.35)
            ax.text(width / 2, (top + y0) / 2 - line_h, "not testable (n < 3)", ha="center", va="center",
                    fontsize=fontsize + 2, fontweight="bold", color="#b00020",
                    bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="#b00020", linewidth=1.2))
    return fig
