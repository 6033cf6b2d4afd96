"""Provenance recorded with every run: code version, libraries, device, command line."""
from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

_PACKAGES = ("robustbench-dgsa", "torch", "torchvision", "numpy", "scipy", "pandas", "pillow",
             "opencv-python-headless", "safetensors")


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str, bool]:
    """(commit, dirty) of the checkout the package runs from; ("unknown", False) outside git."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=5).stdout.strip()
        if not commit:
            return "unknown", False
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=5).stdout
        return commit, bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        return "unknown", False


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def device_description(device: str | None = None) -> str:
    import torch
    if device and str(device).startswith("cuda") and torch.cuda.is_available():
        return f"cuda:{torch.cuda.get_device_name()}"
    return f"cpu:{platform.processor() or platform.machine()}x{torch.get_num_threads()}"


def collect(device: str | None = None) -> dict:
    commit, dirty = git_state()
    return {"git_commit": commit, "git_dirty": dirty, "versions": package_versions(),
            "device": device_description(device), "command": " ".join(sys.argv), "platform": platform.platform()}


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
