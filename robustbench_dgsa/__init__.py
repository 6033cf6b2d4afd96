"""dgsa-bench: robustness benchmarking for MHSA, DiffAttn and DGSA attention.

The public Python API (imported lazily, so ``import robustbench_dgsa`` stays light)::

    create_model, list_models, get_model_config, resolve_config   models and run configs
    load_dataset                                                   datasets (official layouts, synthetic, custom)
    train, evaluate                                                the suite's own models (checkpoints)
    benchmark, Preprocess, load_timm_model, load_module_model      any nn.Module (timm, torchvision, ...)
    load_pretrained, list_pretrained                               the shipped, trained models (the zoo)
    load_results, compare, build_report                            results store, statistics, report
    rollout, rollout_metrics_run                                   attention rollout: one image -> heatmap; metrics
    load_weights                                                   safetensors or .pth (weights_only) into a model
    robustbench_dgsa.robustbench.benchmark                         RobustBench's own call shape
    export_robustbench                                             RobustBench model_info files
    register_attention, register_model, load_plugins               extensions: a new attention, a model on it
    register_threat_model, ThreatModel                             extensions: a new threat model (its attack)

Where timm is installed, the zoo and the registered image models are also timm models (``timm.create_model(
"dgvit_zoo_patch4_32", pretrained=True)``): they are registered when timm is imported (at once if it already is),
so this import does not load timm (:mod:`robustbench_dgsa.models.timm_compat`).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__version__ = "0.1.0"

# public name -> (module, attribute)
_LAZY = {
    "create_model": ("robustbench_dgsa.models.registry", "create_model"),
    "get_model_config": ("robustbench_dgsa.models.registry", "get_model_config"),
    "resolve_config": ("robustbench_dgsa.config", "resolve_config"),
    "load_dataset": ("robustbench_dgsa.data.registry", "load_dataset"),
    "train": ("robustbench_dgsa.engine.train", "train"),
    "evaluate": ("robustbench_dgsa.engine.evaluate", "evaluate"),
    "benchmark": ("robustbench_dgsa.engine.benchmark", "benchmark"),
    "Preprocess": ("robustbench_dgsa.models.external", "Preprocess"),
    "load_timm_model": ("robustbench_dgsa.models.external", "load_timm_model"),
    "load_module_model": ("robustbench_dgsa.models.external", "load_module_model"),
    "load_pretrained": ("robustbench_dgsa.models.zoo", "load_pretrained"),
    "list_pretrained": ("robustbench_dgsa.models.zoo", "list_pretrained"),
    "load_results": ("robustbench_dgsa.store", "load_results"),
    "build_report": ("robustbench_dgsa.report.build", "build_report"),
    "rollout_metrics_run": ("robustbench_dgsa.rollout.runs", "rollout_metrics_run"),
    "rollout": ("robustbench_dgsa.rollout.runs", "rollout_heatmap"),
    "load_weights": ("robustbench_dgsa.models.external", "load_weights"),
    "register_attention": ("robustbench_dgsa.models.attention_registry", "register_attention"),
    "register_model": ("robustbench_dgsa.models.registry", "register_model"),
    "load_plugins": ("robustbench_dgsa.util.plugins", "load_plugins"),
    "register_threat_model": ("robustbench_dgsa.engine.threat_models", "register_threat_model"),
    "ThreatModel": ("robustbench_dgsa.engine.threat_models", "ThreatModel"),
    "export_robustbench": ("robustbench_dgsa.report.export", "export_robustbench"),
}

__all__ = ["__version__", "list_models", "compare", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'robustbench_dgsa' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def list_models(modality: str | None = None) -> list[str]:
    """Registered model names (vit, dvit, dgvit, ..., transformer, dt, dgt, ...), optionally of one modality
    ("image" or "text")."""
    from robustbench_dgsa.models.registry import get_model_config, model_names
    if modality is None:
        return list(model_names())
    if modality not in ("image", "text"):
        from robustbench_dgsa.util.errors import UserError
        raise UserError(f"modality must be 'image' or 'text', got {modality!r}")
    return [n for n in model_names() if get_model_config(n).modality == modality]


def compare(results: Any, **options: Any):
    """Model statistics of a results store (a folder) or of its rows (a DataFrame): see
    :func:`robustbench_dgsa.analysis.compare.run_compare` for the options (dataset, models, reference, paired,
    partial, ...). Returns a ``Comparison`` (``.tables``, ``.warnings``, ``.info``)."""
    from robustbench_dgsa.analysis.compare import run_compare
    from robustbench_dgsa.store import load_results
    if isinstance(results, (str, Path)):
        options.setdefault("store_label", str(results))
        results = load_results(results)
    return run_compare(results, **options)


def _register_with_timm() -> None:
    try:
        from robustbench_dgsa.models.timm_compat import register_timm_models
        register_timm_models()
    except Exception as e:  # noqa: BLE001 - never break `import timm` (or this package) over the extra names
        import warnings
        warnings.warn(f"dgsa-bench models not registered with timm: {e}", RuntimeWarning, stacklevel=2)


class _TimmImportHook:
    """A meta-path finder that lets ``import timm`` finish, then registers the suite's models with it (once)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        import sys
        if fullname != "timm":
            return None
        spec = None
        for finder in sys.meta_path:  # the finders after this one (a find_spec without an import keeps the hook)
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _register_with_timm()

        loader.exec_module = exec_module
        return spec


def _install_timm_hook() -> None:
    import sys
    if "timm" in sys.modules:
        _register_with_timm()
    elif not any(isinstance(f, _TimmImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TimmImportHook())


_install_timm_hook()
