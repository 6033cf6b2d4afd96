"""Threat models: one registry, :func:`register_threat_model`, which the built-ins ``Linf`` and ``L2`` use too.

A :class:`ThreatModel` says how a perturbation is measured and who attacks:

* ``norm``: the size of each perturbation in a batch (``(N, ...)`` tensor of ``x_adv - x``, pixel units) as a
  float64 array; stored as every adversarial example's ``norm`` and used to check eps;
* ``max_eps``: the largest meaningful eps in pixel units (``None``: no cap); ``standard_eps``: RobustBench's
  standard radius per dataset (the default eps);
* ``autoattack_norm``: AutoAttack (``pyautoattack``) attacks with that norm ("Linf", "L2", "L1"): the attacks
  ``autoattack`` / ``apgd-ce`` / ``apgd-ce+apgd-t`` and FAB's minimal perturbation; **or** ``perturb``: the threat
  model's own attack, ``perturb(model, x, y, *, eps, seed, device) -> x_adv`` (``[0, 1]`` images of ``x``'s
  shape; ``model`` takes ``[0, 1]`` images), run as the attack ``own``;
* ``ladder``: the (eps, attack) steps of its eps ladder (``--eps-ladder``), ``None`` when it has none;
* ``robustbench``: RobustBench has this threat model (``export`` writes its ``model_info`` folder).

Stored rows carry ``condition = name.lower()``. A plugin registers its threat model when imported (entry point
group ``dgsa_bench.plugins`` or ``DGSA_BENCH_PLUGINS``), so every command, sweep worker and cluster task knows it;
:func:`get_threat_model` loads the plugins before it calls a name unknown.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch

from robustbench_dgsa.store import THREAT_MODEL_NAME
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.plugins import load_plugins, note_registration

#: AutoAttack's attacks: name -> its sub-attacks, run in this order (the standard version's settings)
AUTOATTACK_ATTACKS: dict[str, tuple[str, ...]] = {
    "autoattack": ("apgd-ce", "apgd-t", "fab-t", "square"),
    "apgd-ce": ("apgd-ce",),
    "apgd-ce+apgd-t": ("apgd-ce", "apgd-t"),
}
#: a threat model's own attack (``perturb``)
OWN_ATTACK = "own"
#: the name that means "common corruptions" wherever a threat model is chosen; no threat model may take it
CORRUPTIONS = "corruptions"

Norm = Callable[[torch.Tensor], np.ndarray]
Perturb = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class ThreatModel:
    """One threat model (see the module docstring)."""
    name: str
    norm: Norm
    autoattack_norm: str | None = None
    perturb: Perturb | None = None
    max_eps: float | None = None
    standard_eps: Mapping[str, float] = field(default_factory=dict)
    ladder: tuple[tuple[float, str], ...] | None = None
    robustbench: bool = False
    description: str = ""

    @property
    def condition(self) -> str:
        """The ``condition`` of its store rows."""
        return self.name.lower()

    @property
    def attacks(self) -> dict[str, tuple[str, ...]]:
        """Attack name -> sub-attacks: AutoAttack's for an ``autoattack_norm`` threat model, else ``own``."""
        return dict(AUTOATTACK_ATTACKS) if self.autoattack_norm else {OWN_ATTACK: (OWN_ATTACK,)}

    @property
    def default_attack(self) -> str:
        return next(iter(self.attacks))

    def box_norm(self, x: torch.Tensor) -> float:
        """The norm of the largest perturbation of one image in a [0, 1] box (all ones): Linf 1, L2 sqrt(n)."""
        return float(self.norm(torch.ones((1, *x.shape[1:]), dtype=torch.float64))[0])


def linf_norm(delta: torch.Tensor) -> np.ndarray:
    """Per example, max |delta| (float64)."""
    return delta.reshape(delta.shape[0], -1).double().abs().amax(1).cpu().numpy()


def l2_norm(delta: torch.Tensor) -> np.ndarray:
    """Per example, the Euclidean norm of delta (float64)."""
    return delta.reshape(delta.shape[0], -1).double().pow(2).sum(1).sqrt().cpu().numpy()


_THREAT_MODELS: dict[str, ThreatModel] = {}


def _check(tm: ThreatModel) -> None:
    if not re.fullmatch(THREAT_MODEL_NAME, str(tm.name)):
        raise ValueError(f"threat model name {tm.name!r}: letters, digits, '_', '.', '-', starting with a letter")
    if tm.condition == CORRUPTIONS or tm.condition == "clean":
        raise ValueError(f"{tm.name!r} names the common-corruption benchmark or clean data; choose another name")
    if not callable(tm.norm):
        raise TypeError(f"threat model {tm.name!r}: norm must be a function of a perturbation batch")
    if (tm.autoattack_norm is None) == (tm.perturb is None):
        raise ValueError(f"threat model {tm.name!r}: give exactly one of autoattack_norm (AutoAttack attacks) "
                         "and perturb (its own attack)")
    if tm.perturb is not None and not callable(tm.perturb):
        raise TypeError(f"threat model {tm.name!r}: perturb must be callable")
    if tm.max_eps is not None and not (math.isfinite(float(tm.max_eps)) and float(tm.max_eps) > 0):
        raise ValueError(f"threat model {tm.name!r}: max_eps must be a positive number or None")
    for e, a in tm.ladder or ():
        if float(e) < 0 or (float(e) > 0 and a not in tm.attacks):
            raise ValueError(f"threat model {tm.name!r}: ladder step ({e}, {a!r}) needs eps >= 0 and one of its "
                             f"attacks ({', '.join(tm.attacks)})")


def register_threat_model(tm: ThreatModel) -> ThreatModel:
    """Register ``tm`` (registering a name again replaces it; names are matched without case). Returns it."""
    _check(tm)
    note_registration(getattr(tm.perturb or tm.norm, "__module__", "") or "")
    _THREAT_MODELS[tm.condition] = tm
    return tm


def threat_model_names() -> tuple[str, ...]:
    """Every registered threat model's name (built-ins first, then plugins'), after loading the plugins."""
    load_plugins()
    return tuple(tm.name for tm in _THREAT_MODELS.values())


def get_threat_model(threat_model: Any) -> ThreatModel:
    """The registered threat model for any spelling (``linf``, ``Linf``, RobustBench's ``ThreatModel`` enum, a
    :class:`ThreatModel`); plugins are loaded first on a miss. One UserError naming the valid names otherwise."""
    if isinstance(threat_model, ThreatModel):
        return threat_model
    key = str(getattr(threat_model, "value", threat_model)).strip()
    if key.lower() not in _THREAT_MODELS:
        load_plugins()
    if key.lower() not in _THREAT_MODELS:
        raise UserError(f"unknown threat model {key!r}; valid: {', '.join(threat_model_names())} "
                        f"(or {CORRUPTIONS})", options="threat_model")
    return _THREAT_MODELS[key.lower()]


def is_corruptions(threat_model: Any) -> bool:
    """Whether ``threat_model`` names the common-corruption benchmark (not an adversarial threat model)."""
    return str(getattr(threat_model, "value", threat_model)).strip().lower() == CORRUPTIONS


#: Linf steps: 0, 0.5/255, 1/255, 2/255, 4/255 (APGD-CE + APGD-T) and 8/255 (full AutoAttack)
LINF_LADDER: tuple[tuple[float, str], ...] = ((0.0, "none"), (0.5 / 255, "apgd-ce+apgd-t"),
                                              (1 / 255, "apgd-ce+apgd-t"), (2 / 255, "apgd-ce+apgd-t"),
                                              (4 / 255, "apgd-ce+apgd-t"), (8 / 255, "autoattack"))

register_threat_model(ThreatModel(
    "Linf", linf_norm, autoattack_norm="Linf", max_eps=1.0, ladder=LINF_LADDER, robustbench=True,
    standard_eps={"cifar10": 8 / 255, "cifar100": 8 / 255, "imagenet": 4 / 255},
    description="max-norm ball (RobustBench's Linf)"))
register_threat_model(ThreatModel(
    "L2", l2_norm, autoattack_norm="L2", robustbench=True, standard_eps={"cifar10": 0.5, "cifar100": 0.5},
    description="Euclidean ball (RobustBench's L2)"))
