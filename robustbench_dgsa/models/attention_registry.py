"""The attention registry: every mechanism, the three built-in ones included, is registered with
:func:`register_attention` and named by ``ModelConfig.attention``; :func:`get_attention` builds its layers
(``blocks.build_attention``) and tells rollout its default mode. Shaped like timm's model registry and its
``attn_layer`` argument; the layers themselves (``models.attention``) stay plain modules with explicit arguments.
"""
from __future__ import annotations

import inspect
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from torch import nn

from robustbench_dgsa.config import ModelConfig, arg_spec, attention_decl, declare_attention
from robustbench_dgsa.models.attention import (DifferentialAttention, GatedDifferentialAttention,
                                               MultiheadSelfAttention, layer_lambda_init)
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.plugins import load_plugins, note_registration

# --- the attention registry ------------------------------------------------------------------------------
# Every mechanism, the three built-in ones included, is registered with :func:`register_attention`; models name
# it in ``ModelConfig.attention``. The contract a registered class meets (docs: README, "Add your own attention"):
#
# * ``cls(dim, heads, layer_idx, **arguments)``: ``dim`` = model width D, ``heads`` = h, ``layer_idx`` = 0-based
#   depth; every further argument has a default and a type hint (bool, int, float, str, ``X | None``,
#   ``Literal[...]``, ``Annotated[X, Rule(...)]``) and is set by ``model.attention_args.NAME``;
# * ``forward(x, key_padding_mask=None, return_maps=False, queries=None)``: x (B, N, D); key_padding_mask (B, N)
#   True = padding; ``queries``: return outputs for the first ``queries`` tokens only (the classifier's last
#   block asks for the CLS row alone); returns (B, Nq, D), or with ``return_maps`` ``(y, {"attn": (B, h, Nq, N),
#   ...})`` for rollout;
# * optionally a bool attribute ``fused``: set to False by ``set_attention_impl("explicit")``.

#: how ``positive`` / ``signed`` rollout reads a mechanism's maps (``rollout.core``)
ROLLOUT_MODES = ("positive", "signed")
ConfigArg = Callable[[ModelConfig, int], Any]


@dataclass(frozen=True)
class AttentionEntry:
    """A registered attention mechanism."""
    name: str                       # ModelConfig.attention
    cls: type[nn.Module]
    rollout_mode: str               # the default rollout mode of its maps: "positive" or "signed"
    display_name: str               # in tables and figures
    colour: str | None              # matplotlib colour of models built on it that have no table style
    head_split: int                 # branches per head: dim must be divisible by heads * head_split
    args: tuple[str, ...]           # constructor arguments set by model.attention_args
    from_config: dict[str, ConfigArg] = field(default_factory=dict)  # arguments computed from ModelConfig fields
    branch_maps: bool = False       # returns "a_pos" / "a_neg" maps (the rollout's branch modes)

    def build(self, cfg: ModelConfig, layer_idx: int) -> nn.Module:
        """The layer for depth ``layer_idx`` of a model with config ``cfg``."""
        kwargs = {k: fn(cfg, layer_idx) for k, fn in self.from_config.items()}
        kwargs.update({k: v for k, v in cfg.attention_args.items() if k in self.args})
        return self.cls(cfg.dim, cfg.heads, layer_idx, **kwargs)


_ATTENTIONS: dict[str, AttentionEntry] = {}
_FIXED = ("self", "dim", "heads", "layer_idx")


def _declared_args(cls: type, skip: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hints, defaults) of the constructor arguments after (dim, heads, layer_idx), except ``skip``."""
    sig = inspect.signature(cls.__init__)
    params = list(sig.parameters.values())
    names = [p.name for p in params[:4]]
    if names != list(_FIXED):
        raise TypeError(f"{cls.__name__}.__init__ must start (self, dim, heads, layer_idx), got ({', '.join(names)})")
    hints = typing.get_type_hints(cls.__init__, include_extras=True)
    out_hints, defaults = {}, {}
    for p in params[4:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in skip:
            continue
        if p.default is p.empty:
            raise TypeError(f"{cls.__name__}.__init__: argument {p.name!r} needs a default (it is set by "
                            f"model.attention_args.{p.name}, which may be left out)")
        if p.name not in hints:
            raise TypeError(f"{cls.__name__}.__init__: argument {p.name!r} needs a type hint")
        out_hints[p.name], defaults[p.name] = hints[p.name], p.default
    return out_hints, defaults


def register_attention(name: str, cls: type[nn.Module] | None = None, *, rollout_mode: str = "positive",
                       display_name: str | None = None, colour: str | None = None, head_split: int = 1,
                       from_config: dict[str, ConfigArg] | None = None, branch_maps: bool = False) -> Any:
    """Register an attention mechanism under ``name`` (``ModelConfig.attention``); also a class decorator
    (``@register_attention("sigmoid")``). Returns ``cls``.

    Args:
        name: the name configs use (``--set model.attention=NAME``); registering a name again replaces it.
        cls: an ``nn.Module`` class meeting the contract above (``cls(dim, heads, layer_idx, **arguments)``).
        rollout_mode: how rollout reads its maps by default: "positive" (non-negative weights, rows renormalised;
            classic rollout) or "signed" (maps with negative weights).
        display_name: its name in tables and figures (default ``name``).
        colour: a matplotlib colour for models built on it that have no style of their own.
        head_split: branches per head (``dim`` must be divisible by ``heads * head_split``).
        from_config: arguments computed from ModelConfig fields, ``{arg: fn(cfg, layer_idx)}`` (the built-ins'
            λ_init, gate and residual options); every other argument is a ``model.attention_args`` entry.
        branch_maps: its ``return_maps`` dicts hold "a_pos" / "a_neg" (rollout's branch modes).
    """
    if cls is None:
        return lambda c: register_attention(name, c, rollout_mode=rollout_mode, display_name=display_name,
                                            colour=colour, head_split=head_split, from_config=from_config,
                                            branch_maps=branch_maps)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TypeError(f"register_attention({name!r}, ...): expected an nn.Module class, got {cls!r}")
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", str(name)):
        raise ValueError(f"attention name {name!r}: letters, digits, '_', '.', '-', starting with a letter")
    if rollout_mode not in ROLLOUT_MODES:
        raise ValueError(f"rollout_mode must be one of {', '.join(ROLLOUT_MODES)}, got {rollout_mode!r}")
    from_config = dict(from_config or {})
    hints, defaults = _declared_args(cls, from_config)
    specs = {k: arg_spec(h, f"{cls.__name__}.__init__ argument {k!r}") for k, h in hints.items()}
    declare_attention(name, specs, defaults, head_split=head_split)
    note_registration(cls.__module__)
    _ATTENTIONS[name] = AttentionEntry(name, cls, rollout_mode, display_name or name, colour, int(head_split),
                                       tuple(specs), from_config, bool(branch_maps))
    return cls


def get_attention(name: str) -> AttentionEntry:
    """The registered attention ``name`` (plugins are loaded first when it is unknown)."""
    attention_decl(name)         # loads the plugins on a miss; one UserError naming the valid names
    if name not in _ATTENTIONS:
        raise UserError(f"attention {name!r} is declared but has no class registered")
    return _ATTENTIONS[name]


def attention_names() -> tuple[str, ...]:
    """Every registered attention name (built-in first, then plugins'), after loading the plugins."""
    load_plugins()
    return tuple(_ATTENTIONS)


def _lambda_init(cfg: ModelConfig, layer_idx: int) -> float:
    return layer_lambda_init(layer_idx, cfg.lambda_init, cfg.lambda_init_value)


def attention_classes() -> tuple[type[nn.Module], ...]:
    """The registered attention classes."""
    return tuple(e.cls for e in _ATTENTIONS.values())


register_attention("mhsa", MultiheadSelfAttention, rollout_mode="positive", display_name="MHSA")
#: the differential mechanisms' arguments read from ModelConfig fields (λ_init and its mode, the Q-residual)
_DIFFERENTIAL_FROM_CONFIG: dict[str, ConfigArg] = {
    "lambda_init": _lambda_init, "q_residual": lambda c, i: bool(c.q_residual),
    "learnable_lambda_init": lambda c, i: c.lambda_init == "learnable"}

register_attention("diff", DifferentialAttention, rollout_mode="signed", display_name="DiffAttn", head_split=2,
                   from_config=_DIFFERENTIAL_FROM_CONFIG, branch_maps=True)
register_attention("dgsa", GatedDifferentialAttention, rollout_mode="signed", display_name="DGSA", head_split=2,
                   from_config={**_DIFFERENTIAL_FROM_CONFIG, "gate_bias_init": lambda c, i: c.gate_bias_init},
                   branch_maps=True)


