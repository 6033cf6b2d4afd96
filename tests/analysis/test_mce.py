"""The standard ImageNet-C mCE: AlexNet's published errors (package data), CE / mCE, the store-level measure, the
RobustBench export of ImageNet-C results and evaluate's mCE line."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.report.export import ROBUSTBENCH_CORRUPTIONS, SEVERITIES, export_robustbench

# ALEXNET_ERR of google-research/augmix imagenet.py (9b9824c7): the same averages, typed in from a second source.
AUGMIX_ALEXNET_ERR = {
    "gaussian_noise": 0.886428, "shot_noise": 0.894468, "impulse_noise": 0.922640, "defocus_blur": 0.819880,
    "glass_blur": 0.826268, "motion_blur": 0.785948, "zoom_blur": 0.798360, "snow": 0.866816, "frost": 0.826572,
    "fog": 0.819324, "brightness": 0.564592, "contrast": 0.853204, "elastic_transform": 0.646056,
    "pixelate": 0.717840, "jpeg_compression": 0.606500}


def _alexnet_like(scale: float = 1.0, drop=()) -> pd.DataFrame:
    """Cells of a model whose error is ``scale`` x AlexNet's in every (corruption, severity), extras included."""
    err = metrics.alexnet_errors()
    return pd.DataFrame([dict(condition=c, severity=s, accuracy=1.0 - scale * err.loc[c, s])
                         for c in err.index for s in SEVERITIES if (c, s) not in drop])


def test_alexnet_table_is_complete_consistent_and_cited():
    err = metrics.alexnet_errors()
    assert list(err.index) == list(metrics.BENCHMARK_CORRUPTIONS) + list(metrics.EXTRA_CORRUPTIONS)
    assert list(err.columns) == [1, 2, 3, 4, 5, "average"]
    assert ((err[list(SEVERITIES)] > 0) & (err[list(SEVERITIES)] < 1)).all().all()
    np.testing.assert_allclose(err[list(SEVERITIES)].mean(axis=1), err["average"], atol=1e-9)
    for c, v in AUGMIX_ALEXNET_ERR.items():
        assert err.loc[c, "average"] == pytest.approx(v, abs=1e-9)
    from importlib import resources
    header = resources.files("robustbench_dgsa.analysis").joinpath(metrics.ALEXNET_CSV).read_text()
    assert "hendrycks/robustness" in header and "76d93933ab5ff56044973bbd4efe75cc2a795a7a" in header
    assert "Hendrycks & Dietterich" in header


@pytest.mark.parametrize("scale, want", [(1.0, 100.0), (0.5, 50.0), (0.0, 0.0)])
def test_mce_of_alexnet_errors_is_100(scale, want):
    per, summary = metrics.imagenet_c_ce(_alexnet_like(scale))
    assert summary["mCE"] == pytest.approx(want, abs=1e-9) and summary["complete"]
    assert per["ce"].to_numpy() == pytest.approx(np.full(19, want), abs=1e-9)
    assert set(summary["extra_ce"]) == set(metrics.EXTRA_CORRUPTIONS)  # beside, not in, the mean
    err = metrics.alexnet_errors().loc[list(metrics.BENCHMARK_CORRUPTIONS), list(SEVERITIES)]
    assert summary["mCA"] == pytest.approx(1.0 - scale * float(err.to_numpy().mean()))


def test_mce_is_sum_over_severities_ratio_not_mean_of_cell_ratios():
    cells = _alexnet_like()
    cells.loc[(cells.condition == "fog") & (cells.severity == 1), "accuracy"] = 1.0  # fog sev 1: no error
    err = metrics.alexnet_errors()
    per, summary = metrics.imagenet_c_ce(cells)
    fog = 100.0 * sum(err.loc["fog", s] for s in (2, 3, 4, 5)) / sum(err.loc["fog", s] for s in SEVERITIES)
    assert per.set_index("corruption").loc["fog", "ce"] == pytest.approx(fog)
    assert summary["mCE"] == pytest.approx((14 * 100.0 + fog) / 15)
    extra_only = metrics.imagenet_c_ce(cells.assign(accuracy=np.where(cells.condition == "spatter", 0.0,
                                                                      cells.accuracy)))[1]
    assert extra_only["mCE"] == pytest.approx(summary["mCE"])  # an extra corruption never moves the mCE


def test_incomplete_grid_has_no_mce_unless_partial():
    cells = _alexnet_like(drop=[("snow", 5), ("contrast", 2)])
    _, summary = metrics.imagenet_c_ce(cells)
    assert math.isnan(summary["mCE"]) and not summary["complete"]
    assert "snow" in summary["missing"] and "contrast" in summary["missing"]
    _, part = metrics.imagenet_c_ce(cells, partial=True)
    assert part["mCE"] == pytest.approx(100.0)  # the severities present, against AlexNet's same severities


def test_store_level_alexnet_mce(tmp_path):
    sd = tmp_path / "store"
    for model, scale in (("alexnet-like", 1.0), ("better", 0.6)):
        _write_run(sd, model, "imagenet", _alexnet_like(scale))
    out = metrics.alexnet_mce(store.load_results(sd)).set_index("model")
    assert out.loc["alexnet-like", "mCE"] == pytest.approx(100.0)
    assert out.loc["better", "mCE"] == pytest.approx(60.0)
    assert out["complete"].all() and (out["n_corruptions"] == 15).all()


def _write_run(sd, model, dataset, cells, clean=0.56, n=50):
    w = store.RunWriter(sd, store.new_run_id("eval"), base=dict(kind="eval", model=model, dataset=dataset,
                                                                  split="test", seed=0))
    rows = [dict(condition="clean", severity=0, metric="accuracy", value=clean, n=n, source="x")]
    rows += [dict(condition=r.condition, severity=int(r.severity), metric="accuracy", value=float(r.accuracy), n=n,
                  source="official") for r in cells.itertuples()]
    w.add_rows(rows)
    w.write_provenance({"kind": "eval"})


def test_export_imagenet_model_info_with_published_alexnet_mce(tmp_path):
    sd = tmp_path / "store"
    _write_run(sd, "alexnet-like", "imagenet", _alexnet_like())
    _write_run(sd, "half", "imagenet", _alexnet_like(0.5))
    res = export_robustbench(sd, tmp_path / "rb")
    folder = tmp_path / "rb" / "model_info" / "imagenet" / "corruptions"
    rec = json.loads((folder / "alexnet-like.json").read_text())
    assert rec["dataset"] == "imagenet" and rec["corruptions_mce"] == "100.00"
    assert json.loads((folder / "half.json").read_text())["corruptions_mce"] == "50.00"
    assert "official ImageNet-C files" in rec["footnote"] and "RobustBench uses 5,000" in rec["footnote"]
    assert "AlexNet's published ImageNet-C errors" in rec["footnote"]
    assert set(res.models) == {"imagenet/alexnet-like", "imagenet/half"}
    header = (folder / "unaggregated_results.csv").read_text().splitlines()[0].split(",")
    assert header[1:] == [c for c in ROBUSTBENCH_CORRUPTIONS for _ in SEVERITIES]


def test_evaluate_prints_mce_beside_mca_on_imagenet():
    from robustbench_dgsa.jobs.evaluation import imagenet_c_mce as _imagenet_c_mce
    from robustbench_dgsa.engine.evaluate import EvalResult

    cells = _alexnet_like()
    table = pd.concat([pd.DataFrame([dict(condition="clean", severity=0, accuracy=0.56)]), cells])
    assert _imagenet_c_mce(EvalResult("r", table, None, "", "imagenet"))["mCE"] == pytest.approx(100.0)
    assert _imagenet_c_mce(EvalResult("r", table, None, "", "tiny-imagenet")) is None  # AlexNet's are ImageNet's
