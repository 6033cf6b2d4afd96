"""The one-screen summary of a report: clean and robust accuracy per dataset and model, mean ± SD over seeds.

Computed by :func:`summary_table` from the rows the report already loaded (the store is read once per command) and
written beside the report as ``summary.json`` ({"columns": [...], "rows": [[...], ...]}), which ``dgsa-bench report`` / ``reproduce`` print.
"""
from __future__ import annotations

import pandas as pd

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.models.registry import display_name, model_order
from robustbench_dgsa.report.tables import rounded

SUMMARY_FILE = "summary.json"
_SCALE = 100.0   # store accuracies are fractions; the summary prints percent


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Clean accuracy and mCA (images) / mNA (text) per dataset and model, mean ± SD over seeds (mCA / mNA over
    the cells present); one row per (dataset, model) with evaluation rows."""
    recs = []
    for ds in sorted(set(df.loc[df["kind"] == "eval", "dataset"])):
        summ = metrics.robustness_summary(df[df["dataset"] == ds], dataset=ds, partial=True)
        for m in model_order(summ["model"]):
            s = summ[summ["model"] == m]
            robust = "mCA" if s["mCA"].notna().any() else "mNA"
            recs.append({"dataset": ds, "model": display_name(m), "seeds": len(s),
                         "clean (%)": _mean_sd(s["clean"]), "robust": robust, "robust (%)": _mean_sd(s[robust])})
    return pd.DataFrame(recs)


def _mean_sd(col: pd.Series) -> str:
    v = col.astype(float).dropna().to_numpy() * _SCALE
    if not len(v):
        return "—"
    return f"{rounded(v.mean())} ± {rounded(v.std(ddof=1))}" if len(v) > 1 else rounded(v.mean())
