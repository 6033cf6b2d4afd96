"""RobustBench export: JSON fields, full-set rule, unaggregated CSV round trip, CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.report.export import (ROBUSTBENCH_CORRUPTIONS, SEVERITIES, export_robustbench,
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
    assert rec["link"] == "" and rec["venue"] == "" and rec["architecture"] == "dgsa-bench dgvit"
    assert "corruptions_mce" not in rec  # no AlexNet reference at hand
    # a partial set is no model_info file (it would break generate_leaderboard): the side file, with the footnote
    assert not (folder / "timm-vit.json").exists()
    side = json.loads((out / "incomplete_grids.cifar10.json").read_text())
    other = side["models"]["timm-vit"]
    assert other["corruptions_acc"] is None and "2 of the 75" in other["footnote"]
    assert other["additional_data"] is False and other["architecture"] == "timm:vit_tiny"
    assert "unknown to the store" in other["footnote"]
    # the unaggregated CSV reads back to the store's numbers (mean over seeds), RobustBench's column order
    table = read_unaggregated(folder / "unaggregated_results.csv")
    assert list(table.columns[:5]) == [("shot_noise", s) for s in SEVERITIES] and table.shape == (2, 75)
    for (c, s) in [("fog", 5), ("elastic_transform", 1), ("shot_noise", 3)]:
        assert table.loc["dgvit", (c, s)] == pytest.approx((full[0][(c, s)] + full[1][(c, s)]) / 2, abs=1e-12)
    assert np.isnan(table.loc["timm-vit", ("fog", 5)])
    assert table.loc["timm-vit", ("fog", 4)] == pytest.approx(partial[("fog", 4)])
    assert len(res.files) == 3 and set(res.models) == {"cifar10/dgvit"} and set(res.incomplete) == {
        "cifar10/timm-vit"}


def test_export_needs_robustbench_dataset_for_custom_sources(populated, tmp_path):
    sd, *_ = populated
    with pytest.raises(UserError, match="dataset=cifar10"):
        export_robustbench(sd, tmp_path / "rb")
    with pytest.raises(UserError, match="cifar10, cifar100, imagenet"):
        export_robustbench(sd, tmp_path / "rb", dataset="tiny-imagenet")
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


def _leaderboard_fields_ok(folder):
    """RobustBench's generate_leaderboard, read faithfully: it loads every JSON of the folder, sorts by
    float(corruptions_acc) and shows link, name, footnote, clean_acc, corruptions_acc, additional_data,
    architecture and venue: none may be null or a Python repr."""
    recs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    assert recs
    for rec in recs:
        float(rec["corruptions_acc"]), float(rec["clean_acc"])
        for key in ("link", "name", "footnote", "architecture", "venue"):
            assert isinstance(rec[key], str) and rec[key] not in ("None", "python object"), (key, rec)
        assert isinstance(rec["additional_data"], bool)
    return recs


def test_mce_merge_and_leaderboard_fields(populated, tmp_path):
    sd, ds, full, partial = populated
    out = tmp_path / "rb"
    folder = out / "model_info" / "cifar10" / "corruptions"
    folder.mkdir(parents=True)
    # what a RobustBench checkout holds: other models' rows (AlexNet's among them) and a filled-in JSON
    rng = np.random.default_rng(5)
    alex = {(c, s): float(rng.uniform(0.3, 0.8)) for c in ROBUSTBENCH_CORRUPTIONS for s in SEVERITIES}
    other = {(c, s): 0.5 for c in ROBUSTBENCH_CORRUPTIONS for s in SEVERITIES}
    from robustbench_dgsa.report.export import _csv_text
    (folder / "unaggregated_results.csv").write_text(_csv_text({"AlexNet": alex, "Other2020": other}))
    (folder / "dgvit.json").write_text(json.dumps({"link": "https://example.org/paper", "name": "DGSA (ours)",
                                                   "venue": "ICML 2025", "clean_acc": "1.00"}))
    export_robustbench(sd, out, dataset="cifar10")
    rec = json.loads((folder / "dgvit.json").read_text())
    cells = {k: (full[0][k] + full[1][k]) / 2 for k in full[0]}
    want = np.mean([np.mean([1 - cells[(c, s)] for s in SEVERITIES]) / np.mean([1 - alex[(c, s)] for s in SEVERITIES])
                    for c in ROBUSTBENCH_CORRUPTIONS])
    assert rec["corruptions_mce"] == f"{100 * want:.2f}" and "AlexNet" in rec["footnote"]
    assert rec["link"] == "https://example.org/paper" and rec["venue"] == "ICML 2025" and rec["name"] == "DGSA (ours)"
    assert rec["clean_acc"] == f"{100 * (0.80 + 0.81) / 2:.2f}"   # numbers always from the store
    table = read_unaggregated(folder / "unaggregated_results.csv")
    assert list(table.index) == ["AlexNet", "Other2020", "dgvit", "timm-vit"]
    assert table.loc["AlexNet", ("fog", 3)] == pytest.approx(alex[("fog", 3)], abs=1e-12)
    _leaderboard_fields_ok(folder)
    # a reference named explicitly must be complete
    with pytest.raises(UserError, match="75"):
        export_robustbench(sd, tmp_path / "rb2", dataset="cifar10", mce_reference="timm-vit")


def test_dataset_family_recorded_by_runs_needs_no_dataset(tmp_path):
    rng = np.random.default_rng(1)
    sd = tmp_path / "store"
    run_id = store.new_run_id("eval")
    w = store.RunWriter(sd, run_id, base=dict(kind="eval", model="m", dataset="npz:/d/c100.npz", split="test",
                                              seed=0))
    w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=0.5, n=10, source="x")]
               + [dict(condition=c, severity=s, metric="accuracy", value=v, n=10, source="regenerated")
                  for (c, s), v in _cells(rng).items()])
    w.write_provenance({"kind": "eval", "dataset_family": "cifar100"})
    res = export_robustbench(sd, tmp_path / "rb")
    assert set(res.models) == {"cifar100/m"}
    assert (tmp_path / "rb" / "model_info" / "cifar100" / "corruptions" / "m.json").is_file()


def test_robustbench_generate_leaderboard_renders_the_export(populated, tmp_path, monkeypatch):
    """RobustBench's own generate_leaderboard on an export holding one complete and one incomplete grid."""
    # any ImportError skips (pytest 9 only skips ModuleNotFoundError by default): an install whose import fails is
    # as absent as none (CI's .ci/without-outside-tools makes it so)
    template = pytest.importorskip("robustbench.leaderboard.template", reason="robustbench not installed or not "
                                   "importable", exc_type=ImportError)
    jinja2 = pytest.importorskip("jinja2")
    sd, *_ = populated
    out = tmp_path / "rb"
    export_robustbench(sd, out, dataset="cifar10")
    try:
        html = template.generate_leaderboard("cifar10", "corruptions", str(out / "model_info"))
    except jinja2.TemplateNotFound:
        # robustbench's PyPI wheel ships without its leaderboard.html.j2: everything up to rendering ran
        # (every JSON read, and sorted by float(corruptions_acc)), which is where incomplete grids broke it
        pytest.skip("robustbench is installed without its leaderboard template (PyPI wheel)")
    assert "dgvit" in html and "timm-vit" not in html and "None" not in html
