"""The one job runner: train (resuming a half-done run) -> evaluate, into a shared results store.

Used by sweeps (:mod:`robustbench_dgsa.jobs.sweep`: local pool, Slurm array tasks) and by the main job
(:mod:`robustbench_dgsa.jobs.reproduce`). A job lives in ``<root>/runs/<job id>/`` and writes its rows to
``<root>/store``::

    checkpoint.safetensors, train_state.safetensors, done.json    from train
    job_done.json       written last: train and evaluation run ids, final metrics, evaluation summary
    job_failed.json     the last failure (error, traceback, host); removed when the job later succeeds
    job.lock            held while the job runs (pid, host, boot id, process start time, token)

A job is finished when ``job_done.json`` is there and records this job, its checkpoint is there and is the one the
record names (run id, model, seed in its header), and its evaluation rows are in the store and of that model
(:func:`read_done`); another job's checkpoint or results in the folder (swapped, copied) do not count, and
:func:`run_job` refuses to run over them. :func:`run_job` returns at once for a finished job, and re-checks after
taking the lock, so two runners (two ``sweep run`` processes, a Slurm task and a local run) never train one job
twice.

Locks: taken inside a short ``filelock.FileLock`` on ``.job.lock.guard`` (so checking and replacing a stale lock
is one step), never taken over while the owner lives. The owner record itself stays hand-written: filelock's
marker locks cannot declare a crashed owner on another host dead (they wait for it forever, or expire by age
while the owner may still run), and this runner needs both: a live owner is never displaced, a dead one always. On the same host the owner is gone when its pid no longer
exists, or the pid now belongs to a process with another start time, or the machine rebooted (boot id); a
lock from another host (a shared cluster folder) is refreshed every minute by its owner and counts as stale
after :data:`STALE_AFTER_S` seconds without a refresh.

Job ids are file names: letters, digits, ``.``, ``_``, ``-``, not starting with a dot (checked on every use,
so a ``jobs.jsonl`` edited by hand cannot point a job outside ``runs/``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.progress import log

JOB_DONE = "job_done.json"
JOB_FAILED = "job_failed.json"
LOCK = "job.lock"
LOCK_GUARD = ".job.lock.guard"
CHECKPOINT = "checkpoint.safetensors"
STALE_AFTER_S = 600.0      # a lock from another host without a heartbeat for this long is stale
HEARTBEAT_S = 60.0
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def check_job_id(value: Any) -> str:
    """``value`` if it is a safe job id (a plain file name: the job's folder under ``runs/``), else a one-line
    UserError."""
    if not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value:
        raise UserError(f"invalid job id {value!r}: a job id must be a folder name (letters, digits, '.', '_', '-'; "
                        "no '..', no '/', not starting with '.', at most 200 characters)")
    return value


@dataclass
class Job:
    id: str
    model: str
    dataset: str
    preset: str
    seed: int
    overrides: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> "Job":
        """The one check of a job record (a line of a sweep's ``jobs.jsonl``): its shape and types, the id by
        :func:`check_job_id`. A one-line UserError says what is wrong (the caller adds where)."""
        if not isinstance(d, dict):
            raise UserError(f"expected a JSON object (a job), got {type(d).__name__}")
        missing = [k for k in ("id", "model", "dataset", "preset", "seed") if k not in d]
        if missing:
            raise UserError(f"the job lacks {', '.join(missing)}")
        check_job_id(d["id"])
        if not all(isinstance(d[k], str) and d[k] for k in ("model", "dataset", "preset")):
            raise UserError("model, dataset and preset must be non-empty text")
        seed = d["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise UserError(f"seed must be an integer ≥ 0, got {seed!r}")
        overrides = d.get("overrides") or {}
        if not isinstance(overrides, dict) or not all(isinstance(v, str) for v in overrides.values()):
            raise UserError(f"overrides must map keys to text values, got {overrides!r}")
        return cls(id=d["id"], model=d["model"], dataset=d["dataset"], preset=d["preset"], seed=seed,
                   overrides={str(k): v for k, v in overrides.items()})


@dataclass
class EvalSettings:
    """How each job's checkpoint is evaluated after training."""
    corruptions: list[str] = field(default_factory=list)       # image corruption names (resolved)
    severities: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    corruption_dir: str | None = None
    text_noise: list[str] = field(default_factory=list)
    corruption_seed: int = 0
    batch_size: int = 256


def job_dir(root: str | Path, job: Job) -> Path:
    return Path(root) / "runs" / check_job_id(job.id)


def job_precision(job: Job, *, device: str = "auto", amp: str | None = None) -> str:
    """The precision ``job`` computes in on this machine: its ``train.amp`` (or the pin ``amp``) resolved
    (:func:`~robustbench_dgsa.engine.predict.resolve_precision`)."""
    from robustbench_dgsa.engine.predict import resolve_device, resolve_precision
    cfg = job_config(job, device=device)
    return resolve_precision(resolve_device(cfg.train.device), amp or cfg.train.amp)


def _same_precision(info: dict[str, Any], precision: str | None) -> bool:
    """Whether a job record was computed in ``precision`` (None: not checked); a record without one was fp32."""
    from robustbench_dgsa.engine.train import recorded_precision
    return precision is None or recorded_precision(info) == precision


def read_done(root: str | Path, job: Job, precision: str | None = None) -> dict[str, Any] | None:
    """The job_done record of a finished job, else None. Finished means: ``job_done.json`` records this job, the
    checkpoint is there and is the one that record names (its header's run id, model and seed), and the
    evaluation rows are in the store and are of that model and seed (:func:`_belongs`). A folder holding another
    job's checkpoint or results (swapped, copied) is not finished. Without its folder (a store copied to another
    machine), the store's own record of the job (:func:`store.read_finished`) with rows of this model and seed
    says it is finished. ``precision`` ("fp32" / "bf16", :func:`job_precision`): a job finished in another
    precision is not finished (an fp32 run is never taken for the bf16 one asked for)."""
    from robustbench_dgsa import store
    d = job_dir(root, job)
    if not (d / CHECKPOINT).is_file():
        info = _done_in_store(root, job) if not d.exists() else None
        return info if info is not None and _same_precision(info, precision) else None
    try:
        info = json.loads((d / JOB_DONE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    rid = info.get("eval_run_id") if isinstance(info, dict) else None
    rows = store.rows_path(Path(root) / "store", rid)
    if not isinstance(rid, str) or not rows.is_file() or not _same_precision(info, precision):
        return None
    return None if _belongs(job, info, d / CHECKPOINT, rows) else _located(info, d)


def _located(info: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A job record read back, its checkpoint (stored relative to the record's folder) as a path from here."""
    ckpt = info.get("checkpoint")
    if isinstance(ckpt, str) and ckpt and not Path(ckpt).is_absolute():
        info = {**info, "checkpoint": os.path.normpath(Path(folder).absolute() / ckpt)}
    return info


def _done_in_store(root: str | Path, job: Job) -> dict[str, Any] | None:
    from robustbench_dgsa import store
    info = store.read_finished(Path(root) / "store", job.id)
    if info is None or info.get("job") != job.to_dict():
        return None
    rows = store.rows_path(Path(root) / "store", info["eval_run_id"])
    try:
        with open(rows, encoding="utf-8") as f:
            first = json.loads(f.readline())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    ok = isinstance(first, dict) and (first.get("model"), first.get("seed")) == (job.model, job.seed)
    return _located(info, Path(root) / "store") if ok else None


def foreign_results(root: str | Path, job: Job) -> str | None:
    """Why ``job``'s folder holds a finished-looking record that is not this job's (another job's checkpoint,
    record or evaluation: swapped or copied folders), None otherwise."""
    from robustbench_dgsa import store
    d = job_dir(root, job)
    try:
        info = json.loads((d / JOB_DONE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(info, dict) or not (d / CHECKPOINT).is_file():
        return None
    rows = store.rows_path(Path(root) / "store", info.get("eval_run_id"))
    return _belongs(job, info, d / CHECKPOINT, rows) if rows.is_file() else None


def _belongs(job: Job, info: dict[str, Any], checkpoint: Path, rows: Path) -> str | None:
    """Why the finished-looking job folder is not ``job``'s own (None when it is)."""
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    if info.get("job") != job.to_dict():
        return f"{JOB_DONE} records job {(info.get('job') or {}).get('id')!r}"
    try:
        _, meta = read_checkpoint_meta(checkpoint)
    except UserError as e:
        return str(e)
    if (meta.get("run_id"), meta.get("model"), meta.get("seed")) != (info.get("train_run_id"), job.model, job.seed):
        return (f"{checkpoint.name} is run {meta.get('run_id')} of {meta.get('model')} seed {meta.get('seed')}, not "
                f"run {info.get('train_run_id')} of {job.model} seed {job.seed}")
    try:
        with open(rows, encoding="utf-8") as f:
            first = json.loads(f.readline())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"unreadable evaluation rows {rows}"
    got = (first.get("model"), first.get("seed"), first.get("config_hash")) if isinstance(first, dict) else None
    if got != (meta.get("model"), job.seed, meta.get("config_hash")):
        return f"evaluation rows {rows.name} are of {got[0] if got else '?'}, not of this job's checkpoint"
    return None


def is_finished(root: str | Path, job: Job, *, device: str = "auto", amp: str | None = None) -> bool:
    """Whether ``job`` finished in the precision it computes in here (:func:`job_precision`; ``amp`` pins it)."""
    return read_done(root, job, job_precision(job, device=device, amp=amp)) is not None


def run_job(root: str | Path, job: Job, evaluation: EvalSettings | None = None, *, device: str = "auto",
            data_root: str | None = None, download: bool = False, progress: bool = False,
            amp: str | None = None) -> dict[str, Any]:
    """Train (resuming) and evaluate ``job`` under its lock; returns its job_done record.

    ``amp`` pins the precision of training and evaluation without changing the job or its config hash ("off":
    rebuild jobs made in fp32); by default the job's ``train.amp`` resolved here. The record says which.

    Raises :class:`JobLocked` when another live process runs the job; any failure leaves ``job_failed.json``.
    Started as one rank of a data-parallel job (``srun`` or ``torchrun`` started every rank: see
    :func:`group_size`), every rank joins the process group first; rank 0 alone takes the lock and decides
    (finished, foreign results, locked) and tells the others, all ranks train together, and rank 0 alone evaluates
    and writes the record (another rank returns ``{"job", "rank", "trained"}``).
    """
    root = Path(root)
    kw = dict(device=device, data_root=data_root, download=download)
    world = _join_group(job, **kw)
    if not world.is_main:
        return _follow_rank_0(root, job, world, amp=amp, **kw)
    word = _Word(world)
    try:
        return _lead(root, job, evaluation or EvalSettings(), word, progress=progress, amp=amp, **kw)
    finally:
        word.say(False)        # rank 0 stopped before training (finished, locked, failed): the others stop too


def group_size() -> int:
    """The number of processes of the data-parallel job this process is a rank of (torchrun's or srun's
    variables); 1 outside one."""
    from robustbench_dgsa.engine.distributed import env_world
    found = env_world()
    return found[1] if found is not None else 1


def _join_group(job: Job, *, device: str, data_root: str | None, download: bool) -> Any:
    """This process's place in the job's process group (joined now), or the single-process world."""
    from robustbench_dgsa.engine import distributed
    if group_size() <= 1:
        return distributed.SINGLE
    from robustbench_dgsa.engine.predict import resolve_device
    cfg = job_config(job, device=device, data_root=data_root, download=download)
    world, _ = distributed.setup(resolve_device(cfg.train.device), cfg.train.batch_size)
    return world


class _Word:
    """Rank 0's word to the other ranks of a data-parallel job: whether they train (said once; nothing to say in
    a single process)."""

    def __init__(self, world: Any) -> None:
        self.world, self.said = world, not world.distributed

    def say(self, go: bool) -> None:
        if not self.said:
            from robustbench_dgsa.engine import distributed
            self.said = True
            distributed.all_true(go, self.world)  # every other rank passes True: the result is rank 0's word


def _lead(root: Path, job: Job, ev: EvalSettings, word: _Word, *, device: str, data_root: str | None,
          download: bool, progress: bool, amp: str | None = None) -> dict[str, Any]:
    """Rank 0's (or the only process's) part of :func:`run_job`."""
    out = job_dir(root, job)
    precision = job_precision(job, device=device, amp=amp)
    done = read_done(root, job, precision)
    if done is not None:
        return done
    _refuse_other_precision(out, job, precision)
    foreign = foreign_results(root, job)
    if foreign:
        raise UserError(f"job {job.id}: its folder {out} holds results that are not this job's ({foreign}); "
                        "nothing was run: remove the folder to run the job again")
    out.mkdir(parents=True, exist_ok=True)
    with JobLock(out):
        done = read_done(root, job, precision)       # finished by another runner while we were starting
        if done is not None:
            return done
        word.say(True)
        try:
            record = _train_and_evaluate(root, job, ev, device=device, data_root=data_root, download=download,
                                         progress=progress, amp=amp)
        except BaseException as e:
            atomic.write_json(out / JOB_FAILED, {"job": job.to_dict(), "error": f"{type(e).__name__}: {e}",
                                                 "traceback": traceback.format_exc(), "host": socket.gethostname()})
            raise
        from robustbench_dgsa import store
        from robustbench_dgsa.util.paths import relative_to
        # each record names the checkpoint relative to its own folder (the run folder, the store)
        atomic.write_json(out / JOB_DONE, {**record, "checkpoint": relative_to(record["checkpoint"], out)})
        store.mark_finished(root / "store", job.id,
                            {**record, "checkpoint": relative_to(record["checkpoint"], root / "store")})
        record = _located({**record, "checkpoint": relative_to(record["checkpoint"], out)}, out)
        (out / JOB_FAILED).unlink(missing_ok=True)
        return record


def _refuse_other_precision(out: Path, job: Job, precision: str) -> None:
    """A UserError before any work when ``out`` holds a run of ``job`` computed in another precision than the one
    asked for (it would resume in its own precision and never count as this precision's result)."""
    from robustbench_dgsa.engine.train import recorded_precision
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta
    if not (out / CHECKPOINT).is_file():
        return
    try:
        _, meta = read_checkpoint_meta(out / CHECKPOINT)
    except UserError:
        return                        # a damaged checkpoint: the trainer says what is wrong with it
    made_in = recorded_precision(meta)
    if made_in != precision:
        raise UserError(f"job {job.id}: {out} holds its run computed in {made_in}, but it computes in {precision} "
                        f"here (fp32 and bf16 results are not mixed); nothing was run: remove the folder to run the "
                        f"job in {precision}, or run it where it computes in {made_in}")


def _follow_rank_0(root: Path, job: Job, world: Any, *, device: str, data_root: str | None,
                   download: bool, amp: str | None = None) -> dict[str, Any]:
    """A rank other than 0: train with the others when rank 0 says so; rank 0 evaluates and writes alone."""
    from robustbench_dgsa.engine import distributed
    from robustbench_dgsa.engine.train import train
    if not distributed.all_true(True, world):
        return {"job": job.to_dict(), "rank": world.rank, "trained": False}
    cfg = job_config(job, device=device, data_root=data_root, download=download)
    train(cfg, job.seed, job_dir(root, job), store_dir=root / "store", resume=True, progress=False, amp=amp)
    distributed.finish()   # leave with rank 0 before it evaluates alone
    return {"job": job.to_dict(), "rank": world.rank, "trained": True}


def job_config(job: Job, *, device: str = "auto", data_root: str | None = None, download: bool = False):
    """The job's RunConfig: its preset and overrides, plus the runner's device / data root / download."""
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.models import get_model_config
    overrides = dict(job.overrides)
    if download:
        overrides.setdefault("data.download", "true")
    overrides.setdefault("train.device", device or "auto")
    cfg = resolve_config(get_model_config(job.model), job.dataset, job.preset, overrides=overrides)
    if data_root and cfg.data.data_root is None:
        cfg.data.data_root = str(data_root)
    return cfg


def _train_and_evaluate(root: Path, job: Job, ev: EvalSettings, *, device: str, data_root: str | None,
                        download: bool, progress: bool, amp: str | None = None) -> dict[str, Any]:
    from robustbench_dgsa.engine import distributed
    from robustbench_dgsa.engine.predict import amp_of
    from robustbench_dgsa.engine.evaluate import evaluate
    from robustbench_dgsa.engine.train import train
    t0 = time.monotonic()
    out, store_dir = job_dir(root, job), root / "store"
    cfg = job_config(job, device=device, data_root=data_root, download=download)
    tr = train(cfg, job.seed, out, store_dir=store_dir, resume=True, progress=progress, amp=amp)
    distributed.finish()   # a data-parallel job: the ranks leave together; rank 0 evaluates alone
    image = cfg.model.modality == "image"  # a mixed sweep: corruptions for images, noise for text
    asked = dict(corruptions=(ev.corruptions or None) if image else None, severities=ev.severities,
                 corruption_dir=ev.corruption_dir if image else None,
                 text_noise=None if image else (ev.text_noise or None), corruption_seed=ev.corruption_seed,
                 amp=amp_of(tr.precision))      # evaluated in the precision it was trained in
    res = earlier_evaluation(store_dir, tr.checkpoint, tr.run_id, asked)
    if res is None:
        res = evaluate(tr.checkpoint, store_dir=store_dir, batch_size=ev.batch_size, device=device or "auto",
                       progress=progress, **asked)
    else:
        log(f"[job] {job.id}: evaluation {res.run_id} of this checkpoint is already in the store (an earlier "
            "attempt stopped before its record); not evaluated again")
    return {"job": job.to_dict(), "train_run_id": tr.run_id, "eval_run_id": res.run_id, "precision": tr.precision,
            "checkpoint": str(tr.checkpoint), "final": tr.final, "evaluation": res.summary(),
            "seconds": round(time.monotonic() - t0, 3), "host": socket.gethostname(), "pid": os.getpid()}


def earlier_evaluation(store_dir: Path, checkpoint: Path, train_run_id: str, asked: dict[str, Any]) -> Any:
    """The complete evaluation run (:func:`robustbench_dgsa.engine.evaluate.recorded_result`) that an earlier,
    killed attempt of this job recorded for this very checkpoint (its hash and training run) with the conditions
    ``asked`` (evaluate's corruptions, severities, corruption_dir, text_noise, corruption_seed, and amp: the
    precision, a record without one being fp32), else None. The job
    runner checks this under the job's lock before it evaluates, so a job records its evaluation once however
    often it is restarted (check, then write; the readers' rule that the latest run of a cell counts stays for
    evaluations run on purpose again)."""
    from robustbench_dgsa import store
    from robustbench_dgsa.engine.evaluate import recorded_result
    from robustbench_dgsa.util.provenance import sha256_file
    want = {"train_run_id": train_run_id, "corruptions": list(asked["corruptions"] or []),
            "severities": sorted(set(int(s) for s in asked["severities"])),
            "corruption_dir": str(asked["corruption_dir"] or ""), "corruption_seed": int(asked["corruption_seed"]),
            "text_noise": list(asked["text_noise"] or [])}
    precision = "bf16" if asked.get("amp") == "bf16" else "fp32"
    sha = None
    for rid, rec in sorted(store.load_runs(store_dir).items(), reverse=True):   # the latest first
        if rec.get("kind") != "eval" or rec.get("train_run_id") != train_run_id:
            continue
        got = {**{k: rec.get(k) for k in want}, "severities": sorted(set(rec.get("severities") or []))}
        sha = sha or sha256_file(checkpoint)
        if got == want and rec.get("checkpoint_sha256") == sha and (rec.get("precision") or "fp32") == precision:
            found = recorded_result(store_dir, rid)
            if found is not None:
                return found
    return None


# --- locks -------------------------------------------------------------------------------------------------

class JobLocked(UserError):
    """Another live process runs this job."""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc), None where unknown."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) ": field 3 onwards
    return fields[19] if len(fields) > 19 else None   # field 22: starttime


def owner_alive(info: dict[str, Any], mtime: float) -> bool:
    """Whether the process that wrote lock ``info`` (last refreshed at ``mtime``) may still run."""
    if info.get("host") != socket.gethostname():
        return time.time() - mtime < STALE_AFTER_S
    if info.get("boot") and _boot_id() and info["boot"] != _boot_id():
        return False
    try:
        pid = int(info["pid"])
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (KeyError, TypeError, ValueError):
        return False
    except PermissionError:
        pass                                          # exists, owned by another user
    start = process_start(pid)
    return start is None or info.get("start") is None or str(info["start"]) == start


class _Guard:
    """A short exclusive lock around reading / replacing a job lock: ``filelock.FileLock`` (an OS lock that dies
    with its holder) on ``.job.lock.guard``."""

    def __init__(self, folder: Path) -> None:
        from filelock import FileLock
        self.lock = FileLock(str(folder / LOCK_GUARD), thread_local=False)

    def __enter__(self) -> "_Guard":
        self.lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


class JobLock:
    """An exclusive lock file in a job's folder (see the module docstring); refreshed while held. ``busy``: what
    the refusal says runs there (default: the job); ``dgsa-bench train`` locks its output folder with it too."""

    def __init__(self, folder: Path, busy: str | None = None) -> None:
        self.folder, self.path = Path(folder), Path(folder) / LOCK
        self.busy = busy
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "start": process_start(os.getpid()),
                   "boot": _boot_id(), "token": uuid.uuid4().hex, "since": time.time()}
        self._stop = threading.Event()

    def _read(self) -> tuple[dict[str, Any] | None, float]:
        try:
            mtime = self.path.stat().st_mtime
            info = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, 0.0
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return {}, 0.0                            # junk: not a live owner
        return (info if isinstance(info, dict) else {}), mtime

    def __enter__(self) -> "JobLock":
        with _Guard(self.folder):
            info, mtime = self._read()
            if info is not None and owner_alive(info, mtime):
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info.get("since") or mtime)))
                who = f"pid {info.get('pid')} on {info.get('host')} since {since} ({self.path})"
                if self.busy is not None:
                    raise JobLocked(f"{self.busy} ({who}); nothing was run: wait for it, or if that process is gone "
                                    "for good, delete the lock file")
                raise JobLocked(f"job {self.folder.name} is being run by {who}; if that process is gone "
                                "for good, delete the lock file")
            if info is not None:
                log(f"[job] taking over the stale lock of pid {info.get('pid')} on {info.get('host')}: {self.path}")
            atomic.write_json(self.path, self.me)
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()
        return self

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                pass

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        with _Guard(self.folder):
            info, _ = self._read()
            if info and info.get("token") == self.me["token"]:
                self.path.unlink(missing_ok=True)
