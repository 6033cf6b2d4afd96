"""Finding dataset files under a data root, and one-line errors that say where files must go.

Every loader looks in the data root itself and in a few dataset sub-folders (``<root>/cifar10``,
``<root>/text``, ...), so ``--data-root`` may point at a folder of datasets or at one dataset's folder.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from robustbench_dgsa.util.errors import DataError

DEFAULT_DATA_ROOT = "data"
#: where the frost photographs sit under a data root (``<root>/corruptions/frost``)
FROST_SUBDIR = ("corruptions", "frost")


def resolve_root(data_root: str | os.PathLike | None) -> Path:
    """``data_root``, else ``$DGSA_DATA_ROOT``, else ``./data``; ``~`` expanded."""
    if data_root is None or str(data_root) == "":
        data_root = os.environ.get("DGSA_DATA_ROOT") or DEFAULT_DATA_ROOT
    return Path(data_root).expanduser()


def frost_dir_for(frost_dir: str | os.PathLike | None, data_root: str | os.PathLike | None) -> Path | None:
    """The one rule for frost's photographs, used by every command: ``frost_dir`` when given, else
    ``<data_root>/corruptions/frost`` when a data root is given and that folder exists, else None (the
    corruptions library's own lookup: an installed imagecorruptions, else a labelled procedural substitute)."""
    if frost_dir is not None:
        return Path(frost_dir).expanduser()
    if data_root is None or str(data_root) == "":
        return None
    guess = Path(data_root).expanduser().joinpath(*FROST_SUBDIR)
    return guess if guess.is_dir() else None


def bases(root: Path, subdirs: Sequence[str]) -> list[Path]:
    """``root`` and ``root/<sub>`` for each sub-folder that exists (in that order, no duplicates)."""
    out: list[Path] = []
    for p in [root, *(root / s for s in subdirs)]:
        if p.is_dir() and p not in out:
            out.append(p)
    return out


def find_first(places: Iterable[Path], names: Sequence[str], *, kind: str = "any") -> Path | None:
    """First ``place/name`` that exists (``kind``: "file", "dir" or "any")."""
    for place in places:
        for name in names:
            p = place / name
            if (kind == "file" and p.is_file()) or (kind == "dir" and p.is_dir()) or \
                    (kind == "any" and p.exists()):
                return p
    return None


def find_misplaced(root: Path, markers: Sequence[str], *, max_depth: int = 4, max_entries: int = 20000,
                   skip: Sequence[Path] = ()) -> Path | None:
    """A file or folder named like one of ``markers`` somewhere below ``root`` (bounded search), or None.

    Hits directly inside a folder of ``skip`` (the places the loader searched) are not misplaced.
    """
    if not root.is_dir():
        return None
    wanted = set(markers)
    skipped = {Path(p) for p in skip}
    seen = 0
    root_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).parts) - root_depth
        for name in list(dirnames) + filenames:
            if name in wanted and Path(dirpath) not in skipped:
                return Path(dirpath) / name
        seen += len(dirnames) + len(filenames)
        if seen > max_entries:
            return None
        if depth >= max_depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return None


def missing_error(name: str, root: Path, hint: str, *, markers: Sequence[str] = (),
                  downloadable: bool = False, looked: Sequence[Path] = ()) -> DataError:
    """A one-line DataError: what was not found, where to put it, and where a misplaced copy was seen."""
    if not root.exists():
        where = f"data root {root} does not exist"
    else:
        where = f"files not found under {root}"
        if looked:
            where += " (looked in " + ", ".join(str(p) for p in looked) + ")"
    msg = f"{name}: {where}; put them at {hint.replace('<root>', str(root))}"
    found = find_misplaced(root, markers, skip=looked) if markers else None
    if found is not None:
        msg += f"; found {found.name!r} at {found}, which is not where the loader looks: move it as shown"
    if downloadable:
        msg += "; or pass download=True to fetch them when online"
    return DataError(" ".join(msg.split()), options="download")
