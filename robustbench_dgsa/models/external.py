"""Models from outside the suite: timm models, any importable factory, safetensors weights, and the typed
:class:`Preprocess` record that turns uint8 images into such a model's input.

* :func:`load_timm_model` — ``timm.create_model(name, pretrained=False, ...)`` (timm is optional), weights
  from a file; without weights only when ``random_init=True``, drawn from ``seed`` (both recorded, and put
  into the model's name, so two different random models never share a name).
* :func:`load_module_model` — ``"pkg.mod:factory"``: the factory is imported (from the current folder too, as
  ``python -m`` does) and called (it may load its own weights); ``weights`` are loaded on top when given.
* :func:`load_weights` — a state dict from safetensors, or from a ``.pt`` / ``.pth`` / ``.bin`` file through
  ``torch.load(weights_only=True)`` (PyTorch's restricted unpickler: tensors and plain containers only, never
  arbitrary objects); a file needing more than that is refused, and so are NaN / inf weights and integer tensors
  for floating parameters (:func:`~robustbench_dgsa.models.checkpoint.weights_problem`).
* :func:`input_preprocess` — the one input convention: raw images in [0, 1] at the data's own size
  (RobustBench's), or timm's normalisation and input size when asked for (``timm_norm``).
* :func:`weights_sha256` / :func:`count_parameters` — how a model is identified in the results store.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from robustbench_dgsa.models.checkpoint import weights_problem
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.jsonio import to_jsonable
from robustbench_dgsa.util.progress import log

# How images reach an outside model: "raw" = floats in [0, 1] at the data's own size (RobustBench's convention,
# the default on every route); "timm" = timm's mean/std and input size for the model (opt-in: timm_norm=True).
INPUT_CONVENTIONS = {"raw": "raw [0, 1] input (RobustBench's convention)",
                     "timm": "timm's normalisation (mean/std and input size of the model's data config)"}
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


@dataclass(frozen=True)
class Preprocess:
    """How uint8 images in [0, 255] become a model's input: scale to [0, 1], resize (bilinear, antialiased) to
    ``image_size`` × ``image_size`` when given, then ``(x - mean) / std`` per channel. The default is the
    identity on [0, 1] (a model that normalises itself)."""
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    image_size: int | None = None
    in_chans: int = 3
    crop_pct: float | None = None      # timm's data config: resize to size / crop_pct, centre crop (None: no crop)
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or len(self.mean) not in (1, 3):
            raise UserError(f"preprocess mean/std need 1 or 3 values each, got {len(self.mean)}/{len(self.std)}")
        if any(float(s) <= 0 for s in self.std):
            raise UserError(f"preprocess std must be positive, got {self.std}")
        if self.image_size is not None and int(self.image_size) < 1:
            raise UserError(f"preprocess image_size must be positive, got {self.image_size}")
        if self.crop_pct is not None and (self.image_size is None or not 0 < float(self.crop_pct) <= 4):
            raise UserError(f"preprocess crop_pct needs an image_size and a value in (0, 4], got {self.crop_pct}")
        if self.interpolation not in ("bilinear", "bicubic", "nearest"):
            raise UserError(f"preprocess interpolation must be bilinear, bicubic or nearest, got "
                            f"{self.interpolation!r}")

    def to_record(self) -> dict[str, Any]:
        """The ``preprocess`` dict :mod:`robustbench_dgsa.engine.predict` works with."""
        rec = {"modality": "image", "mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std],
               "image_size": None if self.image_size is None else int(self.image_size),
               "in_chans": int(self.in_chans)}
        if self.crop_pct is not None:  # only then: records without a crop stay as they were
            rec.update(crop_pct=float(self.crop_pct), interpolation=str(self.interpolation))
        return rec

    @classmethod
    def from_timm(cls, model: nn.Module) -> "Preprocess":
        """timm's whole data config of ``model``: mean/std, crop_pct and interpolation (timm's evaluation transform:
        resize to size / crop_pct, centre crop), and the input size the model was built for (a ViT's
        ``patch_embed.img_size``, which timm's pretrained config does not update when ``img_size`` is changed),
        else the data config's."""
        timm = _import_timm()
        cfg = timm.data.resolve_model_data_config(model)
        size = getattr(getattr(model, "patch_embed", None), "img_size", None)
        if isinstance(size, (tuple, list)):
            size = size[0] if len(set(size)) == 1 else None
        if size is None:
            size = int(cfg["input_size"][-1])
        interp = str(cfg.get("interpolation") or "bilinear")
        return cls(tuple(float(v) for v in cfg["mean"]), tuple(float(v) for v in cfg["std"]), int(size),
                   int(cfg["input_size"][0]), float(cfg.get("crop_pct") or 1.0),
                   interp if interp in ("bilinear", "bicubic", "nearest") else "bicubic")


@dataclass
class ExternalModel:
    """A loaded outside model and how it was made (for provenance and the report)."""
    model: nn.Module
    name: str
    source: str                        # "timm:<name>" or "module:<pkg.mod:factory>"
    weights: str = ""                  # safetensors file loaded ("" = none)
    random_init: bool = False          # True: untrained, random weights (drawn from ``init_seed``)
    preprocess: Preprocess | None = None   # None: raw [0, 1] input (see :func:`input_preprocess`)
    info: dict[str, Any] = field(default_factory=dict)
    init_seed: int | None = None       # the seed of a random initialisation
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


def input_preprocess(model: nn.Module, timm_norm: bool = False) -> Preprocess | None:
    """The input convention, one for every route: None = raw [0, 1] images at the data's own size (RobustBench's);
    ``timm_norm=True``: timm's mean/std and the model's input size (:meth:`Preprocess.from_timm`)."""
    if not isinstance(timm_norm, bool):
        raise UserError(f"timm_norm must be True or False, got {timm_norm!r}")
    return Preprocess.from_timm(model) if timm_norm else None


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """A state dict from ``path``: safetensors, or a pickled ``.pt`` / ``.pth`` / ``.bin`` / ``.ckpt`` through
    ``torch.load(weights_only=True)`` only. A pickle whose top level holds the weights under ``state_dict`` /
    ``model`` / ``model_state_dict`` (and nothing but tensors there) is accepted; anything that needs more
    than tensors and plain containers is refused, never unpickled in full."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"weights file not found: {p}")
    if p.suffix.lower() in PICKLE_SUFFIXES:
        return _read_restricted_pickle(p)
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        return load_file(str(p))
    except (SafetensorError, OSError, ValueError) as e:
        raise UserError(f"cannot read weights {p}: not a safetensors file ({type(e).__name__}); a PyTorch "
                        f"state dict must end in {'/'.join(PICKLE_SUFFIXES)}") from None


def _read_restricted_pickle(p: Path) -> dict[str, torch.Tensor]:
    import pickle
    log(f"note: reading {p.name} with torch.load(weights_only=True): PyTorch's restricted loader (tensors and "
        "plain containers only; nothing else is unpickled)")
    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"refused weights {p.name}: it needs more than tensors to load (torch.load with "
                        f"weights_only=True failed: {first[:160]}); save model.state_dict() instead") from None
    if isinstance(obj, dict) and not _all_tensors(obj):
        inner = [k for k in ("state_dict", "model", "model_state_dict") if isinstance(obj.get(k), dict)]
        obj = obj[inner[0]] if len(inner) == 1 else obj
    if not isinstance(obj, dict) or not obj or not _all_tensors(obj):
        raise UserError(f"refused weights {p.name}: not a state dict of tensors (name -> tensor); save "
                        "model.state_dict() instead")
    return dict(obj)


def _all_tensors(d: dict) -> bool:
    return all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in d.items())


def load_weights(model: nn.Module, path: str | Path) -> None:
    """Load a state dict file (:func:`read_state_dict`) into ``model`` (strict: every key must match)."""
    p = Path(path)
    state = read_state_dict(p)
    missing, unexpected = _key_mismatch(model.state_dict(), state)
    if missing or unexpected:
        raise UserError(f"weights {p.name} do not fit the model: {len(missing)} missing key(s)"
                        f"{' e.g. ' + missing[0] if missing else ''}, {len(unexpected)} unexpected"
                        f"{' e.g. ' + unexpected[0] if unexpected else ''}")
    problem = weights_problem(state, model.state_dict())
    if problem:
        raise UserError(f"weights {p.name}: {problem}; the weights are broken, nothing was loaded")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise UserError(f"weights {p.name} do not fit the model: {first[1].strip() if len(first) > 1 else first[0]}"
                        ) from None


load_safetensors_weights = load_weights  # the earlier name


def num_classes_in_weights(path: str | Path) -> int | None:
    """The class count of a timm classifier's weights (rows of ``head.weight`` / ``fc.weight`` /
    ``classifier.weight``), None when the file names no such head."""
    state = read_state_dict(path)
    for key in ("head.weight", "head.fc.weight", "fc.weight", "classifier.weight", "last_linear.weight"):
        t = state.get(key)
        if isinstance(t, torch.Tensor) and t.ndim == 2:
            return int(t.shape[0])
    return None


def _key_mismatch(expected: dict[str, Any], got: dict[str, Any]) -> tuple[list[str], list[str]]:
    return sorted(set(expected) - set(got)), sorted(set(got) - set(expected))


def load_timm_model(name: str, *, weights: str | Path | None = None, num_classes: int | None = None,
                    random_init: bool = False, seed: int = 0, timm_norm: bool = False,
                    **kwargs: Any) -> ExternalModel:
    """A timm model by name (never downloading weights): ``weights`` (safetensors, or a ``.pth`` read by
    :func:`read_state_dict`) or, only with ``random_init=True``, random initialisation drawn from ``seed`` (torch's
    global generator is left as it was). ``timm_norm``: feed it timm's normalisation instead of raw [0, 1]
    input (:func:`input_preprocess`). ``kwargs`` go to ``timm.create_model`` (img_size, depth, ...)."""
    timm = _import_timm()
    if weights is None and not random_init:
        raise UserError(f"no weights for timm model {name!r}: give a weights file, or ask for an untrained "
                        "model explicitly (random_init=True)", options="random_init")
    if weights is not None and random_init:
        raise UserError("give weights or ask for a random initialisation, not both")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    if num_classes is not None:
        kwargs["num_classes"] = int(num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        try:
            model = timm.create_model(name, pretrained=False, **kwargs)
        except RuntimeError as e:  # timm: "Unknown model (...)"
            raise UserError(f"timm cannot build {name!r}: {e}") from None
        except TypeError as e:
            raise UserError(f"timm model {name!r}: bad option ({e})") from None
    if weights is not None:
        load_weights(model, weights)
    model.eval()
    # an untrained model says so, and which draw it is, in its name
    label = name if weights is not None else f"{name}-random-init-s{int(seed)}"
    return ExternalModel(model, label, f"timm:{name}", str(weights or ""), weights is None,
                         input_preprocess(model, timm_norm), {"timm_kwargs": to_jsonable(kwargs, fallback=repr)},
                         int(seed) if weights is None else None)


_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_module_model(spec: str, *, weights: str | Path | None = None, args: Sequence[Any] = (),
                      timm_norm: bool = False, **kwargs: Any) -> ExternalModel:
    """``"pkg.mod:factory"`` → ``factory(*args, **kwargs)``, an ``nn.Module``; ``weights`` loaded on top when
    given (otherwise the factory's own weights are used, recorded as such). The module is imported with the
    current folder on the import path, as ``python -m`` has it. ``timm_norm``: see :func:`input_preprocess`."""
    if not isinstance(spec, str) or not _SPEC.match(spec):
        raise UserError(f"module model must be written 'package.module:factory', got {spec!r}")
    mod_name, fn_name = spec.split(":")
    with _cwd_on_path():
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise UserError(f"cannot import {mod_name!r} for {spec} (looked in the current folder too): {e}"
                            ) from None
        factory = getattr(module, fn_name, None)
        if not callable(factory):
            raise UserError(f"{mod_name} has no callable {fn_name!r}")
        try:
            model = factory(*args, **kwargs)
        except TypeError as e:  # not a model factory (json:loads), or arguments it does not take
            raise UserError(f"calling {spec}({_call_text(args, kwargs)}) failed: {' '.join(str(e).split())}; "
                            f"give a factory that builds a torch.nn.Module from keyword arguments") from None
    if not isinstance(model, nn.Module):
        raise UserError(f"{spec} returned {type(model).__name__}, not a torch.nn.Module")
    if weights is not None:
        load_weights(model, weights)
    model.eval()
    return ExternalModel(model, fn_name, f"module:{spec}", str(weights or ""), False,
                         input_preprocess(model, timm_norm), {"factory_kwargs": to_jsonable(kwargs, fallback=repr)})


def _call_text(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    return ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])[:200]


@contextlib.contextmanager
def _cwd_on_path():
    """The current folder first on ``sys.path`` while importing (``python -m`` puts it there; a console script
    does not), taken out again afterwards."""
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)
