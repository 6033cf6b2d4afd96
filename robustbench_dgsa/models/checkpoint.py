"""Checkpoints: ONE safetensors file per model, self-describing.

The safetensors header metadata (strings only) holds:

* ``format_version``: ``"1"``
* ``model_config``: the :class:`~robustbench_dgsa.config.ModelConfig` as JSON, enough to rebuild the model
* ``meta``: JSON chosen by the caller (run_config, preprocess, vocab, classes, dataset, seed, epoch, metrics, ...)
* ``plugins`` (only when plugins were loaded): JSON list of their records (module, distribution, version, source
  hash; ``util.plugins``), so a reader without the plugin a model needs is told which to install

``load_checkpoint`` rebuilds the model from the file alone and loads the weights strictly (names, shapes, and
:func:`weights_problem`: no integer tensor for a floating parameter, no NaN / inf weights); every failure is a
:class:`~robustbench_dgsa.util.errors.CheckpointError` with one clear line. Writes are atomic (temporary file, rename).
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from robustbench_dgsa.util import atomic
from robustbench_dgsa.config import ModelConfig, registered_names
from robustbench_dgsa.models.registry import create_model
from robustbench_dgsa.util.errors import CheckpointError, UserError
from robustbench_dgsa.util.jsonio import to_jsonable
from robustbench_dgsa.util.plugins import missing_hint, plugin_records

FORMAT_VERSION = "1"
_KEYS = ("format_version", "model_config", "meta")


def save_checkpoint(path: str | os.PathLike, model: nn.Module, meta: dict[str, Any] | None = None) -> Path:
    """Write ``model``'s weights, its ModelConfig and ``meta`` to one safetensors file at ``path``."""

    model = getattr(model, "_orig_mod", model)          # a torch.compile'd model: save the original's weights
    cfg = getattr(model, "config", None)
    if not isinstance(cfg, ModelConfig):
        raise TypeError("save_checkpoint needs a model built by robustbench_dgsa.models (with a .config)")
    path = Path(path)
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in model.state_dict().items()}
    metadata = {
        "format_version": FORMAT_VERSION,
        "model_config": json.dumps(dataclasses.asdict(cfg), sort_keys=True),
        "meta": json.dumps(to_jsonable(meta or {})),
    }
    if plugin_records():      # the plugins loaded when it was written: a reader without them is told what to install
        metadata["plugins"] = json.dumps(plugin_records())
    with atomic.atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
    return path


def _open_header(path: Path) -> dict[str, str]:
    """The safetensors header metadata of ``path`` (CheckpointError if unreadable)."""

    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint path is not a file: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata()
    except Exception as e:  # safetensors raises its own error types for bad headers
        raise CheckpointError(f"not a safetensors checkpoint, or the file is corrupt: {path} "
                              f"({_one_line(e)})") from None
    return metadata or {}


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:200] if text else type(e).__name__


def read_checkpoint_meta(path: str | os.PathLike) -> tuple[ModelConfig, dict[str, Any]]:
    """(ModelConfig, meta) from the file's header, without loading any weights."""
    path = Path(path)
    metadata = _open_header(path)
    missing = [k for k in _KEYS if k not in metadata]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks metadata {', '.join(missing)} "
                              "(not written by dgsa-bench's save_checkpoint?)")
    if metadata["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format_version {metadata['format_version']!r}; "
                              f"this version of dgsa-bench reads {FORMAT_VERSION!r}")
    try:
        cfg_dict = json.loads(metadata["model_config"])
        meta = json.loads(metadata["meta"])
    except json.JSONDecodeError as e:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata JSON ({_one_line(e)})") from None
    except RecursionError:
        raise CheckpointError(f"checkpoint {path} has metadata JSON nested too deeply to read") from None
    if not isinstance(cfg_dict, dict) or not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path}: model_config and meta must be JSON objects")
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(cfg_dict) - known)
    if unknown:
        raise CheckpointError(f"checkpoint {path}: model_config has fields this version does not know: "
                              f"{', '.join(unknown)}")
    cfg = ModelConfig(**cfg_dict)
    if cfg.attention not in registered_names("attention", cfg.attention):
        raise CheckpointError(f"checkpoint {path} holds a model with attention {cfg.attention!r}, which no loaded "
                              "plugin registers" + missing_hint(_stored_plugins(metadata)))
    return cfg, meta


def _stored_plugins(metadata: dict[str, str]) -> list[dict[str, Any]]:
    """The plugin records a checkpoint was written with (header key ``plugins``; none in older files)."""
    try:
        records = json.loads(metadata.get("plugins") or "[]")
    except json.JSONDecodeError:
        return []
    return records if isinstance(records, list) else []


def weights_problem(tensors: dict[str, torch.Tensor], reference: dict[str, Any]) -> str | None:
    """Why ``tensors`` cannot be loaded into a model whose own state dict is ``reference`` (None when they can):
    an integer or boolean tensor where the model has a floating one (or the reverse; casting would invent
    weights), or a NaN / inf in a floating tensor where the freshly built model has finite values only (a model
    whose buffer holds -inf on purpose, e.g. an attention mask, keeps it)."""
    for name, ref in reference.items():
        t = tensors.get(name)
        if not isinstance(t, torch.Tensor) or not isinstance(ref, torch.Tensor):
            continue
        if t.is_floating_point() != ref.is_floating_point() or t.is_complex() != ref.is_complex():
            return (f"tensor {name!r} is {str(t.dtype).removeprefix('torch.')} but the model needs "
                    f"{str(ref.dtype).removeprefix('torch.')}")
        if t.is_floating_point() and t.numel():
            bad = int((~torch.isfinite(t)).sum())
            if bad and bool(torch.isfinite(ref).all()):
                return f"tensor {name!r} holds {bad} non-finite value(s) (NaN or inf) of {t.numel()}"
    return None


def load_checkpoint(path: str | os.PathLike, *, expect_model: str | None = None,
                    map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild the model stored in ``path`` and load its weights strictly. Returns (model in eval mode, meta).

    ``expect_model``: the registry name the caller wants (e.g. "dgvit"); a checkpoint of another model is refused.
    """


    path = Path(path)
    cfg, meta = read_checkpoint_meta(path)
    if expect_model is not None and cfg.name != expect_model:
        raise CheckpointError(f"checkpoint holds {cfg.name!r} but {expect_model!r} was requested ({path})")
    try:
        model = create_model(cfg)
    except UserError as e:
        raise CheckpointError(f"checkpoint {path}: cannot rebuild the model: {e}") from None
    try:
        tensors = load_file(str(path), device="cpu")
    except Exception as e:
        raise CheckpointError(f"cannot read the tensors of {path}, the file is corrupt or truncated "
                              f"({_one_line(e)})") from None
    expected = model.state_dict()
    for name, ref in expected.items():
        if name not in tensors:
            raise CheckpointError(f"checkpoint {path} lacks tensor {name!r} (shape {tuple(ref.shape)}) "
                                  f"needed by {cfg.name!r}")
        if tuple(tensors[name].shape) != tuple(ref.shape):
            raise CheckpointError(f"checkpoint {path}: tensor {name!r} has shape {tuple(tensors[name].shape)}, "
                                  f"but {cfg.name!r} with this config needs {tuple(ref.shape)}")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise CheckpointError(f"checkpoint {path} has tensor {extra[0]!r} that {cfg.name!r} does not use"
                              + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
    problem = weights_problem(tensors, expected)
    if problem:
        raise CheckpointError(f"checkpoint {path}: {problem}; the weights are broken, nothing was evaluated")
    model.load_state_dict(tensors, strict=True)
    model.to(map_location)
    model.eval()
    return model, meta
