"""The one results store: a long/tidy table that every command writes and reads.

Layout of a store directory::

    rows/<run_id>.jsonl        rows appended while a run is going (one JSON object per line)
    runs/<run_id>.json         provenance of a run (config, seeds, git, versions, device, command, hashes)
    predictions/<run_id>__<tag>.parquet   per-example predictions (index, label, pred, condition, severity)
    results.parquet            compacted rows of all finished runs (``compact``)

Rows are appended line by line and flushed, so a killed run leaves at worst one torn last line, which the
reader skips. ``compact`` rewrites results.parquet atomically. ``load_results`` returns a pandas DataFrame
with exactly :data:`COLUMNS`.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from robustbench_dgsa.util import atomic
from robustbench_dgsa.util import provenance
from robustbench_dgsa.util.errors import UserError

# name -> dtype; every row has all of them (missing values: "" / -1 / NaN).
COLUMNS: dict[str, str] = {
    "run_id": "string",        # one train/evaluate/rollout invocation
    "kind": "string",          # "train" | "eval" | "rollout" | "bench"
    "model": "string",         # registry name (vit, dvit, dgvit, transformer, dt, dgt, ...)
    "config_hash": "string",   # RunConfig.hash() of the trained model
    "dataset": "string",       # dataset name (cifar10, imdb, synthetic-vision, ...)
    "split": "string",         # "train" | "val" | "test"
    "condition": "string",     # "clean", a corruption name, or a text-noise type
    "severity": "int64",       # 0 for clean, 1..5 otherwise
    "seed": "int64",           # training seed of the model
    "metric": "string",        # "accuracy", "loss", "cer", "wer", "rollout_mass", "rollout_drift", ...
    "value": "float64",
    "n": "int64",              # examples behind the value (-1 when not applicable)
    "epoch": "int64",          # -1 when not applicable
    "source": "string",        # e.g. "regenerated", "official", "on-the-fly", rollout mode
    "git_commit": "string",
    "package_version": "string",
    "created": "string",       # ISO-8601 UTC
}
_DEFAULTS = {"string": "", "int64": -1, "float64": float("nan")}


def new_run_id(prefix: str = "run") -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:6]}"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunWriter:
    """Appends rows of one run. Fixed fields (model, seed, ...) are given once in ``base``."""
    store_dir: Path
    run_id: str
    base: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.store_dir = Path(self.store_dir)
        (self.store_dir / "rows").mkdir(parents=True, exist_ok=True)
        commit, _ = provenance.git_state()
        self._fixed = {"run_id": self.run_id, "git_commit": commit, "package_version": provenance.package_version()}

    @property
    def rows_path(self) -> Path:
        return self.store_dir / "rows" / f"{self.run_id}.jsonl"

    def add(self, metric: str, value: float, **fields: Any) -> None:
        self.add_rows([dict(metric=metric, value=value, **fields)])

    def add_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        lines = []
        for r in rows:
            row = {**self.base, **r, **self._fixed}
            row.setdefault("created", _now())
            unknown = set(row) - set(COLUMNS)
            if unknown:
                raise ValueError(f"unknown result columns: {sorted(unknown)}")
            lines.append(json.dumps(row, default=float))
        with open(self.rows_path, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())

    def clear(self) -> None:
        """Drop rows of this run (used when a run restarts a phase it had begun)."""
        if self.rows_path.exists():
            self.rows_path.unlink()

    def write_provenance(self, info: dict[str, Any]) -> None:
        record = {"run_id": self.run_id, "created": _now(), **provenance.collect(info.get("device")), **info}
        atomic.write_json(self.store_dir / "runs" / f"{self.run_id}.json", record)

    def write_predictions(self, tag: str, df: pd.DataFrame) -> Path:
        path = self.store_dir / "predictions" / f"{self.run_id}__{tag}.parquet"
        df = df.copy()
        df.insert(0, "run_id", self.run_id)
        with atomic.atomic_path(path) as tmp:
            df.to_parquet(tmp, index=False)
        return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # torn last line of a killed run
    return rows


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Give a frame exactly COLUMNS, in order, with their dtypes."""
    df = df.copy()
    for col, dtype in COLUMNS.items():
        if col not in df.columns:
            df[col] = _DEFAULTS[dtype]
        else:
            df[col] = df[col].fillna(_DEFAULTS[dtype]) if dtype != "float64" else df[col]
    df = df[list(COLUMNS)]
    return df.astype(COLUMNS)


def load_results(store_dir: str | Path) -> pd.DataFrame:
    """All rows of a store as a DataFrame.

    The JSONL files are the source of truth; results.parquet supplies runs whose JSONL is absent (a store
    shipped as Parquet only).
    """
    store_dir = Path(store_dir)
    if not store_dir.exists():
        raise UserError(f"results store not found: {store_dir}")
    frames = []
    seen: set[str] = set()
    rows_dir = store_dir / "rows"
    if rows_dir.exists():
        for path in sorted(rows_dir.glob("*.jsonl")):
            rows = _read_jsonl(path)
            if rows:
                frames.append(pd.DataFrame(rows))
                seen.add(path.stem)
    parquet = store_dir / "results.parquet"
    if parquet.exists():
        try:
            df = pd.read_parquet(parquet)
        except Exception as e:  # noqa: BLE001 - any reader failure means a corrupt file
            raise UserError(f"cannot read {parquet}: {e}") from None
        frames.append(df[~df["run_id"].isin(seen)])
    frames = [f for f in frames if len(f)]
    if not frames:
        return normalize(pd.DataFrame(columns=list(COLUMNS)))
    return normalize(pd.concat(frames, ignore_index=True))


def compact(store_dir: str | Path) -> Path:
    """Write all rows to results.parquet (atomic); the JSONL files stay as the write-ahead log."""
    store_dir = Path(store_dir)
    df = load_results(store_dir)
    path = store_dir / "results.parquet"
    with atomic.atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)
    return path


def load_runs(store_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Provenance records by run id."""
    out = {}
    for p in sorted((Path(store_dir) / "runs").glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
    return out


def load_predictions(store_dir: str | Path, run_id: str | None = None) -> pd.DataFrame:
    """Per-example predictions (columns: run_id, condition, severity, index, label, pred, ...)."""
    paths = sorted((Path(store_dir) / "predictions").glob(f"{run_id or ''}*.parquet"))
    if not paths:
        return pd.DataFrame(columns=["run_id", "condition", "severity", "index", "label", "pred"])
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
