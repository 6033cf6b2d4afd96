"""Benchmark any model: clean + corruption × severity (or text noise) accuracy of an outside ``nn.Module``.

    import timm
    from robustbench_dgsa import benchmark
    from robustbench_dgsa.models.external import Preprocess

    vit = timm.create_model("vit_tiny_patch16_224", num_classes=10, img_size=32, patch_size=4)
    rows = benchmark(vit, "cifar10", corruption_dir="cifar10-c-regen", timm_norm=True,
                     name="timm-vit-tiny", store="runs/store")

The model maps a float batch (N, 3, H, W) in [0, 1] to logits (N, classes) — RobustBench's convention, the
default on every route — or, with ``timm_norm=True`` / ``preprocess``, the normalised and resized batch it was
trained on. Text models take token ids (N, L) made by a ``tokenizer``
hook (texts -> ids, or (ids, key_padding_mask) with True = padding).

It runs the suite's own evaluation core (:func:`robustbench_dgsa.engine.evaluate.evaluate_subject`: the same
condition loop, prediction loop and on-the-fly corruption keys as ``evaluate(checkpoint)``) and writes rows of
``kind="eval"`` to the results store, so ``compare`` and ``report`` treat the model like the registered ones:
``model`` = ``name``, ``config_hash`` = ``weights-<first 16 hex of the weights' SHA-256>``, ``seed`` = -1 (no
training seed), plus per-example predictions; the run record holds the parameter count, the full weights
hash, the model's class and source, the input convention and the preprocessing.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import torch
from torch import nn
from corruptions.registry import parse_severities, resolve_corruptions
from corruptions.text import resolve_text_noise

from robustbench_dgsa import store as results_store
from robustbench_dgsa.config import SEED_MAX
from robustbench_dgsa.engine.evaluate import EvalPlan, EvalSubject, evaluate_subject
from robustbench_dgsa.engine.predict import dataset_info, resolve_device
from robustbench_dgsa.models.external import (ExternalModel, Preprocess, count_parameters, input_preprocess,
                                              weights_sha256)
from robustbench_dgsa.models.registry import model_names
from robustbench_dgsa.engine.threat_models import is_corruptions
from robustbench_dgsa.util.errors import UserError

DEFAULT_SEVERITIES = (1, 2, 3, 4, 5)


def benchmark(model: nn.Module | ExternalModel, dataset: str = "cifar10", *, data_root: str | Path | None = None,
              corruption: str | Sequence[str] | None = "benchmark",  # long: ~45 lines of docstring
              severity: int | str | Sequence[int] = DEFAULT_SEVERITIES, corruption_dir: str | Path | None = None,
              text_noise: str | Sequence[str] | None = None, max_examples: int | None = None,
              subset: str = "first", batch_size: int = 256, device: str = "auto",
              preprocess: Preprocess | dict | None = None, timm_norm: bool = False,
              name: str | None = None, seed: int = 0, store: str | Path | None = None,
              tokenizer: Callable[[list[str]], Any] | None = None, split: str = "test",
              frost_dir: str | Path | None = None, progress: bool = False, amp: str = "auto",
              compile_model: bool = False, train_seed: int | None = None, threat_model: str = "corruptions",
              eps: float | None = None, attack: str | None = None, attack_seed: int = 0) -> pd.DataFrame:
    """Evaluate ``model`` on ``dataset`` clean and under every corruption × severity; returns its store rows.

    ``dataset``: a name (see :func:`robustbench_dgsa.load_dataset`), or in-memory data as RobustBench passes it:
    ``(x, y)`` tensors (x float (N, C, H, W) in [0, 1]) or a torch ``Dataset`` of (image, label) pairs (stored as
    8-bit images, corrupted on the fly).
    ``corruption``: a spec as ``resolve_corruptions`` takes it ("benchmark" = the 15, "all", a group, "fog,snow",
    a list) or None for clean only; ignored (must stay the default) for text datasets. ``severity``: 3, "1-5",
    [1, 3]. ``corruption_dir``: an official or regenerated CIFAR-C folder (default: corrupt on the fly, keyed by
    ``seed`` and the example index). ``text_noise``: text noise types for text models. ``max_examples``: N test
    examples, chosen as ``subset`` says: "first" (default; the first N, as RobustBench's ``n_examples``),
    "stratified" (class-stratified, seed 0) or "auto" (the first N unless they miss a class). ``amp`` (auto, bf16,
    off) and ``compile_model``: precision (recorded in the rows) and torch.compile of the forward passes.

    Input convention, the same on every route (this function, ``evaluate --timm/--module`` and
    :func:`robustbench_dgsa.robustbench.benchmark`): images as floats in [0, 1] at the data's own size
    (RobustBench's), unless ``timm_norm=True`` (timm's mean/std and input size for the model) or an explicit
    ``preprocess`` (:class:`Preprocess`) says otherwise; an :class:`ExternalModel` brings its own choice. The run
    record and the report state which was used.

    ``name``: how the model is called in the store (default: the :class:`ExternalModel`'s name, else the class
    name); the suite's registered names are refused, and so is a name the store already holds for other weights
    (a default name then gets the weights hash appended instead). ``store``: the results store (default: a
    temporary one, discarded — only the returned rows remain). Returns the run's rows
    (:data:`robustbench_dgsa.store.COLUMNS`); ``attrs`` hold ``run_id``, ``store``, ``table`` (condition,
    severity, accuracy, n, ...), ``examples`` (which test examples, in words) and ``dataset_family``.

    ``train_seed``: the seed these weights were trained with, when they are one of several trained seeds of one
    architecture. The rows then carry it as their ``seed`` and, as ``config_hash``, ``arch-<hash of the class and
    parameter shapes>`` instead of the weights hash, so the seeds of one ``name`` are one model with n seeds in
    ``compare`` and the report (the weights hash stays in the run record). Without it: ``seed`` = -1 as before.
    (``seed`` keeps its meaning: the on-the-fly corruptions' seed.)

    ``threat_model="Linf"`` / ``"L2"`` or any registered threat model
    (:func:`robustbench_dgsa.engine.threat_models.register_threat_model`): instead of corruptions, its attack
    (``attack``, default the threat model's standard one, AutoAttack for Linf / L2; ``eps`` in pixel units;
    ``attack_seed``; see :mod:`robustbench_dgsa.engine.adversarial`) on the first ``max_examples`` test images,
    the model's input convention as above; returns the run's ``kind: adversarial`` rows.
    """
    ext = model if isinstance(model, ExternalModel) else None
    module = ext.model if ext is not None else model
    if not isinstance(module, nn.Module):
        raise UserError(f"benchmark needs a torch.nn.Module, got {type(module).__name__}")
    if not is_corruptions(threat_model):
        from robustbench_dgsa.engine.adversarial import benchmark_adversarial
        ident = (f"weights-{weights_sha256(module)[:16]}" if train_seed is None
                 else f"arch-{architecture_sha256(module)[:16]}")
        with _store_dir(store) as store_dir:
            return benchmark_adversarial(
                module, dataset, data_root=data_root, max_examples=max_examples, preprocess=_choose_preprocess(
                    module, ext, preprocess, timm_norm), threat_model=threat_model, eps=eps, attack=attack,
                attack_seed=attack_seed, batch_size=int(batch_size), device=str(resolve_device(device)),
                name=_unique_name(name, ext, module, ident, store), store_dir=store_dir, config_hash=ident,
                seed=-1 if train_seed is None else _train_seed(train_seed))
    dataset, _tmp = _in_memory_source(dataset, module)  # (x, y) / a torch Dataset: a temporary .npz, gone on return
    info = dataset_info(dataset)
    if tokenizer is None and ext is not None:
        tokenizer = ext.tokenizer
    pre = _choose_preprocess(module, ext, preprocess, timm_norm)
    record = _preprocess_record(info.modality, pre, tokenizer)
    corruptions, text_types = _conditions(info.modality, corruption, text_noise)
    severities = parse_severities(list(severity) if isinstance(severity, tuple) else severity)
    dev = resolve_device(device)
    sha = weights_sha256(module)
    identity = f"weights-{sha[:16]}" if train_seed is None else f"arch-{architecture_sha256(module)[:16]}"
    trained = -1 if train_seed is None else _train_seed(train_seed)
    name = _unique_name(name, ext, module, identity, store)
    subject = EvalSubject(model=module, preprocess=record, name=name, modality=info.modality, num_classes=None,
                          config_hash=identity, seed=trained, epoch=-1,
                          provenance={**_provenance(module, ext, record, tokenizer, sha, timm_norm, preprocess),
                                      "train_seed": None if train_seed is None else trained})
    plan = EvalPlan(dataset=dataset, split=split, data_root=data_root, max_test=max_examples, subset=subset,
                    corruptions=corruptions, severities=severities, corruption_dir=corruption_dir,
                    text_noise=text_types, corruption_seed=int(seed), frost_dir=frost_dir,
                    batch_size=int(batch_size), progress=progress, amp=amp, compile=bool(compile_model))
    with _on_device(module, dev), _store_dir(store) as store_dir:
        res = evaluate_subject(subject, plan, store_dir, device=dev)
        rows = results_store.load_results(store_dir)
    rows = rows[rows["run_id"] == res.run_id].reset_index(drop=True)
    rows.attrs.update(run_id=res.run_id, store=str(store) if store is not None else None, table=res.table,
                      examples=res.examples, dataset_family=res.dataset_family)
    return rows


def _in_memory_source(dataset: Any, module: nn.Module) -> tuple[Any, Any]:
    """``(dataset name, keep-alive)``: a name as it is; ``(x, y)`` tensors or a torch ``Dataset`` (RobustBench's
    in-memory data, :mod:`robustbench_dgsa.data.memory`) written to a temporary ``.npz`` that the array reader
    serves, removed when the returned directory object is dropped. Its classes: as many as the model has logits
    (asked on the first image), at least max label + 1."""
    from robustbench_dgsa.data.memory import image_arrays, is_in_memory, write_arrays_dataset
    if not is_in_memory(dataset):
        return dataset, None
    x, y = image_arrays(dataset)
    tmp = tempfile.TemporaryDirectory(prefix="dgsa-data-")
    return write_arrays_dataset(x, y, tmp.name, _logit_count(module, x[:1])), tmp


def _logit_count(module: nn.Module, x_uint8) -> int:
    """The model's number of logits on one raw [0, 1] image; 0 where that input does not suit it."""
    was_training = module.training
    try:
        dev = next(module.parameters()).device
    except StopIteration:
        dev = torch.device("cpu")
    xb = torch.from_numpy(x_uint8).permute(0, 3, 1, 2).float().div(255.0).to(dev)
    try:
        module.eval()
        with torch.no_grad():
            out = module(xb)
        return int(out.shape[1]) if isinstance(out, torch.Tensor) and out.ndim == 2 else 0
    except Exception:  # noqa: BLE001 - a model that wants other input: the labels decide
        return 0
    finally:
        module.train(was_training)


def _choose_preprocess(module: nn.Module, ext: ExternalModel | None, preprocess, timm_norm: bool):
    """An explicit ``preprocess`` wins; ``timm_norm`` asks for timm's; else the loaded model's own choice (raw
    unless it was loaded with timm_norm); else raw [0, 1]."""
    if preprocess is not None and timm_norm:
        raise UserError("give either preprocess or timm_norm=True, not both", options="timm_norm")
    if preprocess is not None:
        return preprocess
    if timm_norm:
        return input_preprocess(module, True)
    return ext.preprocess if ext is not None else None


def _provenance(module: nn.Module, ext: ExternalModel | None, record: dict[str, Any], tokenizer, sha: str,
                timm_norm: bool, preprocess) -> dict[str, Any]:
    convention = "custom" if preprocess is not None else (
        "checkpoint" if ext is not None and ext.source.startswith("pretrained:") and not timm_norm else
        "timm" if timm_norm or (ext is not None and ext.preprocess is not None) else "raw")
    return {"origin": "benchmark", "model_class": f"{type(module).__module__}.{type(module).__qualname__}",
            "model_source": ext.source if ext is not None else f"python:{type(module).__module__}."
                                                                 f"{type(module).__qualname__}",
            "weights_file": ext.weights if ext is not None else "",
            "random_init": bool(ext.random_init) if ext is not None else None,
            "init_seed": ext.init_seed if ext is not None else None,
            "parameters": count_parameters(module), "weights_sha256": sha,
            "input_convention": convention if record.get("modality") == "image" else "tokenizer",
            "preprocess": {k: v for k, v in record.items() if k != "tokenizer"},
            "tokenizer": _callable_name(tokenizer), **({"external": ext.info} if ext is not None else {})}


def _unique_name(name: str | None, ext: ExternalModel | None, module: nn.Module, identity: str,
                 store: str | Path | None) -> str:
    """The store name: ``name`` (refused when the store holds it for other weights, or with ``train_seed`` for
    another architecture), else the default name (with ``-<hash[:8]>`` appended when the store holds that name for
    other weights / another architecture). ``identity``: ``weights-<hash>`` or ``arch-<hash>``."""
    explicit = name is not None
    name = _check_name(name if explicit else (ext.name if ext is not None else type(module).__name__))
    others = _hashes_of(store, name) - {identity}
    if not others:
        return name
    if explicit:
        raise UserError(f"the store already holds another model named {name!r} ({sorted(others)[0]}); give this "
                        "one another name")
    return _check_name(f"{name}-{identity.split('-', 1)[1][:8]}")


def _train_seed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        raise UserError(f"train_seed: expected an integer in [0, {SEED_MAX}], got {value!r}")
    return int(value)


def architecture_sha256(module: nn.Module) -> str:
    """SHA-256 of what makes two trained models one architecture: the class (module and qualified name) and every
    parameter's and buffer's name, shape and dtype (not their values)."""
    import hashlib
    cls = type(module)
    parts = [f"{cls.__module__}.{cls.__qualname__}"] + [
        f"{k}:{tuple(v.shape)}:{str(v.dtype)}" for k, v in sorted(module.state_dict().items())]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _check_name(name: str) -> str:
    name = str(name).strip()
    if not name or any(c in name for c in "/\\\n"):
        raise UserError(f"model name must be a non-empty name without slashes, got {name!r}")
    if name in model_names():
        raise UserError(f"{name!r} is one of the suite's registered models; evaluate its checkpoints with "
                        "evaluate(), or give this model another name")
    return name


def _hashes_of(store: str | Path | None, name: str) -> set[str]:
    if store is None or not Path(store).is_dir():
        return set()
    rows = results_store.load_results(store)
    return set(rows.loc[rows["model"] == name, "config_hash"])


def _preprocess_record(modality: str, preprocess: Preprocess | dict | None, tokenizer) -> dict[str, Any]:
    if modality == "text":
        if tokenizer is None or not callable(tokenizer):
            raise UserError("a text model needs a tokenizer hook: texts -> token ids (or (ids, padding mask))")
        return {"modality": "text", "tokenizer": tokenizer}
    if isinstance(preprocess, dict):
        try:
            preprocess = Preprocess(**preprocess)
        except TypeError as e:
            raise UserError(f"bad preprocess fields: {e}") from None
    return (preprocess or Preprocess()).to_record()


def _conditions(modality: str, corruption, text_noise) -> tuple[list[str] | None, list[str] | None]:
    if modality == "text":
        if corruption not in (None, "benchmark"):
            raise UserError("image corruptions apply to image models; use text_noise for text models")
        return None, list(resolve_text_noise(text_noise)) if text_noise else None
    if text_noise:
        raise UserError("text noise applies to text models; use corruption for image models")
    return (list(resolve_corruptions(corruption)) if corruption else None), None


def _callable_name(fn: Any) -> str:
    if fn is None:
        return ""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


class _on_device:
    """Move the model to ``dev`` for the run and back to where it was afterwards."""

    def __init__(self, model: nn.Module, dev: torch.device):
        self.model, self.dev = model, dev
        first = next(iter(model.parameters()), None)
        self.home = first.device if first is not None else None

    def __enter__(self):
        self.model.to(self.dev)
        return self.model

    def __exit__(self, *exc):
        if self.home is not None:
            self.model.to(self.home)
        return False


class _store_dir:
    def __init__(self, store: str | Path | None):
        self.store, self.tmp = store, None

    def __enter__(self) -> Path:
        if self.store is not None:
            return Path(self.store)
        self.tmp = tempfile.TemporaryDirectory(prefix="dgsa-benchmark-")
        return Path(self.tmp.name)

    def __exit__(self, *exc):
        if self.tmp is not None:
            self.tmp.cleanup()
        return False
