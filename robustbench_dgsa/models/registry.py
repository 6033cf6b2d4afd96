"""The one model registry (timm-like): a named config per model, variants are overrides.

    >>> from robustbench_dgsa.models import create_model, get_model_config, MODEL_NAMES
    >>> model = create_model("dgvit", num_classes=100)                # DGViT, SwiGLU ×4
    >>> model = create_model("dvit", ffn_ratio=2, ffn_dropout2=True)  # DViT ×2 with "dropout ×2"
    >>> cfg = get_model_config("dgt"); cfg.depth = 4; model = create_model(cfg)

Defaults (docs/METHODS.md, Models): vision models D=256, 8 layers, 8 heads, dropout 0.05, 32×32 / patch 4; text
models D=256, 6 layers, 8 heads, dropout 0.1, max_len 256. Useful overrides: ``ffn_ratio`` (2, 4, 16/3: the paper's
"proj."), ``ffn_dropout2``, ``lambda_init`` ("layer" | "fixed" | "learnable") / ``lambda_init_value``, ``gate_bias_init``
("default" | "diff"), ``q_residual``, geometry (``image_size``, ``patch_size``, ``in_chans``), ``num_classes``,
``vocab_size``, ``max_len``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from torch import nn

from ..config import ModelConfig, _coerce, check_value, validate_model
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.plugins import load_plugins, missing_hint, note_registration
from .attention_registry import get_attention
from .text import TextTransformer
from .vision import VisionTransformer

_REGISTRY: dict[str, Callable[[], ModelConfig]] = {}
_DISPLAY: dict[str, str] = {}      # display names given to register_model


def register_model(fn: Callable[[], ModelConfig] | None = None, *, display_name: str | None = None) -> Any:
    """Register a function returning a named :class:`ModelConfig` under the function's name (a decorator,
    with or without ``display_name=`` for tables and figures). The config's ``name`` should be that name.
    Public: a plugin registers its models so (``dgsa-bench models`` lists them, ``--model NAME`` builds them)."""
    if fn is None:
        return lambda f: register_model(f, display_name=display_name)
    note_registration(fn.__module__)
    _REGISTRY[fn.__name__] = fn
    if display_name:
        _DISPLAY[fn.__name__] = display_name
    return fn


def _image(**kw: Any) -> ModelConfig:
    return ModelConfig(modality="image", dim=256, depth=8, heads=8, dropout=0.05, **kw)


def _text(**kw: Any) -> ModelConfig:
    return ModelConfig(modality="text", dim=256, depth=6, heads=8, dropout=0.1, max_len=256, **kw)


# --- vision ------------------------------------------------------------------------------------------
@register_model
def vit() -> ModelConfig:
    """ViT: vanilla MHSA, GELU FFN ×4."""
    return _image(name="vit", attention="mhsa", ffn="gelu", ffn_ratio=4.0)


@register_model
def dvit() -> ModelConfig:
    """DViT: differential attention (λ_init per layer), SwiGLU ×4."""
    return _image(name="dvit", attention="diff", ffn="swiglu", ffn_ratio=4.0, lambda_init="layer")


@register_model
def dgvit() -> ModelConfig:
    """DGViT: differential gated attention (λ_init fixed 0.8), Q-residual, SwiGLU ×4."""
    return _image(name="dgvit", attention="dgsa", ffn="swiglu", ffn_ratio=4.0, lambda_init="fixed",
                  lambda_init_value=0.8, q_residual=True)


@register_model
def vit_swiglu() -> ModelConfig:
    """FFN-matched ViT baseline: vanilla MHSA with the differential models' SwiGLU ×R FFN."""
    return _image(name="vit_swiglu", attention="mhsa", ffn="swiglu", ffn_ratio=4.0)


# --- vision ablations: each differs from DGViT in one respect (the second campaign, results/evidence-v2) ----
@register_model
def dgvit_nogate() -> ModelConfig:
    """DGViT's gate-less twin: DiffAttn (learnable λ) with DGViT's fixed λ_init 0.8, Q-residual and SwiGLU ×4, so
    it differs from DGViT by the gate alone (A+ − λ A− in place of g A+ − (1−g) A−)."""
    return _image(name="dgvit_nogate", attention="diff", ffn="swiglu", ffn_ratio=4.0, lambda_init="fixed",
                  lambda_init_value=0.8, q_residual=True)


@register_model
def dgvit_noqres() -> ModelConfig:
    """DGViT without the Q-residual (Y = O W_o, as DGT): differs from DGViT by the residual alone."""
    return _image(name="dgvit_noqres", attention="dgsa", ffn="swiglu", ffn_ratio=4.0, lambda_init="fixed",
                  lambda_init_value=0.8, q_residual=False)


@register_model
def dgvit_learnlambda() -> ModelConfig:
    """DGViT with a learnable λ_init per layer, starting at 0.8 (the paper's appendix B.5 ablation: fixed 0.8
    is reported better)."""
    return _image(name="dgvit_learnlambda", attention="dgsa", ffn="swiglu", ffn_ratio=4.0,
                  lambda_init="learnable", lambda_init_value=0.8, q_residual=True)


# --- text --------------------------------------------------------------------------------------------
@register_model
def transformer() -> ModelConfig:
    """Transformer encoder classifier: vanilla MHSA, GELU FFN ×4."""
    return _text(name="transformer", attention="mhsa", ffn="gelu", ffn_ratio=4.0)


@register_model
def dt() -> ModelConfig:
    """DT (Differential Transformer encoder): differential attention (λ_init per layer), SwiGLU ×4."""
    return _text(name="dt", attention="diff", ffn="swiglu", ffn_ratio=4.0, lambda_init="layer")


@register_model
def dgt() -> ModelConfig:
    """DGT: differential gated attention (λ_init fixed 0.8), no Q-residual, SwiGLU ×4."""
    return _text(name="dgt", attention="dgsa", ffn="swiglu", ffn_ratio=4.0, lambda_init="fixed",
                 lambda_init_value=0.8, q_residual=False)


@register_model
def transformer_swiglu() -> ModelConfig:
    """FFN-matched Transformer baseline: vanilla MHSA with SwiGLU ×R."""
    return _text(name="transformer_swiglu", attention="mhsa", ffn="swiglu", ffn_ratio=4.0)


MODEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)   # the built-in models (model_names() also has later ones)


def model_names() -> tuple[str, ...]:
    """Every registered model name, in registration order: the built-in ones, then any registered later with
    :func:`register_model` (plugins are loaded first: entry points, ``DGSA_BENCH_PLUGINS``)."""
    load_plugins()
    return tuple(_REGISTRY)


# --- model facts: the one table reports, figures, rollout plots, compare and reproduce read ----------
@dataclass(frozen=True)
class ModelFacts:
    """How a model is named, grouped, ordered and drawn everywhere the suite shows it."""
    name: str            # registry name
    display: str         # name in tables and figures
    family: str          # "baseline" | "differential" | "gated" | "baseline (SwiGLU)" | "ablation"
    modality: str        # "image" | "text" (from the model's config)
    colour: str          # Okabe–Ito colour-blind-safe palette (Okabe & Ito 2008; Wong 2011)
    marker: str          # matplotlib marker, distinct per family
    linestyle: str       # matplotlib line style, distinct per family
    order: int           # position in tables, legends and figure columns
    paper: str           # the paper's name for the model ("" when the paper has no counterpart)


# Okabe–Ito: blue, orange, bluish green and reddish purple stay distinct under protanopia, deuteranopia and
# tritanopia; the marker and line style carry the family a second time (and in greyscale print).
_FAMILY_STYLE = {
    "baseline": ("#0072B2", "o", "-"),
    "differential": ("#E69F00", "s", "--"),
    "gated": ("#009E73", "^", "-."),
    "baseline (SwiGLU)": ("#CC79A7", "D", ":"),
}
#: styles for models outside the table (custom registrations), handed out in order
EXTRA_STYLES: tuple[tuple[str, str, Any], ...] = (
    ("#F0E442", "*", (0, (4, 1, 1, 1))), ("#56B4E9", "h", (0, (3, 1, 1, 1, 1, 1))), ("#D55E00", "d", (0, (2, 1))),
    ("#000000", "p", (0, (1, 1))))


#: DGViT's one-change ablations: a style each (they share the family "ablation" but not a look)
ABLATION_STYLES: tuple[tuple[str, str, Any], ...] = (
    ("#56B4E9", "v", (0, (3, 1, 1, 1))), ("#D55E00", "P", (0, (5, 2))), ("#000000", "X", (0, (1, 2))))


def _facts(order: int, name: str, display: str, family: str, paper: str,
           style: tuple[str, str, Any] | None = None) -> ModelFacts:
    colour, marker, linestyle = style or _FAMILY_STYLE[family]
    return ModelFacts(name, display, family, _REGISTRY[name]().modality, colour, marker, linestyle, order, paper)


MODEL_FACTS: dict[str, ModelFacts] = {f.name: f for f in (
    _facts(0, "vit", "ViT", "baseline", "ViT"),
    _facts(1, "dvit", "DViT", "differential", "DViT"),
    _facts(2, "dgvit", "DGViT", "gated", "DGViT"),
    _facts(3, "vit_swiglu", "ViT-SwiGLU", "baseline (SwiGLU)", ""),
    _facts(4, "transformer", "Transformer", "baseline", "Transformer"),
    _facts(5, "dt", "DT", "differential", "DT"),
    _facts(6, "dgt", "DGT", "gated", "DGT"),
    _facts(7, "transformer_swiglu", "Transformer-SwiGLU", "baseline (SwiGLU)", ""),
    _facts(8, "dgvit_nogate", "DGViT w/o gate", "ablation", "", style=ABLATION_STYLES[0]),
    _facts(9, "dgvit_noqres", "DGViT w/o Q-res", "ablation", "", style=ABLATION_STYLES[1]),
    _facts(10, "dgvit_learnlambda", "DGViT learn-λ", "ablation", "", style=ABLATION_STYLES[2]),
)}
#: the reference (baseline) model of each modality: relative CE, pairwise tests, compare's default
REFERENCE_MODELS: dict[str, str] = {"image": "vit", "text": "transformer"}


def display_name(name: str) -> str:
    """Display name of a registry model (vit → ViT, dgt → DGT, ...); unknown names as they are."""
    f = MODEL_FACTS.get(name)
    if f is None and name not in _DISPLAY:
        load_plugins()                          # a plugin's model in a stored result (the report, compare)
    return f.display if f else _DISPLAY.get(name, name)


def model_order(names: Iterable[str]) -> list[str]:
    """Distinct names in the table's order, then unknown names alphabetically."""
    names = set(names)
    known = sorted((n for n in names if n in MODEL_FACTS), key=lambda n: MODEL_FACTS[n].order)
    return known + sorted(n for n in names if n not in MODEL_FACTS)


def model_styles(names: Sequence[str]) -> dict[str, tuple[str, str, Any]]:
    """(colour, marker, line style) per model: the table's for known models, then :data:`EXTRA_STYLES` in order."""
    out, k = {}, 0
    for n in names:
        f = MODEL_FACTS.get(n)
        if f is not None:
            out[n] = (f.colour, f.marker, f.linestyle)
        else:
            out[n] = EXTRA_STYLES[k % len(EXTRA_STYLES)]
            colour = _attention_colour(n)
            if colour:
                out[n] = (colour, *out[n][1:])
            k += 1
    return out


def _attention_colour(name: str) -> str | None:
    """The colour registered with the attention of registered model ``name`` (None when it has none)."""
    if name not in _REGISTRY:
        load_plugins()
    fn = _REGISTRY.get(name)
    if fn is None:
        return None
    try:
        return get_attention(fn().attention).colour
    except UserError:
        return None


def reference_model(names: Iterable[str], modality: str | None = None) -> str | None:
    """ViT / Transformer (per ``modality``, else whichever is present) when among ``names``, else the first in order."""
    ordered = model_order(names)
    wanted = [REFERENCE_MODELS[modality]] if modality in REFERENCE_MODELS else list(REFERENCE_MODELS.values())
    for w in wanted:
        if w in ordered:
            return w
    return ordered[0] if ordered else None


def _unknown(name: str, plugins: Any = ()) -> UserError:
    return UserError(f"unknown model {name!r} (valid: {', '.join(model_names())})" + missing_hint(plugins))


def model_description(name: str) -> str:
    """What registered model ``name`` is: its registration function's docstring, on one line ("" without one)."""
    if name not in _REGISTRY:
        load_plugins()
    fn = _REGISTRY.get(name)
    if fn is None:
        raise _unknown(name)
    return " ".join((fn.__doc__ or "").split())


def get_model_config(name: str) -> ModelConfig:
    """A fresh copy of the named config (plugins are loaded first when the name is unknown)."""
    if name not in _REGISTRY:
        load_plugins()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise _unknown(name) from None


def apply_model_overrides(cfg: ModelConfig, **overrides: Any) -> ModelConfig:
    """A copy of ``cfg`` with fields replaced (values may be CLI strings: "2", "16/3", "true")."""
    valid = {f.name for f in dataclasses.fields(ModelConfig)}
    out = dataclasses.replace(cfg)
    for key, value in overrides.items():
        if key not in valid:
            raise UserError(f"unknown model option {key!r} (valid: {', '.join(sorted(valid))})")
        if key == "ffn_ratio" and isinstance(value, str):
            value = parse_ratio(value)
        setattr(out, key, _coerce(ModelConfig, key, value))
    return out


def parse_ratio(text: str | float | int) -> float:
    """FFN ratio from "2", "4", "16/3" or "5.333" (read as 16/3: any value within 0.01 of it)."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = text.strip()
        try:
            if "/" in s:
                num, den = s.split("/", 1)
                value = float(num) / float(den)
            else:
                value = float(s)
        except (ValueError, ZeroDivisionError):
            raise UserError(f"cannot read FFN ratio {text!r} (examples: 2, 4, 16/3, 5.333)") from None
    if abs(value - 16 / 3) < 0.01:
        value = 16 / 3
    return check_value("model", "ffn_ratio", value, text=False)


def create_model(cfg_or_name: ModelConfig | str, **overrides: Any) -> nn.Module:
    """Build a model from a registry name or a :class:`ModelConfig`, with optional field overrides."""
    if isinstance(cfg_or_name, str):
        cfg = get_model_config(cfg_or_name)
    elif isinstance(cfg_or_name, ModelConfig):
        cfg = cfg_or_name
    else:
        raise TypeError(f"create_model expects a model name or a ModelConfig, got {type(cfg_or_name).__name__}")
    if overrides:
        cfg = apply_model_overrides(cfg, **overrides)
    validate_model(cfg)
    if cfg.module is not None:
        return _factory_model(cfg)
    return VisionTransformer(cfg) if cfg.modality == "image" else TextTransformer(cfg)


def module_config(spec: str, name: str | None = None) -> ModelConfig:
    """The config of an outside model built by the factory ``"package.module:factory"`` (``name``: its name in
    the store, default the factory's name). Train it like a registered model: ``resolve_config(module_config(...),
    dataset, preset)`` and ``train``; its checkpoints rebuild it by importing the factory again."""
    cfg = ModelConfig(name=name or spec.rsplit(":", 1)[-1], modality="image")
    cfg.module = check_value("model", "module", spec, text=False)
    cfg.name = check_value("model", "name", cfg.name, text=False)
    return cfg


def _factory_model(cfg: ModelConfig) -> nn.Module:
    """``cfg.module``'s factory called with num_classes (and image_size, in_chans where it takes them); the model
    carries ``cfg`` as ``.config`` (checkpoints)."""
    import inspect
    import importlib
    from .external import _cwd_on_path, load_module_model
    factory_kwargs = {"num_classes": cfg.num_classes, "image_size": cfg.image_size, "in_chans": cfg.in_chans}
    try:
        mod, fn = cfg.module.split(":")
        with _cwd_on_path():
            params = inspect.signature(getattr(importlib.import_module(mod), fn)).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        kwargs = {k: v for k, v in factory_kwargs.items() if takes_any or k in params}
    except (ImportError, AttributeError, ValueError, TypeError):
        kwargs = {"num_classes": cfg.num_classes}        # load_module_model names what is wrong
    model = load_module_model(cfg.module, **kwargs).model
    model.train()
    model.config = cfg
    return model
