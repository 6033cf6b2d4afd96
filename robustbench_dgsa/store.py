"""The one results store: a long/tidy table that every command writes and reads.

Layout of a store directory::

    rows/<run_id>.jsonl        rows appended while a run is going (one JSON object per line)
    runs/<run_id>.json         provenance of a run (config, seeds, git, versions, device, command, hashes)
    predictions/<run_id>__<tag>.parquet   per-example predictions (index, label, pred, condition, severity)
    results.parquet            compacted rows of all finished runs (``compact``)
    finished/<name>.json       "this unit of work is done" records (a job's train+evaluate, its rollout), so a
                               run resumes from the store alone, without the checkpoints (``mark_finished``)
    rollouts/<run_id>__<model>.npz   rollout sets the report draws Figures 2 and 3 from
                               (:mod:`robustbench_dgsa.rollout.runs` writes and reads them)

Every one of these paths is named here (:func:`rows_path`, :func:`rollouts_dir`, ...): other modules ask for
them rather than joining folder names onto a store path.

Rows are appended line by line and flushed, so a killed run leaves at worst one torn last line (no newline
at its end), which the reader skips with a warning naming the file and line; any other malformed line (not JSON,
not UTF-8, not an object, unknown columns, wrongly typed values, a required column missing or null, an unknown
kind or condition, a severity outside 1..5 (0 for clean), ``n`` below 1, an infinite value, an accuracy outside
[0, 1] or NaN over examples: see :func:`row_problem`), and any such row of results.parquet, is refused with one
line naming the file and line, never dropped or computed on.
``compact`` rewrites results.parquet atomically while holding ``.compact.lock`` (a ``filelock.FileLock``: an
flock the kernel releases when its holder dies, so a dead owner's lock is never left standing) and reads the rows
inside it, so of two overlapping compactions the later one includes everything the earlier one did plus what was
written since: a concurrent writer's rows are never dropped, and compaction never deletes a rows file. A run that
fails calls :meth:`RunWriter.discard`, which removes what it wrote (rows, provenance, predictions, and folders it
created that are left empty). ``load_results`` returns a pandas DataFrame with exactly :data:`COLUMNS`.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import math
import numbers
import os
import re
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pandas as pd

from robustbench_dgsa.util import atomic
from robustbench_dgsa.util import provenance
from robustbench_dgsa.util.errors import RunFailure, UserError
from robustbench_dgsa.util.paths import safe_name

# name -> dtype; every row has all of them (missing values: "" / -1 / NaN).
COLUMNS: dict[str, str] = {
    "run_id": "string",        # one train/evaluate/rollout invocation
    "kind": "string",          # "train" | "eval" | "rollout" | "bench" | "adversarial"
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
    "precision": "string",     # what the run computed in: "fp32" | "bf16" (engine.predict.resolve_precision)
    "eps": "float64",          # adversarial rows: the radius in pixel units (NaN otherwise)
    "attack": "string",        # adversarial rows: "autoattack", "apgd-ce", "apgd-ce+apgd-t", "fab", "none"
}
#: columns added after stores were first written, with the value a row without them means (rows written before
#: precision was recorded were computed in fp32: ``amp="auto"`` meant fp32 on every CPU then; eps / attack: not an
#: adversarial row)
ADDED_LATER_COLUMNS: dict[str, Any] = {"precision": "fp32", "eps": float("nan"), "attack": ""}
#: where corrupted evaluation data came from (the ``source`` of corrupted ``eval`` rows)
CORRUPTION_SOURCES = ("official", "regenerated", "on-the-fly")
_DEFAULTS = {"string": "", "int64": -1, "float64": float("nan")}


# --- paths: every file and folder of a store is named here -----------------------------------------------------
def rows_dir(store_dir: str | Path) -> Path:
    """``<store>/rows``: one rows file per run."""
    return Path(store_dir) / "rows"


def runs_dir(store_dir: str | Path) -> Path:
    """``<store>/runs``: one provenance record per run."""
    return Path(store_dir) / "runs"


def predictions_dir(store_dir: str | Path) -> Path:
    """``<store>/predictions``: per-example predictions."""
    return Path(store_dir) / "predictions"


def finished_dir(store_dir: str | Path) -> Path:
    """``<store>/finished``: the "this unit of work is done" records."""
    return Path(store_dir) / "finished"


def rollouts_dir(store_dir: str | Path) -> Path:
    """``<store>/rollouts``: the stored rollout sets."""
    return Path(store_dir) / "rollouts"


def results_path(store_dir: str | Path) -> Path:
    """``<store>/results.parquet``: the compacted rows."""
    return Path(store_dir) / "results.parquet"


def rows_path(store_dir: str | Path, run_id: Any) -> Path:
    """``<store>/rows/<run_id>.jsonl``: the rows one run appends."""
    return rows_dir(store_dir) / f"{run_id}.jsonl"


def has_rows(store_dir: str | Path, run_id: Any) -> bool:
    """Whether the store holds a rows file for ``run_id`` (any value: a missing id is simply not there)."""
    return rows_path(store_dir, run_id).is_file()


def run_record_path(store_dir: str | Path, run_id: str) -> Path:
    """``<store>/runs/<run_id>.json``: the provenance record of one run."""
    return runs_dir(store_dir) / f"{run_id}.json"


def predictions_path(store_dir: str | Path, run_id: str, tag: str) -> Path:
    """``<store>/predictions/<run_id>__<tag>.parquet``: per-example predictions of one run."""
    return predictions_dir(store_dir) / f"{run_id}__{tag}.parquet"


def rollout_set_path(store_dir: str | Path, run_id: str, model: str) -> Path:
    """``<store>/rollouts/<run_id>__<model>.npz`` (both names made safe for a file name)."""
    return rollouts_dir(store_dir) / f"{safe_name(run_id)}__{safe_name(model)}.npz"


def is_store(folder: str | Path) -> bool:
    """Whether ``folder`` is a results store: it holds ``rows/`` or ``results.parquet``."""
    folder = Path(folder)
    return rows_dir(folder).is_dir() or results_path(folder).is_file()


def store_holding(path: str | Path) -> Path | None:
    """The results store that ``path`` is, or lies inside (its nearest such folder), else None."""
    full = Path(path).expanduser().absolute()
    for folder in (full, *full.parents):
        if is_store(folder):
            return folder
    return None


def check_outputs(outputs: dict[str, str | Path | None], stores: dict[str, str | Path | None] | None = None) -> None:
    """The one check of where a command writes, before it writes anything: no output (file or folder, keyed by
    what the caller calls it) is a results store or lies inside one, a store it writes into (``stores``) is not
    inside another store, and no two of them are the same path. UserError naming the first problem."""
    seen: dict[Path, str] = {}
    for label, path in [*outputs.items(), *(stores or {}).items()]:
        if path is None:
            continue
        full = Path(path).expanduser().resolve()
        if full in seen:
            raise UserError(f"{seen[full]} and {label} are the same path ({path}); give each its own")
        seen[full] = label
        is_output = label in outputs
        holder = store_holding(full if is_output else full.parent)
        if holder is not None:
            where = "is the results store" if holder == full else f"is inside the results store {holder}"
            raise UserError(f"{label} {path}: {where}; write {'it' if is_output else 'the store'} outside any "
                            "store (a store holds only what its runs write)")


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
        folders = [self.store_dir, *(f(self.store_dir) for f in (rows_dir, runs_dir, predictions_dir))]
        self._new_folders = [f for f in folders if not f.exists()]   # removed by discard() when left empty
        commit, _ = provenance.git_state()
        self._fixed = {"run_id": self.run_id, "git_commit": commit, "package_version": provenance.package_version()}

    @property
    def rows_path(self) -> Path:
        return rows_path(self.store_dir, self.run_id)

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
            problem = value_problem(row.get("metric"), row.get("value"), row.get("n"))
            if problem:
                raise RunFailure(f"not stored: {row.get('model', '')} {row.get('condition', '')} "
                                 f"{row.get('severity', '')}: {problem}")
            lines.append(json.dumps(row, default=float))
        self.rows_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.rows_path, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())

    def clear(self) -> None:
        """Drop rows of this run (used when a run restarts a phase it had begun)."""
        if self.rows_path.exists():
            self.rows_path.unlink()

    def discard(self) -> None:
        """Remove everything this run wrote to the store (a failed run leaves the store as it found it)."""
        self.rows_path.unlink(missing_ok=True)
        run_record_path(self.store_dir, self.run_id).unlink(missing_ok=True)
        for p in predictions_dir(self.store_dir).glob(f"{self.run_id}__*.parquet"):
            p.unlink(missing_ok=True)
        for folder in reversed(self._new_folders):          # deepest first; only if empty
            try:
                folder.rmdir()
            except OSError:
                pass

    def write_provenance(self, info: dict[str, Any]) -> None:
        """The run record ``runs/<run id>.json``: ``info`` with the provenance; every absolute path in it is
        written relative to the store (a store moved or copied to another machine names no local path)."""
        from robustbench_dgsa.util.paths import portable_paths
        record = {"run_id": self.run_id, "created": _now(), **provenance.collect(info.get("device")),
                  **portable_paths(info, self.store_dir)}
        atomic.write_json(run_record_path(self.store_dir, self.run_id), record)

    def write_predictions(self, tag: str, df: pd.DataFrame) -> Path:
        path = predictions_path(self.store_dir, self.run_id, tag)
        df = df.copy()
        df.insert(0, "run_id", self.run_id)
        write_predictions_file(df, path)
        return path


_PY_TYPES = {"string": (str,), "int64": (int,), "float64": (int, float)}


def _check_row(row: Any, path: Path, n: int) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise UserError(f"{path} line {n}: a result row must be a JSON object, got {type(row).__name__}; "
                        "remove or fix the line")
    for key, value in row.items():
        dtype = COLUMNS.get(key)
        if dtype is None:
            raise UserError(f"{path} line {n}: unknown result column {key!r}; remove or fix the line")
        if value is None or (dtype == "int64" and isinstance(value, float) and value.is_integer()):
            continue                                         # numpy integers are written as floats (3.0)
        if isinstance(value, bool) or not isinstance(value, _PY_TYPES[dtype]):
            raise UserError(f"{path} line {n}: column {key!r} must be {dtype}, got {value!r}; "
                            "remove or fix the line")
    problem = row_problem(row)
    if problem:
        raise UserError(f"{path} line {n}: {problem}; remove or fix the line")
    return row


#: what a row's ``kind`` may be (see :data:`COLUMNS`)
KINDS = ("train", "eval", "rollout", "bench", "adversarial")
#: columns every row has, whatever its kind; ``eval`` rows also say what was measured on (:data:`_EVAL_KEYS`)
_REQUIRED = ("run_id", "kind", "model", "metric", "value")
_EVAL_KEYS = ("dataset", "condition", "severity", "n")
SEVERITIES = (1, 2, 3, 4, 5)   # a corrupted / noised condition; "clean" has severity 0
#: a threat model's name (``engine.threat_models``); ``adversarial`` rows name theirs, lower case, as their condition
#: (severity 0; the radius is the ``eps`` column). Any such name is readable: a store stays readable where the
#: plugin that registered a threat model is not installed.
THREAT_MODEL_NAME = r"[A-Za-z][A-Za-z0-9_.-]*"


def _given(value: Any) -> bool:
    """Whether a column holds a value: missing, None / NA / NaN, "" and -1 (the store's "not applicable") do not."""
    if value is None or value is pd.NA or (isinstance(value, str) and value == ""):
        return False
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return not (value == -1 or math.isnan(value))
    return True


@functools.lru_cache(maxsize=1)
def known_conditions() -> frozenset[str]:
    """``clean``, every image corruption and every text-noise type: the conditions a row may name."""
    from corruptions.registry import ALL
    from corruptions.text import TEXT_NOISE_TYPES
    return frozenset(("clean", *ALL, *TEXT_NOISE_TYPES))


def condition_problem(kind: Any, condition: Any, severity: Any) -> str | None:
    """Why (condition, severity) cannot be a row's, None when it can: ``clean`` at 0; an image corruption or text
    noise at 1..5; for ``adversarial`` rows a threat model's lower-case name at 0."""
    if not isinstance(condition, str):
        return f"unknown condition {condition!r} (not a name)"
    if kind == "adversarial":
        if condition in known_conditions() or not re.fullmatch(THREAT_MODEL_NAME, condition) \
                or condition != condition.lower():
            return f"condition {condition!r} of an adversarial row is not a threat model's name in lower case"
        allowed: tuple[int, ...] = (0,)
    elif condition not in known_conditions():
        return f"unknown condition {condition!r} (not clean, an image corruption or a text-noise type)"
    else:
        allowed = (0,) if condition == "clean" else SEVERITIES
    if severity not in allowed:
        return f"severity {severity!r} for condition {condition!r} (must be {' or '.join(map(str, allowed))})"
    return None


def row_problem(row: dict[str, Any]) -> str | None:
    """Why a row (a JSON row, or a row of a Parquet table with its defaults) cannot be read as a result, None when
    it can: a required column missing, an unknown kind or condition, a severity other than 0 for ``clean`` or
    1..5 for any other condition, an ``n`` below 1 (0 only for a NaN value: measured over no examples), or a
    value :func:`value_problem` refuses. The one row check of every reader (JSON lines and Parquet alike)."""
    kind = row.get("kind")
    missing = [k for k in (*_REQUIRED, *(_EVAL_KEYS if kind == "eval" else ()))
               if (row.get(k) is None or row.get(k) is pd.NA if k == "value" else not _given(row.get(k)))]
    if missing:
        return f"no {', '.join(missing)} (a {kind or 'result'} row needs {'them' if len(missing) > 1 else 'it'})"
    if kind not in KINDS:
        return f"unknown kind {kind!r} (valid: {', '.join(KINDS)})"
    condition, severity, count, value = row.get("condition"), row.get("severity"), row.get("n"), row.get("value")
    if _given(condition):
        problem = condition_problem(kind, condition, severity)
        if problem:
            return problem
    elif _given(severity):
        return f"severity {severity!r} without a condition"
    if _given(count) and not (isinstance(count, numbers.Real) and (count >= 1 or (
            count == 0 and isinstance(value, numbers.Real) and math.isnan(value)))):
        return f"n = {count!r} (examples behind the value: at least 1; 0 only for a NaN value over none)"
    return value_problem(row.get("metric"), value, count)


#: metrics whose values are fractions: a value outside [0, 1] is a damaged row, never a result
FRACTION_METRICS = ("accuracy",)


def value_problem(metric: Any, value: Any, n: Any = None) -> str | None:
    """Why a row's value cannot be a result (None when it can): +-inf for any metric; for an ``accuracy`` a NaN
    (except over no examples, ``n`` 0) or a value outside [0, 1]."""
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    v = float(value)
    if math.isinf(v):
        return f"{metric} value {v} is infinite"
    if metric in FRACTION_METRICS:
        if math.isnan(v) and n not in (0, 0.0):
            return f"{metric} value is NaN (over {n} examples)"
        if not math.isnan(v) and not 0.0 <= v <= 1.0:
            return f"{metric} value {v!r} is outside [0, 1]"
    return None


def _check_frame_rows(df: pd.DataFrame, path: Path) -> None:
    """:func:`row_problem` for every row of a Parquet table; the first bad row is a UserError naming it."""
    for i, row in enumerate(df.to_dict("records")):
        problem = row_problem(row)
        if problem:
            raise UserError(f"{path} row {i + 1} (run {row.get('run_id')}): {problem}; restore the file, or delete "
                            "it (it is rebuilt from rows/)")


# The last rows folder's files as checked frames, by file stamp (size, mtime, ctime, inode, device; see
# :func:`_rows_frame`): a store is read whole before and after every job of a campaign, and re-parsing and
# re-checking every earlier job's rows each time grew with the square of the jobs.
_FRAMES: dict[Path, tuple[tuple[int, ...], pd.DataFrame]] = {}
_FRAMES_FOLDER: list[Path] = []


def _rows_frame(path: Path) -> pd.DataFrame:
    """The rows of one file (:func:`_read_jsonl`) as a frame, re-read only when the file changed since this
    process read it: rows are only appended (the size changes) or the file is replaced or removed (a new inode
    and ctime). A file with a torn last line is read again every time, so its warning is never skipped."""
    try:
        st = path.stat()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None
    stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    hit = _FRAMES.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    rows, whole = _read_jsonl(path)
    frame = pd.DataFrame(rows)
    if _FRAMES_FOLDER != [path.parent]:                      # another store: forget the last one
        _FRAMES.clear()
        _FRAMES_FOLDER[:] = [path.parent]
    if whole:
        _FRAMES[path] = (stamp, frame)
    return frame


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Rows of one file, each checked by :func:`row_problem`, and whether no torn line was skipped: anything
    malformed is a UserError naming the file and line. The one tolerance, on purpose: a torn last line (not JSON
    and no newline after it: a writer killed, or still writing, mid-append; the rows before it are whole, and a
    resumed ``train`` rewrites its file) is skipped with a warning naming the file and line, never silently."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None
    lines = data.split(b"\n")
    rows, whole = [], True
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        torn = n == len(lines)                               # the last piece has no newline after it
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if torn:
                warnings.warn(f"{path} line {n}: torn last line skipped (no newline after it: a run killed or "
                              "still writing mid-append); the rows before it are used")
                whole = False
                continue
            if isinstance(e, UnicodeDecodeError):
                raise UserError(f"{path} line {n}: not UTF-8 text; remove or fix the file") from None
            raise UserError(f"{path} line {n}: not a JSON row ({e.msg}); remove or fix the line") from None
        rows.append(_check_row(row, path, n))
    return rows, whole


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Give a frame exactly COLUMNS, in order, with their dtypes (a column added later, missing or empty, takes the
    value it means: :data:`ADDED_LATER_COLUMNS`)."""
    df = df.copy()
    for col, dtype in COLUMNS.items():
        default = ADDED_LATER_COLUMNS.get(col, _DEFAULTS[dtype])
        if col not in df.columns:
            df[col] = default
        else:
            df[col] = df[col].fillna(default) if dtype != "float64" else df[col]
            if col in ADDED_LATER_COLUMNS:
                df[col] = df[col].replace("", default)
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
    rows_folder = rows_dir(store_dir)
    if rows_folder.exists():
        for path in sorted(rows_folder.glob("*.jsonl")):
            frame = _rows_frame(path)
            if len(frame):
                frames.append(frame)
                seen.add(path.stem)
    parquet = results_path(store_dir)
    if parquet.exists():
        try:
            df = pd.read_parquet(parquet)
        except Exception as e:  # noqa: BLE001 - any reader failure means a corrupt file
            raise UserError(f"cannot read {parquet}: {e}") from None
        missing = sorted(set(COLUMNS) - set(df.columns) - set(ADDED_LATER_COLUMNS))
        if missing:
            raise UserError(f"{parquet} is not a results table (no column {', '.join(missing)}); delete it and "
                            "run `dgsa-bench report` or any command that writes the store to rebuild it")
        df = df[~df["run_id"].isin(seen)]
        _check_frame_rows(df, parquet)
        frames.append(df)
    frames = [f for f in frames if len(f)]
    if not frames:
        return normalize(pd.DataFrame(columns=list(COLUMNS)))
    return normalize(pd.concat(frames, ignore_index=True))


def compact(store_dir: str | Path) -> Path:
    """Write all rows to results.parquet (atomic, under the store's compaction lock: see the module docstring);
    the JSONL files stay as the write-ahead log. Prediction files in an older encoding are re-encoded in the
    compact one (same table: :func:`reencode_predictions`)."""
    store_dir = Path(store_dir)
    path = results_path(store_dir)
    with _compaction_lock(store_dir):
        df = load_results(store_dir)                         # read inside the lock: nothing older wins
        with atomic.atomic_path(path) as tmp:
            df.to_parquet(tmp, index=False)
        reencode_predictions(store_dir)
    return path


# Per-example predictions are most of a store's bytes (ten thousand images x 96 conditions per evaluation): zstd,
# dictionary pages for the repetitive columns and delta encoding for the example index (which counts up within a
# condition) make a file about 5x smaller than pandas' default (snappy, plain index), with the identical table.
# Stored example by example (each image's label once per run of equal values, its predictions under every condition
# side by side, which mostly agree), a CIFAR evaluation's file is a further 2.2x smaller (570 -> 256 kB); the
# file's metadata keeps the condition blocks' order, and reading restores the table's own order exactly.
_PREDICTION_CODEC = "ZSTD"
_LAYOUT_KEY = b"dgsa.predictions.by_example"


def write_predictions_file(df: pd.DataFrame, path: Path) -> None:
    """Write a predictions table atomically in the store's compact Parquet encoding."""
    with atomic.atomic_path(path) as tmp:
        _write_compact_parquet(df, tmp)


def _condition_blocks(df: pd.DataFrame) -> list[list[Any]] | None:
    """The (condition, severity) blocks of a predictions table in their order, when the table is such blocks one
    after another, each with strictly increasing example indices (how evaluation writes it); else None."""
    import numpy as np
    if not {"condition", "severity", "index"} <= set(df.columns) or df.empty:
        return None
    cond, sev, idx = df["condition"].astype(str).to_numpy(), df["severity"].to_numpy(), df["index"].to_numpy()
    change = (cond[1:] != cond[:-1]) | (sev[1:] != sev[:-1])
    starts = np.flatnonzero(np.r_[True, change])
    blocks = [[str(cond[i]), int(sev[i])] for i in starts]
    if len({tuple(b) for b in blocks}) != len(blocks) or ((np.diff(idx) <= 0) & ~change).any():
        return None
    return blocks


def _block_ranks(df: pd.DataFrame, blocks: list[list[Any]]) -> Any:
    """Each row's block position in ``blocks``."""
    wanted = pd.MultiIndex.from_tuples([(str(c), int(s)) for c, s in blocks])
    rows = pd.MultiIndex.from_arrays([df["condition"].astype(str).to_numpy(), df["severity"].astype(int).to_numpy()])
    ranks = wanted.get_indexer(rows)
    if (ranks < 0).any():
        raise RunFailure("a predictions file's rows do not match its recorded condition blocks")
    return ranks


def read_predictions_file(path: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """One predictions file as its table (``columns``: only those), rows in the order they were written (a file
    stored example by example is put back in its condition blocks' order when index, condition and severity are
    read)."""
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(columns) if columns is not None else None)
    layout = (table.schema.metadata or {}).get(_LAYOUT_KEY)
    df = table.to_pandas()
    if layout is not None and {"index", "condition", "severity"} <= set(df.columns):
        order = np.lexsort((df["index"].to_numpy(), _block_ranks(df, json.loads(layout)["blocks"])))
        df = df.iloc[order].reset_index(drop=True)
    return df


def _write_compact_parquet(df: pd.DataFrame, path: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    blocks = _condition_blocks(df)
    if blocks is not None:            # example by example (see _PREDICTION_CODEC's comment)
        table = table.take(pa.array(np.lexsort((_block_ranks(df, blocks), df["index"].to_numpy()))))
        meta = dict(table.schema.metadata or {})
        meta[_LAYOUT_KEY] = json.dumps({"blocks": blocks}).encode()
        table = table.replace_schema_metadata(meta)
    deltas = [f.name for f in table.schema if f.name == "index" and pa.types.is_integer(f.type)]
    pq.write_table(table, path, compression=_PREDICTION_CODEC.lower(), compression_level=9,
                   use_dictionary=[c for c in table.column_names if c not in deltas],
                   column_encoding={c: "DELTA_BINARY_PACKED" for c in deltas} or None)


def reencode_predictions(store_dir: str | Path) -> list[Path]:
    """Rewrite (atomically) every prediction file of the store not yet in the compact encoding; the new file is
    read back and checked equal to the old table before it replaces it. A symbolic link is left as it is (the
    store did not write it: re-encoding would replace the link). Returns the files rewritten."""
    import pyarrow.parquet as pq

    done = []
    for path in sorted(predictions_dir(store_dir).glob("*.parquet")):
        if path.is_symlink():
            continue
        pf = pq.ParquetFile(path)
        meta = pf.metadata
        if meta.num_row_groups == 0 or (meta.row_group(0).column(0).compression == _PREDICTION_CODEC
                                        and _LAYOUT_KEY in (pf.schema_arrow.metadata or {})):
            continue
        df = read_predictions_file(path)
        if meta.row_group(0).column(0).compression == _PREDICTION_CODEC and _condition_blocks(df) is None:
            continue                          # compact already, and not a table of condition blocks
        with atomic.atomic_path(path) as tmp:
            _write_compact_parquet(df, tmp)
            if not read_predictions_file(tmp).equals(df):
                raise RunFailure(f"re-encoding {path} would change its table; left as it was")
        done.append(path)
    return done


@contextlib.contextmanager
def _compaction_lock(store_dir: Path) -> Iterator[None]:
    """The store's compaction lock (blocking): ``filelock.FileLock`` takes an OS lock (flock on POSIX) that dies
    with its holder, so a killed writer never leaves the store locked."""
    from filelock import FileLock
    store_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(store_dir / ".compact.lock"), thread_local=False):
        yield


def _finished_path(store_dir: str | Path, name: str) -> Path:
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise UserError(f"not a record name: {name!r}")
    return finished_dir(store_dir) / f"{name}.json"


def mark_finished(store_dir: str | Path, name: str, record: dict[str, Any]) -> None:
    """Record (atomically) that the unit of work ``name`` (a job id, ``rollout-<job id>``) is done."""
    path = _finished_path(store_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, record)


def read_finished(store_dir: str | Path, name: str) -> dict[str, Any] | None:
    """The record :func:`mark_finished` wrote for ``name`` when its run's rows are in this store, else None."""
    try:
        record = json.loads(_finished_path(store_dir, name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    rid = record.get("eval_run_id") or record.get("run_id")
    if not isinstance(rid, str) or not has_rows(store_dir, rid):
        return None
    return record


def load_runs(store_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Provenance records by run id."""
    out = {}
    for p in sorted(runs_dir(store_dir).glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
    return out


def load_predictions(store_dir: str | Path, run_id: str | None = None) -> pd.DataFrame:
    """Per-example predictions (columns: run_id, condition, severity, index, label, pred, ...)."""
    paths = sorted(predictions_dir(store_dir).glob(f"{run_id or ''}*.parquet"))
    if not paths:
        return pd.DataFrame(columns=["run_id", "condition", "severity", "index", "label", "pred"])
    frames = []
    for p in paths:
        try:
            frames.append(read_predictions_file(p))
        except Exception as e:  # noqa: BLE001 - any reader failure means a corrupt file
            raise UserError(f"cannot read predictions {p}: {' '.join(str(e).split())[:160]}") from None
    return pd.concat(frames, ignore_index=True)
