"""The forest plot that opens Findings keeps every label, verdict and legend entry inside its canvas, however long
the claim labels are (the evidence report's first version cut the longest labels off at the left edge)."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from robustbench_dgsa.report.forest import forest_figure
from robustbench_dgsa.util.figures import text_overflow


def _rows(n: int) -> pd.DataFrame:
    return pd.DataFrame([dict(diff=d, ci_lo=d - 1, ci_hi=d + 1, boot_lo=d - 1.3, boot_hi=d + 1.3,
                              paper_diff=7.5 if i == 0 else math.nan, threshold=0.0, direction="greater",
                              margin=1.0, verdict=("supported", "contradicted", "inconclusive at this scale")[i % 3],
                              reason="") for i, d in enumerate([2.0, -1.8, 0.3, 1.1, -3.7][:n])])


@pytest.mark.parametrize("label", ["clean accuracy", "DGT − Transformer · Rotten Tomatoes · relative mCE "
                                   "(not claimed by the paper, a long label) [Δ < 0]" * 2])
def test_every_text_of_the_forest_plot_is_inside_the_figure(label):
    t = _rows(5)
    fig = forest_figure(t, [label] * len(t))
    assert text_overflow(fig) == []
    texts = {x.get_text() for x in fig.findobj(lambda a: hasattr(a, "get_text"))}
    assert {"supported", "contradicted", "the paper's Δ"} <= texts      # verdicts and the legend are drawn
