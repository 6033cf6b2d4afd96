"""The one validator of run configs (``robustbench_dgsa.config.validate``): each rule once at the library level,
the one rule for "did the user choose the image size", and the same message from two entry points (``train``
and ``sweep plan``) for the same bad config."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from robustbench_dgsa.config import (MAX_PARAMS, apply_overrides, estimate_params, is_chosen, resolve_config, validate,
                                     validate_model, with_data_facts)
from robustbench_dgsa.models import create_model, get_model_config
from robustbench_dgsa.util.errors import UserError


def _cfg(model: str = "vit", dataset: str = "synthetic-vision", **overrides: str):
    return resolve_config(get_model_config(model), dataset, "tiny", overrides=overrides)


def _msg(cfg, **kw) -> str:
    with pytest.raises(UserError) as e:
        validate(cfg, **kw)
    msg = str(e.value)
    assert "\n" not in msg and "--" not in msg  # one line, no CLI flag names
    return msg


# --- each rule once -------------------------------------------------------------------------------------------

def test_a_valid_config_passes():
    for model, dataset in (("vit", "synthetic-vision"), ("dgvit", "synthetic-vision"), ("dgt", "synthetic-text")):
        validate(_cfg(model, dataset), data_modality="text" if model == "dgt" else "image", processes=2)


def test_every_field_is_checked_against_its_rule_even_when_set_by_hand():
    cfg = _cfg()
    cfg.train.epochs = 0          # assigned after resolution: no override path saw it
    assert _msg(cfg) == "train.epochs: expected an integer ≥ 1, got 0"
    cfg = _cfg()
    cfg.train.lr = float("nan")
    assert _msg(cfg).startswith("train.lr: expected a number > 0")
    cfg = _cfg()
    cfg.data.max_test = 0
    assert _msg(cfg).startswith("data.max_test: expected an integer")
    cfg = _cfg()
    cfg.model.dim = -4
    assert _msg(cfg) == "vit on synthetic-vision: model.dim: expected an integer ≥ 1, got -4"


def test_heads_must_divide_the_width():
    assert _msg(_cfg(**{"model.heads": "3"})).endswith("model config 'vit': dim 32 must be divisible by heads 3")
    # differential attention splits each head in two
    msg = _msg(_cfg("dvit", **{"model.dim": "20", "model.heads": "4"}))
    assert msg.endswith("dim 20 must be divisible by 2*heads = 8 for diff attention")


def test_a_chosen_image_size_must_be_divisible_by_the_patch_size():
    msg = _msg(_cfg(**{"model.image_size": "30"}))
    assert msg == ("vit on synthetic-vision: model config 'vit': image size 30 is not divisible by patch size 4; "
                   "choose a patch size that divides it (e.g. 3)")
    # left to the data, the size is not known yet: any patch size passes here (the model checks the data's size)
    validate(_cfg(**{"model.patch_size": "5"}))


def test_swiglu_halves_must_not_be_empty():
    msg = _msg(_cfg("dgvit", **{"model.dim": "2", "model.heads": "1", "model.ffn_ratio": "0.2"}))
    assert msg.endswith("ffn_ratio 0.2 is too small for dim 2")


def test_too_many_parameters_are_refused_before_anything_is_allocated():
    cfg = _cfg(**{"model.dim": "8192", "model.heads": "8", "model.depth": "64"})
    assert estimate_params(cfg.model) > MAX_PARAMS
    assert "parameters, over the limit of 1,073,741,824" in _msg(cfg)


def test_the_model_must_take_the_datasets_modality():
    msg = _msg(_cfg(), data_modality="text")
    assert msg == "model 'vit' takes image input but dataset 'synthetic-vision' is text"


def test_the_global_batch_must_divide_among_the_processes():
    cfg = _cfg(**{"train.batch_size": "10"})
    validate(cfg, processes=5)
    assert _msg(cfg, processes=4).startswith("the batch size 10 is the global batch of all 4 processes")


def test_building_a_model_applies_the_same_model_rules():
    cfg = dataclasses.replace(get_model_config("vit"), image_size=30)
    with pytest.raises(UserError) as built:
        create_model(cfg)
    with pytest.raises(UserError) as checked:
        validate_model(cfg)
    assert str(built.value) == str(checked.value) == (
        "model config 'vit': image size 30 is not divisible by patch size 4; choose a patch size that divides it "
        "(e.g. 3)")


def test_test_example_selection_uses_the_configs_rules():
    from robustbench_dgsa.data.prepare import select_test
    y = np.arange(10) % 2
    with pytest.raises(UserError, match=r"^data\.test_subset: expected one of first, stratified, auto"):
        select_test(y, 4, "random")
    with pytest.raises(UserError, match=r"^data\.max_test: expected an integer ≥ 1"):
        select_test(y, 0)


# --- the one rule for "did the user choose the image size" --------------------------------------------------

@pytest.mark.parametrize("how, chosen", [
    ("registry", False),                  # the model's own value: the data decide
    ("override", True),
    ("override-same-value", True),        # chosen even when it equals the registry's value
    ("file", True),
])
def test_image_size_is_the_users_only_when_a_user_layer_set_it(how, chosen):
    if how == "registry":
        cfg = _cfg()
    elif how == "file":
        cfg = resolve_config(get_model_config("vit"), "synthetic-vision", "tiny",
                             file_overrides={"model.image_size": 16})
    else:
        cfg = _cfg(**{"model.image_size": "16" if how == "override" else "32"})
    assert is_chosen(cfg, "model.image_size") is chosen
    filled = with_data_facts(cfg, num_classes=7, image_size=64)
    assert filled.model.num_classes == 7
    assert filled.model.image_size == (cfg.model.image_size if chosen else 64)
    assert cfg.model.num_classes != 7  # the input is not changed


def test_hand_assignment_is_not_a_choice_but_apply_overrides_is():
    cfg = _cfg()
    assert not is_chosen(cfg, "model.image_size")
    apply_overrides(cfg, {"model.image_size": "48"})
    assert is_chosen(cfg, "model.image_size")
    assert with_data_facts(cfg, num_classes=3, image_size=64).model.image_size == 48


def test_text_models_take_the_vocabulary_size_from_the_data():
    cfg = _cfg("dgt", "synthetic-text")
    filled = with_data_facts(cfg, num_classes=2, image_size=64, vocab_size=123)
    assert (filled.model.vocab_size, filled.model.image_size) == (123, cfg.model.image_size)


# --- the same message from two entry points -------------------------------------------------------------------

def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.mark.parametrize("bad", [
    ["--set", "model.heads=3"],                                     # a model rule (heads vs width)
    ["--set", "model.image_size=30"],                               # a chosen size the patch does not divide
])
def test_train_and_sweep_plan_refuse_a_bad_config_with_the_same_line(run_main, tmp_path, bad):
    before = _files(tmp_path)
    common = ["--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny", "--seed", "0", *bad]
    lines = []
    for args in (["train", *common, "--out", str(tmp_path / "run")],
                 ["sweep", "plan", str(tmp_path / "sweep"), *common]):
        code, out, err = run_main(args, tmp_path)
        err_lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2, (args, out, err)
        assert len(err_lines) == 1 and err_lines[0].startswith("error: ") and "Traceback" not in err, err
        lines.append(err_lines[0])
    assert lines[0] == lines[1]
    assert "vit on synthetic-vision: model config 'vit': " in lines[0]
    assert _files(tmp_path) == before  # nothing written by either command
    assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "sweep")
