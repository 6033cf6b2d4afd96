"""Sweeps: models × datasets × seeds under one preset, trained and evaluated into ONE results store.

A sweep directory holds::

    sweep.json            settings shared by all jobs (preset, overrides, data root, evaluation options)
    jobs.jsonl            one job per line, in a fixed order (the Slurm array index is the line number)
    runs/<job id>/        checkpoint.safetensors, train_state.safetensors, done.json (from train), job_done.json
    store/                the results store all jobs write to (rows, runs, predictions, results.parquet)
    slurm/                sbatch script and logs (``dgsa-bench sweep slurm``)

Job ids are stable: a readable prefix plus a hash of (model, dataset, preset, seed, overrides), so planning the
same sweep again gives the same ids, and adding seeds or models appends jobs without renumbering old ones.
Each job runs through the one job runner (:func:`robustbench_dgsa.jobs.job.run_job`: lock, failure marker, store
check); ``run`` skips finished jobs and resumes half-trained ones, so it is idempotent: run it again after a
crash or a time-out, or run two ``sweep run`` at once on one folder (a job is never trained twice).

Executors: ``run`` (local pool: in-process for one worker, else one subprocess per job and one GPU per worker
when several GPUs are visible), ``run_one`` (one job by index: what each Slurm array task calls); the Slurm
side (sbatch array script, submitit) lives in :mod:`robustbench_dgsa.jobs.slurm`.

Everything is checked when it enters: ``plan`` resolves every job's config (unknown keys and bad values fail
at plan time, not on the cluster), and ``load_jobs`` / ``load_settings`` refuse a damaged file with one line
naming the file and line.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from robustbench_dgsa.config import check_overrides, check_value, load_preset, resolve_config, validate
from robustbench_dgsa.jobs import job as job_runner
from robustbench_dgsa.jobs.job import JOB_DONE, JOB_FAILED, EvalSettings, Job, JobLocked, job_dir
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.plugins import child_env
from robustbench_dgsa.util.procs import die_with_parent
from robustbench_dgsa.util.progress import log

JOBS_FILE = "jobs.jsonl"
SETTINGS_FILE = "sweep.json"


def job_id(model: str, dataset: str, preset: str, seed: int, overrides: dict[str, Any] | None = None) -> str:
    key = json.dumps({"model": model, "dataset": dataset, "preset": preset, "seed": int(seed),
                      "overrides": {str(k): str(v) for k, v in sorted((overrides or {}).items())}},
                     sort_keys=True, separators=(",", ":"))
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset).strip("_")[:40] or "data"
    return f"{model}-{safe}-{preset}-s{seed}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def plan(models: Sequence[str], seeds: Sequence[int], datasets: Sequence[str], preset: str = "tiny",
         overrides: dict[str, Any] | None = None, *, ffn_ratio: str | float | None = None) -> list[Job]:
    """All (model, dataset, seed) jobs whose modalities match, in model -> dataset -> seed order.

    ``ffn_ratio`` (e.g. ``"16/3"``, Table 2's second configuration) becomes the ``model.ffn_ratio`` override of
    the jobs of models with a SwiGLU FFN (DViT, DGViT, DT, DGT) only; the GELU models (ViT, Transformer) keep
    theirs, as the paper has one row for them. Every job's config is resolved here, so an unknown key or a bad
    value fails now, not on the cluster."""
    from robustbench_dgsa.data.registry import check_source_exists
    from robustbench_dgsa.engine.predict import dataset_info
    from robustbench_dgsa.models import get_model_config
    load_preset(preset)
    modality_of = {d: dataset_info(d).modality for d in datasets}
    if not models or not datasets or not seeds:
        raise UserError("a sweep needs at least one model, one dataset and one seed")
    ov = {str(k): str(v) for k, v in (overrides or {}).items()}
    check_overrides(ov)
    for m in models:
        for d in datasets:
            check_job_identity(m, d, ov)
    for d in datasets:
        check_source_exists(d)  # a folder:/npz:/csv: path that is not there fails now, not when the job runs
    jobs: list[Job] = []
    for m in models:
        modality = get_model_config(m).modality
        ov_m = model_overrides(m, ov, ffn_ratio)
        for d in datasets:
            if modality_of[d] != modality:
                continue  # e.g. a text model in a sweep that also lists image datasets
            check_job_config(m, d, preset, ov_m)
            for s in seeds:
                jobs.append(Job(job_id(m, d, preset, s, ov_m), m, d, preset, int(s), dict(ov_m)))
    if not jobs:
        raise UserError("no job: none of the models takes the modality of the datasets given")
    return jobs


def model_overrides(model: str, overrides: dict[str, str], ffn_ratio: str | float | None) -> dict[str, str]:
    """``overrides`` plus ``model.ffn_ratio`` when ``ffn_ratio`` is given and ``model`` has a SwiGLU FFN."""
    from robustbench_dgsa.models import get_model_config
    ov = dict(overrides)
    if ffn_ratio is not None:
        try:   # a bad value fails also in a plan of GELU models only
            check_overrides({"model.ffn_ratio": str(ffn_ratio)})
        except UserError as e:
            raise UserError(f"ffn_ratio={ffn_ratio} is not a valid FFN ratio ({e})", options="ffn_ratio") from None
        if get_model_config(model).ffn == "swiglu":
            ov["model.ffn_ratio"] = str(ffn_ratio)
    return ov


#: what a job is: the plan's model and dataset; an override may not change them behind the job record's back
_IDENTITY_KEYS = {"model.name": "model", "data.dataset": "dataset"}


def check_job_identity(model: str, dataset: str, overrides: dict[str, str]) -> None:
    """The job's model is registered, its dataset is a known name or source, and no override changes either."""
    from robustbench_dgsa.engine.predict import dataset_info
    from robustbench_dgsa.models import get_model_config
    get_model_config(model)
    dataset_info(dataset)
    for key, what in _IDENTITY_KEYS.items():
        if key in overrides and overrides[key] != {"model": model, "dataset": dataset}[what]:
            raise UserError(f"override {key}={overrides[key]} would change the {what} of the {model} on {dataset} "
                            f"job; a sweep takes each job's {what} from its plan")


def check_job_config(model: str, dataset: str, preset: str, overrides: dict[str, str]) -> None:
    """Resolve one job's config and validate it (:func:`robustbench_dgsa.config.validate`), as training will."""
    from robustbench_dgsa.engine.predict import dataset_info
    from robustbench_dgsa.models import get_model_config
    cfg = resolve_config(get_model_config(model), dataset, preset, overrides=overrides)
    validate(cfg, data_modality=dataset_info(dataset).modality)


def write_plan(sweep_dir: str | Path, jobs: Sequence[Job], *, data_root: str | None = None,
               download: bool = False, evaluation: EvalSettings | None = None, device: str = "auto") -> list[Job]:
    """Write (or extend) a sweep directory. Existing jobs keep their positions; new ones are appended."""
    sweep_dir = Path(sweep_dir)
    check_value("train", "device", device)  # every job trains there: a bad name fails now, not on the cluster
    settings = {"data_root": data_root, "download": bool(download), "device": device,
                "evaluation": dataclasses.asdict(evaluation or EvalSettings())}
    sfile = sweep_dir / SETTINGS_FILE
    if sfile.exists():
        old = load_settings(sweep_dir)
        if old != settings:
            raise UserError(f"{sweep_dir} was planned with other settings ({SETTINGS_FILE}); "
                            "use a new sweep directory")
    existing = load_jobs(sweep_dir) if (sweep_dir / JOBS_FILE).exists() else []
    known = {j.id for j in existing}
    merged = existing + [j for j in jobs if j.id not in known]
    atomic.write_json(sfile, settings)
    atomic.write_text(sweep_dir / JOBS_FILE, "".join(json.dumps(j.to_dict(), sort_keys=True) + "\n" for j in merged))
    return merged


def plan_sweep(sweep_dir: str | Path, models: Sequence[str], seeds: Sequence[int], datasets: Sequence[str],
               preset: str = "tiny", overrides: dict[str, Any] | None = None, *, data_root: str | None = None,
               download: bool = False, evaluation: EvalSettings | None = None, device: str = "auto",
               ffn_ratio: str | float | None = None) -> tuple[list[Job], list[Job]]:
    """:func:`plan` the jobs, check that the datasets that cannot be downloaded (ImageNet) are under
    ``data_root`` (:func:`robustbench_dgsa.data.registry.check_files`: one line, nothing written), then
    :func:`write_plan` them into ``sweep_dir``: (every job of the folder, the jobs of this plan)."""
    from robustbench_dgsa.data.registry import check_files
    jobs = plan(models, seeds, datasets, preset, overrides, ffn_ratio=ffn_ratio)
    for d in dict.fromkeys(j.dataset for j in jobs):
        check_files(d, data_root)
    merged = write_plan(sweep_dir, jobs, data_root=data_root, download=download, evaluation=evaluation,
                        device=device)
    return merged, jobs


def load_jobs(sweep_dir: str | Path) -> list[Job]:
    """The jobs of a sweep folder; a damaged ``jobs.jsonl`` is refused with one line naming file and line."""
    path = Path(sweep_dir) / JOBS_FILE
    if not path.exists():
        raise UserError(f"not a sweep directory (no {JOBS_FILE}): {sweep_dir}; create one with `dgsa-bench sweep plan`")
    jobs: list[Job] = []
    for n, line in enumerate(_read_text(path).splitlines(), 1):
        if line.strip():
            jobs.append(_parse_job(path, n, line))
    seen: set[str] = set()
    for job in jobs:
        if job.id in seen:
            raise UserError(f"{path}: job id {job.id!r} appears twice")
        seen.add(job.id)
    return jobs


def _parse_job(path: Path, n: int, line: str) -> Job:
    """Line ``n`` of a ``jobs.jsonl``: the record (:meth:`Job.from_dict`), its overrides and its identity."""
    where = f"{path} line {n}"
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise UserError(f"{where}: not valid JSON ({e.msg}, column {e.colno})") from None
    try:
        job = Job.from_dict(d)
        check_overrides(job.overrides)
        check_job_identity(job.model, job.dataset, job.overrides)
    except UserError as e:
        raise UserError(f"{where}: {e}") from None
    return job


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[:e.start].count(b"\n") + 1
        raise UserError(f"{path} line {line}: not UTF-8 text") from None
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None


_SETTINGS_KEYS = {"data_root", "download", "device", "evaluation"}


def load_settings(sweep_dir: str | Path) -> dict[str, Any]:
    """``sweep.json``; a damaged one is refused with one line naming the file (and line)."""
    path = Path(sweep_dir) / SETTINGS_FILE
    if not path.exists():
        raise UserError(f"not a sweep directory (no {SETTINGS_FILE}): {sweep_dir}")
    try:
        settings = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise UserError(f"{path} line {e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(settings, dict):
        raise UserError(f"{path}: expected a JSON object of sweep settings, got {type(settings).__name__}")
    unknown = sorted(set(settings) - _SETTINGS_KEYS)
    if unknown:
        raise UserError(f"{path}: unknown setting {unknown[0]!r} (valid: {', '.join(sorted(_SETTINGS_KEYS))})")
    ev = settings.get("evaluation", {})
    known = {f.name for f in dataclasses.fields(EvalSettings)}
    if not isinstance(ev, dict) or set(ev) - known:
        bad = sorted(set(ev) - known) if isinstance(ev, dict) else ev
        raise UserError(f"{path}: evaluation must be an object with keys {', '.join(sorted(known))}; got {bad!r}")
    return settings


def is_finished(sweep_dir: str | Path, job: Job) -> bool:
    """Whether ``job`` finished, in the precision it computes in on the sweep's device here
    (:func:`robustbench_dgsa.jobs.job.is_finished`)."""
    return job_runner.is_finished(sweep_dir, job, device=load_settings(sweep_dir).get("device") or "auto")


def run_job(sweep_dir: str | Path, job: Job, *, progress: bool = False) -> dict[str, Any]:
    """Train (resuming if half done) and evaluate one job with the sweep's settings. Returns its job_done record."""
    settings = load_settings(sweep_dir)
    evaluation = EvalSettings(**(settings.get("evaluation") or {}))
    return job_runner.run_job(sweep_dir, job, evaluation, device=settings.get("device") or "auto",
                              data_root=settings.get("data_root"), download=bool(settings.get("download")),
                              progress=progress)


#: set for the job processes that :func:`run` starts: the runner's pid, which they must not outlive
PARENT_ENV = "DGSA_DIE_WITH_PARENT"


def run_one(sweep_dir: str | Path, index: int, *, progress: bool = False) -> dict[str, Any]:
    """Run job number ``index`` of ``jobs.jsonl`` (a Slurm array task); JobLocked while another process runs it.
    Started by :func:`run` (``PARENT_ENV`` set), the process ends when that runner does, even after kill -9.
    Under ``srun`` with several tasks (or torchrun) each process is one rank of the job's data-parallel training
    (:func:`robustbench_dgsa.jobs.job.run_job`)."""
    parent = os.environ.pop(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
    jobs = load_jobs(sweep_dir)
    if not 0 <= index < len(jobs):
        raise UserError(f"job index {index} out of range: the sweep has {len(jobs)} jobs (0..{len(jobs) - 1})")
    job = jobs[index]
    if job_runner.group_size() == 1 and is_finished(sweep_dir, job):  # the ranks of a group decide together
        log(f"[sweep] job {index} {job.id} already finished")
        return json.loads((job_dir(sweep_dir, job) / JOB_DONE).read_text())
    return run_job(sweep_dir, job, progress=progress)


def status(sweep_dir: str | Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"finished": [], "failed": [], "pending": []}
    for job in load_jobs(sweep_dir):
        d = job_dir(sweep_dir, job)
        if is_finished(sweep_dir, job):
            out["finished"].append(job.id)
        elif (d / JOB_FAILED).exists():
            out["failed"].append(job.id)
        else:
            out["pending"].append(job.id)
    return out


def run(sweep_dir: str | Path, workers: int | None = None, devices: Sequence[str] | None = None, *,
        progress: bool = False) -> dict[str, Any]:
    """Run every unfinished job; finished ones are skipped. Returns {"ran", "skipped", "failed"}.

    One worker without devices runs jobs in this process, one after another. Otherwise each job runs in its
    own process (``dgsa-bench sweep run-one``) with ``CUDA_VISIBLE_DEVICES`` set to the worker's device; with
    several GPUs visible and no ``workers``/``devices`` given, there is one worker per GPU.
    """
    sweep_dir = Path(sweep_dir)
    jobs = load_jobs(sweep_dir)
    load_settings(sweep_dir)
    if devices is None:
        n_gpu = _cuda_count()
        if n_gpu > 1 and workers is None:
            devices = [str(i) for i in range(n_gpu)]
    workers = workers or (len(devices) if devices else 1)
    pending = [(i, j) for i, j in enumerate(jobs) if not is_finished(sweep_dir, j)]
    summary: dict[str, Any] = {"ran": [], "skipped": [j.id for j in jobs if is_finished(sweep_dir, j)],
                               "failed": [], "busy": []}
    log(f"[sweep] {len(jobs)} jobs: {len(summary['skipped'])} finished, {len(pending)} to run "
        f"({workers} worker{'s' if workers > 1 else ''})")
    if not pending:
        return summary
    if workers == 1 and not devices:
        _run_here(sweep_dir, pending, summary, progress)
    else:
        _run_in_processes(sweep_dir, pending, summary, workers, devices)
    return summary


def _run_here(sweep_dir: Path, pending: list[tuple[int, Job]], summary: dict[str, Any], progress: bool) -> None:
    """Run the ``pending`` (index, job) pairs one after another in this process, recording each in ``summary``."""
    for i, job in pending:
        try:
            record = run_job(sweep_dir, job, progress=progress)
            summary["ran" if record.get("pid") == os.getpid() else "busy"].append(job.id)
        except JobLocked as e:
            log(f"[sweep] skip {job.id}: {e}")
            summary["busy"].append(job.id)
        except Exception as e:  # noqa: BLE001 - one failed job must not stop the sweep
            log(f"[sweep] job {i} {job.id} failed: {e}")
            summary["failed"].append({"id": job.id, "error": str(e)})


def _run_in_processes(sweep_dir: Path, pending: list[tuple[int, Job]], summary: dict[str, Any], workers: int,
                      devices: Sequence[str] | None) -> None:
    """Run each pending job in its own process (``sweep run-one``), ``workers`` at a time, worker ``w`` on device
    ``devices[w % len(devices)]`` (``CUDA_VISIBLE_DEVICES``); records each in ``summary``."""
    slots: "queue.Queue[str | None]" = queue.Queue()
    for w in range(workers):
        slots.put(devices[w % len(devices)] if devices else None)
    threads = max(1, (os.cpu_count() or 1) // workers)

    def launch(item: tuple[int, Job]) -> tuple[Job, int, str]:
        i, job = item
        dev = slots.get()
        try:
            if is_finished(sweep_dir, job) or _busy(sweep_dir, job):   # done or taken by another runner meanwhile
                return job, -1, ""
            env = dict(child_env(), OMP_NUM_THREADS=str(threads), **{PARENT_ENV: str(os.getpid())})
            if dev is not None:
                env["CUDA_VISIBLE_DEVICES"] = dev
            logf = job_dir(sweep_dir, job) / "log.txt"
            logf.parent.mkdir(parents=True, exist_ok=True)
            with open(logf, "a") as f:
                proc = subprocess.Popen([sys.executable, "-m", "robustbench_dgsa", "sweep", "run-one", str(sweep_dir),
                                         "--index", str(i)], env=env, stdout=f, stderr=subprocess.STDOUT)
                rc = proc.wait()
            done = job_runner.read_done(sweep_dir, job)
            if rc == 0 and done is not None and done.get("pid") != proc.pid:
                rc = -1                                   # finished by another runner, not by this one
            return job, rc, str(logf)
        finally:
            slots.put(dev)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for job, rc, logf in pool.map(launch, pending):
            if rc == 0:
                summary["ran"].append(job.id)
            elif rc == -1 or is_finished(sweep_dir, job) or _busy(sweep_dir, job):
                log(f"[sweep] skip {job.id}: run by another process")
                summary["busy"].append(job.id)
            else:
                log(f"[sweep] job {job.id} failed (exit {rc}); log: {logf}")
                summary["failed"].append({"id": job.id, "error": f"exit {rc}, see {logf}"})


def _busy(sweep_dir: Path, job: Job) -> bool:
    """Whether a live process holds the job's lock."""
    lock = job_dir(sweep_dir, job) / job_runner.LOCK
    try:
        info, mtime = json.loads(lock.read_text(encoding="utf-8")), lock.stat().st_mtime
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(info, dict) and job_runner.owner_alive(info, mtime)


def _cuda_count() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


