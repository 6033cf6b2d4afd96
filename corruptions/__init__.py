"""Image corruptions: the 19 corruptions of Hendrycks & Dietterich (2019) with the constants of each reference
generator (CIFAR-10-C at 32 px, Tiny-ImageNet-C at 64 px, ImageNet-C at 224 px), faithful to those generators,
batched in torch (CPU or CUDA), with keyed per-image randomness; plus their file layouts and text noise.

Usable on its own: this package does not import the rest of the suite.
"""
from .api import Corrupter, SizeWarning, corrupt, corrupt_batches
from .errors import CorruptionError, OutputExistsError
from .frost import FrostTextures, load_frost_textures
from .registry import (
    ALL,
    BENCHMARK,
    CONSTANTS,
    CONSTANTS_VERSION,
    CORRUPTIONS,
    DETERMINISTIC,
    EXTRA,
    GROUPS,
    REGIMES,
    SEVERITY_RULE,
    SUBSETS,
    CorruptionSpec,
    Regime,
    get_corruption_names,
    get_regime,
    get_spec,
    parse_severities,
    regime_for_size,
    resolve_corruptions,
    resolve_regime,
)
from .transforms import Corrupt, CorruptedDataset

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
