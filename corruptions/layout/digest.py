"""SHA-256 / md5 of files and arrays; the on-disk digest cache (by path, size and mtime)."""
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

