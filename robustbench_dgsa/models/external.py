"""Models from outside the suite: timm models, any importable factory, safetensors weights, and the typed
:class:`Preprocess` record that turns uint8 images into such a model's input.

* :func:`load_timm_model` — ``timm.create_model(name, pretrained=False, ...)`` (timm is optional), weights
  from a safetensors file; without weights only when ``random_init=True`` (recorded as such).
* :func:`load_module_model` — ``"pkg.mod:factory"``: the factory is imported and called (it may load its own
  weights); ``weights`` (safetensors) are loaded on top when given.
* :func:`weights_sha256` / :func:`count_parameters` — how a model is identified in the results store.

Weights are only ever read with safetensors (never unpickled).
"""
from __future__ import annotations

import hashlib
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.jsonio import to_jsonable


@dataclass(frozen=True)
class Preprocess:
    """How uint8 images in [0, 255] become a model's input: scale to [0, 1], resize (bilinear, antialiased) to
    ``image_size`` × ``image_size`` when given, then ``(x - mean) / std`` per channel. The default is the
    identity on [0, 1] (a model that normalises itself)."""
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    image_size: int | None = None
    in_chans: int = 3

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or len(self.mean) not in (1, 3):
            raise UserError(f"preprocess mean/std need 1 or 3 values each, got {len(self.mean)}/{len(self.std)}")
        if any(float(s) <= 0 for s in self.std):
            raise UserError(f"preprocess std must be positive, got {self.std}")
        if self.image_size is not None and int(self.image_size) < 1:
            raise UserError(f"preprocess image_size must be positive, got {self.image_size}")

    def to_record(self) -> dict[str, Any]:
        """The ``preprocess`` dict :mod:`robustbench_dgsa.engine.predict` works with."""
        return {"modality": "image", "mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std],
                "image_size": None if self.image_size is None else int(self.image_size),
                "in_chans": int(self.in_chans)}

    @classmethod
    def from_timm(cls, model: nn.Module) -> "Preprocess":
        """mean/std from timm's data config of ``model``; the input size the model was built for (a ViT's
        ``patch_embed.img_size``, which timm's pretrained config does not update when ``img_size`` is changed),
        else the data config's. Resize only: no crop (CIFAR-sized images are not cropped)."""
        timm = _import_timm()
        cfg = timm.data.resolve_model_data_config(model)
        size = getattr(getattr(model, "patch_embed", None), "img_size", None)
        if isinstance(size, (tuple, list)):
            size = size[0] if len(set(size)) == 1 else None
        if size is None:
            size = int(cfg["input_size"][-1])
        return cls(tuple(float(v) for v in cfg["mean"]), tuple(float(v) for v in cfg["std"]), int(size),
                   int(cfg["input_size"][0]))


@dataclass
class ExternalModel:
    """A loaded outside model and how it was made (for provenance and the report)."""
    model: nn.Module
    name: str
    source: str                        # "timm:<name>" or "module:<pkg.mod:factory>"
    weights: str = ""                  # safetensors file loaded ("" = none)
    random_init: bool = False          # True: untrained, random weights
    preprocess: Preprocess | None = None
    info: dict[str, Any] = field(default_factory=dict)
    tokenizer: Any = None              # text models: texts -> token ids, or (ids, padding mask)


def _import_timm():
    try:
        import timm
        import timm.data  # noqa: F401 - resolve_model_data_config
    except ImportError:
        raise UserError("timm is not installed (pip install timm); it is needed for timm models") from None
    return timm


def count_parameters(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def weights_sha256(model: nn.Module) -> str:
    """SHA-256 over the state dict (names, dtypes, shapes and bytes, in name order): equal weights, equal hash."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        if not isinstance(t, torch.Tensor):
            continue
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def load_safetensors_weights(model: nn.Module, path: str | Path) -> None:
    """Load a safetensors state dict into ``model`` (strict: every key must match)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    p = Path(path)
    if not p.is_file():
        raise UserError(f"weights file not found: {p}")
    try:
        state = load_file(str(p))
    except (SafetensorError, OSError, ValueError) as e:
        raise UserError(f"cannot read weights {p}: not a safetensors file ({type(e).__name__}); convert a "
                        "pickled checkpoint with safetensors.torch.save_file(model.state_dict(), ...)") from None
    missing, unexpected = _key_mismatch(model.state_dict(), state)
    if missing or unexpected:
        raise UserError(f"weights {p.name} do not fit the model: {len(missing)} missing key(s)"
                        f"{' e.g. ' + missing[0] if missing else ''}, {len(unexpected)} unexpected"
                        f"{' e.g. ' + unexpected[0] if unexpected else ''}")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise UserError(f"weights {p.name} do not fit the model: {first[1].strip() if len(first) > 1 else first[0]}"
                        ) from None


def _key_mismatch(expected: dict[str, Any], got: dict[str, Any]) -> tuple[list[str], list[str]]:
    return sorted(set(expected) - set(got)), sorted(set(got) - set(expected))


def load_timm_model(name: str, *, weights: str | Path | None = None, num_classes: int | None = None,
                    random_init: bool = False, **kwargs: Any) -> ExternalModel:
    """A timm model by name (never downloading weights): ``weights`` (safetensors) or, only with
    ``random_init=True``, random initialisation. ``kwargs`` go to ``timm.create_model`` (img_size, depth, ...)."""
    timm = _import_timm()
    if weights is None and not random_init:
        raise UserError(f"no weights for timm model {name!r}: give a safetensors file, or ask for an untrained "
                        "model explicitly (random_init=True / --random-init)")
    if num_classes is not None:
        kwargs["num_classes"] = int(num_classes)
    try:
        model = timm.create_model(name, pretrained=False, **kwargs)
    except RuntimeError as e:  # timm: "Unknown model (...)"
        raise UserError(f"timm cannot build {name!r}: {e}") from None
    except TypeError as e:
        raise UserError(f"timm model {name!r}: bad option ({e})") from None
    if weights is not None:
        load_safetensors_weights(model, weights)
    model.eval()
    label = name if weights is not None else f"{name}-random-init"  # an untrained model says so in its name
    return ExternalModel(model, label, f"timm:{name}", str(weights or ""), weights is None,
                         Preprocess.from_timm(model), {"timm_kwargs": to_jsonable(kwargs, fallback=repr)})


_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_module_model(spec: str, *, weights: str | Path | None = None, args: Sequence[Any] = (),
                      **kwargs: Any) -> ExternalModel:
    """``"pkg.mod:factory"`` → ``factory(*args, **kwargs)``, an ``nn.Module``; ``weights`` (safetensors) loaded
    on top when given (otherwise the factory's own weights are used, recorded as such)."""
    if not isinstance(spec, str) or not _SPEC.match(spec):
        raise UserError(f"module model must be written 'package.module:factory', got {spec!r}")
    mod_name, fn_name = spec.split(":")
    try:
        module = importlib.import_module(mod_name)
    except ImportError as e:
        raise UserError(f"cannot import {mod_name!r} for {spec}: {e}") from None
    factory = getattr(module, fn_name, None)
    if not callable(factory):
        raise UserError(f"{mod_name} has no callable {fn_name!r}")
    model = factory(*args, **kwargs)
    if not isinstance(model, nn.Module):
        raise UserError(f"{spec} returned {type(model).__name__}, not a torch.nn.Module")
    if weights is not None:
        load_safetensors_weights(model, weights)
    model.eval()
    return ExternalModel(model, fn_name, f"module:{spec}", str(weights or ""), False, None,
                         {"factory_kwargs": to_jsonable(kwargs, fallback=repr)})
