"""One config system: dataclasses, named presets, overrides from the CLI (``key=value``) and from a file.

A run is fully described by a :class:`RunConfig` (model + train + data). Its canonical JSON hashes to the
``config_hash`` recorded in every results row and checkpoint.

Resolution order (later wins): registry model config -> preset -> dataset adjustments (paper Table 5/6
specials) -> config file (TOML/JSON with [model], [train], [data] tables) -> ``--set key=value`` overrides.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from dataclasses import dataclass, field, fields, asdict
from pathlib import Path
from typing import Any

from robustbench_dgsa.util.errors import UserError

PRESETS = ("tiny", "small", "paper")


@dataclass
class ModelConfig:
    """Architecture of one model. Registered named configs live in ``robustbench_dgsa.models.registry``."""
    name: str = "vit"                 # registry name it was built from
    modality: str = "image"           # "image" | "text"
    attention: str = "mhsa"           # "mhsa" | "diff" | "dgsa"
    dim: int = 256
    depth: int = 8
    heads: int = 8
    dropout: float = 0.05
    ffn: str = "gelu"                 # "gelu" (Linear D->ffn_ratio*D, GELU) | "swiglu"
    ffn_ratio: float = 4.0            # GELU hidden = ratio*D; SwiGLU first Linear = ratio*D (the paper's "proj.")
    ffn_dropout2: bool = False        # the "dropout x2" variant (paper Table 1)
    head_hidden: int = 128            # classifier: Linear(D->128) -> GELU -> dropout -> Linear(128->C)
    num_classes: int = 10
    # vision geometry
    image_size: int = 32
    patch_size: int = 4
    in_chans: int = 3
    # text
    vocab_size: int = 30000
    max_len: int = 256                # tokens, CLS excluded
    # differential / gated attention options (SPEC 1)
    lambda_init: str = "layer"        # "layer": 0.8 - 0.6 exp(-0.3 l) | "fixed": lambda_init_value
    lambda_init_value: float = 0.8
    gate_bias_init: str = "default"   # "default" (PyTorch Linear init) | "diff" (b = logit(1/(1+lambda_init)))
    q_residual: bool = False          # DGSA: Y = Q + O W_o


@dataclass
class TrainConfig:
    epochs: int = 100
    batch_size: int = 128
    lr: float = 3e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    schedule: str = "cosine"          # "cosine" (per step, to 0) | "linear" (warm-up then linear decay)
    warmup_steps: int = 0
    grad_clip: float | None = None
    decay_bias_and_norm: bool = True  # text presets exclude biases and norm weights from weight decay
    amp: str = "auto"                 # "auto" (bf16 on CUDA) | "bf16" | "off"
    eval_batch_size: int = 256
    device: str = "auto"              # "auto" | "cpu" | "cuda" | "cuda:N"


@dataclass
class DataConfig:
    dataset: str = "synthetic-vision"
    data_root: str | None = None
    download: bool = False
    max_train: int | None = None      # subsample the training split (stratified, seeded); None = all
    max_test: int | None = None       # subsample the test split (first N in official order); None = all
    val_fraction: float = 0.2         # stratified train/validation split of the training fold
    min_freq: int = 2                 # text vocabulary
    max_vocab: int = 60000
    augment: bool = False             # vision: random crop (pad 4) + horizontal flip


@dataclass
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        return cls(model=_build(ModelConfig, d.get("model", {})),
                   train=_build(TrainConfig, d.get("train", {})),
                   data=_build(DataConfig, d.get("data", {})))

    def hash(self) -> str:
        """Identity of the experiment: where it runs (data folder, device) does not change it,
        so a run moved to another machine or folder still resumes and groups with its peers."""
        d = self.to_dict()
        for section, key in _WHERE_IT_RUNS:
            d[section].pop(key, None)
        return config_hash(d)


_WHERE_IT_RUNS = (("data", "data_root"), ("data", "download"), ("train", "device"))


def config_hash(d: dict[str, Any]) -> str:
    """Stable 12-hex-digit hash of a config dict (canonical JSON)."""
    blob = json.dumps(d, sort_keys=True, default=list, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _build(cls, d: dict[str, Any]):
    known = {f.name for f in fields(cls)}
    unknown = set(d) - known
    if unknown:
        raise UserError(f"unknown {cls.__name__} field(s): {', '.join(sorted(unknown))} "
                        f"(valid: {', '.join(sorted(known))})")
    obj = cls()
    for k, v in d.items():
        setattr(obj, k, _coerce(cls, k, v))
    return obj


def _annotation(cls, name: str) -> str:
    """The field's annotation as written (a string under ``from __future__ import annotations``)."""
    return str(next(f.type for f in fields(cls) if f.name == name))


def _coerce(cls, name: str, value: Any) -> Any:
    """Coerce a value (possibly a CLI string) to the type of the field's default."""
    default = getattr(cls(), name)
    if isinstance(value, str) and not isinstance(default, str):
        text = value.strip()
        if text.lower() in ("none", "null"):
            return None
        if default is None and _annotation(cls, name).startswith("str"):
            return value  # optional text fields (paths) stay strings, even "123" or "[x]"
        if isinstance(default, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise UserError(f"{cls.__name__}.{name} expects true/false, got {value!r}")
        if isinstance(default, tuple):
            return tuple(float(p) for p in text.strip("()[]").split(","))
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            expected = _annotation(cls, name) if default is None else type(default).__name__
            raise UserError(f"{cls.__name__}.{name}: cannot read {value!r} as {expected}") from None
    if isinstance(default, tuple) and isinstance(value, list):
        return tuple(value)
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def apply_overrides(cfg: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Apply ``{"train.lr": "1e-3", "model.dim": 64}``; the section may be omitted when the key is unique."""
    sections = {"model": cfg.model, "train": cfg.train, "data": cfg.data}
    for key, value in overrides.items():
        if "." in key:
            sec, name = key.split(".", 1)
            if sec not in sections:
                raise UserError(f"unknown config section {sec!r} in {key!r} (valid: model, train, data)")
        else:
            owners = [s for s, obj in sections.items() if name_in(obj, key)]
            if len(owners) != 1:
                raise UserError(f"config key {key!r} is {'ambiguous' if owners else 'unknown'}; "
                                "write it as section.key (model., train., data.)")
            sec, name = owners[0], key
        obj = sections[sec]
        if not name_in(obj, name):
            valid = ", ".join(f.name for f in fields(obj))
            raise UserError(f"unknown config key {sec}.{name} (valid {sec} keys: {valid})")
        setattr(obj, name, _coerce(type(obj), name, value))
    return cfg


def name_in(obj, name: str) -> bool:
    return any(f.name == name for f in fields(obj))


def parse_set_options(items: list[str] | None) -> dict[str, str]:
    """Parse repeated ``--set key=value`` options."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UserError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON config file into flat ``section.key`` overrides."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config file not found: {p}")
    try:
        if p.suffix == ".json":
            raw = json.loads(p.read_text())
        else:
            raw = tomllib.loads(p.read_text())
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"cannot parse config file {p}: {e}") from None
    flat: dict[str, Any] = {}
    for sec, body in raw.items():
        if not isinstance(body, dict):
            raise UserError(f"config file {p}: top level must be tables [model], [train], [data]; got {sec!r}")
        for k, v in body.items():
            flat[f"{sec}.{k}"] = v
    return flat


# --- presets -----------------------------------------------------------------------------------------
# Each preset gives model overrides and train/data settings per modality. "paper" is SPEC 3 exactly;
# "small" trains in minutes per model on a 2-core CPU on real data; "tiny" takes seconds (tests, main job).

_PRESETS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "paper": {
        "image": {"model": {},
                  "train": dict(epochs=100, batch_size=128, lr=3e-4, weight_decay=0.01, betas=(0.9, 0.999),
                                schedule="cosine", warmup_steps=0, grad_clip=None, decay_bias_and_norm=True),
                  "data": dict(val_fraction=0.1, augment=False)},
        "text": {"model": dict(dim=256, depth=6, heads=8, dropout=0.1, max_len=256),
                 "train": dict(epochs=10, batch_size=32, lr=3e-4, weight_decay=0.01, betas=(0.9, 0.98),
                               schedule="linear", warmup_steps=1000, grad_clip=1.0, decay_bias_and_norm=False),
                 "data": dict(val_fraction=0.2, min_freq=2, max_vocab=60000)},
    },
    "small": {
        "image": {"model": dict(dim=96, depth=4, heads=4),
                  "train": dict(epochs=4, batch_size=128, lr=1e-3, schedule="cosine", warmup_steps=50),
                  "data": dict(max_train=10000, max_test=2000, val_fraction=0.1)},
        "text": {"model": dict(dim=96, depth=3, heads=4, dropout=0.1, max_len=128),
                 "train": dict(epochs=4, batch_size=32, lr=1e-3, betas=(0.9, 0.98), schedule="linear",
                               warmup_steps=100, grad_clip=1.0, decay_bias_and_norm=False),
                 "data": dict(max_train=8000, max_test=2000, val_fraction=0.2, max_vocab=20000)},
    },
    "tiny": {
        "image": {"model": dict(dim=32, depth=2, heads=2, head_hidden=32),
                  "train": dict(epochs=3, batch_size=64, lr=2e-3, schedule="cosine", warmup_steps=10),
                  "data": dict(max_train=1200, max_test=300, val_fraction=0.1)},
        "text": {"model": dict(dim=32, depth=2, heads=2, head_hidden=32, dropout=0.1, max_len=48),
                 "train": dict(epochs=3, batch_size=32, lr=2e-3, betas=(0.9, 0.98), schedule="linear",
                               warmup_steps=10, grad_clip=1.0, decay_bias_and_norm=False),
                 "data": dict(max_train=1200, max_test=300, val_fraction=0.2, max_vocab=5000)},
    },
}

# Paper Table 5/6 specials, applied with the paper preset only.
_DATASET_PAPER_SPECIALS: dict[str, dict[str, Any]] = {
    "rotten-tomatoes": {"model.depth": 4, "train.lr": 5e-4, "train.warmup_steps": 500},
    "mnli": {"model.dim": 512, "model.vocab_size": 30000, "data.max_vocab": 30000, "train.epochs": 5,
             "train.batch_size": 128, "train.warmup_steps": 4000},
}


def resolve_config(model: ModelConfig, dataset: str, preset: str = "tiny", *,
                   file_overrides: dict[str, Any] | None = None,
                   overrides: dict[str, Any] | None = None) -> RunConfig:
    """Build the full run config for a registered model config on a dataset under a preset."""
    if preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r} (valid: {', '.join(PRESETS)})")
    cfg = RunConfig(model=dataclasses.replace(model), train=TrainConfig(), data=DataConfig(dataset=dataset))
    p = _PRESETS[preset][model.modality]
    flat = {f"model.{k}": v for k, v in p["model"].items()}
    flat.update({f"train.{k}": v for k, v in p["train"].items()})
    flat.update({f"data.{k}": v for k, v in p["data"].items()})
    if preset == "paper":
        flat.update(_DATASET_PAPER_SPECIALS.get(dataset, {}))
    apply_overrides(cfg, flat)
    if file_overrides:
        apply_overrides(cfg, file_overrides)
    if overrides:
        apply_overrides(cfg, overrides)
    return cfg
