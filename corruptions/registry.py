"""The 19 CIFAR-C corruptions: names, groups, severity constants (CIFAR values) and spec parsing.

The constants are exactly those of the reference generator ``make_cifar_c.py`` (hendrycks/robustness, 2019),
as tabulated in ``docs/CORRUPTIONS.md`` §2. ``CONSTANTS_VERSION`` names this table; change it whenever a
constant or an algorithm changes so that regenerated files can be told apart.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from .errors import CorruptionError

CONSTANTS_VERSION = "cifar-c-2019.1"

GROUP_NAMES = ("noise", "blur", "weather", "digital")


@dataclass(frozen=True)
class CorruptionSpec:
    """One corruption: its file/function name, group, benchmark membership, randomness and 5 constants."""

    name: str
    group: str  # "noise" | "blur" | "weather" | "digital"
    benchmark: bool  # one of the 15 benchmark corruptions (else one of the 4 extra)
    random: bool  # draws random numbers (keyed per image); False = bit-reproducible
    params: tuple  # severity 1..5 constants, CIFAR values

    def param(self, severity: int):
        return self.params[severity - 1]


def _zoom_factors(stop: float) -> tuple:
    # np.arange(1, stop, 0.01) as the reference builds it (float arange: severities 1 and 2 include the
    # endpoint). Kept as the exact float64 values arange produces.
    import numpy as np

    return tuple(float(v) for v in np.arange(1, stop, 0.01))


_IMSIZE = 32  # elastic_transform's constants are IMSIZE * factor with IMSIZE hard-coded to 32

_SPECS = (
    # --- the 15 benchmark corruptions, in the reference script's order ---
    CorruptionSpec("gaussian_noise", "noise", True, True, (0.04, 0.06, 0.08, 0.09, 0.10)),
    CorruptionSpec("shot_noise", "noise", True, True, (500, 250, 100, 75, 50)),
    CorruptionSpec("impulse_noise", "noise", True, True, (0.01, 0.02, 0.03, 0.05, 0.07)),
    CorruptionSpec(
        "defocus_blur", "blur", True, False, ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1))
    ),
    CorruptionSpec(
        "glass_blur", "blur", True, True, ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2))
    ),
    CorruptionSpec("motion_blur", "blur", True, True, ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5))),
    CorruptionSpec(
        "zoom_blur",
        "blur",
        True,
        False,
        tuple(_zoom_factors(s) for s in (1.06, 1.11, 1.16, 1.21, 1.26)),
    ),
    CorruptionSpec(
        "snow",
        "weather",
        True,
        True,
        (
            (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
            (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
            (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
            (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
            (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
        ),
    ),
    CorruptionSpec("frost", "weather", True, True, ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45))),
    CorruptionSpec("fog", "weather", True, True, ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75))),
    CorruptionSpec("brightness", "weather", True, False, (0.05, 0.1, 0.15, 0.2, 0.3)),
    CorruptionSpec("contrast", "digital", True, False, (0.75, 0.5, 0.4, 0.3, 0.15)),
    CorruptionSpec(
        "elastic_transform",
        "digital",
        True,
        True,
        (
            (_IMSIZE * 0, _IMSIZE * 0, _IMSIZE * 0.08),
            (_IMSIZE * 0.05, _IMSIZE * 0.2, _IMSIZE * 0.07),
            (_IMSIZE * 0.08, _IMSIZE * 0.06, _IMSIZE * 0.06),
            (_IMSIZE * 0.1, _IMSIZE * 0.04, _IMSIZE * 0.05),
            (_IMSIZE * 0.1, _IMSIZE * 0.03, _IMSIZE * 0.03),
        ),
    ),
    CorruptionSpec("pixelate", "digital", True, False, (0.95, 0.9, 0.85, 0.75, 0.65)),
    CorruptionSpec("jpeg_compression", "digital", True, False, (80, 65, 58, 50, 40)),
    # --- the 4 extra (held-out / "validation") corruptions ---
    CorruptionSpec("speckle_noise", "noise", False, True, (0.06, 0.1, 0.12, 0.16, 0.2)),
    CorruptionSpec("gaussian_blur", "blur", False, False, (0.4, 0.6, 0.7, 0.8, 1)),
    # spatter: the reference groups it with weather (imagecorruptions puts it under "weather"); some
    # write-ups call it digital. We follow the reference grouping.
    CorruptionSpec(
        "spatter",
        "weather",
        False,
        True,
        (
            (0.62, 0.1, 0.7, 0.7, 0.5, 0),
            (0.65, 0.1, 0.8, 0.7, 0.5, 0),
            (0.65, 0.3, 1, 0.69, 0.5, 0),
            (0.65, 0.1, 0.7, 0.69, 0.6, 1),
            (0.65, 0.1, 0.5, 0.68, 0.6, 1),
        ),
    ),
    CorruptionSpec("saturate", "digital", False, False, ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2))),
)

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
