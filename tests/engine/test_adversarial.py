"""Adversarial threat models (issue 36): AutoAttack from pyautoattack, eps in pixel units, store rows, export,
RobustBench's benchmark(threat_model="Linf"). Tiny models, <= 20 images."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from robustbench_dgsa import store
from robustbench_dgsa.engine import adversarial as adv
from robustbench_dgsa.util.errors import UserError

pytest.importorskip("pyautoattack", reason="pyautoattack (the [adversarial] extra) not installed")

MEAN, STD = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)


class _Pre:
    mean, std, image_size = MEAN, STD, None


def _data(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)


def _suite_like():
    """A suite-style model: trained on mean/std-normalised input (a registered model, tiny)."""
    from robustbench_dgsa.models.registry import create_model
    torch.manual_seed(0)
    return create_model("dgvit", num_classes=10, dim=16, depth=1, heads=2, head_hidden=16, image_size=8,
                        patch_size=4).eval()


def _raw():
    torch.manual_seed(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).eval()


@pytest.mark.parametrize("kind", ["suite", "raw"])
def test_eps_is_in_pixel_units_for_normalised_and_raw_models(kind):
    x, y = _data()
    model = adv.pixel_model(_suite_like(), _Pre()) if kind == "suite" else adv.pixel_model(_raw())
    with torch.no_grad():
        y = model(x).argmax(1)                               # every image right: each one is attacked
    eps = 32 / 255
    r = adv.run_attack(model, x, y, eps=eps, attack="apgd-ce", seed=3, keep_adversarial=True)
    linf = (r.x_adv - x).abs().reshape(len(x), -1).max(1)[0]
    assert float(linf.max()) <= eps + 1e-6                  # pixel space, whatever the model's normalisation
    assert float(r.x_adv.min()) >= 0 and float(r.x_adv.max()) <= 1
    assert np.allclose(r.norm, linf.numpy(), atol=1e-7)
    flipped = np.array([f == "apgd-ce" for f in r.flipped_by])
    assert flipped.any() and (r.norm[flipped] > 0).all() and r.robust_acc < 1.0
    with torch.no_grad():                                  # the stored adversarial prediction is the model's
        assert (model(r.x_adv).argmax(1).numpy() == r.adv_pred).all()
    assert r.seed == 3 and r.library_version == "0.2.0" and r.label == "APGD-CE only (not AutoAttack)"


def test_pixel_model_puts_the_normalisation_inside():
    inner = _suite_like()
    x, _ = _data(2)
    m = torch.tensor(MEAN).view(1, 3, 1, 1)
    s = torch.tensor(STD).view(1, 3, 1, 1)
    with torch.no_grad():
        assert torch.allclose(adv.pixel_model(inner, _Pre())(x), inner((x - m) / s), atol=1e-6)


def test_eps_zero_is_the_clean_accuracy_and_fab_min_norm():
    x, y = _data(6)
    model = adv.pixel_model(_raw())
    r0 = adv.run_attack(model, x, y, eps=0.0)
    assert r0.attack == "none" and r0.robust_acc == r0.clean_acc
    norms = adv.min_norm(model, x, y, n_iter=20)
    wrong = r0.clean_pred != r0.labels
    assert (norms[wrong] == 0).all() and (norms[~wrong] > 0).all()
    # FAB's perturbation really flips: at a radius above it, APGD finds one too, for most images
    assert np.isfinite(norms[~wrong]).all()


@pytest.mark.parametrize("tm,eps,attack,msg", [
    ("Linf", -0.1, "autoattack", ">= 0"), ("Linf", 1.5, "autoattack", "at most 1"),
    ("L3", 0.1, "autoattack", "unknown threat model"), ("Linf", 0.1, "pgd", "unknown attack"),
    ("L2", float("nan"), "autoattack", "finite")])
def test_bad_arguments_are_neutral_user_errors(tm, eps, attack, msg):
    x, y = _data(2)
    with pytest.raises(UserError, match=msg):
        adv.run_attack(adv.pixel_model(_raw()), x, y, threat_model=tm, eps=eps, attack=attack)


def test_store_rows_predictions_and_record(tmp_path):
    x, y = _data(6)
    model = adv.pixel_model(_raw())
    res = [adv.run_attack(model, x, y, eps=e, attack="apgd-ce", seed=5) for e in (0.0, 2 / 255)]
    norms = adv.min_norm(model, x, y, n_iter=10)
    rid = adv.store_results(tmp_path, res, model="m", dataset="cifar10", seed=2, min_norms=norms)
    df = store.load_results(tmp_path)
    acc = df[(df.kind == "adversarial") & (df.metric == "accuracy")].sort_values("eps")
    assert list(acc["condition"]) == ["linf", "linf"] and list(acc["attack"]) == ["none", "apgd-ce"]
    assert np.allclose(acc["eps"], [0.0, 2 / 255]) and list(acc["seed"]) == [2, 2]
    assert np.isclose(acc["value"].iloc[1], res[1].robust_acc)
    pred = store.load_predictions(tmp_path, rid)
    step = pred[pred["attack_run"] == "apgd-ce"].sort_values("index")
    assert (step["pred"].to_numpy() == res[1].adv_pred).all()
    assert (step["clean_pred"].to_numpy() == res[1].clean_pred).all()
    assert list(step["attack"]) == res[1].flipped_by
    rec = store.load_runs(tmp_path)[rid]
    assert rec["threat_model"] == "Linf" and rec["library"] == "pyautoattack" and rec["library_version"] == "0.2.0"
    assert rec["attack_seed"] == 5 and rec["steps"][1]["label"].startswith("APGD-CE only")


def test_older_stores_without_the_added_columns_still_read(tmp_path):
    """A committed store's results.parquet has no eps / attack columns: it reads, with their defaults."""
    w = store.RunWriter(tmp_path, "eval-old", dict(kind="eval", model="m", dataset="d", split="test", seed=0))
    w.add_rows([dict(condition="clean", severity=0, metric="accuracy", value=0.5, n=4)])
    store.compact(tmp_path)
    import pandas as pd
    old = pd.read_parquet(store.results_path(tmp_path)).drop(columns=list(store.ADDED_LATER_COLUMNS))
    old.to_parquet(store.results_path(tmp_path), index=False)
    store.rows_path(tmp_path, "eval-old").unlink()
    df = store.load_results(tmp_path)
    assert len(df) == 1 and df["attack"].iloc[0] == "" and np.isnan(df["eps"].iloc[0])


def test_robustbench_benchmark_linf_and_export_schema(tmp_path, monkeypatch):
    """benchmark(threat_model="Linf") runs AutoAttack (standard) and to_disk writes RobustBench's Linf fields."""
    from robustbench_dgsa.robustbench import ModelModeWarning, benchmark
    x, y = _data(6)
    model = _raw()
    with torch.no_grad():
        y = model(x).argmax(1)
    monkeypatch.chdir(tmp_path)
    model.train()
    with pytest.warns(ModelModeWarning):
        clean, robust = benchmark(model, n_examples=6, dataset=(x, y), threat_model="Linf", eps=0.3)
    assert clean == 1.0 and robust == 0.0                   # eps 0.3: APGD-CE flips all; square never runs
    from robustbench_dgsa.report.export import export_robustbench
    r = adv.run_attack(adv.pixel_model(model), x, y, eps=0.3, attack="apgd-ce")
    r.eps, r.attack = 8 / 255, "autoattack"   # stand-in row at the standard radius (full AA there: too slow for CI)
    adv.store_results(tmp_path / "s", [r], model="m", dataset="cifar10")
    ex = export_robustbench(tmp_path / "s", tmp_path / "rb")
    rec = json.loads((tmp_path / "rb" / "model_info" / "cifar10" / "Linf" / "m.json").read_text())
    assert ex.files and set(rec) == {"link", "name", "authors", "additional_data", "number_forward_passes",
                                     "dataset", "venue", "architecture", "eps", "clean_acc", "reported",
                                     "autoattack_acc", "footnote"}
    assert rec["eps"] == "8/255" and rec["autoattack_acc"] == "0.00" and rec["clean_acc"] == "100.00"
    assert isinstance(rec["additional_data"], bool) and float(rec["clean_acc"]) >= float(rec["autoattack_acc"])


def test_export_never_calls_a_weaker_attack_autoattack(tmp_path):
    x, y = _data(4)
    model = adv.pixel_model(_raw())
    adv.store_results(tmp_path / "s", [adv.run_attack(model, x, y, eps=8 / 255, attack="apgd-ce")], model="m",
                      dataset="cifar10")
    from robustbench_dgsa.report.export_adversarial import export_adversarial
    files, _, skipped = export_adversarial(tmp_path / "s", tmp_path / "rb")
    assert not files and "no full-AutoAttack rows" in skipped[0]


@pytest.mark.parametrize("kw,msg", [(dict(threat_model="Linf", eps=2.0), "at most 1"),
                                    (dict(threat_model="L2", eps=-1.0), ">= 0"),
                                    (dict(threat_model="Linf", attack="fgsm"), "unknown attack"),
                                    (dict(threat_model="Linf", log_path="x.log"), "log_path"),
                                    (dict(threat_model="corruptions", eps=0.1), "eps must be None")])
def test_robustbench_benchmark_refuses_bad_adversarial_arguments(kw, msg):
    from robustbench_dgsa.robustbench import BenchmarkArgumentError, benchmark
    x, y = _data(2)
    with pytest.raises(BenchmarkArgumentError, match=msg):
        benchmark(_raw(), n_examples=2, dataset=(x, y), **kw)


def test_robustbench_benchmark_uses_the_standard_radius_by_default(monkeypatch):
    """eps=None on CIFAR-10 / Linf is RobustBench's 8/255, on L2 0.5 (what the attack is asked for)."""
    from robustbench_dgsa.robustbench import benchmark
    seen = []
    real = adv.run_attack

    def spy(*a, **k):
        seen.append((k["threat_model"], k["eps"]))
        return real(*a, **{**k, "attack": "apgd-ce"})
    monkeypatch.setattr(adv, "run_attack", spy)
    x, y = _data(2)
    benchmark(_raw(), n_examples=2, dataset=(x, y), threat_model="Linf")
    benchmark(_raw(), n_examples=2, dataset=(x, y), threat_model="L2")
    assert seen == [("Linf", 8 / 255), ("L2", 0.5)]


def test_library_benchmark_linf_returns_adversarial_rows(tmp_path):
    """rb.benchmark(model, data, threat_model="Linf"): the run's adversarial rows, the attack named."""
    import robustbench_dgsa as rb
    x, y = _data(6)
    rows = rb.benchmark(_raw(), (x, y), threat_model="Linf", eps=0.3, attack="apgd-ce", store=tmp_path / "s",
                        name="tiny")
    assert list(rows["kind"]) == ["adversarial"] and rows["attack"].iloc[0] == "apgd-ce"
    assert rows["model"].iloc[0] == "tiny" and np.isclose(rows["eps"].iloc[0], 0.3)
    assert np.isclose(rows["value"].iloc[0], rows.attrs["result"].robust_acc)
    with pytest.raises(UserError, match="unknown threat model"):
        rb.benchmark(_raw(), (x, y), threat_model="L1")


def test_library_evaluate_of_a_checkpoint_under_linf(tmp_path):
    """rb.evaluate(checkpoint, threat_model="Linf"): the checkpoint's own normalisation inside, eps in pixels."""
    import robustbench_dgsa as rb
    from robustbench_dgsa.models.checkpoint import save_checkpoint
    model = _suite_like()
    ckpt = save_checkpoint(tmp_path / "run" / "checkpoint.safetensors", model, {
        "model": "dgvit", "dataset": "synthetic-vision", "seed": 4, "config_hash": "abc",
        "preprocess": {"mean": list(MEAN), "std": list(STD), "image_size": 8, "in_chans": 3}})
    run = rb.evaluate(ckpt, max_test=4, threat_model="Linf", eps=16 / 255, attack="apgd-ce", device="cpu")
    df = store.load_results(tmp_path / "run" / "store")
    row = df[df["kind"] == "adversarial"].iloc[0]
    assert row["model"] == "dgvit" and row["seed"] == 4 and row["config_hash"] == "abc"
    assert row["dataset"] == "synthetic-vision" and np.isclose(row["eps"], 16 / 255)
    assert run.results[0].norm.max() <= 16 / 255 + 1e-6


def test_export_cli_prints_linf_records(run_main, tmp_path):
    x, y = _data(4)
    r = adv.run_attack(adv.pixel_model(_raw()), x, y, eps=0.3, attack="apgd-ce")
    r.eps, r.attack = 8 / 255, "autoattack"                 # stand-in row at the standard radius
    adv.store_results(tmp_path / "s", [r], model="m", dataset="cifar10")
    code, out, err = run_main(["export", "--store", str(tmp_path / "s"), "--out", str(tmp_path / "rb")], tmp_path)
    assert code == 0, err
    assert "cifar10/Linf/m: clean" in err and "AutoAttack" in err and "8/255" in err


def test_targeted_attacks_fit_a_model_with_few_classes():
    """APGD-T's standard 9 target classes need 10 classes; a 4-class model gets 3 (every other class)."""
    torch.manual_seed(0)
    model = adv.pixel_model(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)))
    x, _ = _data(4)
    with torch.no_grad():
        y = model(x).argmax(1)
    r = adv.run_attack(model, x, y, eps=0.02, attack="apgd-ce+apgd-t")
    assert r.clean_acc == 1.0 and 0.0 <= r.robust_acc <= 1.0


def test_ladder_steps():
    assert [round(255 * e, 2) for e, _ in adv.LADDER] == [0, 0.5, 1, 2, 4, 8]
    assert [a for _, a in adv.LADDER] == ["none"] + ["apgd-ce+apgd-t"] * 4 + ["autoattack"]
    assert [a for _, a in adv.ladder_steps("apgd-ce")] == ["none"] + ["apgd-ce"] * 4 + ["autoattack"]
    with pytest.raises(UserError, match="unknown attack"):
        adv.ladder_steps("pgd")


def test_library_benchmark_linf_keeps_train_seed_identity(tmp_path):
    """train_seed= (issue 33) means the same under Linf: the rows carry the seed and the architecture hash."""
    import robustbench_dgsa as rb
    x, y = _data(4)
    rows = rb.benchmark(_raw(), (x, y), threat_model="Linf", eps=0.3, attack="apgd-ce", store=tmp_path / "s",
                        name="tiny", train_seed=3)
    assert rows["seed"].iloc[0] == 3 and rows["config_hash"].iloc[0].startswith("arch-")
