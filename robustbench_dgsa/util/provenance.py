"""Provenance recorded with every run: code version, libraries, device, command line.

The package version comes from the installed distribution's metadata (``robustbench-dgsa``), so a wheel
install records the version it is. The git commit is recorded only when the package is imported from its own
checkout: the folder above the package must be the top level of a git work tree and hold this project's
``pyproject.toml``; an installed copy inside some other git project records "unknown", never that project's
commit.
"""
from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from robustbench_dgsa.util import plugins

_PACKAGES = ("robustbench-dgsa", "torch", "torchvision", "numpy", "scipy", "pandas", "pillow",
             "opencv-python-headless", "safetensors")


DIST_NAME = "robustbench-dgsa"


def own_checkout() -> Path | None:
    """The git checkout this package was imported from, or None (installed copy, or not a checkout of ours)."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    try:
        if not pyproject.is_file() or f'name = "{DIST_NAME}"' not in pyproject.read_text(errors="replace"):
            return None
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return root if top and Path(top).resolve() == root else None


def package_version() -> str:
    """The installed distribution's version ("unknown" when the package is not installed)."""
    try:
        return metadata.version(DIST_NAME)
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str, bool]:
    """(commit, dirty) of the package's own checkout; ("unknown", False) for an installed copy or outside git."""
    root = own_checkout()
    if root is None:
        return "unknown", False
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
    import torch  # here, not at the top: the results store imports this module and reading a store needs no torch
    if device and str(device).startswith("cuda") and torch.cuda.is_available():
        return f"cuda:{torch.cuda.get_device_name()}"
    return f"cpu:{platform.processor() or platform.machine()}x{torch.get_num_threads()}"


def collect(device: str | None = None) -> dict:
    from robustbench_dgsa.util.paths import command_line
    commit, dirty = git_state()
    return {"git_commit": commit, "git_dirty": dirty, "package_version": package_version(),
            "versions": package_versions(),
            "device": device_description(device), "command": command_line(sys.argv), "platform": platform.platform(),
            "plugins": plugins.plugin_records()}


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
