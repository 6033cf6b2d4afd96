"""The four stages of ``benchmarks/device_check.py`` (run in its child processes; see that script's docstring).

Each ``stage_<name>(rec, ctx)`` records figures through ``rec`` (``device_check.Recorder``: a table row per
figure with its threshold and pass/fail, raw data, notes), one check at a time, so that a stage killed at its
time limit keeps what it measured. The measurements reuse the benchmark scripts beside this file
(``attention_speed``, ``vs_timm``, ``corruption_speed``) and the suite's own entry points.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
SIX_MODELS = ("vit", "dvit", "dgvit", "transformer", "dt", "dgt")
VISION = ("vit", "dvit", "dgvit")
TEXT = ("transformer", "dt", "dgt")
# the bound tests/corruptions_lib/test_corruptions_api.py::test_cuda_matches_cpu holds every corruption to
CORRUPT_MAX_DIFF, CORRUPT_MAX_FRAC = 1, 1e-3
FP32_REL, BF16_REL = 1e-4, 2e-2
TINY = {"dim": 32, "depth": 1, "heads": 2}        # the quick form's model width (code paths, not figures)
BACKEND_OPS = (("cudnn_attention", "cudnn"), ("flash_attention", "flash"), ("efficient_attention", "mem-efficient"),
               ("attention_math", "math"))


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")]
                                                                        if p])}


# =============================================================================================== 1. correctness
def stage_correctness(rec, ctx) -> None:
    rec.attempt("keyed random draws", lambda: check_rng(rec, ctx))
    rec.attempt("logits", lambda: check_logits(rec, ctx))
    rec.attempt("train + resume", lambda: check_resume(rec, ctx))
    rec.attempt("SDPA backends", lambda: check_sdpa(rec, ctx))
    rec.attempt("corruptions", lambda: check_corruptions(rec, ctx))     # last: a cold numba cache compiles first


def check_rng(rec, ctx) -> None:
    """corruptions/rng.py promises the same draws on CPU and CUDA: asserted bit for bit."""
    from corruptions.rng import KeyedRandom
    idx = np.arange(0, 4096 if not ctx.quick else 64, 7)
    a = KeyedRandom(2, "gaussian_noise", 3, idx, device=ctx.device).uniform(513, stream=1).cpu()
    b = KeyedRandom(2, "gaussian_noise", 3, idx, device="cpu").uniform(513, stream=1)
    same = bool(torch.equal(a, b))
    rec.row("keyed random draws, device vs CPU", f"{a.numel():,} float64 draws, bit-identical: {same}", same,
            "bit-identical (corruptions/rng.py)")


def corruption_inputs(size: int, n: int, data: Path | None) -> tuple[np.ndarray, str]:
    """n uint8 images of size px: the exact CIFAR-10 test images (resized for 64/224) or random bytes."""
    npz = data / "cifar10" / "cifar10-test-exact-first1017.npz" if data else None
    if npz is None or not npz.is_file():
        return np.random.default_rng(size).integers(0, 256, (n, size, size, 3), dtype=np.uint8), "random bytes"
    x = np.load(npz)["x"][:n]
    if size != 32:
        from PIL import Image
        x = np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.BICUBIC)) for im in x])
    return np.ascontiguousarray(x), "CIFAR-10 test images" + (f" resized to {size} px" if size != 32 else "")


def load_frost(data: Path | None):
    from corruptions.frost import FROST_FILES, load_frost_textures
    d = data / "corruptions" / "frost" if data else None
    if d is not None and all((d / f).is_file() for f in FROST_FILES):
        return load_frost_textures(d)
    return load_frost_textures()


def check_corruptions(rec, ctx) -> None:
    """Every corruption on the device (its torch path) vs the CPU kernels, one row per corruption over 32 / 64 /
    224 px as soon as it is done (the first CPU calls also compile the kernels when numba's cache is cold)."""
    import corruptions as C
    frost = load_frost(ctx.data)
    plan = ({32: 2, 64: 1, 224: 1} if ctx.quick else {32: 64, 64: 16, 224: 4})
    sevs = (3,) if ctx.quick else (1, 3, 5)
    if not ctx.cuda:
        rec.note("corruptions on the CPU: both sides run the CPU kernels (a code-path check, not a device "
                 "comparison; tests/corruptions_lib compares the kernels with the torch path on CPU tensors)")
    inputs = {}
    for size, n in plan.items():
        x, source = corruption_inputs(size, n, ctx.data)
        inputs[size] = (x, torch.from_numpy(x).to(ctx.device))
        rec.put(f"corruption_inputs_{size}", f"{n} x {size} px, {source}, severities {list(sevs)}, frost "
                                             f"{frost.source}")
    stats: dict[str, dict[str, Any]] = {}
    for name in C.ALL:
        st = stats[name] = {"bytes": 0, "equal": 0, "max_diff": 0, "per_size": {}}
        for size, (x, xd) in inputs.items():
            for s in sevs:
                cpu = C.corrupt(x, name, s, seed=2, frost=frost)
                dev = C.corrupt(xd, name, s, seed=2, frost=frost).cpu().numpy()
                d = np.abs(dev.astype(np.int16) - cpu.astype(np.int16))
                st["bytes"] += d.size
                st["equal"] += int((d == 0).sum())
                st["max_diff"] = max(st["max_diff"], int(d.max()))
                st["per_size"][str(size)] = max(st["per_size"].get(str(size), 0), int(d.max()))
        frac_diff = 1 - st["equal"] / st["bytes"]
        ok = st["max_diff"] <= CORRUPT_MAX_DIFF and frac_diff < CORRUPT_MAX_FRAC
        rec.put("corruptions", stats)
        rec.row(f"corruption {name}", f"{100 * (1 - frac_diff):.4f} % bytes equal, max|d| {st['max_diff']} "
                                      f"(32/64/224: {'/'.join(str(v) for v in st['per_size'].values())})",
                ok, f"max|d| <= {CORRUPT_MAX_DIFF}, < {100 * CORRUPT_MAX_FRAC:g} % differ")


def _small_model(name: str, quick: bool):
    from robustbench_dgsa.models import create_model
    kw: dict[str, Any] = {"num_classes": 10}
    if name in TEXT:
        kw.update(vocab_size=1000, max_len=64 if quick else 256)
    if quick:
        kw.update(dim=64, depth=2, heads=4)
    torch.manual_seed(0)
    return create_model(name, **kw).eval()


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def check_logits(rec, ctx) -> None:
    """Device fp32 (TF32 off) vs CPU fp64, and device bf16 autocast vs device fp32, for the six models."""
    from robustbench_dgsa.jobs.bench import random_batch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {}
    for name in SIX_MODELS:
        model = _small_model(name, ctx.quick)
        x, _, kw = random_batch(model.config, 2 if ctx.quick else 4, "cpu", seed=3)
        with torch.no_grad():
            ref = model.double()(x.double() if x.is_floating_point() else x, **kw)
            model = model.float().to(ctx.device)
            xd, kwd = x.to(ctx.device), {k: v.to(ctx.device) for k, v in kw.items()}
            fp32 = model(xd, **kwd)
            with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
                bf16 = model(xd, **kwd)
        e32, e16 = _rel_err(fp32.cpu(), ref), _rel_err(bf16.float().cpu(), fp32.cpu())
        out[name] = {"fp32_vs_fp64": e32, "bf16_vs_fp32": e16}
        rec.row(f"logits {name}: {ctx.device.type} fp32 vs CPU fp64", f"rel err {e32:.2e}", e32 <= FP32_REL,
                f"<= {FP32_REL:g}")
        rec.row(f"logits {name}: {ctx.device.type} bf16 vs fp32", f"rel err {e16:.2e}", e16 <= BF16_REL,
                f"<= {BF16_REL:g}")
    rec.put("logits", out)


def check_resume(rec, ctx) -> None:
    """Two epochs straight vs one epoch, stop, resume: the same weights bit for bit (the engine's resume)."""
    from safetensors.torch import load_file

    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.engine.train import train
    from robustbench_dgsa.models import get_model_config
    over = {"model.dim": 32, "model.depth": 2, "model.heads": 2, "model.head_hidden": 16, "train.epochs": 2,
            "train.batch_size": 32, "train.device": str(ctx.device), "data.max_train": 96, "data.max_test": 32}
    if ctx.quick:
        over.update({"model.dim": 16, "model.depth": 1, "data.max_train": 64, "data.max_test": 16})
    cfg = resolve_config(get_model_config("dgvit"), "synthetic-vision", "tiny", overrides=over)
    with tempfile.TemporaryDirectory() as tmp:
        full = train(cfg, 0, Path(tmp) / "full", progress=False)
        train(cfg, 0, Path(tmp) / "cut", progress=False, stop_after_epoch=1)
        resumed = train(cfg, 0, Path(tmp) / "cut", progress=False, resume=True)
        a, b = load_file(str(full.checkpoint)), load_file(str(resumed.checkpoint))
    same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = sum(math.ceil(h["n_train"] / 32) for h in full.history)
    rec.row(f"train {steps} steps (DGViT, amp {cfg.train.amp}) vs 1 epoch + resume", f"weights bit-identical: {same}",
            same, "bit-identical")


def _attention_layer(kind: str, dim: int, heads: int):
    from robustbench_dgsa.models import create_model
    torch.manual_seed(0)
    model = create_model(kind, image_size=32, patch_size=4, dim=dim, depth=1, heads=heads, num_classes=10)
    return next(m for m in model.modules() if hasattr(m, "fused") and hasattr(m, "kernel"))


def sdpa_ops(fn) -> list[str]:
    """The aten SDPA operators ``fn`` called (profiler), e.g. aten::_scaled_dot_product_flash_attention."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sorted({e.key for e in prof.key_averages() if "scaled_dot_product" in e.key or "attention_backward"
                   in e.key})


def backend_of(ops: list[str]) -> str:
    found = [label for key, label in BACKEND_OPS if any(key in op for op in ops)]
    return "+".join(dict.fromkeys(found)) or "explicit products (no SDPA call)"


def _fwd_bwd(layer, x: torch.Tensor, amp: bool):
    def run() -> None:
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
            y = layer(x)
        y.float().sum().backward()
    return run


def check_sdpa(rec, ctx) -> None:
    """Which SDPA backend each attention path used (default choice; each backend forced), and memory at 1,024
    tokens: fused below one N x N map over heads and batch, explicit above it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    # the quick form at 256 tokens: on the CPU DiffAttn / DGSA take SDPA with V in halves (flash) above 192
    n_tok, batch, heads, dim = (256, 1, 2, 32) if ctx.quick else (1024, 4, 8, 256)
    amp = ctx.cuda
    out: dict[str, Any] = {}
    for kind, label in (("vit", "MHSA"), ("dvit", "DiffAttn"), ("dgvit", "DGSA")):
        layer = _attention_layer(kind, dim, heads).to(ctx.device).train()
        x = torch.randn(batch, n_tok, dim, device=ctx.device, requires_grad=True)
        chosen = backend_of(sdpa_ops(_fwd_bwd(layer, x, amp)))
        forced = {}
        for b in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
            if not hasattr(SDPBackend, b):
                continue
            try:
                with sdpa_kernel(getattr(SDPBackend, b)):
                    forced[b.lower()] = backend_of(sdpa_ops(_fwd_bwd(layer, x, amp)))
            except RuntimeError as e:
                forced[b.lower()] = f"unavailable ({str(e).splitlines()[0][:80]})"
        out[label] = {"default": chosen, "forced": forced}
        runs = ", ".join(f"{k.rsplit('_', 1)[0]} {'no' if v.startswith('unavailable') else 'runs'}"
                         for k, v in forced.items())
        rec.row(f"SDPA backend, {label} fused path ({n_tok} tokens, {'bf16' if amp else 'fp32'})",
                f"{chosen} (each forced: {runs})", None, "reported")
        rec.put(f"sdpa_{label}", out[label])
        _check_memory(rec, ctx, layer, x, amp, label, out[label])
    rec.put("sdpa", out)


def _saved_max(run) -> int:
    """Elements of the largest tensor autograd saves during ``run`` (an N x N map shows as B*H*N*N)."""
    big = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        big[0] = max(big[0], t.numel())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return big[0]


def _check_memory(rec, ctx, layer, x: torch.Tensor, amp: bool, label: str, out: dict) -> None:
    """Forward + backward of one attention layer on the fused and the explicit path: the largest tensor autograd
    saves (an N x N map over heads and batch is B*H*N*N elements) and, on CUDA, the allocator peak above what was
    allocated before, against one such map in fp32 (autocast keeps the softmax in fp32)."""
    from robustbench_dgsa.models.attention import set_attention_impl
    b, n = x.shape[0], x.shape[1]
    map_elems = b * layer.heads * n * n
    map_bytes = map_elems * 4
    for impl in ("fused", "explicit"):
        set_attention_impl(layer, impl)
        run = _fwd_bwd(layer, x, amp)
        saved = _saved_max(run)
        peak = None
        if ctx.cuda:
            x.grad = None
            layer.zero_grad(set_to_none=True)
            _sync(ctx.device)
            base = torch.cuda.memory_allocated(ctx.device)
            torch.cuda.reset_peak_memory_stats(ctx.device)
            run()
            _sync(ctx.device)
            peak = torch.cuda.max_memory_allocated(ctx.device) - base
        holds = saved >= map_elems or (peak is not None and peak >= map_bytes)
        ok = (not holds) if impl == "fused" else holds
        fig = f"largest saved tensor {saved:,} el."
        if peak is not None:
            fig += f", peak {peak / 2 ** 20:.1f} MiB = {peak / map_bytes:.2f} x one fp32 map"
        rec.row(f"{label} {impl} at {n} tokens: N x N map", fig, ok,
                f"{'<' if impl == 'fused' else '>='} one map: {map_elems:,} el. / {map_bytes / 2 ** 20:.1f} MiB fp32")
        out[f"memory_{impl}"] = {"largest_saved_elements": saved, "peak_bytes": peak, "map_elements": map_elems,
                                 "map_bytes_fp32": map_bytes}
    set_attention_impl(layer, "fused")


# ==================================================================================================== 2. speed
def stage_speed(rec, ctx) -> None:
    rec.attempt("Table 9 meter", lambda: speed_table9(rec, ctx))
    rec.attempt("vs timm", lambda: speed_vs_timm(rec, ctx))
    rec.attempt("text models", lambda: speed_text(rec, ctx))
    rec.attempt("corruptions 32 px", lambda: speed_corruptions(rec, ctx, 32))
    rec.attempt("corruptions 224 px", lambda: speed_corruptions(rec, ctx, 224))


def _geometries(ctx) -> dict[str, int]:
    """Geometry -> batch: the paper's (128 at 32/4, 64 at 224/16); tiny in the quick form."""
    import attention_speed
    return dict(attention_speed.QUICK_BATCH if ctx.quick else {g: v[2] for g, v in attention_speed.GEOMETRIES.items()})


def speed_table9(rec, ctx) -> None:
    """attention_speed.bench_one: training samples/s and peak memory, fused path, bf16 on CUDA."""
    import attention_speed
    steps, warmup = (1, 1) if ctx.quick else (10, 3)
    rows = []
    for geom, batch in _geometries(ctx).items():
        if ctx.quick and geom == "224/16":
            batch = 2
        for name in VISION:
            r = attention_speed.bench_one(name, geom, batch, "fused", ctx.device, steps=steps, warmup=warmup,
                                          amp=True, compile_model=False, model_kw=TINY if ctx.quick else None)
            rows.append(r)
            rec.row(f"{name} {geom} b{batch} train ({r['amp']})", f"{r['samples_per_s']:.1f} img/s, peak "
                                                                f"{r['peak_mem_mb']:.1f} MB ({r['peak_mem_method']})")
            rec.put("table9_meter", rows)
    big = {r["model"]: r for r in rows if r["geometry"] == "224/16"}
    if "vit" in big and "dgvit" in big:
        ratio = big["dgvit"]["samples_per_s"] / big["vit"]["samples_per_s"]
        pub = paper_table9()
        it_s, img_s = pub["dgvit"]["throughput"] / pub["vit"]["throughput"], (pub["dgvit"]["throughput_img"]
                                                                              / pub["vit"]["throughput_img"])
        rec.row("DGViT / ViT training throughput, 224/16 (Table 9 geometry: D=256, 8 layers, 8 heads, FFN x4, "
                f"batch {big['vit']['batch']})", f"{ratio:.2f} (paper, A10G: {pub['dgvit']['throughput']} / "
                f"{pub['vit']['throughput']} it/s = {it_s:.2f}; its img/s give {img_s:.2f})", None, "reported")
        rec.put("dgvit_vit_ratio_224", {"ours": ratio, "paper_it_s": it_s, "paper_img_s": img_s,
                                        "device": ctx.device.type})


def paper_table9() -> dict[str, dict[str, float]]:
    """The paper's Table 9 CIFAR-10 throughput of ViT and DGViT (it/s and img/s) from report/published.csv."""
    import csv
    out: dict[str, dict[str, float]] = {"vit": {}, "dgvit": {}}
    with open(REPO / "robustbench_dgsa" / "report" / "published.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if (row["table"], row["dataset"], row["model"]) in (("9", "cifar10", "vit"), ("9", "cifar10", "dgvit")) \
                    and row["metric"] in ("throughput", "throughput_img"):
                out[row["model"]][row["metric"]] = float(row["mean"])
    return out


def speed_vs_timm(rec, ctx) -> None:
    """vs_timm.measure: train and inference img/s of timm's ViT (when installed) and ours, interleaved rounds."""
    import vs_timm
    res: dict[str, Any] = {}
    for geom, batch in _geometries(ctx).items():
        image, patch = (int(v) for v in geom.split("/"))
        if ctx.quick and geom == "224/16":
            batch = 2
        models = vs_timm.build_models(0.05, image, patch, **(TINY if ctx.quick else {}))
        if vs_timm.TIMM not in models:
            rec.note(f"timm is not installed: {geom} without timm's ViT")
        args = SimpleNamespace(batch=batch, no_amp=False, compile=False, image=image, rounds=1 if ctx.quick else 2,
                               warmup=1 if ctx.quick else 3, steps=1 if ctx.quick else 8)
        for mode in ("train", "infer"):
            best = vs_timm.measure(models, mode, args, ctx.device)
            res[f"{geom} {mode}"] = {k: v["wall"] for k, v in best.items()}
            rec.row(f"{mode} img/s {geom} b{batch} ({'bf16' if ctx.cuda else 'fp32'})",
                    ", ".join(f"{k} {v['wall']:.0f}" for k, v in best.items()))
            rec.put("vs_timm", res)
        if ctx.cuda and vs_timm.TIMM in models:
            rec.put(f"timm_peak_mb_{geom}", _peak_mb(models[vs_timm.TIMM], batch, image, ctx.device))
        del models


def _peak_mb(model, batch: int, image: int, dev: torch.device) -> float:
    """CUDA allocator peak of one bf16 training step (as the Table 9 meter counts: weights included)."""
    import vs_timm
    model.to(dev)
    run = vs_timm.make_runner(model, "train", dev, batch, True, False, image)
    _sync(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    run()
    _sync(dev)
    return torch.cuda.max_memory_allocated(dev) / 2 ** 20


def speed_text(rec, ctx) -> None:
    """The Table 9 meter on the text models at 256 tokens (batch 32, the paper's text batch)."""
    from robustbench_dgsa.jobs.bench import measure
    from robustbench_dgsa.models import create_model
    out = {}
    for name in TEXT:
        torch.manual_seed(0)
        kw = dict(vocab_size=1000, max_len=64, dim=64, depth=2, heads=4) if ctx.quick else {"max_len": 256}
        m = measure(create_model(name, num_classes=2, **kw), batch_size=4 if ctx.quick else 32,
                    steps=1 if ctx.quick else 10, warmup=1 if ctx.quick else 3, device=ctx.device, amp=True,
                    latency_runs=1 if ctx.quick else 5)
        out[name] = {"train_samples_per_s": m.train_throughput, "peak_memory_mb": m.peak_memory_mb,
                     "tokens": kw.get("max_len", 256), "infer_fp32_samples_per_s": m.batch_size / m.latency_ms * 1e3}
        rec.row(f"{name} {out[name]['tokens']} tokens b{m.batch_size}", f"train {m.train_throughput:.1f} seq/s "
                f"({'bf16' if ctx.cuda else 'fp32'}), peak {m.peak_memory_mb:.1f} MB; inference (fp32 forward) "
                f"{out[name]['infer_fp32_samples_per_s']:.0f} seq/s")
        rec.put("text", out)


def speed_corruptions(rec, ctx, size: int) -> None:
    """corruption_speed.run on the device and on the CPU kernels: images/s per corruption (CIFAR-10-C at 32 px,
    all 19 x 5; ImageNet-C at 224 px, its 15 at severity 3), one corruption at a time (a stage cut off at its
    limit keeps the corruptions it finished)."""
    import corruption_speed
    import corruptions as C
    frost = load_frost(ctx.data)
    names = C.resolve_corruptions("all" if size == 32 else "benchmark")
    sevs = [1, 2, 3, 4, 5] if size == 32 else [3]
    if ctx.quick:
        names, sevs = names[:3], [3]
    n_dev, n_cpu = ((16, 8) if ctx.quick else (10_000, 2_000)) if size == 32 else ((2, 1) if ctx.quick else (256, 24))
    res: dict[str, dict[str, Any]] = {}
    for dev, n in (("cpu", n_cpu),) + ((("cuda", n_dev),) if ctx.cuda else ()):
        x = _tile32(n, ctx.data) if size == 32 else corruption_inputs(size, n, ctx.data)[0]
        res[dev] = {"n": n, "severities": sevs, "per_corruption": {}, "setup_s": 0.0, "seconds": 0.0}
        for name in names:
            r = corruption_speed.run(dev, x, [name], sevs, frost)
            res[dev]["per_corruption"][name] = r["rows"][0]["images_per_s"]
            res[dev]["setup_s"] += r["setup_s"]
            res[dev]["seconds"] += r["rows"][0]["seconds"]
            rec.put(f"corruptions_{size}", res)
    label = "CIFAR-10-C (19 x 5)" if size == 32 else "ImageNet-C (15 at severity 3)"
    for dev, r in res.items():
        per = r["per_corruption"]
        slow = min(per, key=per.get)
        extra = ""
        if size == 32 and not ctx.quick:
            r["regenerate_10k_s"] = r["seconds"] * 10_000 / r["n"]
            extra = f"; all 19 x 5 x 10,000 in {r['regenerate_10k_s']:.1f} s (+ set-up {r['setup_s']:.1f} s)"
        rec.row(f"{label} on {dev}, {r['n']} images", f"{_hmean(per):.0f} img/s per corruption (harmonic mean), "
                                                      f"slowest {slow} {per[slow]:.0f}{extra}")
    rec.put(f"corruptions_{size}", res)


def _hmean(per: dict[str, float]) -> float:
    return len(per) / sum(1 / max(v, 1e-9) for v in per.values())


def _tile32(n: int, data: Path | None) -> np.ndarray:
    x, _ = corruption_inputs(32, 1017, data)
    return np.ascontiguousarray(np.tile(x, (-(-n // len(x)), 1, 1, 1))[:n])


# ================================================================================================ 3. scale-out
def _train_cmd(ctx, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "robustbench_dgsa", "train", "--model", "vit", "--dataset", "synthetic-vision",
            "--preset", "tiny", "--epochs", "1", "--device", "cuda" if ctx.cuda else "cpu", "--out", str(out),
            "--set", "data.max_train=256", "--set", "data.max_test=64", "-q", "--json", *extra]


def _torchrun(nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**_child_env(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    sys.stdout.write(p.stdout[-3000:] + p.stderr[-3000:])
    return p


def stage_scaleout(rec, ctx) -> None:
    gpus = torch.cuda.device_count() if ctx.cuda else 0
    backend = "nccl" if ctx.cuda else "gloo"
    rec.attempt(f"{backend} world size 1", lambda: ddp_backend(rec, ctx, 1))
    rec.attempt("torchrun train, 1 process", lambda: ddp_train(rec, ctx, 1))
    if gpus > 1:
        rec.attempt(f"{backend} world size {gpus}", lambda: ddp_backend(rec, ctx, gpus))
        rec.attempt(f"torchrun train, {gpus} processes", lambda: ddp_train(rec, ctx, gpus))
    else:
        rec.note(f"{'one GPU' if ctx.cuda else 'the CPU form'}: no multi-process run here (equality across "
                 "ranks is tested with gloo on the CPU: tests/engine/test_ddp.py)")


def ddp_train(rec, ctx, nproc: int) -> None:
    """``torchrun --standalone --nproc_per_node N -m robustbench_dgsa train`` a few steps (8 of batch 32)."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        p = _run(_torchrun(nproc) + ["-m"] + _train_cmd(ctx, Path(tmp) / "run")[2:], 120)
        secs = time.monotonic() - t0
        ok = p.returncode == 0
        acc = None
        if ok:
            acc = json.loads(p.stdout)["runs"][0]["final"]["test_accuracy"]
            prov = next((Path(tmp) / "run" / "store" / "runs").glob("*.json"), None)
            prov = json.loads(prov.read_text()) if prov else {}
            group = {k: prov.get(k) for k in ("world_size", "backend", "hosts", "device", "precision")}
            rec.put(f"torchrun_train_{nproc}", {"seconds": secs, "group": group})
    note = "world size 1: the suite joins no process group" if nproc == 1 else f"{nproc} ranks"
    rec.row(f"torchrun --nproc_per_node {nproc} dgsa-bench train ({note})",
            f"exit {p.returncode}, {secs:.1f} s, test acc {acc}" if ok else f"exit {p.returncode}: "
            f"{(p.stderr.strip().splitlines() or [''])[-1][:200]}", ok, "runs")


def ddp_backend(rec, ctx, nproc: int) -> None:
    """This script's --ddp-worker under torchrun: the backend joined, the suite's DDP wrapper, a few steps. The
    quick form runs the worker in this process (rank 0 of 1, env:// on a free local port): one torch start less."""
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "ddp.json"
        script = str(REPO / "benchmarks" / "device_check.py")
        t0 = time.monotonic()
        if ctx.quick and nproc == 1:
            rc, how = _worker_in_process(res, ctx), "in-process"
        else:
            rc = _run(_torchrun(nproc) + [script, "--device", "cuda" if ctx.cuda else "cpu", "--ddp-worker",
                                          str(res)], 120).returncode
            how = "torchrun"
        secs = time.monotonic() - t0
        doc = json.loads(res.read_text()) if res.is_file() else {}
    ok = rc == 0 and doc.get("all_sum_ok") and doc.get("params_equal_across_ranks")
    rec.put(f"ddp_backend_{nproc}", {**doc, "seconds": secs, "launcher": how})
    rec.row(f"{doc.get('backend', '?')} process group ({how}), world size {nproc}, DDP {doc.get('steps', 0)} steps",
            f"exit {rc}, {secs:.1f} s, all-reduce ok {doc.get('all_sum_ok')}, weights equal across ranks "
            f"{doc.get('params_equal_across_ranks')}, loss {doc.get('losses')}", bool(ok), "runs, ranks agree")


def ddp_worker(out: Path, device: str) -> int:
    """One rank (under torchrun): join the group (nccl on CUDA, gloo on the CPU) even at world size 1, train a
    small ViT wrapped by the suite's ``distributed.wrap`` for a few steps on rank-specific data, check the ranks."""
    import torch.distributed as dist

    from robustbench_dgsa.engine import distributed as D
    from robustbench_dgsa.models import create_model
    rank, size, local = D.env_world()
    cuda = device.startswith("cuda")
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=size)
    world = D.World(rank, size, local, backend)
    torch.manual_seed(0)
    model = create_model("vit", dim=32, depth=2, heads=2, num_classes=10).to(dev)
    ddp = D.wrap(model, world, dev) if size > 1 else _force_ddp(model, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(5):
        x, y = torch.randn(16, 3, 32, 32, generator=g).to(dev), torch.randint(0, 10, (16,), generator=g).to(dev)
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(round(float(loss.detach()), 4))
    s = D.all_sum(torch.ones(1, device=dev), world) if size > 1 else _all_reduce_one(dev)
    flat = torch.cat([p.detach().reshape(-1).float() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(size)]
    dist.all_gather(gathered, flat)
    equal = all(torch.equal(gathered[0], t) for t in gathered)
    if rank == 0:
        out.write_text(json.dumps({"backend": dist.get_backend(), "world_size": size, "steps": len(losses),
                                   "losses": losses, "all_sum_ok": float(s) == size,
                                   "params_equal_across_ranks": equal}))
    dist.destroy_process_group()
    return 0


def _worker_in_process(res: Path, ctx) -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    saved = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        return ddp_worker(res, str(ctx.device))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _force_ddp(model, dev):
    """At world size 1 the suite's wrap returns the model itself; DDP around it still runs the backend's hooks."""
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)


def _all_reduce_one(dev) -> torch.Tensor:
    import torch.distributed as dist
    t = torch.ones(1, device=dev)
    dist.all_reduce(t)
    return t


# ================================================================================================ 4. a real run
def stage_realrun(rec, ctx) -> None:
    rec.attempt("zoo epoch", lambda: zoo_epoch(rec, ctx))
    rec.attempt("projection", lambda: project_paper(rec, ctx))


def zoo_epoch(rec, ctx) -> None:
    """``dgsa-bench train --preset zoo --epochs 1`` of ViT, DViT and DGViT on CIFAR-10 (or synthetic data)."""
    real = ctx.data is not None and (ctx.data / "cifar10" / "cifar10-jpeg75.tar.xz").is_file() and not ctx.quick
    dataset = "cifar10" if real else "synthetic-vision"
    if not real:
        rec.note("real run on synthetic data (" + ("quick form" if ctx.quick else "no CIFAR-10 copy found: run "
                 "`python benchmarks/device_check.py --prepare` and carry .devdata/") + "): accuracy means nothing")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "robustbench_dgsa", "train", "--model", "vit,dvit,dgvit", "--dataset", dataset,
               "--preset", "zoo", "--epochs", "1", "--device", str(ctx.device), "--out", str(Path(tmp) / "zoo"),
               "-q", "--json"]
        cmd += ["--data-root", str(ctx.data)] if real else []
        cmd += ["--set", "data.max_train=128", "--set", "data.max_test=32"] if ctx.quick else []
        os.environ["DGSA_CACHE"] = str(Path(tmp) / "cache")
        t0 = time.monotonic()
        p = _run(cmd, 600)
        wall = time.monotonic() - t0
    if p.returncode != 0:
        rec.row(f"zoo preset, 1 epoch, {dataset}", f"exit {p.returncode}: "
                f"{(p.stderr.strip().splitlines() or [''])[-1][:200]}", False, "runs")
        return
    runs = json.loads(p.stdout)["runs"]
    out = {}
    for r in runs:
        h = r["history"][0]
        out[r["model"]] = {"epoch_s": h["seconds"], "n_train": h["n_train"], "img_per_s": h["n_train"] / h["seconds"],
                           "test_accuracy": r["final"]["test_accuracy"], "n_test": r["final"]["n_test"]}
        rec.row(f"zoo {r['model']} 1 epoch on {dataset} ({h['n_train']:,} images)",
                f"{h['seconds']:.1f} s ({h['n_train'] / h['seconds']:.0f} img/s), test acc "
                f"{r['final']['test_accuracy']:.4f} on {r['final']['n_test']:,}", True, "runs")
    rec.put("zoo", {"dataset": dataset, "wall_s": wall, "runs": out})
    rec.row("zoo preset, 3 models x 1 epoch, whole command", f"{wall:.1f} s (data loading and evaluation included)")


def project_paper(rec, ctx) -> None:
    """``reproduce --preset paper`` (5 seeds x 6 models: CIFAR-10 and IMDB, the preset's epochs and validation
    fractions) from the speed stage's throughput, per model and seed: epochs x training examples / training img/s
    + (epochs x validation examples + test examples x conditions) / inference img/s; plus regenerating the
    CIFAR-10-C-style test set once. Rollouts, Table 9 timing and the report are left out (minutes)."""
    speed = ctx.earlier("speed")
    rates = _projection_rates(speed)
    if rates is None:
        rec.row("projected reproduce --preset paper", "not projected: the speed stage has no figures in this run's "
                "JSON (run it first, or --only speed,realrun)", None)
        return
    import corruptions as C
    from corruptions.text import resolve_text_noise

    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.models import get_model_config
    parts = {}
    for name in SIX_MODELS:
        vision = name in VISION
        ds, n_train, n_test = ("cifar10", 50_000, 10_000) if vision else ("imdb", 25_000, 25_000)
        cfg = resolve_config(get_model_config(name), ds, "paper")
        fit = n_train * (1 - cfg.data.val_fraction)
        conditions = 1 + 5 * (len(C.resolve_corruptions("all")) if vision else len(resolve_text_noise("all")))
        train_rate, infer_rate = rates[name]
        evaluated = cfg.train.epochs * (n_train - fit) + n_test * conditions
        parts[name] = 5 * (cfg.train.epochs * fit / train_rate + evaluated / infer_rate)
    corrupt_s = speed.get("corruptions_32", {}).get("cuda" if ctx.cuda else "cpu", {}).get("regenerate_10k_s", 0.0)
    total = sum(parts.values()) + corrupt_s
    rec.put("projection_paper", {"seconds_per_model_5_seeds": parts, "corrupt_s": corrupt_s, "total_s": total,
                                 "basis": "speed stage: Table 9 meter (32/4, batch 128, bf16 on CUDA) and vs_timm "
                                          "inference for the vision models; the text models' meter at 256 tokens "
                                          "(batch 32; inference = fp32 forward)", "device": ctx.device.type})
    what = "tiny models of the quick form: not a projection" if ctx.quick else "one device, training + evaluation"
    rec.row(f"projected reproduce --preset paper (5 seeds x 6 models; {what})",
            f"{total / 3600:.1f} h (" + ", ".join(f"{k} {v / 3600:.1f} h" for k, v in parts.items()) + ")", None,
            "estimate")


def _projection_rates(speed: dict[str, Any]) -> dict[str, tuple[float, float]] | None:
    """model -> (training, inference) examples per second from the speed stage's data; None when absent."""
    meter = {r["model"]: r["samples_per_s"] for r in speed.get("table9_meter", []) if r["geometry"] == "32/4"}
    infer = speed.get("vs_timm", {}).get("32/4 infer", {})
    text = speed.get("text", {})
    labels = {"vit": "our ViT", "dvit": "DViT", "dgvit": "DGViT"}
    if not all(m in meter and labels[m] in infer for m in VISION) or not all(m in text for m in TEXT):
        return None
    rates = {m: (meter[m], infer[labels[m]]) for m in VISION}
    rates.update({m: (text[m]["train_samples_per_s"], text[m]["infer_fp32_samples_per_s"]) for m in TEXT})
    return rates
