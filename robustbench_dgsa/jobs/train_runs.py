"""Train several models for several seeds with one preset: what ``dgsa-bench train`` runs.

Every model's config is resolved (and so checked) before the first run starts; each (model, seed) is one call
of :func:`robustbench_dgsa.engine.train.train`, with its checkpoint in its own folder when there are several.

The output folder is locked while the runs train (:class:`robustbench_dgsa.jobs.job.JobLock`, the lock a sweep job
takes: ``job.lock`` in the folder), so a second ``train`` into the same folder stops at once with one line instead of
training and recording the same run twice. One process takes it: the only one, the launcher of ``nproc``
processes, or rank 0 of a torchrun / srun launch.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, Sequence


def train_runs(models: Sequence[Any], dataset: str, seeds: Sequence[int], out: str | Path, *, preset: str = "tiny",
               overrides: dict[str, Any] | None = None, config_file: str | Path | None = None,
               data_root: str | Path | None = None, store: str | Path | None = None, resume: bool = False,
               progress: bool = True, nproc: int | None = None,
               relaunch: Sequence[str] | None = None, data_workers: int | None = None) -> dict[str, Any] | None:
    """Train each of ``models`` (registry names, or ModelConfigs such as an outside factory's:
    ``models.registry.module_config``) on ``dataset`` for each of ``seeds``.

    One (model, seed) writes into ``out``; several write into ``out/<model>-<dataset>-s<seed>`` each. Rows go to
    ``store`` (default ``out/store``). ``overrides``: ``section.key`` -> value over the preset and the
    ``config_file``. Returns {"model", "dataset", "preset", "store", "runs"}, one run record per training:
    {"model", "seed", "run_id", "checkpoint", "out", "config_hash", "final", "history"}.

    ``nproc`` > 1: train data-parallel in that many local processes (torch.distributed.run), each running the
    command line ``relaunch`` (this command without its process-count option); returns None (rank 0 of that
    launch prints the summary). Under torchrun or srun each process is one rank of the same runs.
    ``data_workers``: DataLoader workers per process for a streamed dataset (ImageNet; default min(8, CPUs)).
    """
    from robustbench_dgsa.config import load_config_file, resolve_config, validate
    from robustbench_dgsa.engine.predict import dataset_info
    from robustbench_dgsa.engine.train import train
    from robustbench_dgsa.models import get_model_config

    out = Path(out)
    file_ov = load_config_file(config_file) if config_file else None
    cfgs = []
    for m in models:  # every config checked before the first run starts
        base = get_model_config(m) if isinstance(m, str) else m
        m = base.name
        cfg = resolve_config(base, dataset, preset, file_overrides=file_ov, overrides=overrides or {})
        if data_root is not None:
            cfg.data.data_root = str(data_root)
        validate(cfg, data_modality=dataset_info(cfg.data.dataset).modality, processes=nproc or 1)
        cfgs.append((m, cfg))
    with _out_lock(out):
        if nproc is not None and nproc > 1:
            _launch(nproc, relaunch or [])
            return None
        return _train_all(train, cfgs, models, seeds, out, preset=preset, store=store, resume=resume,
                          progress=progress, data_workers=data_workers)


def _train_all(train: Any, cfgs: list[tuple[str, Any]], models: Sequence[str], seeds: Sequence[int], out: Path, *,
               preset: str, store: str | Path | None, resume: bool, progress: bool,
               data_workers: int | None) -> dict[str, Any]:
    """Each (model, seed) of the checked configs ``cfgs``, one after another (see :func:`train_runs`)."""
    from robustbench_dgsa.util.paths import safe_name
    store_dir = Path(store) if store is not None else out / "store"
    several = len(seeds) * len(cfgs) > 1
    runs = []
    for m, cfg in cfgs:
        for s in seeds:
            run_out = out / safe_name(f"{m}-{cfg.data.dataset}-s{s}") if several else out
            r = _train_one(train, cfg, s, run_out, store_dir=store_dir, resume=resume, progress=progress,
                           data_workers=data_workers)
            runs.append({"model": m, "seed": s, "run_id": r.run_id, "checkpoint": str(r.checkpoint),
                         "out": str(run_out), "config_hash": r.config_hash, "final": r.final, "history": r.history})
    from robustbench_dgsa.engine import distributed
    distributed.finish()  # under torchrun / srun: every rank leaves the group together
    return {"model": ",".join(m for m, _ in cfgs), "dataset": cfgs[0][1].data.dataset, "preset": preset,
            "store": str(store_dir), "runs": runs}


@contextlib.contextmanager
def _out_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock (see the module docstring) unless another process of this launch holds it."""
    import os

    from robustbench_dgsa.engine.distributed import LAUNCHED_ENV, env_world
    from robustbench_dgsa.jobs.job import JobLock
    world = env_world()
    if os.environ.get(LAUNCHED_ENV) == "1" or (world is not None and world[0] != 0):
        yield                                  # the launcher (nproc) or rank 0 holds it for every rank
        return
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with JobLock(out, busy=f"another train is running into {out}"):
            yield
    finally:
        if made:
            _remove_if_bare(out)


def _remove_if_bare(out: Path) -> None:
    """Remove the folder this run made when it holds nothing but the lock's guard file (the run stopped before
    writing anything: bad data, say), so that a refused run leaves nothing behind."""
    from robustbench_dgsa.jobs.job import LOCK_GUARD
    try:
        if {p.name for p in out.iterdir()} <= {LOCK_GUARD}:
            (out / LOCK_GUARD).unlink(missing_ok=True)
            out.rmdir()
    except OSError:
        pass                                   # another process wrote there meanwhile: it is that run's folder


def is_main_process() -> bool:
    """True unless this process is a distributed run's rank other than 0."""
    from robustbench_dgsa.engine.distributed import env_world
    found = env_world()
    return found is None or found[0] == 0


def _train_one(train: Any, *args: Any, **kwargs: Any) -> Any:
    """One training run; a lost process group gets the hint to resume."""
    from robustbench_dgsa.engine.distributed import PeerFailure
    try:
        return train(*args, **kwargs)
    except PeerFailure as e:
        raise PeerFailure(f"{e} (the same command with resume=True continues it)", options=("resume",)) from None


def _launch(nproc: int, args: Sequence[str]) -> None:
    """``nproc`` local processes of the same command (torch.distributed.run); the configs were validated for
    ``nproc`` processes (the batch divides among them)."""
    from robustbench_dgsa.engine import distributed
    from robustbench_dgsa.util.errors import UserError
    if distributed.env_world() is not None:
        raise UserError("a process count starts its own processes; under torchrun or srun leave it out (the "
                        "launcher already started one process per rank)", options=("nproc",))
    distributed.launch(nproc, list(args))
