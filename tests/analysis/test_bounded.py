"""Bounded quantities stay bounded: a t-interval of an accuracy never leaves [0, 1] (clipped and marked), and
Figure 4's bands and axis stay inside [0, 100] % and the data's range (the main job's axis once ran −20 %..125 %;
`compare --json` printed a ci_hi of 1.1585 for an accuracy)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from robustbench_dgsa.analysis import stats
from robustbench_dgsa.report.figures import severity_figure


def test_accuracy_interval_is_clipped_to_the_unit_interval_and_marked():
    df = pd.DataFrame({"model": "vit", "dataset": "d", "condition": "clean", "seed": [0, 1, 2],
                       "value": [0.99, 0.70, 0.999]})
    free = stats.seed_summary(df).table.iloc[0]
    assert free["ci_hi"] > 1 and not free["ci_clipped"]          # the symmetric t-interval leaves [0, 1]
    r = stats.seed_summary(df, bounds=(0.0, 1.0)).table.iloc[0]
    assert r["ci_hi"] == 1.0 and r["ci_clipped"] and "clipped to [0, 1]" in r["note"]
    assert r["ci_lo"] == free["ci_lo"] and r["mean"] == free["mean"]


def test_severity_figure_axis_and_bands_stay_inside_the_data_and_0_100():
    rng = np.random.default_rng(0)
    rows, clean = [], []
    for m in ("vit", "dgvit"):
        for seed in range(3):
            clean.append({"model": m, "seed": seed, "value": float(rng.uniform(60, 99.5))})
            for s in range(1, 6):
                rows.append({"model": m, "seed": seed, "condition": "fog", "severity": s,
                             "value": float(np.clip(rng.normal(50, 45), 0, 100))})
    acc, cl = pd.DataFrame(rows), pd.DataFrame(clean)
    fig = severity_figure(acc, cl, ["fog"], ["vit", "dgvit"], labels={"vit": "ViT", "dgvit": "DGViT"})
    lo, hi = fig.axes[0].get_ylim()
    assert 0.0 <= lo and hi <= 100.0
    assert lo <= min(acc["value"].min(), cl["value"].min()) and hi >= max(acc["value"].max(), cl["value"].max())
    for coll in fig.axes[0].collections:                         # the bands
        for path in coll.get_paths():
            y = path.vertices[:, 1]
            assert (y >= -1e-9).all() and (y <= 100 + 1e-9).all()
