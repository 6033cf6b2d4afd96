"""The stopping rule: the first epoch whose validation accuracy gained < 0.5 points over the previous 3 epochs."""
from __future__ import annotations

import pandas as pd
import pytest

from robustbench_dgsa.analysis.plateau import plateau_epoch, plateau_table
from robustbench_dgsa.report.accuracy_figures import plateau_sentence


def test_plateau_epoch_is_the_first_window_gaining_less_than_the_threshold():
    curve = [40, 50, 56, 60, 62, 62.4, 62.9, 63.0, 62.8]      # epoch e's accuracy at index e - 1
    # gains over 3: e4 20, e5 12, e6 6.4, e7 2.9, e8 1.0, e9 0.4
    assert plateau_epoch(curve) == 9
    assert plateau_epoch(curve, gain=1.01) == 8               # 63.0 - 62.0 = 1.0 < 1.01
    assert plateau_epoch(curve, gain=3.0, window=1) == 5      # 62 - 60 = 2
    assert plateau_epoch([50, 60, 70, 80]) is None            # still rising
    assert plateau_epoch([50, 50, 50]) is None                # shorter than window + 1
    assert plateau_epoch([50, 51, 52, 50.4]) == 4             # 50.4 - 50 = 0.4
    with pytest.raises(ValueError):
        plateau_epoch([1, 2], window=0)


def _rows(model: str, seed: int, curve: list[float]) -> list[dict]:
    return [dict(kind="train", split="val", metric="accuracy", dataset="cifar10", model=model, seed=seed, epoch=e,
                 value=v / 100) for e, v in enumerate(curve, 1)]


def test_plateau_table_and_the_curves_caption_read_the_stored_val_rows():
    flat = [40, 50, 56, 60, 62, 62.4, 62.9, 63.0, 62.8]
    rising = [40, 45, 50, 55, 60, 65, 70, 75, 80]
    rows = pd.DataFrame(_rows("vit", 0, flat) + _rows("vit", 1, flat) + _rows("dgvit", 0, rising)
                        + _rows("dgvit", 1, flat)
                        + [dict(kind="train", split="train", metric="accuracy", dataset="cifar10", model="vit",
                                seed=0, epoch=9, value=0.99)])
    t = plateau_table(rows).set_index(["model", "seed"])["plateau"]
    assert t[("vit", 0)] == 9 and t[("vit", 1)] == 9 and t[("dgvit", 1)] == 9 and pd.isna(t[("dgvit", 0)])
    text = plateau_sentence(rows)
    assert "ViT: epoch 9 of 9" in text and "DGViT: epoch 9 of 9 (in 1 of 2 seeds)" in text
    assert plateau_sentence(pd.DataFrame(_rows("vit", 0, rising))).endswith("ViT: not reached in 9 epochs.")
    assert text.index("ViT") < text.index("DGViT") and "median over seeds" in text
    assert plateau_sentence(rows[rows["model"] == "nobody"]) == ""
