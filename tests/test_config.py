"""The config system: presets, overrides from CLI strings and files, hashing."""
import json
import re

import pytest

from robustbench_dgsa.config import (ModelConfig, RunConfig, apply_overrides, load_config_file,
                                     parse_set_options, resolve_config)
from robustbench_dgsa.util.errors import UserError


def test_paper_preset_matches_spec_tables():
    vision = resolve_config(ModelConfig(modality="image"), "cifar10", "paper")
    assert (vision.train.epochs, vision.train.batch_size, vision.train.lr) == (100, 128, 3e-4)
    assert vision.train.betas == (0.9, 0.999) and vision.train.schedule == "cosine"
    text = resolve_config(ModelConfig(modality="text"), "imdb", "paper")
    assert (text.train.epochs, text.train.batch_size, text.train.warmup_steps) == (10, 32, 1000)
    assert text.train.betas == (0.9, 0.98) and text.train.grad_clip == 1.0
    assert text.model.depth == 6 and text.model.dropout == 0.1
    rt = resolve_config(ModelConfig(modality="text"), "rotten-tomatoes", "paper")
    assert (rt.model.depth, rt.train.lr, rt.train.warmup_steps) == (4, 5e-4, 500)
    mnli = resolve_config(ModelConfig(modality="text"), "mnli", "paper")
    assert (mnli.model.dim, mnli.train.epochs, mnli.train.batch_size, mnli.train.warmup_steps) == (512, 5, 128, 4000)


def test_specials_only_apply_to_paper_preset():
    rt = resolve_config(ModelConfig(modality="text"), "rotten-tomatoes", "tiny")
    assert rt.train.warmup_steps != 500


def test_overrides_coerce_cli_strings():
    cfg = resolve_config(ModelConfig(), "cifar10", "tiny",
                         overrides=parse_set_options(["train.lr=0.01", "model.q_residual=true",
                                                      "grad_clip=none", "betas=0.8,0.9", "dim=48"]))
    assert cfg.train.lr == 0.01 and cfg.model.q_residual is True
    assert cfg.train.grad_clip is None and cfg.train.betas == (0.8, 0.9) and cfg.model.dim == 48


def test_later_sources_win(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[train]\nlr = 0.5\nepochs = 7\n")
    cfg = resolve_config(ModelConfig(), "cifar10", "paper", file_overrides=load_config_file(f),
                         overrides={"train.epochs": "9"})
    assert cfg.train.lr == 0.5 and cfg.train.epochs == 9
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"model": {"depth": 3}}))
    assert resolve_config(ModelConfig(), "cifar10", "tiny", file_overrides=load_config_file(j)).model.depth == 3


@pytest.mark.parametrize("bad", [{"train.nope": 1}, {"nosection.lr": 1}, {"zzz": 1}, {"model.q_residual": "maybe"}])
def test_bad_overrides_are_user_errors(bad):
    with pytest.raises(UserError):
        apply_overrides(RunConfig(), bad)


def test_bad_preset_and_file(tmp_path):
    with pytest.raises(UserError, match="valid: tiny, small, paper"):
        resolve_config(ModelConfig(), "cifar10", "huge")
    with pytest.raises(UserError, match="not found"):
        load_config_file(tmp_path / "missing.toml")
    broken = tmp_path / "b.toml"
    broken.write_text("[train\n")
    with pytest.raises(UserError, match="cannot parse"):
        load_config_file(broken)


def test_hash_is_stable_and_sensitive():
    a = resolve_config(ModelConfig(), "cifar10", "tiny")
    b = RunConfig.from_dict(json.loads(json.dumps(a.to_dict())))
    assert a.hash() == b.hash() and len(a.hash()) == 12
    apply_overrides(b, {"train.lr": 0.123})
    assert a.hash() != b.hash()


def test_optional_text_fields_stay_strings_and_optional_numbers_are_checked():
    cfg = apply_overrides(RunConfig(), {"data.data_root": "/data/x", "data.max_train": "100"})
    assert cfg.data.data_root == "/data/x" and cfg.data.max_train == 100
    assert apply_overrides(RunConfig(), {"data.data_root": "123"}).data.data_root == "123"
    with pytest.raises(UserError, match=re.escape("grad_clip: cannot read 'abc' as float | None")):
        apply_overrides(RunConfig(), {"train.grad_clip": "abc"})


def test_hash_ignores_where_a_run_executes():
    a = resolve_config(ModelConfig(), "cifar10", "tiny")
    b = apply_overrides(RunConfig.from_dict(a.to_dict()), {"data.data_root": "/elsewhere", "train.device": "cpu"})
    assert a.hash() == b.hash()
