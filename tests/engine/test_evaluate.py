"""Evaluation: clean + corruptions + text noise rows, predictions, errors."""
from __future__ import annotations

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.config import resolve_config
from robustbench_dgsa.util.errors import CheckpointError, UserError
from robustbench_dgsa.models import get_model_config

TINY = {"model.dim": 16, "model.depth": 1, "model.heads": 2, "model.head_hidden": 16, "train.epochs": 1,
        "train.batch_size": 32, "train.device": "cpu", "data.max_train": 160, "data.max_test": 48}


@pytest.fixture(scope="module")
def vision_ckpt(tmp_path_factory):
    from robustbench_dgsa.engine.train import train
    out = tmp_path_factory.mktemp("vis")
    cfg = resolve_config(get_model_config("dgvit"), "synthetic-vision", "tiny", overrides=TINY)
    return train(cfg, 0, out / "run", progress=False)


@pytest.fixture(scope="module")
def text_ckpt(tmp_path_factory):
    from robustbench_dgsa.engine.train import train
    out = tmp_path_factory.mktemp("txt")
    cfg = resolve_config(get_model_config("transformer"), "synthetic-text", "tiny",
                         overrides={**TINY, "model.max_len": 40})
    return train(cfg, 2, out / "run", progress=False)


def test_image_corruptions_rows_and_predictions(vision_ckpt, tmp_path):
    from robustbench_dgsa.engine.evaluate import evaluate
    sd = tmp_path / "store"
    res = evaluate(vision_ckpt.checkpoint, corruptions=["gaussian_noise", "fog"], severities=[1, 5],
                   store_dir=sd, device="cpu", progress=False)
    t = res.table
    assert list(t.condition) == ["clean", "gaussian_noise", "gaussian_noise", "fog", "fog"]
    assert list(t.severity) == [0, 1, 5, 1, 5] and (t.n == 48).all()
    assert t.accuracy.between(0, 1).all()
    df = store.load_results(sd)
    acc = df[df.metric == "accuracy"]
    assert len(acc) == 5 and set(acc.kind) == {"eval"} and set(acc.split) == {"test"}
    assert set(acc.model) == {"dgvit"} and set(acc.seed) == {0}
    assert set(acc.config_hash) == {vision_ckpt.config_hash}
    assert set(acc[acc.condition != "clean"].source) == {"on-the-fly"}
    preds = store.load_predictions(sd, res.run_id)
    assert len(preds) == 5 * 48
    assert set(preds.columns) >= {"condition", "severity", "index", "label", "pred"}
    # accuracy rows are consistent with the stored predictions
    for (c, s), g in preds.groupby(["condition", "severity"]):
        row = acc[(acc.condition == c) & (acc.severity == s)]
        assert row.value.iloc[0] == pytest.approx(float((g.label == g.pred).mean()))
    clean = preds[preds.condition == "clean"]
    assert clean["index"].tolist() == list(range(48))
    prov = store.load_runs(sd)[res.run_id]
    assert prov["train_run_id"] == vision_ckpt.run_id and prov["corruption_seed"] == 0


def test_on_the_fly_is_chunk_independent(vision_ckpt, tmp_path):
    from robustbench_dgsa.engine.evaluate import evaluate
    a = evaluate(vision_ckpt.checkpoint, corruptions=["shot_noise"], severities=[3], store_dir=tmp_path / "a",
                 device="cpu", progress=False, chunk=1000, amp="off")   # fp32, as the near-tie check recomputes
    b = evaluate(vision_ckpt.checkpoint, corruptions=["shot_noise"], severities=[3], store_dir=tmp_path / "b",
                 device="cpu", progress=False, chunk=7, amp="off")
    pa = store.load_predictions(tmp_path / "a").sort_values(["condition", "index"])
    pb = store.load_predictions(tmp_path / "b").sort_values(["condition", "index"])
    assert_same_up_to_near_ties(vision_ckpt.checkpoint, pa, pb, lambda idx: _shot_noise_3(idx))


def _shot_noise_3(idx):
    from corruptions.api import corrupt
    from robustbench_dgsa.data import load_dataset
    return corrupt(load_dataset("synthetic-vision", "test").x[idx], "shot_noise", 3, seed=0, indices=idx)


def assert_same_up_to_near_ties(checkpoint, pa, pb, inputs_of, margin=1e-4):
    """Two runs that batch the same inputs differently: the inputs are keyed per example, so every prediction
    agrees, except that a batch size may change BLAS kernels and hence the last bits of the logits, which can flip
    the argmax of a near-tie. Each disagreement must be such a tie (top-2 logit gap < ``margin``)."""
    import torch
    from robustbench_dgsa.engine.predict import prepare_images, preprocess_from_meta
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    assert pa["index"].tolist() == pb["index"].tolist()
    differ = np.flatnonzero(pa.pred.to_numpy() != pb.pred.to_numpy())
    if differ.size == 0:
        return
    idx = pa["index"].to_numpy()[differ]
    model, meta = load_checkpoint(checkpoint)
    with torch.no_grad():
        top2 = model(prepare_images(inputs_of(idx), preprocess_from_meta(meta))).topk(2, dim=1).values
    assert (top2[:, 0] - top2[:, 1]).abs().max().item() < margin, f"predictions differ at {idx.tolist()}"


def test_text_noise_rows_with_cer_wer(text_ckpt, tmp_path):
    from corruptions.text import TEXT_NOISE_TYPES
    from robustbench_dgsa.engine.evaluate import evaluate
    sd = tmp_path / "store"
    noise = TEXT_NOISE_TYPES[0]
    res = evaluate(text_ckpt.checkpoint, text_noise=[noise], severities=[1, 4], store_dir=sd, device="cpu",
                   progress=False)
    df = store.load_results(sd)
    assert set(df.model) == {"transformer"} and set(df.seed) == {2}
    cells = df[df.condition == noise]
    assert sorted(cells.metric.unique()) == ["accuracy", "cer", "wer"]
    assert sorted(cells.severity.unique()) == [1, 4]
    cer = cells[cells.metric == "cer"].sort_values("severity").value.to_numpy()
    assert (cer > 0).all() and cer[1] >= cer[0]                   # more noise at severity 4
    assert res.table.cer.notna().sum() == 2
    assert len(store.load_predictions(sd, res.run_id)) == 3 * 48


def test_evaluate_errors(vision_ckpt, text_ckpt, tmp_path):
    from robustbench_dgsa.engine.evaluate import evaluate
    with pytest.raises(CheckpointError, match="not found"):
        evaluate(tmp_path / "missing.safetensors", store_dir=tmp_path / "s", progress=False)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        evaluate(bad, store_dir=tmp_path / "s", progress=False)
    with pytest.raises(UserError, match="classes"):
        evaluate(vision_ckpt.checkpoint, dataset="cifar10", store_dir=tmp_path / "s", progress=False)
    with pytest.raises(UserError, match="unknown dataset"):
        evaluate(vision_ckpt.checkpoint, dataset="nope", store_dir=tmp_path / "s", progress=False)
    with pytest.raises(UserError, match="text"):
        evaluate(vision_ckpt.checkpoint, text_noise=["x"], store_dir=tmp_path / "s", progress=False)
    with pytest.raises(UserError, match="severity"):
        evaluate(vision_ckpt.checkpoint, corruptions=["fog"], severities=[6], store_dir=tmp_path / "s",
                 progress=False)
    assert not (tmp_path / "s" / "rows").exists() or not list((tmp_path / "s" / "rows").iterdir())


def test_corruption_dir_matches_on_the_fly(vision_ckpt, tmp_path):
    """A regenerated CIFAR-C-layout folder gives the same predictions as on-the-fly corruption (same seed)."""
    from corruptions.layout import regenerate
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.engine.evaluate import evaluate
    test = load_dataset("synthetic-vision", "test")
    regenerate(test.x[:48], test.y[:48], tmp_path / "c", ["gaussian_noise"], [1, 3], seed=5)
    a = evaluate(vision_ckpt.checkpoint, corruptions=["gaussian_noise"], severities=[1, 3],
                 corruption_dir=tmp_path / "c", store_dir=tmp_path / "a", device="cpu", progress=False)
    b = evaluate(vision_ckpt.checkpoint, corruptions=["gaussian_noise"], severities=[1, 3], corruption_seed=5,
                 store_dir=tmp_path / "b", device="cpu", progress=False)
    assert list(a.table.source[1:]) == ["regenerated"] * 2 and list(b.table.source[1:]) == ["on-the-fly"] * 2
    pa = store.load_predictions(tmp_path / "a").sort_values(["severity", "index"]).pred.to_numpy()
    pb = store.load_predictions(tmp_path / "b").sort_values(["severity", "index"]).pred.to_numpy()
    assert np.array_equal(pa, pb)
    # a folder whose labels do not fit the test split is refused
    regenerate(test.x[48:96], test.y[48:96], tmp_path / "d", ["contrast"], [1], seed=0)
    with pytest.raises(UserError, match="labels"):
        evaluate(vision_ckpt.checkpoint, corruptions=["contrast"], severities=[1], corruption_dir=tmp_path / "d",
                 store_dir=tmp_path / "e", device="cpu", progress=False)


def test_corruption_dir_tampered_file_is_refused(vision_ckpt, tmp_path, monkeypatch):
    """A regenerated file altered after the fact (its SHA-256 no longer matches manifest.json) is refused with
    one line naming the file, before anything is evaluated."""
    from corruptions.errors import CorruptionError
    from corruptions.layout import read_manifest, regenerate
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.engine.evaluate import evaluate
    monkeypatch.setenv("CORRUPTIONS_CACHE", str(tmp_path / "cache"))
    test = load_dataset("synthetic-vision", "test")
    regenerate(test.x[:48], test.y[:48], tmp_path / "c", ["contrast"], [1], seed=0)
    path = tmp_path / "c" / read_manifest(tmp_path / "c").file_of("contrast")
    raw = np.load(path)
    raw[3] = 255 - raw[3]
    np.save(path, raw)
    with pytest.raises(CorruptionError, match=rf"{path.name}: contents differ from manifest.json") as e:
        evaluate(vision_ckpt.checkpoint, corruptions=["contrast"], severities=[1], corruption_dir=tmp_path / "c",
                 store_dir=tmp_path / "s", device="cpu", progress=False)
    assert "\n" not in str(e.value)


def test_frost_uses_given_textures(vision_ckpt, tmp_path, shared_data):
    from robustbench_dgsa.engine.evaluate import evaluate
    res = evaluate(vision_ckpt.checkpoint, corruptions=["frost"], severities=[2], store_dir=tmp_path / "s",
                   frost_dir=shared_data / "corruptions" / "frost", device="cpu", progress=False)
    assert store.load_runs(tmp_path / "s")[res.run_id]["frost_source"].startswith("dir:")


def test_failed_evaluation_leaves_the_store_as_found(tmp_path, monkeypatch):
    """A failure while writing (here: compaction) removes the run's rows, predictions and provenance."""
    from robustbench_dgsa.engine.evaluate import evaluate
    from robustbench_dgsa.engine.train import train
    cfg = resolve_config(get_model_config("vit"), "synthetic-vision", "tiny", overrides={
        "model.dim": 16, "model.depth": 1, "model.heads": 2, "model.head_hidden": 16, "train.epochs": 1,
        "train.batch_size": 32, "train.device": "cpu", "data.max_train": 64, "data.max_test": 32})
    tr = train(cfg, 0, tmp_path / "run", store_dir=tmp_path / "store", progress=False)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "store").rglob("*"))

    def broken(_):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(store, "compact", broken)
    with pytest.raises(OSError):
        evaluate(tr.checkpoint, store_dir=tmp_path / "store", corruptions=["fog"], severities=[1], progress=False)
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "store").rglob("*")) == before
    with pytest.raises(OSError):
        evaluate(tr.checkpoint, store_dir=tmp_path / "fresh", progress=False)
    assert not (tmp_path / "fresh").exists()              # no empty rows/, runs/, predictions/ folders either


def test_recorder_predictions_are_the_conditions_blocks_in_order():
    """The predictions table is built once from every condition's arrays: the same frame (values and dtypes) as
    one frame per condition concatenated, a condition with its own examples included."""
    import pandas as pd

    from robustbench_dgsa.engine.evaluate import _Recorder
    y, idx = np.array([1, 2, 0, 1]), np.arange(4)
    rec = _Recorder(y, idx)
    rec("clean", 0, np.array([1, 2, 0, 0]), "x")
    rec("gaussian_noise", 3, np.array([1, 1, 0, 0]), "x")
    rec("own", 2, np.array([1, 0]), "x", own=(np.array([1, 1]), np.array([7, 9])))
    expected = pd.concat([pd.DataFrame({"condition": c, "severity": np.int8(s), "index": i.astype(np.int32),
                                        "label": lab.astype(np.int16), "pred": p.astype(np.int16)})
                          for c, s, i, lab, p in [("clean", 0, idx, y, np.array([1, 2, 0, 0])),
                                                  ("gaussian_noise", 3, idx, y, np.array([1, 1, 0, 0])),
                                                  ("own", 2, np.array([7, 9]), np.array([1, 1]), np.array([1, 0]))]],
                         ignore_index=True)
    pd.testing.assert_frame_equal(rec.predictions(), expected, check_exact=True)
    assert [r["value"] for r in rec.rows] == [0.75, 0.5, 0.5]
