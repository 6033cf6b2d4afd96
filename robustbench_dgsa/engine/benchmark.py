"""Benchmark any model: clean + corruption × severity (or text noise) accuracy of an outside ``nn.Module``.

    import timm
    from robustbench_dgsa import benchmark
    from robustbench_dgsa.models.external import Preprocess

    vit = timm.create_model("vit_tiny_patch16_224", num_classes=10, img_size=32, patch_size=4)
    rows = benchmark(vit, "cifar10", corruption_dir="cifar10-c-regen", preprocess=Preprocess.from_timm(vit),
                     name="timm-vit-tiny", store="runs/store")

The model maps a float batch (N, 3, H, W) in [0, 1] to logits (N, classes) — or, with ``preprocess``, the
normalised and resized batch it was trained on. Text models take token ids (N, L) made by a ``tokenizer``
hook (texts -> ids, or (ids, key_padding_mask) with True = padding).

It runs the suite's own evaluation core (:func:`robustbench_dgsa.engine.evaluate.evaluate_subject`: the same
condition loop, prediction loop and on-the-fly corruption keys as ``evaluate(checkpoint)``) and writes rows of
``kind="eval"`` to the results store, so ``compare`` and ``report`` treat the model like the registered ones:
``model`` = ``name``, ``config_hash`` = ``weights-<first 16 hex of the weights' SHA-256>``, ``seed`` = -1 (no
training seed), plus per-example predictions; the run record holds the parameter count, the full weights
hash, the model's class and source, and the preprocessing.
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
from robustbench_dgsa.engine.evaluate import EvalPlan, EvalSubject, evaluate_subject
from robustbench_dgsa.engine.predict import dataset_info, resolve_device
from robustbench_dgsa.models.external import ExternalModel, Preprocess, count_parameters, weights_sha256
from robustbench_dgsa.models.registry import MODEL_NAMES
from robustbench_dgsa.util.errors import UserError

DEFAULT_SEVERITIES = (1, 2, 3, 4, 5)


def benchmark(model: nn.Module | ExternalModel, dataset: str = "cifar10", *, data_root: str | Path | None = None,
              corruption: str | Sequence[str] | None = "benchmark",
              severity: int | str | Sequence[int] = DEFAULT_SEVERITIES, corruption_dir: str | Path | None = None,
              text_noise: str | Sequence[str] | None = None, max_examples: int | None = None,
              batch_size: int = 256, device: str = "auto", preprocess: Preprocess | dict | None = None,
              name: str | None = None, seed: int = 0, store: str | Path | None = None,
              tokenizer: Callable[[list[str]], Any] | None = None, split: str = "test",
              frost_dir: str | Path | None = None, progress: bool = False) -> pd.DataFrame:
    """Evaluate ``model`` on ``dataset`` clean and under every corruption × severity; returns its store rows.

    ``corruption``: a spec as ``resolve_corruptions`` takes it ("benchmark" = the 15, "all", a group, "fog,snow",
    a list) or None for clean only; ignored (must stay the default) for text datasets. ``severity``: 3, "1-5",
    [1, 3]. ``corruption_dir``: an official or regenerated CIFAR-C folder (default: corrupt on the fly, keyed by
    ``seed`` and the example index). ``text_noise``: text noise types for text models. ``max_examples``: the first
    N test examples (stratified when the first N miss a class). ``preprocess``: a :class:`Preprocess` (e.g.
    ``Preprocess.from_timm(model)``) or None for [0, 1] input at the data's own size. ``name``: how the model
    is called in the store (default: the :class:`ExternalModel`'s name, else the class name); the suite's
    registered names are refused. ``store``: the results store (default: a temporary one, discarded — only
    the returned rows remain). Returns the run's rows (:data:`robustbench_dgsa.store.COLUMNS`); ``attrs`` hold
    ``run_id``, ``store`` and ``table`` (condition, severity, accuracy, n, ...).
    """
    ext = model if isinstance(model, ExternalModel) else None
    module = ext.model if ext is not None else model
    if not isinstance(module, nn.Module):
        raise UserError(f"benchmark needs a torch.nn.Module, got {type(module).__name__}")
    info = dataset_info(dataset)
    name = _check_name(name or (ext.name if ext is not None else type(module).__name__))
    if tokenizer is None and ext is not None:
        tokenizer = ext.tokenizer
    record = _preprocess_record(info.modality, preprocess if preprocess is not None else
                                (ext.preprocess if ext is not None else None), tokenizer)
    corruptions, text_types = _conditions(info.modality, corruption, text_noise)
    severities = parse_severities(list(severity) if isinstance(severity, tuple) else severity)
    dev = resolve_device(device)
    sha = weights_sha256(module)
    subject = EvalSubject(
        model=module, preprocess=record, name=name, modality=info.modality, num_classes=None,
        config_hash=f"weights-{sha[:16]}", seed=-1, epoch=-1,
        provenance={"origin": "benchmark", "model_class": f"{type(module).__module__}.{type(module).__qualname__}",
                    "model_source": ext.source if ext is not None else "python object",
                    "weights_file": ext.weights if ext is not None else "",
                    "random_init": bool(ext.random_init) if ext is not None else None,
                    "parameters": count_parameters(module), "weights_sha256": sha,
                    "preprocess": {k: v for k, v in record.items() if k != "tokenizer"},
                    "tokenizer": _callable_name(tokenizer), **({"external": ext.info} if ext is not None else {})})
    plan = EvalPlan(dataset=dataset, split=split, data_root=data_root, max_test=max_examples,
                    corruptions=corruptions, severities=severities, corruption_dir=corruption_dir,
                    text_noise=text_types, corruption_seed=int(seed), frost_dir=frost_dir,
                    batch_size=int(batch_size), progress=progress)
    with _on_device(module, dev), _store_dir(store) as store_dir:
        res = evaluate_subject(subject, plan, store_dir, device=dev)
        rows = results_store.load_results(store_dir)
    rows = rows[rows["run_id"] == res.run_id].reset_index(drop=True)
    rows.attrs.update(run_id=res.run_id, store=str(store) if store is not None else None, table=res.table)
    return rows


def _check_name(name: str) -> str:
    name = str(name).strip()
    if not name or any(c in name for c in "/\\\n"):
        raise UserError(f"model name must be a non-empty name without slashes, got {name!r}")
    if name in MODEL_NAMES:
        raise UserError(f"{name!r} is one of the suite's registered models; evaluate its checkpoints with "
                        "evaluate(), or give this model another name")
    return name


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
