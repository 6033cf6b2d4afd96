"""The adversarial campaign's inputs (issue 36): the first campaign's recorded CIFAR-10 training runs, and the
clean-accuracy check of a retrained model (no training, no attack here)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from robustbench_dgsa.jobs import adversarial as job
from robustbench_dgsa.util.errors import RunFailure, UserError

EVIDENCE = Path(__file__).resolve().parents[2] / "results" / "evidence"


@pytest.mark.skipif(not (EVIDENCE / "store" / "runs").is_dir(), reason="committed first campaign absent")
def test_campaign_redoes_5_seeds_of_the_three_vision_models_in_fp32():
    recs = job.campaign_runs(EVIDENCE)
    assert [(r["model"], int(r["seed"])) for r in recs] == [(m, s) for m in ("vit", "dvit", "dgvit")
                                                             for s in range(5)]
    assert all(r["precision"] == "fp32" and "test_accuracy" in r["final"] for r in recs)


def test_no_records_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no cifar10 training records"):
        job.campaign_runs(tmp_path)


@pytest.mark.parametrize("got,ok", [(0.5200, True), (0.5229, True), (0.5231, False), (0.5169, False)])
def test_retrained_clean_accuracy_must_match_within_0_3_pp(monkeypatch, tmp_path, got, ok):
    seen = {}

    def fake_train(cfg, seed, out, **kw):
        seen["amp"] = cfg.train.amp
        return SimpleNamespace(final={"test_accuracy": got}, checkpoint=Path(out) / "checkpoint.safetensors")
    monkeypatch.setattr("robustbench_dgsa.engine.train.train", fake_train)
    rec = next(r for r in job.campaign_runs(EVIDENCE) if r["model"] == "vit") if EVIDENCE.is_dir() else None
    if rec is None:
        pytest.skip("committed first campaign absent")
    rec = {**rec, "final": {**rec["final"], "test_accuracy": 0.5200}}
    if ok:
        assert job.retrain(rec, tmp_path)[1] == got
    else:
        with pytest.raises(RunFailure, match="not within"):
            job.retrain(rec, tmp_path)
    assert seen["amp"] == "off"
