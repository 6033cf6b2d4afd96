"""``dgsa-bench rollout``: attention-rollout heatmaps for an image or a text, one model or several side by side;
``--metrics`` computes the rollout numbers (salient mass, drift) on the synthetic sets into a results store.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from robustbench_dgsa.util.errors import UserError
from . import options as opt
from .app import app

UNTRAINED_OVERRIDES = {"dim": 64, "depth": 4, "heads": 4, "head_hidden": 64, "num_classes": 10}
UNTRAINED_IMAGE_PREPROCESS = {"modality": "image", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25],
                              "image_size": 32, "in_chans": 3}
UNTRAINED_SEED = 0

_HELP = f"""Attention-rollout heatmap of an image (or, with --text, token relevance of a text).

Examples:

  dgsa-bench rollout cat.png --checkpoint runs/dgvit/checkpoint.safetensors

  dgsa-bench rollout cat.png --compare vit.safetensors dvit.safetensors dgvit.safetensors --out fig2.png

  dgsa-bench rollout --text "the striker scored a goal" --checkpoint dgt.safetensors --compare dt.safetensors

  dgsa-bench rollout --metrics --checkpoint dgvit.safetensors --store runs/store

Images of any size and mode are read by the one reader (robustbench_dgsa.data.readers: alpha composited over
white, palette expanded, 16-bit scaled to 8 bits, grayscale replicated to RGB for RGB models), downscaled to at
most 1024 pixels on the longer side, and prepared exactly as in training (robustbench_dgsa.engine.predict:
bilinear antialiased resize to the checkpoint's input size, its own mean/std).
Writes the figure (--out, default <image stem>_rollout.png), the heatmap(s) at that (bounded) resolution as .npy
((H,W), or (M,H,W) for M models in --compare order) and a .json summary beside it. Text: PNG + HTML with
tokens shaded by relevance, and .json (tokens and scores per model).

Modes (SPEC §7): signed (default for DViT/DGViT/DT/DGT: rows L1-normalised, signs kept, diverging colormap
centred at 0), positive (default for ViT/Transformer, == classic rollout), a_pos / a_neg (branch maps alone),
raw (combined map, classic recipe; warns). The mode is printed and recorded with every heatmap.

--model NAME without a checkpoint builds an UNTRAINED model, with a warning: seed {UNTRAINED_SEED}, D=64, 4 layers,
4 heads, classifier hidden 64, 10 classes; images 32x32 / patch 4, mean 0.5, std 0.25; text: max_len 256 and a
vocabulary of the given text's own words. For trying the pipeline only: its maps mean nothing.
"""


def _untrained(name: str, text: Optional[str]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    import torch

    from ..models import create_model, get_model_config

    cfg = get_model_config(name)
    overrides = dict(UNTRAINED_OVERRIDES)
    if cfg.modality == "text":
        from ..data.vocab import Vocab
        vocab = Vocab.build([text or ""], min_freq=1, max_size=None)
        overrides.update(vocab_size=len(vocab), max_len=256)
        preprocess = {"modality": "text", "vocab": vocab.to_list(), "max_len": 256}
    else:
        overrides.update(image_size=32, patch_size=4, in_chans=3)
        preprocess = dict(UNTRAINED_IMAGE_PREPROCESS)
    torch.manual_seed(UNTRAINED_SEED)
    model = create_model(cfg, **overrides).eval()
    meta = {"model": name, "classes": [f"class {i}" for i in range(10)], "seed": UNTRAINED_SEED,
            "preprocess": preprocess, "untrained": True}
    return model, meta, preprocess


def _timm_source(name: str, weights: Optional[Path], random_init: bool, seed: int, timm_norm: bool,
                 model_args: dict[str, Any]) -> dict[str, Any]:
    """A timm ViT (weights from a file, or --random-init drawn from --seed) behind the suite's rollout interface;
    its class count from the weights' head unless --model-args says it."""
    from robustbench_dgsa.models.external import load_timm_model, num_classes_in_weights
    from robustbench_dgsa.rollout.capture import as_rollout_model, default_preprocess

    if "num_classes" not in model_args:
        n = num_classes_in_weights(weights) if weights is not None else None
        if n is not None:
            model_args["num_classes"] = n
        else:
            typer.secho(f"note: --timm {name}: {'no classifier head in the weights, so ' if weights else ''}timm's "
                        "default 1000-class head; give --model-args num_classes=N for another", fg="yellow", err=True)
    ext = load_timm_model(name, weights=weights, random_init=random_init, seed=seed, **model_args)
    model = as_rollout_model(ext.model.eval(), ext.name)
    n = model.config.num_classes
    meta = {"model": ext.name, "classes": [f"class {i}" for i in range(n)], "source": ext.source,
            "untrained": ext.random_init, "init_seed": ext.init_seed}
    return {"model": model, "meta": meta, "preprocess": default_preprocess(model, timm_norm), "source": ext.source,
            "name": ext.name}


def _load_sources(checkpoints: list[Path], models: list[str], text: Optional[str]) -> list[dict[str, Any]]:
    from robustbench_dgsa.models.checkpoint import load_checkpoint
    from robustbench_dgsa.engine.predict import preprocess_from_meta

    out = []
    for p in checkpoints:
        if not p.exists():
            raise UserError(f"checkpoint not found: {p}")
        model, meta = load_checkpoint(p)
        out.append({"model": model, "meta": meta, "preprocess": preprocess_from_meta(meta), "source": str(p),
                    "name": model.config.name})
    for name in models:
        from ..models import get_model_config
        get_model_config(name)  # an unknown name is one error line, without the warning first
        typer.secho(f"warning: --model {name}: using an UNTRAINED {name} (random weights, small config); "
                    "its rollout shows the pipeline, not learned attention", fg="yellow", err=True)
        model, meta, pre = _untrained(name, text)
        out.append({"model": model, "meta": meta, "preprocess": pre, "source": f"untrained:{name}", "name": name})
    return out


def _class_name(meta: dict[str, Any], k: int) -> str:
    classes = meta.get("classes") or []
    return str(classes[k]) if 0 <= k < len(classes) else str(k)


def _image_mode(image: Path, sources: list[dict[str, Any]], out: Optional[Path], mode: Optional[str],
                head_fusion: str, discard_ratio: float, device: str, as_json: bool) -> None:
    import numpy as np

    from robustbench_dgsa.data import readers
    from robustbench_dgsa.util import atomic
    from robustbench_dgsa.rollout.plots import display_name, plot_image_rollout, plot_rollout_grid
    from robustbench_dgsa.rollout.runs import MAX_SIDE, image_rollout_full, resolve_spec, top_fraction_mass

    for s in sources:
        if s["model"].config.modality != "image":
            raise UserError(f"{s['source']} is a text model ({s['name']}); give --text \"...\" instead of an image")
    decoded = readers.decode_image_file(image, max_side=MAX_SIDE)  # bounded: a huge image is downscaled first
    img = decoded.pixels
    stack = img[None]
    out = out or Path(f"{image.stem}_rollout.png")
    if out.suffix.lower() != ".png":
        raise UserError(f"--out must end in .png, got {out}")
    results, summary = [], []
    for s in sources:
        spec = resolve_spec(s["model"], mode, head_fusion, discard_ratio)
        r = image_rollout_full(s["model"], stack, s["preprocess"], spec=spec, device=device)
        results.append(r)
        h = r.heatmaps[0]
        pred = int(r.preds[0])
        summary.append({"model": s["name"], "source": s["source"], "mode": spec.mode, "spec": spec.tag,
                        "signed": spec.signed, "min": float(h.min()), "max": float(h.max()),
                        "top10_mass": top_fraction_mass(r.relevance[0], 0.1),
                        "pred": pred, "pred_class": _class_name(s["meta"], pred),
                        "prob": float(r.probs[0, pred]),
                        "relevance_grid": np.round(r.relevance[0].astype(float), 7).tolist()})
    if len(sources) == 1:
        s, r, info = sources[0], results[0], summary[0]
        title = (f"{display_name(s['name'])} [{info['spec']}] — pred {info['pred_class']} ({info['prob']:.2f})")
        plot_image_rollout(img, r.heatmaps[0], out, signed=r.spec.signed, title=title)
        heat = r.heatmaps[0]
    else:
        names = [f"{i}:{s['name']}" for i, s in enumerate(sources)]
        heat_by = {n: r.heatmaps for n, r in zip(names, results)}
        titles = {n: f"{display_name(s['name'])}\n[{r.spec.mode}] {summ['pred_class']}"
                  for n, s, r, summ in zip(names, sources, results, summary)}
        plot_rollout_grid(stack, heat_by, out, signed_by_model={n: r.spec.signed for n, r in zip(names, results)},
                          column_titles=titles)
        heat = np.stack([r.heatmaps[0] for r in results])
    npy = out.with_suffix(".npy")
    with atomic.atomic_path(npy) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, heat.astype(np.float32))
    doc = {"image": str(image), "image_shape": list(img.shape), "original_size": list(decoded.size[::-1]),
           "figure": str(out), "heatmaps": str(npy),
           "heatmaps_shape": list(heat.shape), "models": summary}
    atomic.write_json(out.with_suffix(".json"), doc)
    _report(doc, as_json, [out, npy, out.with_suffix(".json")])


def _text_mode(text: str, sources: list[dict[str, Any]], out: Optional[Path], mode: Optional[str],
               head_fusion: str, discard_ratio: float, device: str, as_json: bool) -> None:
    import numpy as np

    from robustbench_dgsa.util import atomic
    from robustbench_dgsa.rollout.plots import plot_text_rollout, render_text_rollout_html
    from robustbench_dgsa.rollout.runs import resolve_spec, text_rollout_full, top_fraction_mass

    if not text.strip():
        raise UserError("--text is empty")
    for s in sources:
        if s["model"].config.modality != "text":
            raise UserError(f"{s['source']} is an image model ({s['name']}); give an image file instead of --text")
    out = out or Path("text_rollout.png")
    if out.suffix.lower() != ".png":
        raise UserError(f"--out must end in .png, got {out}")
    toks, scores, signed, labels, summary = {}, {}, {}, [], []
    for i, s in enumerate(sources):
        spec = resolve_spec(s["model"], mode, head_fusion, discard_ratio)
        r = text_rollout_full(s["model"], [text], s["preprocess"], spec=spec, device=device)
        key = f"{i}:{s['name']}"
        toks[key], scores[key], signed[key] = r.tokens[0], r.scores[0], spec.signed
        pred = int(r.preds[0])
        from robustbench_dgsa.rollout.plots import display_name
        labels.append(f"({chr(ord('a') + i)}) {display_name(s['name'])} [{spec.mode}] — pred "
                      f"{_class_name(s['meta'], pred)} ({float(r.probs[0, pred]):.2f})")
        sc = r.scores[0]
        order = np.argsort(-sc, kind="stable")[:5]
        summary.append({"model": s["name"], "source": s["source"], "mode": spec.mode, "spec": spec.tag,
                        "signed": spec.signed, "min": float(sc.min()) if sc.size else 0.0,
                        "max": float(sc.max()) if sc.size else 0.0, "top10_mass": top_fraction_mass(sc, 0.1),
                        "pred": pred, "pred_class": _class_name(s["meta"], pred), "prob": float(r.probs[0, pred]),
                        "top_tokens": [r.tokens[0][j] for j in order],
                        "unknown_tokens": int(r.unknown[0].sum()),
                        "tokens": r.tokens[0], "scores": [float(v) for v in sc]})
    html_path = out.with_suffix(".html")
    plot_text_rollout(toks, scores, out, signed_by_model=signed, labels=labels, title="Attention rollout")
    render_text_rollout_html(toks, scores, html_path, signed_by_model=signed, labels=labels,
                             title="Attention rollout", caption=text if len(text) < 2000 else None)
    doc = {"text": text, "figure": str(out), "html": str(html_path), "models": summary}
    atomic.write_json(out.with_suffix(".json"), doc)
    _report(doc, as_json, [out, html_path, out.with_suffix(".json")])


def _report(doc: dict[str, Any], as_json: bool, files: list[Path]) -> None:
    if as_json:
        slim = {**doc, "models": [{k: v for k, v in m.items() if k not in ("relevance_grid", "tokens", "scores")}
                                  for m in doc["models"]]}
        typer.echo(json.dumps(slim, indent=2))
        return
    for m in doc["models"]:
        extra = f", top tokens {', '.join(m['top_tokens'])}" if "top_tokens" in m else ""
        typer.echo(f"{m['model']} ({m['source']}): mode {m['spec']}, range [{m['min']:.4g}, {m['max']:.4g}], "
                   f"top-10% mass {m['top10_mass']:.3f}, pred {m['pred_class']} ({m['prob']:.3f}){extra}")
    typer.echo("wrote " + ", ".join(str(f) for f in files))


def _metrics_mode(sources: list[dict[str, Any]], store: Path, dataset: Optional[str],
                  corruptions: Optional[list[str]], sev: list[int], max_examples: int, mode: Optional[str],
                  head_fusion: str, discard_ratio: float, device: str, as_json: bool, quiet: bool = False) -> None:
    from robustbench_dgsa.rollout.runs import rollout_metrics_run

    results = []
    for s in sources:
        summ = rollout_metrics_run(s["model"], store, dataset, corruptions=corruptions, severities=sev,
                                   modes=[mode] if mode else None, head_fusion=head_fusion,
                                   discard_ratio=discard_ratio, max_examples=max_examples,
                                   preprocess=s["preprocess"], meta={**s["meta"], "checkpoint": s["source"]},
                                   device=device, progress=not (as_json or quiet))
        results.append(summ)
        if not as_json:
            for tag, info in summ["modes"].items():
                drift = info["drift"]
                d = (f", mean drift r {sum(drift.values()) / len(drift):.3f} over {len(drift)} cells"
                     if drift else "")
                typer.echo(f"{summ['model']} [{tag}]: salient mass {info['mass']:.3f} "
                           f"(chance {info['chance']:.3f}){d}")
    if as_json:
        from robustbench_dgsa.util.jsonio import to_jsonable
        typer.echo(json.dumps(to_jsonable(results, fallback=str), indent=2))
    else:
        typer.echo(f"rows written to {store} (run {', '.join(r['run_id'] for r in results)})")


def _check_rollout_options(mode: Optional[str], head_fusion: str, discard_ratio: float) -> None:
    from robustbench_dgsa.rollout.core import HEAD_FUSIONS, MODES

    if mode is not None and mode not in MODES:
        raise UserError(f"unknown --mode {mode!r} (valid: {', '.join(MODES)})")
    if head_fusion not in HEAD_FUSIONS:
        raise UserError(f"unknown --head-fusion {head_fusion!r} (valid: {', '.join(HEAD_FUSIONS)})")
    if not 0.0 <= discard_ratio < 1.0:
        raise UserError(f"--discard-ratio must be in [0, 1), got {discard_ratio}")


def _check_timm_options(timm_name: Optional[str], weights: Optional[Path], random_init: bool,
                        model_args: Optional[str], timm_norm: bool, seed: Optional[str]) -> None:
    if timm_name is None and (weights is not None or random_init or model_args or timm_norm or seed is not None):
        raise UserError("--weights, --random-init, --seed, --timm-norm and --model-args go with --timm")
    if seed is not None and not random_init:
        raise UserError("--seed goes with --random-init (the seed of the random weights)")


def _image_and_checkpoints(inputs: Optional[list[str]], checkpoint: Optional[Path], compare: Optional[list[Path]],
                           text: Optional[str], metrics: bool) -> tuple[Optional[Path], list[Path]]:
    """The positional IMAGE (when the mode takes one) and every checkpoint given (--checkpoint, --compare, extras)."""
    args = list(inputs or [])
    image: Optional[Path] = None
    if text is None and not metrics:
        if not args:
            raise UserError("give an IMAGE file, --text \"...\" or --metrics (see dgsa-bench rollout --help)")
        image = Path(args.pop(0))
    ckpts: list[Path] = [checkpoint] if checkpoint is not None else []
    ckpts += list(compare or [])
    if args and not compare and metrics:  # an IMAGE given with --metrics / --text: say so, not "unexpected"
        raise UserError("--metrics uses the synthetic test set; do not give an image or --text with it")
    if args and not compare and text is not None:
        raise UserError("give either an image or --text, not both")
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
    dataset: Optional[str] = opt.dataset(None, help="--metrics: synthetic-vision | synthetic-text (default by "
                                                    "model)."),
    corruption: Optional[str] = opt.corruption(
        None, help="--metrics: corruptions for drift: names, groups, benchmark, extra or all (default: the 15 "
                   "benchmark ones; 'none' for no drift)."),
    severity: Optional[str] = opt.severity(None, help="--metrics: severities: one (3), a list (1,3,5), a range "
                                                      "(1-5) or all (default)."),
    max_examples: int = opt.max_examples(200, help="--metrics: test examples used."),
    quiet: bool = opt.quiet(),
) -> None:
    _check_rollout_options(mode, head_fusion, discard_ratio)
    sev = opt.parse_severities(severity)
    opt.check_output_file(out, "--out", suffixes=(".png",))
    if metrics:
        opt.check_output_dir(store, "--store")
    no_drift = corruption is not None and corruption.strip().lower() == "none"
    corr = [] if no_drift else opt.parse_corruptions(corruption)
    model = opt.split_list(model) or None
    image, ckpts = _image_and_checkpoints(inputs, checkpoint, compare, text, metrics)
    if not ckpts and not model and timm_name is None:
        raise UserError("give --checkpoint CKPT (or --timm NAME, or --model NAME for an untrained model)")
    _check_timm_options(timm_name, weights, random_init, model_args, timm_norm, seed)
    if image is not None:
        from robustbench_dgsa.data.readers import check_image_file
        check_image_file(image)  # fail on a bad image (header only) before loading any model
    sources = _load_sources(ckpts, list(model or []), text)
    if timm_name is not None:
        sources.append(_timm_source(timm_name, weights, random_init, opt.parse_one_seed(seed or "0"), timm_norm,
                                    opt.parse_model_args(model_args)))
    if metrics:
        if text is not None or image is not None:
            raise UserError("--metrics uses the synthetic test set; do not give an image or --text with it")
        _metrics_mode(sources, store, dataset, corr, sev, max_examples, mode, head_fusion,
                      discard_ratio, device, as_json, quiet)
    elif text is not None:
        if image is not None:
            raise UserError("give either an image or --text, not both")
        _text_mode(text, sources, out, mode, head_fusion, discard_ratio, device, as_json)
    else:
        _image_mode(image, sources, out, mode, head_fusion, discard_ratio, device, as_json)
    sys.stdout.flush()
