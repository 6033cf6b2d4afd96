"""Figures 4 and 5 are drawn by seaborn: line = mean over seeds, band = the 95% t-interval over seeds, in the
model's own colour from the model facts table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from robustbench_dgsa.analysis.stats import t_interval
from robustbench_dgsa.models.registry import model_styles
from robustbench_dgsa.report.figures import curves_figure, severity_figure


def test_severity_figure_line_and_band_are_mean_and_t_interval():
    vals = {1: [70.0, 74.0, 75.0], 3: [60.0, 61.0, 68.0]}
    acc = pd.DataFrame([dict(model="dgvit", seed=s, condition="fog", severity=sev, value=v)
                        for sev, vs in vals.items() for s, v in enumerate(vs)])
    clean = pd.DataFrame([dict(model="dgvit", seed=s, value=v) for s, v in enumerate([80.0, 82.0, 81.0])])
    fig = severity_figure(acc, clean, ["fog"], ["dgvit"], labels={"dgvit": "DGViT"})
    ax = fig.axes[0]
    line = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3][0]
    assert list(line.get_xdata()) == [0, 1, 3]
    assert line.get_ydata() == pytest.approx([81.0, np.mean(vals[1]), np.mean(vals[3])])
    assert to_hex(line.get_color()) == to_hex(model_styles(["dgvit"])["dgvit"][0])
    band = ax.collections[0].get_paths()[0].vertices
    _, _, lo, hi = t_interval(vals[3])
    ys = band[np.isclose(band[:, 0], 3.0), 1]
    assert min(ys) == pytest.approx(lo) and max(ys) == pytest.approx(hi)


def test_curves_figure_single_seed_has_no_band():
    train = pd.DataFrame([dict(model="vit", seed=0, split=sp, metric="loss", epoch=e, value=1.0 / (e + 1))
                          for sp in ("train", "val") for e in range(3)])
    fig = curves_figure(train, ["vit"], labels={"vit": "ViT"})
    ax = fig.axes[0]
    assert len(ax.collections) == 0 and len([ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3]) == 2
