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


def relative_to(path: str | Path, folder: str | Path) -> str:
    """``path`` written relative to ``folder`` (``../runs/x/checkpoint.safetensors``; forward slashes), so a
    record holds no absolute path of the machine that wrote it; a relative ``path`` is read from the current
    folder. On another drive (Windows), the path as given."""
    import os
    try:
        rel = os.path.relpath(Path(path).resolve(), Path(folder).resolve())
    except ValueError:
        return str(path)
    return rel.replace(os.sep, "/")


def portable_paths(record: object, folder: str | Path) -> object:
    """``record`` (JSON-like) with every absolute path string in it written relative to ``folder``
    (:func:`relative_to`); other values unchanged."""
    if isinstance(record, dict):
        return {k: portable_paths(v, folder) for k, v in record.items()}
    if isinstance(record, list):
        return [portable_paths(v, folder) for v in record]
    if isinstance(record, str) and len(record) > 1 and Path(record).is_absolute() and "\n" not in record:
        return relative_to(record, folder)
    return record


def command_line(argv: list[str]) -> str:
    """The command that ran, without the machine's install path: ``python -m robustbench_dgsa …`` when it ran
    through the package's ``__main__.py`` (``python -m``, or the path of that file), else the program's name
    (``dgsa-bench …``) then the arguments as given."""
    if not argv:
        return ""
    prog = Path(argv[0])
    if prog.name == "__main__.py" and prog.parent.name:
        head = f"python -m {prog.parent.name}"
    elif prog.name in ("-c", "-m", ""):
        head = "python"
    else:
        head = prog.name
    return " ".join([head, *argv[1:]])
