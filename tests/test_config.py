"""The config system: presets, typed and range-checked overrides from CLI strings and files, provenance, hashing."""
import json

import pytest

from robustbench_dgsa.config import (ATTENTION_TYPES, FFN_TYPES, GATE_BIAS_INITS, LAMBDA_INIT_MODES, LAYERS,
                                     MODALITIES, PRESETS, SCHEDULES, DataConfig, ModelConfig, RunConfig, TrainConfig,
                                     apply_overrides, check_overrides, expected_text, field_specs, load_config_file,
                                     load_preset, parse_set_options, resolve_config)
from robustbench_dgsa.util.errors import UserError


def test_paper_preset_matches_spec_tables():
    vision = resolve_config(ModelConfig(modality="image"), "cifar10", "paper")
    assert (vision.train.epochs, vision.train.batch_size, vision.train.lr) == (100, 128, 3e-4)
    assert vision.train.betas == (0.9, 0.999) and vision.train.schedule == "cosine"
    assert vision.train.grad_clip is None and vision.data.val_fraction == 0.1
    text = resolve_config(ModelConfig(modality="text"), "imdb", "paper")
    assert (text.train.epochs, text.train.batch_size, text.train.warmup_steps) == (10, 32, 1000)
    assert text.train.betas == (0.9, 0.98) and text.train.grad_clip == 1.0
    assert text.model.depth == 6 and text.model.dropout == 0.1
    rt = resolve_config(ModelConfig(modality="text"), "rotten-tomatoes", "paper")
    assert (rt.model.depth, rt.train.lr, rt.train.warmup_steps) == (4, 5e-4, 500)
    mnli = resolve_config(ModelConfig(modality="text"), "mnli", "paper")
    assert (mnli.model.dim, mnli.train.epochs, mnli.train.batch_size, mnli.train.warmup_steps) == (512, 5, 128, 4000)
    assert mnli.data.max_vocab == 30000


def test_specials_only_apply_to_paper_preset():
    rt = resolve_config(ModelConfig(modality="text"), "rotten-tomatoes", "tiny")
    assert rt.train.warmup_steps != 500


def test_presets_are_package_data_checked_like_files():
    for name in PRESETS:
        p = load_preset(name)
        assert set(p.by_modality) == set(MODALITIES) and p.by_modality["image"]["train.epochs"] >= 1
    assert isinstance(load_preset("tiny").by_modality["text"]["train.betas"], tuple)
    with pytest.raises(UserError, match=r"unknown preset 'tinny' \(did you mean tiny\? valid: tiny, small, evidence, zoo, paper\)"):
        load_preset("tinny")


def test_choices_agree_with_the_code_that_uses_them():
    from robustbench_dgsa.engine.schedules import SCHEDULES as used_schedules
    from robustbench_dgsa.models.attention import ATTENTION_TYPES as used_attn, GATE_BIAS_INITS as used_gate
    from robustbench_dgsa.models.attention import LAMBDA_INIT_MODES as used_lambda
    from robustbench_dgsa.models.blocks import FFN_TYPES as used_ffn, MODALITIES as used_modalities
    assert SCHEDULES == tuple(used_schedules) and ATTENTION_TYPES == tuple(used_attn)
    assert GATE_BIAS_INITS == tuple(used_gate) and LAMBDA_INIT_MODES == tuple(used_lambda)
    assert FFN_TYPES == tuple(used_ffn) and MODALITIES == tuple(used_modalities)


def test_every_field_has_a_type_and_the_defaults_pass_their_own_rules():
    for section, cls in (("model", ModelConfig), ("train", TrainConfig), ("data", DataConfig)):
        defaults = cls()
        specs = field_specs(cls)
        assert specs and all(s.base in (int, float, bool, str, tuple, dict) for s in specs.values())
        check_overrides({f"{section}.{k}": getattr(defaults, k) for k in specs}, text=False)
    assert expected_text(field_specs(TrainConfig)["epochs"]) == "an integer ≥ 1"
    assert expected_text(field_specs(ModelConfig)["dropout"]) == "a number in [0, 1)"
    assert expected_text(field_specs(TrainConfig)["grad_clip"]) == "a number > 0 or none"


def test_overrides_coerce_cli_strings():
    cfg = resolve_config(ModelConfig(), "cifar10", "tiny",
                         overrides=parse_set_options(["train.lr=0.01", "model.q_residual=true", "grad_clip=none",
                                                      "betas=0.8,0.9", "dim=48", "model.ffn_ratio=16/3",
                                                      "data.max_train=none", "train.device=cuda:1"]))
    assert cfg.train.lr == 0.01 and cfg.model.q_residual is True
    assert cfg.train.grad_clip is None and cfg.train.betas == (0.8, 0.9) and cfg.model.dim == 48
    assert cfg.model.ffn_ratio == pytest.approx(16 / 3) and cfg.data.max_train is None
    assert cfg.train.device == "cuda:1"
    assert isinstance(cfg.model.dim, int) and isinstance(cfg.train.lr, float)


def test_later_sources_win_and_are_recorded(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[train]\nlr = 0.5\nepochs = 7\nbetas = [0.8, 0.95]\n[data]\naugment = true\n")
    cfg = resolve_config(ModelConfig(), "cifar10", "paper", file_overrides=load_config_file(f),
                         overrides={"train.epochs": "9"})
    assert cfg.train.lr == 0.5 and cfg.train.epochs == 9 and cfg.train.betas == (0.8, 0.95) and cfg.data.augment
    assert cfg.sources["train.lr"] == "file" and cfg.sources["train.epochs"] == "override"
    assert cfg.sources["train.batch_size"] == "preset" and cfg.sources["model.attention"] == "registry"
    assert cfg.sources["train.eps"] == "default" and cfg.sources["data.dataset"] == "argument"
    rt = resolve_config(ModelConfig(modality="text"), "rotten-tomatoes", "paper")
    assert rt.sources["model.depth"] == "paper-dataset"
    assert set(cfg.sources.values()) <= set(LAYERS) and len(cfg.sources) == sum(len(d) for d in cfg.to_dict().values())
    # provenance is not identity: the same values from other layers hash the same
    other = resolve_config(ModelConfig(), "cifar10", "paper", overrides={"train.lr": 0.5, "train.epochs": 9,
                                                                         "train.betas": "0.8,0.95",
                                                                         "data.augment": "yes"})
    assert other.hash() == cfg.hash() and "sources" not in cfg.to_dict()
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"model": {"depth": 3}, "train": {"grad_clip": None}}))
    assert resolve_config(ModelConfig(), "cifar10", "tiny", file_overrides=load_config_file(j)).model.depth == 3


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and msg.strip() == msg and msg, msg
    return msg


# (override, text the one line must hold)
BAD_SETS = [
    ({"train.epochs": "1.5"}, "train.epochs: expected an integer ≥ 1, got 1.5"),
    ({"train.epochs": "2.5"}, "train.epochs: expected an integer ≥ 1, got 2.5"),
    ({"train.epochs": "0"}, "train.epochs: expected an integer ≥ 1, got 0"),
    ({"train.lr": "[1,2]"}, "train.lr: expected a number > 0, got [1,2]"),
    ({"train.lr": "-1"}, "train.lr: expected a number > 0, got -1"),
    ({"train.lr": "nan"}, "train.lr: expected a number > 0, got nan"),
    ({"train.batch_size": "-5"}, "train.batch_size: expected an integer ≥ 1, got -5"),
    ({"train.weight_decay": "-0.1"}, "train.weight_decay: expected a number ≥ 0, got -0.1"),
    ({"train.warmup_steps": "-1"}, "train.warmup_steps: expected an integer ≥ 0, got -1"),
    ({"model.dropout": "1"}, "model.dropout: expected a number in [0, 1), got 1"),
    ({"train.betas": "0.9"}, "train.betas: expected 2 comma-separated numbers, each in [0, 1), got 0.9"),
    ({"train.betas": "0.9,1.5"}, "train.betas: expected 2 comma-separated numbers, each in [0, 1), got 0.9,1.5"),
    ({"train.schedule": "cosin"}, "train.schedule: expected one of cosine, linear, constant, got cosin"),
    ({"model.attention": "flash"}, "model.attention: expected one of mhsa, diff, dgsa"),
    ({"train.amp": "fp16"}, "train.amp: expected one of auto, bf16, off, got fp16"),
    ({"train.device": "gpu"}, "train.device: expected auto, cpu, cuda or cuda:N, got gpu"),
    ({"model.q_residual": "maybe"}, "model.q_residual: expected true or false, got maybe"),
    ({"train.grad_clip": "abc"}, "train.grad_clip: expected a number > 0 or none, got abc"),
    ({"data.max_train": "0"}, "data.max_train: expected an integer ≥ 1 or none, got 0"),
    ({"data.val_fraction": "1"}, "data.val_fraction: expected a number in [0, 1), got 1"),
    ({"train.epochs": "none"}, "train.epochs: expected an integer ≥ 1, got none"),
    ({"train.epoch": "3"}, "unknown config key 'train.epoch' (did you mean train.epochs? valid train keys: epochs"),
    ({"train.augment": "true"}, "did you mean data.augment?"),
    ({"trian.lr": "1"}, "unknown config section 'trian' in 'trian.lr' (did you mean train? valid: model, train, data)"),
    ({"zzz": "1"}, "unknown config key 'zzz' (valid keys: model.name, model.modality"),
    ({"epoch": "3"}, "unknown config key 'epoch' (did you mean train.epochs? valid keys: "),
]


@pytest.mark.parametrize("bad, expect", BAD_SETS, ids=[next(iter(b)) + "=" + str(next(iter(b.values())))
                                                     for b, _ in BAD_SETS])
def test_bad_overrides_give_one_line_naming_key_value_and_expectation(bad, expect):
    with pytest.raises(UserError) as e:
        resolve_config(ModelConfig(), "cifar10", "tiny", overrides=bad)
    assert expect in _one_line(e)


def test_set_options_check_keys_at_once():
    with pytest.raises(UserError, match=r"expected key=value \(e.g. train.lr=1e-3\), got 'lr'"):
        parse_set_options(["lr"])
    with pytest.raises(UserError, match="unknown config key 'model.colour'"):
        parse_set_options(["model.colour=red"])
    assert check_overrides({"dim": "64", "lr": "1e-3"}) == {"model.dim": 64, "train.lr": 1e-3}
    assert parse_set_options([" train.lr = 1e-3 "]) == {"train.lr": "1e-3"}


# (file name, content, text the one line must hold)
BAD_FILES = [
    ("types.toml", b'[train]\nepochs = "ten"\n', 'train.epochs: expected an integer \u2265 1, got "ten"'),
    ("float_epochs.toml", b"[train]\nepochs = 2.5\n", "train.epochs: expected an integer \u2265 1, got 2.5"),
    ("quoted.toml", b'[train]\nlr = "1e-3"\n', 'train.lr: expected a number > 0, got "1e-3" (quoted text'),
    ("listlr.json", b'{"train": {"lr": [1, 2]}}', "train.lr: expected a number > 0, got [1, 2]"),
    ("bool.json", b'{"data": {"augment": 1}}', "data.augment: expected true or false, got 1"),
    ("nullbs.json", b'{"train": {"batch_size": null}}', "train.batch_size: expected an integer \u2265 1, got null"),
    ("toplist.json", b'[{"train": {"lr": 1}}]', "expected tables [model], [train], [data] at the top level, got list"),
    ("section.json", b'{"train": 5}', "[train] must be a table of keys, got 5"),
    ("latin1.toml", b"[train]\n# caf\xe9\nlr = 0.1\n", "is not UTF-8 text (byte 0xe9"),
    ("broken.toml", b"[train\n", "is not valid TOML: Expected ']'"),
    ("broken.json", b'{"train": {', "is not valid JSON: Expecting property name"),
    ("unknown_section.toml", b"[optim]\nlr = 1\n", "unknown config section 'optim'"),
    ("unknown_key.toml", b"[model]\nheadz = 4\n", "unknown config key 'model.headz' (did you mean model.heads?"),
    ("range.toml", b"[model]\ndropout = 1.5\n", "model.dropout: expected a number in [0, 1), got 1.5"),
]


@pytest.mark.parametrize("name, content, expect", BAD_FILES, ids=[n for n, _, _ in BAD_FILES])
def test_bad_config_files_give_one_line_naming_the_file(tmp_path, name, content, expect):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UserError) as e:
        load_config_file(path)
    msg = _one_line(e)
    assert expect in msg and str(path) in msg, msg


def test_missing_or_folder_config_file(tmp_path):
    with pytest.raises(UserError, match="config file not found"):
        load_config_file(tmp_path / "missing.toml")
    with pytest.raises(UserError, match="is not a file"):
        load_config_file(tmp_path)


def test_hash_is_stable_and_sensitive():
    a = resolve_config(ModelConfig(), "cifar10", "tiny")
    b = RunConfig.from_dict(json.loads(json.dumps(a.to_dict())))
    assert a.hash() == b.hash() and len(a.hash()) == 12 and b.train.betas == a.train.betas
    apply_overrides(b, {"train.lr": 0.123})
    assert a.hash() != b.hash()


def test_from_dict_checks_stored_configs():
    good = RunConfig().to_dict()
    good["train"]["epochs"] = -3
    with pytest.raises(UserError, match=r"train.epochs: expected an integer ≥ 1, got -3"):
        RunConfig.from_dict(good)
    with pytest.raises(UserError, match="unknown config section 'optim'"):
        RunConfig.from_dict({"optim": {}})


def test_optional_text_fields_stay_strings_and_optional_numbers_are_checked():
    cfg = apply_overrides(RunConfig(), {"data.data_root": "/data/x", "data.max_train": "100"})
    assert cfg.data.data_root == "/data/x" and cfg.data.max_train == 100
    assert apply_overrides(RunConfig(), {"data.data_root": "123"}).data.data_root == "123"
    assert apply_overrides(RunConfig(), {"data.data_root": "none"}).data.data_root is None


def test_hash_ignores_where_a_run_executes():
    a = resolve_config(ModelConfig(), "cifar10", "tiny")
    b = apply_overrides(RunConfig.from_dict(a.to_dict()), {"data.data_root": "/elsewhere", "train.device": "cpu"})
    assert a.hash() == b.hash()


def test_model_registry_overrides_go_through_the_same_check():
    from robustbench_dgsa.models.registry import apply_model_overrides, get_model_config
    assert apply_model_overrides(get_model_config("vit"), dim="64").dim == 64
    with pytest.raises(UserError, match=r"model.depth: expected an integer ≥ 1, got 0"):
        apply_model_overrides(get_model_config("vit"), depth="0")


# --- through the command line: exit 2, one line on stderr, no traceback, nothing written ---------------------



def test_cli_bad_config_values_are_one_line_and_write_nothing(tmp_path, run_cli_cases):
    (tmp_path / "types.toml").write_text('[train]\nepochs = "ten"\n')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "null.json").write_text('{"train": {"batch_size": null}}')
    (tmp_path / "bytes.toml").write_bytes(b"\xff\xfe[train]\n")
    out = tmp_path / "out"
    train = ["train", "--model", "vit", "--dataset", "synthetic-vision", "--out", str(out)]
    cases = [
        (train + ["--set", "train.epochs=1.5"], "train.epochs: expected an integer ≥ 1, got 1.5"),
        (train + ["--set", "train.epochs=2.5"], "got 2.5"),
        (train + ["--set", "train.lr=[1,2]"], "train.lr: expected a number > 0, got [1,2]"),
        (train + ["--set", "train.lr=-1"], "train.lr: expected a number > 0, got -1"),
        (train + ["--set", "train.nope=1"], "unknown config key 'train.nope'"),
        (train + ["--set", "lr"], "expected key=value"),
        (train + ["--epochs", "0"], "--epochs"),  # the CLI refuses these by flag, before the config layer
        (train + ["--batch-size", "-5"], "--batch-size"),
        (train + ["--lr", "-1"], "--lr"),
        (train + ["--config", str(tmp_path / "types.toml")], 'train.epochs: expected an integer ≥ 1, got "ten"'),
        (train + ["--config", str(tmp_path / "list.json")], "at the top level, got list"),
        (train + ["--config", str(tmp_path / "null.json")], "train.batch_size: expected an integer ≥ 1, got null"),
        (train + ["--config", str(tmp_path / "bytes.toml")], "is not UTF-8 text"),
        (train + ["--preset", "huge"], "unknown preset 'huge'"),
    ]
    results = run_cli_cases([a for a, _ in cases])
    for (args, expect), (code, err) in zip(cases, results):
        err = err.strip()
        assert code == 2, (args, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("error:") and expect in err, (expect, err)
    assert not out.exists()


def test_fields_added_later_keep_older_identities():
    from robustbench_dgsa.models import get_model_config
    """A run stored before data.test_subset existed keeps its config hash (resume, grouping) while the field holds
    the value that means the old behaviour; another value is a different experiment."""
    cfg = resolve_config(get_model_config("vit"), "cifar10", "small")
    before = cfg.hash()
    assert cfg.data.test_subset == "first"
    assert before == "3c5eb95f500c"   # pinned: the hash this config had before the field was added
    cfg.data.test_subset = "stratified"
    assert cfg.hash() != before
