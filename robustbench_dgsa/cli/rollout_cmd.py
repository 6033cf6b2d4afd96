"""``dgsa-bench rollout``: attention-rollout heatmaps for an image or a text, one model or several side by side
(the shipped models by default); ``--metrics`` computes the rollout numbers (salient mass, drift) on the synthetic
sets into a results store. Options -> :func:`robustbench_dgsa.jobs.rollout.run_rollout` -> lines or JSON.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.rollout.sources import UNTRAINED_SEED
from robustbench_dgsa.util.errors import UserError
from . import options as opt
from . import render
from .app import app

_SPELL = {"choose_models": "--pretrained / --checkpoint"}

_HELP = f"""Attention-rollout heatmap of an image (or, with --text, token relevance of a text).

With no model option it uses the trained models that ship with the package (see `dgsa-bench models
--pretrained`): ViT, DViT and DGViT trained on CIFAR-10 (32x32 inputs: your image is resized to 32x32) for an
image, Transformer, DT and DGT trained on IMDB for --text; the figure is the paper's Figure 2 (image, then one
heatmap per model) or Figure 3 layout, each column with the model's predicted class and probability.

Examples:

  dgsa-bench rollout cat.png

  dgsa-bench rollout --text "a gripping, beautifully acted film"

  dgsa-bench rollout --dataset cifar10 --index 7 --data-root ~/data          # a test image of a dataset

  dgsa-bench rollout cat.png --pretrained dgvit --mode positive

  dgsa-bench rollout cat.png --checkpoint runs/dgvit/checkpoint.safetensors

  dgsa-bench rollout cat.png --compare vit.safetensors dvit.safetensors dgvit.safetensors --out fig2.png

  dgsa-bench rollout --metrics --checkpoint dgvit.safetensors --store runs/store

Images of any size and mode are read by the suite's one image reader (alpha composited over white, palette
expanded, 16-bit scaled to 8 bits, grayscale replicated to RGB for RGB models), downscaled to at most 1024 pixels
on the longer side, and prepared exactly as in training (bilinear antialiased resize to the model's input size,
its own mean/std). Writes the figure (--out, default <image stem>_rollout.png), the heatmap(s) at that (bounded)
resolution as .npy ((H,W), or (M,H,W) for M models in order) and a .json summary beside it. Text: PNG + HTML
with tokens shaded by relevance, and .json (tokens and scores per model). Heatmaps are drawn opaque (colours
are exactly the colour bar's) with the image as thin grey outlines on top.

Modes (docs/METHODS.md, Rollout): signed (default for DViT/DGViT/DT/DGT: rows L1-normalised, signs kept, diverging
colormap centred at 0), positive (default for ViT/Transformer, == classic rollout; for the differential models
their positive part, comparable with ViT), a_pos / a_neg (branch maps alone), raw (combined map, classic recipe;
warns). The mode and the training seed are printed and recorded with every heatmap.

--model NAME builds an UNTRAINED model, with a warning: seed {UNTRAINED_SEED}, D=64, 4 layers, 4 heads, classifier
hidden 64, 10 classes; images 32x32 / patch 4, mean 0.5, std 0.25; text: max_len 256 and a vocabulary of the
given text's own words. For trying the pipeline only: its maps mean nothing.
"""


def _report(doc: dict[str, Any], as_json: bool, files: list[Path]) -> None:
    if as_json:
        slim = {**doc, "models": [{k: v for k, v in m.items() if k not in ("relevance_grid", "tokens", "scores")}
                                  for m in doc["models"]]}
        typer.echo(json.dumps(slim, indent=2))  # the summary as the library wrote it (plain JSON already)
        return
    for m in doc["models"]:
        extra = f", strongest tokens (by |relevance|) {render.token_list(m)}" if "top_tokens" in m else ""
        seed = f", seed {m['seed']}" if m.get("seed") is not None else ""
        typer.echo(f"{m['model']} ({m['source']}{seed}): mode {m['spec']}, range [{m['min']:.4g}, {m['max']:.4g}], "
                   f"top-10% mass {m['top10_mass']:.3f}, pred {m['pred_class']} ({m['prob']:.3f}){extra}")
    typer.echo("wrote " + ", ".join(str(f) for f in files))


def _report_metrics(results: list[dict[str, Any]], store: Path, as_json: bool) -> None:
    if as_json:
        render.echo_json(results, fallback=str)
        return
    for summ in results:
        for tag, info in summ["modes"].items():
            drift = info["drift"]
            d = f", mean drift r {sum(drift.values()) / len(drift):.3f} over {len(drift)} cells" if drift else ""
            typer.echo(f"{summ['model']} [{tag}]: salient mass {info['mass']:.3f} (chance {info['chance']:.3f}){d}")
    typer.echo(f"rows written to {store} (run {', '.join(r['run_id'] for r in results)})")


def _check_outputs(out: Optional[Path], store: Optional[Path], index: Optional[int], dataset: Optional[str],
                   metrics: bool) -> None:
    """Output paths and the --index / --metrics combinations, checked before any work."""
    opt.check_output_file(out, "--out", suffixes=(".png",))
    for side in (out.with_suffix(".npy"), out.with_suffix(".json")) if out is not None else ():
        opt.check_output_file(side, "--out (beside it)")  # the heat maps and the summary go there too
    if store is not None:
        opt.check_output_dir(store, "--store", store=True)
    if index is not None and (dataset is None or metrics):
        raise UserError("--index goes with --dataset NAME (an image dataset), not with --metrics")


def _timm_spec(timm_name: Optional[str], weights: Optional[Path], random_init: bool, model_args: Optional[str],
               timm_norm: bool, seed: Optional[str]) -> Optional[dict]:
    """The --timm model's options, checked; None without --timm."""
    _check_timm_options(timm_name, weights, random_init, model_args, timm_norm, seed)
    if timm_name is None:
        return None
    return dict(name=timm_name, weights=weights, random_init=random_init, seed=opt.parse_one_seed(seed or "0"),
                timm_norm=timm_norm, model_args=opt.parse_model_args(model_args))


def _check_timm_options(timm_name: Optional[str], weights: Optional[Path], random_init: bool,
                        model_args: Optional[str], timm_norm: bool, seed: Optional[str]) -> None:
    if timm_name is None and (weights is not None or random_init or model_args or timm_norm or seed is not None):
        raise UserError("--weights, --random-init, --seed, --timm-norm and --model-args go with --timm")
    if seed is not None and not random_init:
        raise UserError("--seed goes with --random-init (the seed of the random weights)")


def _image_and_checkpoints(inputs: Optional[list[str]], checkpoint: Optional[Path], compare: Optional[list[Path]],
                           text: Optional[str], metrics: bool, from_dataset: bool
                           ) -> tuple[Optional[Path], list[Path]]:
    """The positional IMAGE (when the mode takes one) and every checkpoint given (--checkpoint, --compare, extras)."""
    args = list(inputs or [])
    image: Optional[Path] = None
    if text is None and not metrics and not from_dataset:
        if not args:
            raise UserError("give an IMAGE file, --text \"...\", --dataset NAME --index I or --metrics "
                            "(see dgsa-bench rollout --help)")
        image = Path(args.pop(0))
    ckpts: list[Path] = [checkpoint] if checkpoint is not None else []
    ckpts += list(compare or [])
    if args and not compare and metrics:  # an IMAGE given with --metrics / --text: say so, not "unexpected"
        raise UserError("--metrics uses the synthetic test set; do not give an image or --text with it")
    if args and not compare and (text is not None or from_dataset):
        raise UserError("give one input: an image file, --text or --dataset/--index")
    if args:
        if not compare:
            raise UserError(f"unexpected argument(s): {' '.join(args)} (several checkpoints go after --compare)")
        ckpts += [Path(a) for a in args]
    return image, ckpts


@app.command("rollout", help=_HELP)
def rollout_command(
    inputs: Optional[list[str]] = typer.Argument(
        None, metavar="[IMAGE] [CKPT...]",
        help="Image file (PNG, JPEG, ...). Further checkpoints may follow when --compare is used."),
    checkpoint: Optional[Path] = opt.checkpoint(None, help="Trained model (.safetensors)."),
    compare: Optional[list[Path]] = typer.Option(
        None, "--compare", help="More checkpoints side by side (Figure 2 / 3 layout): --compare A B C "
                                "or --compare A --compare B."),
    pretrained: Optional[list[str]] = opt.pretrained(),
    model: Optional[list[str]] = opt.models(
        None, help="An UNTRAINED registry model (vit, dvit, dgvit, transformer, dt, dgt), with a warning; "
                   "comma-separated or repeated."),
    timm_name: Optional[str] = opt.timm(help="Also (or instead): a timm VisionTransformer by name, with --weights "
                                             "or --random-init; its maps are captured from its attention modules."),
    weights: Optional[Path] = opt.weights(help="State dict for --timm (.safetensors, or .pt/.pth read with "
                                               "torch.load(weights_only=True))."),
    random_init: bool = opt.random_init(),
    seed: Optional[str] = opt.seed(None, help="Seed of the --random-init weights (default 0; recorded and put into "
                                              "the model's name)."),
    timm_norm: bool = opt.timm_norm(help="Feed the --timm model timm's normalisation instead of raw [0, 1] images "
                                         "(resized to its input size)."),
    model_args: Optional[str] = opt.model_args(help="Keyword arguments for the timm model, e.g. "
                                                    "img_size=32,patch_size=4 (num_classes: from the weights' "
                                                    "head by default)."),
    text: Optional[str] = typer.Option(None, "--text", "-t", help="Roll out a text instead of an image."),
    index: Optional[int] = typer.Option(None, "--index", min=0, max=10**9,
                                        help="Roll out test image INDEX of --dataset (written as a PNG beside "
                                             "the figure) instead of an image file."),
    data_root: Optional[Path] = opt.data_root(help="Folder holding --dataset (for --index)."),
    out: Optional[Path] = opt.out(None, help="Output PNG (default <image stem>_rollout.png / text_rollout.png)."),
    mode: Optional[str] = typer.Option(None, "--mode",
                                       help="signed | positive | a_pos | a_neg | raw (default: per model)."),
    head_fusion: str = typer.Option("mean", "--head-fusion", help="mean | max | min over heads."),
    discard_ratio: float = typer.Option(0.0, "--discard-ratio",
                                        help="Zero this fraction of lowest-|value| entries per layer (0..1)."),
    device: str = opt.device(),
    as_json: bool = opt.json_(help="Print the summary numbers as JSON."),
    metrics: bool = typer.Option(False, "--metrics",
                                 help="Compute salient mass and drift on the synthetic set into --store "
                                      "(no image / text needed)."),
    store: Path = typer.Option(Path("runs/store"), "--store", help="Results store for --metrics."),
    dataset: Optional[str] = opt.dataset(None, help="With --index: the image dataset (e.g. cifar10). With "
                                                    "--metrics: synthetic-vision | synthetic-text (default by model)."),
    corruption: Optional[str] = opt.corruption(
        None, help="--metrics: corruptions for drift: names, groups, benchmark, extra or all (default: the 15 "
                   "benchmark ones; 'none' for no drift)."),
    severity: Optional[str] = opt.severity(None, help="--metrics: severities: one (3), a list (1,3,5), a range "
                                                      "(1-5) or all (default)."),
    max_examples: int = opt.max_examples(200, help="--metrics: test examples used."),
    quiet: bool = opt.quiet(),
) -> None:
    from robustbench_dgsa.jobs.rollout import run_rollout
    from robustbench_dgsa.rollout.explain import RolloutOptions

    options = RolloutOptions(mode, head_fusion, discard_ratio, device).check()
    sev = opt.parse_severities(severity)
    _check_outputs(out, store if metrics else None, index, dataset, metrics)
    no_drift = corruption is not None and corruption.strip().lower() == "none"
    corr = [] if no_drift else opt.parse_corruptions(corruption)
    untrained, pretrained = opt.split_list(model) or [], opt.split_list(pretrained) or []
    image, ckpts = _image_and_checkpoints(inputs, checkpoint, compare, text, metrics, index is not None)
    if metrics and not (ckpts or untrained or pretrained or timm_name):
        raise UserError("--metrics needs a model: --checkpoint CKPT, --pretrained NAME, --timm NAME or --model NAME")
    timm = _timm_spec(timm_name, weights, random_init, model_args, timm_norm, seed)
    result = run_rollout(options, image=image, text=text, dataset=dataset, index=index, data_root=data_root, out=out,
                         checkpoints=ckpts, pretrained=pretrained, untrained=untrained, timm=timm, metrics=metrics,
                         store=store, corruptions=corr, severities=sev, max_examples=max_examples,
                         progress=not (as_json or quiet), log=lambda m: typer.secho(m, fg="cyan", err=True),
                         warn=lambda m: typer.secho(m, fg="yellow", err=True), spell=_SPELL)
    if metrics:
        _report_metrics(result["metrics"], store, as_json)
    else:
        _report(result["doc"], as_json, result["files"])
    sys.stdout.flush()
