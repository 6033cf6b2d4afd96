"""The threat-model registry (ARCHITECTURE principle 7): Linf and L2 register through ``register_threat_model`` like a
user's threat model, and a plugin's threat model (its own attack, here one-step FGSM) runs through run_attack, the
store, ``dgsa-bench evaluate --threat-model`` (in process with --plugin and in a child process through
DGSA_BENCH_PLUGINS), the report and export. None of this needs pyautoattack except the L1 test."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from robustbench_dgsa import store
from robustbench_dgsa.engine import adversarial as adv
from robustbench_dgsa.engine import threat_models as T
from robustbench_dgsa.util.errors import UserError

PLUGIN = '''
import torch
from robustbench_dgsa.engine.threat_models import ThreatModel, linf_norm, register_threat_model


def fgsm(model, x, y, *, eps, seed, device):
    x = x.clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    (grad,) = torch.autograd.grad(loss, x)
    return (x + eps * grad.sign()).clamp(0, 1).detach()


register_threat_model(ThreatModel("FGSM", linf_norm, perturb=fgsm, max_eps=1.0,
                                  standard_eps={"synthetic-vision": 8 / 255},
                                  ladder=((0.0, "none"), (2 / 255, "own"), (8 / 255, "own")),
                                  description="one signed-gradient step"))
'''
FACTORY = '''
import torch
from torch import nn

def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 6))
'''


@pytest.fixture
def registry(monkeypatch):
    """The registry and the loaded-plugin records as they are now, restored after the test (a test's registrations
    and plugins do not leak into the next test)."""
    from robustbench_dgsa.util import plugins
    monkeypatch.setattr(T, "_THREAT_MODELS", dict(T._THREAT_MODELS))
    monkeypatch.setattr(plugins, "_LOADED", dict(plugins._LOADED))
    monkeypatch.setattr(plugins, "_STARTED", set(plugins._STARTED))
    monkeypatch.setenv(plugins.ENV_VAR, "")     # recorded (absent or not) so that teardown restores it ...
    monkeypatch.delenv(plugins.ENV_VAR)         # ... after --plugin appends to it in this process
    return T


@pytest.fixture
def plugin(tmp_path, monkeypatch, registry):
    (tmp_path / "advfgsm.py").write_text(PLUGIN)
    (tmp_path / "advtiny.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("advfgsm", None)
    yield "advfgsm"
    sys.modules.pop("advfgsm", None)


def _model_and_data(n=16):
    torch.manual_seed(1)
    model = adv.pixel_model(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)))
    x = torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = model(x).argmax(1)                        # every image right: each one is attacked
    return model, x, y


def test_builtins_are_registry_entries():
    assert T.threat_model_names()[:2] == ("Linf", "L2")
    linf, l2 = T.get_threat_model("LINF"), T.get_threat_model("l2")
    assert (linf.autoattack_norm, l2.autoattack_norm) == ("Linf", "L2") and linf.robustbench and l2.robustbench
    assert linf.ladder == adv.LADDER and l2.ladder is None
    assert adv.check_eps("l2", None, "cifar10") == 0.5 and adv.check_eps("Linf", None, "imagenet") == 4 / 255
    d = torch.tensor([[[3.0, -4.0]], [[0.0, 0.5]]])
    assert np.allclose(linf.norm(d), [4.0, 0.5]) and np.allclose(l2.norm(d), [5.0, 0.5])
    assert linf.box_norm(torch.zeros(1, 3, 4, 4)) == 1.0 and l2.box_norm(torch.zeros(1, 3, 4, 4)) == np.sqrt(48)
    with pytest.raises(UserError, match="unknown threat model 'l7'; valid: Linf, L2"):
        T.get_threat_model("l7")


@pytest.mark.parametrize("kwargs,msg", [
    (dict(name="corruptions", autoattack_norm="Linf"), "common-corruption"),
    (dict(name="Both", autoattack_norm="Linf", perturb=lambda *a, **k: None), "exactly one"),
    (dict(name="Neither"), "exactly one"),
    (dict(name="1bad", autoattack_norm="Linf"), "letters, digits"),
    (dict(name="Lad", autoattack_norm="L2", ladder=((1.0, "own"),)), "ladder step"),
    (dict(name="Cap", autoattack_norm="L2", max_eps=-1.0), "max_eps"),
])
def test_registration_is_checked(registry, kwargs, msg):
    name = kwargs.pop("name")
    with pytest.raises((ValueError, TypeError), match=msg):
        T.register_threat_model(T.ThreatModel(name, T.linf_norm, **kwargs))
    assert name.lower() not in [n.lower() for n in T.threat_model_names()]


def test_own_attack_runs_through_run_attack(plugin):
    importlib.import_module(plugin)
    model, x, y = _model_and_data()
    eps = 8 / 255
    r = adv.run_attack(model, x, y, threat_model="fgsm", eps=eps, seed=0, keep_adversarial=True)
    assert r.threat_model == "FGSM" and r.attack == "own"            # the threat model's default attack
    assert r.label == "FGSM's own attack (one signed-gradient step)" and r.source.startswith("advfgsm")
    # the same step computed here independently: the flips are exactly those of the direct FGSM images
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(nn.functional.cross_entropy(model(xg), y), xg)
    direct = (x + eps * g.sign()).clamp(0, 1)
    with torch.no_grad():
        want = model(direct).argmax(1).numpy()
    assert (r.adv_pred == want).all() and 0 < r.robust_acc < 1
    assert [f == "own" for f in r.flipped_by] == list(want != y.numpy())
    assert float(r.norm.max()) <= eps + 1e-7 and np.allclose(r.norm[want != y.numpy()], eps, atol=1e-6)
    with pytest.raises(UserError, match="unknown attack 'autoattack' for threat model FGSM; valid: own"):
        adv.run_attack(model, x, y, threat_model="fgsm", eps=eps, attack="autoattack")
    with pytest.raises(UserError, match="minimal perturbation needs a threat model AutoAttack attacks"):
        adv.min_norm(model, x, y, threat_model="fgsm")
    assert [a for _, a in adv.ladder_steps(threat_model="fgsm")] == ["none", "own", "own"]


def test_a_perturbation_outside_its_eps_is_refused(registry):
    T.register_threat_model(T.ThreatModel("Cheat", T.linf_norm, max_eps=1.0,
                                          perturb=lambda m, x, y, **k: (x + 0.1).clamp(0, 1)))
    model, x, y = _model_and_data(4)
    with pytest.raises(UserError, match="perturbation of norm 0.1 > eps 0.01"):
        adv.run_attack(model, x * 0.5, y, threat_model="cheat", eps=0.01)


def test_evaluate_with_a_plugin_threat_model_end_to_end(plugin, tmp_path, run_main):
    base = ["--plugin", plugin, "evaluate", "--module", "advtiny:tiny", "--dataset", "synthetic-vision",
            "--max-examples", "8", "--device", "cpu"]
    code, out, err = run_main([*base, "--threat-model", "fgsm", "--store", str(tmp_path / "s"), "--json"],
                              tmp_path)
    assert code == 0, err
    res = json.loads(out)
    assert [r["threat_model"] for r in res["rows"]] == ["FGSM"] and res["rows"][0]["eps"] == 8 / 255
    rows = store.load_results(tmp_path / "s")
    assert set(rows["condition"]) == {"fgsm"} and set(rows["attack"]) == {"own"}
    rec = store.load_runs(tmp_path / "s")[res["run_id"]]
    assert rec["threat_model"] == "FGSM" and rec["library"] == "advfgsm"
    assert any(p["module"] == "advfgsm" for p in rec["plugins"])
    code, out, err = run_main([*base, "--threat-model", "fgsm", "--eps-ladder", "--store", str(tmp_path / "s")],
                              tmp_path)
    assert code == 0, err
    code, out, err = run_main([*base, "--threat-model", "fgsm", "--min-norm", "--store", str(tmp_path / "t")],
                              tmp_path)
    assert code == 2 and "minimal perturbation" in err and not (tmp_path / "t").exists()
    from robustbench_dgsa.report.build import build_report
    from robustbench_dgsa.report.export_adversarial import export_adversarial
    build_report(tmp_path / "s", tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Adversarial robustness: " in html and ", FGSM" in html
    files, _, skipped = export_adversarial(tmp_path / "s", tmp_path / "rb")
    assert files == [] and any("fgsm" in s and "no RobustBench" in s for s in skipped)


def test_a_child_process_finds_the_threat_model_through_the_environment(plugin, tmp_path):
    env = {**os.environ, "DGSA_BENCH_PLUGINS": plugin,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "robustbench_dgsa", "evaluate", "--module", "advtiny:tiny",
                        "--dataset", "synthetic-vision", "--max-examples", "4", "--device", "cpu",
                        "--threat-model", "FGSM", "--eps", "0.01", "--store", str(tmp_path / "c")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = store.load_results(tmp_path / "c")
    assert set(rows["condition"]) == {"fgsm"} and np.allclose(rows["eps"], 0.01)


def test_an_autoattack_norm_registered_by_a_user(registry):
    pytest.importorskip("pyautoattack", reason="pyautoattack (the [adversarial] extra) not installed")

    def l1(d):
        return d.reshape(d.shape[0], -1).double().abs().sum(1).cpu().numpy()
    T.register_threat_model(T.ThreatModel("L1", l1, autoattack_norm="L1", description="sum of |delta|"))
    model, x, y = _model_and_data(8)
    r = adv.run_attack(model, x, y, threat_model="l1", eps=3.0, attack="apgd-ce", keep_adversarial=True)
    assert r.source.startswith("pyautoattack") and r.robust_acc < 1
    assert float(r.norm.max()) <= 3.0 + 1e-4
    assert np.allclose(r.norm, l1(r.x_adv - x))


@pytest.mark.parametrize("kind,condition,severity,problem", [
    ("adversarial", "linf", 0, None),
    ("adversarial", "fgsm", 0, None),                 # a plugin's threat model: readable without the plugin
    ("adversarial", "fgsm", 3, "severity 3"),
    ("adversarial", "FGSM", 0, "not a threat model's name in lower case"),
    ("adversarial", "fog", 0, "not a threat model's name"),   # a corruption's name is not a threat model's
    ("adversarial", "clean", 0, "not a threat model's name"),
    ("eval", "linf", 0, "unknown condition 'linf'"),   # threat models are adversarial rows only
    ("eval", "fog", 3, None),
])
def test_the_store_reads_any_threat_models_rows(kind, condition, severity, problem):
    row = dict(run_id="r", kind=kind, model="m", metric="accuracy", value=0.5, dataset="d", condition=condition,
               severity=severity, n=4)
    got = store.row_problem(row)
    assert (got is None) if problem is None else (problem in got), got


def test_readmes_threat_model_example_is_a_working_plugin(tmp_path, monkeypatch, registry, run_main):
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```python\n# advfgsm.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "advfgsm.py").write_text(block)
    (tmp_path / "advtiny.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("advfgsm", None)
    assert "dgsa-bench --plugin advfgsm evaluate --pretrained dgvit-cifar10 --threat-model fgsm" in readme
    code, out, err = run_main(["--plugin", "advfgsm", "evaluate", "--module", "advtiny:tiny", "--dataset",
                               "synthetic-vision", "--max-examples", "8", "--device", "cpu", "--threat-model",
                               "fgsm", "--eps", "0.0313725", "--store", str(tmp_path / "s")], tmp_path)
    sys.modules.pop("advfgsm", None)
    assert code == 0, err
    rows = store.load_results(tmp_path / "s")
    assert set(rows["condition"]) == {"fgsm"} and set(rows["attack"]) == {"own"}
