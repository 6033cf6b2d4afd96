"""Where a validation curve stops rising: the second campaign's stopping rule, computed from a store's per-epoch
training rows (kind="train", split="val", metric="accuracy").

The rule (``results/evidence-v2/README.md``): train every model of a comparison for the same fixed number of epochs,
the first epoch at which the pilot's validation accuracy gained less than ``gain`` points over the previous
``window`` epochs (gain(e) = acc(e) − acc(e − window), accuracy in points).
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

#: the second campaign's rule: < 0.5 points gained over 3 epochs
GAIN_POINTS, WINDOW = 0.5, 3


def plateau_epoch(curve: Sequence[float], gain: float = GAIN_POINTS, window: int = WINDOW) -> int | None:
    """First epoch e (1-based; ``curve[e - 1]`` is epoch e's accuracy in points) with
    curve[e] − curve[e − window] < ``gain``; None when the curve never flattens so (or is shorter than window + 1)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    for e in range(window, len(curve)):
        if curve[e] - curve[e - window] < gain:
            return e + 1
    return None


def plateau_table(rows: pd.DataFrame, gain: float = GAIN_POINTS, window: int = WINDOW) -> pd.DataFrame:
    """One row per (dataset, model, seed) with per-epoch validation accuracy: ``epochs`` run and ``plateau`` (the
    first epoch meeting the rule, or NA). Accuracy values in [0, 1] are read as fractions."""
    cols = ["dataset", "model", "seed", "epochs", "plateau"]
    val = rows[(rows["kind"] == "train") & (rows["split"] == "val") & (rows["metric"] == "accuracy")
               & (rows["epoch"] >= 1)]
    if val.empty:
        return pd.DataFrame(columns=cols)
    if "created" in val:
        val = val.sort_values("created", kind="stable")
    val = val.drop_duplicates(["dataset", "model", "seed", "epoch"], keep="last")
    out = []
    for (ds, model, seed), g in val.groupby(["dataset", "model", "seed"], sort=True):
        curve = (g.sort_values("epoch")["value"].astype(float) * 100.0).tolist()
        out.append({"dataset": ds, "model": model, "seed": int(seed), "epochs": int(g["epoch"].max()),
                    "plateau": plateau_epoch(curve, gain, window)})
    return pd.DataFrame(out, columns=cols).astype({"plateau": "Int64"})
