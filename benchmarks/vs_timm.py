#!/usr/bin/env python
"""Our ViT / DViT / DGViT side by side with timm's ``VisionTransformer`` at the same configuration.

Configuration (vision, docs/METHODS.md, Models): 32×32 images, patch 4 (65 tokens with CLS), D=256, 8 layers, 8 heads,
MLP ×4, 10 classes, batch 64; on CPU one intra-op thread unless ``--threads`` says otherwise. Precision: ``--amp``
(auto, bf16, off), the suite's own resolution (``engine.predict.resolve_precision``: auto = bf16 on CUDA and on CPUs
with native bf16, fp32 elsewhere), the same for every model, timm's included: both sides always run in one precision,
printed in the header.
Training = forward, cross-entropy, backward, AdamW step (same optimiser settings for every model); inference = forward
under ``torch.inference_mode`` in eval mode. The models are timed in interleaved rounds (every round times each model
once; the order rotates from round to round) and each model's best round is reported, which makes the ratios robust on
a machine shared with other jobs. Printed: img/s per model and the ratios ours/timm (our ViT vs timm) and DGViT / our
ViT, both as the ratio of best rounds and as the median of the per-round ratios (each round's two figures were
measured minutes apart at most, so drifts in machine speed cancel); the targets (our ViT >= 1.0 x timm, DGViT >= 0.95
x our ViT) are judged on the median per-round ratio. On CPU two clocks: wall time, and this process's CPU time (img
per CPU second), which does not count time spent waiting for a core that another job holds — on a shared machine the
CPU-time ratios are the robust ones (``--threads 1``, the default, keeps all work on the timed thread).

What is matched between timm's ViT and ours, so that neither side is favoured:

* architecture: Conv2d patch embedding with bias; a learnable class token prepended and a learned positional
  embedding over all 65 tokens (timm ``class_token=True``, ``no_embed_class=False``, ``pos_embed="learn"``);
  pre-norm blocks with ``nn.LayerNorm`` (eps 1e-5, timm's default would be 1e-6 — same cost), a fused QKV Linear
  with bias (``qkv_bias=True``), output projection with bias, no qk-norm, no layer scale, no drop path, MLP
  Linear(D→4D)→GELU (exact)→Linear(4D→D); no final norm (``final_norm=False``: our models have
  none); the class token read out (``global_pool="token"``) into the same classifier head as ours,
  Linear(D→128)→GELU→dropout→Linear(128→C) (timm's head is replaced by this). The parameter counts are equal
  (6,381,706 at C=10) and the script checks it.
* dropout (``--dropout``, default 0.05 as our models): at the same places with the same rate — after the
  positional embedding (timm ``pos_drop_rate``), after the MLP's GELU (timm's ``mlp.drop1``; timm's second MLP
  dropout and its attention-projection dropout are off, ``proj_drop_rate=0``, because ours has none there), and
  in the head; no attention dropout (``attn_drop_rate=0``).
* attention: timm uses ``F.scaled_dot_product_attention`` (its fused path); ours picks its own kernel per device
  and sequence length (see ``robustbench_dgsa.models.attention``) — that choice is part of what is compared.
* ``--compile`` applies ``torch.compile`` to every model alike.

    python benchmarks/vs_timm.py                           # CPU, 1 thread, batch 64, 3 rounds
    python benchmarks/vs_timm.py --device cuda --steps 20  # CUDA, bf16 autocast
    python benchmarks/vs_timm.py --amp off                 # both sides in fp32 (--amp bf16: both in bf16)
    python benchmarks/vs_timm.py --mode train --rounds 5 --threads 2
    python benchmarks/vs_timm.py --mode train --rounds 1 --profile 15   # + top operators per model

timm is optional: without it the script says so and measures our three models only.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from robustbench_dgsa.models import create_model  # noqa: E402
from robustbench_dgsa.models.flops import count_params  # noqa: E402

IMAGE, PATCH, DIM, DEPTH, HEADS, MLP, CLASSES, HEAD_HIDDEN = 32, 4, 256, 8, 8, 4.0, 10, 128
TIMM = "timm ViT"
OURS = {"our ViT": "vit", "DViT": "dvit", "DGViT": "dgvit"}


def timm_vit(dropout: float, image: int = IMAGE, patch: int = PATCH, dim: int = DIM, depth: int = DEPTH,
             heads: int = HEADS) -> nn.Module | None:
    """timm's VisionTransformer configured like our ViT (see the module docstring), or None without timm."""
    try:
        from timm.models.vision_transformer import VisionTransformer
    except ImportError:
        return None
    model = VisionTransformer(
        img_size=image, patch_size=patch, in_chans=3, num_classes=CLASSES, global_pool="token",
        embed_dim=dim, depth=depth, num_heads=heads, mlp_ratio=MLP, qkv_bias=True, qk_norm=False,
        proj_bias=True, init_values=None, class_token=True, pos_embed="learn", no_embed_class=False,
        pre_norm=False, final_norm=False, fc_norm=False, drop_rate=0.0, pos_drop_rate=dropout,
        patch_drop_rate=0.0, proj_drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.0,
        norm_layer=nn.LayerNorm, act_layer=nn.GELU)
    for blk in model.blocks:
        blk.mlp.drop1 = nn.Dropout(dropout)          # our FFN: dropout after GELU only
    model.head = nn.Sequential(nn.Linear(dim, HEAD_HIDDEN), nn.GELU(), nn.Dropout(dropout),
                               nn.Linear(HEAD_HIDDEN, CLASSES))
    return model


def build_models(dropout: float, image: int = IMAGE, patch: int = PATCH, dim: int = DIM, depth: int = DEPTH,
                 heads: int = HEADS) -> dict[str, nn.Module]:
    """timm's ViT (when installed) and our three models at ``image`` px / patch ``patch`` (default 32 / 4) and
    the given width (default the paper's)."""
    torch.manual_seed(0)
    models: dict[str, nn.Module] = {}
    tm = timm_vit(dropout, image, patch, dim, depth, heads)
    if tm is None:
        print("# timm is not installed: measuring our models only (pip install timm for the comparison)")
    else:
        models[TIMM] = tm
    for label, name in OURS.items():
        models[label] = create_model(name, image_size=image, patch_size=patch, num_classes=CLASSES,
                                     dim=dim, depth=depth, heads=heads, ffn_ratio=MLP, dropout=dropout)
    if tm is not None and count_params(tm) != count_params(models["our ViT"]):
        raise SystemExit(f"configuration mismatch: timm ViT has {count_params(tm):,} parameters, "
                         f"our ViT {count_params(models['our ViT']):,}")
    return models


def make_runner(model: nn.Module, mode: str, device: torch.device, batch: int, amp: bool,
                compile_model: bool, image: int = IMAGE) -> Callable[[], None]:
    """A closure doing one training step or one inference forward on fixed random ``image`` px data."""
    model.to(device).train(mode == "train")
    fwd = torch.compile(model) if compile_model else model
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, image, image, generator=g).to(device)
    y = torch.randint(0, CLASSES, (batch,), generator=g).to(device)
    use_amp = amp            # bf16 autocast on any device: the caller resolved the one precision of all models
    if mode == "infer":
        def infer() -> None:
            with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                fwd(x)
        return infer
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)

    def train() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return train


def time_steps(run: Callable[[], None], steps: int, device: torch.device) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for ``steps`` runs. On a CPU shared with other jobs the
    process's CPU time is the robust measure (waiting for a core is not counted); on CUDA only wall time counts."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, time.process_time() - c0


def measure(models: dict[str, nn.Module], mode: str, args: argparse.Namespace,
            device: torch.device) -> dict[str, dict[str, float]]:
    """Best-of-rounds img/s per model (wall and, on CPU, thread CPU time); the models are interleaved within
    every round and the order is rotated from round to round (the allocator and caches favour some positions).
    ``args.image`` (default 32) is the image size the models were built for; ``args.bf16`` (or, where a caller
    sets only ``no_amp``, its negation) says whether both sides run under bf16 autocast."""
    image = getattr(args, "image", IMAGE)
    bf16 = getattr(args, "bf16", not getattr(args, "no_amp", False))
    runners = {k: make_runner(m, mode, device, args.batch, bf16, args.compile, image) for k, m in models.items()}
    for run in runners.values():
        for _ in range(args.warmup):
            run()
    names = list(runners)
    best = {k: {"wall": 0.0, "cpu": 0.0, "rounds": []} for k in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        line = []
        for k in order:
            wall, cpu = time_steps(runners[k], args.steps, device)
            best[k]["wall"] = max(best[k]["wall"], args.batch * args.steps / wall)
            best[k]["cpu"] = max(best[k]["cpu"], args.batch * args.steps / max(cpu, 1e-9))
            best[k]["rounds"].append(args.batch * args.steps / max(cpu if device.type == "cpu" else wall, 1e-9))
            line.append(f"{k} {args.batch * args.steps / wall:.1f}")
        print(f"#   {mode} round {r + 1}/{args.rounds} (wall img/s): " + ", ".join(line), flush=True)
    return best


def report(mode: str, best: dict[str, dict[str, float]], device: torch.device) -> None:
    clocks = ["wall", "cpu"] if device.type == "cpu" else ["wall"]
    for k, b in best.items():
        cpu = f"   {b['cpu']:9.1f} img/s per CPU second" if device.type == "cpu" else ""
        print(f"{mode:5s} {k:9s} {b['wall']:9.1f} img/s wall{cpu}")
    pairs = [("our ViT / timm ViT", "our ViT", TIMM), ("DGViT / our ViT", "DGViT", "our ViT"),
             ("DViT / our ViT", "DViT", "our ViT")]
    for label, a, b in pairs:
        if a in best and b in best:
            vals = ", ".join(f"{c} {best[a][c] / best[b][c]:.3f}" for c in clocks)
            print(f"{mode:5s} ratio {label:18s} = {vals}")
    clock = "per CPU second" if device.type == "cpu" else "wall"
    for label, a, b, target in (("our ViT >= timm ViT", "our ViT", TIMM, 1.0),
                                ("DGViT >= 0.95 x our ViT", "DGViT", "our ViT", 0.95)):
        if a in best and b in best:
            per_round = [x / y for x, y in zip(best[a]["rounds"], best[b]["rounds"])]
            med = statistics.median(per_round)
            verdict = ("OK" if med >= target else "NOT MET") if device.type == "cpu" else "(targets are for the CPU)"
            print(f"{mode:5s} target {label}: median per-round ratio {med:.3f} {clock} over {len(per_round)} rounds "
                  f"(range {min(per_round):.3f}-{max(per_round):.3f}): {verdict}")
    sys.stdout.flush()


def profile_steps(models: dict[str, nn.Module], mode: str, args: argparse.Namespace, device: torch.device) -> None:
    """``--profile N``: one untimed step per model under ``torch.profiler``; prints each model's N operators with
    the most self CPU time (where a model's time goes: GEMMs, softmax, copies, elementwise ops, dropout)."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    for k, m in models.items():
        run = make_runner(m, mode, device, args.batch, args.bf16, args.compile)
        run()
        with profile(activities=acts) as prof:
            run()
        print(f"# profile: {mode} step of {k}")
        print(prof.key_averages().table(sort_by=sort, row_limit=args.profile, max_name_column_width=48))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: %(default)s)")
    p.add_argument("--mode", default="both", choices=["train", "infer", "both"])
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads on CPU (default: %(default)s)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default: %(default)s)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per model per round (default: 3 train / 6 infer on CPU, 30 on CUDA)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps per model first (default 1; 5 on CUDA)")
    p.add_argument("--rounds", type=int, default=5,
                   help="interleaved rounds: each model's best and the median per-round ratios (default: %(default)s)")
    p.add_argument("--dropout", type=float, default=0.05, help="dropout rate of every model (default: %(default)s)")
    p.add_argument("--amp", default="auto", choices=["auto", "bf16", "off"],
                   help="precision of every model, timm's too: auto (bf16 on CUDA and on CPUs with native bf16), "
                        "bf16 or off (fp32) (default: %(default)s)")
    p.add_argument("--no-amp", action="store_true", help="the same as --amp off")
    p.add_argument("--compile", action="store_true", help="torch.compile every model (timm's too)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after timing, profile one step per model and print its N costliest operators")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda requested but CUDA is not available")
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    from robustbench_dgsa.engine.predict import resolve_precision
    precision = resolve_precision(device, "off" if args.no_amp else args.amp)
    args.bf16 = precision == "bf16"
    steps_arg, warmup_arg = args.steps, args.warmup
    args.warmup = warmup_arg if warmup_arg is not None else (5 if device.type == "cuda" else 1)
    try:
        import timm
        timm_version = timm.__version__
    except ImportError:
        timm_version = "absent"
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} thread(s)")
    print(f"# vs_timm: torch {torch.__version__}, timm {timm_version}, {where}, batch {args.batch}, "
          f"{args.rounds} rounds (best and median ratio), dropout {args.dropout}"
          f", {precision} on both sides (--amp {'off' if args.no_amp else args.amp})"
          f"{', torch.compile' if args.compile else ''}")
    models = build_models(args.dropout)
    print("# parameters: " + ", ".join(f"{k} {count_params(m):,}" for k, m in models.items()))
    for mode in (["train", "infer"] if args.mode == "both" else [args.mode]):
        args.steps = steps_arg if steps_arg is not None else (30 if device.type == "cuda" else
                                                             (3 if mode == "train" else 6))
        print(f"# {mode}: {args.steps} timed steps per model per round after {args.warmup} warm-up")
        report(mode, measure(models, mode, args, device), device)
        if args.profile > 0:
            profile_steps(models, mode, args, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
