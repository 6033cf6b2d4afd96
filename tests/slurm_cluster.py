"""Whether a live SLURM controller answers here (``.ci/slurm-up`` starts a single-node one on the CI machine):
the live cluster tests skip cleanly where it does not."""
from __future__ import annotations

import shutil
import subprocess


def cluster_ready() -> bool:
    """True when ``sbatch`` and ``sinfo`` exist and ``sinfo`` reports a node that can take work."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(state.strip().rstrip("*~#") in ("idle", "mixed", "allocated") for state in out.split())
