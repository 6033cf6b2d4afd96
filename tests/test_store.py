"""The results store: schema, round trip through JSONL and Parquet, torn lines, predictions, provenance."""
from __future__ import annotations

import json
import os

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
    with pytest.warns(UserWarning, match=r"r1\.jsonl line 4: torn last line skipped"):   # never silently
        df = store.load_results(store_dir)
    assert len(df) == 3


def test_torn_last_line_warns_at_every_load(store_dir):
    w = _write_run(store_dir, "r1")
    with open(w.rows_path, "a") as f:
        f.write('{"run_id": "r1", "metric": "accur')
    for _ in range(2):                                          # not remembered as read: warned again
        with pytest.warns(UserWarning, match="torn last line skipped"):
            assert len(store.load_results(store_dir)) == 3


def test_loading_again_parses_only_files_that_changed(store_dir, monkeypatch):
    """A store is read whole before and after every job of a campaign: files unchanged since this process read
    them are not parsed again; an appended, replaced or removed file is seen at the next load."""
    _write_run(store_dir, "r1")
    w2 = _write_run(store_dir, "r2")
    first = store.load_results(store_dir)
    parsed = []
    real = store._read_jsonl
    monkeypatch.setattr(store, "_read_jsonl", lambda path: parsed.append(path.stem) or real(path))
    pd.testing.assert_frame_equal(store.load_results(store_dir), first)
    assert parsed == []
    w2.add("accuracy", 0.2, condition="fog", severity=1, n=100)   # appended
    assert len(store.load_results(store_dir)) == len(first) + 1 and parsed == ["r2"]
    rows = w2.rows_path.read_text().splitlines()
    tmp = w2.rows_path.with_suffix(".tmp")
    tmp.write_text("\n".join(rows[:-1]).replace('"value": 0.9', '"value": 0.1') + "\n")
    os.replace(tmp, w2.rows_path)                                # replaced by another file of other rows
    again = store.load_results(store_dir)
    assert parsed == ["r2", "r2"] and len(again) == len(first)
    assert again[(again.run_id == "r2") & (again.condition == "clean")].value.tolist() == [0.1]
    w2.rows_path.unlink()
    assert set(store.load_results(store_dir).run_id) == {"r1"}


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


# --- integrity: malformed rows, concurrent compaction, failed runs ------------------------------------------

GOOD_ROW = b'{"run_id": "r9", "kind": "bench", "model": "vit", "metric": "params", "value": 5.0}'


@pytest.mark.parametrize("content, expect", [
    (GOOD_ROW + b'\nnot json at all\n', "line 2: not a JSON row"),
    (GOOD_ROW + b'\n\xff\xfe\xfa garbage\n', "line 2: not UTF-8"),
    (b'[1, 2, 3]\n', "line 1: a result row must be a JSON object"),
    (b'{"run_id": "r9", "colour": "red"}\n', "line 1: unknown result column 'colour'"),
    (b'{"run_id": "r9", "value": "high"}\n', "line 1: column 'value' must be float64"),
    (b'{"run_id": "r9", "severity": "3"}\n', "line 1: column 'severity' must be int64"),
])
def test_malformed_rows_are_refused_with_file_and_line(store_dir, content, expect):
    _write_run(store_dir, "r1")
    bad = store_dir / "rows" / "junk.jsonl"
    bad.write_bytes(content)
    with pytest.raises(UserError, match=expect) as e:
        store.load_results(store_dir)
    assert "junk.jsonl" in str(e.value) and "\n" not in str(e.value)


def test_parquet_without_columns_is_refused(store_dir):
    store_dir.mkdir()
    pd.DataFrame({"a": [1]}).to_parquet(store_dir / "results.parquet")
    with pytest.raises(UserError, match="not a results table"):
        store.load_results(store_dir)


def test_overlapping_compactions_never_drop_a_concurrent_writers_rows(store_dir, monkeypatch):
    """Compaction A reads, then (while A is still writing) run B adds rows and compacts: A's older view must
    not overwrite B's. Without the compaction lock, results.parquet ends without B's rows."""
    import threading
    _write_run(store_dir, "r1")
    real = store.load_results
    a_has_read, b_done = threading.Event(), threading.Event()

    def slow_first_read(d):
        df = real(d)
        if not a_has_read.is_set():
            a_has_read.set()
            b_done.wait(timeout=2)  # B runs now (it blocks on the lock, so this times out with the fix)
        return df

    monkeypatch.setattr(store, "load_results", slow_first_read)

    def run_b():
        a_has_read.wait(timeout=5)
        _write_run(store_dir, "r2", seed=1)
        store.compact(store_dir)
        b_done.set()

    tb = threading.Thread(target=run_b)
    tb.start()
    store.compact(store_dir)          # A
    tb.join(timeout=10)
    parquet = pd.read_parquet(store_dir / "results.parquet")
    assert set(parquet.run_id) == {"r1", "r2"}
    assert sorted(p.name for p in (store_dir / "rows").iterdir()) == ["r1.jsonl", "r2.jsonl"]  # nothing deleted


def test_discard_leaves_the_store_as_found(tmp_path):
    sd = tmp_path / "new-store"
    w = _write_run(sd, "r1")
    w.write_provenance({"kind": "eval"})
    w.write_predictions("test", pd.DataFrame({"index": [0], "label": [1], "pred": [1]}))
    w.discard()
    assert not sd.exists()                        # it created the folder: nothing at all is left
    old = tmp_path / "old-store"
    _write_run(old, "r0")
    before = sorted(p.relative_to(old) for p in old.rglob("*"))
    w = _write_run(old, "r1")
    w.write_provenance({"kind": "eval"})
    w.discard()
    assert sorted(p.relative_to(old) for p in old.rglob("*")) == before


# ------------------------------------------------------------------------------ every path of a store
def test_every_file_of_a_run_is_where_the_store_names_it(store_dir):
    """What a run writes lands exactly at the paths store.py names (and nowhere else)."""
    w = _write_run(store_dir, "r1")
    w.write_predictions("test", pd.DataFrame({"condition": ["clean"], "severity": [0], "index": [0], "label": [1],
                                              "pred": [1]}))
    w.write_provenance({"kind": "eval", "seed": 0, "device": "cpu"})
    store.compact(store_dir)
    store.mark_finished(store_dir, "job-a", {"run_id": "r1"})
    named = {store.rows_path(store_dir, "r1"), store.run_record_path(store_dir, "r1"),
             store.predictions_path(store_dir, "r1", "test"), store.results_path(store_dir),
             store.finished_dir(store_dir) / "job-a.json"}
    written = {p for p in store_dir.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert written == named
    assert store.has_rows(store_dir, "r1") and not store.has_rows(store_dir, None)
    assert store.read_finished(store_dir, "job-a") == {"run_id": "r1"}


def test_rollout_set_paths_stay_inside_the_rollouts_folder(store_dir):
    p = store.rollout_set_path(store_dir, "../run 1", "a/b")
    assert p.parent == store.rollouts_dir(store_dir) == store_dir / "rollouts"
    assert p.suffix == ".npz" and "/" not in p.name and not p.name.startswith(".")


def test_no_module_but_the_store_joins_a_store_folder_name():
    """store.py owns every ``<store>/...`` path: no other module joins one of its folder names onto a path."""
    import re
    from pathlib import Path
    pkg = Path(store.__file__).resolve().parent
    pattern = re.compile(r'/\s*"(rows|predictions|finished|rollouts|results\.parquet)"')
    bad = [f"{p.relative_to(pkg)}:{n}" for p in sorted(pkg.rglob("*.py")) if p.name != "store.py" or p.parent != pkg
           for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not bad, "store paths built outside store.py: " + ", ".join(bad)


def _predictions_frame(n_conditions: int = 6, n: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    label = rng.integers(0, 10, n).astype("int16")
    return pd.DataFrame({
        "run_id": "r1",
        "condition": np.repeat([f"c{i}" for i in range(n_conditions)], n),
        "severity": np.repeat(np.arange(n_conditions) % 5 + 1, n).astype("int8"),
        "index": np.tile(np.arange(n, dtype="int32"), n_conditions),
        "label": np.tile(label, n_conditions),
        "pred": rng.integers(0, 10, n * n_conditions).astype("int16"),
    })


def test_predictions_are_written_compactly_and_read_back_identical(store_dir):
    import pyarrow.parquet as pq
    df = _predictions_frame(10, 5000)
    w = store.RunWriter(store_dir, "r1")
    path = w.write_predictions("test", df.drop(columns="run_id"))
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"
    pd.testing.assert_frame_equal(store.load_predictions(store_dir, "r1"), df)
    plain = store_dir / "plain.parquet.bak"
    df.to_parquet(plain, index=False)                     # pandas' default encoding, for the size comparison
    assert path.stat().st_size < plain.stat().st_size / 2


def test_compact_reencodes_older_prediction_files_to_the_same_table(store_dir):
    import pyarrow.parquet as pq
    df = _predictions_frame()
    old = store.predictions_path(store_dir, "r1", "test")
    old.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(old, index=False)                       # how stores before the compact encoding wrote them
    assert pq.ParquetFile(old).metadata.row_group(0).column(0).compression != "ZSTD"
    store.compact(store_dir)
    assert pq.ParquetFile(old).metadata.row_group(0).column(0).compression == "ZSTD"
    pd.testing.assert_frame_equal(store.read_predictions_file(old), df)
    assert store.reencode_predictions(store_dir) == []     # already compact: nothing rewritten
    assert sorted(p.name for p in old.parent.iterdir()) == [old.name]   # no temporary file left behind


def test_compact_leaves_a_linked_prediction_file_and_its_target_alone(store_dir, tmp_path):
    df = _predictions_frame()
    outside = tmp_path / "mine.parquet"
    df.to_parquet(outside, index=False)
    before = outside.read_bytes()
    link = store.predictions_path(store_dir, "r1", "test")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    store.compact(store_dir)
    assert link.is_symlink() and link.resolve() == outside.resolve()
    assert outside.read_bytes() == before


def test_predictions_are_stored_example_by_example_and_read_back_in_their_own_order(store_dir):
    """Each image's rows side by side on disk (its label repeats, its predictions mostly agree across conditions):
    smaller than condition blocks; reading restores the blocks' order; the older compact files are rewritten."""
    import pyarrow.parquet as pq
    rng = np.random.default_rng(1)
    n, conds = 2000, [("clean", 0)] + [(f"c{i}", s) for i in range(4) for s in (1, 2, 3)]
    label = rng.integers(0, 10, n).astype("int16")
    clean_pred = np.where(rng.random(n) < 0.7, label, rng.integers(0, 10, n)).astype("int16")
    df = pd.DataFrame({
        "condition": np.repeat([c for c, _ in conds], n), "severity": np.repeat([s for _, s in conds], n).astype("int8"),
        "index": np.tile(np.arange(n, dtype="int32") * 3 + 5, len(conds)), "label": np.tile(label, len(conds)),
        "pred": np.concatenate([np.where(rng.random(n) < 0.9, clean_pred, rng.integers(0, 10, n)).astype("int16")
                                for _ in conds])})
    path = store_dir / "by_example.parquet"
    store.write_predictions_file(df, path)
    on_disk = pd.read_parquet(path)
    assert list(on_disk["index"][:len(conds)]) == [5] * len(conds)          # image 5 under every condition first
    assert list(zip(on_disk["condition"][:3], on_disk["severity"][:3])) == [("clean", 0), ("c0", 1), ("c0", 2)]
    pd.testing.assert_frame_equal(store.read_predictions_file(path), df)
    older = store_dir / "predictions" / "r9__test.parquet"
    older.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(older, index=False, compression="zstd")                  # compact codec, condition blocks
    assert store.reencode_predictions(store_dir) == [older]
    pd.testing.assert_frame_equal(store.read_predictions_file(older), df)
    assert store.reencode_predictions(store_dir) == []
    blocks = store_dir / "blocks.parquet"
    store.write_predictions_file(df, blocks)
    plain_blocks = store_dir / "plain_blocks.parquet"
    df.to_parquet(plain_blocks, index=False, compression="zstd")
    assert blocks.stat().st_size < 0.7 * plain_blocks.stat().st_size
    shuffled = df.sample(frac=1.0, random_state=0).reset_index(drop=True)   # not condition blocks: stored as is
    store.write_predictions_file(shuffled, store_dir / "shuffled.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(store_dir / "shuffled.parquet"), shuffled)
    pd.testing.assert_frame_equal(store.read_predictions_file(store_dir / "shuffled.parquet"), shuffled)
