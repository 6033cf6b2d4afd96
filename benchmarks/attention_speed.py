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

Peak memory:
* CUDA: ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``, minus what was allocated
  before the model was built: weights, gradients, AdamW state and activations of the step.
* CPU: the process's peak resident set size (``VmHWM`` in /proc/self/status) during the steps minus the resident
  size before the model was built (VmRSS, after ``gc.collect()`` and glibc ``malloc_trim``). The peak is reset
  per configuration by writing "5" to /proc/self/clear_refs (Linux >= 4.0); where that is not possible, the
  lifetime peak (``ru_maxrss``) is used and the figure is marked with "*" (an upper bound). RSS also counts
  allocator caches, so CPU figures are coarser than CUDA ones.

Threads: on small VMs OpenMP's default passive wait can make each parallel region pay a slow thread wake-up
(milliseconds on the 2-core development VM). ``OMP_WAIT_POLICY=ACTIVE python benchmarks/attention_speed.py``
avoids that on an otherwise idle machine (spinning threads hurt when other processes compete for the cores);
``--threads 1`` is the other remedy. The header prints the policy and thread count. Timings on a shared machine
are noisy: compare ratios measured in the same run; on CPU the ratio of samples per CPU second of this process
(``time.process_time``, printed as "per CPU s") does not count time spent waiting for a core.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from robustbench_dgsa.models.flops import count_flops, count_params  # noqa: E402
from robustbench_dgsa.models import create_model  # noqa: E402

GEOMETRIES = {"32/4": (32, 4, 128), "224/16": (224, 16, 64)}    # image size, patch size, paper batch
QUICK_BATCH = {"32/4": 32, "224/16": 8}


# --- memory ------------------------------------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _trim() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakMemory:
    """Peak memory of a block in MB: CUDA allocator peak, or CPU peak-RSS delta (see the module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.exact = True
        self.mb = float("nan")

    def __enter__(self) -> "PeakMemory":
        _trim()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            self.base = (_status_kb("VmRSS") or 0) * 1024
            self.exact = _reset_peak_rss() and _status_kb("VmHWM") is not None
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        elif self.exact:
            peak = (_status_kb("VmHWM") or 0) * 1024
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.mb = (peak - self.base) / 2**20


# --- one configuration -------------------------------------------------------------------------------------
def bench_one(name: str, geometry: str, batch: int, path: str, device: torch.device, *, steps: int,
              warmup: int, amp: bool, compile_model: bool, kernel: str = "auto") -> dict:
    image_size, patch_size, _ = GEOMETRIES[geometry]
    torch.manual_seed(0)
    with PeakMemory(device) as mem:
        model = create_model(name, image_size=image_size, patch_size=patch_size, num_classes=10)
        params, flops = count_params(model), count_flops(model.config)
        model.set_attention_impl(path)
        for module in model.modules():
            if hasattr(module, "kernel"):
                module.kernel = kernel
        model.to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
        step_model = torch.compile(model) if compile_model else model
        x = torch.randn(batch, 3, image_size, image_size, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        use_amp = amp and device.type == "cuda"

        def step() -> None:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                loss = F.cross_entropy(step_model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(warmup):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    del model, opt, step_model, x, y
    _trim()
    return {"model": name, "geometry": geometry, "batch": batch, "path": path, "device": device.type,
            "amp": "bf16" if (amp and device.type == "cuda") else "fp32", "compile": compile_model,
            "kernel": kernel, "params": params, "flops_per_sample": flops, "steps": steps,
            "samples_per_s": batch * steps / elapsed, "samples_per_cpu_s": batch * steps / max(cpu_s, 1e-9),
            "ms_per_step": 1e3 * elapsed / steps,
            "peak_mem_mb": mem.mb, "peak_mem_exact": mem.exact}


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
                    star = "" if r["peak_mem_exact"] else "*"
                    print(f"{dev_name:4s} {g:>6s} b={batch:<3d} {path:8s} {name:6s} "
                          f"{r['samples_per_s']:9.1f} samples/s ({ratio} ViT) {r['ms_per_step']:9.1f} ms/step  "
                          f"peak {r['peak_mem_mb']:8.1f} MB{star} ({mratio} ViT)  "
                          f"{r['params']:,} params, {r['flops_per_sample'] / 1e9:.3f} GFLOPs/sample", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
        print(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
