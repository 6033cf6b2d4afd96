#!/usr/bin/env python
"""Training and evaluation throughput in fp32, bf16 and bf16 + torch.compile, at the zoo's model sizes (issue 30).

Models at the ``zoo`` preset: ViT / DViT / DGViT (D = 96, 6 layers, 4 heads, patch 4, 32×32 images, batch 128) and
Transformer / DT / DGT (D = 96, 3 layers, 4 heads, 256 tokens, vocabulary 10,000, batch 32). Each is timed exactly
as the suite runs it:

* **train**: one optimisation step of ``engine.train`` (autocast as the precision says, cross-entropy on the float
  logits, backward, AdamW step), on a fixed random batch;
* **eval**: ``engine.predict.forward_batches`` (eval mode, no grad, the CPU's forward calls of
  ``cpu_call_examples`` examples) over ``--eval-batches`` × 256 prepared examples — what ``evaluate`` does per
  condition, corruption generation excluded.

Variants: ``fp32`` (amp off), ``bf16`` (bf16 autocast) and ``bf16+compile`` (the forward through
``torch.compile``: ``engine.predict.compiled``, as ``--compile`` runs it); ``fp32+compile`` on request, and
``bf16-serial``: bf16 evaluation with a batch's forward calls one after another on all threads, as before
``engine.predict.cpu_forward_workers`` ran them in one-thread workers (fp32 always runs them so). Each row also
gives the minor page faults per call: glibc's heap hands large blocks back to the kernel depending on what the
process did before, and a variant that keeps faulting them in can run up to 40 % slower (set
``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` to time every variant on a steady heap). Within a
model, mode and thread count the variants are timed in interleaved rounds (order rotated), each variant's best
round is kept, and ratios to fp32 are printed both on wall time and on this process's CPU time (robust on a shared
machine: waiting for a core is not counted), and as the median [min, max] of the round-by-round wall ratios (robust
on a VM whose speed drifts between runs). The compile variant also reports its one-time cost (the first call's
time minus a steady call's), to set against a run's length.

    python benchmarks/precision_speed.py --quick               # a smoke run: a few minutes on 2 cores
    python benchmarks/precision_speed.py                       # threads 1 and 2, all six models
    python benchmarks/precision_speed.py --models vit,dgvit --threads 1 --modes train --json out.json

The header says what ``amp = "auto"`` resolves to on this machine (and why). On a CPU without native bf16 the bf16
columns show emulated bf16 (slower): ``auto`` keeps fp32 there, so nothing the suite runs by default gets slower.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

try:
    import resource
except ImportError:   # not on Windows
    resource = None  # type: ignore[assignment]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from robustbench_dgsa.config import resolve_config  # noqa: E402
from robustbench_dgsa.engine.predict import (autocast, compiled, cpu_native_bf16, forward_batches,  # noqa: E402
                                             resolve_precision)
from robustbench_dgsa.jobs.bench import random_batch  # noqa: E402
from robustbench_dgsa.models import create_model, get_model_config  # noqa: E402
from robustbench_dgsa.util.errors import UserError  # noqa: E402

IMAGE_MODELS, TEXT_MODELS = ("vit", "dvit", "dgvit"), ("transformer", "dt", "dgt")
#: variant -> (amp, torch.compile, concurrent CPU forward calls in evaluation); "bf16-serial": bf16 evaluation
#: with a batch's forward calls one after another on all threads (the model's ``concurrent_forward = False``: the
#: path before ``engine.predict.cpu_forward_workers``); in training the same as "bf16"
VARIANTS = {"fp32": ("off", False, True), "bf16": ("bf16", False, True), "bf16+compile": ("bf16", True, True),
            "fp32+compile": ("off", True, True), "bf16-serial": ("bf16", False, False)}
EVAL_BATCH = 256


def zoo_config(name: str, batch: int | None):
    """The model config and training batch of ``name`` at the zoo preset (text: the zoo's 10,000-word vocabulary)."""
    image = get_model_config(name).modality == "image"
    cfg = resolve_config(get_model_config(name), "cifar10" if image else "imdb", "zoo")
    m = cfg.model
    m.num_classes = 10 if image else 2
    if not image:
        m.vocab_size = cfg.data.max_vocab
    return m, batch or cfg.train.batch_size


def make_runner(name: str, mode: str, variant: str, batch: int | None, eval_batches: int
                ) -> tuple[Callable[[], None], int]:
    """(one timed call, examples per call) of ``variant`` of ``name`` in ``mode``."""
    amp, compile_model, concurrent = VARIANTS[variant]
    mcfg, batch = zoo_config(name, batch)
    torch.manual_seed(0)
    model = create_model(mcfg)
    model.concurrent_forward = concurrent
    dev = torch.device("cpu")
    fwd = compiled(model, compile_model, f"{name} ({variant})")
    if mode == "eval":
        x, _, kw = random_batch(mcfg, EVAL_BATCH * eval_batches, dev)

        def run_eval() -> None:
            for _ in forward_batches(model, x, kw.get("key_padding_mask"), batch_size=EVAL_BATCH, device=dev,
                                     amp=amp, forward=fwd):
                pass
        return run_eval, len(x)
    x, y, kw = random_batch(mcfg, batch, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    model.train()
    call = fwd or model

    def run_train() -> None:
        with autocast(dev, amp):
            logits = call(x, **kw)
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return run_train, batch


def _minor_faults() -> int:
    """This process's minor page faults so far (0 where ``resource`` is missing)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0


def _timed(run: Callable[[], None], calls: int) -> tuple[float, float, int]:
    """(wall s, CPU s, minor page faults) of ``calls`` calls."""
    f0, t0, c0 = _minor_faults(), time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
    return time.perf_counter() - t0, time.process_time() - c0, _minor_faults() - f0


def bench_group(name: str, mode: str, variants: list[str], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Best-of-rounds examples/s (wall and CPU time) of each variant, interleaved, and each round's wall
    examples/s (``round_wall``: rounds are adjacent in time, so their ratios pair); compile's one-time cost."""
    runners, out = {}, {}
    for v in variants:
        run, n = make_runner(name, mode, v, args.batch, args.eval_batches)
        first, _, _ = _timed(run, 1)                    # compiles (compile variants), allocates, warms caches
        for _ in range(max(0, args.warmup - 1)):
            run()
        runners[v] = (run, n)
        out[v] = {"first_call_s": first, "wall": 0.0, "cpu": 0.0, "per_call_s": float("inf"), "round_wall": [],
                  "minor_faults_per_call": 0.0}
    for r in range(args.rounds):
        for v in variants[r % len(variants):] + variants[:r % len(variants)]:
            run, n = runners[v]
            wall, cpu, faults = _timed(run, args.steps)
            o = out[v]
            o["minor_faults_per_call"] += faults / (args.steps * args.rounds)
            o["round_wall"].append(n * args.steps / wall)
            o["wall"], o["cpu"] = max(o["round_wall"]), max(o["cpu"], n * args.steps / max(cpu, 1e-9))
            o["per_call_s"] = min(o["per_call_s"], wall / args.steps)
    for v, o in out.items():
        o["compile_s"] = max(0.0, o["first_call_s"] - o["per_call_s"]) if VARIANTS[v][1] else 0.0
    del runners
    gc.collect()
    return out


def paired_ratios(o: dict[str, Any], base: dict[str, Any]) -> list[float]:
    """Round-by-round wall-throughput ratios of a variant to fp32 (same round, minutes apart at most): on a VM
    whose speed drifts between runs their median is steadier than a ratio of two bests."""
    return [a / b for a, b in zip(o["round_wall"], base["round_wall"])]


def report(threads: int, name: str, mode: str, res: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Print and return one row per variant: throughputs, ratios to fp32, page faults."""
    base = res.get("fp32")
    unit = "img/s" if name in IMAGE_MODELS else "seq/s"
    rows = []
    for v, o in res.items():
        paired = sorted(paired_ratios(o, base)) if base and v != "fp32" else []
        ratio = (f"  x{o['wall'] / base['wall']:.2f} wall, x{o['cpu'] / base['cpu']:.2f} CPU-time vs fp32;"
                 f" per round x{statistics.median(paired):.2f} median [{paired[0]:.2f}, {paired[-1]:.2f}]"
                 if paired else "")
        comp = f"  (compile {o['compile_s']:.1f} s once)" if VARIANTS[v][1] else ""
        print(f"{threads}T {mode:5s} {name:11s} {v:13s} {o['wall']:9.1f} {unit} wall {o['cpu']:9.1f} per CPU s"
              f"{ratio}{comp}  [{o['minor_faults_per_call']:.0f} page faults/call]", flush=True)
        rows.append({"threads": threads, "mode": mode, "model": name, "variant": v, **o,
                     "vs_fp32_wall": o["wall"] / base["wall"] if base else None,
                     "vs_fp32_cpu": o["cpu"] / base["cpu"] if base else None,
                     "vs_fp32_round_median": statistics.median(paired) if paired else None})
    return rows


def _load() -> str:
    try:
        one, _, _ = os.getloadavg()
        return f"load average {one:.2f} on {os.cpu_count()} CPUs"
    except OSError:
        return "load unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(IMAGE_MODELS + TEXT_MODELS),
                   help="comma-separated, from: " + ", ".join(IMAGE_MODELS + TEXT_MODELS) + " (default: all)")
    p.add_argument("--modes", default="train,eval", help="train, eval or both (default: %(default)s)")
    p.add_argument("--variants", default="fp32,bf16,bf16+compile",
                   help="comma-separated, from: " + ", ".join(VARIANTS) + " (default: %(default)s)")
    p.add_argument("--threads", default="1,2", help="torch intra-op thread counts (default: %(default)s)")
    p.add_argument("--batch", type=int, default=None, help="training batch (default: the zoo preset's)")
    p.add_argument("--eval-batches", type=int, default=2, help="eval: this many × 256 examples per call")
    p.add_argument("--steps", type=int, default=3, help="timed calls per variant per round (default 3)")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed calls first, the compiling one included (default 2)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds: each variant's best kept, and the median of the round-by-round ratios "
                        "to fp32 (default 3)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 step, 1 round, 1 warm-up, 1 eval batch")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.rounds, args.warmup, args.eval_batches = 1, 1, 1, 1
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r} (valid: {', '.join(VARIANTS)})")
    for m in modes:
        if m not in ("train", "eval"):
            p.error(f"unknown mode {m!r} (valid: train, eval)")
    for name in models:
        try:
            get_model_config(name)
        except UserError as e:
            p.error(str(e))
    native, why = cpu_native_bf16()
    auto = resolve_precision(torch.device("cpu"), "auto")
    print(f"# precision_speed: torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{_load()}; amp=auto resolves to {auto} here ({why})")
    print(f"# steps {args.steps} x rounds {args.rounds} (best kept), warm-up {args.warmup}; zoo preset sizes"
          + ("" if native else "; this CPU has no native bf16: the bf16 columns are emulated, auto stays fp32"))
    rows: list[dict[str, Any]] = []
    for t in threads:
        torch.set_num_threads(t)
        for mode in modes:
            for name in models:
                rows += report(t, name, mode, bench_group(name, mode, variants, args))
    if args.json:
        args.json.write_text(json.dumps({"auto": auto, "why": why, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
