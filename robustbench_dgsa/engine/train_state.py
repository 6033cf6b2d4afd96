"""The resume state of a training run: ONE safetensors file, tensors + JSON, never a pickle.

``train_state.safetensors`` holds every tensor of the state (model weights, AdamW moments and step counts,
torch CPU/CUDA RNG states) as safetensors entries, and everything else (optimizer hyper-parameters, scheduler
state, python and numpy RNG states, epoch, history, run id, seed, config hash) as JSON in the header metadata
(key ``state``); in that JSON a tensor is ``{"$t": "<entry name>"}``, a tuple ``{"$tuple": [...]}`` and a
dict with keys that are not strings ``{"$kv": [[key, value], ...]}``. One file, written atomically
(:mod:`robustbench_dgsa.util.atomic`), so a kill leaves the old state or the new one, never a mix of two
files. Reading it runs no code: safetensors parses raw buffers, JSON plain values.

The legacy ``train_state.pt`` (a torch pickle, which can run arbitrary code when loaded) is never opened:
:func:`refuse_legacy` stops with one line when a run folder still holds one.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError

STATE_NAME = "train_state.safetensors"
LEGACY_STATE_NAME = "train_state.pt"
FORMAT = "dgsa-bench train state"
VERSION = 2


def refuse_legacy(out_dir: Path) -> None:
    """One line when ``out_dir`` holds a pickled state of an older version (the file is not opened)."""
    legacy = Path(out_dir) / LEGACY_STATE_NAME
    if legacy.exists() or legacy.is_symlink():
        raise UserError(f"{legacy} is a training state in the old pickle format, which is never loaded (a pickle "
                        f"can run code); delete it (and {STATE_NAME} / the checkpoint there) to train this run "
                        "again from scratch")


# --- encoding: nested python values with tensors <-> (JSON value, {name: tensor}) ----------------------------

def _pack(obj: Any, tensors: dict[str, torch.Tensor], name: str) -> Any:
    if isinstance(obj, torch.Tensor):
        if name in tensors:  # e.g. a key holding "/": keep entry names unique
            name = f"{name}#{len(tensors)}"
        tensors[name] = obj.detach().to("cpu").clone().contiguous()
        return {"$t": name}
    if isinstance(obj, np.ndarray):
        return {"$nd": obj.dtype.str, "data": obj.tolist()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return {"$tuple": [_pack(v, tensors, f"{name}/{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_pack(v, tensors, f"{name}/{i}") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _pack(v, tensors, f"{name}/{k}") for k, v in obj.items()}
        return {"$kv": [[k, _pack(v, tensors, f"{name}/{k}")] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"training state: cannot store a {type(obj).__name__}")


def _unpack(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_unpack(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "$t" in obj:
        return tensors[obj["$t"]]
    if "$nd" in obj:
        return np.asarray(obj["data"], dtype=np.dtype(obj["$nd"]))
    if "$tuple" in obj:
        return tuple(_unpack(v, tensors) for v in obj["$tuple"])
    if "$kv" in obj:
        return {k: _unpack(v, tensors) for k, v in obj["$kv"]}
    return {k: _unpack(v, tensors) for k, v in obj.items()}


# --- RNG states --------------------------------------------------------------------------------------------

def rng_state() -> dict[str, Any]:
    st: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict[str, Any]) -> None:
    version, internal, gauss = st["python"]
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(tuple(st["numpy"]))
    torch.set_rng_state(st["torch"])
    if "cuda" in st and torch.cuda.is_available() and len(st["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(list(st["cuda"]))


# --- file --------------------------------------------------------------------------------------------------

def save_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
               **info: Any) -> None:
    """Write the state (weights, optimizer, scheduler, RNG states, ``info``) atomically to ``path``."""
    from safetensors.torch import save_file
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "rng": rng_state(), **info}
    tensors: dict[str, torch.Tensor] = {}
    packed = _pack(state, tensors, "")
    metadata = {"format": FORMAT, "version": str(VERSION), "state": json.dumps(packed)}
    with atomic.atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)


def load_state(path: Path) -> dict[str, Any]:
    """The state written by :func:`save_state`; one-line UserError for anything else (no code runs)."""
    from safetensors import safe_open
    hint = "delete it to train this run again from scratch"
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # noqa: BLE001 - safetensors raises its own types for a bad file
        raise UserError(f"cannot read training state {path} ({' '.join(str(e).split())[:160]}); {hint}") from None
    if metadata.get("format") != FORMAT or metadata.get("version") != str(VERSION):
        raise UserError(f"{path} is not a training state of this version; {hint}")
    try:
        state = _unpack(json.loads(metadata["state"]), tensors)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"training state {path} is damaged ({type(e).__name__}: {e}); {hint}") from None
    if not isinstance(state, dict) or not {"model", "optimizer", "scheduler", "rng", "epoch"} <= set(state):
        raise UserError(f"training state {path} is incomplete; {hint}")
    return state
