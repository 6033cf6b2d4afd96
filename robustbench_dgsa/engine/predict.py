"""Raw data -> model inputs -> predictions, the one way (shared by train, evaluate and rollout).

A checkpoint's meta carries a ``preprocess`` record written by the trainer::

    {"modality": "image", "mean": [...], "std": [...], "image_size": 32, "in_chans": 3}
    {"modality": "text", "vocab": [token, ...], "max_len": 256}

``prepare_images`` / ``prepare_texts`` apply it; ``predict`` runs a model over prepared tensors in batches
(no grad, bounded memory, bf16 autocast where ``amp`` resolves to it: :func:`resolve_precision`); ``predict_raw``
converts batch by batch, so even a large uint8 array never exists as one float tensor.
"""
from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

# The preprocess record, its application and the test selection live in data/prepare.py; re-exported here for
# the callers that import them from this module.
from robustbench_dgsa.data.prepare import (prepare_images, prepare_texts, preprocess_record,  # noqa: F401
                                           select_test, vocab_from_preprocess)
from robustbench_dgsa.data.registry import get_info
from robustbench_dgsa.util.errors import CheckpointError, RunFailure, UserError


# --- devices and precision ---------------------------------------------------------------------------

def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """"auto" -> cuda when available, else cpu. Asking for cuda without one is a user error."""
    if isinstance(device, torch.device):
        return device
    name = (device or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {device!r} requested but CUDA is not available (use device=cpu)", options="device")
    try:
        return torch.device(name)
    except RuntimeError:
        raise UserError(f"unknown device {device!r} (valid: auto, cpu, cuda, cuda:N)") from None


#: the precisions a run computes in (what ``amp`` resolves to); recorded in run records and store rows
PRECISIONS = ("fp32", "bf16")
#: ATen CPU capabilities whose kernels compute bf16 natively (vectorised); below them (AVX2, DEFAULT: CI's
#: ``ATEN_CPU_CAPABILITY=default`` pass) bf16 is emulated and slower than fp32
_BF16_CAPABILITIES = ("AVX512",)
#: CPU flags (torch.cpu.get_capabilities() keys, /proc/cpuinfo flags) of native bf16 arithmetic
_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def _cpuinfo_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where it cannot be read: not Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_native_bf16() -> tuple[bool, str]:
    """(whether this CPU computes bf16 natively *in the kernels PyTorch uses now*, why in words).

    Two conditions: ATen's dispatched CPU capability (``torch.backends.cpu.get_cpu_capability()``) is AVX512
    (``ATEN_CPU_CAPABILITY=avx2/default`` lowers it, and then bf16 runs on emulated paths), and the CPU has
    AVX512-BF16 or AMX-BF16: PyTorch's own check ``torch.cpu.get_capabilities()`` (cpuinfo; the mapping behind
    ``torch.cpu._is_avx512_bf16_supported``), else the flags in ``/proc/cpuinfo``."""
    try:
        cap = str(torch.backends.cpu.get_cpu_capability()).upper()
    except Exception:  # noqa: BLE001 - an older/odd build: no capability query means no claim of bf16
        cap = "UNKNOWN"
    if cap not in _BF16_CAPABILITIES:
        return False, f"ATen CPU capability {cap} (bf16 is native only with AVX512 kernels)"
    try:
        caps = dict(torch.cpu.get_capabilities())
        flags, how = {k for k in _BF16_FLAGS if caps.get(k)}, "torch.cpu.get_capabilities()"
    except Exception:  # noqa: BLE001 - not in this torch: the kernel's own flags
        flags, how = _cpuinfo_flags() & set(_BF16_FLAGS), "/proc/cpuinfo"
    if not flags:
        return False, f"no AVX512-BF16/AMX-BF16 ({how})"
    return True, f"{', '.join(sorted(flags))} ({how}), ATen {cap}"


def resolve_precision(device: torch.device, amp: str = "auto") -> str:
    """What ``amp`` means on ``device``: "bf16" (bf16 autocast) or "fp32". "off": fp32; "bf16": bf16; "auto":
    bf16 on CUDA and on CPUs with native bf16 arithmetic (:func:`cpu_native_bf16`), fp32 elsewhere."""
    if amp == "off":
        return "fp32"
    if amp == "bf16":
        return "bf16"
    if amp != "auto":
        raise UserError(f"unknown amp setting {amp!r} (valid: auto, bf16, off)")
    if device.type == "cuda":
        return "bf16"
    return "bf16" if device.type == "cpu" and cpu_native_bf16()[0] else "fp32"


def warn_if_emulated(device: torch.device, precision: str) -> None:
    """One warning line when a run computes in bf16 on a CPU that emulates it (no AVX512-BF16 / AMX, or ATen's
    kernels below AVX512): it then runs slower than fp32, and ``amp = "auto"`` would have chosen fp32."""
    if precision != "bf16" or device.type != "cpu":
        return
    native, why = cpu_native_bf16()
    if not native:
        import warnings
        warnings.warn(f"bf16 on this CPU is emulated: {why}; it runs slower than fp32 here, and amp=auto "
                      "computes in fp32 on this CPU", stacklevel=2)


def amp_of(precision: str) -> str:
    """The ``amp`` setting that computes in ``precision`` on any machine ("bf16" -> "bf16", "fp32" -> "off")."""
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r} (valid: {', '.join(PRECISIONS)})")
    return "bf16" if precision == "bf16" else "off"


def use_bf16(device: torch.device, amp: str = "auto") -> bool:
    """Whether ``amp`` means bf16 autocast on ``device`` (:func:`resolve_precision`)."""
    return resolve_precision(device, amp) == "bf16"


def autocast(device: torch.device, amp: str = "auto"):
    if use_bf16(device, amp):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


class _Compiled:
    """A model's forward through ``torch.compile``, falling back to the plain forward for good (one warning line)
    where the compiler is unavailable or fails on it (no C compiler, an unsupported Python or operation). The
    compiled forward runs the same modules, so checkpoints are written from the plain model as before."""

    def __init__(self, model: torch.nn.Module, what: str):
        self.model, self.what, self.fn = model, what, None
        try:
            self.fn = torch.compile(model)
        except Exception as e:  # noqa: BLE001 - torch raises many types for "cannot compile here"
            self._give_up(e)

    def _give_up(self, e: BaseException) -> None:
        import warnings
        reason = " ".join(f"{type(e).__name__}: {e}".split())[:200]
        warnings.warn(f"torch.compile is unavailable for {self.what} ({reason}); running it uncompiled",
                      stacklevel=3)
        self.fn = None

    def __call__(self, *args: Any, **kw: Any) -> Any:
        if self.fn is not None:
            try:
                return self.fn(*args, **kw)
            except Exception as e:  # noqa: BLE001 - compilation happens on the first call; a model error
                self._give_up(e)    # raises again below, uncompiled
        return self.model(*args, **kw)


def compiled(model: torch.nn.Module, enabled: bool, what: str = "the model") -> Any:
    """``model``'s forward through ``torch.compile`` when ``enabled`` (``train.compile``), else None (the caller
    calls the model itself); see :class:`_Compiled` for the fallback."""
    return _Compiled(model, what) if enabled else None


# --- datasets --------------------------------------------------------------------------------------------

def dataset_info(name: str):
    """DatasetInfo of a registered name or a generic source (``folder:PATH``, ``csv:PATH``, ...); UserError if
    unknown. ``num_classes`` is 0 for generic sources until they are loaded."""
    return get_info(name)


# --- preprocessing -----------------------------------------------------------------------------------

def preprocess_from_meta(meta: dict[str, Any]) -> dict[str, Any]:
    pre = meta.get("preprocess")
    if not isinstance(pre, dict) or pre.get("modality") not in ("image", "text"):
        raise CheckpointError("checkpoint has no usable 'preprocess' record in its meta "
                              "(not written by `dgsa-bench train`?)")
    return pre


def prepare(raw: Any, preprocess: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Either modality: (inputs, key_padding_mask or None)."""
    if preprocess["modality"] == "image":
        return prepare_images(raw, preprocess), None
    if callable(preprocess.get("tokenizer")):  # outside text models (benchmark): texts -> ids [, padding mask]
        out = preprocess["tokenizer"](list(raw))
        ids, mask = out if isinstance(out, tuple) else (out, None)
        return torch.as_tensor(ids, dtype=torch.long), None if mask is None else torch.as_tensor(mask, dtype=torch.bool)
    return prepare_texts(raw, preprocess)


def subset_label(y: np.ndarray, idx: np.ndarray) -> str:
    """How the examples ``idx`` of a split with labels ``y`` were chosen, in words: "all 10,000", "first 500 of
    10,000" or "stratified 100 of 10,000 (seed 0)"."""
    n, k = len(y), len(idx)
    if k == n:
        return f"all {n:,}"
    if np.array_equal(np.asarray(idx), np.arange(k)):
        return f"first {k:,} of {n:,}"
    return f"stratified {k:,} of {n:,} (seed 0)"


def subset_note(y: np.ndarray, idx: np.ndarray) -> str | None:
    """A warning when the chosen examples miss classes of the split (None when they cover all of them)."""
    have, want = len(np.unique(np.asarray(y)[idx])), len(np.unique(y))
    if have == want or len(idx) == 0:
        return None
    return (f"the {subset_label(y, idx)} test examples cover {have} of the {want} classes; a class-stratified "
            "subset of the same size is available on request (subset 'stratified')")


def trim_padding(ids: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Cut the right padding that every row of a text batch shares (pads are masked keys, so the logits are
    the same up to float rounding; batches of short texts run much faster)."""
    if mask is None or mask.ndim != 2 or mask.shape[1] <= 1:
        return ids, mask
    length = int((~mask).sum(dim=1).max())
    length = max(1, length)
    if length == mask.shape[1]:
        return ids, mask
    return ids[:, :length], mask[:, :length]


# --- prediction --------------------------------------------------------------------------------------

@torch.no_grad()
def forward_batches(model: torch.nn.Module, inputs: torch.Tensor, key_padding_mask: torch.Tensor | None = None, *,
                    batch_size: int = 256, device: str | torch.device = "auto", amp: str = "auto",
                    trim: bool = True, forward: Any = None, **forward_kw: Any):
    """The one batched inference loop: yield the model's output for each batch of prepared inputs.

    Eval mode (the model's mode is restored afterwards), no grad, bf16 autocast as ``amp`` says; ``trim`` cuts
    the right padding a text batch shares (:func:`trim_padding`). ``forward_kw`` go to the model's forward
    (e.g. ``return_attention=True``); the model is not moved (callers put it on ``device``). ``forward``: what to
    call instead of the model (its compiled forward: :func:`compiled`). On the CPU a batch runs as forward calls
    of at most :func:`cpu_call_examples` examples, concurrently where :func:`cpu_forward_workers` says so.
    """
    call = forward or model
    dev = resolve_device(device)
    amp = amp_of(resolve_precision(dev, amp))   # "auto" resolved once, not per batch and per forward call
    most = min(batch_size, cpu_call_examples(model)) if dev.type == "cpu" else batch_size
    was_training = model.training
    model.eval()

    def one_call(s: int, stop: int) -> Any:
        xb = inputs[s:stop].to(dev, non_blocking=True)
        mb = None if key_padding_mask is None else key_padding_mask[s:stop].to(dev)
        if trim:
            xb, mb = trim_padding(xb, mb)
        with torch.no_grad(), autocast(dev, amp):   # both are per thread: a worker sets its own
            return call(xb, key_padding_mask=mb, **forward_kw) if mb is not None or forward_kw else call(xb)
    try:
        for start in range(0, len(inputs), batch_size):
            end = min(start + batch_size, len(inputs))
            bounds = _even_calls(start, end, most)
            workers = cpu_forward_workers(model, dev, len(bounds), amp, forward is not None or bool(forward_kw))
            if workers > 1:
                outs = list(_worker_pool(workers).map(lambda b: one_call(*b), bounds))
            else:
                outs = [one_call(s, stop) for s, stop in bounds]
            yield outs[0] if len(outs) == 1 else _cat_outputs(outs)
    finally:
        model.train(was_training)


def _even_calls(start: int, end: int, most: int) -> list[tuple[int, int]]:
    """Rows ``start:end`` as the fewest calls of at most ``most`` rows, of equal size (the first ones one row
    longer where it does not divide): 256 rows at most 244 are two calls of 128, not 244 + 12 (which left one
    worker thread idle)."""
    n = end - start
    calls = max(1, -(-n // most))
    size, extra = divmod(n, calls)
    bounds, s = [], start
    for i in range(calls):
        stop = s + size + (1 if i < extra else 0)
        bounds.append((s, stop))
        s = stop
    return bounds


#: on the CPU a model that does not say how large its activations are sees at most this many examples per
#: forward call: activations of 64 CIFAR images stay in the cache, which makes evaluation faster than with 256
#: (``benchmarks/MEASUREMENTS.md``); the caller's ``batch_size`` still sets what is yielded together
CPU_FORWARD_BATCH = 64

#: a CPU forward call of a model that declares ``activations_per_example`` holds about this many elements per
#: layer: 64 CIFAR images through the zoo's D = 96 ViT (65 tokens), the setting CPU_FORWARD_BATCH was measured at
CPU_CALL_ELEMENTS = 64 * 65 * 96
CPU_CALL_RANGE = (16, 256)


def cpu_call_examples(model: torch.nn.Module) -> int:
    """At most this many examples per forward call on the CPU: :data:`CPU_CALL_ELEMENTS` ÷ the model's
    ``activations_per_example`` (tokens × width; the suite's models declare it, a model a user brings may),
    within :data:`CPU_CALL_RANGE`; :data:`CPU_FORWARD_BATCH` for a model that does not declare it. It depends on
    the model alone, never on timing, so the same model and inputs always make the same calls (a batch is split
    into equal calls: :func:`_even_calls`). The zoo's image models get 64, as before; the evidence preset's
    (8 px patches, 17 tokens) 244, i.e. a batch of 256 as two calls of 128; the ``tiny`` preset's D = 32 models
    192 (vision) and 254 (text); the zoo's text models (257 tokens) 16. Against calls of 64: the zoo
    Transformer's evaluation +9-22 % in bf16 and +5-10 % in fp32, an evidence ViT ``evaluate`` and the main job
    0.96x the time; timed alone on glibc's default heap the ``tiny`` models were slower (page faults of the
    larger blocks) (``benchmarks/MEASUREMENTS.md``)."""
    per_example = getattr(model, "activations_per_example", None)
    if per_example is None:
        return CPU_FORWARD_BATCH
    if isinstance(per_example, bool) or not isinstance(per_example, (int, np.integer)) or per_example < 1:
        raise UserError(f"{type(model).__name__}.activations_per_example must be a positive whole number "
                        f"(activation elements per example), got {per_example!r}")
    low, high = CPU_CALL_RANGE
    return max(low, min(high, CPU_CALL_ELEMENTS // int(per_example)))


def cpu_forward_workers(model: torch.nn.Module, device: torch.device, calls: int, amp: str = "auto",
                        custom_call: bool = False) -> int:
    """How many threads run one batch's forward calls: with ``n`` ≥ 2 intra-op threads
    (``torch.get_num_threads()``), bf16 on the CPU (``amp``: :func:`resolve_precision`) and at least ``n``
    calls, ``n`` worker threads of one intra-op thread each, one call per worker at a time (the calls are
    independent; each runs exactly as it would alone at one thread, so the outputs do not depend on which
    worker ran it). Otherwise 1: the calls one after another on all ``n`` threads — in fp32, on other devices,
    for a compiled or customised call (``custom_call``: a ``forward`` or forward keywords), and for a model
    that does not declare ``concurrent_forward = True`` (its eval-mode forward draws no random numbers and
    changes no state: the suite's models declare it; a model a user brings may). In bf16, two one-thread
    workers evaluated DViT, DGViT, DT and DGT 2-22 % faster than one call on two threads, ViT as fast, and a
    whole DGViT ``evaluate`` 8 % faster; the Transformer 9-48 % faster on glibc's default heap settings, but
    9 % slower with a raised mmap/trim threshold (its workers' per-thread heaps fault). In fp32 they were no
    faster end to end, so fp32 keeps its path (``benchmarks/MEASUREMENTS.md``)."""
    if device.type != "cpu" or custom_call or not getattr(model, "concurrent_forward", False):
        return 1
    n = torch.get_num_threads()
    if not 2 <= n <= calls or resolve_precision(device, amp) != "bf16":
        return 1
    return n


_POOLS: dict[int, Any] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools() -> None:
    """In a forked child: the parent's worker threads do not exist there, so its pools would never run a task."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def _one_intra_op_thread(started: threading.Barrier) -> None:
    """Worker initializer: this thread's ATen/MKL/oneDNN calls run on one thread (fixed now: PyTorch sets a
    thread's count on its first parallel call from a process-wide value, which the caller restores)."""
    torch.set_num_threads(1)
    torch.get_num_threads()   # initialises this thread's count now, from the 1 just set
    started.wait()


def _worker_pool(n: int) -> ThreadPoolExecutor:
    """The process's pool of ``n`` one-thread forward workers (created once per ``n``; threads are reused)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(n)
        if pool is None:
            started = threading.Barrier(n + 1)
            pool = ThreadPoolExecutor(n, thread_name_prefix="dgsa-forward", initializer=_one_intra_op_thread,
                                      initargs=(started,))
            for _ in range(n):            # start all n workers now (one pending task each, each held at the
                pool.submit(int)          # barrier until all have set their count) ...
            started.wait()
            torch.set_num_threads(n)      # ... then restore the process-wide count the workers lowered
            _POOLS[n] = pool
        return pool


def _cat_outputs(outs: list[Any]) -> Any:
    """Concatenate per-call outputs along the batch: tensors, or tuples / dicts of tensors (e.g. with maps)."""
    first = outs[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(outs)
    if isinstance(first, tuple):
        return tuple(_cat_outputs([o[i] for o in outs]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _cat_outputs([o[k] for o in outs]) for k in first}
    if isinstance(first, list):
        return [_cat_outputs([o[i] for o in outs]) for i in range(len(first))]
    raise TypeError(f"cannot concatenate model outputs of type {type(first).__name__}")


@torch.no_grad()
def predict(model: torch.nn.Module, inputs: torch.Tensor, key_padding_mask: torch.Tensor | None = None, *,
            batch_size: int = 256, device: str | torch.device = "auto", amp: str = "auto",
            return_probs: bool = False, forward: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Predicted classes (np.int64) and optionally softmax probabilities (float32) for prepared inputs.

    Logits with a NaN or inf are a :class:`RunFailure` (the argmax of such a row means nothing, and an accuracy
    computed from it must never be reported or stored)."""
    preds, probs = [], []
    for logits in forward_batches(model, inputs, key_padding_mask, batch_size=batch_size, device=device, amp=amp,
                                  forward=forward):
        logits = logits.float()
        finite = torch.isfinite(logits).all(dim=1)
        if not bool(finite.all()):
            raise RunFailure(f"the model's outputs (logits) are not finite (NaN or inf) for {int((~finite).sum())} "
                             f"of {len(logits)} examples in a batch; its weights or inputs are broken, so no "
                             "accuracy is reported or stored")
        preds.append(logits.argmax(dim=1).cpu())
        if return_probs:
            probs.append(torch.softmax(logits, dim=1).cpu())
    p = torch.cat(preds).numpy().astype(np.int64) if preds else np.zeros(0, dtype=np.int64)
    if not return_probs:
        return p, None
    return p, (torch.cat(probs).numpy() if probs else np.zeros((0, 0), dtype=np.float32))


def predict_raw(model: torch.nn.Module, raw: Any, preprocess: dict[str, Any], *, batch_size: int = 256,
                device: str | torch.device = "auto", amp: str = "auto", chunk: int | None = None,
                return_probs: bool = False, forward: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Like :func:`predict` on raw uint8 images or texts, preparing ``chunk`` examples at a time."""
    n = len(raw)
    chunk = chunk or max(batch_size, 4096)
    preds, probs = [], []
    for start in range(0, n, chunk):
        part = raw[start:start + chunk]
        x, mask = prepare(part, preprocess)
        p, q = predict(model, x, mask, batch_size=batch_size, device=device, amp=amp, return_probs=return_probs,
                       forward=forward)
        preds.append(p)
        if q is not None:
            probs.append(q)
    p = np.concatenate(preds) if preds else np.zeros(0, dtype=np.int64)
    return p, (np.concatenate(probs) if return_probs and probs else None)
