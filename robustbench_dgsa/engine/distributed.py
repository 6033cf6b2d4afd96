"""Data-parallel training across processes (``torch.distributed`` + DDP): the one place that knows ranks, world
size, sharding and "only rank 0 writes".

A training run joins a process group when its environment describes one: ``torchrun`` (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) or a SLURM job step launched with ``srun`` (``SLURM_PROCID``,
``SLURM_STEP_NUM_TASKS``, ``SLURM_LOCALID``; ``MASTER_ADDR`` / ``MASTER_PORT`` from the environment, on one node
127.0.0.1 and a port derived from the job id). Backend: ``nccl`` on CUDA (rank ``r`` uses GPU ``LOCAL_RANK``),
``gloo`` on the CPU; every collective times out after ``DGSA_DIST_TIMEOUT_S`` seconds (default 600), so a rank
that hangs cannot hang the job forever, and a rank that dies breaks its peers' next collective at once.

Semantics (see :func:`batch_shard`, :func:`eval_shard`, :func:`scale_loss`):

* the configured batch size is the **global** batch; rank ``r`` of ``N`` takes positions ``r, r+N, r+2N, ...``
  of each global batch, so the union of the N micro-batches of step ``k`` is the one-process batch ``k`` and, with
  the loss scaled by ``N * local / global`` (1 unless the last batch is uneven), DDP's averaged gradient is the
  one-process gradient up to the order of float additions;
* evaluation: rank ``r`` takes a contiguous block of the examples and the sums are added over ranks, so every
  example counts exactly once (blocks may differ by one, or be empty);
* only rank 0 writes files (:func:`rank_writer`; the training loop gates its checkpoint writes on ``is_main``).

:func:`launch` runs a command in N local processes exactly as ``torchrun --standalone --nproc-per-node N`` would
(``torch.distributed.run``'s own launcher) and turns the workers' failures into one line.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import socket
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch

from robustbench_dgsa.config import check_batch_split
from robustbench_dgsa.util.errors import RunFailure, UserError
from robustbench_dgsa.util.plugins import ENV_VAR as PLUGINS_ENV, child_env

TIMEOUT_ENV = "DGSA_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 600.0
#: set by :func:`launch` in its workers: their error lines go to the launcher (which prints one), not to stderr
LAUNCHED_ENV = "DGSA_LAUNCHED_WORKER"
_HOST_BYTES = 256


@dataclass(frozen=True)
class World:
    """This process's place in the process group (a single process: rank 0 of 1, no backend)."""
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


SINGLE = World()
_STATE: dict[str, World] = {}
#: worlds this process joined (kept after it leaves: :func:`exit_process` needs to know)
_JOINED: list[World] = []


class PeerFailure(RunFailure):
    """A collective failed: another rank of the group stopped, was killed or timed out."""


# --- the environment ----------------------------------------------------------------------------------------

def env_world(environ: Mapping[str, str] | None = None) -> tuple[int, int, int] | None:
    """(rank, world size, local rank) that torchrun's or srun's variables describe; None when neither does."""
    env = os.environ if environ is None else environ
    try:
        if "WORLD_SIZE" in env and "RANK" in env:
            return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0"))
        if "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:   # an srun step (not the batch script)
            return int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"]), int(env.get("SLURM_LOCALID", "0"))
    except ValueError as e:
        raise UserError(f"malformed distributed environment variable ({e})") from None
    return None


def _rendezvous_env(env: Mapping[str, str]) -> dict[str, str]:
    """MASTER_ADDR / MASTER_PORT: given, or for a one-node srun step 127.0.0.1 and a port from the job id."""
    out = {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT") if env.get(k)}
    if len(out) == 2:
        return out
    if "SLURM_STEP_NUM_TASKS" in env and env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES", "1")) == "1":
        return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(slurm_port(env.get("SLURM_JOB_ID", "0"))), **out}
    raise UserError("a distributed run needs MASTER_ADDR and MASTER_PORT (the address of rank 0 and a free port); "
                    "e.g. MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1) MASTER_PORT=29500")


#: a SLURM job's rendezvous port: PORT_BASE + job id % PORT_SPAN (the sbatch script of ``sweep slurm`` says the same)
PORT_BASE, PORT_SPAN = 20000, 20000


def slurm_port(job_id: str | int) -> int:
    """The rendezvous port of SLURM job ``job_id`` (its digits; each array task has a job id of its own)."""
    digits = "".join(c for c in str(job_id) if c.isdigit())
    return PORT_BASE + int(digits or 0) % PORT_SPAN


def timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise UserError(f"{TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise UserError(f"{TIMEOUT_ENV} must be positive, got {raw!r}")
    return value


# --- joining and leaving --------------------------------------------------------------------------------------

def current() -> World:
    """The process group this process joined (:func:`setup`), else :data:`SINGLE`."""
    return _STATE.get("world", SINGLE)


def setup(device: torch.device, batch_size: int) -> tuple[World, torch.device]:
    """Join the process group the environment describes (once per process) and return (world, this rank's device).

    Without a distributed environment (or with a world of one): (:data:`SINGLE`, ``device``) unchanged. The global
    ``batch_size`` is checked first (:func:`robustbench_dgsa.config.check_batch_split`), before any connection is made.
    """
    found = env_world()
    if found is None or found[1] <= 1:
        return SINGLE, device
    rank, size, local_rank = found
    check_batch_split(batch_size, size)
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise UserError(f"local rank {local_rank} has no GPU: this node has {torch.cuda.device_count()}; start "
                            "at most one process per GPU")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    world = current()
    if world.distributed:
        return world, device
    import torch.distributed as dist
    backend = "nccl" if device.type == "cuda" else "gloo"
    os.environ.update(_rendezvous_env(os.environ))
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=size,
                            timeout=timedelta(seconds=timeout_s()))
    world = World(rank, size, local_rank, backend)
    _STATE["world"] = world
    _JOINED.append(world)
    atexit.register(teardown)
    _stop_on_sigterm(world)
    if not world.is_main:
        from robustbench_dgsa.util.progress import mute
        mute(True)
    return world, device


def _stop_on_sigterm(world: World) -> None:
    """A launcher ends the other ranks with SIGTERM when one fails: make that a :class:`PeerFailure`, so this rank
    cleans up like any failed run (its rows leave the store; checkpoint and state stay) and says why it stopped."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def stop(signum: int, frame: Any) -> None:
        _on_the_way_out()
        raise PeerFailure(f"rank {world.rank} was stopped by {signal.Signals(signum).name} (its launcher stops every "
                          "rank when one fails)")
    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: keep the default
        pass


def _on_the_way_out() -> None:
    """A failing rank finishes its cleanup and its one line undisturbed: a launcher's further SIGTERMs are ignored
    (its SIGKILL, 30 s later, still ends a rank that hangs)."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:
        pass


def finish() -> None:
    """Leave the process group together, where every rank's part ends: a barrier (rank 0 has written what it
    writes), then :func:`teardown`. A rank that leaves alone while the others still use the group can abort in
    gloo's threads at exit ("terminate called without an active exception"). No-op outside a distributed run."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    teardown()


def teardown() -> None:
    """Leave the process group (idempotent; also run at exit)."""
    import torch.distributed as dist
    _STATE.pop("world", None)
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def exit_process(code: int) -> None:
    """End this process with ``code``: in a process that joined a process group, after the exit handlers
    (``atexit``: :func:`teardown`, temporary files, logging) and flushed streams, by ``os._exit`` — skipping
    the interpreter's and C++'s teardown, where gloo could still abort a rank whose work had finished ("terminate
    called without an active exception", SIGABRT: seen three times in this suite's test runs, never on demand — a
    failed run for a finished one). Any other process: ``sys.exit(code)``."""
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if not _JOINED or run_exit_handlers is None:
        sys.exit(code)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


# --- sharding ------------------------------------------------------------------------------------------------

def batch_shard(n_global: int, world: World) -> torch.Tensor | None:
    """Positions of this rank's examples in a global batch of ``n_global`` (``rank::size``); None for one process."""
    if not world.distributed:
        return None
    return torch.arange(world.rank, n_global, world.size)


def eval_shard(n: int, world: World) -> slice:
    """This rank's contiguous block of ``n`` evaluation examples (blocks differ by at most one; all of them for one
    process)."""
    base, extra = divmod(n, world.size)
    start = world.rank * base + min(world.rank, extra)
    return slice(start, start + base + (world.rank < extra))


def scale_loss(loss: torch.Tensor, n_local: int, n_global: int, world: World) -> torch.Tensor:
    """The loss to back-propagate: DDP averages gradients over ranks, so a rank's mean loss weighs
    ``size * n_local / n_global`` (1 for even shards; ``loss`` itself then, bit for bit)."""
    share = world.size * n_local / n_global if n_global else 0.0
    return loss if share == 1.0 else loss * share


def wrap(model: torch.nn.Module, world: World, device: torch.device) -> torch.nn.Module:
    """The module that trains: DDP around ``model`` in a process group, ``model`` itself otherwise. Checkpoints are
    always written from ``model`` (the unwrapped one), so they load at any world size."""
    if not world.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


# --- collectives -----------------------------------------------------------------------------------------------

def all_sum(t: torch.Tensor, world: World) -> torch.Tensor:
    """``t`` summed over ranks (in place; ``t`` itself for one process)."""
    if world.distributed:
        import torch.distributed as dist
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_true(flag: torch.Tensor | bool, world: World) -> bool:
    """Whether ``flag`` holds on every rank (one process: ``bool(flag)``)."""
    if not world.distributed:
        return bool(flag)
    t = torch.tensor([0.0 if bool(flag) else 1.0], device=_collective_device(world))
    return float(all_sum(t, world)) == 0.0


def gather_strings(text: str, world: World) -> list[str]:
    """``text`` from every rank, in rank order (UTF-8 in fixed-size byte tensors: nothing is pickled)."""
    if not world.distributed:
        return [text]
    import torch.distributed as dist
    raw = text.encode("utf-8")[:_HOST_BYTES]
    mine = torch.zeros(_HOST_BYTES + 1, dtype=torch.uint8)
    mine[0] = len(raw)
    mine[1:1 + len(raw)] = torch.tensor(list(raw), dtype=torch.uint8)
    mine = mine.to(_collective_device(world))
    parts = [torch.empty_like(mine) for _ in range(world.size)]
    dist.all_gather(parts, mine)
    return [bytes(p[1:1 + int(p[0])].cpu().tolist()).decode("utf-8", "replace") for p in parts]


def describe(world: World) -> dict[str, Any]:
    """What a run record keeps of the group: world size, backend, the host of each rank (a collective)."""
    return {"world_size": world.size, "backend": world.backend,
            "hosts": gather_strings(socket.gethostname(), world)}


def _collective_device(world: World) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if world.backend == "nccl" else torch.device("cpu")


_PEER_SIGNS = ("connection closed", "connection reset", "broken pipe", "timed out", "timeout", "gloo", "nccl",
               "processgroup", "socket", "peer")


@contextmanager
def peer_failures(what: str) -> Iterator[None]:
    """Turn a failed collective (another rank died, was killed or hangs) into one :class:`PeerFailure` line that
    ends with ``what`` (where the run's state is)."""
    try:
        yield
    except PeerFailure as e:
        raise PeerFailure(f"{e}; {what}") from None
    except Exception as e:
        world = current()
        if world.distributed:
            _on_the_way_out()
        if not world.distributed or isinstance(e, (UserError, RunFailure)):
            raise
        dist_error = getattr(torch.distributed, "DistError", ())
        text = " ".join(str(e).split())
        if not (isinstance(e, dist_error) or any(s in text.lower() for s in _PEER_SIGNS)):
            raise
        raise PeerFailure(f"rank {world.rank} lost its process group ({text[:160]}): another rank stopped, was "
                          f"killed or timed out; {what}") from None


def rank_writer(writer: Any, world: World) -> Any:
    """``writer`` on rank 0; elsewhere a writer that writes nothing (rows, records: rank 0's alone)."""
    return writer if world.is_main else _NoWriter(writer)


class _NoWriter:
    """A results-store writer of a rank other than 0: same interface, writes nothing."""

    def __init__(self, writer: Any) -> None:
        self.run_id, self.store_dir, self.base = writer.run_id, writer.store_dir, writer.base

    def add(self, *args: Any, **kwargs: Any) -> None: ...

    def add_rows(self, rows: Any) -> None: ...

    def clear(self) -> None: ...

    def discard(self) -> None: ...

    def write_provenance(self, info: Any) -> None: ...

    def write_predictions(self, tag: str, df: Any) -> None: ...


# --- local launcher --------------------------------------------------------------------------------------------

def launch(nproc: int, argv: list[str], *, module: str = "robustbench_dgsa", monitor_interval: float = 0.5) -> None:
    """Run ``python -m module *argv`` in ``nproc`` processes on this machine, as ``torchrun --standalone
    --nproc-per-node nproc -m module *argv`` does (the same launcher, ``torch.distributed.run``). Returns when all
    succeed; otherwise one :class:`UserError` / :class:`RunFailure` / KeyboardInterrupt naming the first failure."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    args = torchrun.parse_args([f"--nproc-per-node={nproc}", "--max-restarts=0",
                                f"--monitor-interval={monitor_interval}",
                                "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", f"--rdzv-id={uuid.uuid4()}",
                                "-m", module, *argv])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    # the agent's notices and failure reports (each module's logger has its own level): failures come back as one
    # line below
    quiet = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
             if name.startswith("torch.distributed")]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.CRITICAL + 1)
    os.environ[LAUNCHED_ENV] = "1"
    plugins_before = os.environ.get(PLUGINS_ENV)
    os.environ.update({k: v for k, v in child_env().items() if k == PLUGINS_ENV})   # the ranks load our plugins
    try:
        config, cmd, cmd_args = torchrun.config_from_args(args)
        elastic_launch(config=config, entrypoint=cmd)(*cmd_args)
    except ChildFailedError as e:
        raise _failure(e.failures) from None
    except SignalException as e:
        if e.sigval == signal.SIGINT:
            raise KeyboardInterrupt from None
        raise RunFailure(f"the launcher received {e.sigval.name}; the workers were stopped") from None
    finally:
        os.environ.pop(LAUNCHED_ENV, None)
        if plugins_before is None:
            os.environ.pop(PLUGINS_ENV, None)
        else:
            os.environ[PLUGINS_ENV] = plugins_before
        for log, level in zip(quiet, levels):
            log.setLevel(level)


def _failure(failures: Mapping[int, Any]) -> BaseException:
    """One exception for the failed workers: the earliest error a worker reported itself (not a lost peer), else a
    worker that died without a word (signal, crash) together with what its peers saw."""
    reported, silent = [], []
    for rank, f in failures.items():  # in the order the launcher saw them fail
        info = f.error_file_data.get("dgsa") if isinstance(f.error_file_data, dict) else None
        if isinstance(info, dict) and "line" in info:
            reported.append((float(info.get("time", 0.0)), rank, info))
        else:
            silent.append((rank, f))
    own = sorted(r for r in reported if not r[2].get("peer"))
    if own:
        _, _, info = own[0]
        code = int(info.get("code", 1))
        if code == 130:
            return KeyboardInterrupt()
        return (UserError if code == 2 else RunFailure)(str(info["line"]))
    peer = min(reported)[2]["line"] if reported else ""
    if silent:
        rank, f = silent[0]
        how = (f"was killed by {f.signal_name()}" if f.exitcode < 0 else f"exited with code {f.exitcode}")
        return RunFailure(f"rank {rank} (pid {f.pid}) {how}" + (f"; {peer}" if peer else "; the other ranks stopped"))
    return RunFailure(str(peer) or "a worker failed")


def record_worker_error(line: str, code: int, *, peer: bool) -> bool:
    """In a worker of torchrun / :func:`launch`: write this process's one error line to the error file torchrun gave
    it (``TORCHELASTIC_ERROR_FILE``, torchelastic's format plus our own fields). Returns True when the launcher of
    :func:`launch` will print it (the worker then stays quiet), False when the worker should print it itself."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return False
    now = time.time()
    data = {"message": {"message": line, "extraInfo": {"py_callstack": "", "timestamp": str(int(now))}},
            "dgsa": {"line": line, "code": int(code), "peer": bool(peer), "time": now}}
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data), encoding="utf-8")
    except OSError:
        return False
    return os.environ.get(LAUNCHED_ENV) == "1"
