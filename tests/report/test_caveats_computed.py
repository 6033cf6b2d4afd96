"""Every number of the scale and subset caveats comes from the store (run records, rows) and the run configs:
edit one and the caveat changes with it (the README once said "8,000 training texts" where Rotten Tomatoes
trained on 6,824, and "about 1/20 of the paper's" where width × depth is about 1/5)."""
from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd

from robustbench_dgsa.report.caveats import caveat_lines, train_sizes, train_words
from robustbench_dgsa.report.document import Report
from robustbench_dgsa.report.page import header_lines


def _setup(n_train: int = 8000, dim: int = 96, depth: int = 3, params: int = 2_283_284):
    rows = []
    for seed in range(5):
        rows.append(dict(run_id=f"train-{seed}", kind="train", model="transformer", config_hash="h1",
                         dataset="20newsgroups", split="train", condition="", severity=0, seed=seed,
                         metric="loss", value=1.0, n=n_train, epoch=1, source="", git_commit="",
                         package_version="0.1.0", created=""))
        rows.append(dict(run_id=f"eval-{seed}", kind="eval", model="transformer", config_hash="h1",
                         dataset="20newsgroups", split="test", condition="clean", severity=0, seed=seed,
                         metric="accuracy", value=0.4, n=2000, epoch=4, source="20news test", git_commit="",
                         package_version="0.1.0", created=""))
    runs = {f"train-{s}": {"kind": "train", "dataset": "20newsgroups", "model": "transformer", "params": params,
                           "data": {"n_train": n_train, "n_train_official": 11314, "n_val": 2000}}
            for s in range(5)}
    cfg = {"model": {"name": "transformer", "dim": dim, "depth": depth, "heads": 4, "modality": "text"},
           "train": {"epochs": 4, "batch_size": 32, "lr": 1e-3},
           "data": {"max_train": 8000, "max_test": 2000, "test_subset": "auto"}}
    return pd.DataFrame(rows), runs, {"h1": cfg}


def _lines(df, runs, cfgs) -> list[str]:
    rep = Report(Path("store"), Path("out"), df, runs)
    return caveat_lines(rep, cfgs, {"20newsgroups": "text"}) + header_lines(rep, cfgs, {"20newsgroups": "text"})


def test_training_set_size_comes_from_the_run_records_not_the_cap():
    df, runs, cfgs = _setup()
    text = " ".join(_lines(df, runs, cfgs))
    assert "8,000 of the 11,314 official training examples (71 %; 2,000 held out for validation)" in text
    for rec in runs.values():
        rec["data"]["n_train"] = 6824                       # the record, not the config's cap, is the count
    text = " ".join(_lines(df, runs, cfgs))
    assert "6,824 of the 11,314" in text and "8,000 of the 11,314" not in text


def test_no_training_subset_caveat_when_train_plus_validation_is_the_whole_split():
    assert train_words([(6824, 8530, 1706)]) == ("6,824 of the 8,530 official training examples (80 %; 1,706 "
                                                 "held out for validation)")
    df, runs, cfgs = _setup()
    for rec in runs.values():
        rec["data"].update(n_train=9314, n_val=2000)
    assert train_sizes(runs, "20newsgroups") == [(9314, 11314, 2000)]
    assert not any(ln.startswith("Subset:") and "trained on" in ln for ln in _lines(df, runs, cfgs))


def test_scale_caveat_follows_the_config_and_the_parameter_count():
    df, runs, cfgs = _setup()
    line = next(ln for ln in _lines(df, runs, cfgs) if ln.startswith("Scale:"))
    assert "D = 96 vs 256, 3 vs 6 blocks: width × depth = 1/5.3" in line
    assert "parameters 1/5.8 to 1/5.8" in line                 # 13.3 M (published.csv) / 2,283,284
    cfgs2 = copy.deepcopy(cfgs)
    cfgs2["h1"]["model"]["dim"] = 128
    line = next(ln for ln in _lines(df, runs, cfgs2) if ln.startswith("Scale:"))
    assert "D = 128 vs 256, 3 vs 6 blocks: width × depth = 1/4.0" in line
    df3, runs3, cfgs3 = _setup(params=1_000_000)
    line = next(ln for ln in _lines(df3, runs3, cfgs3) if ln.startswith("Scale:"))
    assert "parameters 1/13.3 to 1/13.3" in line


def _image_rows(ds: str, side: int, corrupted: bool):
    rows = [dict(run_id="eval-0", kind="eval", model="dgvit", config_hash="hi", dataset=ds, split="test",
                 condition="clean", severity=0, seed=0, metric="accuracy", value=0.8, n=100, epoch=1,
                 source="test", git_commit="", package_version="0.1.0", created="")]
    if corrupted:
        rows.append(dict(rows[0], condition="fog", severity=3, value=0.5, source="regenerated"))
    cfg = {"model": {"name": "dgvit", "dim": 96, "depth": 4, "heads": 4, "modality": "image", "image_size": side,
                     "patch_size": 7}, "train": {"epochs": 30}, "data": {}}
    return pd.DataFrame(rows), {}, {"hi": cfg}


def test_corruptions_at_a_side_without_a_reference_generator_are_flagged():
    def lines(side, corrupted):
        df, runs, cfgs = _image_rows("fashion-mnist", side, corrupted)
        return [ln for ln in caveat_lines(Report(Path("store"), Path("out"), df, runs), cfgs,
                                          {"fashion-mnist": "image"}) if ln.startswith("Constants of another size")]
    got = lines(28, True)
    assert len(got) == 1 and "FashionMNIST's 28×28 images have no reference corruption generator" in got[0]
    assert lines(32, True) == [] and lines(28, False) == []         # a reference side / clean only: nothing to flag
