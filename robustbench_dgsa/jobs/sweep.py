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
when several GPUs are visible), ``run_one`` (one job by index: what each Slurm array task calls),
``write_slurm_script`` (plain sbatch array script, nothing extra needed) and ``submit_submitit``
(optional extra ``pip install robustbench-dgsa[slurm]``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from robustbench_dgsa.jobs import job as job_runner
from robustbench_dgsa.jobs.job import JOB_DONE, JOB_FAILED, EvalSettings, Job, JobLocked, is_finished, job_dir
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
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
         overrides: dict[str, Any] | None = None) -> list[Job]:
    """All (model, dataset, seed) jobs whose modalities match, in model -> dataset -> seed order."""
    from robustbench_dgsa.config import PRESETS
    from robustbench_dgsa.engine.predict import dataset_info
    from robustbench_dgsa.models import get_model_config
    if preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r} (valid: {', '.join(PRESETS)})")
    modality_of = {d: dataset_info(d).modality for d in datasets}
    if not models or not datasets or not seeds:
        raise UserError("a sweep needs at least one model, one dataset and one seed")
    ov = {str(k): str(v) for k, v in (overrides or {}).items()}
    jobs: list[Job] = []
    for m in models:
        modality = get_model_config(m).modality
        for d in datasets:
            if modality_of[d] != modality:
                continue  # e.g. a text model in a sweep that also lists image datasets
            for s in seeds:
                jobs.append(Job(job_id(m, d, preset, s, ov), m, d, preset, int(s), dict(ov)))
    if not jobs:
        raise UserError("no job: none of the models takes the modality of the datasets given")
    return jobs


def write_plan(sweep_dir: str | Path, jobs: Sequence[Job], *, data_root: str | None = None,
               download: bool = False, evaluation: EvalSettings | None = None, device: str = "auto") -> list[Job]:
    """Write (or extend) a sweep directory. Existing jobs keep their positions; new ones are appended."""
    sweep_dir = Path(sweep_dir)
    settings = {"data_root": data_root, "download": bool(download), "device": device,
                "evaluation": dataclasses.asdict(evaluation or EvalSettings())}
    sfile = sweep_dir / SETTINGS_FILE
    if sfile.exists():
        old = json.loads(sfile.read_text())
        if old != settings:
            raise UserError(f"{sweep_dir} was planned with other settings ({SETTINGS_FILE}); "
                            "use a new sweep directory")
    existing = load_jobs(sweep_dir) if (sweep_dir / JOBS_FILE).exists() else []
    known = {j.id for j in existing}
    merged = existing + [j for j in jobs if j.id not in known]
    atomic.write_json(sfile, settings)
    atomic.write_text(sweep_dir / JOBS_FILE, "".join(json.dumps(j.to_dict(), sort_keys=True) + "\n" for j in merged))
    return merged


def load_jobs(sweep_dir: str | Path) -> list[Job]:
    path = Path(sweep_dir) / JOBS_FILE
    if not path.exists():
        raise UserError(f"not a sweep directory (no {JOBS_FILE}): {sweep_dir}; create one with `dgsa-bench sweep plan`")
    jobs = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {path}: {e}") from None
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                jobs.append(Job.from_dict(json.loads(line)))
            except (json.JSONDecodeError, UserError) as e:
                raise UserError(f"{path} line {n}: {e}; re-plan with `dgsa-bench sweep plan`") from None
    return jobs


def load_settings(sweep_dir: str | Path) -> dict[str, Any]:
    path = Path(sweep_dir) / SETTINGS_FILE
    if not path.exists():
        raise UserError(f"not a sweep directory (no {SETTINGS_FILE}): {sweep_dir}")
    return json.loads(path.read_text())


def run_job(sweep_dir: str | Path, job: Job, *, progress: bool = False) -> dict[str, Any]:
    """Train (resuming if half done) and evaluate one job with the sweep's settings. Returns its job_done record."""
    settings = load_settings(sweep_dir)
    evaluation = EvalSettings(**(settings.get("evaluation") or {}))
    return job_runner.run_job(sweep_dir, job, evaluation, device=settings.get("device") or "auto",
                              data_root=settings.get("data_root"), download=bool(settings.get("download")),
                              progress=progress)


def run_one(sweep_dir: str | Path, index: int, *, progress: bool = False) -> dict[str, Any]:
    """Run job number ``index`` of ``jobs.jsonl`` (a Slurm array task); JobLocked while another process runs it."""
    jobs = load_jobs(sweep_dir)
    if not 0 <= index < len(jobs):
        raise UserError(f"job index {index} out of range: the sweep has {len(jobs)} jobs (0..{len(jobs) - 1})")
    job = jobs[index]
    if is_finished(sweep_dir, job):
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
        return summary

    import queue
    slots: "queue.Queue[str | None]" = queue.Queue()
    for w in range(workers):
        slots.put(devices[w % len(devices)] if devices else None)
    threads = max(1, (os.cpu_count() or 1) // workers)

    def launch(item: tuple[int, Job]) -> tuple[Job, int, str]:
        i, job = item
        dev = slots.get()
        try:
            if is_finished(sweep_dir, job) or _busy(job):     # done or taken by another runner meanwhile
                return job, -1, ""
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
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

    def _busy(job: Job) -> bool:
        lock = job_dir(sweep_dir, job) / job_runner.LOCK
        try:
            info, mtime = json.loads(lock.read_text(encoding="utf-8")), lock.stat().st_mtime
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return False
        return isinstance(info, dict) and job_runner.owner_alive(info, mtime)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for job, rc, logf in pool.map(launch, pending):
            if rc == 0:
                summary["ran"].append(job.id)
            elif rc == -1 or is_finished(sweep_dir, job) or _busy(job):
                log(f"[sweep] skip {job.id}: run by another process")
                summary["busy"].append(job.id)
            else:
                log(f"[sweep] job {job.id} failed (exit {rc}); log: {logf}")
                summary["failed"].append({"id": job.id, "error": f"exit {rc}, see {logf}"})
    return summary


def _cuda_count() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


# --- Slurm -----------------------------------------------------------------------------------------------

def write_slurm_script(sweep_dir: str | Path, *, time_limit: str = "24:00:00", gpus: int = 1, cpus: int = 8,
                       mem: str = "32G", partition: str | None = None, account: str | None = None,
                       max_parallel: int | None = None, setup: Sequence[str] = (),
                       command: str = "dgsa-bench") -> Path:
    """Write ``slurm/sweep.sbatch``: a job array over all jobs (finished ones exit at once). Submit with sbatch."""
    sweep_dir = Path(sweep_dir).resolve()
    jobs = load_jobs(sweep_dir)
    (sweep_dir / "slurm").mkdir(parents=True, exist_ok=True)
    array = f"0-{len(jobs) - 1}" + (f"%{max_parallel}" if max_parallel else "")
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name=dgsa-{sweep_dir.name}"[:80],
             f"#SBATCH --array={array}",
             f"#SBATCH --output={sweep_dir}/slurm/%A_%a.out",
             f"#SBATCH --time={time_limit}",
             f"#SBATCH --cpus-per-task={cpus}",
             f"#SBATCH --mem={mem}"]
    if gpus:
        lines.append(f"#SBATCH --gres=gpu:{gpus}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += ["", "# Generated by `dgsa-bench sweep slurm`. Each array task runs one line of jobs.jsonl;",
              "# finished jobs return at once and half-trained ones resume, so resubmitting is safe.",
              "set -euo pipefail", *setup,
              f"{command} sweep run-one {sweep_dir} --index \"$SLURM_ARRAY_TASK_ID\"", ""]
    path = sweep_dir / "slurm" / "sweep.sbatch"
    atomic.write_text(path, "\n".join(lines))
    path.chmod(0o755)
    return path


def submit_submitit(sweep_dir: str | Path, *, time_limit_min: int = 24 * 60, gpus: int = 1, cpus: int = 8,
                    mem_gb: int = 32, partition: str | None = None, account: str | None = None,
                    max_parallel: int | None = None) -> list[str]:
    """Submit the unfinished jobs as a Slurm array through submitit (optional extra). Returns Slurm job ids."""
    try:
        import submitit  # type: ignore[import-not-found]
    except ImportError:
        raise UserError("submitit is not installed: pip install 'robustbench-dgsa[slurm]' -- or use "
                        "`dgsa-bench sweep slurm DIR` without --submitit to write an sbatch script") from None
    sweep_dir = Path(sweep_dir).resolve()
    jobs = load_jobs(sweep_dir)
    pending = [i for i, j in enumerate(jobs) if not is_finished(sweep_dir, j)]
    if not pending:
        log("[sweep] nothing to submit: every job is finished")
        return []
    ex = submitit.AutoExecutor(folder=str(sweep_dir / "slurm" / "submitit"))
    params: dict[str, Any] = dict(timeout_min=time_limit_min, gpus_per_node=gpus, cpus_per_task=cpus,
                                  mem_gb=mem_gb, slurm_array_parallelism=max_parallel or len(pending),
                                  name=f"dgsa-{sweep_dir.name}")
    if partition:
        params["slurm_partition"] = partition
    if account:
        params["slurm_account"] = account
    ex.update_parameters(**params)
    submitted = ex.map_array(run_one, [str(sweep_dir)] * len(pending), pending)
    return [s.job_id for s in submitted]
