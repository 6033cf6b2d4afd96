"""Batches of a streamed dataset (ImageNet): DataLoaders over the torch datasets of
:class:`robustbench_dgsa.data.prepare.StreamSplits`, decoding in worker processes.

The engine keeps choosing the examples: each epoch's order and each rank's share of a batch are exactly those of
the in-memory path (:func:`robustbench_dgsa.engine.distributed.batch_shard`, ``eval_shard``), handed to the
DataLoader as its batch sampler, so a rank decodes only its own examples and no ``DistributedSampler`` is
needed. A training item carries its own seed, keyed by (seed, epoch, example), so the random crop and flip do
not depend on the number of workers or processes.

Workers: ``data_workers`` (default ``min(8, CPUs per process)``), with pinned memory on CUDA and persistent
workers (one loader per split for the whole run; its batch sampler is refilled every epoch).
"""
from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch

from robustbench_dgsa.util.errors import UserError


def default_workers(world_size: int = 1, environ: Mapping[str, str] | None = None) -> int:
    """``min(8, CPUs available to this process / processes sharing them)``, at least 1.

    The processes sharing them: one under ``srun`` when the task is bound to its own ``SLURM_CPUS_PER_TASK``
    CPUs (``sweep slurm``'s multi-node jobs), else the processes on this machine (torchrun's
    ``LOCAL_WORLD_SIZE``, Slurm's ``SLURM_NTASKS_PER_NODE``, or ``world_size`` for one machine)."""
    env = os.environ if environ is None else environ
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // _sharing(cpus, max(1, world_size), env)))


def _sharing(cpus: int, world_size: int, env: Mapping[str, str]) -> int:
    """How many processes of the group share this process's ``cpus`` (see :func:`default_workers`)."""
    per_task = env.get("SLURM_CPUS_PER_TASK", "")
    if "SLURM_STEP_NUM_TASKS" in env and per_task.isdigit() and cpus <= int(per_task):
        return 1
    for key in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        if env.get(key, "").isdigit() and int(env[key]) > 0:
            return min(int(env[key]), world_size)
    return world_size


def resolve_workers(data_workers: int | None, world_size: int = 1) -> int:
    if data_workers is None:
        return default_workers(world_size)
    if int(data_workers) < 0:
        raise UserError(f"data workers must be 0 (decode in the main process) or more, got {data_workers}",
                        options="data_workers")
    return int(data_workers)


class Batches:
    """A batch sampler whose batches are set from outside before each pass (lists of dataset items)."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class Loader:
    """One persistent DataLoader over ``dataset``; :meth:`run` iterates the given batches."""

    def __init__(self, dataset: Any, workers: int, device: torch.device) -> None:
        self.sampler = Batches()
        self.loader = torch.utils.data.DataLoader(dataset, batch_sampler=self.sampler, num_workers=workers,
                                                  pin_memory=device.type == "cuda", persistent_workers=workers > 0)

    def run(self, batches: Sequence[list[Any]]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(inputs, labels) of each of ``batches``, in order; an empty batch (a rank's share of a global batch
        smaller than the process group) is an empty pair, made here without the workers."""
        self.sampler.batches = [list(b) for b in batches if len(b)]
        loaded = iter(self.loader) if self.sampler.batches else iter(())
        shape = None
        for b in batches:
            if len(b):
                x, y = next(loaded)
                shape = x.shape[1:]
                yield x, y
            else:
                if shape is None:
                    shape = self.loader.dataset[0][0].shape
                yield torch.empty((0, *shape)), torch.empty((0,), dtype=torch.long)


def item_seed(epoch_key: int, index: int) -> int:
    """The seed of one training example's random transform in one epoch."""
    return (int(epoch_key) * 1_000_003 + int(index) * 7_919 + 1) % (2 ** 63)


def train_batches(split_idx: np.ndarray, order: torch.Tensor, batch_size: int, steps: int, epoch_key: int,
                  shard: Any) -> list[list[tuple[int, int]]]:
    """Each step's items for this rank: ``(index into the split, seed)`` of the examples at ``order``'s positions,
    ``shard(n_global)`` choosing this rank's positions in a global batch (None: all)."""
    out = []
    for step in range(steps):
        pos = order[step * batch_size:(step + 1) * batch_size]
        mine = shard(len(pos))
        pos = pos if mine is None else pos[mine]
        idx = split_idx[pos.numpy()]
        out.append([(int(i), item_seed(epoch_key, i)) for i in idx])
    return out


def eval_batches(split_idx: np.ndarray, batch_size: int) -> list[list[int]]:
    """``split_idx`` in batches of ``batch_size`` (evaluation: no random transform)."""
    return [[int(i) for i in split_idx[s:s + batch_size]] for s in range(0, len(split_idx), batch_size)]
