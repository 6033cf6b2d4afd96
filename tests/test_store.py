"""The results store: schema, round trip through JSONL and Parquet, torn lines, predictions, provenance."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.util.errors import UserError


def _write_run(store_dir, run_id, *, seed=0, n_rows=3):
    w = store.RunWriter(store_dir, run_id, base=dict(kind="eval", model="vit", config_hash="abc123",
                                                     dataset="synthetic-vision", seed=seed, split="test"))
    w.add("accuracy", 0.9, condition="clean", severity=0, n=100)
    w.add_rows([dict(metric="accuracy", value=0.5 + i / 10, condition="fog", severity=i + 1, n=100,
                     source="on-the-fly") for i in range(n_rows - 1)])
    return w


def test_rows_have_exact_schema(store_dir):
    _write_run(store_dir, "r1")
    df = store.load_results(store_dir)
    assert list(df.columns) == list(store.COLUMNS)
    assert {c: str(t) for c, t in df.dtypes.items()} == {c: ("string" if t == "string" else t)
                                                         for c, t in store.COLUMNS.items()}
    assert len(df) == 3
    clean = df[df.condition == "clean"].iloc[0]
    assert clean.value == 0.9 and clean.severity == 0 and clean.n == 100
    assert clean.epoch == -1 and clean.source == ""          # defaults for missing fields
    assert clean.run_id == "r1" and clean.package_version != ""


def test_round_trip_jsonl_parquet_identical(store_dir):
    _write_run(store_dir, "r1", seed=0)
    _write_run(store_dir, "r2", seed=1, n_rows=5)
    before = store.load_results(store_dir)
    path = store.compact(store_dir)
    assert path.exists()
    after = store.load_results(store_dir)
    pd.testing.assert_frame_equal(before.reset_index(drop=True), after.reset_index(drop=True))
    # A store shipped as Parquet only reads the same.
    for p in (store_dir / "rows").glob("*.jsonl"):
        p.unlink()
    only_parquet = store.load_results(store_dir)
    pd.testing.assert_frame_equal(before.reset_index(drop=True), only_parquet.reset_index(drop=True))


def test_jsonl_wins_over_parquet_and_new_rows_appear(store_dir):
    w = _write_run(store_dir, "r1")
    store.compact(store_dir)
    w.add("accuracy", 0.1, condition="snow", severity=5, n=100)   # after compaction
    df = store.load_results(store_dir)
    assert len(df) == 4 and (df.condition == "snow").sum() == 1  # no duplicates from the parquet copy


def test_torn_last_line_is_skipped(store_dir):
    w = _write_run(store_dir, "r1")
    with open(w.rows_path, "a") as f:
        f.write('{"run_id": "r1", "metric": "accur')             # a killed writer
    df = store.load_results(store_dir)
    assert len(df) == 3


def test_unknown_column_refused(store_dir):
    w = store.RunWriter(store_dir, "r1")
    with pytest.raises(ValueError, match="unknown result columns"):
        w.add("accuracy", 1.0, colour="red")


def test_missing_store_is_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        store.load_results(tmp_path / "nope")


def test_empty_store_has_columns(store_dir):
    store_dir.mkdir()
    df = store.load_results(store_dir)
    assert list(df.columns) == list(store.COLUMNS) and len(df) == 0


def test_predictions_and_provenance(store_dir):
    w = _write_run(store_dir, "r1")
    preds = pd.DataFrame({"condition": ["clean"] * 4, "severity": np.zeros(4, dtype=np.int8),
                          "index": np.arange(4), "label": [0, 1, 2, 3], "pred": [0, 1, 1, 3]})
    w.write_predictions("test", preds)
    w.write_provenance({"kind": "eval", "seed": 0, "device": "cpu"})
    got = store.load_predictions(store_dir, "r1")
    assert list(got.columns[:1]) == ["run_id"] and (got.run_id == "r1").all()
    assert got.pred.tolist() == [0, 1, 1, 3]
    runs = store.load_runs(store_dir)
    assert runs["r1"]["kind"] == "eval" and "versions" in runs["r1"] and "git_commit" in runs["r1"]
    json.dumps(runs["r1"])  # plain JSON


def test_clear_drops_rows_of_run(store_dir):
    w = _write_run(store_dir, "r1")
    w.clear()
    assert len(store.load_results(store_dir)) == 0


def test_new_run_ids_are_unique():
    ids = {store.new_run_id("x") for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("x-") for i in ids)
