#!/usr/bin/env python
"""Training-step throughput and peak memory of ViT, DViT and DGViT (the paper's Table 9 resource columns).

Models at the paper's width (D=256, 8 layers, 8 heads, SwiGLU ×4 / GELU ×4, 10 classes), two geometries:
32×32 / patch 4 at batch 128 (65 tokens) and 224×224 / patch 16 at batch 64 (197 tokens). For each device
(CPU; CUDA with bf16 autocast when present) and attention path ("fused": SDPA calls that never form the N×N
maps; "explicit": the maps are formed, as for rollout) it times full training steps (forward, cross-entropy,
backward, AdamW step) on random data and prints samples/s, ms/step, peak memory and the ratio to ViT.

    python benchmarks/attention_speed.py --quick            # a minute or two on a 2-core CPU
    python benchmarks/attention_speed.py                    # full batches (CPU: several minutes)
    python benchmarks/attention_speed.py --devices cuda --compile --json bench.json

Throughput and peak memory come from the suite's one benchmark meter, :func:`robustbench_dgsa.jobs.bench.measure`
(the same as ``reproduce``'s Table 9; its docstring has the definitions): CUDA peak = allocator peak of a
training step (weights, gradients, AdamW state, activations); CPU peak = the same parts counted exactly
(saved-tensor hooks), not the process RSS.

Threads: on small VMs OpenMP's default passive wait can make each parallel region pay a slow thread wake-up
(milliseconds on the 2-core development VM). ``OMP_WAIT_POLICY=ACTIVE python benchmarks/attention_speed.py``
avoids that on an otherwise idle machine (spinning threads hurt when other processes compete for the cores);
``--threads 1`` is the other remedy. The header prints the policy and thread count. Timings on a shared machine
are noisy: compare ratios measured in the same run; on CPU the ratio of samples per CPU second of this process
(``time.process_time``, printed as "per CPU s") does not count time spent waiting for a core.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from robustbench_dgsa.jobs.bench import measure  # noqa: E402
from robustbench_dgsa.models import create_model  # noqa: E402

GEOMETRIES = {"32/4": (32, 4, 128), "224/16": (224, 16, 64)}    # image size, patch size, paper batch
QUICK_BATCH = {"32/4": 32, "224/16": 8}


# --- one configuration -------------------------------------------------------------------------------------
def bench_one(name: str, geometry: str, batch: int, path: str, device: torch.device, *, steps: int,
              warmup: int, amp: bool, compile_model: bool, kernel: str = "auto", model_kw: dict | None = None) -> dict:
    """One training-step measurement (the Table 9 meter); ``model_kw`` overrides the paper width (e.g. a tiny
    ``dim`` / ``depth`` / ``heads`` for smoke runs)."""
    image_size, patch_size, _ = GEOMETRIES[geometry]
    torch.manual_seed(0)
    model = create_model(name, image_size=image_size, patch_size=patch_size, num_classes=10, **(model_kw or {}))
    model.set_attention_impl(path)
    for module in model.modules():
        if hasattr(module, "kernel"):
            module.kernel = kernel
    m = measure(model, batch_size=batch, steps=steps, warmup=warmup, device=device, amp=amp,
                compile_model=compile_model, latency_runs=0, lr=3e-4)
    del model
    gc.collect()
    return {"model": name, "geometry": geometry, "batch": batch, "path": path, "device": device.type,
            "amp": "bf16" if (amp and device.type == "cuda") else "fp32", "compile": compile_model,
            "kernel": kernel, "params": int(m.params), "flops_per_sample": m.flops, "steps": steps,
            "samples_per_s": m.train_throughput, "samples_per_cpu_s": m.train_throughput_cpu, "ms_per_step": m.ms_per_step,
            "peak_mem_mb": m.peak_memory_mb, "peak_mem_method": m.method}


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="vit,dvit,dgvit", help="comma-separated registry names (default: %(default)s)")
    p.add_argument("--geometries", default="32/4,224/16", help="comma-separated from: " + ", ".join(GEOMETRIES))
    p.add_argument("--paths", default="fused,explicit", help="fused, explicit or both (default: %(default)s)")
    p.add_argument("--devices", default="auto", help="cpu, cuda, or auto = cpu plus cuda when present")
    p.add_argument("--steps", type=int, default=None, help="timed training steps per configuration "
                   "(default 5; 2 with --quick)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2; 1 with --quick)")
    p.add_argument("--batch-size", type=int, default=None, help="one batch size for all geometries "
                   "(default: the paper's, 128 at 32/4 and 64 at 224/16)")
    p.add_argument("--quick", action="store_true",
                   help="batch 32 (32/4) / 8 (224/16), 2 timed steps after 1 warm-up: a CPU smoke run")
    p.add_argument("--no-amp", action="store_true", help="CUDA in fp32 instead of bf16 autocast")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU stretch target)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads on CPU")
    p.add_argument("--kernel", default="auto", choices=["auto", "math", "sdpa", "sdpa-split"],
                   help="fused path's kernel: explicit maths without maps ('math'), SDPA (DiffAttn/DGSA: one call "
                        "per branch with the 2d'-wide V), SDPA with V in d' halves ('sdpa-split', DiffAttn/DGSA "
                        "only); auto = chosen per device and sequence length (models/attention.py choose_kernel)")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON to this file")
    args = p.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    steps = args.steps if args.steps is not None else (2 if args.quick else 5)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    geoms = [g.strip() for g in args.geometries.split(",") if g.strip()]
    paths = [q.strip() for q in args.paths.split(",") if q.strip()]
    for g in geoms:
        if g not in GEOMETRIES:
            p.error(f"unknown geometry {g!r} (valid: {', '.join(GEOMETRIES)})")
    for q in paths:
        if q not in ("fused", "explicit"):
            p.error(f"unknown path {q!r} (valid: fused, explicit)")
    if args.devices == "auto":
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    else:
        devices = [d.strip() for d in args.devices.split(",") if d.strip()]
        if "cuda" in devices and not torch.cuda.is_available():
            p.error("--devices cuda requested but CUDA is not available")

    print(f"# attention_speed: torch {torch.__version__}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset: passive)')}, "
          f"steps {steps} (+{warmup} warm-up){', torch.compile' if args.compile else ''}")
    rows: list[dict] = []
    for dev_name in devices:
        device = torch.device(dev_name)
        print(f"# device {dev_name}: {_device_name(device)}")
        # pay one-time costs (kernel libraries, thread pools, allocator pools) before anything is measured
        bench_one(names[0], geoms[0], 2, paths[0], device, steps=1, warmup=1, amp=not args.no_amp,
                  compile_model=False, kernel=args.kernel)
        for g in geoms:
            batch = args.batch_size or (QUICK_BATCH[g] if args.quick else GEOMETRIES[g][2])
            for path in paths:
                group: dict[str, dict] = {}
                for name in names:
                    r = bench_one(name, g, batch, path, device, steps=steps, warmup=warmup,
                                  amp=not args.no_amp, compile_model=args.compile, kernel=args.kernel)
                    group[name] = r
                    base = group.get("vit")
                    r["throughput_vs_vit"] = r["samples_per_s"] / base["samples_per_s"] if base else None
                    r["cpu_throughput_vs_vit"] = (r["samples_per_cpu_s"] / base["samples_per_cpu_s"]
                                                  if base and dev_name == "cpu" else None)
                    r["memory_vs_vit"] = r["peak_mem_mb"] / base["peak_mem_mb"] if base else None
                    rows.append(r)
                    ratio = (f"{r['throughput_vs_vit']:.2f}x" if r["throughput_vs_vit"] else "  -  ")
                    if r["cpu_throughput_vs_vit"]:   # CPU time: robust when other jobs share the cores
                        ratio += f"; per CPU s {r['cpu_throughput_vs_vit']:.2f}x"
                    mratio = (f"{r['memory_vs_vit']:.2f}x" if r["memory_vs_vit"] else "  -  ")
                    print(f"{dev_name:4s} {g:>6s} b={batch:<3d} {path:8s} {name:6s} "
                          f"{r['samples_per_s']:9.1f} samples/s ({ratio} ViT) {r['ms_per_step']:9.1f} ms/step  "
                          f"peak {r['peak_mem_mb']:8.1f} MB ({mratio} ViT)  "
                          f"{r['params']:,} params, {r['flops_per_sample'] / 1e9:.3f} GFLOPs/sample", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
        print(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
