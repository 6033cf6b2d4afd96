"""One config system: typed dataclasses, named presets, overrides from a file and from the CLI (``key=value``).

A run is fully described by a :class:`RunConfig` (model + train + data). Its canonical JSON hashes to the
``config_hash`` recorded in every results row and checkpoint.

Resolution order (later wins), each step recorded in ``RunConfig.sources`` (``"train.lr": "preset"``):
``registry`` (the named model config) / ``default`` (train, data) -> ``preset`` (``presets/<name>.toml``) ->
``paper-dataset`` (paper Table 5/6 specials, paper preset only) -> ``file`` (TOML/JSON with [model], [train],
[data] tables) -> ``override`` (``--set key=value``, option values, sweep job overrides).

Every value, whatever layer it comes from, goes through one check (:func:`check_value`) against the field's
type and the :class:`Rule` in its metadata -- the one declarative place for ranges and choices. A bad value
gives one line naming the key, the value and what is expected (``train.epochs: expected an integer ≥ 1,
got 1.5``); an unknown key gives the valid ones and the closest match.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
import tomllib
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from robustbench_dgsa.util import plugins
from robustbench_dgsa.util.errors import UserError

PRESETS = ("tiny", "small", "evidence", "zoo", "paper")
PRESET_DIR = Path(__file__).resolve().parent / "presets"
SECTIONS = ("model", "train", "data")
#: layers a field can be set by, in resolution order (later wins)
LAYERS = ("default", "registry", "argument", "preset", "paper-dataset", "file", "override", "stored")


@dataclass(frozen=True)
class Rule:
    """What a field accepts beyond its type: a numeric range, a set of choices or a text pattern."""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None        # full match, case-insensitive
    what: str = ""                    # how the pattern reads to a person
    most: float | None = None         # a sanity maximum (catches typos and 2**64), named when a value exceeds it
    registry: str = ""                # the choices are a registry's names ("attention": :func:`attention_names`)


def _f(default: Any, **rule: Any) -> Any:
    """A dataclass field with its :class:`Rule`."""
    return field(default=default, metadata={"rule": Rule(**rule)})


# Upper bounds: every number has one, so a typo (or 2**64) is one line before anything is allocated. Generous
# for real use (the paper's largest model is ViT-B at 224 px: dim 768, depth 12, 197 tokens).
SEED_MAX = 2**32 - 1                  # torch / numpy seeds
_COUNT = dict(ge=1, most=10**9)        # examples, steps
_BATCH = dict(ge=1, most=2**20)
_UNIT = dict(ge=0, lt=1)              # dropout, fractions, betas

# Choices are also defined where they are used (models/attention.py, models/blocks.py, engine/schedules.py,
# engine/predict.py); tests/test_config.py checks that the two stay equal.
MODALITIES = ("image", "text")
ATTENTION_TYPES = ("mhsa", "diff", "dgsa")
FFN_TYPES = ("gelu", "swiglu")
LAMBDA_INIT_MODES = ("layer", "fixed", "learnable")
GATE_BIAS_INITS = ("default", "diff")
SCHEDULES = ("cosine", "linear", "constant")
AMP_MODES = ("auto", "bf16", "off")
DEVICE_PATTERN = r"auto|cpu|cuda(:[0-9]+)?"


@dataclass
class ModelConfig:
    """Architecture of one model. Registered named configs live in ``robustbench_dgsa.models.registry``."""
    name: str = _f("vit", pattern=r"\S+", what="a model name")       # registry name it was built from
    modality: str = _f("image", choices=MODALITIES)
    attention: str = _f("mhsa", registry="attention")   # any registered attention (:func:`attention_names`)
    dim: int = _f(256, ge=1, most=65536)
    depth: int = _f(8, ge=1, most=1024)
    heads: int = _f(8, ge=1, most=1024)
    dropout: float = _f(0.05, **_UNIT)
    ffn: str = _f("gelu", choices=FFN_TYPES)  # "gelu" (Linear D->ffn_ratio*D, GELU) | "swiglu"
    # GELU hidden = ratio*D; SwiGLU first Linear = ratio*D (the paper's "proj.")
    ffn_ratio: float = _f(4.0, gt=0, most=64)
    ffn_dropout2: bool = _f(False)     # the "dropout x2" variant (paper Table 1)
    head_hidden: int = _f(128, ge=1, most=65536)  # classifier: Linear(D->128) -> GELU -> dropout -> Linear(128->C)
    num_classes: int = _f(10, ge=1, most=10**6)
    # vision geometry
    image_size: int = _f(32, ge=1, most=4096)
    patch_size: int = _f(4, ge=1, most=4096)
    in_chans: int = _f(3, ge=1, most=64)
    # text
    vocab_size: int = _f(30000, ge=2, most=10**7)  # id 0 is padding
    max_len: int = _f(256, ge=1, most=65536)     # tokens, CLS excluded
    # differential / gated attention options (docs/METHODS.md, Models)
    lambda_init: str = _f("layer", choices=LAMBDA_INIT_MODES)  # "layer": 0.8 - 0.6 exp(-0.3 l) | "fixed" | "learnable"
    lambda_init_value: float = _f(0.8, gt=0, lt=1)
    gate_bias_init: str = _f("default", choices=GATE_BIAS_INITS)  # "diff": b = logit(1/(1+lambda_init))
    q_residual: bool = _f(False)       # DiffAttn / DGSA: Y = Q + O W_o
    # a registered attention's own constructor arguments (``--set model.attention_args.NAME=value``, TOML
    # ``[model.attention_args]``), checked against the arguments it declares (:func:`declare_attention`)
    attention_args: dict[str, Any] = field(default_factory=dict, metadata={"rule": Rule(what="attention arguments")})
    # an outside model: "package.module:factory", a function returning an nn.Module (images in, logits out), called
    # with num_classes (and image_size / in_chans where it takes them); the architecture fields above are then unused
    module: str | None = _f(None, pattern=r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", what="package.module:factory")


@dataclass
class TrainConfig:
    epochs: int = _f(100, ge=1, most=100_000)
    batch_size: int = _f(128, **_BATCH)
    lr: float = _f(3e-4, gt=0, most=10)
    weight_decay: float = _f(0.01, ge=0, most=100)
    betas: tuple[float, float] = _f((0.9, 0.999), **_UNIT)
    eps: float = _f(1e-8, gt=0, most=1)
    schedule: str = _f("cosine", choices=SCHEDULES)  # "cosine" (per step, to 0) | "linear" (warm-up, decay)
    warmup_steps: int = _f(0, ge=0, most=10**9)
    grad_clip: float | None = _f(None, gt=0, most=1e6)          # max gradient norm; none = no clipping
    decay_bias_and_norm: bool = _f(True)  # text presets exclude biases and norm weights from weight decay
    amp: str = _f("auto", choices=AMP_MODES)  # "auto" (bf16 on CUDA and CPUs with native bf16) | "bf16" | "off"
    compile: bool = _f(False)                   # torch.compile the training step and evaluation forward
    eval_batch_size: int = _f(256, **_BATCH)
    device: str = _f("auto", pattern=DEVICE_PATTERN, what="auto, cpu, cuda or cuda:N")


# How max_test examples are chosen (engine.predict.select_test): the first N in official order (RobustBench's
# n_examples), a class-stratified N (seed 0), or "auto" = the first N unless they miss a class.
TEST_SUBSETS = ("first", "stratified", "auto")


@dataclass
class DataConfig:
    dataset: str = _f("synthetic-vision", pattern=r".+", what="a dataset name")
    data_root: str | None = _f(None)
    download: bool = _f(False)
    max_train: int | None = _f(None, **_COUNT)  # subsample the training split (stratified, seeded); none = all
    max_test: int | None = _f(None, **_COUNT)   # subsample the test split (test_subset says how); none = all
    test_subset: str = _f("first", choices=TEST_SUBSETS)  # "first" N (RobustBench) | "stratified" | "auto"
    val_fraction: float = _f(0.2, **_UNIT)     # stratified train/validation split of the training fold
    min_freq: int = _f(2, **_COUNT)              # text vocabulary
    max_vocab: int = _f(60000, ge=2, most=10**7)
    augment: bool = _f(False)                  # vision: random crop (pad 4) + horizontal flip


_SECTION_CLASSES: dict[str, type] = {"model": ModelConfig, "train": TrainConfig, "data": DataConfig}


@dataclass
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    #: which layer set each field ("train.lr" -> "preset"); provenance only: not in to_dict() or hash()
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {s: dataclasses.asdict(getattr(self, s)) for s in SECTIONS}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, layer: str = "stored") -> "RunConfig":
        """Rebuild from :meth:`to_dict` output (e.g. a stored provenance record), every value checked."""
        if not isinstance(d, dict):
            raise UserError(f"a run config must be a mapping of sections {', '.join(SECTIONS)}, "
                            f"got {_show(d, False)}")
        unknown = sorted(set(d) - set(SECTIONS))
        if unknown:
            raise _unknown_section(unknown[0], unknown[0])
        cfg = cls()
        for sec in SECTIONS:
            body = d.get(sec) or {}
            if not isinstance(body, dict):
                raise UserError(f"config section {sec}: expected a table of keys, got {_show(body, False)}")
            apply_overrides(cfg, {f"{sec}.{k}": v for k, v in body.items()}, layer=layer, text=False)
        return cfg

    def hash(self) -> str:
        """Identity of the experiment: where and how it runs (data folder, device, compiler) does not change it,
        so a run moved to another machine or folder still resumes and groups with its peers. (The precision a
        run computes in is recorded beside the hash: ``amp="auto"`` resolves per machine.)"""
        d = self.to_dict()
        for section, key in _WHERE_IT_RUNS:
            d[section].pop(key, None)
        for (section, key), default in _ADDED_LATER.items():
            if d[section].get(key) == default:
                d[section].pop(key)
        return config_hash(d)


#: ``train.compile`` (added later) is among them: torch.compile runs the same operations in the same precision,
#: and whether a machine has a compiler is a fact of the machine (the run record says whether it compiled)
_WHERE_IT_RUNS = (("data", "data_root"), ("data", "download"), ("train", "device"), ("train", "compile"))
#: fields added after runs were first stored, with the value that means what runs did before the field existed:
#: at that value a field stays out of the hash, so older runs (and stores, and resumable checkpoints) keep their
#: identity; any other value enters the hash as usual
_ADDED_LATER: dict[tuple[str, str], Any] = {("data", "test_subset"): "first", ("model", "attention_args"): {},
                                            ("model", "module"): None}


def config_hash(d: dict[str, Any]) -> str:
    """Stable 12-hex-digit hash of a config dict (canonical JSON)."""
    blob = json.dumps(d, sort_keys=True, default=list, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


# --- the one check ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Spec:
    base: type            # int, float, bool, str or tuple
    optional: bool
    size: int             # tuple length (0 otherwise)
    rule: Rule


_SPECS: dict[type, dict[str, _Spec]] = {}


def field_specs(cls: type) -> dict[str, _Spec]:
    """name -> type and rule of every field of a config dataclass (from its annotations and metadata)."""
    if cls not in _SPECS:
        hints = typing.get_type_hints(cls)
        specs = {}
        for f in fields(cls):
            args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)]
            optional = type(None) in typing.get_args(hints[f.name])
            origin = typing.get_origin(hints[f.name])
            if origin is tuple:
                base, size = tuple, len(args)
            elif origin is dict:
                base, size = dict, 0
            else:
                base, size = (args[0] if optional else hints[f.name]), 0
            specs[f.name] = _Spec(base, optional, size, f.metadata.get("rule", Rule()))
        _SPECS[cls] = specs
    return _SPECS[cls]


def upper_bound(key: str) -> int | float | None:
    """The largest value field ``section.name`` accepts (its rule's ``le`` or ``most``), None without one."""
    section, name = resolve_key(key)
    rule = field_specs(_SECTION_CLASSES[section])[name].rule
    return rule.le if rule.le is not None else rule.most


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e16 else f"{v:g}"


def _range_text(r: Rule) -> str:
    lo = ("[", r.ge) if r.ge is not None else ("(", r.gt) if r.gt is not None else None
    hi = ("]", r.le) if r.le is not None else (")", r.lt) if r.lt is not None else None
    if lo and hi:
        return f" in {lo[0]}{_num(lo[1])}, {_num(hi[1])}{hi[0]}"
    if lo:
        return f" {'≥' if lo[0] == '[' else '>'} {_num(lo[1])}"
    if hi:
        return f" {'≤' if hi[0] == ']' else '<'} {_num(hi[1])}"
    return ""


def expected_text(spec: _Spec, over: bool = False) -> str:
    """What a field accepts, as a person reads it: "an integer ≥ 1", "one of cosine, linear, constant";
    ``over``: for a value above the rule's sanity maximum, which is then named ("an integer in [1, 100000]")."""
    r = dataclasses.replace(spec.rule, le=spec.rule.most) if over and spec.rule.most is not None else spec.rule
    if spec.base is bool:
        text = "true or false"
    elif spec.base is int:
        text = "an integer" + _range_text(r)
    elif spec.base is float:
        text = "a number" + _range_text(r)
    elif spec.base is tuple:
        rng = _range_text(r)
        text = f"{spec.size} comma-separated numbers" + (f", each{rng}" if rng else "")
    elif spec.base is dict:
        text = "a table of NAME = value (set one with model.attention_args.NAME=value)"
    elif r.registry:
        text = "one of " + ", ".join(registered_names(r.registry))
    elif r.choices:
        text = "one of " + ", ".join(r.choices)
    elif r.what:
        text = r.what
    else:
        text = "text"
    return text + (" or none" if spec.optional else "")


def _show(value: Any, text: bool) -> str:
    """The value as the user wrote it: CLI text as is, typed (file) values as JSON."""
    if text and isinstance(value, str):
        return value if value.strip() else repr(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


class _Bad(Exception):
    """Internal: the value does not fit; the caller turns it into the one-line UserError."""

    def __init__(self, hint: str = "") -> None:
        super().__init__(hint)
        self.hint = hint


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _from_text(spec: _Spec, text: str) -> Any:
    """Parse CLI text (``--set`` values, sweep job overrides) into the field's type."""
    t = text.strip()
    if t.lower() in ("none", "null"):
        return None
    if spec.base is bool:
        if t.lower() in _TRUE + _FALSE:
            return t.lower() in _TRUE
        raise _Bad()
    if spec.base is int:
        if not re.fullmatch(r"[+-]?[0-9]+", t):  # ASCII digits only (int() also reads other scripts' digits)
            raise _Bad()
        return int(t)
    if spec.base is float:
        return _float_text(t)
    if spec.base is dict:
        raise _Bad()
    if spec.base is tuple:
        parts = [p for p in t.strip("()[]").split(",")]
        if len(parts) != spec.size or not all(p.strip() for p in parts):
            raise _Bad()
        return tuple(_float_text(p.strip()) for p in parts)
    return text


def _float_text(t: str) -> float:
    if not t.isascii():  # float() also reads other scripts' digits ("٦٤"): numbers are written in ASCII
        raise _Bad()
    try:
        if "/" in t:  # fractions such as an FFN ratio of 16/3
            num, den = t.split("/", 1)
            return float(num) / float(den)
        return float(t)
    except (ValueError, ZeroDivisionError):
        raise _Bad() from None


def _typed(spec: _Spec, value: Any) -> Any:
    """Check a typed value (file, preset, stored config, Python caller) against the field's type."""
    if value is None:
        if spec.optional:
            return None
        raise _Bad()
    if isinstance(value, str) and spec.base is not str:
        raise _Bad("text")
    if spec.base is bool:
        if not isinstance(value, bool):
            raise _Bad()
        return value
    if spec.base is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _Bad()
        return dict(value)
    if spec.base is str:
        if not isinstance(value, str):
            raise _Bad()
        return value
    if spec.base is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != spec.size:
            raise _Bad()
        return tuple(_typed(_Spec(float, False, 0, spec.rule), v) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad()
    if spec.base is int:
        if isinstance(value, float):
            raise _Bad()
        return int(value)
    return float(value)


def _in_rule(spec: _Spec, value: Any) -> bool:
    if value is None:
        return True
    r = spec.rule
    if spec.base in (int, float) or spec.base is tuple:
        for v in (value if spec.base is tuple else (value,)):
            if isinstance(v, float) and not math.isfinite(v):
                return False
            if ((r.ge is not None and v < r.ge) or (r.gt is not None and v <= r.gt)
                    or (r.le is not None and v > r.le) or (r.lt is not None and v >= r.lt)
                    or (r.most is not None and v > r.most)):
                return False
    if spec.base is str:
        if r.choices and value not in r.choices:
            return False
        if r.registry and value not in registered_names(r.registry, value):
            return False
        if r.pattern and not re.fullmatch(r.pattern, value, flags=re.IGNORECASE):
            return False
    return True


def _over_most(spec: _Spec, value: Any) -> bool:
    """Whether a parsed value (or any part of a tuple) lies above the rule's sanity maximum."""
    if spec.rule.most is None or value is None or isinstance(value, (str, bool)):
        return False
    parts = value if isinstance(value, tuple) else (value,)
    return any(isinstance(v, (int, float)) and v > spec.rule.most for v in parts)


def check_value(section: str, name: str, value: Any, *, text: bool = True) -> Any:
    """The value for ``section.name``, converted to the field's type and checked against its rule.

    ``text=True``: strings are parsed (``"3"`` -> 3, ``"none"`` -> None) as from ``--set``; ``text=False``:
    values must already have the right type (config files, presets, stored configs). Raises a one-line
    :class:`UserError` naming the key, the value and what is expected.
    """
    return _checked(field_specs(_SECTION_CLASSES[section])[name], f"{section}.{name}", value, text)


def _checked(spec: _Spec, key: str, value: Any, text: bool) -> Any:
    """:func:`check_value` for one spec; ``key`` names the value in the error line."""
    out: Any = None
    try:
        if text and isinstance(value, str) and not (spec.base is str and not spec.optional):
            out = value if spec.base is str and value.strip().lower() not in ("none", "null") \
                else _from_text(spec, value)
        else:
            out = _typed(spec, value)
        if (out is None and not spec.optional) or not _in_rule(spec, out):
            raise _Bad()
    except _Bad as e:
        hint = " (quoted text: write the value without quotes)" if e.hint == "text" else ""
        over = _over_most(spec, out)
        raise UserError(f"{key}: expected {expected_text(spec, over)}, got {_show(value, text)}{hint}") from None
    return out


# --- attention mechanisms: the names ModelConfig.attention accepts, and each one's own arguments ----------
# Every attention, built-in or a plugin's, is registered by ``robustbench_dgsa.models.register_attention``,
# which declares it here (this layer holds no classes): its name, how many branches a head splits into (the
# width check) and the constructor arguments it takes from ``model.attention_args``, typed and ruled like the
# fields above. The built-in names are known from the start, so a config naming them checks without the models.

@dataclass(frozen=True)
class AttentionDecl:
    """What the config layer knows of a registered attention."""
    name: str
    head_split: int = 1                                       # dim must be divisible by heads * head_split
    args: dict[str, _Spec] = field(default_factory=dict)     # model.attention_args.NAME -> type and rule
    defaults: dict[str, Any] = field(default_factory=dict)   # NAME -> the constructor's default


_ATTENTIONS: dict[str, AttentionDecl] = {n: AttentionDecl(n, 1 if n == "mhsa" else 2) for n in ATTENTION_TYPES}
_SCALARS = (bool, int, float, str)


def arg_spec(hint: Any, where: str) -> _Spec:
    """The spec of one constructor argument from its type hint: bool, int, float or str, optionally
    ``X | None``, ``Literal[...]`` (choices) or ``Annotated[X, Rule(...)]`` (a range)."""
    rule = Rule()
    if typing.get_origin(hint) is typing.Annotated:
        hint, *extra = typing.get_args(hint)
        rule = next((e for e in extra if isinstance(e, Rule)), rule)
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else None
    if typing.get_origin(hint) is typing.Literal:
        choices = typing.get_args(hint)
        if not all(isinstance(c, str) for c in choices):
            raise TypeError(f"{where}: Literal choices must be strings")
        return _Spec(str, optional, 0, dataclasses.replace(rule, choices=tuple(choices)))
    if hint not in _SCALARS:
        raise TypeError(f"{where}: an attention argument must be annotated bool, int, float or str (optionally "
                        f"'| None', Literal[...] or Annotated[..., Rule(...)]), got {hint!r}")
    return _Spec(hint, optional, 0, rule)


def declare_attention(name: str, args: dict[str, _Spec], defaults: dict[str, Any], *, head_split: int = 1) -> None:
    """Make ``name`` a valid ``model.attention`` with the arguments ``args`` (called by the models layer's
    ``register_attention``; the defaults are checked against their specs here)."""
    for key, spec in args.items():
        _checked(spec, f"attention {name!r} argument {key} (default)", defaults[key], False)
    _ATTENTIONS[name] = AttentionDecl(name, int(head_split), dict(args), dict(defaults))


def registered_names(registry: str, wanted: str | None = None) -> tuple[str, ...]:
    """The names of a registry (``"attention"``); a wanted name not among them first loads the plugins
    (entry points, ``DGSA_BENCH_PLUGINS``), which may register it."""
    if registry != "attention":
        raise ValueError(f"unknown registry {registry!r}")
    if wanted is not None and wanted not in _ATTENTIONS:
        plugins.load_plugins()
    return tuple(_ATTENTIONS)


def attention_decl(name: str) -> AttentionDecl:
    """The declaration of a registered attention (UserError naming the valid ones otherwise)."""
    if name not in registered_names("attention", name):
        raise UserError(f"model.attention: expected one of {', '.join(_ATTENTIONS)}, got {name}"
                        + plugins.missing_hint())
    return _ATTENTIONS[name]


def check_attention_arg(attention: str, key: str, value: Any, *, text: bool = True) -> Any:
    """``model.attention_args.KEY`` for attention ``attention``: converted and checked against its declaration."""
    decl = attention_decl(attention)
    spec = decl.args.get(key)
    if spec is None:
        have = ", ".join(decl.args) or "none"
        raise UserError(f"model.attention_args.{key}: attention {attention!r} takes no argument {key!r} "
                        f"(its arguments: {have})")
    return _checked(spec, f"model.attention_args.{key}", value, text)


def _with_attention_args(m: "ModelConfig", name: str, value: Any, text: bool) -> dict[str, Any]:
    """A copy of ``m.attention_args`` with ``value`` applied: a whole table (``name == "attention_args"``) or
    one argument (``"attention_args.KEY"``), each value checked against ``m.attention``'s declaration."""
    out = dict(m.attention_args)
    if name == "attention_args":
        table = check_value("model", "attention_args", value, text=text)
        out.update({k: check_attention_arg(m.attention, k, v, text=text) for k, v in table.items()})
    else:
        key = name.split(".", 1)[1]
        out[key] = check_attention_arg(m.attention, key, value, text=text)
    return out


# --- keys, overrides and files ---------------------------------------------------------------------------

def _unknown_section(sec: str, key: str) -> UserError:
    close = difflib.get_close_matches(sec, SECTIONS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return UserError(f"unknown config section {sec!r} in {key!r} ({hint}valid: {', '.join(SECTIONS)})")


def resolve_key(key: str) -> tuple[str, str]:
    """``"train.lr"`` -> ("train", "lr"); a bare ``"lr"`` works when only one section has it."""
    key = str(key).strip()
    if key.startswith("attention_args."):
        key = "model." + key
    if "." in key:
        sec, name = key.split(".", 1)
        if sec not in _SECTION_CLASSES:
            raise _unknown_section(sec, key)
        if sec == "model" and re.fullmatch(r"attention_args\.[A-Za-z_][A-Za-z0-9_]*", name):
            return sec, name                 # checked against the attention's declaration when applied
        valid = [f.name for f in fields(_SECTION_CLASSES[sec])]
        if name not in valid:
            elsewhere = [s for s, c in _SECTION_CLASSES.items() if any(f.name == name for f in fields(c))]
            close = [f"{s}.{name}" for s in elsewhere] or [f"{sec}.{c}" for c in
                                                          difflib.get_close_matches(name, valid, n=1)]
            hint = f"did you mean {close[0]}? " if close else ""
            raise UserError(f"unknown config key {key!r} ({hint}valid {sec} keys: {', '.join(valid)})")
        return sec, name
    owners = [s for s, cls in _SECTION_CLASSES.items() if any(f.name == key for f in fields(cls))]
    if len(owners) == 1:
        return owners[0], key
    if owners:
        raise UserError(f"config key {key!r} is ambiguous; write it as section.key ("
                        + ", ".join(f"{s}.{key}" for s in owners) + ")")
    every = [f"{s}.{f.name}" for s, cls in _SECTION_CLASSES.items() for f in fields(cls)]
    full = {**{k: k for k in every}, **{k.split(".", 1)[1]: k for k in every}}
    close = difflib.get_close_matches(key, list(full), n=1)
    hint = f"did you mean {full[close[0]]}? " if close else ""
    raise UserError(f"unknown config key {key!r} ({hint}valid keys: {', '.join(every)})")


def apply_overrides(cfg: RunConfig, overrides: dict[str, Any], *, layer: str = "override",
                    text: bool = True) -> RunConfig:
    """Apply ``{"train.lr": "1e-3", "model.dim": 64}`` in place, every value checked; records ``layer``
    as the source of each key. The section may be omitted when the key is unique. ``model.attention_args``
    entries are applied last, against the attention the same overrides choose."""
    resolved = [(resolve_key(key), value) for key, value in overrides.items()]
    resolved.sort(key=lambda kv: kv[0][1].startswith("attention_args"))    # stable: other keys keep their order
    for (sec, name), value in resolved:
        if sec == "model" and name.startswith("attention_args"):
            cfg.model.attention_args = _with_attention_args(cfg.model, name, value, text)
        else:
            setattr(getattr(cfg, sec), name, check_value(sec, name, value, text=text))
        cfg.sources[f"{sec}.{name}"] = layer
    return cfg


def check_overrides(overrides: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
    """Validate overrides without a config: ``{"lr": "1e-3"}`` -> ``{"train.lr": 0.001}``."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        sec, name = resolve_key(key)
        if name.startswith("attention_args."):   # depends on the attention: checked when applied to a config
            out[f"{sec}.{name}"] = value
            continue
        out[f"{sec}.{name}"] = check_value(sec, name, value, text=text)
    return out


def _coerce(cls: type, name: str, value: Any) -> Any:
    """A value for field ``name`` of a config dataclass (CLI text or typed), checked; kept for callers that
    work on one dataclass (``models.registry.apply_model_overrides``)."""
    section = next(s for s, c in _SECTION_CLASSES.items() if c is cls)
    return check_value(section, name, value, text=True)


def parse_set_options(items: list[str] | None) -> dict[str, str]:
    """Parse repeated ``--set key=value`` options (keys are checked here, values when applied)."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UserError(f"expected key=value (e.g. train.lr=1e-3), got {item!r}")
        k, v = item.split("=", 1)
        resolve_key(k)  # an unknown key fails here, before anything runs
        out[k.strip()] = v.strip()
    return out


def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    """Parse a TOML (or, for ``.json``, JSON) file into a dict; any failure is one line naming the file."""
    if not path.exists():
        raise UserError(f"{what} not found: {path}")
    if not path.is_file():
        raise UserError(f"{what} {path} is not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                        f"{e.start})") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{what} {path} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} {path} is not valid TOML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise UserError(f"{what} {path} is nested too deeply to read (a config is a few flat tables)") from None
    if not isinstance(raw, dict):
        raise UserError(f"{what} {path}: expected tables {', '.join(f'[{s}]' for s in SECTIONS)} at the top "
                        f"level, got {type(raw).__name__ if raw is not None else 'null'}")
    return raw


def _flatten_tables(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """``{"train": {"lr": 1e-3}}`` -> ``{"train.lr": 1e-3}``, every key and (typed) value checked."""
    flat: dict[str, Any] = {}
    for sec, body in raw.items():
        if sec not in _SECTION_CLASSES:
            raise UserError(f"{where}: {_unknown_section(sec, sec)}")
        if not isinstance(body, dict):
            raise UserError(f"{where}: [{sec}] must be a table of keys, got {_show(body, False)}")
        for k, v in body.items():
            try:
                s, name = resolve_key(f"{sec}.{k}")
                flat[f"{s}.{name}"] = check_value(s, name, v, text=False)
            except UserError as e:
                raise UserError(f"{where}: {e}") from None
    return flat


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON config file (tables model, train, data) into checked ``section.key`` values."""
    p = Path(path)
    return _flatten_tables(_read_mapping(p, "config file"), f"config file {p}")


# --- presets ---------------------------------------------------------------------------------------------
# presets/<name>.toml: [image.model], [image.train], [image.data], the same under text, and (paper) dataset
# specials under [datasets.<dataset>.<section>]. "paper" is the paper's protocol (docs/METHODS.md, Training
# presets); "small" trains in minutes per model on a 2-core CPU on real data; "tiny" takes seconds (tests, main job).

@dataclass(frozen=True)
class Preset:
    name: str
    by_modality: dict[str, dict[str, Any]]              # modality -> flat checked overrides
    by_dataset: dict[str, dict[str, Any]]               # dataset -> flat checked overrides (paper specials)


_PRESET_CACHE: dict[str, Preset] = {}


def load_preset(name: str) -> Preset:
    """The named preset, read from package data and checked like any config file."""
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name), PRESETS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise UserError(f"unknown preset {name!r} ({hint}valid: {', '.join(PRESETS)})")
    if name not in _PRESET_CACHE:
        path = PRESET_DIR / f"{name}.toml"
        raw = _read_mapping(path, "preset file")
        where = f"preset file {path}"
        unknown = sorted(set(raw) - {*MODALITIES, "datasets"})
        if unknown:
            raise UserError(f"{where}: unknown table [{unknown[0]}] (valid: {', '.join(MODALITIES)}, datasets)")
        by_modality = {m: _flatten_tables(raw.get(m, {}), f"{where} [{m}]") for m in MODALITIES}
        by_dataset = {d: _flatten_tables(body, f"{where} [datasets.{d}]")
                      for d, body in raw.get("datasets", {}).items()}
        _PRESET_CACHE[name] = Preset(name, by_modality, by_dataset)
    return _PRESET_CACHE[name]


def resolve_config(model: ModelConfig, dataset: str, preset: str = "tiny", *,
                   file_overrides: dict[str, Any] | None = None,
                   overrides: dict[str, Any] | None = None) -> RunConfig:
    """Build the full run config for a registered model config on a dataset under a preset."""
    p = load_preset(preset)
    cfg = RunConfig()
    cfg.sources.update({f"{s}.{f.name}": "default" for s in SECTIONS for f in fields(_SECTION_CLASSES[s])})
    registry = {f"model.{f.name}": getattr(model, f.name) for f in fields(ModelConfig)}
    apply_overrides(cfg, registry, layer="registry", text=False)
    apply_overrides(cfg, {"data.dataset": dataset}, layer="argument", text=False)
    if cfg.model.modality not in p.by_modality:
        raise UserError(f"preset {preset!r} has no settings for modality {cfg.model.modality!r}")
    apply_overrides(cfg, p.by_modality[cfg.model.modality], layer="preset", text=False)
    apply_overrides(cfg, p.by_dataset.get(dataset, {}), layer="paper-dataset", text=False)
    if file_overrides:
        apply_overrides(cfg, file_overrides, layer="file", text=False)
    if overrides:
        apply_overrides(cfg, overrides, layer="override")
    return cfg


# --- the one validator -----------------------------------------------------------------------------------
# Every entry point (train, sweep and reproduce plans, the job runner, create_model) checks a config here: the
# per-field rules above plus the rules that tie fields together. Where the data decide a field (classes, image
# size, vocabulary) :func:`with_data_facts` fills it in, with one rule for whether the user chose the image size.

#: layers whose value is the user's choice (an argument, a preset, a config file, an override); a field whose
#: source is "default" / "registry" (or "stored", or none recorded) is left to the code, and to the data
CHOSEN_LAYERS = ("argument", "preset", "paper-dataset", "file", "override")

#: models are refused above this many parameters (estimated before anything is allocated): 4 GiB of float32
#: weights, about 12x the paper's largest model (ViT-B/16, 86 M) and far above what the benchmark trains
MAX_PARAMS = 2**30


def is_chosen(cfg: RunConfig, key: str) -> bool:
    """Whether field ``section.name`` was chosen by the user (a layer of :data:`CHOSEN_LAYERS` set it, as
    ``cfg.sources`` records) rather than left at the model's registry value or a default. The one rule for "did
    the user set image_size": where not, the data decide it (:func:`with_data_facts`). To choose a value on a
    resolved config, use :func:`apply_overrides` (which records the layer), not attribute assignment."""
    return cfg.sources.get(key, "default") in CHOSEN_LAYERS


def with_data_facts(cfg: RunConfig, *, num_classes: int, image_size: int | None = None,
                    vocab_size: int | None = None) -> RunConfig:
    """A copy of ``cfg`` completed with what the data decide: the number of classes, the image size (image
    models, unless the user chose it: :func:`is_chosen`) and the vocabulary size (text models); None leaves a
    field as it is. ``cfg`` is not changed."""
    changes: dict[str, Any] = {"num_classes": int(num_classes)}
    if cfg.model.modality == "image" and image_size is not None and not is_chosen(cfg, "model.image_size"):
        changes["image_size"] = int(image_size)
    if cfg.model.modality == "text" and vocab_size is not None:
        changes["vocab_size"] = int(vocab_size)
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **changes),
                               sources=dict(cfg.sources))


def gelu_hidden(dim: int, ratio: float) -> int:
    """Hidden width of the GELU FFN: round(r·D)."""
    return int(round(ratio * dim))


def swiglu_half(dim: int, ratio: float) -> int:
    """Width of each SwiGLU half (a and b): round(R·D/2)."""
    return int(round(ratio * dim / 2))


def estimate_params(cfg: ModelConfig) -> int:
    """An upper estimate of a model's parameter count from its config alone (nothing allocated): embeddings
    (patches or tokens, positions), per block attention (Q, K, V, O and gate: 5 D²) and FFN (3 R D²), the head."""
    d = int(cfg.dim)
    if cfg.modality == "image":
        tokens = 1 + (int(cfg.image_size) // max(1, int(cfg.patch_size))) ** 2
        embed = int(cfg.patch_size) ** 2 * int(cfg.in_chans) * d + tokens * d
    else:
        embed = (int(cfg.vocab_size) + int(cfg.max_len) + 1) * d
    block = int((5 + 3 * float(cfg.ffn_ratio)) * d * d) + 16 * d
    head = d * int(cfg.head_hidden) + int(cfg.head_hidden) * int(cfg.num_classes) + 4 * d
    return embed + int(cfg.depth) * block + head


def _check_fields(section: str, obj: Any) -> None:
    """Every field of one section against its rule (catches values assigned by hand, after resolution)."""
    for f in fields(_SECTION_CLASSES[section]):
        check_value(section, f.name, getattr(obj, f.name), text=False)


def validate_model(m: ModelConfig) -> None:
    """Refuse a model config that cannot be built, with one line (UserError ``model config 'NAME': ...``):
    a field outside its rule, heads that do not divide the width (twice the heads for differential attention),
    an image size the patch size does not divide, a zero-width SwiGLU half, or too many parameters. (λ_init
    needs no check here: the "layer" schedule lies in [0.2, 0.8) and a fixed value's rule is (0, 1).)"""
    def bad(msg: str) -> None:
        raise UserError(f"model config {m.name!r}: {msg}")

    _check_fields("model", m)
    if m.module is not None:     # an outside factory's model: its own architecture, checked when it is built
        if m.modality != "image":
            bad(f"an outside model (module {m.module}) takes images; modality {m.modality!r} is not supported")
        return
    if m.ffn == "swiglu" and swiglu_half(m.dim, m.ffn_ratio) < 1:
        bad(f"ffn_ratio {m.ffn_ratio:g} is too small for dim {m.dim}")
    decl = attention_decl(m.attention)
    for key, value in m.attention_args.items():
        check_attention_arg(m.attention, key, value, text=False)
    if decl.head_split == 1 and m.dim % m.heads:
        bad(f"dim {m.dim} must be divisible by heads {m.heads}")
    if decl.head_split > 1 and m.dim % (decl.head_split * m.heads):
        bad(f"dim {m.dim} must be divisible by {decl.head_split}*heads = {decl.head_split * m.heads} for "
            f"{m.attention} attention")
    if m.modality == "image" and m.image_size % m.patch_size:
        divisors = [d for d in range(1, m.image_size + 1) if m.image_size % d == 0]
        hint = min(divisors, key=lambda d: (abs(d - m.patch_size), d))
        bad(f"image size {m.image_size} is not divisible by patch size {m.patch_size}; "
            f"choose a patch size that divides it (e.g. {hint})")
    n = estimate_params(m)
    if n > MAX_PARAMS:
        bad(f"about {n:,} parameters, over the limit of {MAX_PARAMS:,} ({MAX_PARAMS * 4 / 2**30:.0f} GiB as "
            f"float32); reduce dim, depth, image_size/patch_size, vocab_size or max_len")


def check_batch_split(batch_size: int, processes: int) -> None:
    """UserError unless the global batch divides evenly among ``processes`` (data-parallel training)."""
    if processes > 1 and batch_size % processes:
        raise UserError(f"the batch size {batch_size} is the global batch of all {processes} processes and must "
                        f"divide evenly among them; choose a multiple of {processes} (the learning rate is not "
                        "rescaled)")


def validate(cfg: RunConfig, *, data_modality: str | None = None, processes: int = 1) -> None:
    """The one check of a run config, before anything runs: every field against its rule, the model's
    consistency (:func:`validate_model`), and where given, that the model takes the dataset's modality
    (``data_modality``) and that the global batch divides among ``processes``. Raises a one-line UserError; a
    model error names the run (``vit on cifar10: model config 'vit': ...``).

    An image size left to the data (:func:`is_chosen`) is not known yet: any multiple of the patch size stands
    in for it here, and the model built on the data's size checks it again."""
    for section in ("train", "data"):
        _check_fields(section, getattr(cfg, section))
    m = cfg.model
    if data_modality is not None and data_modality != m.modality:
        raise UserError(f"model {m.name!r} takes {m.modality} input but dataset {cfg.data.dataset!r} is "
                        f"{data_modality}")
    if m.modality == "image" and not is_chosen(cfg, "model.image_size"):
        m = dataclasses.replace(m, image_size=m.patch_size)
    try:
        validate_model(m)
    except UserError as e:
        raise UserError(f"{m.name} on {cfg.data.dataset}: {e}") from None
    check_batch_split(cfg.train.batch_size, processes)
