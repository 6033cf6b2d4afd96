"""Which evaluations' frost came from the procedural substitute textures (run records / corruption manifests
say so). Takes the store's rows and run records, not the report, so :mod:`.document` and :mod:`.caveats` both
import it without a circle."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd


def _manifest_frost(store_dir: str | Path | None, corruption_dir: str) -> str:
    """The frost source in a corruption folder's manifest; the folder as a run record names it: relative to the
    store (records written since paths became relative), else as given (older records: the working folder)."""
    folders = ([Path(store_dir) / corruption_dir] if store_dir is not None else []) + [Path(corruption_dir)]
    for folder in folders:
        try:
            return str(json.loads((folder / "manifest.json").read_text()).get("frost_source") or "")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
    return ""


def frost_substitutes(df: pd.DataFrame, runs: dict[str, dict[str, Any]],
                      store_dir: str | Path | None = None) -> dict[str, str]:
    """dataset -> frost texture source, for evaluations whose frost came from a substitute (procedural); a run
    record's corruption folder is read relative to ``store_dir`` (the store holding the records)."""
    out: dict[str, str] = {}
    frost_runs = set(df.loc[(df["kind"] == "eval") & (df["condition"] == "frost"), "run_id"])
    for run_id in sorted(frost_runs):
        rec = runs.get(run_id) or {}
        src = str(rec.get("frost_source") or "")
        cdir = rec.get("corruption_dir")
        if not src and cdir:
            src = _manifest_frost(store_dir, str(cdir))
        if src.startswith("procedural"):
            ds = str(rec.get("dataset") or df.loc[df["run_id"] == run_id, "dataset"].iloc[0])
            out[ds] = src
    return out
