"""Image corruptions: the 19 corruptions of Hendrycks & Dietterich (2019) with the constants of each reference
generator (CIFAR-10-C at 32 px, Tiny-ImageNet-C at 64 px, ImageNet-C at 224 px), faithful to those generators,
batched in torch (CPU or CUDA), with keyed per-image randomness; plus their file layouts and text noise.

Usable on its own: this package does not import the rest of the suite.

The names below load on first use (PEP 562), so importing a light module such as ``corruptions.atomic`` or
``corruptions.registry`` does not import torch.
"""
from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_EXPORTS = {
    "api": ("Corrupter", "SizeWarning", "corrupt", "corrupt_batches"),
    "errors": ("CorruptionError", "OutputExistsError"),
    "frost": ("FrostTextures", "load_frost_textures"),
    "registry": ("ALL", "BENCHMARK", "CONSTANTS", "CONSTANTS_VERSION", "CORRUPTIONS", "DETERMINISTIC", "EXTRA",
                 "GROUPS", "REGIMES", "SEVERITY_RULE", "SUBSETS", "CorruptionSpec", "Regime", "get_corruption_names",
                 "get_regime", "get_spec", "parse_severities", "regime_for_size", "resolve_corruptions",
                 "resolve_regime"),
    "transforms": ("Corrupt", "CorruptedDataset"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "ALL",
    "BENCHMARK",
    "CONSTANTS",
    "CONSTANTS_VERSION",
    "CORRUPTIONS",
    "DETERMINISTIC",
    "EXTRA",
    "GROUPS",
    "REGIMES",
    "SEVERITY_RULE",
    "SUBSETS",
    "Corrupt",
    "CorruptedDataset",
    "Corrupter",
    "CorruptionError",
    "CorruptionSpec",
    "FrostTextures",
    "OutputExistsError",
    "Regime",
    "SizeWarning",
    "corrupt",
    "corrupt_batches",
    "get_corruption_names",
    "get_regime",
    "get_spec",
    "load_frost_textures",
    "parse_severities",
    "regime_for_size",
    "resolve_corruptions",
    "resolve_regime",
]


def __getattr__(name: str) -> Any:
    """A public name (or a submodule such as ``corruptions.layout``), imported when first asked for."""
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
