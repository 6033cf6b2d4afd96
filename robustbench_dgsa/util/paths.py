"""File names built from data: the one slug function.

Every file or folder name that contains a value from the data or the user (a dataset, model, class, condition,
run or job id) goes through :func:`safe_name`, so it is a single path component that stays inside the folder
it is joined to: no separators, no ``..``, no absolute paths, no control or non-ASCII characters, bounded
length. A name that is already safe is returned unchanged (``cifar10``, ``vit``, ``synthetic-vision``); any
other name becomes a readable ASCII slug plus a short hash of the original, so two different names never share
a file (``folder:/data/a/b`` and ``folder:/data/a_b`` differ). The function is idempotent.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._+-]+")
MAX_LEN = 100
# Names that Windows refuses as file names, whatever the extension.
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def is_safe_name(name: str, max_len: int = MAX_LEN) -> bool:
    """True for a name :func:`safe_name` keeps as it is."""
    return (bool(_SAFE.fullmatch(name)) and ".." not in name and len(name) <= max_len
            and name.split(".")[0].lower() not in _RESERVED)


def safe_name(name: object, max_len: int = MAX_LEN, default: str = "unnamed") -> str:
    """``name`` as one safe path component (see the module docstring). ``default``: the readable part when
    nothing of the name survives (``..``, ``/``, an empty name); the hash still tells such names apart."""
    text = str(name)
    if is_safe_name(text, max_len):
        return text
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _UNSAFE_RUN.sub("_", ascii_text)
    slug = re.sub(r"\.{2,}", ".", slug).strip("._+-")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    slug = slug[: max(1, max_len - 9)].rstrip("._+-") or default
    if slug.split(".")[0].lower() in _RESERVED:
        slug = f"file_{slug}"
    return f"{slug}-{digest}"


def inside(folder: str | Path, *names: object) -> Path:
    """``folder / safe_name(n1) / safe_name(n2) ...``: a path built from data that cannot leave ``folder``."""
    path = Path(folder)
    for n in names:
        path = path / safe_name(n)
    return path
