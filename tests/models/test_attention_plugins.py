"""The public extension interface: register_attention / register_model, model.attention_args, plugin discovery
(entry points, DGSA_BENCH_PLUGINS, --plugin), plugin records, and the built-ins going through the same registry
with identical outputs and config hashes.

Fixtures recorded from main's code before the registry existed (commit d743878, torch 2.14.1 CPU):
``zoo_logits_main.json`` (logits of every shipped zoo model on a fixed input, fused and explicit paths, as
``float.hex``) and ``../config_hashes_main.json`` (config hashes of every built-in model under every preset).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from robustbench_dgsa.config import (PRESETS, RunConfig, apply_overrides, load_config_file, parse_set_options,
                                     resolve_config, validate_model)
from robustbench_dgsa.models import (MODEL_NAMES, apply_model_overrides, create_model, get_attention,
                                     get_model_config, register_attention)
from robustbench_dgsa.rollout.core import RolloutSpec, default_mode
from robustbench_dgsa.util.errors import UserError

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def test_zoo_logits_identical_to_mains():
    """Every shipped model gives main's logits: bit for bit on the arithmetic path they were recorded on (same
    torch, same CPU capability, same CPU model: Intel and AMD pick other BLAS / oneDNN kernels at one capability),
    else to float32 rounding (another machine, or the CI's second pass with other kernels)."""
    from robustbench_dgsa.util.provenance import cpu_model
    from robustbench_dgsa.models.zoo import list_pretrained, load_pretrained
    ref = json.loads((HERE / "zoo_logits_main.json").read_text())
    exact = (ref["torch"] == torch.__version__ and ref["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
             and ref["cpu_model"] == cpu_model())
    assert {c.name for c in list_pretrained()} == set(ref["models"])
    for card in list_pretrained():
        m = load_pretrained(card.name).model
        g = torch.Generator().manual_seed(0)
        if card.modality == "image":
            x = torch.randn(3, m.config.in_chans, m.config.image_size, m.config.image_size, generator=g)
        else:
            x = torch.randint(1, min(m.config.vocab_size, 1000), (3, 24), generator=g)
            x[1, 16:] = 0
        with torch.no_grad():
            got = {"fused": m(x)}
            m.set_attention_impl("explicit")
            got["explicit"] = m(x, return_attention=True)[0]
        for path, logits in got.items():
            want = torch.tensor([float.fromhex(v) for v in ref["models"][card.name][path]], dtype=torch.float64)
            have = logits.double().flatten()
            if exact:
                assert torch.equal(have, want), f"{card.name} {path}: logits differ from main's"
            else:
                torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-5)


def test_config_hashes_identical_to_mains():
    want = json.loads((REPO / "tests" / "config_hashes_main.json").read_text())
    got = {}
    for p in PRESETS:
        for m in MODEL_NAMES:
            ds = "synthetic-vision" if get_model_config(m).modality == "image" else "synthetic-text"
            for extra in ({}, {"model.q_residual": "true", "model.lambda_init": "fixed"}):
                c = resolve_config(get_model_config(m), ds, p, overrides=dict(extra))
                got[f"{p}|{m}|{ds}|{sorted(extra.items())}"] = c.hash()
    assert {k: got.get(k) for k in want} == want          # every config main hashed keeps its hash
    later = {k.split("|")[1] for k in set(got) - set(want)}
    assert later == {"dgvit_nogate", "dgvit_noqres", "dgvit_learnlambda"}   # the models registered since
    assert len({got[f"evidence|{m}|synthetic-vision|[]"] for m in ("dgvit", *later)}) == 4
    # the new field is "added later": empty it stays out of the hash; set, it enters it
    c = resolve_config(get_model_config("vit"), "synthetic-vision", "tiny")
    assert "attention_args" in c.to_dict()["model"] and c.hash() == want[f"tiny|vit|synthetic-vision|[]"]


def test_builtins_are_registered_through_the_public_interface():
    for name, mode, split in (("mhsa", "positive", 1), ("diff", "signed", 2), ("dgsa", "signed", 2)):
        e = get_attention(name)
        assert e.rollout_mode == mode == default_mode(name) and e.head_split == split and e.args == ()
    with pytest.raises(ValueError, match="MHSA has no branch maps"):
        RolloutSpec.resolve("mhsa", "a_pos")


def _plugin_module(tmp_path: Path, name: str, attention: str, model: str) -> Path:
    """An importable plugin module in ``tmp_path``: an attention with a typed, ruled argument and a model on it."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f'''
        from typing import Annotated, Literal
        import torch
        from torch import nn
        from robustbench_dgsa.models import (Rule, apply_model_overrides, get_model_config, register_attention,
                                             register_model)

        @register_attention("{attention}", rollout_mode="signed", display_name="Scaled", colour="#123456")
        class Scaled(nn.Module):
            def __init__(self, dim: int, heads: int, layer_idx: int = 0,
                         temperature: Annotated[float, Rule(gt=0, most=100)] = 1.0,
                         mode: Literal["a", "b"] = "a", ) -> None:
                super().__init__()
                self.temperature, self.mode, self.layer_idx = temperature, mode, layer_idx
                self.proj = nn.Linear(dim, dim)

            def forward(self, x, key_padding_mask=None, return_maps=False, queries=None):
                y = self.proj(x[:, :queries] if queries else x) * self.temperature
                a = torch.full((x.shape[0], 1, y.shape[1], x.shape[1]), 1.0 / x.shape[1])
                return (y, {{"attn": a}}) if return_maps else y

        @register_model(display_name="ScaledViT")
        def {model}():
            return apply_model_overrides(get_model_config("vit"), name="{model}", attention="{attention}",
                                         dim=16, depth=2, heads=2, head_hidden=8)
    '''), encoding="utf-8")
    return tmp_path


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_plugin_module(tmp_path, "scaled_plugin_t", "scaled_t", "scaledvit_t")))
    import importlib
    yield importlib.import_module("scaled_plugin_t")
    # forget it again, so that no later test's child processes are told to import a module they cannot find
    from robustbench_dgsa import config
    from robustbench_dgsa.models import attention_registry, registry
    from robustbench_dgsa.util import plugins
    for table, key in ((plugins._LOADED, "scaled_plugin_t"), (attention_registry._ATTENTIONS, "scaled_t"),
                       (config._ATTENTIONS, "scaled_t"), (registry._REGISTRY, "scaledvit_t")):
        table.pop(key, None)
    sys.modules.pop("scaled_plugin_t", None)


def test_a_plugin_attention_takes_its_own_checked_arguments(plugin, tmp_path):
    from robustbench_dgsa.models.registry import display_name, model_names, model_styles
    from robustbench_dgsa.util.plugins import plugin_records
    assert "scaledvit_t" in model_names() and display_name("scaledvit_t") == "ScaledViT"
    assert model_styles(["scaledvit_t"])["scaledvit_t"][0] == "#123456"
    assert default_mode("scaled_t") == "signed"
    rec = next(r for r in plugin_records() if r["module"] == "scaled_plugin_t")
    assert rec["via"] == "import" and len(rec["source_sha256"]) == 64
    base = get_model_config("scaledvit_t")
    cfg = resolve_config(base, "synthetic-vision", "tiny",
                         overrides=parse_set_options(["model.attention_args.temperature=0.5",
                                                      "attention_args.mode=b"]))
    assert cfg.model.attention_args == {"temperature": 0.5, "mode": "b"}
    assert cfg.hash() != resolve_config(base, "synthetic-vision", "tiny").hash()
    model = create_model(cfg.model)
    assert {(b.attn.temperature, b.attn.mode) for b in model.blocks} == {(0.5, "b")}
    assert [b.attn.layer_idx for b in model.blocks] == [0, 1]
    # TOML: [model.attention_args]; and a stored config (to_dict -> from_dict) round-trips with the same hash
    toml = tmp_path / "c.toml"
    toml.write_text('[model]\nattention = "scaled_t"\n[model.attention_args]\ntemperature = 2.0\n')
    c2 = apply_overrides(RunConfig(), load_config_file(toml), layer="file", text=False)
    assert c2.model.attention_args == {"temperature": 2.0}
    assert RunConfig.from_dict(cfg.to_dict()).hash() == cfg.hash()
    for bad, msg in ((["model.attention_args.temperature=0"], "expected a number > 0"),
                     (["model.attention_args.mode=c"], "expected one of a, b"),
                     (["model.attention_args.nope=1"], r"takes no argument 'nope' \(its arguments: temperature, mode\)")):
        with pytest.raises(UserError, match=msg):
            resolve_config(base, "synthetic-vision", "tiny", overrides=parse_set_options(bad))
    with pytest.raises(UserError, match="attention 'mhsa' takes no argument 'temperature'"):
        m = get_model_config("vit")
        m.attention_args = {"temperature": 1.0}
        validate_model(m)


def test_register_attention_refuses_a_class_outside_the_contract():
    class NoDefault(torch.nn.Module):
        def __init__(self, dim: int, heads: int, layer_idx: int, tau: float) -> None:
            super().__init__()

    class Untyped(torch.nn.Module):
        def __init__(self, dim, heads, layer_idx=0, tau=1.0) -> None:
            super().__init__()

    class Shape(torch.nn.Module):
        def __init__(self, width: int, heads: int) -> None:
            super().__init__()

    for cls, msg in ((NoDefault, "needs a default"), (Untyped, "needs a type hint"), (Shape, "must start")):
        with pytest.raises(TypeError, match=msg):
            register_attention("broken_t", cls)
    with pytest.raises(ValueError, match="rollout_mode"):
        register_attention("broken_t", Shape, rollout_mode="raw")


def _env(extra_path: Path | None = None, plugins: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DGSA_BENCH_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (extra_path, REPO) if p) + os.pathsep + \
        env.get("PYTHONPATH", "")
    if plugins:
        env["DGSA_BENCH_PLUGINS"] = plugins
    return env


def test_entry_point_discovery_of_an_installed_distribution(tmp_path):
    """A distribution on sys.path with a dgsa_bench.plugins entry point: its models appear in a fresh process with
    no option, and its record names the distribution and version."""
    _plugin_module(tmp_path, "ep_plugin_t", "ep_attn_t", "epvit_t")
    dist = tmp_path / "ep_plugin_t-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin-t\nVersion: 1.2.3\n")
    (dist / "entry_points.txt").write_text("[dgsa_bench.plugins]\nep = ep_plugin_t\n")
    (dist / "top_level.txt").write_text("ep_plugin_t\n")
    code = ("import json; from robustbench_dgsa.models import model_names; from robustbench_dgsa.util.plugins "
            "import plugin_records; print(json.dumps([list(model_names()), plugin_records()]))")
    p = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    names, records = json.loads(p.stdout.strip().splitlines()[-1])
    assert "epvit_t" in names
    rec = next(r for r in records if r["module"] == "ep_plugin_t")
    assert (rec["distribution"], rec["version"], rec["via"]) == ("ep-plugin-t", "1.2.3", "entry-point")
    p = subprocess.run([sys.executable, "-c", code], env=_env(None), capture_output=True, text=True, timeout=120)
    assert "epvit_t" not in p.stdout                         # without the distribution on the path: not there


def test_plugin_option_and_a_checkpoint_whose_plugin_is_absent(tmp_path):
    """--plugin MODULE loads a module for the CLI; a checkpoint of a model built on a plugin's attention names the
    plugin to install when read without it: one error line, exit 2."""
    plug = tmp_path / "plug"
    plug.mkdir()
    _plugin_module(plug, "opt_plugin_t", "opt_attn_t", "optvit_t")
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", "--plugin", "opt_plugin_t", "models", "--json"],
                       env=_env(plug), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "optvit_t" in p.stdout, p.stderr
    ck = tmp_path / "ck.safetensors"
    code = ("from robustbench_dgsa.models import create_model; from robustbench_dgsa.models.checkpoint import "
            f"save_checkpoint; save_checkpoint({str(ck)!r}, create_model('optvit_t'), {{}})")
    p = subprocess.run([sys.executable, "-c", code], env=_env(plug, "opt_plugin_t"), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", "evaluate", "--checkpoint", str(ck),
                        "--dataset", "synthetic-vision"], env=_env(None),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    assert "opt_attn_t" in lines[0] and "plugin 'opt_plugin_t'" in lines[0]


def test_sbatch_script_exports_the_plugins(tmp_path):
    from robustbench_dgsa.jobs.slurm import SlurmResources, sbatch_script
    text = sbatch_script(tmp_path, 2, SlurmResources.checked(), plugins=["sigmoid_attention", "other.mod"])
    assert "export DGSA_BENCH_PLUGINS=sigmoid_attention,other.mod" in text
    assert text.index("DGSA_BENCH_PLUGINS") < text.index("sweep run-one")
    assert "DGSA_BENCH_PLUGINS" not in sbatch_script(tmp_path, 2, SlurmResources.checked())
