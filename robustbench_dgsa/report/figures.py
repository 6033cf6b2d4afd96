"""Figure recipes of the report (SPEC §8): fixed style, deterministic output, PNG + PDF.

Every recipe takes tidy rows from the results store (never a model) and returns a matplotlib
:class:`~matplotlib.figure.Figure`, or ``None`` when the rows hold nothing to draw. :func:`save_figure`
writes the PNG and a PDF that is byte-identical across re-runs (no creation date, fixed rcParams,
sorted inputs).
"""
from __future__ import annotations

import contextlib
import math
import textwrap
from pathlib import Path
from typing import Iterator, Sequence

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib as mpl  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from robustbench_dgsa.util import atomic  # noqa: E402

# Fixed look: the same bytes on every machine with the same library versions.
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.6,
    "lines.markersize": 3.5,
    "figure.dpi": 100,
    "savefig.dpi": 120,
    "pdf.compression": 6,
    "path.simplify": False,
    "svg.hashsalt": "dgsa-bench",
}

# Baseline / differential / gated keep one colour each across vision and text.
MODEL_COLOURS = {
    "vit": "#4C72B0", "transformer": "#4C72B0",
    "dvit": "#DD8452", "dt": "#DD8452",
    "dgvit": "#55A868", "dgt": "#55A868",
}
_EXTRA_COLOURS = ["#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]
SPLIT_STYLE = {"train": "--", "val": "-"}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Matplotlib defaults + :data:`STYLE`, whatever the user's matplotlibrc says; restored afterwards."""
    with mpl.rc_context():
        mpl.rcdefaults()
        mpl.rcParams.update(STYLE)
        yield


def model_colours(models: Sequence[str]) -> dict[str, str]:
    out, k = {}, 0
    for m in models:
        if m in MODEL_COLOURS:
            out[m] = MODEL_COLOURS[m]
        else:
            out[m] = _EXTRA_COLOURS[k % len(_EXTRA_COLOURS)]
            k += 1
    return out


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


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` atomically; returns both paths."""
    paths = []
    for ext, meta in (("png", {"Software": None}), ("pdf", {"CreationDate": None, "ModDate": None})):
        path = Path(out_dir) / f"{stem}.{ext}"
        with atomic.atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, metadata=meta)
        paths.append(path)
    return paths


def _seed_stats(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean and SD over seeds of ``value`` (one value per seed first: repeated rows are averaged)."""
    per_seed = df.groupby(keys + ["seed"], sort=True)["value"].mean().reset_index()
    g = per_seed.groupby(keys, sort=True)["value"]
    out = g.agg(mean="mean", sd="std", n="count").reset_index()
    out["sd"] = out["sd"].fillna(0.0)
    return out


def _band(ax, x, mean, sd, n, colour, **line_kw) -> None:
    ax.plot(x, mean, color=colour, marker="o", **line_kw)
    if (np.asarray(n) > 1).any():
        ax.fill_between(x, mean - sd, mean + sd, color=colour, alpha=0.18, linewidth=0)


def _title_and_legend(fig: Figure, title: str, handles: list[Line2D]) -> None:
    """Suptitle wrapped to the figure's width, then the legend in one row, then the panels (their titles
    included): sets the figure's top margin to fit, keeping the panels' size."""
    width, height = fig.get_figwidth(), fig.get_figheight()
    lines = textwrap.wrap(title, width=max(30, int(width * 13.5)))
    line_h, legend_h, panel_title_h = 0.19, 0.3, 0.3
    old_top = (1 - fig.subplotpars.top) * height
    new_top = 0.08 + line_h * len(lines) + legend_h + panel_title_h
    new_height = height - old_top + new_top
    bottom = fig.subplotpars.bottom * height
    fig.set_figheight(new_height)
    fig.subplots_adjust(top=1 - new_top / new_height, bottom=bottom / new_height)
    fig.suptitle("\n".join(lines), fontsize=10, y=1 - 0.08 / new_height, va="top")
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False, borderaxespad=0,
               bbox_to_anchor=(0.5, 1 - (0.1 + line_h * len(lines)) / new_height))


def _legend_handles(models: Sequence[str], labels: dict[str, str], colours: dict[str, str]) -> list[Line2D]:
    return [Line2D([], [], color=colours[m], marker="o", label=labels.get(m, m)) for m in models]


def severity_figure(acc: pd.DataFrame, clean: pd.DataFrame, conditions: Sequence[str], models: Sequence[str],
                    *, labels: dict[str, str], title: str, mean_panel: tuple[str, Sequence[str]] | None = None,
                    condition_labels: dict[str, str] | None = None, ylabel: str = "accuracy (%)",
                    ncols: int = 5) -> Figure | None:
    """Figure 4: accuracy vs severity, one panel per condition, one line per model, ±1 SD band over seeds.

    ``acc``: rows (model, seed, condition, severity, value) with value in percent, severity 1..5;
    ``clean``: rows (model, seed, value) drawn at severity 0 of every panel. ``mean_panel`` =
    (title, conditions) adds a first panel with the per-seed mean over those conditions.
    """
    conditions = [c for c in conditions if (acc["condition"] == c).any()]
    if not conditions or acc.empty:
        return None
    models = [m for m in models if (acc["model"] == m).any()]
    colours = model_colours(models)
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

    clean_stats = _seed_stats(clean, ["model"]) if not clean.empty else pd.DataFrame(columns=["model"])
    ncols = max(1, min(ncols, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    with style():
        fig, axes = grid_figure(nrows, ncols, panel=(2.1, 1.55), left=0.6, right=0.15, top=0.85, bottom=0.5,
                                wgap=0.22, hgap=0.62, sharex=True, sharey=True)
        for i, (ptitle, data) in enumerate(panels):
            ax = axes[i // ncols][i % ncols]
            stats = _seed_stats(data, ["model", "severity"])
            for m in models:
                s = stats[stats["model"] == m].sort_values("severity")
                c = clean_stats[clean_stats["model"] == m] if len(clean_stats) else clean_stats
                if len(c):
                    s = pd.concat([pd.DataFrame({"model": [m], "severity": [0], "mean": c["mean"].values,
                                                 "sd": c["sd"].values, "n": c["n"].values}), s])
                if s.empty:
                    continue
                _band(ax, s["severity"].to_numpy(float), s["mean"].to_numpy(float), s["sd"].to_numpy(float),
                      s["n"].to_numpy(), colours[m])
            ax.set_title(ptitle, fontweight="bold" if (mean_panel is not None and i == 0) else "normal")
            ax.set_xticks(range(0, 6))
            ax.set_xticklabels(["clean", "1", "2", "3", "4", "5"])
            ax.set_xlim(-0.3, 5.3)
        for j in range(len(panels), nrows * ncols):
            axes[j // ncols][j % ncols].set_visible(False)
        for r in range(nrows):
            axes[r][0].set_ylabel(ylabel)
        for cidx in range(ncols):
            # the lowest visible panel of each column carries the x label and tick labels
            for r in reversed(range(nrows)):
                if r * ncols + cidx < len(panels):
                    axes[r][cidx].set_xlabel("severity")
                    axes[r][cidx].xaxis.set_tick_params(labelbottom=True)
                    break
        _title_and_legend(fig, title, _legend_handles(models, labels, colours))
    return fig


def curves_figure(train: pd.DataFrame, models: Sequence[str], *, labels: dict[str, str], title: str,
                  metrics: Sequence[tuple[str, str]] = (("loss", "loss"), ("accuracy", "accuracy (%)"))
                  ) -> Figure | None:
    """Figure 5: training (dashed) and validation (solid) curves per model, ±1 SD band over seeds.

    ``train``: rows (model, seed, split, metric, epoch, value); accuracy already in percent.
    """
    metrics = [(m, lab) for m, lab in metrics if (train["metric"] == m).any()]
    if train.empty or not metrics:
        return None
    models = [m for m in models if (train["model"] == m).any()]
    colours = model_colours(models)
    splits = [s for s in ("train", "val") if (train["split"] == s).any()]
    with style():
        fig, axes = grid_figure(1, len(metrics), panel=(3.6, 2.6), left=0.65, right=0.2, top=0.95, bottom=0.5,
                                wgap=0.75)
        axes = axes[0]
        for ax, (metric, ylabel) in zip(axes, metrics):
            sub = train[train["metric"] == metric]
            stats = _seed_stats(sub, ["model", "split", "epoch"])
            for m in models:
                for sp in splits:
                    s = stats[(stats["model"] == m) & (stats["split"] == sp)].sort_values("epoch")
                    if s.empty:
                        continue
                    _band(ax, s["epoch"].to_numpy(float), s["mean"].to_numpy(float), s["sd"].to_numpy(float),
                          s["n"].to_numpy(), colours[m], linestyle=SPLIT_STYLE.get(sp, "-"))
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.set_title(metric)
            epochs = sorted(sub["epoch"].unique())
            if len(epochs) <= 12:
                ax.set_xticks(epochs)
        handles = _legend_handles(models, labels, colours)
        handles += [Line2D([], [], color="black", linestyle=SPLIT_STYLE.get(sp, "-"),
                           label="validation" if sp == "val" else "training") for sp in splits]
        _title_and_legend(fig, title, handles)
    return fig
