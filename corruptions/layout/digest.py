"""SHA-256 / md5 of files and arrays; the on-disk digest cache (by path, device, inode, size, mtime and ctime)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from ..atomic import write_bytes


def _digest_cache_path() -> Path:
    env = os.environ.get("CORRUPTIONS_CACHE")
    if env:
        return Path(env) / "sha256-cache.json"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dgsa-corruptions" / "sha256-cache.json"


# The cache file's last parsed contents in this process, keyed by the file's path and stat key: a check that
# verifies one corrupted file per condition (95 per evaluation) would otherwise parse the whole JSON file (up to
# _DIGEST_CACHE_MAX entries, ~1.4 MB, ~4.5 ms) every time. Any write to the file by another process changes its
# ctime, so the next read parses it again; this process's own write records what it wrote.
_parsed: dict[str, tuple[dict, dict]] = {}


def _read_digest_cache(path: Path) -> dict:
    """The cache file's entries, shared with later reads: a caller copies before changing it. {} when the file is
    missing or unreadable."""
    try:
        stamp = _stat_key(path.stat())
        seen = _parsed.get(str(path))
        if seen is not None and seen[0] == stamp:
            return seen[1]
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    _parsed.clear()
    _parsed[str(path)] = (stamp, data)
    return data


_DIGEST_CACHE_MAX = 4096


def _stat_key(st: os.stat_result) -> dict:
    """What a cached digest is valid for. ``st_ctime_ns`` is set by the kernel on every write, rename and
    ``utime`` and cannot be set back by a user, so a same-size edit that restores the old mtime still misses the
    cache; the device and inode catch a file replaced by another one."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino,
            "dev": st.st_dev}


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, cached by absolute path and :func:`_stat_key` (size, mtime, ctime, inode, device): a
    changed or replaced file is re-hashed. The cache is a small JSON file; if it cannot be written, nothing is
    cached."""
    p = Path(path).resolve()
    st = p.stat()
    cache_path = _digest_cache_path()
    key, stamp = str(p), _stat_key(st)
    hit = _read_digest_cache(cache_path).get(key)
    if isinstance(hit, dict) and all(hit.get(k) == v for k, v in stamp.items()):
        return str(hit.get("sha256"))
    digest = _hash_file(p, "sha256")
    _remember(cache_path, key, {**stamp, "sha256": digest, "t": time.time()})
    return digest


def _remember(cache_path: Path, key: str, entry: dict) -> None:
    """Add one entry to the cache file (the newest :data:`_DIGEST_CACHE_MAX` kept), re-read just before so that
    another process's entries are kept too."""
    cache = dict(_read_digest_cache(cache_path))
    cache[key] = entry
    if len(cache) > _DIGEST_CACHE_MAX:
        keep = sorted(cache.items(), key=lambda kv: kv[1].get("t", 0) if isinstance(kv[1], dict) else 0)
        cache = dict(keep[-_DIGEST_CACHE_MAX:])
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        # compact and not fsynced: a cache (a lost write costs one re-hash); indented and synced it took ~70 ms
        # per new file at 4,096 entries
        write_bytes(cache_path, json.dumps(cache, separators=(",", ":")).encode("utf-8"), sync=False)
        _parsed.clear()
        _parsed[str(cache_path)] = (_stat_key(cache_path.stat()), cache)
    except OSError:
        pass


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

