"""Read one corruption (all severities or one block) from an official or regenerated CIFAR-C directory."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import CorruptionError
from .digest import _hash_file
from .manifest import LABELS_NAME, Manifest, check_manifest, read_manifest
from .official import OFFICIAL_MD5, OFFICIAL_NAMES, OFFICIAL_SEVERITIES


def _official_names() -> list[str]:
    try:
        from .. import registry
        return list(registry.ALL)
    except ImportError:
        return list(OFFICIAL_NAMES)


def list_available(directory: str | os.PathLike) -> dict[str, list[int]]:
    """``{corruption: [severities]}`` present in an official or regenerated directory (registry order)."""
    d = Path(directory)
    if not d.is_dir():
        raise CorruptionError(f"{d}: no such directory")
    man = read_manifest(d)
    if man is not None:
        return {c: man.severities for c in man.corruptions if (d / man.file_of(c)).is_file()}
    return {c: list(OFFICIAL_SEVERITIES) for c in _official_names() if (d / f"{c}.npy").is_file()}


def _normalise_dataset(dataset: str | None) -> str | None:
    if dataset is None:
        return None
    key = str(dataset).lower().replace("-", "").replace("_", "")
    key = key[:-1] if key.endswith("c") and key not in ("cifar10", "cifar100") else key
    if key not in OFFICIAL_MD5:
        raise CorruptionError(f"dataset must be cifar10 or cifar100 (for the md5 tables), got {dataset!r}")
    return key


def load_corrupted(directory: str | os.PathLike, corruption: str, severity: int | None = None, *,
                   check_md5: bool = False, n_clean: int | None = None, dataset: str | None = None,
                   verify: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Images and labels of one corruption (all blocks, or one ``severity``) from an official CIFAR-10-C /
    CIFAR-100-C directory or a regenerated one.

    Returns ``(x, y)``: x uint8 (rows, H, W, 3) and y int64 (rows,), or y None for a regenerated set made
    without labels. Only the needed block is read (memory-mapped file). Regenerated directories take their
    severities and N from ``manifest.json``; official ones hold severities 1..5 in blocks of ``n_clean`` rows
    (default: a fifth of the file, 10,000 for the published files).

    ``check_md5``: official - compare file md5s with the published tables (``dataset`` "cifar10"/"cifar100",
    default decided by labels.npy); regenerated - re-hash and compare SHA-256 with the manifest.
    ``verify`` (default): a regenerated directory's file and labels are checked against the manifest's SHA-256
    before use (digest cached by path, size, mtime, ctime and inode); a mismatch raises CorruptionError naming the
    file.
    """
    d = Path(directory)
    x, sevs, n, y_all = _open_checked(d, corruption, check_md5=check_md5, n_clean=n_clean, verify=verify)
    lo, hi = _block_rows(d, severity, sevs, n, int(x.shape[0]))
    if check_md5 and read_manifest(d) is None:
        _check_official_md5(d, corruption, dataset, y_all)

    xs = np.array(x[lo:hi])
    ys = None if y_all is None else np.asarray(y_all[lo:hi]).astype(np.int64)
    return xs, ys


def check_corrupted(directory: str | os.PathLike, corruption: str, severities=None, *,
                    verify: bool = True) -> np.ndarray | None:
    """Check, without reading the images, that ``directory`` can serve ``corruption`` at ``severities`` (all
    when None): the checks of :func:`load_corrupted` (the file is there and listed; with ``verify``, file and
    labels match the manifest's SHA-256; uint8 (rows, H, W, 3); the severities are there; the labels are tiled
    once per block). Returns the labels of one block (int64; None for a regenerated set without labels), so a
    caller can validate a whole request before any work. CorruptionError naming the file otherwise."""
    d = Path(directory)
    x, sevs, n, y_all = _open_checked(d, corruption, verify=verify)
    for s in (sevs if severities is None else severities):
        _block_rows(d, s, sevs, n, int(x.shape[0]))
    return None if y_all is None else np.asarray(y_all[:n]).astype(np.int64)


def _open_checked(d: Path, corruption: str, *, check_md5: bool = False, n_clean: int | None = None,
                  verify: bool = True):
    """(images memory-mapped, severities, N, labels memory-mapped or None) of one corruption file, checked."""
    if not d.is_dir():
        raise CorruptionError(f"{d}: no such directory")
    if not isinstance(corruption, str) or not corruption:
        raise CorruptionError(f"corruption must be a name, got {corruption!r}")
    man, path = _corruption_file(d, corruption)
    if man is not None and (verify or check_md5):
        check_manifest(d, [path.name] + ([man.labels_file] if man.has_labels else []), cached=not check_md5)
    try:
        x = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise CorruptionError(f"{path}: not a readable .npy file ({e})") from None
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[-1] != 3:
        raise CorruptionError(f"{path}: expected uint8 (rows, H, W, 3), got {x.dtype} {x.shape}")
    rows = int(x.shape[0])
    sevs, n = _severity_blocks(path, man, rows, n_clean)
    return x, sevs, n, _load_tiled_labels(d, man, path, rows, sevs, n)


def _corruption_file(d: Path, corruption: str) -> tuple[Manifest | None, Path]:
    """The directory's manifest (None for an official one) and the file holding ``corruption`` in it."""
    man = read_manifest(d)
    path = d / (man.file_of(corruption) if man is not None else f"{corruption}.npy")
    if not path.is_file():
        have = list_available(d)
        valid = _official_names()
        why = "unknown corruption" if corruption not in valid else "not in this directory"
        raise CorruptionError(f"{path}: {why}; available here: {', '.join(have) or 'none'}"
                              + ("" if corruption in valid else f"; valid names: {', '.join(valid)}"))
    if man is not None and corruption not in man.corruptions:
        raise CorruptionError(f"{path} is not listed in {man.path} (left from another run?); available: "
                              f"{', '.join(man.corruptions)}")
    return man, path


def _severity_blocks(path: Path, man: Manifest | None, rows: int, n_clean: int | None) -> tuple[list[int], int]:
    """``(severities, N)`` of a file with ``rows`` rows: from the manifest, or the official 5 blocks."""
    if man is not None:
        sevs, n = man.severities, man.n
        if n_clean is not None and int(n_clean) != n:
            raise CorruptionError(f"n_clean={n_clean} contradicts the manifest's n={n}")
        if rows != len(sevs) * n:
            raise CorruptionError(f"{path}: {rows} rows, the manifest says {len(sevs)} severities x {n}")
        return sevs, n
    sevs = list(OFFICIAL_SEVERITIES)
    if n_clean is None:
        if rows % len(sevs):
            raise CorruptionError(f"{path}: {rows} rows is not 5 severity blocks of equal size (official "
                                  f"files have 50,000 = 5 x 10,000)")
        n = rows // len(sevs)
    else:
        n = int(n_clean)
        if n < 1 or rows != len(sevs) * n:
            raise CorruptionError(f"{path}: {rows} rows, expected 5 severity blocks of {n} = {5 * n}")
    return sevs, n


def _block_rows(d: Path, severity: int | None, sevs: list[int], n: int, rows: int) -> tuple[int, int]:
    """Row range ``[lo, hi)`` of one severity's block (all rows for None)."""
    if severity is None:
        return 0, rows
    if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)) or int(severity) not in sevs:
        raise CorruptionError(f"severity {severity!r} is not in {d} (it holds severities "
                              f"{','.join(map(str, sevs))})")
    b = sevs.index(int(severity))
    return b * n, (b + 1) * n


def _load_tiled_labels(d: Path, man: Manifest | None, path: Path, rows: int, sevs: list[int], n: int):
    """The labels file memory-mapped (None for a regenerated set without labels), checked to hold the same N
    labels once per severity block."""
    labels_path = d / (man.labels_file or LABELS_NAME if man is not None else LABELS_NAME)
    if man is not None and not man.has_labels:
        return None
    if not labels_path.is_file():
        raise CorruptionError(f"{labels_path}: missing (the official layout has the labels tiled once per "
                              f"severity block)")
    try:
        y_all = np.load(labels_path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise CorruptionError(f"{labels_path}: not a readable .npy file ({e})") from None
    if y_all.ndim != 1 or y_all.dtype.kind not in "iu":
        raise CorruptionError(f"{labels_path}: expected a 1-D integer array, got {y_all.dtype} {y_all.shape}")
    if len(y_all) != rows:
        if len(y_all) == n and len(sevs) > 1:
            raise CorruptionError(
                f"{labels_path} has {len(y_all)} entries, one block, but {path.name} has {rows} rows "
                f"({len(sevs)} severity blocks of {n}): the official labels.npy holds the labels tiled once "
                f"per block ({rows:,} entries for {n:,} images; not {n:,}). Replace it with the tiled "
                f"file, e.g. np.save('labels.npy', np.tile(labels, {len(sevs)}))")
        raise CorruptionError(f"{labels_path} has {len(y_all)} entries but {path.name} has {rows} rows "
                              f"({len(sevs)} severity blocks of {n})")
    first = np.asarray(y_all[:n])
    for b in range(1, len(sevs)):
        if not np.array_equal(np.asarray(y_all[b * n:(b + 1) * n]), first):
            raise CorruptionError(f"{labels_path}: block {b + 1} differs from block 1; the labels must be the "
                                  f"same {n} labels repeated once per severity block")
    return y_all


def _check_official_md5(d: Path, corruption: str, dataset: str | None, y_all) -> None:
    key = _normalise_dataset(dataset)
    labels_md5 = _hash_file(d / LABELS_NAME, "md5")
    if key is None:
        key = next((k for k, t in OFFICIAL_MD5.items() if t["labels"] == labels_md5), None)
        if key is None:
            key = "cifar100" if y_all is not None and len(y_all) and int(np.max(y_all)) >= 10 else "cifar10"
    table = OFFICIAL_MD5[key]
    if corruption not in table:
        raise CorruptionError(f"no published md5 for {corruption!r}")
    for name, got in ((LABELS_NAME, labels_md5), (f"{corruption}.npy", None)):
        got = got or _hash_file(d / name, "md5")
        want = table[name[:-4]]
        if got != want:
            raise CorruptionError(f"{d / name}: md5 {got} is not the published {key.upper()}-C md5 {want} "
                                  f"(sums from rai_toolbox, not independently verified)")

