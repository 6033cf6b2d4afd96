"""Training: schedules, loss falls, exact resume, NaN handling, rows and files."""
from __future__ import annotations

import math
import shutil

import pytest
import torch

from robustbench_dgsa import store
from robustbench_dgsa.config import resolve_config
from robustbench_dgsa.models import get_model_config
from robustbench_dgsa.engine.schedules import cosine, linear, make_schedule
from robustbench_dgsa.util.errors import UserError

TINY = {"model.dim": 16, "model.depth": 1, "model.heads": 2, "model.head_hidden": 16, "train.epochs": 3,
        "train.batch_size": 32, "train.device": "cpu", "data.max_train": 192, "data.max_test": 64}


def tiny_cfg(model="vit", dataset="synthetic-vision", **extra):
    return resolve_config(get_model_config(model), dataset, "tiny", overrides={**TINY, **extra})


# --- schedules ---------------------------------------------------------------------------------------------

def test_cosine_schedule_formula():
    T, W = 100, 10
    f = cosine(T, W)
    assert [f(s) for s in range(W)] == pytest.approx([(s + 1) / W for s in range(W)])
    for s in (10, 25, 55, 99):
        assert f(s) == pytest.approx(0.5 * (1 + math.cos(math.pi * (s - W) / (T - W))))
    assert f(W) == pytest.approx(1.0) and f(T) == pytest.approx(0.0) and f(T + 5) == pytest.approx(0.0)
    g = cosine(50)  # no warm-up: starts at 1
    assert g(0) == 1.0 and g(25) == pytest.approx(0.5)


def test_linear_schedule_formula():
    T, W = 200, 20
    f = linear(T, W)
    assert f(0) == pytest.approx(1 / W) and f(W - 1) == pytest.approx(1.0)
    for s in (20, 50, 110, 199):
        assert f(s) == pytest.approx((T - s) / (T - W))
    assert f(T) == 0.0
    # warm-up longer than training: never leaves warm-up
    assert linear(5, 10)(4) == pytest.approx(0.5)


def test_schedule_in_lambda_lr_matches_formula():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, make_schedule("linear", 30, 5))
    lrs = []
    for _ in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    f = linear(30, 5)
    assert lrs == pytest.approx([0.1 * f(s) for s in range(30)])
    state = sched.state_dict()  # picklable / restorable
    sched2 = torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD([p], lr=0.1), make_schedule("linear", 30, 5))
    sched2.load_state_dict(state)
    assert sched2.last_epoch == 30


def test_unknown_schedule_is_user_error():
    with pytest.raises(UserError, match="unknown schedule"):
        make_schedule("step", 10)


# --- training ----------------------------------------------------------------------------------------------

def test_training_loss_falls_and_rows_recorded(tmp_path):
    from robustbench_dgsa.engine.train import train
    cfg = tiny_cfg(**{"train.epochs": 4, "train.lr": 3e-3})
    res = train(cfg, 0, tmp_path / "run", progress=False)
    losses = [h["train_loss"] for h in res.history]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert 0.0 <= res.final["test_accuracy"] <= 1.0 and res.final["n_test"] == 64
    assert (tmp_path / "run" / "checkpoint.safetensors").exists()
    assert (tmp_path / "run" / "done.json").exists()
    df = store.load_results(tmp_path / "run" / "store")
    assert set(df.kind) == {"train"} and set(df.model) == {"vit"} and set(df.seed) == {0}
    assert set(df.config_hash) == {res.config_hash}
    assert set(df.dataset) == {"synthetic-vision"}
    val = df[(df.split == "val") & (df.metric == "accuracy")]
    assert sorted(val.epoch) == [1, 2, 3, 4]
    test = df[(df.split == "test") & (df.metric == "accuracy")]
    assert len(test) == 1 and test.value.iloc[0] == pytest.approx(res.final["test_accuracy"])
    assert test.condition.iloc[0] == "clean" and test.n.iloc[0] == 64
    assert (tmp_path / "run" / "store" / "results.parquet").exists()
    runs = store.load_runs(tmp_path / "run" / "store")
    prov = runs[res.run_id]
    assert prov["seed"] == 0 and prov["config_hash"] == res.config_hash and prov["data"]["content_sha256"]
    # the checkpoint is self-describing
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    mcfg, meta = read_checkpoint_meta(res.checkpoint)
    assert mcfg.num_classes == 6 and meta["preprocess"]["modality"] == "image"
    assert meta["epoch"] == 4 and meta["run_id"] == res.run_id and meta["config_hash"] == res.config_hash
    assert len(meta["classes"]) == 6


def test_refuses_to_overwrite_existing_run(tmp_path):
    from robustbench_dgsa.engine.train import train
    cfg = tiny_cfg(**{"train.epochs": 1})
    train(cfg, 0, tmp_path / "run", progress=False)
    with pytest.raises(UserError, match="resume=True"):
        train(cfg, 0, tmp_path / "run", progress=False)
    again = train(cfg, 0, tmp_path / "run", progress=False, resume=True)   # finished: nothing to do
    assert again.final["test_accuracy"] is not None


def _weights(path):
    from safetensors.torch import load_file
    return load_file(str(path))


def test_resume_is_bit_exact(tmp_path):
    """Uninterrupted vs killed after epoch 1 (and a kill between checkpoint and state in epoch 2)."""
    from robustbench_dgsa.engine.train import STATE_NAME, train
    cfg = tiny_cfg(**{"data.augment": True})  # augmentation draws from the per-epoch generator too
    full = train(cfg, 3, tmp_path / "full", progress=False)

    out = tmp_path / "killed"
    part = train(cfg, 3, out, progress=False, stop_after_epoch=1)
    assert len(part.history) == 1
    shutil.copy(out / STATE_NAME, tmp_path / "state_epoch1.safetensors")
    train(cfg, 3, out, progress=False, resume=True, stop_after_epoch=2)
    # Simulate a kill after the epoch-2 checkpoint was written but before its train state: the state is
    # one epoch behind the checkpoint.
    shutil.copy(tmp_path / "state_epoch1.safetensors", out / STATE_NAME)
    resumed = train(cfg, 3, out, progress=False, resume=True)

    a, b = _weights(full.checkpoint), _weights(resumed.checkpoint)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert [h["train_loss"] for h in full.history] == [h["train_loss"] for h in resumed.history]
    assert resumed.final["test_accuracy"] == full.final["test_accuracy"]
    assert resumed.run_id == part.run_id
    df = store.load_results(out / "store")
    val = df[(df.split == "val") & (df.metric == "accuracy")]
    assert sorted(val.epoch.tolist()) == [1, 2, 3]            # no duplicated epoch rows after the resume


def test_resume_with_other_config_refused(tmp_path):
    from robustbench_dgsa.engine.train import train
    train(tiny_cfg(), 0, tmp_path / "r", progress=False, stop_after_epoch=1)
    with pytest.raises(UserError, match="cannot resume"):
        train(tiny_cfg(**{"train.lr": 1e-2}), 0, tmp_path / "r", progress=False, resume=True)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    import robustbench_dgsa.models as models
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    from robustbench_dgsa.engine.train import TrainingDiverged, train

    real = models.create_model
    calls = {"n": 0}

    def poisoned(cfg, **kw):
        model = real(cfg, **kw)
        forward = model.forward

        def fwd(x, key_padding_mask=None, return_attention=False):
            out = forward(x, key_padding_mask=key_padding_mask, return_attention=return_attention)
            if model.training:
                calls["n"] += 1
                if calls["n"] > 6:           # epoch 1 has 6 steps (192 examples / 32): epoch 2 goes NaN
                    return out * float("nan")
            return out
        model.forward = fwd
        return model

    monkeypatch.setattr(models, "create_model", poisoned)
    out = tmp_path / "nan"
    with pytest.raises(TrainingDiverged) as info:
        train(tiny_cfg(**{"data.max_train": 180}), 0, out, progress=False)
    msg = str(info.value)
    assert "\n" not in msg and "NaN" in msg and "epoch 2" in msg and "last good checkpoint" in msg
    _, meta = read_checkpoint_meta(out / "checkpoint.safetensors")
    assert meta["epoch"] == 1 and math.isfinite(meta["metrics"]["train_loss"])
    assert not (out / "done.json").exists()
    assert not (out / "store").exists()     # the failed run left the store as it found it (none, no empty rows/)


def test_failed_run_removes_its_rows_and_resume_rebuilds_them(tmp_path, monkeypatch):
    from robustbench_dgsa.engine import train as train_mod
    from robustbench_dgsa.engine.train import train
    store_dir = tmp_path / "store"
    store.RunWriter(store_dir, "other-run", base=dict(kind="eval", model="vit", dataset="synthetic-vision")).add(
        "accuracy", 0.5, condition="clean", severity=0, n=10)                                # someone else's rows
    before = sorted(p.relative_to(store_dir) for p in store_dir.rglob("*"))
    real = train_mod.evaluate_split

    def fail_on_test(model, x, mask, y, **kw):
        if len(y) == 64:                    # the test split (max_test 64): fail after all epochs
            raise OSError(5, "Input/output error")
        return real(model, x, mask, y, **kw)
    monkeypatch.setattr(train_mod, "evaluate_split", fail_on_test)
    with pytest.raises(OSError):
        train(tiny_cfg(**{"train.epochs": 2}), 0, tmp_path / "run", store_dir=store_dir, progress=False)
    assert sorted(p.relative_to(store_dir) for p in store_dir.rglob("*")) == before
    assert not (tmp_path / "run" / "done.json").exists()
    monkeypatch.setattr(train_mod, "evaluate_split", real)
    done = train(tiny_cfg(**{"train.epochs": 2}), 0, tmp_path / "run", store_dir=store_dir, progress=False,
                 resume=True)
    df = store.load_results(store_dir)
    rows = df[df.run_id == done.run_id]
    assert sorted(rows[(rows.split == "train") & (rows.metric == "loss")].epoch) == [1, 2]


def test_text_training_builds_vocab_and_excludes_norm_decay(tmp_path):
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    from robustbench_dgsa.engine.train import _param_groups, train
    cfg = tiny_cfg("dgt", "synthetic-text", **{"model.max_len": 40, "train.epochs": 2})
    res = train(cfg, 1, tmp_path / "t", progress=False)
    mcfg, meta = read_checkpoint_meta(res.checkpoint)
    pre = meta["preprocess"]
    assert pre["modality"] == "text" and pre["max_len"] == 40 and mcfg.vocab_size == len(pre["vocab"])
    assert mcfg.num_classes == 4 and meta["run_config"]["train"]["decay_bias_and_norm"] is False
    from robustbench_dgsa.models import create_model
    model = create_model(mcfg)
    groups = _param_groups(model, 0.01, False)
    nodecay = {id(p) for p in groups[1]["params"]}
    for name, p in model.named_parameters():
        if name.endswith(".bias") or "norm" in name.lower():
            assert id(p) in nodecay, name
    assert groups[1]["weight_decay"] == 0.0 and groups[0]["params"]


def test_modality_mismatch_and_unknown_dataset(tmp_path):
    from robustbench_dgsa.engine.train import train
    with pytest.raises(UserError, match="text"):
        train(tiny_cfg("vit", "synthetic-text"), 0, tmp_path / "a", progress=False)
    with pytest.raises(UserError, match="unknown dataset"):
        train(tiny_cfg("vit", "no-such-data"), 0, tmp_path / "b", progress=False)
