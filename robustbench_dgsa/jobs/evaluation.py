"""Evaluate one model, whichever way it is given: what ``dgsa-bench evaluate`` runs.

A checkpoint of this suite goes through :func:`robustbench_dgsa.engine.evaluate.evaluate`; a timm model or any
importable ``nn.Module`` factory is loaded by :mod:`robustbench_dgsa.models.external` and measured by the same
core, :func:`robustbench_dgsa.engine.benchmark.benchmark`. Either way the result is an ``EvalResult``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from robustbench_dgsa.util.errors import UserError


def evaluate_model(checkpoint: str | Path | None = None, *, timm_name: str | None = None, module: str | None = None,
                   weights: str | Path | None = None, random_init: bool = False, init_seed: int = 0,
                   name: str | None = None, model_args: dict[str, Any] | None = None, timm_norm: bool = False,
                   dataset: str | None = None, data_root: str | Path | None = None, split: str = "test",
                   max_test: int | None = None, subset: str | None = None, corruptions: Sequence[str] | None = None,
                   severities: Sequence[int] = (1, 2, 3, 4, 5), corruption_dir: str | Path | None = None,
                   text_noise: Sequence[str] | None = None, corruption_seed: int = 0,
                   store: str | Path | None = None, batch_size: int = 256, device: str = "auto",
                   progress: bool = True, frost_dir: str | Path | None = None, amp: str | None = None,
                   compile_model: bool = False, train_seed: int | None = None) -> Any:
    """Accuracy of one model, clean, per corruption and severity and under text noise, into the store.

    Exactly one of ``checkpoint`` (this suite's, ``store`` default ``<checkpoint folder>/store``), ``timm_name``
    (``weights`` or ``random_init`` with ``init_seed``) or ``module`` (``pkg.mod:factory``); for the last two
    ``dataset`` and ``store`` are needed, ``name`` is the model's name in the store and ``model_args`` go to the
    model's constructor; ``train_seed`` records the seed the outside model's weights were trained with (see
    :func:`robustbench_dgsa.engine.benchmark.benchmark`). ``amp`` (auto, bf16, off; default: a checkpoint's
    ``train.amp``, else auto) and ``compile_model``: precision and torch.compile of the forward passes. Returns an
    :class:`robustbench_dgsa.engine.evaluate.EvalResult`.
    """
    from robustbench_dgsa.engine.evaluate import evaluate

    conditions = dict(dataset=dataset, data_root=data_root, split=split, corruption_dir=corruption_dir,
                      text_noise=text_noise, batch_size=batch_size, device=device, progress=progress,
                      frost_dir=frost_dir, compile_model=compile_model)
    if timm_name is None and module is None:
        if train_seed is not None:
            raise UserError("train_seed is for outside models (timm_name / module); a checkpoint records its own "
                            "training seed", options="train_seed")
        return evaluate(checkpoint, max_test=max_test, subset=subset, corruptions=corruptions, amp=amp,
                        severities=severities, corruption_seed=corruption_seed, store_dir=store, **conditions)
    conditions["amp"] = amp or "auto"
    return evaluate_external(timm_name, module, weights, random_init, init_seed, name, dict(model_args or {}),
                             timm_norm=timm_norm, store=store, max_examples=max_test, subset=subset or "first",
                             corruption=corruptions, severity=severities, seed=corruption_seed,
                             train_seed=train_seed, **conditions)


def evaluate_external(timm_name: str | None, module: str | None, weights: str | Path | None, random_init: bool,
                      init_seed: int, name: str | None, model_args: dict[str, Any], *, timm_norm: bool,
                      dataset: str, store: str | Path, **kw: Any) -> Any:
    """A timm model (by name) or a module factory: load it, then the library's benchmark() (the same core as
    checkpoints). ``kw``: benchmark()'s conditions and sizes."""
    from robustbench_dgsa.engine.benchmark import benchmark
    from robustbench_dgsa.engine.evaluate import EvalResult
    from robustbench_dgsa.models.external import load_module_model, load_timm_model

    if timm_name is not None:
        model_args.setdefault("num_classes", num_classes(dataset, kw.get("data_root")))
        ext = load_timm_model(timm_name, weights=weights, random_init=random_init, seed=init_seed,
                              timm_norm=timm_norm, **model_args)
    else:
        ext = load_module_model(module, weights=weights, timm_norm=timm_norm, **model_args)
    rows = benchmark(ext, dataset, name=name, store=store, **kw)
    return EvalResult(rows.attrs["run_id"], rows.attrs["table"], Path(store), rows.attrs["examples"],
                      rows.attrs.get("dataset_family"))


def num_classes(dataset: str, data_root: str | Path | None) -> int:
    """The number of classes of ``dataset`` (from its facts, else from its test split)."""
    from robustbench_dgsa.data import get_info, load_dataset
    n = get_info(dataset).num_classes
    return int(n) if n else len(load_dataset(dataset, "test", data_root=data_root).classes)


def result_summary(res: Any) -> dict[str, Any]:
    """An evaluation's summary, with the ImageNet-C mCE (``imagenet_c``) on ImageNet-C."""
    mce = imagenet_c_mce(res)
    return {**res.summary(), **({"imagenet_c": mce} if mce else {})}


def imagenet_c_mce(res: Any) -> dict[str, Any] | None:
    """On ImageNet-C: the standard mCE (normalised by AlexNet's published errors) beside mCA, from the result
    table; None on other datasets."""
    if getattr(res, "dataset_family", None) != "imagenet" or not (res.table.condition != "clean").any():
        return None
    from robustbench_dgsa.analysis.metrics import imagenet_c_ce
    _, summary = imagenet_c_ce(res.table[res.table.condition != "clean"])
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in summary.items()}
