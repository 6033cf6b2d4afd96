"""CIFAR-C image corruptions: the 19 corruptions of Hendrycks & Dietterich (2019) at CIFAR constants,
faithful to the reference generator, batched in torch (CPU or CUDA), with keyed per-image randomness.

Usable on its own: this package does not import the rest of the suite.
"""
from .api import SizeWarning, corrupt, corrupt_batches
from .errors import CorruptionError
from .frost import FrostTextures, load_frost_textures
from .registry import (
    SEVERITY_RULE,
    ALL,
    BENCHMARK,
    CONSTANTS_VERSION,
    CORRUPTIONS,
    DETERMINISTIC,
    EXTRA,
    GROUPS,
    SUBSETS,
    CorruptionSpec,
    get_corruption_names,
    get_spec,
    parse_severities,
    resolve_corruptions,
)
from .transforms import Corrupt, CorruptedDataset

__all__ = [
    "ALL",
    "BENCHMARK",
    "CONSTANTS_VERSION",
    "CORRUPTIONS",
    "DETERMINISTIC",
    "EXTRA",
    "GROUPS",
    "SEVERITY_RULE",
    "SUBSETS",
    "Corrupt",
    "CorruptedDataset",
    "CorruptionError",
    "CorruptionSpec",
    "FrostTextures",
    "SizeWarning",
    "corrupt",
    "corrupt_batches",
    "get_corruption_names",
    "get_spec",
    "load_frost_textures",
    "parse_severities",
    "resolve_corruptions",
]
