"""One image or one text through one or several models: heatmaps / token relevance, the figure and its data.

    >>> out = explain_image("cat.png", zoo_sources("image"), "cat_rollout.png")      # Figure 2 layout
    >>> out = explain_text("a gripping film", zoo_sources("text"), "text_rollout.png")  # Figure 3 layout

Writes the figure (PNG), the heatmaps (``.npy``: (H, W) for one model, (M, H, W) for M) or the token page
(``.html``), and a ``.json`` summary beside it (per model: mode, range, predicted class and probability, seed,
source). Returns an :class:`Explanation` (the summary and the files written). Images are read by the one reader
(:mod:`robustbench_dgsa.data.readers`) and bounded to :data:`~robustbench_dgsa.rollout.runs.MAX_SIDE` pixels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from robustbench_dgsa.rollout.sources import RolloutSource, check_modality
from robustbench_dgsa.util.errors import UserError


@dataclass
class RolloutOptions:
    mode: str | None = None            # None: per model (signed for DiffAttn/DGSA, positive for MHSA)
    head_fusion: str = "mean"
    discard_ratio: float = 0.0
    device: str = "auto"

    def check(self) -> "RolloutOptions":
        from robustbench_dgsa.rollout.core import HEAD_FUSIONS, MODES
        if self.mode is not None and self.mode not in MODES:
            raise UserError(f"unknown rollout mode {self.mode!r} (valid: {', '.join(MODES)})")
        if self.head_fusion not in HEAD_FUSIONS:
            raise UserError(f"unknown head fusion {self.head_fusion!r} (valid: {', '.join(HEAD_FUSIONS)})")
        if not 0.0 <= self.discard_ratio < 1.0:
            raise UserError(f"discard ratio must be in [0, 1), got {self.discard_ratio}")
        return self


@dataclass
class Explanation:
    doc: dict[str, Any]                # the .json summary
    files: list[Path] = field(default_factory=list)


def _class_name(meta: dict[str, Any], k: int) -> str:
    classes = meta.get("classes") or []
    return str(classes[k]) if 0 <= k < len(classes) else str(k)


def _model_summary(s: RolloutSource, spec: Any, scores: np.ndarray, probs: np.ndarray, pred: int) -> dict[str, Any]:
    from robustbench_dgsa.rollout.runs import top_fraction_mass
    return {"model": s.name, "source": s.source, "seed": s.seed, "dataset": s.meta.get("dataset"),
            "mode": spec.mode, "spec": spec.tag, "signed": spec.signed,
            "min": float(scores.min()) if scores.size else 0.0, "max": float(scores.max()) if scores.size else 0.0,
            "top10_mass": top_fraction_mass(scores, 0.1), "pred": pred, "pred_class": _class_name(s.meta, pred),
            "prob": float(probs[pred])}


def _class_list(classes: Sequence[str]) -> str:
    """All names up to 12 classes, else the first three … the last."""
    names = [str(c) for c in classes]
    return ", ".join(names) if len(names) <= 12 else ", ".join(names[:3]) + f", … {names[-1]}"


def data_note(sources: Sequence[RolloutSource]) -> str | None:
    """What the models were trained on and which classes they can answer with, e.g. "models trained on CIFAR-10:
    10 classes (airplane, …, truck); …" — a prediction on any other input is still one of them. None when no
    model records its classes."""
    from robustbench_dgsa.data.registry import dataset_label
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for s in sources:
        classes = tuple(str(c) for c in (s.meta.get("classes") or []))
        if classes:
            data = s.meta.get("dataset")
            groups.setdefault((dataset_label(str(data)) if data else "no data (untrained)", classes), []).append(s.name)
    if not groups:
        return None
    many = len(groups) > 1
    parts = [f"{'models' if len(names) > 1 else 'model'}{' ' + ', '.join(names) if many else ''} trained on {data}: "
             f"{len(classes)} classes ({_class_list(classes)})" for (data, classes), names in groups.items()]
    size = {tuple(s.preprocess.get("image_size") or ()) if isinstance(s.preprocess.get("image_size"), (list, tuple))
            else s.preprocess.get("image_size") for s in sources if isinstance(s.preprocess, dict)}
    resized = ""
    if len(size) == 1 and (only := size.pop()) is not None:
        side = f"{only[0]} × {only[1]}" if isinstance(only, tuple) and len(only) == 2 else f"{only} × {only}"
        resized = f" the image is resized to {side};"
    return "; ".join(parts) + f";{resized} every prediction is one of these classes, whatever the input shows."


def strongest(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` largest |score| (signed rollout: a strongly negative token counts as much as a
    strongly positive one), ties in input order."""
    return [int(j) for j in np.argsort(-np.abs(np.asarray(scores, dtype=np.float64)), kind="stable")[:k]]


def _column_title(s: RolloutSource, summary: dict[str, Any]) -> str:
    from robustbench_dgsa.models.registry import display_name
    seed = f" · seed {summary['seed']}" if summary.get("seed") is not None else ""
    return f"{display_name(s.name)}\n{summary['mode']}{seed}\n{summary['pred_class']} {summary['prob']:.0%}"


def explain_image(image: str | Path, sources: Sequence[RolloutSource], out: str | Path,
                  options: RolloutOptions | None = None) -> Explanation:
    """Roll out one image through every source; one model: input | heatmap; several: the Figure 2 layout."""
    from robustbench_dgsa.data import readers
    from robustbench_dgsa.rollout.plots import plot_image_rollout, plot_rollout_grid
    from robustbench_dgsa.rollout.runs import MAX_SIDE, image_rollout_full, resolve_spec
    from robustbench_dgsa.util import atomic

    options = (options or RolloutOptions()).check()
    if not sources:
        raise UserError("no model to roll out")
    check_modality(sources, "image")
    image, out = Path(image), Path(out)
    decoded = readers.decode_image_file(image, max_side=MAX_SIDE)     # bounded: a huge image is downscaled first
    img = decoded.pixels
    results, summary = [], []
    for s in sources:
        spec = resolve_spec(s.model, options.mode, options.head_fusion, options.discard_ratio)
        r = image_rollout_full(s.model, img[None], s.preprocess, spec=spec, device=options.device)
        pred = int(r.preds[0])
        info = _model_summary(s, spec, r.relevance[0], r.probs[0], pred)
        info["relevance_grid"] = np.round(r.relevance[0].astype(float), 7).tolist()
        results.append(r)
        summary.append(info)
    if len(sources) == 1:
        s, r, info = sources[0], results[0], summary[0]
        plot_image_rollout(img, r.heatmaps[0], out, signed=r.spec.signed, footnote=data_note(sources),
                           title=_column_title(s, info).replace("\n", " — ", 1).replace("\n", " rollout; predicted "))
        heat = r.heatmaps[0]
    else:
        keys = [f"{i}:{s.name}" for i, s in enumerate(sources)]
        plot_rollout_grid(img[None], {k: r.heatmaps for k, r in zip(keys, results)}, out,
                          signed_by_model={k: r.spec.signed for k, r in zip(keys, results)},
                          column_titles={k: _column_title(s, info) for k, s, info in zip(keys, sources, summary)},
                          footnote="\n".join(n for n in (data_note(sources), _modes_footnote(summary)) if n))
        heat = np.stack([r.heatmaps[0] for r in results])
    npy = out.with_suffix(".npy")
    with atomic.atomic_path(npy) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, heat.astype(np.float32))
    doc = {"image": str(image), "image_shape": list(img.shape), "original_size": list(decoded.size[::-1]),
           "figure": str(out), "heatmaps": str(npy), "heatmaps_shape": list(heat.shape), "models": summary}
    atomic.write_json(out.with_suffix(".json"), doc)
    return Explanation(doc, [out, npy, out.with_suffix(".json")])


def _modes_footnote(summary: Sequence[dict[str, Any]]) -> str | None:
    """Why the columns' modes differ (classic rollout for MHSA, signed for DiffAttn/DGSA), when they do."""
    modes = {m["mode"] for m in summary}
    if len(modes) < 2:
        return None
    return ("positive = classic rollout (MHSA maps are non-negative); signed = rows L1-normalised, sign kept "
            "(DiffAttn/DGSA maps subtract); the positive mode shows every model's positive part on one footing. "
            "Column titles: model, rollout mode and training seed, predicted class and its probability.")


def explain_text(text: str, sources: Sequence[RolloutSource], out: str | Path,
                 options: RolloutOptions | None = None) -> Explanation:
    """Token relevance of one text for every source (Figure 3 layout: one shaded line per model) + HTML page."""
    from robustbench_dgsa.models.registry import display_name
    from robustbench_dgsa.rollout.plots import plot_text_rollout, render_text_rollout_html
    from robustbench_dgsa.rollout.runs import resolve_spec, text_rollout_full
    from robustbench_dgsa.util import atomic

    options = (options or RolloutOptions()).check()
    if not text.strip():
        raise UserError("the text is empty")
    if not sources:
        raise UserError("no model to roll out")
    check_modality(sources, "text")
    out = Path(out)
    toks, scores, signed, labels, summary = {}, {}, {}, [], []
    for i, s in enumerate(sources):
        spec = resolve_spec(s.model, options.mode, options.head_fusion, options.discard_ratio)
        r = text_rollout_full(s.model, [text], s.preprocess, spec=spec, device=options.device)
        key = f"{i}:{s.name}"
        toks[key], scores[key], signed[key] = r.tokens[0], r.scores[0], spec.signed
        pred = int(r.preds[0])
        info = _model_summary(s, spec, r.scores[0], r.probs[0], pred)
        seed = f", seed {info['seed']}" if info.get("seed") is not None else ""
        labels.append(f"({chr(ord('a') + i)}) {display_name(s.name)} [{spec.mode}{seed}] — pred "
                      f"{info['pred_class']} ({info['prob']:.2f})")
        sc = np.asarray(r.scores[0], dtype=np.float64)
        order = strongest(sc, 5)
        info.update(top_tokens=[r.tokens[0][j] for j in order], top_scores=[float(sc[j]) for j in order],
                    unknown_tokens=int(r.unknown[0].sum()), tokens=r.tokens[0], scores=[float(v) for v in sc])
        summary.append(info)
    html_path = out.with_suffix(".html")
    note = data_note(sources)
    plot_text_rollout(toks, scores, out, signed_by_model=signed, labels=labels, title="Attention rollout",
                      note=note)
    caption = " ".join(c for c in (text if len(text) < 2000 else None, f"({note})" if note else None) if c)
    render_text_rollout_html(toks, scores, html_path, signed_by_model=signed, labels=labels,
                             title="Attention rollout", caption=caption or None)
    doc = {"text": text, "figure": str(out), "html": str(html_path), "models": summary}
    atomic.write_json(out.with_suffix(".json"), doc)
    return Explanation(doc, [out, html_path, out.with_suffix(".json")])


def dataset_image(dataset: str, index: int, folder: str | Path, data_root: str | Path | None = None) -> Path:
    """Test image ``index`` of an image dataset written as ``<folder>/<dataset>-test-<index>-<class>.png``
    (the figure's input when a user points at a dataset example instead of a file)."""
    from PIL import Image

    from robustbench_dgsa.data import load_dataset, readers
    from robustbench_dgsa.util import atomic
    data = load_dataset(dataset, "test", data_root=str(data_root) if data_root else None)
    if data.modality != "image":
        raise UserError(f"{dataset} is a text dataset; roll out a text instead")
    if not 0 <= index < len(data.y):
        raise UserError(f"index must be in 0..{len(data.y) - 1} for the {dataset} test split, got {index}")
    label = data.classes[int(data.y[index])] if data.classes else str(int(data.y[index]))
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in f"{dataset}-test-{index}-{label}")
    path = Path(folder) / f"{safe}.png"
    with atomic.atomic_path(path) as tmp:
        Image.fromarray(readers.to_rgb(np.asarray(data.x[index]))).save(tmp, format="PNG")
    return path
