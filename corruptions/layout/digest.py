"""SHA-256 / md5 of files and arrays; the on-disk digest cache (by path, device, inode, size, mtime and ctime)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from ..atomic import write_json


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
    cache = _read_digest_cache(cache_path)
    key, stamp = str(p), _stat_key(st)
    hit = cache.get(key)
    if isinstance(hit, dict) and all(hit.get(k) == v for k, v in stamp.items()):
        return str(hit.get("sha256"))
    digest = _hash_file(p, "sha256")
    cache[key] = {**stamp, "sha256": digest, "t": time.time()}
    if len(cache) > _DIGEST_CACHE_MAX:
        keep = sorted(cache.items(), key=lambda kv: kv[1].get("t", 0) if isinstance(kv[1], dict) else 0)
        cache = dict(keep[-_DIGEST_CACHE_MAX:])
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(cache_path, cache)
    except OSError:
        pass
    return digest


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

