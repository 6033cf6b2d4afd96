"""Training, top to bottom: data -> model -> AdamW + per-step schedule -> epochs -> checkpoint -> test accuracy.

    result = train(cfg, seed=0, out_dir="runs/vit-cifar10-s0")

Files in ``out_dir``:

* ``checkpoint.safetensors``: weights + meta (run config, preprocess record, classes, metrics), every epoch;
  the deliverable that ``evaluate`` and ``rollout`` read.
* ``train_state.safetensors``: everything needed to continue exactly: weights, optimizer, scheduler, RNG
  states, epoch, history (tensors + JSON, never a pickle: :mod:`robustbench_dgsa.engine.train_state`; a
  legacy ``train_state.pt`` is refused, never loaded). Written *after* the checkpoint. A kill between the
  two leaves the checkpoint one epoch ahead of the state; ``resume`` restarts from the state (which holds its
  own weights), recomputes that epoch bit for bit and overwrites the checkpoint with the same values. Both
  files are written atomically.
* ``done.json``: written last, once the run finished (test accuracy recorded).

Results rows (kind="train") go to the store: per epoch split="train"/"val" metrics "loss"/"accuracy"
(train also "lr"); at the end split="test" metric "accuracy" (clean). Evaluation under corruption is
:mod:`robustbench_dgsa.engine.evaluate`'s job.

Determinism: python/numpy/torch are seeded with ``seed``; the model is initialised right after seeding;
the data order (and augmentation) of epoch ``e`` comes from a generator keyed by (seed, e); the global torch
RNG (dropout) is saved with each state. On CPU a resumed run therefore ends with bit-identical weights.

A streamed dataset (ImageNet: the registry's ``streams``) is not held in memory: its batches come from DataLoaders
whose workers decode the files (:mod:`robustbench_dgsa.engine.streaming`; ``data_workers`` of them per process),
in the same order and with the same per-rank shares; each example's random crop is seeded by (seed, epoch,
example).
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from robustbench_dgsa import store
from robustbench_dgsa.util import atomic
from robustbench_dgsa.config import RunConfig, validate, with_data_facts
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.data.prepare import PreparedData, encode_splits, load_splits
from robustbench_dgsa.engine.predict import (PRECISIONS, amp_of, autocast, compiled, dataset_info, forward_batches,
                                             resolve_device, resolve_precision, trim_padding,
                                             warn_if_emulated)
from robustbench_dgsa import models
from robustbench_dgsa.models.checkpoint import read_checkpoint_meta, save_checkpoint
from robustbench_dgsa.util.progress import log, track
from robustbench_dgsa.util.provenance import sha256_file
from robustbench_dgsa.engine.schedules import make_schedule
from robustbench_dgsa.engine import distributed, streaming
from robustbench_dgsa.engine.distributed import SINGLE, World
from robustbench_dgsa.engine.train_state import STATE_NAME, load_state, refuse_legacy, save_state, set_rng_state

CHECKPOINT_NAME = "checkpoint.safetensors"
DONE_NAME = "done.json"


class TrainingDiverged(UserError):
    """The loss became NaN/inf; the last good checkpoint is kept."""


@dataclass
class TrainResult:
    checkpoint: Path
    run_id: str
    history: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    config_hash: str = ""
    precision: str = "fp32"            # what the run computed in (engine.predict.resolve_precision)


def train(cfg: RunConfig | Callable[..., torch.nn.Module], seed: int, out_dir: str | Path, *,
          store_dir: str | Path | None = None, resume: bool = False, progress: bool = True,
          stop_after_epoch: int | None = None, data_workers: int | None = None, dataset: str | None = None,
          preset: str = "tiny", name: str | None = None, overrides: dict[str, Any] | None = None,
          amp: str | None = None) -> TrainResult:
    """Train ``cfg.model`` on ``cfg.data.dataset`` with ``seed``; see the module docstring. ``data_workers``:
    DataLoader worker processes of a streamed dataset (default min(8, CPUs per process); 0: the main process).

    ``cfg`` may instead be an outside model's factory (a module-level function returning an ``nn.Module``: images
    in, logits out; called with ``num_classes``, and ``image_size`` / ``in_chans`` where it takes them): it is then
    trained with the same engine (seeding, resume, store rows) on ``dataset`` under ``preset`` and ``overrides``
    (``section.key`` -> value), named ``name`` (default the function's name); its checkpoints record the factory
    (``package.module:function``), which must stay importable to read them.

    Precision: ``amp`` (default ``cfg.train.amp``) resolved on this machine (:func:`resolve_precision`: "auto" is
    bf16 where the CPU computes it natively); ``amp`` pins it without changing the config or its hash (``"off"``
    rebuilds runs made in fp32). The resolved precision is part of the run's identity: recorded in its rows,
    run record, checkpoint, state and ``done.json``; a resumed run keeps the precision it started with (a state
    without one was fp32), and a finished run of another precision is not taken for the one asked for.

    A run that fails (an error, divergence, Ctrl-C, a full disk) removes its rows and provenance from the store,
    which it thus leaves as it found it; its checkpoint and state stay in ``out_dir`` (without ``done.json``) so
    that ``resume`` can continue, and resuming rebuilds the rows from the state. A fresh run that fails before its
    first epoch is saved whole (checkpoint and state) removes the checkpoint it wrote: nothing half-made stays.
    Temporary files that a killed run's atomic writes left (``.checkpoint.safetensors.<owner>.tmp``) are removed
    when the next run of the folder starts (:func:`robustbench_dgsa.util.atomic.remove_dead_temps`).
    """
    if not isinstance(cfg, RunConfig):
        cfg = _factory_config(cfg, dataset, preset, name, overrides)
    opened: list[store.RunWriter] = []
    out_dir = Path(out_dir)
    fresh = not (out_dir / CHECKPOINT_NAME).exists() and not (out_dir / STATE_NAME).exists()
    try:
        with distributed.peer_failures(f"{out_dir} keeps the last finished epoch: resume the run to continue"):
            return _train(cfg, seed, out_dir, store_dir=store_dir, resume=resume, progress=progress,
                          stop_after_epoch=stop_after_epoch, opened=opened, data_workers=data_workers, amp=amp)
    except BaseException:
        for writer in opened:
            writer.discard()
        if fresh and not (out_dir / STATE_NAME).exists():
            (out_dir / CHECKPOINT_NAME).unlink(missing_ok=True)    # no epoch saved whole: nothing to resume
        raise


def _factory_config(factory: Any, dataset: str | None, preset: str, name: str | None,
                    overrides: dict[str, Any] | None) -> RunConfig:
    """The run config of an outside model's factory (see :func:`train`)."""
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.models.registry import module_config
    qual = getattr(factory, "__qualname__", "")
    if not callable(factory) or not qual or "<" in qual or "." in qual:
        raise UserError(f"train needs a RunConfig or a module-level factory function, got {factory!r} (a lambda or "
                        "a nested function cannot be imported again to read its checkpoints)")
    if dataset is None:
        raise UserError("training a factory needs dataset=...", options="dataset")
    return resolve_config(module_config(f"{factory.__module__}:{qual}", name), dataset, preset,
                          overrides=dict(overrides or {}))


def _train(cfg: RunConfig, seed: int, out_dir: str | Path, *, store_dir: str | Path | None, resume: bool,
           progress: bool, stop_after_epoch: int | None, opened: list[store.RunWriter],
           data_workers: int | None = None, amp: str | None = None) -> TrainResult:
    out_dir = Path(out_dir)
    store_dir = Path(store_dir) if store_dir is not None else out_dir / "store"
    validate(cfg, data_modality=dataset_info(cfg.data.dataset).modality)  # before any file is read or written
    for name in (CHECKPOINT_NAME, STATE_NAME, DONE_NAME):
        for left in atomic.remove_dead_temps(out_dir / name):    # a killed run's temporary files
            log(f"[train] removed {left}, left by a killed run")
    asked = resolve_precision(resolve_device(cfg.train.device), amp or cfg.train.amp)
    state, finished = _previous_run(out_dir, resume, cfg, seed, asked)
    if finished is not None:
        return finished
    run = _start(cfg, seed, out_dir, store_dir, state, opened, data_workers, asked)  # the data fill in a copy
    tc = run.cfg.train
    t_start = time.monotonic()
    for epoch in range(run.start_epoch + 1, tc.epochs + 1):
        _run_epoch(run, epoch, progress)
        if stop_after_epoch is not None and epoch >= stop_after_epoch and epoch < tc.epochs:
            return TrainResult(run.ckpt_path, run.run_id, run.history, {"stopped_after_epoch": epoch},
                               run.config_hash)
    return _finish(run, store_dir, out_dir / DONE_NAME, t_start)


@dataclass
class _Run:
    """What the steps of one training run share (built by :func:`_start`)."""
    cfg: RunConfig
    seed: int
    device: torch.device
    data: PreparedData
    run_id: str
    config_hash: str
    writer: store.RunWriter
    ckpt_path: Path
    state_path: Path
    x_tr: torch.Tensor                 # training inputs, placed by :func:`_place`
    m_tr: torch.Tensor | None
    y_tr: torch.Tensor
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    steps_per_epoch: int
    n_params: int
    history: list[dict[str, Any]]
    start_epoch: int
    meta_base: dict[str, Any]          # checkpoint meta shared by every epoch
    world: World = SINGLE              # the process group (:mod:`robustbench_dgsa.engine.distributed`)
    net: torch.nn.Module | None = None  # what trains: ``model`` in DDP in a group; checkpoints come from ``model``
    workers: int = 0                   # DataLoader workers of a streamed dataset
    loaders: dict[str, Any] = field(default_factory=dict)  # a streamed dataset's loader per split, made on first use
    precision: str = "fp32"            # what the run computes in; its autocast setting is ``amp_of(precision)``
    step_model: Any = None             # what the training step calls: ``net`` compiled (train.compile), or None


def _previous_run(out_dir: Path, resume: bool, cfg: RunConfig, seed: int, precision: str = "fp32"
                  ) -> tuple[dict[str, Any] | None, TrainResult | None]:
    """Step 0, fresh run or continuation: (saved state to continue from or None, result of a finished run or None).
    A finished run is returned only when it is the one asked for (:func:`_check_finished_run`)."""
    ckpt_path, state_path, done_path = out_dir / CHECKPOINT_NAME, out_dir / STATE_NAME, out_dir / DONE_NAME
    refuse_legacy(out_dir)
    if resume and state_path.exists():
        state = load_state(state_path)
        if done_path.exists() and state.get("finished"):
            done = json.loads(done_path.read_text())
            _check_finished_run(cfg, seed, out_dir, ckpt_path, done, precision)
            log(f"[train] {out_dir} already finished (run {done['run_id']}); nothing to do")
            return state, TrainResult(ckpt_path, done["run_id"], state["history"], done["final"], done["config_hash"],
                                      precision)
        return state, None
    if not resume and (state_path.exists() or ckpt_path.exists()):
        raise UserError(f"{out_dir} already holds a training run; pass resume=True to continue it "
                        "or choose another output folder", options="resume")
    return None, None


def _check_finished_run(cfg: RunConfig, seed: int, out_dir: Path, ckpt_path: Path, done: dict[str, Any],
                        precision: str = "fp32") -> None:
    """UserError unless the finished run in ``out_dir`` is the one asked for: its checkpoint is the run's own
    (run id of ``done.json``), and model, seed and config hash match the request (the request's config completed
    with the fields the data decided, as the run recorded them: classes, image size, vocabulary size)."""
    rec_cfg, meta = read_checkpoint_meta(ckpt_path)
    if not isinstance(done, dict) or str(meta.get("run_id")) != str(done.get("run_id")):
        raise UserError(f"{ckpt_path} belongs to run {meta.get('run_id')}, not to run "
                        f"{done.get('run_id') if isinstance(done, dict) else '?'} recorded in {out_dir / DONE_NAME}; "
                        "the folder was mixed up: train this run again in a new folder")
    want = cfg
    if want.model.name == rec_cfg.name:
        want = with_data_facts(cfg, num_classes=rec_cfg.num_classes, image_size=rec_cfg.image_size,
                               vocab_size=rec_cfg.vocab_size)
    have = (rec_cfg.name, str(meta.get("config_hash", "")), meta.get("seed"))
    asked = (want.model.name, want.hash(), int(seed))
    if have != asked:
        raise UserError(f"cannot resume {out_dir}: it holds a finished run of {have[0]} (config {have[1]}, seed "
                        f"{have[2]}), but {asked[0]} (config {asked[1]}, seed {asked[2]}) was asked for; choose "
                        "another output folder")
    made_in = recorded_precision(meta)
    if made_in != precision:
        raise UserError(f"{out_dir} holds a finished run computed in {made_in}, but {precision} was asked for "
                        "on this machine; it is not that run: train this one in "
                        "another output folder")


def recorded_precision(record: dict[str, Any]) -> str:
    """The precision a run record, checkpoint meta or state says it computed in; runs written before precision
    was recorded computed in fp32 (``auto`` meant fp32 on every CPU then)."""
    value = record.get("precision") if isinstance(record, dict) else None
    return str(value) if value in PRECISIONS else "fp32"


def _start(cfg: RunConfig, seed: int, out_dir: Path, store_dir: Path, state: dict[str, Any] | None,
           opened: list[store.RunWriter], data_workers: int | None = None, precision: str = "fp32") -> _Run:
    """Steps 1-2: seeds, data, store writer, model, optimizer and schedule (restored from ``state`` if given)."""
    world, device = distributed.setup(resolve_device(cfg.train.device), cfg.train.batch_size)
    _seed_everything(seed)
    data = prepare_data(cfg, seed)
    cfg = data.cfg  # num_classes, image_size, vocab_size now come from the data
    config_hash = cfg.hash()
    if state is not None and (state["config_hash"] != config_hash or state["seed"] != seed):
        raise UserError(f"cannot resume {out_dir}: it was trained with config {state['config_hash']} seed "
                        f"{state['seed']}, now asked for config {config_hash} seed {seed}")
    run_id = state["run_id"] if state is not None else store.new_run_id("train")
    if state is not None and recorded_precision(state) != precision:
        log(f"[train] resuming in {recorded_precision(state)}, the precision run {run_id} started with "
            f"({precision} asked for)")
    precision = recorded_precision(state) if state is not None else precision
    warn_if_emulated(device, precision)
    writer = store.RunWriter(store_dir, run_id, base=dict(kind="train", model=cfg.model.name,
                                                          config_hash=config_hash, dataset=cfg.data.dataset,
                                                          seed=seed, condition="clean", severity=0,
                                                          precision=precision))
    writer = distributed.rank_writer(writer, world)  # only rank 0 writes rows and the run record
    opened.append(writer)
    # Tensors live on the GPU when they fit there (CUDA), else on the CPU and move batch by batch.
    x_tr, m_tr, y_tr = _place(data.x_train, device), _place(data.m_train, device), data.y_train.to(device)
    torch.manual_seed(seed)
    model = models.create_model(cfg.model).to(device)   # looked up at call time, so it can be wrapped
    optimizer, scheduler, steps_per_epoch = _optimisation(model, cfg.train, len(data.y_train))
    meta_base = {"run_config": cfg.to_dict(), "model": cfg.model.name, "dataset": cfg.data.dataset,
                 "classes": list(data.classes), "seed": int(seed), "run_id": run_id,
                 "config_hash": config_hash, "precision": precision, "preprocess": data.preprocess}
    run = _Run(cfg, seed, device, data, run_id, config_hash, writer, out_dir / CHECKPOINT_NAME,
               out_dir / STATE_NAME, x_tr, m_tr, y_tr, model, optimizer, scheduler, steps_per_epoch,
               sum(p.numel() for p in model.parameters()), [], 0, meta_base, world,
               workers=streaming.resolve_workers(data_workers, world.size) if data.stream is not None else 0,
               precision=precision)
    _restore(run, state)
    run.net = distributed.wrap(model, world, device)
    run.step_model = compiled(run.net, cfg.train.compile, "the training step")
    log(f"[train] {cfg.model.name} on {cfg.data.dataset} seed {seed}: {run.n_params:,} parameters, "
        f"{len(data.y_train)} train / {len(data.y_val)} val / {len(data.y_test)} test, device {device}, "
        f"{precision}{', compiled' if cfg.train.compile else ''}, run {run_id}"
        + (f", {world.size} processes ({world.backend}), {cfg.train.batch_size // world.size} per process"
           if world.distributed else ""))
    return run


def _optimisation(model: torch.nn.Module, tc: Any, n_train: int
                  ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR, int]:
    """AdamW and its per-step schedule; returns (optimizer, scheduler, steps per epoch)."""
    optimizer = torch.optim.AdamW(_param_groups(model, tc.weight_decay, tc.decay_bias_and_norm), lr=tc.lr,
                                  betas=tuple(tc.betas), eps=tc.eps)
    steps_per_epoch = math.ceil(n_train / tc.batch_size)
    schedule = make_schedule(tc.schedule, tc.epochs * steps_per_epoch, tc.warmup_steps)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule), steps_per_epoch


def _restore(run: _Run, state: dict[str, Any] | None) -> None:
    """Continue from ``state`` (weights, optimizer, schedule, RNG, history) and rewrite this run's rows from the
    saved history (drops rows of a half-done epoch); a fresh run starts with no rows."""
    run.writer.clear()
    if state is None:
        return
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    run.history, run.start_epoch = list(state["history"]), int(state["epoch"])
    for rec in run.history:
        run.writer.add_rows(_epoch_rows(rec))
    log(f"[train] resuming {run.run_id} after epoch {run.start_epoch}/{run.cfg.train.epochs}")


def _run_epoch(run: _Run, epoch: int, progress: bool) -> None:
    """Step 3, one epoch: train, validate, then checkpoint first, state second (see module docstring), rows last
    (rebuilt from the state on resume)."""
    tc, data = run.cfg.train, run.data
    t0 = time.monotonic()
    loss_sum, correct = _train_steps(run, epoch, progress)
    val_loss, val_acc = _evaluate(run, "val")
    if len(data.y_val) and not math.isfinite(val_loss):
        _diverged(epoch, run.steps_per_epoch - 1, run.ckpt_path, run.history, what="validation loss")
    n_train = len(run.y_tr)
    rec = {"epoch": epoch, "train_loss": float(loss_sum) / n_train,
           "train_accuracy": int(correct) / n_train, "val_loss": val_loss, "val_accuracy": val_acc,
           "lr": float(run.optimizer.param_groups[0]["lr"]), "n_train": n_train, "n_val": len(data.y_val),
           "seconds": round(time.monotonic() - t0, 3)}
    run.history.append(rec)
    if run.world.is_main:
        save_checkpoint(run.ckpt_path, run.model, {**run.meta_base, "epoch": epoch, "metrics": rec})
        save_state(run.state_path, run.model, run.optimizer, run.scheduler, run_id=run.run_id, seed=run.seed,
                   epoch=epoch, config_hash=run.config_hash, history=run.history, finished=False,
                   precision=run.precision)
    run.writer.add_rows(_epoch_rows(rec))
    log(f"[train] epoch {epoch}/{tc.epochs}: train loss {rec['train_loss']:.4f} acc {rec['train_accuracy']:.4f}"
        f" | val loss {val_loss:.4f} acc {val_acc:.4f} | {rec['seconds']:.1f}s")


def _train_steps(run: _Run, epoch: int, progress: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The optimisation steps of one epoch, in the order and with the augmentation keyed by (seed, epoch);
    returns (summed training loss, correct predictions)."""
    tc, device, model, world = run.cfg.train, run.device, run.net or run.model, run.world
    model.train()
    forward = run.step_model or model
    gen = torch.Generator().manual_seed(_epoch_key(run.seed, epoch))
    if world.distributed:  # each rank its own dropout stream, keyed like the data order: no state to carry
        torch.manual_seed((_epoch_key(run.seed, epoch) * 7919 + world.rank) % (2 ** 63))
    order = torch.randperm(len(run.y_tr), generator=gen)
    loss_sum = torch.zeros((), device=device, dtype=torch.float64)
    correct = torch.zeros((), device=device, dtype=torch.long)
    batches = _batches(run, epoch, gen, order)
    for step in track(range(run.steps_per_epoch), description=f"epoch {epoch}/{tc.epochs}", enabled=progress):
        xb, mb, yb, n_global = next(batches)
        with autocast(device, amp_of(run.precision)):
            logits = forward(xb, key_padding_mask=mb) if mb is not None else forward(xb)
        loss = F.cross_entropy(logits.float(), yb) if len(yb) else logits.float().sum()
        run.optimizer.zero_grad(set_to_none=True)
        distributed.scale_loss(loss, len(yb), n_global, world).backward()
        if tc.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        run.optimizer.step()
        run.scheduler.step()
        loss_sum += loss.detach().double() * len(yb)
        correct += (logits.detach().argmax(1) == yb).sum()
        # A non-finite loss ends the run; checked every 20 steps (a sync) and at the end of the epoch.
        if (step % 20 == 0 or step == run.steps_per_epoch - 1) and not distributed.all_true(
                torch.isfinite(loss_sum), world):
            _diverged(epoch, step, run.ckpt_path, run.history)
    if world.distributed:
        sums = distributed.all_sum(torch.stack([loss_sum, correct.double()]), world)
        loss_sum, correct = sums[0], sums[1].long()
    return loss_sum, correct


def _finish(run: _Run, store_dir: Path, done_path: Path, t_start: float) -> TrainResult:
    """Step 4: clean test accuracy, final checkpoint and state, provenance, ``done.json``."""
    tc, data, ckpt_path = run.cfg.train, run.data, run.ckpt_path
    test_loss, test_acc = _evaluate(run, "test")
    group = distributed.describe(run.world)  # a collective: every rank, before rank 0 writes alone
    last = run.history[-1] if run.history else {}
    final = {"test_accuracy": test_acc, "test_loss": test_loss, "n_test": len(data.y_test),
             "val_accuracy": last.get("val_accuracy"), "val_loss": last.get("val_loss"),
             "train_loss": last.get("train_loss"), "train_accuracy": last.get("train_accuracy"),
             "epochs": tc.epochs, "params": run.n_params,
             "train_seconds": round(sum(h["seconds"] for h in run.history), 3)}
    if not run.world.is_main:
        return TrainResult(ckpt_path, run.run_id, run.history, final, run.config_hash, run.precision)
    run.writer.add_rows([dict(split="test", metric=metric, value=value, n=len(data.y_test), epoch=tc.epochs,
                              source=data.source) for metric, value in (("accuracy", test_acc), ("loss", test_loss))])
    save_checkpoint(ckpt_path, run.model, {**run.meta_base, "epoch": tc.epochs, "metrics": {**last, **final}})
    save_state(run.state_path, run.model, run.optimizer, run.scheduler, run_id=run.run_id, seed=run.seed,
               epoch=tc.epochs, config_hash=run.config_hash, history=run.history, finished=True,
               precision=run.precision)
    run.writer.write_provenance({"kind": "train", "config": run.cfg.to_dict(), "config_sources": dict(run.cfg.sources),
                                 "config_hash": run.config_hash,
                                 "model": run.cfg.model.name, "dataset": run.cfg.data.dataset, "seed": int(run.seed),
                                 "device": str(run.device), **group,
                                 "precision": run.precision, "compiled": bool(tc.compile),
                                 "data": data.summary, "params": run.n_params, "history": run.history,
                                 "final": final, "checkpoint": str(ckpt_path.resolve()),
                                 "checkpoint_sha256": sha256_file(ckpt_path),
                                 "wall_seconds": round(time.monotonic() - t_start, 3)})
    atomic.write_json(done_path, {"run_id": run.run_id, "final": final, "checkpoint": str(ckpt_path),
                                  "config_hash": run.config_hash, "seed": int(run.seed), "precision": run.precision})
    store.compact(store_dir)
    log(f"[train] done: test accuracy {test_acc:.4f} on {len(data.y_test)} examples -> {ckpt_path}")
    return TrainResult(ckpt_path, run.run_id, run.history, final, run.config_hash, run.precision)


# === data ===============================================================================================

def _batches(run: _Run, epoch: int, gen: torch.Generator, order: torch.Tensor):
    """This rank's batches of one epoch, in ``order``: (inputs, padding mask or None, labels, global batch size)."""
    tc, device, world = run.cfg.train, run.device, run.world
    if run.data.stream is not None:
        yield from _stream_batches(run, epoch, order)
        return
    augment = run.cfg.data.augment and run.cfg.model.modality == "image"
    for step in range(run.steps_per_epoch):
        idx = order[step * tc.batch_size:(step + 1) * tc.batch_size]
        n_global, mine = len(idx), distributed.batch_shard(len(idx), world)  # this rank's part of the batch
        idx = idx if mine is None else idx[mine]
        xb, yb = _take(run.x_tr, idx, device), _take(run.y_tr, idx, device)
        mb = None if run.m_tr is None else _take(run.m_tr, idx, device)
        xb, mb = trim_padding(xb, mb)
        if augment:
            xb = _augment(xb, gen, positions=mine, n_batch=n_global)
        yield xb, mb, yb, n_global


def _stream_batches(run: _Run, epoch: int, order: torch.Tensor):
    """:func:`_batches` of a streamed dataset: the DataLoader's workers decode and transform this rank's items."""
    tc, device, world = run.cfg.train, run.device, run.world
    batches = streaming.train_batches(run.data.stream.train_idx, order, tc.batch_size, run.steps_per_epoch,
                                      _epoch_key(run.seed, epoch), lambda n: distributed.batch_shard(n, world))
    sizes = [min(tc.batch_size, len(order) - k * tc.batch_size) for k in range(run.steps_per_epoch)]
    for n_global, (xb, yb) in zip(sizes, _loader(run, "train").run(batches)):
        yield xb.to(device, non_blocking=True), None, yb.to(device, non_blocking=True), n_global


def _loader(run: _Run, split: str) -> streaming.Loader:
    """The run's persistent loader of a streamed split ("train", "val" or "test")."""
    if split not in run.loaders:
        run.loaders[split] = streaming.Loader(getattr(run.data.stream, split), run.workers, run.device)
    return run.loaders[split]

def prepare_data(cfg: RunConfig, seed: int) -> PreparedData:
    """The run's data as model inputs (:mod:`robustbench_dgsa.data.prepare`), with the model's classes and image
    size taken from the data (the image size unless the user chose it: ``config.with_data_facts``); ``cfg`` is
    not changed: the returned record holds the completed copy."""
    splits = load_splits(cfg.data, seed)
    return encode_splits(splits, with_data_facts(cfg, num_classes=len(splits.classes), image_size=splits.image_size))


def _place(t: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    """Move a whole tensor to the GPU when it fits comfortably (< 1/3 of free memory); else keep it on CPU."""
    if t is None or device.type != "cuda":
        return t
    free, _ = torch.cuda.mem_get_info(device)
    if t.numel() * t.element_size() < free / 3:
        return t.to(device)
    return t.pin_memory()


def _take(t: torch.Tensor, idx: torch.Tensor, device: torch.device) -> torch.Tensor:
    return t[idx.to(t.device)].to(device, non_blocking=True)


def _augment(x: torch.Tensor, gen: torch.Generator, pad: int = 4, positions: torch.Tensor | None = None,
             n_batch: int | None = None) -> torch.Tensor:
    """Random crop (zero padding of ``pad`` in normalised space, i.e. the mean colour) + horizontal flip.
    ``x`` may be one rank's part of a global batch of ``n_batch`` (at ``positions``): the draws are those of the
    whole batch, so every rank consumes ``gen`` alike and each example gets its one-process augmentation."""
    b, c, h, w = x.shape
    n = b if positions is None else int(n_batch)
    shifts = torch.randint(0, 2 * pad + 1, (2, n), generator=gen)
    flip = torch.rand(n, generator=gen) < 0.5
    if positions is not None:
        shifts, flip = shifts[:, positions], flip[positions]
    shifts, flip = shifts.to(x.device), flip.to(x.device)
    xp = F.pad(x, (pad, pad, pad, pad))
    rows = shifts[0][:, None] + torch.arange(h, device=x.device)[None, :]
    cols = shifts[1][:, None] + torch.arange(w, device=x.device)[None, :]
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    bi = torch.arange(b, device=x.device)[:, None, None, None]
    ci = torch.arange(c, device=x.device)[None, :, None, None]
    return xp[bi, ci, rows[:, None, :, None], cols[:, None, None, :]]


# === optimisation helpers ===============================================================================

def _param_groups(model: torch.nn.Module, weight_decay: float, decay_bias_and_norm: bool) -> list[dict]:
    """AdamW groups; with ``decay_bias_and_norm=False`` the parameters the model names in ``no_weight_decay()``
    (biases and normalisation weights) get no decay."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if decay_bias_and_norm:
        return [{"params": [p for _, p in params], "weight_decay": weight_decay}]
    exempt = set(model.no_weight_decay()) if hasattr(model, "no_weight_decay") else set()
    decay = [p for n, p in params if n not in exempt]
    rest = [p for n, p in params if n in exempt]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


@torch.no_grad()
def evaluate_split(model: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None, y: torch.Tensor, *,
                   batch_size: int, device: torch.device, amp: str = "auto") -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of prepared inputs; (nan, nan) for an empty split."""
    if len(y) == 0:
        return float("nan"), float("nan")
    loss_sum, correct = _evaluation_sums(model, x, mask, y, batch_size=batch_size, device=device, amp=amp)
    return loss_sum / len(y), correct / len(y)


@torch.no_grad()
def _evaluation_sums(model: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None, y: torch.Tensor, *,
                     batch_size: int, device: torch.device, amp: str) -> tuple[float, int]:
    """(summed cross-entropy, correct predictions) of prepared inputs; (0, 0) for none."""
    if len(y) == 0:
        return 0.0, 0
    outputs = forward_batches(model, x, mask, batch_size=batch_size, device=device, amp=amp)
    return _loss_and_correct((logits, y[i * batch_size:(i + 1) * batch_size].to(device))
                             for i, logits in enumerate(outputs))


def _loss_and_correct(pairs: Any) -> tuple[float, int]:
    """(summed cross-entropy, correct predictions) over (logits, labels) batches."""
    loss_sum, correct = 0.0, 0
    for logits, yb in pairs:
        logits = logits.float()
        loss_sum += float(F.cross_entropy(logits, yb, reduction="sum"))
        correct += int((logits.argmax(1) == yb).sum())
    return loss_sum, correct


def _evaluate(run: _Run, split: str) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of the run's model on its ``split`` ("val" or "test"); in a process group
    each rank takes its block of the examples and the sums are added over ranks, so every example counts once."""
    tc, world, data = run.cfg.train, run.world, run.data
    x, mask, y = getattr(data, f"x_{split}"), getattr(data, f"m_{split}"), getattr(data, f"y_{split}")
    if len(y) == 0:
        return float("nan"), float("nan")
    part = distributed.eval_shard(len(y), world)
    if data.stream is not None:
        sums = _stream_sums(run, split, part)
    elif not world.distributed:
        return evaluate_split(run.model, x, mask, y, batch_size=tc.eval_batch_size, device=run.device,
                              amp=amp_of(run.precision))
    else:
        sums = _evaluation_sums(run.model, x[part], None if mask is None else mask[part], y[part],
                                batch_size=tc.eval_batch_size, device=run.device, amp=amp_of(run.precision))
    if world.distributed:
        total = distributed.all_sum(torch.tensor(sums, dtype=torch.float64, device=run.device), world)
        sums = (float(total[0]), int(total[1]))
    return sums[0] / len(y), sums[1] / len(y)


@torch.no_grad()
def _stream_sums(run: _Run, split: str, part: slice) -> tuple[float, int]:
    """(summed cross-entropy, correct predictions) over this rank's block ``part`` of a streamed split: the
    loader's batches through the one inference loop (:func:`forward_batches`)."""
    idx = getattr(run.data.stream, f"{split}_idx")[part]
    tc = run.cfg.train

    def pairs():
        for xb, yb in _loader(run, split).run(streaming.eval_batches(idx, tc.eval_batch_size)):
            yb = yb.to(run.device, non_blocking=True)
            for logits in forward_batches(run.model, xb, batch_size=len(xb), device=run.device,
                                          amp=amp_of(run.precision)):
                yield logits, yb
    return _loss_and_correct(pairs())


def _epoch_rows(rec: dict[str, Any]) -> list[dict[str, Any]]:
    e = int(rec["epoch"])
    rows = [dict(split="train", metric="loss", value=rec["train_loss"], n=rec["n_train"], epoch=e),
            dict(split="train", metric="accuracy", value=rec["train_accuracy"], n=rec["n_train"], epoch=e),
            dict(split="train", metric="lr", value=rec["lr"], epoch=e)]
    if rec["n_val"]:
        rows += [dict(split="val", metric="loss", value=rec["val_loss"], n=rec["n_val"], epoch=e),
                 dict(split="val", metric="accuracy", value=rec["val_accuracy"], n=rec["n_val"], epoch=e)]
    return rows


def _diverged(epoch: int, step: int, ckpt_path: Path, history: list[dict], what: str = "training loss") -> None:
    kept = (f"kept the last good checkpoint {ckpt_path} (epoch {history[-1]['epoch']})" if history
            else "no checkpoint was written")
    raise TrainingDiverged(f"training diverged: {what} became NaN/inf in epoch {epoch} (by step {step + 1}); "
                           f"{kept}; try a lower learning rate (train.lr) or gradient clipping (train.grad_clip=1)",
                           options=("train.lr", "train.grad_clip"))


# === seeds and state ====================================================================================

def _epoch_key(seed: int, epoch: int) -> int:
    return (int(seed) * 1_000_003 + int(epoch)) % (2 ** 63)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)
