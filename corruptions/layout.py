"""The CIFAR-10-C / CIFAR-100-C file layout: write it (regeneration), read it (official or regenerated), compare.

Layout (CORRUPTIONS.md section 3): one ``<corruption>.npy`` per corruption, uint8 (S*N, H, W, 3) HWC RGB with
the S severities stacked in blocks of N rows (official: S = 5 blocks of 10,000, severities 1..5), and
``labels.npy``, the N labels tiled once per block (uint8 in the official files).

A regenerated directory also has ``manifest.json`` (written last): the constants version, seed, severities and
their order, N, frost texture source, per-file SHA-256/shape/dtype, library versions, input hashes and the
phrase "CIFAR-10-C-style (regenerated)" - regenerated data is never the official CIFAR-10-C, because 11 of the
19 corruptions are random and the reference generator had no seed.

Writing is streamed and all-or-nothing: every output is filled chunk by chunk in a memory map under a hidden
temporary name in the output folder, renamed only when all of them are complete, and the manifest comes last.
An interrupted run leaves hidden ``.*.partial`` files at most, never a final-named file that looks complete;
each run holds an advisory lock on its own partial files, and the next run into the folder deletes unlocked
(dead) ones. The manifest is read, merged and written under an exclusive lock on the folder, so concurrent
runs into one folder end with one manifest listing every file.

Only a set of 10,000 images per block with severities 1..5 uses the official file names. Any other set (a
``--limit``, a subset or reordering of severities) is written as ``<corruption>.n<N>.s<severities>.npy`` and
``labels.n<N>.s<severities>.npy`` with ``"official_layout": false`` in the manifest: a reader that assumes
5 x 10,000 rows per ``<corruption>.npy`` fails (no such file) instead of mixing severities, and
:func:`load_corrupted` reads the names from the manifest.

Reading a regenerated directory checks each file against the manifest's SHA-256; the digests are cached by
path, size and modification time (``$CORRUPTIONS_CACHE`` or the user cache folder) so re-reads are free.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .errors import CorruptionError

try:  # advisory locks (POSIX); elsewhere runs are not serialised and stale partials are kept
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

MANIFEST_NAME = "manifest.json"
LABELS_NAME = "labels.npy"
MANIFEST_FORMAT = "corruptions-layout/1"
REGENERATED_PHRASE = "CIFAR-10-C-style (regenerated)"
OFFICIAL_SEVERITIES = (1, 2, 3, 4, 5)
OFFICIAL_BLOCK = 10_000

# md5 of the extracted official files, as published by rai_toolbox (CORRUPTIONS.md section 3; not independently
# verified).
CIFAR10C_MD5 = {
    "brightness": "0a81ef75e0b523c3383219c330a85d48",
    "contrast": "3c8262171c51307f916c30a3308235a8",
    "defocus_blur": "7d1322666342a0702b1957e92f6254bc",
    "elastic_transform": "9421657c6cd452429cf6ce96cc412b5f",
    "fog": "7b397314b5670f825465fbcd1f6e9ccd",
    "frost": "31f6ab3bce1d9934abfb0cc13656f141",
    "gaussian_blur": "c33370155bc9b055fb4a89113d3c559d",
    "gaussian_noise": "ecaf8b9a2399ffeda7680934c33405fd",
    "glass_blur": "7361fb4019269e02dbf6925f083e8629",
    "impulse_noise": "2090e01c83519ec51427e65116af6b1a",
    "jpeg_compression": "2b9cc4c864e0193bb64db8d7728f8187",
    "labels": "c439b113295ed5254878798ffe28fd54",
    "motion_blur": "fffa5f852ff7ad299cfe8a7643f090f4",
    "pixelate": "0f14f7e2db14288304e1de10df16832f",
    "saturate": "1cfae0964219c5102abbb883e538cc56",
    "shot_noise": "3a7239bb118894f013d9bf1984be7f11",
    "snow": "bb238de8555123da9c282dea23bd6e55",
    "spatter": "8a5a3903a7f8f65b59501a6093b4311e",
    "speckle_noise": "ef00b87611792b00df09c0b0237a1e30",
    "zoom_blur": "6ea8e63f1c5cdee1517533840641641b",
}
CIFAR100C_MD5 = {
    "brightness": "f22d7195aecd6abb541e27fca230c171",
    "contrast": "322bb385f1d05154ee197ca16535f71e",
    "defocus_blur": "d923e3d9c585a27f0956e2f2ad832564",
    "elastic_transform": "a0792bd6581f6810878be71acedfc65a",
    "fog": "4efc7ebd5e82b028bdbe13048e3ea564",
    "frost": "3a39c6823bdfaa0bf8b12fe7004b8117",
    "gaussian_blur": "5204ba0d557839772ef5a4196a052c3e",
    "gaussian_noise": "ecc4d366eac432bdf25c024086f5e97d",
    "glass_blur": "0bf384f38e5ccbf8dd479d9059b913e1",
    "impulse_noise": "3b3c210ddfa0b5cb918ff4537a429fef",
    "jpeg_compression": "c851b7f1324e1d2ffddeb76920576d11",
    "labels": "bb4026e9ce52996b95f439544568cdb2",
    "motion_blur": "732a7e2e54152ff97c742d4c388c5516",
    "pixelate": "96c00c60f144539e14cffb02ddbd0640",
    "saturate": "c0697e9fdd646916a61e9c312c77bf6b",
    "shot_noise": "b0a1fa6e1e465a747c1b204b1914048a",
    "snow": "0237be164583af146b7b144e73b43465",
    "spatter": "12ccf41d62564d36e1f6a6ada5022728",
    "speckle_noise": "e3f215b1a0f9fd9fd6f0d1cf94a7ce99",
    "zoom_blur": "0204613400c034a81c4830d5df81cb82",
}
OFFICIAL_MD5 = {"cifar10": CIFAR10C_MD5, "cifar100": CIFAR100C_MD5}
# The 19 file names of the official sets, in the reference script's generation order.
OFFICIAL_NAMES = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
                  "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate",
                  "jpeg_compression", "speckle_noise", "gaussian_blur", "spatter", "saturate")

ProgressWrapper = Callable[..., Iterable]
_STALE_MIN_AGE_S = 5.0  # an unlocked partial younger than this may be one a live run is about to lock


def is_official_layout(n: int, severities: Sequence[int]) -> bool:
    """True for 10,000 images per block and severities 1..5 in order: the only sets named like the official."""
    return int(n) == OFFICIAL_BLOCK and [int(s) for s in severities] == list(OFFICIAL_SEVERITIES)


def layout_suffix(n: int, severities: Sequence[int]) -> str:
    """``""`` for the official layout, else ``.n<N>.s<severities>`` (e.g. ``.n500.s135``) for file names."""
    if is_official_layout(n, severities):
        return ""
    return f".n{int(n)}.s{''.join(str(int(s)) for s in severities)}"


# ---------------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class Manifest:
    """A regenerated directory's ``manifest.json`` (``data`` is the parsed JSON). ``skipped``: corruptions a
    ``regenerate`` call found already finished with the same parameters and did not recompute."""
    path: Path
    data: dict
    skipped: tuple = ()

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def corruptions(self) -> list[str]:
        return list(self.data["corruptions"])

    @property
    def severities(self) -> list[int]:
        return [int(s) for s in self.data["severities"]]

    @property
    def n(self) -> int:
        return int(self.data["n"])

    @property
    def seed(self) -> int:
        return int(self.data["seed"])

    @property
    def files(self) -> dict[str, dict]:
        return dict(self.data["files"])

    @property
    def labels_file(self) -> str | None:
        """The labels file this manifest lists (``labels.npy`` or ``labels.n<N>.s<...>.npy``), or None."""
        files = self.data["files"]
        for fname, entry in files.items():
            if isinstance(entry, dict) and entry.get("role") == "labels":
                return fname
        return LABELS_NAME if LABELS_NAME in files else None

    @property
    def has_labels(self) -> bool:
        return self.labels_file is not None

    @property
    def official_layout(self) -> bool:
        if "official_layout" in self.data:
            return bool(self.data["official_layout"])
        return is_official_layout(self.n, self.severities) and all(
            f"{c}.npy" in self.data["files"] for c in self.corruptions)

    def file_of(self, corruption: str) -> str:
        """The file name that holds ``corruption`` in this directory."""
        files = self.data["files"]
        for fname, entry in files.items():
            if isinstance(entry, dict) and entry.get("corruption") == corruption and entry.get("role") != "labels":
                return fname
        if f"{corruption}.npy" in files:
            return f"{corruption}.npy"
        return f"{corruption}{layout_suffix(self.n, self.severities)}.npy"

    @property
    def frost_source(self) -> str | None:
        return self.data.get("frost_source")


def read_manifest(directory: str | os.PathLike) -> Manifest | None:
    """The directory's manifest, or None when it has none (an official directory)."""
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CorruptionError(f"{path}: unreadable manifest ({e})") from None
    missing = [k for k in ("format", "corruptions", "severities", "n", "files", "seed") if k not in data]
    if missing or not str(data.get("format", "")).startswith("corruptions-layout/"):
        raise CorruptionError(f"{path}: not a corruption-layout manifest (missing {', '.join(missing) or 'format'})")
    return Manifest(path, data)


def check_manifest(directory: str | os.PathLike, files: Iterable[str] | None = None, *,
                   cached: bool = False) -> None:
    """Re-hash the files the manifest lists (or only ``files``); CorruptionError on a missing or changed one.

    ``cached``: reuse a digest computed earlier for the same path, size and modification time.
    """
    man = read_manifest(directory)
    if man is None:
        raise CorruptionError(f"{directory}: no {MANIFEST_NAME}")
    wanted = man.files if files is None else {f: man.files[f] for f in files if f in man.files}
    for fname, entry in wanted.items():
        path = man.directory / fname
        if not path.is_file():
            raise CorruptionError(f"{path}: listed in the manifest but missing")
        got = file_sha256(path) if cached else _hash_file(path, "sha256")
        if got != entry["sha256"]:
            raise CorruptionError(f"{path}: contents differ from {man.path.name} (SHA-256 {got[:12]}..., "
                                  f"expected {str(entry['sha256'])[:12]}...); regenerate or restore the file")


# ---------------------------------------------------------------------------------------------- digest cache


def _digest_cache_path() -> Path:
    env = os.environ.get("CORRUPTIONS_CACHE")
    if env:
        return Path(env) / "sha256-cache.json"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dgsa-corruptions" / "sha256-cache.json"


def _read_digest_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_DIGEST_CACHE_MAX = 4096


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, cached by (absolute path, size, mtime_ns): a changed file (new size or mtime) is
    re-hashed. The cache is a small JSON file; if it cannot be written, nothing is cached."""
    p = Path(path).resolve()
    st = p.stat()
    cache_path = _digest_cache_path()
    cache = _read_digest_cache(cache_path)
    key = str(p)
    hit = cache.get(key)
    if isinstance(hit, dict) and hit.get("size") == st.st_size and hit.get("mtime_ns") == st.st_mtime_ns:
        return str(hit.get("sha256"))
    digest = _hash_file(p, "sha256")
    cache[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest, "t": time.time()}
    if len(cache) > _DIGEST_CACHE_MAX:
        keep = sorted(cache.items(), key=lambda kv: kv[1].get("t", 0) if isinstance(kv[1], dict) else 0)
        cache = dict(keep[-_DIGEST_CACHE_MAX:])
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(cache_path, cache)
    except OSError:
        pass
    return digest


# ---------------------------------------------------------------------------------------------- locks


@contextlib.contextmanager
def _folder_lock(directory: Path):
    """Exclusive advisory lock on the folder itself (no lock file left behind); blocks until free."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_partial(path: Path) -> int:
    """Create ``path`` and hold an exclusive advisory lock on it for this run (released on exit, even kill -9)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def clean_stale_partials(directory: str | os.PathLike) -> list[str]:
    """Delete hidden ``.*.partial`` files in ``directory`` that no live run holds (left by a killed run).

    A running writer keeps an exclusive lock on each of its partial files; a file nobody locks (and older than
    a few seconds) is stale. Returns the names removed. Without POSIX locks nothing is removed.
    """
    d = Path(directory)
    removed: list[str] = []
    if fcntl is None or not d.is_dir():
        return removed
    now = time.time()
    for p in d.glob(".*.partial"):
        try:
            if not p.is_file() or now - p.stat().st_mtime < _STALE_MIN_AGE_S:
                continue
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live run owns it
        try:
            p.unlink()
            removed.append(p.name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def library_versions() -> dict[str, str]:
    """Versions of the libraries the corruptions depend on (recorded in every manifest)."""
    import platform
    out = {"python": platform.python_version()}
    dists = {"numpy": ("numpy",), "scipy": ("scipy",), "pillow": ("pillow", "Pillow"), "torch": ("torch",),
             "scikit-image": ("scikit-image",), "imagecorruptions": ("imagecorruptions",),
             "opencv": ("opencv-python-headless", "opencv-python", "opencv-contrib-python",
                        "opencv-contrib-python-headless")}
    for key, names in dists.items():
        for name in names:
            try:
                out[key] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    try:  # the cv2 actually imported (may differ from the wheel metadata)
        import cv2
        out["opencv"] = cv2.__version__
    except Exception:  # noqa: BLE001 - optional
        pass
    return out


# ---------------------------------------------------------------------------------------------- helpers


def _hash_file(path: Path, algo: str, chunk: int = 1 << 22) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _hash_array(a: np.ndarray, rows_per_chunk: int = 4096) -> str:
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}{tuple(a.shape)}".encode())
    for i in range(0, max(len(a), 1), rows_per_chunk):
        h.update(np.ascontiguousarray(a[i:i + rows_per_chunk]).tobytes())
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(obj, indent=2, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def check_images(images: Any, what: str = "images") -> np.ndarray:
    """``images`` as a uint8 (N, H, W, 3) array (no copy); CorruptionError naming the problem otherwise."""
    if not isinstance(images, np.ndarray):
        raise CorruptionError(f"{what} must be a NumPy uint8 array of shape (N, H, W, 3), got {type(images).__name__}")
    if images.dtype != np.uint8:
        raise CorruptionError(f"{what} must be uint8 (0..255), got {images.dtype}")
    if images.ndim != 4 or images.shape[-1] != 3:
        hint = (" (channels first? transpose to (N, H, W, 3))" if images.ndim == 4 and images.shape[1] == 3 else
                " (grayscale: replicate to 3 channels first)" if images.ndim in (3, 4) else "")
        raise CorruptionError(f"{what} must have shape (N, H, W, 3), got {tuple(images.shape)}{hint}")
    if len(images) == 0:
        raise CorruptionError(f"{what} is empty")
    return images


def _check_labels(labels: Any, n: int) -> np.ndarray | None:
    if labels is None:
        return None
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != n:
        raise CorruptionError(f"labels must be a 1-D array of {n} entries (one per image), got shape {y.shape}")
    if y.dtype.kind not in "iu":
        raise CorruptionError(f"labels must be integers, got {y.dtype}")
    if len(y) and y.min() < 0:
        raise CorruptionError("labels must be non-negative integers")
    return y.astype(np.int64)


def _resolve_names(corruptions: str | Sequence[str]) -> list[str]:
    from . import registry
    items = [corruptions] if isinstance(corruptions, str) else list(corruptions)
    out: list[str] = []
    for item in items:
        for name in registry.resolve_corruptions(item):
            if name not in out:
                out.append(name)
    if not out:
        raise CorruptionError(f"no corruption selected; valid: {', '.join(registry.ALL)}")
    return out


def _resolve_severities(severities: str | int | Sequence[int]) -> list[int]:
    from . import registry
    if isinstance(severities, str):
        sevs = list(registry.parse_severities(severities))
    elif isinstance(severities, (int, np.integer)) and not isinstance(severities, bool):
        sevs = [int(severities)]
    else:
        sevs = list(severities)
    for s in sevs:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 1 <= int(s) <= 5:
            raise CorruptionError(f"severity must be an integer 1..5, got {s!r}")
    sevs = [int(s) for s in sevs]
    if len(set(sevs)) != len(sevs):
        raise CorruptionError(f"severities repeat: {sevs}")
    if not sevs:
        raise CorruptionError("no severity given")
    return sevs


def name_list(names: Sequence[str], limit: int = 6) -> str:
    """``a, b, c and 4 more``: keeps one-line error messages short."""
    names = list(names)
    head = ", ".join(names[:limit])
    return head if len(names) <= limit else f"{head} and {len(names) - limit} more"


def _wrap(progress: ProgressWrapper | None, items: list, description: str) -> Iterable:
    if progress is None:
        return items
    return progress(items, total=len(items), description=description)


def _label_dtype(y: np.ndarray) -> np.dtype:
    return np.dtype(np.uint8) if len(y) == 0 or int(y.max()) < 256 else np.dtype(np.int64)


# ---------------------------------------------------------------------------------------------- writing


def regenerate(images: np.ndarray, labels: Any, out_dir: str | os.PathLike, corruptions: str | Sequence[str],
               severities: str | int | Sequence[int], *, seed: int = 0, device: str | None = None,
               frost: Any = None, chunk_size: int = 1000, overwrite: bool = False,
               progress: ProgressWrapper | None = None, description: str = REGENERATED_PHRASE,
               input_description: str | None = None, preflight: bool = True) -> Manifest:
    """Write the official layout for ``images`` (uint8 N×H×W×3) into ``out_dir`` and return its manifest.

    ``corruptions``: names, groups, "benchmark", "extra" or "all" (a string or a list of them).
    ``severities``: ``"1-5"``, ``"1,3"``, an int or a list; blocks are stacked in the order given.
    ``labels``: N integer labels or None; written tiled per block (uint8 when all < 256, as the official file).
    ``frost``: None (default textures), a directory, or a loaded ``FrostTextures``; its ``source`` is recorded.
    ``progress``: optional wrapper ``progress(iterable, total=..., description=...) -> iterable`` (e.g.
    ``robustbench_dgsa.util.progress.track``); the library prints nothing itself.

    Only 10,000 images x severities 1..5 get the official file names (see the module notes).
    An existing output file (or a manifest from a different run) without ``overwrite`` raises CorruptionError
    naming it, and nothing is touched. Into a directory whose manifest has the same inputs, seed, severities,
    constants and library versions, further corruptions are added to that manifest, and corruptions it already
    lists with intact files are skipped (``Manifest.skipped``). Concurrent runs merge under a folder lock.
    Stale partial files of killed runs are deleted first.
    """
    from . import registry

    x, y, names, sevs, seed, out = _check_regenerate_args(images, labels, corruptions, severities, seed,
                                                          chunk_size, out_dir)
    n, h, w = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    plan = _plan_run(x, y, out, names, sevs, seed, overwrite, registry)
    if not plan.todo and not plan.write_labels:
        return Manifest(plan.old.path, plan.old.data, skipped=tuple(plan.skipped))

    frost_obj, frost_source, frost_files = _frost_for(plan.todo, frost)
    if preflight:  # fail fast on one image before any file is created (bad size, missing assets, device)
        _preflight(x, plan.todo, sevs, seed, device, frost_obj)
    n_rows = len(sevs) * n
    _check_disk_space(out, len(plan.todo) * n_rows * h * w * 3 + (n_rows * 8 if y is not None else 0))

    made_dir = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:8]
    staged: dict[str, Path] = {}
    held: list[int] = []
    entries: dict[str, dict] = {}
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    try:
        _write_files(x, out, plan.todo, sevs, plan.suffix, seed, device, frost_obj, chunk_size, progress, token,
                     staged, held, entries, created)
        if plan.write_labels:
            _write_labels(y, len(sevs), out / f".{plan.labels_name}.{token}.partial", plan.labels_name, staged,
                          held, entries, created)
        with _folder_lock(out):  # read-merge-write: a concurrent run's entries are kept
            cur, same, data = _merge_and_commit(out, overwrite, plan, entries, staged, description,
                                                input_description, frost_source, frost_files, device, created,
                                                registry)
    except BaseException:
        _discard_staged(staged, out, made_dir)
        raise
    finally:
        for fd in held:
            os.close(fd)
    if cur is not None and not same:
        _warn_left_over(out, cur, data)
    return Manifest(out / MANIFEST_NAME, data, skipped=tuple(plan.skipped))


def _check_regenerate_args(images, labels, corruptions, severities, seed, chunk_size, out_dir):
    """The checked inputs of :func:`regenerate`: ``(x, y, names, sevs, seed, out)``."""
    x = check_images(images)
    y = _check_labels(labels, int(x.shape[0]))
    names = _resolve_names(corruptions)
    sevs = _resolve_severities(severities)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CorruptionError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise CorruptionError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CorruptionError(f"{out} exists and is not a directory")
    return x, y, names, sevs, seed, out


@dataclass
class _RunPlan:
    """What a :func:`regenerate` call will write, decided before any file is touched."""
    run_key: dict
    suffix: str
    old: Manifest | None
    skipped: list
    todo: list
    labels_name: str
    write_labels: bool


def _plan_run(x: np.ndarray, y: np.ndarray | None, out: Path, names: list[str], sevs: list[int], seed: int,
              overwrite: bool, registry) -> _RunPlan:
    """What the run will be, and whether it collides with what is there (CorruptionError if so)."""
    n, h, w = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    run_key = {"format": MANIFEST_FORMAT, "constants_version": registry.CONSTANTS_VERSION, "seed": seed,
               "severities": sevs, "n": n, "image_shape": [h, w, 3], "images_sha256": _hash_array(x),
               "labels_sha256": None if y is None else _hash_array(y), "library_versions": library_versions()}
    suffix = layout_suffix(n, sevs)
    if out.is_dir():
        clean_stale_partials(out)
    try:
        old = read_manifest(out) if out.is_dir() else None
    except CorruptionError:
        old = None  # unreadable: reported as existing output below
    merge = old is not None and _run_key(old.data) == run_key
    skipped = _finished(old, out, names) if merge and not overwrite else []
    todo = [nm for nm in names if nm not in skipped]
    labels_name = f"labels{suffix}.npy"
    targets = [f"{nm}{suffix}.npy" for nm in todo]
    write_labels = y is not None and not (merge and old.has_labels and (out / old.labels_file).is_file())
    if write_labels:
        targets.append(labels_name)
    existing = [t for t in targets if (out / t).exists()]
    if old is not None and not merge:
        existing.append(f"{MANIFEST_NAME} (from a run with different {_difference(old.data, run_key)})")
    elif old is None and (out / MANIFEST_NAME).exists():
        existing.append(MANIFEST_NAME)
    if existing and not overwrite:
        raise CorruptionError(f"output exists in {out}: {name_list(existing)}; pass overwrite (--overwrite) to "
                              f"replace it")
    return _RunPlan(run_key, suffix, old, skipped, todo, labels_name, write_labels)


def _check_disk_space(out: Path, need: int) -> None:
    probe = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    free = shutil.disk_usage(probe).free
    if need > free:
        raise CorruptionError(f"not enough disk space in {probe}: need {need / 2**30:.2f} GiB, "
                              f"{free / 2**30:.2f} GiB free")


def _merge_and_commit(out: Path, overwrite: bool, plan: _RunPlan, entries: dict, staged: dict, description: str,
                      input_description: str | None, frost_source, frost_files, device, created: str, registry):
    """Under the folder lock: read the current manifest, merge, rename the staged files into place and write
    the manifest last. Returns ``(cur, same, data)``: the manifest found, whether it was from the same run, and
    the one written."""
    try:
        cur = read_manifest(out)
    except CorruptionError:
        if not overwrite:
            raise
        cur = None
    same = cur is not None and _run_key(cur.data) == plan.run_key
    if cur is not None and not same and not overwrite:
        raise CorruptionError(f"{out}: another run wrote {MANIFEST_NAME} with different "
                              f"{_difference(cur.data, plan.run_key)} meanwhile; nothing written")
    data = _manifest_data(cur.data if same else None, plan.run_key, plan.suffix, entries, description,
                          input_description, frost_source, device, created, registry)
    if frost_files is None and same:
        frost_files = cur.data.get("frost_files_sha256")
    if frost_files is not None:
        data["frost_files_sha256"] = frost_files
    # no manifest may vouch for files being replaced, so the old one goes first
    if (out / MANIFEST_NAME).exists():
        (out / MANIFEST_NAME).unlink()
    for final, tmp in staged.items():
        os.replace(tmp, out / final)
    staged.clear()
    _write_json_atomic(out / MANIFEST_NAME, data)
    return cur, same, data


def _discard_staged(staged: dict, out: Path, made_dir: bool) -> None:
    """After a failure: delete this run's partial files, and the folder if this call created it and it is empty."""
    for tmp in staged.values():
        tmp.unlink(missing_ok=True)
    if made_dir:
        try:
            out.rmdir()  # only if empty: a folder this call created and nothing was finished in
        except OSError:
            pass


def _warn_left_over(out: Path, cur: Manifest, data: dict) -> None:
    stale = sorted(set(cur.files) - set(data["files"]))
    stale = [f for f in stale if (out / f).exists()]
    if stale:
        warnings.warn(f"{out}: left from an earlier, different run and not in the new manifest: "
                      f"{name_list(stale)} (delete, or regenerate with the same settings)", stacklevel=3)


def _finished(old: Manifest, out: Path, names: list[str]) -> list[str]:
    """Corruptions the (same-run) manifest already lists whose file is present and intact."""
    done = []
    for nm in names:
        fname = old.file_of(nm)
        entry = old.files.get(fname)
        path = out / fname
        if nm in old.corruptions and entry and path.is_file() and file_sha256(path) == entry.get("sha256"):
            done.append(nm)
    return done


def _frost_for(names: list[str], frost: Any):
    if "frost" not in names:
        return frost, None, None
    from . import frost as frost_mod
    obj = frost_mod.load_frost_textures(frost) if frost is None or isinstance(frost, (str, os.PathLike)) else frost
    return obj, getattr(obj, "source", None), dict(getattr(obj, "file_sha256", None) or {})


def _preflight(x: np.ndarray, names: list[str], sevs: list[int], seed: int, device, frost_obj) -> None:
    from . import api
    h, w = int(x.shape[1]), int(x.shape[2])
    for name in names:
        for sev in sevs:
            _check_output(api.corrupt(x[:1], name, sev, seed=seed, indices=np.arange(1), device=device,
                                      frost=frost_obj), (1, h, w, 3), name, sev)


def _write_files(x, out: Path, names, sevs, suffix, seed, device, frost_obj, chunk_size, progress, token,
                 staged: dict, held: list, entries: dict, created: str) -> None:
    """Stream every corruption into its locked hidden partial file (renamed later by the caller)."""
    from . import api, registry
    n, h, w = int(x.shape[0]), int(x.shape[1]), int(x.shape[2])
    n_rows = len(sevs) * n
    jobs = [(name, b, sev, start, min(n, start + chunk_size))
            for name in names for b, sev in enumerate(sevs) for start in range(0, n, chunk_size)]
    mm, current = None, None
    for name, b, sev, start, stop in _wrap(progress, jobs, "corrupting"):
        if name != current:
            if mm is not None:
                _finish(mm, staged[f"{current}{suffix}.npy"], f"{current}{suffix}.npy", current, entries, created,
                        registry)
            fname = f"{name}{suffix}.npy"
            tmp = out / f".{fname}.{token}.partial"
            staged[fname] = tmp
            held.append(_lock_partial(tmp))
            mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(n_rows, h, w, 3))
            current = name
        res = api.corrupt(x[start:stop], name, sev, seed=seed, indices=np.arange(start, stop),
                          device=device, frost=frost_obj)
        mm[b * n + start:b * n + stop] = _check_output(res, (stop - start, h, w, 3), name, sev)
    if mm is not None:
        _finish(mm, staged[f"{current}{suffix}.npy"], f"{current}{suffix}.npy", current, entries, created, registry)


def _write_labels(y: np.ndarray, blocks: int, tmp: Path, fname: str, staged: dict, held: list, entries: dict,
                  created: str) -> None:
    tiled = np.tile(y.astype(_label_dtype(y)), blocks)
    staged[fname] = tmp
    held.append(_lock_partial(tmp))
    with open(tmp, "wb") as f:
        np.save(f, tiled)
        f.flush()
        os.fsync(f.fileno())
    entries[fname] = {"sha256": _hash_file(tmp, "sha256"), "shape": list(tiled.shape), "dtype": str(tiled.dtype),
                      "bytes": tmp.stat().st_size, "role": "labels", "created": created}


def _check_output(res: Any, shape: tuple, name: str, sev: int) -> np.ndarray:
    if not isinstance(res, np.ndarray) or res.dtype != np.uint8 or tuple(res.shape) != shape:
        got = f"{type(res).__name__} {getattr(res, 'dtype', '')} {tuple(getattr(res, 'shape', ()))}"
        raise CorruptionError(f"{name} severity {sev} returned {got}, expected uint8 {shape}")
    return res


def _finish(mm: np.memmap, tmp: Path, fname: str, name: str, entries: dict, created: str, registry) -> None:
    mm.flush()
    shape, dtype = list(mm.shape), str(mm.dtype)
    del mm
    _fsync(tmp)
    spec = registry.CORRUPTIONS.get(name)
    entries[fname] = {"sha256": _hash_file(tmp, "sha256"), "shape": shape, "dtype": dtype,
                      "bytes": tmp.stat().st_size, "corruption": name,
                      "group": getattr(spec, "group", None), "random": getattr(spec, "random", None),
                      "created": created}


def _run_key(data: dict) -> dict:
    inp = data.get("input", {})
    return {"format": data.get("format"), "constants_version": data.get("constants_version"),
            "seed": data.get("seed"), "severities": data.get("severities"), "n": data.get("n"),
            "image_shape": inp.get("image_shape"), "images_sha256": inp.get("images_sha256"),
            "labels_sha256": inp.get("labels_sha256"), "library_versions": data.get("library_versions")}


def _difference(old: dict, new_key: dict) -> str:
    old_key = _run_key(old)
    diff = [k for k in new_key if old_key.get(k) != new_key[k]]
    return ", ".join(k.replace("_sha256", "") for k in diff) or "settings"


def _manifest_data(old: dict | None, run_key: dict, suffix: str, entries: dict, description: str,
                   input_description: str | None, frost_source: str | None, device: Any, created: str,
                   registry) -> dict:
    files = dict(old["files"]) if old else {}
    files.update(entries)
    in_files = [e.get("corruption") or f[:-4] for f, e in files.items()
                if f != LABELS_NAME and not (isinstance(e, dict) and e.get("role") == "labels")]
    listed = [nm for nm in registry.ALL if nm in in_files]
    listed += [nm for nm in in_files if nm not in listed]  # names the registry lacks
    if old and frost_source is None:
        frost_source = old.get("frost_source")
    n, sevs = run_key["n"], run_key["severities"]
    return {
        "format": MANIFEST_FORMAT,
        "description": description,
        "note": "Regenerated with keyed randomness; not the published arrays (the reference generator had no "
                "seed, so the random corruptions match the official files only in distribution).",
        "constants_version": run_key["constants_version"],
        "seed": run_key["seed"],
        "severities": sevs,
        "corruptions": listed,
        "n": n,
        "official_layout": suffix == "",
        "layout": f"<corruption>{suffix}.npy: uint8 ({len(sevs)}*{n}, H, W, 3) HWC RGB; rows [i*{n}, (i+1)*{n}) "
                  f"hold severity severities[i]; labels{suffix}.npy: the {n} labels tiled {len(sevs)} times"
                  + ("" if suffix == "" else f"; not the official layout (which is 5 blocks of {OFFICIAL_BLOCK:,} "
                     "rows, severities 1..5): the file names carry N and the severities so that a reader "
                     "assuming the official layout finds no file instead of mixing severities"),
        "randomness": "keyed by (seed, corruption, severity, image index): any subset regenerates identically",
        "frost_source": frost_source,
        "input": {"description": input_description, "n": n, "image_shape": run_key["image_shape"],
                  "images_sha256": run_key["images_sha256"], "labels_sha256": run_key["labels_sha256"]},
        "files": files,
        "library_versions": run_key["library_versions"],
        "device": "auto" if device is None else str(device),
        "created": created,
        "updated_from": old.get("created") if old else None,
    }


# ---------------------------------------------------------------------------------------------- reading


def _official_names() -> list[str]:
    try:
        from . import registry
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
    before use (digest cached by path, size and mtime); a mismatch raises CorruptionError naming the file.
    """
    d = Path(directory)
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
    lo, hi = _block_rows(d, severity, sevs, n, rows)
    y_all = _load_tiled_labels(d, man, path, rows, sevs, n)
    if check_md5 and man is None:
        _check_official_md5(d, corruption, dataset, y_all)

    xs = np.array(x[lo:hi])
    ys = None if y_all is None else np.asarray(y_all[lo:hi]).astype(np.int64)
    return xs, ys


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


# ---------------------------------------------------------------------------------------------- comparing


def verify_against(regen_dir: str | os.PathLike, official_dir: str | os.PathLike, *,
                   chunk: int = 2000, n_clean_official: int | None = None):
    """Per corruption and severity present in both directories: pixel statistics of the regenerated block
    against the official one (a pandas DataFrame).

    Rows are compared image by image over the first ``min(N_regen, N_official)`` images, which is right when
    both were made from the same clean images in the same order (a ``--limit N`` regeneration uses the first N).
    Columns: mean and std of each, mean difference, mean absolute difference, max absolute difference,
    fraction of identical bytes, fraction within +-1, PSNR (dB; inf when identical), and ``comparison``:
    "bytewise" for the deterministic corruptions (should be identical up to library rounding) and
    "distributional" for the random ones (only means/stds are expected to agree: the draws differ).
    """
    import pandas as pd
    try:
        from . import registry
        specs = registry.CORRUPTIONS
    except ImportError:  # pragma: no cover - the registry is part of the package
        specs = {}
    regen, off = Path(regen_dir), Path(official_dir)
    have_r, have_o = list_available(regen), list_available(off)
    common = [c for c in have_r if c in have_o]
    if not common:
        raise CorruptionError(f"no corruption is present in both {regen} and {off}")
    rows = []
    labels_checked: bool | None = None
    for c in common:
        sevs = [s for s in have_r[c] if s in have_o[c]]
        random = getattr(specs.get(c), "random", None)
        for s in sevs:
            xr, yr = load_corrupted(regen, c, s)
            xo, yo = load_corrupted(off, c, s, n_clean=n_clean_official)
            k = min(len(xr), len(xo))
            if xr.shape[1:] != xo.shape[1:]:
                raise CorruptionError(f"{c}: image size {xr.shape[1:]} vs {xo.shape[1:]}")
            if yr is not None and yo is not None and labels_checked is None:
                labels_checked = bool(np.array_equal(yr[:k], yo[:k]))
            acc = np.zeros(9)
            mx = 0
            for i in range(0, k, chunk):
                a = xr[i:i + chunk].astype(np.float64)
                b = xo[i:i + chunk].astype(np.float64)
                dlt = a - b
                acc += [a.sum(), (a * a).sum(), b.sum(), (b * b).sum(), dlt.sum(), np.abs(dlt).sum(),
                        (dlt == 0).sum(), (np.abs(dlt) <= 1).sum(), (dlt * dlt).sum()]
                mx = max(mx, int(np.abs(dlt).max()))
            cnt = float(k * np.prod(xr.shape[1:]))
            mr, mo = acc[0] / cnt, acc[2] / cnt
            mse = acc[8] / cnt
            rows.append({
                "corruption": c, "severity": s,
                "comparison": "distributional" if random else "bytewise" if random is not None else "unknown",
                "n_compared": k,
                "mean_regen": mr, "mean_official": mo,
                "std_regen": float(np.sqrt(max(acc[1] / cnt - mr * mr, 0.0))),
                "std_official": float(np.sqrt(max(acc[3] / cnt - mo * mo, 0.0))),
                "mean_diff": acc[4] / cnt, "mean_abs_diff": acc[5] / cnt, "max_abs_diff": mx,
                "identical_fraction": acc[6] / cnt, "within_1_fraction": acc[7] / cnt,
                "psnr_db": float("inf") if mse == 0 else float(10 * np.log10(255.0 ** 2 / mse)),
            })
    df = pd.DataFrame(rows)
    df.attrs["labels_identical"] = labels_checked
    df.attrs["regen_dir"], df.attrs["official_dir"] = str(regen), str(off)
    return df
