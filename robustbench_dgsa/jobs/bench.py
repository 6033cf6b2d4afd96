"""The one benchmark meter: training throughput, latency and peak memory of a model (paper Table 9).

Used by ``reproduce`` (its Table 9 rows) and by ``benchmarks/attention_speed.py``.

    m = measure(model, batch_size=64, steps=4, device="cpu")
    m.train_throughput, m.latency_ms, m.peak_memory_mb

Definitions (also stored with every bench run as its provenance):

* ``params``: trainable + frozen parameters; ``flops``: analytic forward FLOPs per sample
  (:func:`robustbench_dgsa.models.flops.count_flops`).
* ``train_throughput`` (samples/s) and ``ms_per_step``: full AdamW training steps (forward, cross-entropy,
  backward, optimizer step) on one fixed random batch, timed over ``steps`` steps after ``warmup`` untimed ones;
  CUDA is synchronised before the clock is read.
* ``latency_ms``: median forward time of one batch in eval mode without gradients (``latency_runs`` runs after
  one untimed); 0 runs -> NaN.
* ``peak_memory_mb``: memory a training step needs. CUDA: ``max_memory_allocated`` during the first
  (warm-up) step minus what was allocated before, plus the model's weights when they were already on the GPU,
  i.e. weights + gradients + AdamW state + activations + the batch (method ``cuda-allocator``).
  CPU: the same parts counted exactly (method ``cpu-accounted``): weights + gradients + AdamW state + the
  distinct tensors autograd saves for backward (counted with saved-tensor hooks; storages shared with the
  weights, or saved twice, are counted once). CPU process RSS is not used: allocator caches make it depend on
  what ran before.
* ``load_avg_1m`` and ``cpu_cores``: the machine's 1-minute load average (``os.getloadavg``) read right after
  the timed steps, and the CPU cores this process may use: timings taken on a busy machine are slower, so the
  load they were measured under travels with them (NaN where the platform has no load average).
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from robustbench_dgsa.models.flops import count_flops, count_params


@dataclass
class Measurement:
    params: float
    flops: float
    train_throughput: float       # samples/s
    train_throughput_cpu: float   # samples per CPU second of this process (robust when other jobs share the cores)
    ms_per_step: float
    latency_ms: float
    peak_memory_mb: float
    method: str                   # "cuda-allocator" | "cpu-accounted"
    batch_size: int
    steps: int
    load_avg_1m: float = float("nan")   # machine load while timing (see the module docstring)
    cpu_cores: int = 0

    def table9(self) -> dict[str, float]:
        """The Table 9 numbers (the rows ``reproduce`` stores)."""
        return {"params": self.params, "flops": self.flops, "train_throughput": self.train_throughput,
                "latency_ms": self.latency_ms, "peak_memory_mb": self.peak_memory_mb}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def random_batch(cfg, batch_size: int, device: torch.device | str = "cpu",
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """(inputs, labels, forward kwargs) of the right shape for a model config (images or token ids)."""
    gen = torch.Generator().manual_seed(seed)
    if cfg.modality == "image":
        x = torch.randn(batch_size, cfg.in_chans, cfg.image_size, cfg.image_size, generator=gen)
        kw: dict[str, Any] = {}
    else:
        x = torch.randint(4, max(5, cfg.vocab_size), (batch_size, cfg.max_len), generator=gen)
        kw = {"key_padding_mask": torch.zeros(batch_size, cfg.max_len, dtype=torch.bool, device=device)}
    y = torch.randint(0, cfg.num_classes, (batch_size,), generator=gen)
    return x.to(device), y.to(device), kw


class _SavedTensors:
    """Bytes of the distinct storages autograd saves for backward, minus those of ``exclude`` (weights)."""

    def __init__(self, exclude: set[int]) -> None:
        self.seen, self.bytes = set(exclude), 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        try:
            st = t.untyped_storage()
            key, size = st.data_ptr(), st.nbytes()
        except (RuntimeError, NotImplementedError):  # e.g. tensor subclasses without a plain storage
            key, size = id(t), t.numel() * t.element_size()
        if key not in self.seen:
            self.seen.add(key)
            self.bytes += size
        return t


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def measure(model: torch.nn.Module, *, batch_size: int, steps: int = 4, warmup: int = 1,
            device: str | torch.device = "cpu", amp: bool = False, compile_model: bool = False,
            latency_runs: int = 3, lr: float = 1e-4) -> Measurement:
    """Measure ``model`` (built by :func:`robustbench_dgsa.models.create_model`) as the module docstring says.

    ``amp``: bf16 autocast on CUDA (ignored on CPU). The model is moved to ``device`` and left in eval mode.
    """
    dev = torch.device(device)
    cfg = model.config
    on_dev = sum(p.numel() * p.element_size() for p in model.parameters() if p.device == dev)
    if dev.type == "cuda":
        _sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev) - on_dev
    model = model.to(dev).train()
    x, y, kw = random_batch(cfg, batch_size, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    fwd = torch.compile(model) if compile_model else model
    use_amp = amp and dev.type == "cuda"

    def step() -> None:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = F.cross_entropy(fwd(x, **kw).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    saved = _SavedTensors({p.untyped_storage().data_ptr() for p in model.parameters()})
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
        step()  # the first step also allocates the optimizer state
    _sync(dev)
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated(dev) - base
        method = "cuda-allocator"
    else:
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                    if torch.is_tensor(t))
        peak, method = 2 * weights + state + saved.bytes, "cpu-accounted"
    for _ in range(max(0, warmup - 1)):
        step()
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    _sync(dev)
    elapsed, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    load = machine_load()
    latency = _latency(fwd, model, x, kw, dev, latency_runs)
    return Measurement(params=float(count_params(model)), flops=float(count_flops(cfg)),
                       train_throughput=steps * batch_size / elapsed if steps else float("nan"),
                       train_throughput_cpu=steps * batch_size / max(cpu_s, 1e-9) if steps else float("nan"),
                       ms_per_step=1e3 * elapsed / steps if steps else float("nan"), latency_ms=latency,
                       peak_memory_mb=peak / 2 ** 20, method=method, batch_size=int(batch_size), steps=int(steps),
                       load_avg_1m=load[0], cpu_cores=load[1])


def machine_load() -> tuple[float, int]:
    """(1-minute load average, CPU cores this process may use) now; NaN load where the platform has none."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        return float(os.getloadavg()[0]), cores
    except (OSError, AttributeError):
        return float("nan"), cores


@torch.no_grad()
def _latency(fwd, model: torch.nn.Module, x: torch.Tensor, kw: dict[str, Any], dev: torch.device,
             runs: int) -> float:
    model.eval()
    if runs <= 0:
        return float("nan")
    fwd(x, **kw)
    times = []
    for _ in range(runs):
        _sync(dev)
        t0 = time.perf_counter()
        fwd(x, **kw)
        _sync(dev)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3
