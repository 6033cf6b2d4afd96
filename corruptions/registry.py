"""The 19 corruptions: names, groups, and their severity constants for three regimes, as data tables; spec parsing.

Three constant sets ("regimes"), each exactly that of one reference generator of Hendrycks & Dietterich (2019):

* ``cifar`` - ``make_cifar_c.py`` (CIFAR-10-C, 32 px), the tables below (docs/METHODS.md, Image corruptions);
* ``tiny-imagenet`` - ``make_tinyimagenet_c.py`` (Tiny-ImageNet-C, 64 px);
* ``imagenet`` - ``make_imagenet_c.py`` (ImageNet-C, 224 px; the constants of the ``imagecorruptions`` package too,
  except its elastic_transform).

Without an explicit choice the regime follows the image size (32, 64, 224 px; see :func:`resolve_regime`).
``Regime.constants_version`` names each table; change it whenever a constant or an algorithm of that regime changes
so that regenerated files can be told apart.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

import numpy as np

from .errors import CorruptionError

GROUP_NAMES = ("noise", "blur", "weather", "digital")


@dataclass(frozen=True)
class Regime:
    """One reference generator's setting: the side it hard-codes, the name of its constants table, the key prefix of
    the keyed randomness, the frost textures' resize factor and its input step."""

    name: str  # "cifar" | "tiny-imagenet" | "imagenet"
    size: int  # the image side the reference generator hard-codes
    constants_version: str
    reference: str  # the generator script (hendrycks/robustness)
    dataset: str  # the published set it made
    key: str  # prefix of the keyed randomness (corruptions.rng.base_key)
    frost_scale: float  # cv2.resize factor of the frost photographs before the random crop (1: native size)
    input_step: str  # how the generator made its inputs


REGIMES: Mapping[str, Regime] = MappingProxyType({
    "cifar": Regime("cifar", 32, "cifar-c-2019.1", "make_cifar_c.py", "CIFAR-10-C", "cifar-c", 0.2,
                    "the CIFAR-10 test images as they are (32x32)"),
    "tiny-imagenet": Regime("tiny-imagenet", 64, "tiny-imagenet-c-2019.1", "make_tinyimagenet_c.py",
                            "Tiny-ImageNet-C", "tiny-imagenet-c", 0.3,
                            "torchvision Resize((64, 64)): squashed to 64x64, PIL bilinear"),
    "imagenet": Regime("imagenet", 224, "imagenet-c-2018.1", "make_imagenet_c.py", "ImageNet-C", "imagenet-c", 1.0,
                       "torchvision Resize(256) (shorter side 256, PIL bilinear), then CenterCrop(224)"),
})
CONSTANTS_VERSION = REGIMES["cifar"].constants_version  # the CIFAR table's (the default of the CIFAR-C writers)
_BY_SIZE = {r.size: r.name for r in REGIMES.values()}


def get_regime(constants: str) -> Regime:
    """The :class:`Regime` named ``constants``; CorruptionError listing the names otherwise."""
    regime = REGIMES.get(constants) if isinstance(constants, str) else None
    if regime is None:
        raise CorruptionError(f"unknown constants {constants!r}; valid: {', '.join(REGIMES)}")
    return regime


def regime_for_size(h: int, w: int) -> str | None:
    """The regime whose reference works at h x w (32, 64 or 224 px square), else None."""
    return _BY_SIZE.get(int(h)) if int(h) == int(w) else None


def resolve_regime(constants: str | None, h: int, w: int) -> Regime:
    """``constants`` when given, else the regime of the image size; CorruptionError for other sizes."""
    if constants is not None:
        return get_regime(constants)
    name = regime_for_size(h, w)
    if name is None:
        sizes = ", ".join(f"{r.size}x{r.size} -> {r.name}" for r in REGIMES.values())
        raise CorruptionError(f"{h}x{w} images have no default constants ({sizes}); choose the constants: "
                              f"{', '.join(REGIMES)}")
    return REGIMES[name]


@dataclass(frozen=True)
class CorruptionSpec:
    """One corruption: its file/function name, group, benchmark membership, randomness and its constants per regime."""

    name: str
    group: str  # "noise" | "blur" | "weather" | "digital"
    benchmark: bool  # one of the 15 benchmark corruptions (else one of the 4 extra)
    random: bool  # draws random numbers (keyed per image); False = bit-reproducible
    constants: Mapping[str, tuple]  # regime -> the 5 severity constants

    @property
    def params(self) -> tuple:
        """The CIFAR constants (severity 1..5)."""
        return self.constants["cifar"]

    def param(self, severity: int, constants: str = "cifar"):
        return self.constants[constants][severity - 1]


def _arange(start: float, stop: float, step: float) -> tuple:
    # np.arange as the references build the zoom lists (float arange: its count is not (stop - start) / step; the
    # exact float64 values it produces are kept)
    return tuple(float(v) for v in np.arange(start, stop, step))


def _zooms(*args) -> tuple:
    return tuple(_arange(*a) for a in args)


def _scaled(size: float, rows) -> tuple:
    # elastic_transform's constants are written as size * factor in each reference (32, 64; 244 at ImageNet, where
    # the script's comment says "244 should have been 224"): computed the same way
    return tuple(tuple(size * f for f in row) for row in rows)


# The constants tables, one per regime, severity 1..5, exactly as each reference writes them (the docs table lists
# them with their meaning).
_CIFAR = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
    "shot_noise": (500, 250, 100, 75, 50),
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
    "defocus_blur": ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)),
    "glass_blur": ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)),
    "motion_blur": ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)),
    "zoom_blur": _zooms((1, 1.06, 0.01), (1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.01), (1, 1.26, 0.01)),
    "snow": ((0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
             (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)),
    "frost": ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)),
    "fog": ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)),
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
    "elastic_transform": _scaled(32, ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05),
                                      (0.1, 0.03, 0.03))),
    "pixelate": (0.95, 0.9, 0.85, 0.75, 0.65),
    "jpeg_compression": (80, 65, 58, 50, 40),
    "speckle_noise": (0.06, 0.1, 0.12, 0.16, 0.2),
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1),
    "spatter": ((0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0), (0.65, 0.3, 1, 0.69, 0.5, 0),
                (0.65, 0.1, 0.7, 0.69, 0.6, 1), (0.65, 0.1, 0.5, 0.68, 0.6, 1)),
    "saturate": ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)),
}
_TINY_IMAGENET = {
    "gaussian_noise": (0.04, 0.08, 0.12, 0.15, 0.18),
    "shot_noise": (250, 100, 50, 30, 15),
    "impulse_noise": (0.01, 0.02, 0.05, 0.08, 0.14),
    "defocus_blur": ((0.5, 0.6), (1, 0.1), (1.5, 0.1), (2.5, 0.01), (3, 0.1)),
    "glass_blur": ((0.1, 1, 1), (0.5, 1, 1), (0.6, 1, 2), (0.7, 2, 1), (0.9, 2, 2)),
    "motion_blur": ((10, 1), (10, 1.5), (10, 2), (10, 2.5), (12, 3)),
    "zoom_blur": _zooms((1, 1.06, 0.01), (1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.01), (1, 1.26, 0.01)),
    "snow": ((0.1, 0.2, 1, 0.6, 8, 3, 0.8), (0.1, 0.2, 1, 0.5, 10, 4, 0.8), (0.15, 0.3, 1.75, 0.55, 10, 4, 0.7),
             (0.25, 0.3, 2.25, 0.6, 12, 6, 0.65), (0.3, 0.3, 1.25, 0.65, 14, 12, 0.6)),
    "frost": ((1, 0.3), (0.9, 0.4), (0.8, 0.45), (0.75, 0.5), (0.7, 0.55)),
    "fog": ((0.4, 3), (0.7, 3), (1, 2.5), (1.5, 2), (2, 1.75)),
    "brightness": (0.1, 0.2, 0.3, 0.4, 0.5),
    "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
    "elastic_transform": _scaled(64, ((0, 0, 0.08), (0.05, 0.3, 0.06), (0.1, 0.08, 0.06), (0.1, 0.03, 0.03),
                                      (0.16, 0.03, 0.02))),
    "pixelate": (0.9, 0.8, 0.7, 0.6, 0.5),
    "jpeg_compression": (65, 58, 50, 40, 25),
    "speckle_noise": (0.15, 0.2, 0.25, 0.3, 0.35),
    "gaussian_blur": (0.5, 0.75, 1, 1.25, 1.5),
    "spatter": ((0.62, 0.1, 0.7, 0.7, 0.6, 0), (0.65, 0.1, 0.8, 0.7, 0.6, 0), (0.65, 0.3, 1, 0.69, 0.6, 0),
                (0.65, 0.1, 0.7, 0.68, 0.6, 1), (0.65, 0.1, 0.5, 0.67, 0.6, 1)),
    "saturate": ((0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (30, 0.2)),
}
_IMAGENET = {
    "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),
    "shot_noise": (60, 25, 12, 5, 3),
    "impulse_noise": (0.03, 0.06, 0.09, 0.17, 0.27),
    "defocus_blur": ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)),
    "glass_blur": ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)),
    "motion_blur": ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
    "zoom_blur": _zooms((1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.02), (1, 1.26, 0.02), (1, 1.31, 0.03)),
    "snow": ((0.1, 0.3, 3, 0.5, 10, 4, 0.8), (0.2, 0.3, 2, 0.5, 12, 4, 0.7), (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
             (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)),
    "frost": ((1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)),
    "fog": ((1.5, 2), (2, 2), (2.5, 1.7), (2.5, 1.5), (3, 1.4)),
    "brightness": (0.1, 0.2, 0.3, 0.4, 0.5),
    "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
    "elastic_transform": _scaled(244, ((2, 0.7, 0.1), (2, 0.08, 0.2), (0.05, 0.01, 0.02), (0.07, 0.01, 0.02),
                                       (0.12, 0.01, 0.02))),
    "pixelate": (0.6, 0.5, 0.4, 0.3, 0.25),
    "jpeg_compression": (25, 18, 15, 10, 7),
    "speckle_noise": (0.15, 0.2, 0.35, 0.45, 0.6),
    "gaussian_blur": (1, 2, 3, 4, 6),
    "spatter": ((0.65, 0.3, 4, 0.69, 0.6, 0), (0.65, 0.3, 3, 0.68, 0.6, 0), (0.65, 0.3, 2, 0.68, 0.5, 0),
                (0.65, 0.3, 1, 0.65, 1.5, 1), (0.67, 0.4, 1, 0.65, 1.5, 1)),
    "saturate": ((0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2)),
}
CONSTANTS: Mapping[str, Mapping[str, tuple]] = MappingProxyType({
    "cifar": MappingProxyType(_CIFAR), "tiny-imagenet": MappingProxyType(_TINY_IMAGENET),
    "imagenet": MappingProxyType(_IMAGENET)})

# (name, group, benchmark, random): the 15 benchmark corruptions in the reference scripts' order, then the 4 extra
# (held-out / "validation") ones. spatter: the references group it with weather (imagecorruptions puts it under
# "weather"); some write-ups call it digital. We follow the references.
_KINDS = (
    ("gaussian_noise", "noise", True, True), ("shot_noise", "noise", True, True),
    ("impulse_noise", "noise", True, True), ("defocus_blur", "blur", True, False),
    ("glass_blur", "blur", True, True), ("motion_blur", "blur", True, True), ("zoom_blur", "blur", True, False),
    ("snow", "weather", True, True), ("frost", "weather", True, True), ("fog", "weather", True, True),
    ("brightness", "weather", True, False), ("contrast", "digital", True, False),
    ("elastic_transform", "digital", True, True), ("pixelate", "digital", True, False),
    ("jpeg_compression", "digital", True, False),
    ("speckle_noise", "noise", False, True), ("gaussian_blur", "blur", False, False),
    ("spatter", "weather", False, True), ("saturate", "digital", False, False),
)
_SPECS = tuple(CorruptionSpec(n, g, b, r, MappingProxyType({k: CONSTANTS[k][n] for k in REGIMES}))
               for n, g, b, r in _KINDS)

CORRUPTIONS: Mapping[str, CorruptionSpec] = MappingProxyType({s.name: s for s in _SPECS})
BENCHMARK: tuple = tuple(s.name for s in _SPECS if s.benchmark)
EXTRA: tuple = tuple(s.name for s in _SPECS if not s.benchmark)
ALL: tuple = BENCHMARK + EXTRA
GROUPS: Mapping[str, tuple] = MappingProxyType(
    {g: tuple(s.name for s in _SPECS if s.group == g) for g in GROUP_NAMES}
)
DETERMINISTIC: tuple = tuple(s.name for s in _SPECS if not s.random)

_SETS = {"benchmark": BENCHMARK, "extra": EXTRA, "all": ALL}


def _valid_words() -> str:
    return (
        "valid corruptions: " + ", ".join(ALL) + "; groups: " + ", ".join(GROUP_NAMES) + "; sets: benchmark, extra, all"
    )


def get_spec(name: str) -> CorruptionSpec:
    """The spec of one corruption; CorruptionError (listing the valid names) for anything else."""
    spec = CORRUPTIONS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise CorruptionError(f"unknown corruption {name!r}; {_valid_words()}")
    return spec


def resolve_corruptions(spec: str | Iterable[str]) -> list[str]:
    """Expand a corruption spec into an ordered, duplicate-free list of names.

    Accepts a comma-separated string or a list whose items may be corruption names, group names
    (noise, blur, weather, digital), ``benchmark``, ``extra`` or ``all``. Order: as given, each group/set
    expanded in registry order.
    """
    if isinstance(spec, str):
        words = [w.strip() for w in spec.split(",")]
    else:
        try:
            words = [w.strip() if isinstance(w, str) else w for w in spec]
        except TypeError:
            raise CorruptionError(f"corruption spec must be a string or a list of strings, got {spec!r}") from None
    out: list[str] = []
    for w in words:
        if w == "" or w is None:
            continue
        if not isinstance(w, str):
            raise CorruptionError(f"unknown corruption {w!r}; {_valid_words()}")
        key = w.lower()
        if key in _SETS:
            names = _SETS[key]
        elif key in GROUPS:
            names = GROUPS[key]
        elif key in CORRUPTIONS:
            names = (key,)
        else:
            raise CorruptionError(f"unknown corruption {w!r}; {_valid_words()}")
        out.extend(n for n in names if n not in out)
    if not out:
        raise CorruptionError(f"no corruption given; {_valid_words()}")
    return out


SEVERITY_RULE = "severity must be in 1..5 (one, a list 1,3,5, a range 1-5, or all)"
_ALL_SEVERITIES = (1, 2, 3, 4, 5)


def _sev_error(spec, why: str = "") -> CorruptionError:
    return CorruptionError(f"{SEVERITY_RULE}{why}, got {spec!r}")


def _one_severity(v, spec) -> int:
    """One severity (an int, an integer-like object or a string of digits) in 1..5."""
    if isinstance(v, bool):
        raise _sev_error(spec)
    if isinstance(v, str):
        if not re.fullmatch(r"\s*\d+\s*", v):
            raise _sev_error(spec)
        s = int(v)
    elif hasattr(v, "__index__"):
        s = int(v.__index__())
    else:
        raise _sev_error(spec)
    if not 1 <= s <= 5:
        raise _sev_error(spec)
    return s


def _severity_word(word: str, spec) -> list[int]:
    """One comma-free word: ``all``, a range ``lo-hi`` or one severity."""
    w = word.strip().lower()
    if w == "all":
        return list(_ALL_SEVERITIES)
    m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", w)
    if m is None:
        return [_one_severity(w, spec)]
    lo, hi = _one_severity(m.group(1), spec), _one_severity(m.group(2), spec)
    if lo > hi:
        raise _sev_error(spec, " (an empty range)")
    return list(range(lo, hi + 1))


def parse_severities(spec, *, keep_order: bool = False) -> list[int]:
    """The one severity rule: ``3``, ``"3"``, ``"1,3,5"``, ``"1-5"``, ``"all"``, ``"5, 1-2"``, or a list of those
    (``[1, 3]``, ``["1-2", 5]``) -> severities in 1..5.

    Sorted and duplicate-free by default; ``keep_order=True`` keeps the order given (the order in which a writer
    stacks its blocks) and refuses a severity given twice. Anything else: :class:`CorruptionError` with the rule.
    """
    if isinstance(spec, str):
        words = [w for w in spec.split(",") if w.strip()]
    elif isinstance(spec, (list, tuple, set, frozenset)):
        words = list(spec)
    else:
        words = [spec]
    out: list[int] = []
    for w in words:
        out += _severity_word(w, spec) if isinstance(w, str) else [_one_severity(w, spec)]
    if not out:
        raise _sev_error(spec)
    if not keep_order:
        return sorted(set(out))
    if len(set(out)) != len(out):
        raise _sev_error(spec, "; severities repeat")
    return out


def check_severity(severity) -> int:
    """One severity as an int in 1..5; CorruptionError (the rule of :func:`parse_severities`) otherwise."""
    return _one_severity(severity, severity)


# --- imagecorruptions-compatible subsets ------------------------------------------------------------------
# As in the imagecorruptions package: "common" = the 15 benchmark corruptions, "validation" = the 4 extra ones,
# "all" = both (19, in the reference order, so a position in ALL is imagecorruptions' ``corruption_number``),
# and the four groups restricted to the 15 benchmark corruptions (e.g. "noise" has no speckle_noise there;
# use GROUPS or resolve_corruptions("noise") for the group with its extra member).
SUBSETS: Mapping[str, tuple] = MappingProxyType(
    {
        "common": BENCHMARK,
        "validation": EXTRA,
        "all": ALL,
        **{g: tuple(n for n in BENCHMARK if CORRUPTIONS[n].group == g) for g in GROUP_NAMES},
    }
)


def get_corruption_names(subset: str = "common") -> list[str]:
    """Corruption names of a subset, as imagecorruptions' function of the same name: ``common`` (15),
    ``validation`` (4), ``all`` (19), ``noise`` / ``blur`` / ``weather`` / ``digital`` (the benchmark
    corruptions of that group)."""
    names = SUBSETS.get(subset) if isinstance(subset, str) else None
    if names is None:
        raise CorruptionError(f"unknown corruption subset {subset!r}; valid subsets: {', '.join(SUBSETS)}")
    return list(names)
