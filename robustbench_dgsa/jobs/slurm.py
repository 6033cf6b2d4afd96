"""Slurm for sweeps: checked resource values, the sbatch array script, and submission through submitit.

Values are checked before anything is written or submitted, each bad one refused with one line:

* time limit -- every Slurm format: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``;
  written into the script exactly as given (``90`` stays 90 minutes, ``1-12:00:00`` a day and a half);
* memory -- a whole number with an optional unit ``K``, ``M``, ``G`` or ``T``; no unit means megabytes, as in
  Slurm (``500M`` stays 500 MB);
* GPUs ≥ 0, CPUs ≥ 1, array parallelism ≥ 1, partition and account names without spaces or quotes;
* the layout of a multi-process job: nodes ≥ 1; GPUs per node (one process per GPU, nccl) or tasks per node (CPU
  processes, gloo), not both unless equal; several nodes need one of them; no per-job GPU count beside them; and
  every job's global batch must divide among the nodes × processes per node.

A job with a layout is one data-parallel training per array task: the script exports ``MASTER_ADDR`` (the first
node of the allocation) and ``MASTER_PORT`` (from the job id, :func:`~robustbench_dgsa.engine.distributed.slurm_port`)
and ``srun`` starts every rank, each reading its rank from ``SLURM_PROCID`` / ``SLURM_STEP_NUM_TASKS`` /
``SLURM_LOCALID``; through submitit, a multi-task job whose job function (:func:`run_one_rank`) takes the same from
submitit's job environment.

Paths in the script are quoted for both readers of it: the shell (``shlex.quote``) and sbatch's own
``#SBATCH`` parser, which understands the same quotes; ``%`` in a log path is doubled (a Slurm file pattern).
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from robustbench_dgsa.jobs import sweep
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.plugins import ENV_VAR as PLUGINS_ENV, child_env, plugin_modules
from robustbench_dgsa.util.progress import log

SCRIPT = "sweep.sbatch"

# (regex, format name) in Slurm's order; the groups are days, hours, minutes, seconds.
_TIME_FORMATS = (
    (r"(?P<m>\d+)", "MM"),
    (r"(?P<m>\d+):(?P<s>\d+)", "MM:SS"),
    (r"(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)", "HH:MM:SS"),
    (r"(?P<d>\d+)-(?P<h>\d+)", "D-HH"),
    (r"(?P<d>\d+)-(?P<h>\d+):(?P<m>\d+)", "D-HH:MM"),
    (r"(?P<d>\d+)-(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)", "D-HH:MM:SS"),
)
TIME_EXPECTED = "a Slurm time (" + ", ".join(name for _, name in _TIME_FORMATS) + ") longer than zero"
MEM_EXPECTED = "a whole number with an optional unit K, M, G or T (no unit = MB), e.g. 500M, 32G, 4096"
_MB_PER_UNIT = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_NAME = re.compile(r"[A-Za-z0-9._,:+-]+")


class ResourceError(UserError):
    """A refused Slurm resource value; ``key`` names it (time, mem, gpus, ...) so the CLI can name its flag."""

    def __init__(self, key: str, expected: str, value: Any) -> None:
        self.key, self.detail = key, f"expected {expected}, got {value!r}"
        super().__init__(f"Slurm {key}: {self.detail}")


def parse_time(text: str) -> int:
    """Minutes (rounded up) of a Slurm time limit; :class:`ResourceError` if it is not one."""
    t = str(text).strip()
    for pattern, _ in _TIME_FORMATS:
        m = re.fullmatch(pattern, t, flags=re.ASCII)
        if not m:
            continue
        parts = {k: int(v) for k, v in m.groupdict().items()}
        d, h, mi, s = (parts.get(k, 0) for k in "dhms")
        # A field right of a larger one is bounded (59 s, 59 min, 23 h); the leading one is not (90 = 90 min).
        if ("m" in parts and s >= 60) or ("h" in parts and mi >= 60) or ("d" in parts and h >= 24):
            break
        seconds = ((d * 24 + h) * 60 + mi) * 60 + s
        if seconds <= 0:
            break
        return math.ceil(seconds / 60)
    raise ResourceError("time", TIME_EXPECTED, text)


def parse_mem(text: str) -> int:
    """Megabytes (rounded up) of a Slurm memory value; :class:`ResourceError` if it is not one."""
    m = re.fullmatch(r"(\d+)([KMGTkmgt]?)", str(text).strip(), flags=re.ASCII)
    if not m or int(m.group(1)) <= 0:
        raise ResourceError("mem", MEM_EXPECTED, text)
    return math.ceil(int(m.group(1)) * _MB_PER_UNIT[(m.group(2) or "M").upper()])


@dataclass
class SlurmResources:
    """What each array task asks Slurm for. Build with :meth:`checked` to have every value validated."""
    time: str = "24:00:00"
    gpus: int | None = None            # GPUs of a one-process job (None: 1); none with a layout below
    cpus: int = 8                      # per process
    mem: str = "32G"                   # per node
    partition: str | None = None
    account: str | None = None
    max_parallel: int | None = None
    setup: list[str] = field(default_factory=list)
    nodes: int = 1                     # a multi-process (data-parallel) job: nodes x processes per node
    gpus_per_node: int | None = None   # one process per GPU (nccl); 0 = None
    tasks_per_node: int | None = None  # processes per node without GPUs (gloo)

    @classmethod
    def checked(cls, **values: Any) -> "SlurmResources":
        res = cls(**values)
        res.time, res.mem = str(res.time).strip(), str(res.mem).strip()
        parse_time(res.time)
        parse_mem(res.mem)
        optional = ("gpus", "max_parallel", "gpus_per_node", "tasks_per_node")
        for key, low in (("gpus", 0), ("cpus", 1), ("max_parallel", 1), ("nodes", 1), ("gpus_per_node", 0),
                         ("tasks_per_node", 1)):
            v = getattr(res, key)
            if v is None and key in optional:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ResourceError(key, f"an integer ≥ {low}", v)
        res.gpus_per_node = res.gpus_per_node or None
        res._check_layout()
        for key in ("partition", "account"):
            v = getattr(res, key)
            if v is not None and not _NAME.fullmatch(str(v)):
                raise ResourceError(key, "a name of letters, digits and . _ , : + -", v)
        for line in res.setup:
            if "\n" in line or "\r" in line:
                raise ResourceError("setup", "one shell line per value", line)
        res.setup = list(res.setup)
        return res

    def _check_layout(self) -> None:
        """The nodes / GPUs per node / tasks per node fit together (see the module docstring)."""
        g, t = self.gpus_per_node, self.tasks_per_node
        if g and t is not None and t != g:
            raise ResourceError("tasks_per_node", f"the GPUs per node ({g}), as each GPU has one process, or nothing",
                                t)
        if self.nodes > 1 and not (g or t):
            raise ResourceError("nodes", "1 unless the processes per node are given (GPUs per node, or tasks per "
                                "node for CPU processes)", self.nodes)
        if self.multi and self.gpus is not None and (self.gpus or g):
            raise ResourceError("gpus", "no per-job GPU count in a multi-process job (its GPUs are given per node)",
                                self.gpus)

    @property
    def minutes(self) -> int:
        return parse_time(self.time)

    @property
    def multi(self) -> bool:
        """Whether each array task is a multi-process job started by ``srun`` (a layout was given)."""
        return self.nodes > 1 or bool(self.gpus_per_node) or self.tasks_per_node is not None

    @property
    def tasks(self) -> int:
        """Processes per node."""
        return self.gpus_per_node or self.tasks_per_node or 1

    @property
    def world(self) -> int:
        """Processes per array task (the data-parallel world size)."""
        return self.nodes * self.tasks

    @property
    def job_gpus(self) -> int:
        """GPUs of a one-process job."""
        return 1 if self.gpus is None else self.gpus


def _sbatch_path(path: Path, pattern: str = "") -> str:
    """A path quoted for the shell and for sbatch's #SBATCH parser (which treats backslashes as escapes);
    with ``pattern`` (a Slurm file pattern such as ``%A_%a.out``) appended, literal ``%`` in the path doubled."""
    text = str(path)
    if any(c in text for c in "\\\n\r"):
        raise UserError(f"cannot use {text!r} in an sbatch script: move the sweep to a folder whose path has "
                        "no backslash or line break")
    return shlex.quote(f"{text.replace('%', '%%')}/{pattern}" if pattern else text)


def sbatch_script(sweep_dir: Path, n_jobs: int, res: SlurmResources, command: str = "dgsa-bench",
                  plugins: Sequence[str] = ()) -> str:
    """The text of the array script: one task per line of jobs.jsonl (with a layout, one multi-process job each).
    ``plugins``: modules every task imports (exported as DGSA_BENCH_PLUGINS; the suite loads them)."""
    sweep_dir = Path(sweep_dir)
    array = f"0-{n_jobs - 1}" + (f"%{res.max_parallel}" if res.max_parallel else "")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", sweep_dir.name).strip("_")[:60] or "sweep"
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name=dgsa-{name}",
             f"#SBATCH --array={array}",
             f"#SBATCH --output={_sbatch_path(sweep_dir / 'slurm', '%A_%a.out')}",
             f"#SBATCH --time={res.time}"]
    if res.multi:
        lines += [f"#SBATCH --nodes={res.nodes}", f"#SBATCH --ntasks-per-node={res.tasks}"]
        if res.gpus_per_node:
            lines.append(f"#SBATCH --gpus-per-node={res.gpus_per_node}")
    lines += [f"#SBATCH --cpus-per-task={res.cpus}", f"#SBATCH --mem={res.mem}"]
    if not res.multi and res.job_gpus:
        lines.append(f"#SBATCH --gres=gpu:{res.job_gpus}")
    if res.partition:
        lines.append(f"#SBATCH --partition={res.partition}")
    if res.account:
        lines.append(f"#SBATCH --account={res.account}")
    lines += ["", "# Generated by `dgsa-bench sweep slurm`. Each array task runs one line of jobs.jsonl;",
              "# finished jobs return at once and half-trained ones resume, so resubmitting is safe.",
              "set -euo pipefail", *res.setup]
    if plugins:
        names = ",".join(plugins)
        if not re.fullmatch(r"[A-Za-z0-9_.,]+", names):
            raise UserError(f"plugin module names {names!r} cannot go into an sbatch script")
        lines += [f"# The plugins this sweep was written with (attention mechanisms, models): every process imports "
                  f"them.", f"export {PLUGINS_ENV}={names}"]
    run = f"{command} sweep run-one {_sbatch_path(sweep_dir)} --index \"$SLURM_ARRAY_TASK_ID\""
    return "\n".join(lines + (_srun_lines(res, run) if res.multi else [run]) + [""])


def _srun_lines(res: SlurmResources, run: str) -> list[str]:
    """The rendezvous and the ``srun`` line of a multi-process array task."""
    from robustbench_dgsa.engine.distributed import PORT_BASE, PORT_SPAN
    gpus = f", one per GPU ({res.gpus_per_node} per node, nccl)" if res.gpus_per_node else " on the CPU (gloo)"
    return [f"# One data-parallel training per array task: {res.world} processes ({res.nodes} node(s) x "
            f"{res.tasks}){gpus}.",
            "# srun starts them; each takes its rank from SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID and",
            "# meets the others at the first node of the allocation, on a port derived from the job id.",
            'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            f"export MASTER_PORT=$(({PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN}))",
            " ".join(["srun", "--kill-on-bad-exit=1", f"--cpus-per-task={res.cpus}", run])]


def check_layout_fits(sweep_dir: Path, jobs: Sequence[Any], res: SlurmResources) -> None:
    """UserError unless every job's global batch divides among the ``res.world`` processes of its layout."""
    if res.world <= 1:
        return
    from robustbench_dgsa.config import check_batch_split
    from robustbench_dgsa.jobs.job import job_config
    settings = sweep.load_settings(sweep_dir)
    for job in jobs:
        cfg = job_config(job, device=settings.get("device") or "auto", data_root=settings.get("data_root"))
        try:
            check_batch_split(cfg.train.batch_size, res.world)
        except UserError as e:
            raise UserError(f"job {job.id} on {res.nodes} node(s) x {res.tasks} processes per node: {e}") from None


def _checked(values: dict[str, Any]) -> SlurmResources:
    """:meth:`SlurmResources.checked` of the keyword arguments of :func:`write_slurm_script` /
    :func:`submit_submitit` (``time_limit`` is the time)."""
    values = dict(values)
    values["time"] = values.pop("time_limit")
    values["setup"] = list(values.get("setup") or ())
    return SlurmResources.checked(**values)


def write_slurm_script(sweep_dir: str | Path, *, time_limit: str = "24:00:00", gpus: int | None = None,
                       cpus: int = 8, mem: str = "32G", partition: str | None = None, account: str | None = None,
                       max_parallel: int | None = None, setup: Sequence[str] = (), nodes: int = 1,
                       gpus_per_node: int | None = None, tasks_per_node: int | None = None,
                       command: str = "dgsa-bench") -> Path:
    """Write ``slurm/sweep.sbatch``: a job array over all jobs (finished ones exit at once). Submit with sbatch.
    ``gpus``: GPUs of a one-process job (None: 1). ``nodes`` / ``gpus_per_node`` / ``tasks_per_node``: each job
    is one data-parallel training of nodes x processes per node (``cpus`` per process, ``mem`` per node).
    Every value is checked first; nothing is written if one is refused."""
    res = _checked(dict(time_limit=time_limit, gpus=gpus, cpus=cpus, mem=mem, partition=partition, account=account,
                        max_parallel=max_parallel, setup=setup, nodes=nodes, gpus_per_node=gpus_per_node,
                        tasks_per_node=tasks_per_node))
    sweep_dir = Path(sweep_dir).resolve()
    jobs = sweep.load_jobs(sweep_dir)
    check_layout_fits(sweep_dir, jobs, res)
    text = sbatch_script(sweep_dir, len(jobs), res, command, plugin_modules())
    path = sweep_dir / "slurm" / SCRIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, text)
    path.chmod(0o755)
    return path


def submit_submitit(sweep_dir: str | Path, *, time_limit: str = "24:00:00", gpus: int | None = None, cpus: int = 8,
                    mem: str = "32G", partition: str | None = None, account: str | None = None,
                    max_parallel: int | None = None, setup: Sequence[str] = (), nodes: int = 1,
                    gpus_per_node: int | None = None, tasks_per_node: int | None = None) -> list[str]:
    """Submit the unfinished jobs as a Slurm array through submitit (optional extra). Returns Slurm job ids.
    The time limit goes in as whole minutes (rounded up), the memory as given; the resources mean what they mean
    for :func:`write_slurm_script` (with a layout each job is a multi-task job running :func:`run_one_rank`).

    submitit works by pickling: it writes the function and its arguments as a pickle into
    ``slurm/submitit/`` and the compute node unpickles it -- the one place the suite unpickles anything. That
    folder is made private (mode 0700: only the submitting user can plant or change a pickle there); the
    sbatch script of :func:`write_slurm_script` (the default) involves no pickle."""
    res = _checked(dict(time_limit=time_limit, gpus=gpus, cpus=cpus, mem=mem, partition=partition, account=account,
                        max_parallel=max_parallel, setup=setup, nodes=nodes, gpus_per_node=gpus_per_node,
                        tasks_per_node=tasks_per_node))
    try:
        import submitit  # type: ignore[import-not-found]  # optional extra: imported only when asked for
    except ImportError:
        raise UserError("submitit is not installed: pip install 'robustbench-dgsa[slurm]', or write an sbatch "
                        "script instead (write_slurm_script)", options="write_slurm_script") from None
    sweep_dir = Path(sweep_dir).resolve()
    jobs = sweep.load_jobs(sweep_dir)
    check_layout_fits(sweep_dir, jobs, res)
    pending = [i for i, j in enumerate(jobs) if not sweep.is_finished(sweep_dir, j)]
    if not pending:
        log("[sweep] nothing to submit: every job is finished")
        return []
    folder = sweep_dir / "slurm" / "submitit"
    made = [d for d in (folder, folder.parent) if not d.exists()]  # innermost first
    private_folder(folder)
    before = set(folder.rglob("*"))
    ex = submitit.AutoExecutor(folder=str(folder))
    ex.update_parameters(**submitit_parameters(sweep_dir, res, len(pending)))
    said = io.StringIO()  # submitit prints sbatch's complaint itself; it goes into the one error line instead
    try:
        with contextlib.redirect_stderr(said):
            with _plugins_exported():    # sbatch passes the environment on (--export=ALL): the jobs load them
                submitted = ex.map_array(job_function(res), [str(sweep_dir)] * len(pending), pending)
    except Exception as e:  # noqa: BLE001 - submitit's FailedJobError / sbatch errors: nothing was submitted
        _remove_new(folder, before, made)
        first = next((ln.strip() for ln in f"{e}\n{said.getvalue()}".splitlines() if ln.strip()), type(e).__name__)
        raise UserError(f"Slurm refused the submission (nothing was submitted): {first[:300]}") from None
    if said.getvalue().strip():
        log(said.getvalue().strip())
    return [s.job_id for s in submitted]


def private_folder(folder: Path) -> Path:
    """``folder`` created if needed and set to mode 0700 (owner only); a symbolic link there is refused."""
    if folder.is_symlink():
        raise UserError(f"{folder} is a symbolic link; remove it (submitit's pickles must stay in a private folder "
                        f"of the sweep)")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    return folder


def _remove_new(folder: Path, before: set[Path], made: list[Path]) -> None:
    """Delete what a failed submission wrote under ``folder`` (its pickles) and the folders ``made`` for it,
    keeping what was there before."""
    new = set(folder.rglob("*")) - before if folder.is_dir() else set()
    for p in [*sorted(new, key=lambda p: len(p.parts), reverse=True), *made]:
        try:
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        except OSError:
            pass


def submitit_parameters(sweep_dir: Path, res: SlurmResources, n_pending: int) -> dict[str, Any]:
    """submitit's AutoExecutor parameters for these resources."""
    params: dict[str, Any] = dict(timeout_min=res.minutes, gpus_per_node=res.job_gpus, cpus_per_task=res.cpus,
                                  slurm_mem=res.mem, slurm_array_parallelism=res.max_parallel or n_pending,
                                  name=f"dgsa-{Path(sweep_dir).name}")
    if res.multi:
        params.update(nodes=res.nodes, tasks_per_node=res.tasks, gpus_per_node=res.gpus_per_node or 0)
    if res.setup:
        params["slurm_setup"] = list(res.setup)
    if res.partition:
        params["slurm_partition"] = res.partition
    if res.account:
        params["slurm_account"] = res.account
    return params


def job_function(res: SlurmResources) -> Any:
    """What each submitit job runs: :func:`run_one_rank` in every task of a multi-process job, else
    :func:`~robustbench_dgsa.jobs.sweep.run_one`."""
    return run_one_rank if res.multi else sweep.run_one


@contextlib.contextmanager
def _plugins_exported() -> Any:
    """DGSA_BENCH_PLUGINS naming this process's plugins while submitit submits (and restored afterwards)."""
    before = os.environ.get(PLUGINS_ENV)
    names = child_env().get(PLUGINS_ENV)
    if names:
        os.environ[PLUGINS_ENV] = names
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PLUGINS_ENV, None)
        else:
            os.environ[PLUGINS_ENV] = before


def run_one_rank(sweep_dir: str, index: int) -> dict[str, Any]:
    """One task of a multi-task submitit job: one rank of job ``index``'s data-parallel training. The rank, world
    size, local rank and rendezvous (first node, a port from the job id) come from submitit's job environment
    (``submitit.helpers.TorchDistributedEnvironment``; each rank keeps every GPU of its node visible and uses the
    one of its local rank)."""
    from submitit.helpers import TorchDistributedEnvironment  # type: ignore[import-not-found]
    TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    return sweep.run_one(sweep_dir, index)
