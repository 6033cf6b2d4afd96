"""Adversarial threat models (``Linf``, ``L2``) as RobustBench evaluates them: AutoAttack from its authors'
implementation (``pyautoattack`` 0.2.0 on PyPI, the optional extra ``[adversarial]``), never an attack of our own.

* :func:`run_attack`: AutoAttack's standard version (APGD-CE, APGD-T, FAB-T, Square, each with the standard
  version's settings, each run on the examples still classified right, as AutoAttack does), or only its first
  one or two attacks for quick looks (``attack="apgd-ce"`` / ``"apgd-ce+apgd-t"``: cheaper, weaker, and named as
  such wherever their numbers go). Per example: clean prediction, adversarial prediction, the attack that flipped
  it, the perturbation's norm.
* :func:`min_norm`: the minimal perturbation FAB (untargeted, minimum-norm mode, same library) finds per example.
* :func:`eps_ladder`: Linf 0, 0.5/255, 1/255, 2/255, 4/255 (APGD-CE + APGD-T) and 8/255 (full AutoAttack).

eps is in pixel units for every model: the attacked module always takes [0, 1] images (:func:`pixel_model` puts
a model's own mean/std normalisation and resizing inside it), so eps = 1/255 is one grey level for the suite's
models (trained on normalised input) and for outside models alike. Models are attacked in eval mode; the seed is
AutoAttack's ``seed`` (recorded with the result).
"""
from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from robustbench_dgsa.engine.threat_models import (AUTOATTACK_ATTACKS, LINF_LADDER, OWN_ATTACK, ThreatModel,
                                                   get_threat_model)
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.progress import log

LIBRARY = "pyautoattack"
LIBRARY_PIN = "pyautoattack==0.2.0"
INSTALL_HINT = 'pip install "robustbench-dgsa[adversarial]" (or pip install pyautoattack==0.2.0)'
#: AutoAttack's attacks (the built-in threat models' attacks; :mod:`.threat_models`)
ATTACKS = AUTOATTACK_ATTACKS
#: how an attack's numbers are labelled wherever they appear (a threat model's own attack: :func:`attack_label`)
ATTACK_LABELS = {"autoattack": "AutoAttack (standard)", "apgd-ce": "APGD-CE only (not AutoAttack)",
                 "apgd-ce+apgd-t": "APGD-CE + APGD-T only (not full AutoAttack)", "none": "no attack (clean)"}
#: (eps, attack) steps of the Linf ladder
LADDER = LINF_LADDER


def threat_model_name(threat_model: Any) -> str:
    """The registered name (``Linf``, ``L2``, a plugin's) from any spelling (``linf``, RobustBench's enum)."""
    return get_threat_model(threat_model).name


def attack_label(attack: str, threat_model: Any = "Linf") -> str:
    """How ``attack``'s numbers are labelled: AutoAttack's names, or "<threat model>'s own attack"."""
    if attack in ATTACK_LABELS:
        return ATTACK_LABELS[attack]
    tm = get_threat_model(threat_model)
    return f"{tm.name}'s own attack" + (f" ({tm.description})" if tm.description else "")


def check_eps(threat_model: Any, eps: Any, dataset: str | None = None) -> float:
    """eps as a float: the threat model's standard radius for the dataset when None; refused below 0, above the
    threat model's ``max_eps`` (Linf: 1, a pixel range), or not finite."""
    tm = get_threat_model(threat_model)
    if eps is None:
        if str(dataset) not in tm.standard_eps:
            raise UserError(f"no standard {tm.name} eps for {dataset!r}; give eps", options="eps")
        return float(tm.standard_eps[str(dataset)])
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(eps)):
        raise UserError(f"eps must be a finite number, got {eps!r}", options="eps")
    e = float(eps)
    if e < 0:
        raise UserError(f"eps must be >= 0, got {e!r}", options="eps")
    if tm.max_eps is not None and e > tm.max_eps:
        hint = f" (for 8/255 give {8 / 255:.6f})" if tm.max_eps == 1 else ""
        raise UserError(f"a {tm.name} eps is in pixel units ([0, 1] images): at most {tm.max_eps:g}, got {e!r}"
                        f"{hint}", options="eps")
    return e


def check_attack(attack: Any, threat_model: Any = "Linf") -> str:
    """``attack`` if the threat model has it (AutoAttack's names, or ``own`` for a threat model's own attack);
    None: the threat model's default (``autoattack`` for the built-ins)."""
    tm = get_threat_model(threat_model)
    if attack is None:
        return tm.default_attack
    a = str(attack).strip().lower()
    if a not in tm.attacks:
        raise UserError(f"unknown attack {attack!r} for threat model {tm.name}; valid: {', '.join(tm.attacks)}",
                        options="attack")
    return a


def require_pyautoattack() -> Any:
    """The ``pyautoattack`` module, or one UserError naming the install command."""
    try:
        return importlib.import_module(LIBRARY)
    except ImportError:
        raise UserError(f"adversarial threat models need AutoAttack ({LIBRARY_PIN}): {INSTALL_HINT}") from None


def library_version() -> str:
    return str(getattr(require_pyautoattack(), "__version__", "unknown"))


def check_request(threat_model: Any, eps: Any = None, attack: Any = None, ladder: bool = False,
                  min_norm: bool = False) -> str:
    """Every argument of an adversarial evaluation checked before anything is loaded; the threat model's name."""
    tm = get_threat_model(threat_model)
    if ladder:
        ladder_steps(threat_model=tm)
    else:
        check_eps(tm, eps if eps is not None else 0.0)
        check_attack(attack, tm)
    if min_norm:
        _check_fab(tm)
    require_attack_library(tm)
    return tm.name


def _check_fab(tm: ThreatModel) -> ThreatModel:
    """``tm`` if FAB (AutoAttack's minimal-perturbation attack) can run under it, else one UserError."""
    if tm.autoattack_norm is None:
        raise UserError(f"FAB's minimal perturbation needs a threat model AutoAttack attacks; {tm.name} has its "
                        "own attack", options="min_norm")
    return tm


def require_attack_library(threat_model: Any) -> None:
    """One UserError naming the install command when the threat model's attacks need AutoAttack and it is absent."""
    if get_threat_model(threat_model).autoattack_norm is not None:
        require_pyautoattack()


class PixelModel(nn.Module):
    """A model that takes [0, 1] images: optional resize, then ``(x - mean) / std``, then the model — so an
    attack's eps is in pixel units whatever the model was trained on."""

    def __init__(self, model: nn.Module, mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
                 image_size: int | None = None):
        super().__init__()
        self.model, self.image_size = model, image_size
        mean = list(mean) if mean is not None else [0.0]
        std = list(std) if std is not None else [1.0]
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.image_size is not None and tuple(x.shape[-2:]) != (self.image_size, self.image_size):
            x = nn.functional.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear",
                                          antialias=True, align_corners=False)
        out = self.model((x - self.mean) / self.std)
        return out[0] if isinstance(out, (tuple, list)) else out


def pixel_model(model: nn.Module, preprocess: Any = None) -> PixelModel:
    """``model`` wrapped to take [0, 1] images: ``preprocess`` (a :class:`Preprocess` or anything with ``mean``,
    ``std``, ``image_size``) is its input normalisation (None: the model takes raw [0, 1] images). In eval mode."""
    if isinstance(model, PixelModel):
        return model.eval()
    if preprocess is None:
        return PixelModel(model).eval()
    return PixelModel(model, getattr(preprocess, "mean", None), getattr(preprocess, "std", None),
                      getattr(preprocess, "image_size", None)).eval()


@dataclass
class AttackResult:
    """One threat model x eps x attack over a set of examples (arrays in example order)."""
    threat_model: str
    eps: float
    attack: str                         # "autoattack" | "apgd-ce" | "apgd-ce+apgd-t" | "own" | "none" (eps 0)
    seed: int
    library_version: str
    labels: np.ndarray
    clean_pred: np.ndarray
    adv_pred: np.ndarray
    flipped_by: list[str]               # the sub-attack that flipped it; "" robust; "clean" wrong without attack
    norm: np.ndarray                    # ||x_adv - x|| in pixel units (threat model's norm)
    x_adv: torch.Tensor | None = field(default=None, repr=False)

    @property
    def clean_acc(self) -> float:
        return float((self.clean_pred == self.labels).mean())

    @property
    def robust_acc(self) -> float:
        return float((self.adv_pred == self.labels).mean())

    @property
    def label(self) -> str:
        return attack_label(self.attack, self.threat_model)

    @property
    def source(self) -> str:
        """What attacked: ``pyautoattack <version>``, or a threat model's own attack's module and version."""
        own = get_threat_model(self.threat_model).perturb is not None
        return self.library_version if own else f"{LIBRARY} {self.library_version}"


def _norms(delta: torch.Tensor, threat_model: Any) -> np.ndarray:
    return np.asarray(get_threat_model(threat_model).norm(delta), dtype=np.float64)


def _predict(model: nn.Module, x: torch.Tensor, batch_size: int, device: str) -> np.ndarray:
    preds = []
    with torch.no_grad():
        for k in range(0, len(x), batch_size):
            preds.append(model(x[k:k + batch_size].to(device)).argmax(1).cpu())
    return torch.cat(preds).numpy() if preds else np.zeros(0, dtype=np.int64)


def _check_inputs(model: Any, x: Any, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(model, nn.Module):
        raise UserError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.int64)
    if x.ndim != 4 or len(x) != len(y) or len(x) == 0:
        raise UserError(f"x must be (N, C, H, W) images with one label each, got {tuple(x.shape)} and "
                        f"{tuple(y.shape)}")
    if float(x.min()) < 0 or float(x.max()) > 1:
        raise UserError("images must be in [0, 1] (eps is in pixel units)")
    return x, y


def run_attack(model: nn.Module, x: Any, y: Any, *, threat_model: Any = "Linf", eps: float = 8 / 255,
               attack: str | None = None, seed: int = 0, batch_size: int = 250, device: str = "cpu",
               keep_adversarial: bool = False) -> AttackResult:
    """Attack ``model`` (taking [0, 1] images: wrap it with :func:`pixel_model`) on ``(x, y)``; see the module
    docstring. ``attack`` None: the threat model's default (AutoAttack for the built-ins). eps 0 is no attack (the
    clean predictions, attack ``"none"``)."""
    tm = get_threat_model(threat_model)
    e, a = check_eps(tm, eps), check_attack(attack, tm)
    x, y = _check_inputs(model, x, y)
    model.eval()
    clean = _predict(model, x, batch_size, device)
    labels = y.numpy()
    flipped = ["" if c == t else "clean" for c, t in zip(clean, labels)]
    x_adv, adv = x.clone(), clean.copy()
    if e == 0:
        return AttackResult(tm.name, 0.0, "none", int(seed), _attack_version(tm), labels, clean, adv, flipped,
                            np.zeros(len(x)), x_adv if keep_adversarial else None)
    sub_attacks = _own_attack(tm, model, e, seed, device) if tm.perturb is not None \
        else _autoattack_steps(tm, model, x, e, a, seed, batch_size, device)
    for sub, run in sub_attacks:
        idx = np.flatnonzero(adv == labels)
        if not len(idx):
            break
        xs, ys = run(x[idx].to(device), y[idx].to(device))
        xs = xs.detach().cpu()
        ys = _predict(model, xs, batch_size, device) if ys is None else ys.cpu().numpy()
        hit = ys != labels[idx]
        x_adv[idx[hit]] = xs[hit]
        adv[idx[hit]] = ys[hit]
        for i in idx[hit]:
            flipped[i] = sub
    return AttackResult(tm.name, e, a, int(seed), _attack_version(tm), labels, clean, adv, flipped,
                        _norms(x_adv - x, tm), x_adv if keep_adversarial else None)


def _attack_version(tm: ThreatModel) -> str:
    """The attacking library's version: pyautoattack's for AutoAttack threat models, the plugin's own otherwise."""
    if tm.perturb is None:
        return library_version()
    from robustbench_dgsa.util.plugins import loaded_plugins
    module = getattr(tm.perturb, "__module__", "") or ""
    rec = next((r for r in loaded_plugins() if r.module == module), None)
    return f"{module} {rec.version or rec.source_sha256[:12]}" if rec else module


def _own_attack(tm: ThreatModel, model: nn.Module, eps: float, seed: int, device: str) -> list[tuple[str, Any]]:
    """The threat model's ``perturb`` as the one sub-attack ``own``; its output is checked (shape, [0, 1], within
    eps by the threat model's norm) before any of it is counted."""
    def run(xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = torch.as_tensor(tm.perturb(model, xb, yb, eps=eps, seed=int(seed), device=device))
        if tuple(out.shape) != tuple(xb.shape):
            raise UserError(f"threat model {tm.name}: perturb returned shape {tuple(out.shape)} for images of "
                            f"shape {tuple(xb.shape)}")
        out = out.to(xb.dtype)
        if float(out.min()) < 0 or float(out.max()) > 1:
            raise UserError(f"threat model {tm.name}: perturb returned images outside [0, 1]")
        over = _norms((out - xb).cpu(), tm).max(initial=0.0)
        if over > eps * (1 + 1e-5) + 1e-6:
            raise UserError(f"threat model {tm.name}: perturb returned a perturbation of norm {over:.6g} > eps "
                            f"{eps:.6g}")
        return out, None                      # its predictions: the model's, batched as the clean ones
    return [(OWN_ATTACK, run)]


def _autoattack_steps(tm: ThreatModel, model: nn.Module, x: torch.Tensor, eps: float, attack: str, seed: int,
                      batch_size: int, device: str) -> list[tuple[str, Any]]:
    """AutoAttack's sub-attacks of ``attack``, each with the standard version's settings, as (name, run)."""
    aa = require_pyautoattack().AutoAttack(model, norm=tm.autoattack_norm, eps=eps, seed=int(seed),
                                           version="standard", device=device)
    aa.verbose = False
    with torch.no_grad():                     # fewer than 10 classes: target every other class (standard: 9)
        n_cls = int(model(x[:1].to(device)).shape[1])
    aa.apgd_targeted.n_target_classes = min(aa.apgd_targeted.n_target_classes, n_cls - 1)
    aa.fab.n_target_classes = min(aa.fab.n_target_classes, n_cls - 1)

    def step(sub: str) -> Any:
        def run(xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            aa.attacks_to_run = [sub]         # the standard version's settings, one attack at a time
            return aa.run_standard_evaluation(xb, yb, batch_size=int(batch_size))   # (x_adv, its labels)
        return run
    return [(sub, step(sub)) for sub in tm.attacks[attack]]


def min_norm(model: nn.Module, x: Any, y: Any, *, threat_model: Any = "Linf", seed: int = 0,
             batch_size: int = 250, device: str = "cpu", n_iter: int = 100, n_restarts: int = 1) -> np.ndarray:
    """Per example, the norm (pixel units) of the smallest perturbation FAB (untargeted, minimum-norm mode,
    ``pyautoattack``'s FABAttack_PT) finds that changes the prediction: 0 where the clean image is already
    misclassified, ``inf`` where FAB found none. Threat models that AutoAttack attacks only."""
    tm = _check_fab(get_threat_model(threat_model))
    x, y = _check_inputs(model, x, y)
    require_pyautoattack()
    from pyautoattack.fab_pt import FABAttack_PT
    model.eval()
    cap = tm.box_norm(x)                      # no radius: accept any flip in the [0, 1] box, keep the norm
    fab = FABAttack_PT(model, norm=tm.autoattack_norm, n_restarts=int(n_restarts), n_iter=int(n_iter), eps=cap, seed=int(seed),
                       targeted=False, device=device)
    out = np.empty(len(x))
    for k in range(0, len(x), batch_size):
        xb, yb = x[k:k + batch_size].to(device), y[k:k + batch_size].to(device)
        adv = fab.perturb(xb, yb)
        with torch.no_grad():
            wrong = (model(adv).argmax(1) != yb).cpu().numpy()
        norms = _norms((adv - xb).cpu(), tm)
        out[k:k + len(xb)] = np.where(wrong, norms, np.inf)
    clean = _predict(model, x, batch_size, device)
    out[clean != y.numpy()] = 0.0
    return out


def median_norm(norms: np.ndarray) -> float:
    """Median minimal perturbation (``inf`` when FAB failed on half the examples or more)."""
    return float(np.median(np.asarray(norms, dtype=float))) if len(norms) else float("nan")


def ladder_steps(below: str | None = None, threat_model: Any = "Linf") -> list[tuple[float, str]]:
    """The threat model's eps ladder (Linf: :data:`LADDER`); ``below`` (None: the ladder's own, Linf APGD-CE +
    APGD-T) replaces the attack of the steps that use neither no attack nor the full one (Linf: full AutoAttack
    stays at 8/255): ``"apgd-ce"`` is about ten times cheaper (no 9 targeted runs) and weaker."""
    tm = get_threat_model(threat_model)
    if tm.ladder is None:
        raise UserError(f"threat model {tm.name} has no eps ladder (threat models with one: "
                        f"{', '.join(n for n in _ladder_names())})", options="threat_model")
    if below is None:
        return list(tm.ladder)
    below = check_attack(below, tm)
    return [(e, a if a in ("none", tm.default_attack) else below) for e, a in tm.ladder]


def _ladder_names() -> list[str]:
    from robustbench_dgsa.engine.threat_models import threat_model_names
    return [n for n in threat_model_names() if get_threat_model(n).ladder is not None]


def eps_ladder(model: nn.Module, x: Any, y: Any, *, ladder: Sequence[tuple[float, str]] | None = None,
               threat_model: Any = "Linf", seed: int = 0, batch_size: int = 250, device: str = "cpu"
               ) -> list[AttackResult]:
    """:func:`run_attack` at every (eps, attack) step of ``ladder`` (default: the threat model's own)."""
    tm = get_threat_model(threat_model)
    steps = ladder_steps(threat_model=tm) if ladder is None else ladder
    return [run_attack(model, x, y, threat_model=tm, eps=e, attack=a if e > 0 else None, seed=seed,
                       batch_size=batch_size, device=device) for e, a in steps]


# --- into the results store ------------------------------------------------------------------------------------
KIND = "adversarial"
MIN_NORM_METRIC = "median_min_norm"
MIN_NORM_FOUND = "min_norm_found"


def result_rows(results: Sequence[AttackResult], min_norms: np.ndarray | None = None,
                threat_model: str = "Linf") -> list[dict[str, Any]]:
    """Store rows (kind ``adversarial``, condition ``linf`` / ``l2``, the ``eps`` and ``attack`` columns):
    robust accuracy per result (eps 0: the clean accuracy, attack ``none``); with ``min_norms`` the median minimal
    perturbation (NaN where FAB failed on half the examples or more) and the fraction FAB flipped."""
    rows = [dict(kind=KIND, condition=r.threat_model.lower(), severity=0, metric="accuracy", value=r.robust_acc,
                 n=len(r.labels), eps=r.eps, attack=r.attack, source=r.source)
            for r in results]
    if min_norms is not None:
        med = median_norm(min_norms)
        tm = threat_model_name(threat_model)
        rows += [dict(kind=KIND, condition=tm.lower(), severity=0, metric=MIN_NORM_METRIC,
                      value=med if math.isfinite(med) else float("nan"), n=len(min_norms), attack="fab",
                      source=f"{LIBRARY} {library_version()}"),
                 dict(kind=KIND, condition=tm.lower(), severity=0, metric=MIN_NORM_FOUND,
                      value=float(np.isfinite(min_norms).mean()), n=len(min_norms), attack="fab",
                      source=f"{LIBRARY} {library_version()}")]
    return rows


def prediction_table(r: AttackResult) -> "Any":
    """Per example: index, label, pred (adversarial), clean_pred, attack (the sub-attack that flipped it), norm."""
    import pandas as pd
    return pd.DataFrame({"condition": r.threat_model.lower(), "severity": 0, "index": np.arange(len(r.labels)),
                         "label": r.labels.astype(np.int64), "pred": r.adv_pred.astype(np.int64),
                         "clean_pred": r.clean_pred.astype(np.int64), "attack": r.flipped_by,
                         "norm": r.norm.astype(float), "eps": float(r.eps), "attack_run": r.attack})


def _library_record(threat_model: Any) -> dict[str, str]:
    """The run record's ``library`` / ``library_version``: pyautoattack's, or the threat model's own module's."""
    tm = get_threat_model(threat_model)
    if tm.perturb is None:
        return {"library": LIBRARY, "library_version": library_version()}
    return {"library": getattr(tm.perturb, "__module__", "") or "", "library_version": _attack_version(tm)}


def store_results(store_dir: Any, results: Sequence[AttackResult], *, model: str, dataset: str, seed: int = -1,
                  config_hash: str = "", min_norms: np.ndarray | None = None, threat_model: str = "Linf",
                  info: dict[str, Any] | None = None, labels: np.ndarray | None = None) -> str:
    """Write one adversarial run (rows, per-example predictions, run record) into a results store; returns its
    run id. The run record holds the threat model, every (eps, attack) with its label, AutoAttack's seed and
    ``pyautoattack``'s version. A failure removes what was written."""
    from robustbench_dgsa import store as results_store
    run_id = results_store.new_run_id("adv")
    writer = results_store.RunWriter(store_dir, run_id, dict(model=model, dataset=dataset, split="test",
                                                            seed=int(seed), config_hash=config_hash))
    try:
        writer.write_provenance({
            "kind": KIND, "threat_model": threat_model_name(threat_model), **_library_record(threat_model),
            "attack_seed": int(results[0].seed) if results else None,
            "steps": [{"eps": r.eps, "attack": r.attack, "label": r.label, "sub_attacks": list(get_threat_model(
                r.threat_model).attacks.get(r.attack, ())), "clean_acc": r.clean_acc, "robust_acc": r.robust_acc} for r in results],
            "min_norm": None if min_norms is None else {"attack": "fab (untargeted, minimum norm)",
                                                        "median": median_norm(min_norms)},
            "examples": len(results[0].labels) if results else (len(min_norms) if min_norms is not None else 0),
            **(info or {})})
        writer.add_rows(result_rows(results, min_norms, threat_model))
        for k, r in enumerate(results):
            writer.write_predictions(f"{r.threat_model.lower()}-{k}", prediction_table(r))
        if min_norms is not None:
            import pandas as pd
            lab = labels if labels is not None else (results[0].labels if results else np.zeros(len(min_norms)))
            writer.write_predictions("fab-min-norm", pd.DataFrame({
                "condition": threat_model_name(threat_model).lower(), "severity": 0,
                "index": np.arange(len(min_norms)), "label": np.asarray(lab, dtype=np.int64),
                "min_norm": np.asarray(min_norms, dtype=float)}))
    except BaseException:
        writer.discard()
        raise
    return run_id


def test_images(dataset: str, n: int | None, data_root: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n test images of a named image dataset as float [0, 1] (N, C, H, W) and int64 labels."""
    from robustbench_dgsa.data.registry import load_dataset
    data = load_dataset(dataset, "test", data_root=data_root)
    x = np.asarray(data.x if n is None else data.x[:n])
    if x.ndim != 4:
        raise UserError(f"{dataset}: adversarial threat models need an image dataset held in memory")
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).float().div_(255.0)
    y = data.y if n is None else data.y[:n]
    return xt, torch.as_tensor(np.asarray(y, dtype=np.int64))


def memory_images(data: Any, n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n of in-memory data ((x, y) tensors or a torch Dataset) as float [0, 1] and int64 tensors."""
    if isinstance(data, (tuple, list)):
        x, y = data
    else:
        pairs = [data[i] for i in range(len(data) if n is None else min(n, len(data)))]
        x, y = torch.stack([torch.as_tensor(p[0]) for p in pairs]), torch.as_tensor([int(p[1]) for p in pairs])
    x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.int64)
    return (x, y) if n is None else (x[:n], y[:n])


def benchmark_adversarial(module: nn.Module, dataset: Any, *, data_root: Any = None, max_examples: int | None,
                          preprocess: Any, threat_model: Any, eps: float | None, attack: str | None,
                          attack_seed: int,
                          batch_size: int, device: str, name: str, store_dir: Any, seed: int = -1,
                          config_hash: str = "") -> "Any":
    """:func:`robustbench_dgsa.benchmark`'s Linf / L2 route: attack the first ``max_examples`` (default all) test
    images of ``dataset`` (a name or in-memory data) and write the run into ``store_dir``; returns the run's rows
    (``attrs``: ``run_id``, ``result``)."""
    from robustbench_dgsa import store as results_store
    from robustbench_dgsa.data.memory import is_in_memory
    tm = threat_model_name(threat_model)
    ds = "cifar10" if is_in_memory(dataset) else str(dataset)
    e, a = check_eps(tm, eps, ds), check_attack(attack, tm)
    require_attack_library(tm)
    x, y = memory_images(dataset, max_examples) if is_in_memory(dataset) else test_images(ds, max_examples,
                                                                                         data_root)
    attacked = pixel_model(module, preprocess).to(device)
    res = run_attack(attacked, x, y, threat_model=tm, eps=e, attack=a, seed=attack_seed, batch_size=batch_size,
                     device=device)
    run_id = store_results(store_dir, [res], model=name, dataset=ds if not is_in_memory(dataset) else "in-memory",
                           threat_model=tm, seed=seed, config_hash=config_hash, info={"origin": "benchmark",
                                                  "model_class": f"{type(module).__module__}."
                                                                 f"{type(module).__qualname__}"})
    rows = results_store.load_results(store_dir)
    rows = rows[rows["run_id"] == run_id].reset_index(drop=True)
    rows.attrs.update(run_id=run_id, result=res)
    return rows


@dataclass
class AdversarialRun:
    run_id: str
    store_dir: Path
    model: str
    results: list[AttackResult]
    min_norms: np.ndarray | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def table(self) -> list[dict[str, Any]]:
        out = [{"threat_model": r.threat_model, "eps": r.eps, "attack": r.label, "clean_acc": r.clean_acc,
                "robust_acc": r.robust_acc, "n": len(r.labels)} for r in self.results]
        if self.min_norms is not None:
            out.append({"threat_model": self.results[0].threat_model if self.results else "Linf",
                        "eps": float("nan"), "attack": "FAB minimal perturbation (median)",
                        "clean_acc": float("nan"), "robust_acc": median_norm(self.min_norms),
                        "n": len(self.min_norms)})
        return out


def attack_model(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, store: Any, name: str,
                 dataset: str, seed: int = -1, config_hash: str = "", threat_model: str = "Linf",
                 eps: float | None = None, attack: str | None = None, ladder: bool = False,
                 ladder_attack: str | None = None,
                 min_norm: bool = False, attack_seed: int = 0, batch_size: int = 250, device: str = "cpu",
                 info: dict[str, Any] | None = None) -> AdversarialRun:
    """One model: one (threat model, eps, attack), or the threat model's eps ladder; optionally FAB's minimal
    perturbation; into ``store``. ``seconds`` holds the time of every step."""
    tm = threat_model_name(threat_model)
    steps = ladder_steps(ladder_attack, tm) if ladder else [(check_eps(tm, eps, dataset), check_attack(attack, tm))]
    require_attack_library(tm)
    model.eval()
    results, seconds = [], {}
    for e, a in steps:
        t0, c0 = time.monotonic(), time.process_time()
        results.append(run_attack(model, x, y, threat_model=tm, eps=e, attack=a if e > 0 else None,
                                      seed=attack_seed, batch_size=batch_size, device=device))
        key = f"{tm} eps={e:.6g} {results[-1].attack}"
        seconds[key], seconds[f"{key} cpu"] = round(time.monotonic() - t0, 2), round(time.process_time() - c0, 2)
        log(f"{name}: {tm} eps {e:.6g} ({results[-1].label}): robust accuracy {results[-1].robust_acc:.2%} "
            f"({seconds[key]:.1f} s wall, {seconds[key + ' cpu']:.1f} s CPU)")
    norms = None
    if min_norm:
        t0, c0 = time.monotonic(), time.process_time()
        norms = min_norm(model, x, y, threat_model=tm, seed=attack_seed, batch_size=batch_size, device=device)
        seconds["fab min-norm"] = round(time.monotonic() - t0, 2)
        seconds["fab min-norm cpu"] = round(time.process_time() - c0, 2)
        log(f"{name}: FAB median minimal {tm} perturbation {median_norm(norms):.6g} "
            f"({seconds['fab min-norm']:.1f} s wall, {seconds['fab min-norm cpu']:.1f} s CPU)")
    run_id = store_results(store, results, model=name, dataset=dataset, seed=seed, config_hash=config_hash,
                               min_norms=norms, threat_model=tm, labels=y.numpy(),
                               info={**(info or {}), "seconds": seconds, "device": device})
    return AdversarialRun(run_id, Path(store), name, results, norms, seconds)


def checkpoint_model(checkpoint: Any) -> tuple[nn.Module, dict[str, Any]]:
    """A suite checkpoint as the model to attack (taking [0, 1] images: its training normalisation inside) and
    what to record of it (model, dataset, seed, config hash, source)."""
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    model, meta = load_checkpoint(checkpoint)
    pre = meta.get("preprocess") or {}
    norm = None
    if "mean" in pre:
        norm = type("Norm", (), {"mean": tuple(pre["mean"]), "std": tuple(pre["std"]),
                                 "image_size": int(pre["image_size"]) if pre.get("image_size") else None})()
    info = {"model": str(meta.get("model", "")), "dataset": str(meta.get("dataset", "")),
            "seed": int(meta.get("seed", -1)), "config_hash": str(meta.get("config_hash", "")),
            "source": f"checkpoint:{checkpoint}"}
    return pixel_model(model.float(), norm), info


def evaluate_checkpoint(checkpoint: Any, *, dataset: str | None = None, data_root: Any = None,
                        max_test: int | None = None, threat_model: Any = "Linf", eps: float | None = None,
                        attack: str | None = None, attack_seed: int = 0, ladder: bool = False,
                        min_norm: bool = False, store_dir: Any = None, batch_size: int = 250,
                        device: str = "cpu") -> AdversarialRun:
    """:func:`robustbench_dgsa.evaluate`'s adversarial route: a suite checkpoint attacked on the first
    ``max_test`` (default all) test images of ``dataset`` (default: its own), into ``store_dir`` (default
    ``<checkpoint folder>/store``)."""
    tm = check_request(threat_model, eps, attack, ladder, min_norm)
    model, info = checkpoint_model(checkpoint)
    ds = dataset or info["dataset"]
    x, y = test_images(ds, max_test, data_root)
    out = Path(store_dir) if store_dir is not None else Path(checkpoint).parent / "store"
    return attack_model(model.to(device), x, y, store=out, name=info["model"], dataset=ds, seed=info["seed"],
                        config_hash=info["config_hash"], threat_model=tm, eps=eps, attack=attack, ladder=ladder,
                        min_norm=min_norm, attack_seed=attack_seed, batch_size=batch_size, device=device,
                        info={"source": info["source"]})
