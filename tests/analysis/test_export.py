"""RobustBench export: JSON fields, full-set rule, unaggregated CSV round trip, CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.analysis.export import (ROBUSTBENCH_CORRUPTIONS, SEVERITIES, export_robustbench,
                                              read_unaggregated)
from robustbench_dgsa.util.errors import UserError


def _write_run(sd, model, seed, dataset, cells, clean, n=200, source="regenerated", origin=None):
    run_id = store.new_run_id("eval")
    w = store.RunWriter(sd, run_id, base=dict(kind="eval", model=model, dataset=dataset, split="test", seed=seed))
    rows = [dict(condition="clean", severity=0, metric="accuracy", value=clean, n=n, source="x")]
    rows += [dict(condition=c, severity=s, metric="accuracy", value=v, n=n, source=source)
             for (c, s), v in cells.items()]
    w.add_rows(rows)
    w.write_provenance({"kind": "eval", **({"origin": origin, "model_class": "timm.VisionTransformer",
                                            "model_source": "timm:vit_tiny"} if origin else {})})


def _cells(rng, drop=()):
    return {(c, s): float(rng.uniform(0.2, 0.9)) for c in ROBUSTBENCH_CORRUPTIONS for s in SEVERITIES
            if (c, s) not in drop}


@pytest.fixture
def populated(tmp_path):
    rng = np.random.default_rng(0)
    sd = tmp_path / "store"
    ds = "npz:/data/cifar10_test.npz"
    full = {seed: _cells(rng) for seed in (0, 1)}
    for seed, cells in full.items():
        _write_run(sd, "dgvit", seed, ds, cells, clean=0.8 + 0.01 * seed)
    partial = _cells(rng, drop=[("fog", 5), ("snow", 2)])
    _write_run(sd, "timm-vit", -1, ds, partial, clean=0.7, origin="benchmark")
    return sd, ds, full, partial


def test_export_round_trip(populated, tmp_path):
    sd, ds, full, partial = populated
    out = tmp_path / "rb"
    res = export_robustbench(sd, out, dataset="cifar10")
    folder = out / "model_info" / "cifar10" / "corruptions"
    rec = json.loads((folder / "dgvit.json").read_text())
    for key in ("link", "name", "authors", "additional_data", "number_forward_passes", "dataset", "venue",
                "architecture", "eps", "clean_acc", "reported", "corruptions_acc", "footnote"):
        assert key in rec
    assert rec["dataset"] == "cifar10" and rec["name"] == "dgvit" and rec["eps"] is None
    assert rec["clean_acc"] == f"{100 * (0.80 + 0.81) / 2:.2f}"
    want = np.mean([np.mean(list(c.values())) for c in full.values()])
    assert rec["corruptions_acc"] == f"{100 * want:.2f}"
    assert "regenerated" in rec["footnote"] and "200" in rec["footnote"] and "2 training seeds" in rec["footnote"]
    assert rec["additional_data"] is False
    # a partial set: no corruptions_acc, and the footnote says why
    other = json.loads((folder / "timm-vit.json").read_text())
    assert other["corruptions_acc"] is None and "2 of the 75" in other["footnote"]
    assert other["additional_data"] is None and other["architecture"] == "timm:vit_tiny"
    # the unaggregated CSV reads back to the store's numbers (mean over seeds), RobustBench's column order
    table = read_unaggregated(folder / "unaggregated_results.csv")
    assert list(table.columns[:5]) == [("shot_noise", s) for s in SEVERITIES] and table.shape == (2, 75)
    for (c, s) in [("fog", 5), ("elastic_transform", 1), ("shot_noise", 3)]:
        assert table.loc["dgvit", (c, s)] == pytest.approx((full[0][(c, s)] + full[1][(c, s)]) / 2, abs=1e-12)
    assert np.isnan(table.loc["timm-vit", ("fog", 5)])
    assert table.loc["timm-vit", ("fog", 4)] == pytest.approx(partial[("fog", 4)])
    assert len(res.files) == 3 and set(res.models) == {"cifar10/dgvit", "cifar10/timm-vit"}


def test_export_needs_robustbench_dataset_for_custom_sources(populated, tmp_path):
    sd, *_ = populated
    with pytest.raises(UserError, match="--dataset"):
        export_robustbench(sd, tmp_path / "rb")
    with pytest.raises(UserError, match="cifar10, cifar100"):
        export_robustbench(sd, tmp_path / "rb", dataset="imagenet")
    assert not (tmp_path / "rb").exists()


def test_export_cli(populated, tmp_path):
    from typer.testing import CliRunner
    from robustbench_dgsa.cli import app
    sd, *_ = populated
    out = tmp_path / "rb"
    r = CliRunner().invoke(app, ["export", "--format", "robustbench", "--store", str(sd), "--out", str(out),
                                 "--dataset", "cifar10", "--model", "dgvit"])
    assert r.exit_code == 0, r.output
    assert (out / "model_info" / "cifar10" / "corruptions" / "dgvit.json").exists()
    assert not (out / "model_info" / "cifar10" / "corruptions" / "timm-vit.json").exists()
    r = CliRunner().invoke(app, ["export", "--format", "csv", "--store", str(sd), "--out", str(out)])
    assert r.exit_code != 0
