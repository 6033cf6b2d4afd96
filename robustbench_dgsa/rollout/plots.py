"""Rendering of attention-rollout results: image overlays, the Figure-2 grid, text shading (Figure 3).

Drawing only: every function takes arrays already computed (by :mod:`robustbench_dgsa.rollout.runs` or read
from stored rollout sets) and writes files; nothing here runs a model.

Colour conventions (docs/METHODS.md, Attention rollout), stated in every figure's colour bar label:

* signed heatmaps (modes ``signed``/``raw``) use the diverging colormap :data:`SIGNED_CMAP` with symmetric
  limits ±max|h|, so 0 is always the white centre; red = excitatory (positive) relevance, blue = inhibitory;
* non-negative heatmaps use the sequential :data:`POSITIVE_CMAP` stretched from min(h) to max(h) (classic
  rollout has a large uniform floor; from 0 every map would look flat). Text tokens use the light
  sequential :data:`TEXT_POSITIVE_CMAP` (the token must stay readable on its background).

Heatmaps are drawn opaque, so every colour is exactly the colour bar's, and the image is shown under them only as
thin grey outlines (iso-lines of its luminance): an object's own colour never reads as relevance. Figure 2 shares
one scale per model column (symmetric for signed modes) with a colour bar under the column, and outlines the
known salient region (the synthetic set) with a dashed contour. Model names, order and nothing else
come from the model facts table; the style and the saver are :mod:`robustbench_dgsa.util.figures` (the user's
matplotlibrc is ignored, PNG at 200 dpi, PDFs and PNGs byte-identical across re-runs, atomic writes).
"""
from __future__ import annotations

import html
import os
import textwrap
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg", force=False)  # noqa: E402  (headless)
import numpy as np  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from robustbench_dgsa.models.registry import display_name, model_order  # noqa: E402
from robustbench_dgsa.util import atomic  # noqa: E402
from robustbench_dgsa.util.figures import grow_to_fit_texts, save_as, style  # noqa: E402

SIGNED_CMAP = "RdBu_r"
POSITIVE_CMAP = "viridis"
TEXT_POSITIVE_CMAP = "Reds"      # token backgrounds need a light low end for the text on them
SALIENT_STYLE = dict(colors="black", linewidths=0.9, linestyles="--")
OUTLINE_STYLE = dict(colors="0.15", linewidths=0.45, alpha=0.55)   # the image under a heatmap: grey, no hue
OUTLINE_LEVELS = 4
#: column width of Figure 2 (inches) and the tallest an image panel may get (a 1:4 portrait gets narrower instead)
GRID_COLUMN_IN = 1.75
GRID_MAX_PANEL_IN = 3.6


def scale_label(signed: bool) -> str:
    """The colour bar legend (three short lines): which map and what its ends mean."""
    return ("signed rollout\ndiverging map, 0 = white\nred +, blue −" if signed
            else "positive rollout\nsequential map\ndark = lowest, yellow = highest")


def _to_rgb(image: np.ndarray) -> np.ndarray:
    """uint8 (H,W), (H,W,1), (H,W,3) or (H,W,4) → (H,W,3) uint8 for display."""
    img = np.asarray(image)
    if img.dtype != np.uint8:
        img = np.clip(img, 0, 255).astype(np.uint8) if img.max() > 1.0 else (np.clip(img, 0, 1) * 255).astype(
            np.uint8)
    if img.ndim == 2:
        img = img[..., None]
    if img.shape[-1] == 1:
        img = np.repeat(img, 3, axis=-1)
    return img[..., :3]


def heatmap_norm(heatmap: np.ndarray, signed: bool) -> tuple[str, Normalize]:
    """(colormap name, norm): symmetric ±max|h| centred at 0 when signed, else [min h, max h]."""
    h = np.asarray(heatmap, dtype=np.float64)
    finite = h[np.isfinite(h)]
    if signed:
        m = float(np.abs(finite).max()) if finite.size else 1.0
        m = m if m > 0 else 1.0
        return SIGNED_CMAP, Normalize(vmin=-m, vmax=m)
    lo = float(finite.min()) if finite.size else 0.0
    hi = float(finite.max()) if finite.size else 1.0
    if hi <= lo:
        hi = lo + (abs(lo) if lo else 1.0)
    return POSITIVE_CMAP, Normalize(vmin=lo, vmax=hi)


def _show_heat(ax, heatmap: np.ndarray, signed: bool, extent, alpha: float = 1.0):
    cmap, norm = heatmap_norm(heatmap, signed)
    return ax.imshow(np.asarray(heatmap, dtype=np.float64), cmap=cmap, norm=norm, extent=extent, alpha=alpha,
                     interpolation="bilinear")


def image_outline(ax, image: np.ndarray, extent) -> None:
    """The image as thin grey iso-lines of its (lightly smoothed) luminance, drawn over a heatmap."""
    from scipy.ndimage import gaussian_filter, zoom
    img = _to_rgb(image).astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    h, w = img.shape
    step = max(1, int(np.ceil(max(h, w) / 160)))           # contours of a large image on a bounded grid
    lum = gaussian_filter(img[::step, ::step], 0.6 if step == 1 else 1.0)
    if max(h, w) < 96:                                       # small images: smooth lines on a finer grid
        lum = zoom(lum, 4, order=1)
    # a strip one sample high or wide (a 1-pixel axis): repeated to two, its iso-lines cross the strip
    lum = np.repeat(np.repeat(lum, 2 if lum.shape[0] < 2 else 1, axis=0), 2 if lum.shape[1] < 2 else 1, axis=1)
    if np.ptp(lum) < 1e-6:
        return
    levels = np.quantile(lum, np.linspace(0.2, 0.8, OUTLINE_LEVELS))
    levels = np.unique(levels)
    x0, x1, y0, y1 = extent[0], extent[1], extent[2], extent[3]
    xs = np.linspace(x0, x1, lum.shape[1], endpoint=False) + (x1 - x0) / lum.shape[1] / 2
    ys = np.linspace(y1, y0, lum.shape[0], endpoint=False) + (y0 - y1) / lum.shape[0] / 2
    ax.contour(xs, ys, lum, levels=levels, **OUTLINE_STYLE)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)


def _blank(ax) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    for s in ax.spines.values():
        s.set_visible(False)


# --- images ------------------------------------------------------------------------------------------

def plot_image_rollout(image_uint8: np.ndarray, heatmap: np.ndarray, out_png: str | os.PathLike, *,
                       signed: bool, title: str | None = None, out_pdf: str | os.PathLike | None = None,
                       footnote: str | None = None) -> Path:
    """One image: input | heatmap over the image's grey outline, with its colour bar; ``footnote``: a line under
    it. The canvas follows the image's aspect. Returns the PNG path."""
    return save_as(image_rollout_figure(image_uint8, heatmap, signed=signed, title=title, footnote=footnote),
                   out_png, out_pdf)


def image_rollout_figure(image_uint8: np.ndarray, heatmap: np.ndarray, *, signed: bool, title: str | None = None,
                         footnote: str | None = None) -> Figure:
    """The figure of :func:`plot_image_rollout`."""
    img = _to_rgb(image_uint8)
    H, W = img.shape[:2]
    extent = (0, W, H, 0)
    panel_h = min(GRID_MAX_PANEL_IN, max(0.5, 2.8 * H / W))
    note = _wrap_note(footnote, 100) if footnote else None
    with style():
        fig = Figure(figsize=(6.2, panel_h + 0.8 + (0.12 * len(note.split("\n")) if note else 0.0)),
                     layout="constrained")
        axes = fig.subplots(1, 2)
        axes[0].imshow(img, extent=extent, interpolation="nearest")
        axes[0].set_title("input")
        im = _show_heat(axes[1], heatmap, signed, extent)
        image_outline(axes[1], img, extent)
        axes[1].set_title("rollout (image as grey outline)", fontsize=9)
        cb = fig.colorbar(im, ax=axes[1], fraction=0.046, pad=0.04)
        cb.set_label(scale_label(signed), fontsize=7)
        for ax in axes:
            _blank(ax)
        if title:
            fig.suptitle(title, fontsize=9)
        if note:
            fig.supxlabel(note, fontsize=6.5, color="0.3")
    return grow_to_fit_texts(fig)


def _grid_size(imgs: Sequence[np.ndarray], cols: int, title: str | None, footnote: str | None) -> tuple[float, float]:
    """Figure 2's canvas from the images' aspect: each row as tall as its image at the column width (at most
    :data:`GRID_MAX_PANEL_IN`), plus room for the column titles (three lines), the colour bars with their
    three-line labels, the title and the wrapped footnote. :func:`grow_to_fit_texts` fixes what this misses."""
    rows = sum(min(GRID_MAX_PANEL_IN, max(0.35, GRID_COLUMN_IN * im.shape[0] / im.shape[1])) for im in imgs)
    note_lines = len(_wrap_note(footnote, int(22 * cols)).split("\n")) if footnote else 0
    height = rows + 0.6 + 0.95 + (0.3 if title else 0.0) + 0.12 * note_lines + 0.1
    return GRID_COLUMN_IN * cols + 0.3, height


def _wrap_note(note: str, width: int) -> str:
    """A footnote wrapped to ``width`` characters, its own line breaks kept (one paragraph per line)."""
    return "\n".join(w for para in note.split("\n") for w in textwrap.wrap(para, width) or [""])


def _column_norm(maps: Sequence[np.ndarray], signed: bool) -> tuple[str, Normalize]:
    """One scale for a whole column: symmetric ±max|h| (signed) or [min h, max h] over all its maps."""
    flat = np.concatenate([np.asarray(m, dtype=np.float64).ravel() for m in maps]) if len(maps) else np.zeros(1)
    return heatmap_norm(flat, signed)


def plot_rollout_grid(images: Sequence[np.ndarray] | np.ndarray, heatmaps_by_model: Mapping[str, np.ndarray],
                      out_png: str | os.PathLike, out_pdf: str | os.PathLike | None = None, **kw) -> Path:
    """:func:`rollout_grid_figure` saved as PNG (+ PDF when ``out_pdf`` is given); returns the PNG path."""
    return save_as(rollout_grid_figure(images, heatmaps_by_model, **kw), out_png, out_pdf)


def rollout_grid_figure(images: Sequence[np.ndarray] | np.ndarray, heatmaps_by_model: Mapping[str, np.ndarray], *,
                        signed_by_model: Mapping[str, bool] | None = None, row_labels: Sequence[str] | None = None,
                        column_titles: Mapping[str, str] | None = None, title: str | None = None,
                        overlay: bool = True, salient: Sequence[np.ndarray] | np.ndarray | None = None,
                        footnote: str | None = None) -> Figure:
    """Figure 2: rows = images, columns = the image then one rollout per model (in the mapping's order).

    ``heatmaps_by_model[name]`` is (K, H', W') for the K images (any H', W': stretched over the image).
    ``signed_by_model[name]`` selects the diverging colormap (default: signed iff the maps have negatives).
    Each model column shares one scale (symmetric when signed) shown by a colour bar under it, whose label
    names the map. Heatmaps are opaque (their colours are the bar's); with ``overlay`` the image is drawn over
    them as grey outlines. ``salient`` (K, H, W) bool masks are outlined (dashed) in every panel. ``footnote``: a
    line under the figure (e.g. why the columns' modes differ).
    """
    imgs = [_to_rgb(im) for im in images]
    K = len(imgs)
    names = list(heatmaps_by_model)
    for n in names:
        if len(heatmaps_by_model[n]) != K:
            raise ValueError(f"model {n!r} has {len(heatmaps_by_model[n])} heatmaps for {K} images")
    if K == 0:
        raise ValueError("plot_rollout_grid needs at least one image")
    signed_by_model = dict(signed_by_model or {})
    signed = {n: signed_by_model.get(n, bool(any((np.asarray(h) < 0).any() for h in heatmaps_by_model[n])))
              for n in names}
    norms = {n: _column_norm(heatmaps_by_model[n], signed[n]) for n in names}
    cols = 1 + len(names)
    with style():
        fig = Figure(figsize=_grid_size(imgs, cols, title, footnote), layout="constrained")
        axes = fig.subplots(K, cols, squeeze=False)
        for r, img in enumerate(imgs):
            H, W = img.shape[:2]
            extent = (0, W, H, 0)
            mask = None if salient is None else np.asarray(salient[r], dtype=float)
            axes[r, 0].imshow(img, extent=extent, interpolation="nearest")
            if row_labels is not None:
                axes[r, 0].set_ylabel(str(row_labels[r]), fontsize=8)
            for c, n in enumerate(names, start=1):
                ax = axes[r, c]
                cmap, norm = norms[n]
                im = ax.imshow(np.asarray(heatmaps_by_model[n][r], dtype=np.float64), cmap=cmap, norm=norm,
                               extent=extent, interpolation="bilinear")
                if overlay:
                    image_outline(ax, img, extent)
                if r == K - 1:
                    cb = fig.colorbar(im, ax=axes[:, c], location="bottom", shrink=0.9, aspect=12, pad=0.02)
                    cb.set_label(scale_label(signed[n]), fontsize=6.5)
                    cb.ax.xaxis.set_major_locator(MaxNLocator(nbins=4, prune="both"))  # few ticks, none at the ends
                    cb.ax.tick_params(labelsize=6.5)
            if mask is not None and mask.any() and mask.shape[:2] == (H, W):
                xs, ys = np.arange(W) + 0.5, np.arange(H) + 0.5      # pixel centres; row 0 at the top
                for ax in axes[r]:
                    ax.contour(xs, ys, mask, levels=[0.5], **SALIENT_STYLE)
                    ax.set_xlim(0, W)
                    ax.set_ylim(H, 0)
        axes[0, 0].set_title("image", fontsize=9)
        for c, n in enumerate(names, start=1):
            head = (column_titles or {}).get(n, display_name(n))
            # wrapped to the column's width (about 22 characters at 9 pt): long names are never clipped
            axes[0, c].set_title("\n".join(w for line in head.split("\n") for w in textwrap.wrap(line, 22) or [""]),
                                 fontsize=9)
        for ax in axes.flat:
            _blank(ax)
        if title:
            fig.suptitle(title, fontsize=10)
        if footnote:
            fig.supxlabel(_wrap_note(footnote, int(22 * cols)), fontsize=6.5, color="0.3")
    return grow_to_fit_texts(fig)     # whatever the image's aspect, no title, bar or note leaves the canvas


# --- text --------------------------------------------------------------------------------------------

def token_colors(scores: Sequence[float], signed: bool) -> np.ndarray:
    """(T, 4) RGBA background per token: signed → RdBu_r at s/max|s| (0 = white); else Reds stretched from
    min s (white) to max s."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return np.zeros((0, 4))
    if signed:
        m = float(np.abs(s).max()) or 1.0
        return colormaps[SIGNED_CMAP](0.5 + 0.5 * s / m)
    lo, hi = float(s.min()), float(s.max())
    t = (s - lo) / (hi - lo) if hi > lo else np.zeros_like(s)
    return colormaps[TEXT_POSITIVE_CMAP](np.clip(t, 0, 1) * 0.85)  # keep the darkest end readable


def _text_colour(rgba: np.ndarray) -> str:
    lum = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2]
    return "#000000" if lum > 0.5 else "#ffffff"


def _hex(rgba: np.ndarray) -> str:
    return "#%02x%02x%02x" % tuple(int(round(float(v) * 255)) for v in rgba[:3])


def _check_text_inputs(tokens_by_model, scores_by_model) -> list[str]:
    names = list(tokens_by_model)
    for n in names:
        if n not in scores_by_model:
            raise ValueError(f"no scores for model {n!r}")
        if len(tokens_by_model[n]) != len(scores_by_model[n]):
            raise ValueError(f"model {n!r}: {len(tokens_by_model[n])} tokens but {len(scores_by_model[n])} scores")
    return names


def render_text_rollout_html(tokens_by_model: Mapping[str, Sequence[str]],
                             scores_by_model: Mapping[str, Sequence[float]], out_html: str | os.PathLike, *,
                             signed_by_model: Mapping[str, bool] | None = None, title: str | None = None,
                             caption: str | None = None, labels: Sequence[str] | None = None) -> Path:
    """Figure 3 as HTML: one block per model, each token's background shaded by its rollout relevance.

    Hovering a token shows its score. Deterministic output (no dates). Returns the path.
    """
    names = _check_text_inputs(tokens_by_model, scores_by_model)
    signed_by_model = dict(signed_by_model or {})
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title or 'Attention rollout (text)')}</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto;line-height:1.9}"
             ".tok{padding:0.1em 0.15em;margin:0 0.05em;border-radius:0.2em;white-space:pre}"
             ".model{margin:1em 0 0.3em 0;font-weight:bold}.note{color:#555;font-size:0.9em}</style>",
             "</head><body>"]
    if title:
        parts.append(f"<h2>{html.escape(title)}</h2>")
    if caption:
        parts.append(f'<p class="note">{html.escape(caption)}</p>')
    guides: dict[bool, str] = {}
    for i, n in enumerate(names):
        toks = list(tokens_by_model[n])
        s = np.asarray(scores_by_model[n], dtype=np.float64)
        signed = signed_by_model.get(n, bool((s < 0).any()))
        cols = token_colors(s, signed)
        label = labels[i] if labels is not None else f"({chr(ord('a') + i)}) {display_name(n)}"
        scale = "signed, red = positive, blue = negative" if signed else "non-negative"
        parts.append(f'<div class="model">{html.escape(label)} <span class="note">({scale})</span></div><div>')
        spans = []
        for t, v, c in zip(toks, s, cols):
            spans.append(f'<span class="tok" style="background:{_hex(c)};color:{_text_colour(c)}" '
                         f'title="{v:.4g}">{html.escape(str(t))}</span>')
        parts.append(" ".join(spans))
        parts.append("</div>")
        guides.setdefault(signed, reading_guide(signed))
    parts += [f'<p class="note">{html.escape(g)}</p>' for g in guides.values()]   # how to read the colours
    parts.append("</body></html>")
    out = Path(out_html)
    atomic.write_text(out, "\n".join(parts) + "\n")
    return out


def _wrap(tokens: Sequence[str], max_chars: int) -> list[list[int]]:
    lines: list[list[int]] = [[]]
    used = 0
    for i, t in enumerate(tokens):
        w = len(t) + 1
        if lines[-1] and used + w > max_chars:
            lines.append([])
            used = 0
        lines[-1].append(i)
        used += w
    return lines


def plot_text_rollout(tokens_by_model: Mapping[str, Sequence[str]], scores_by_model: Mapping[str, Sequence[float]],
                      out_png: str | os.PathLike, out_pdf: str | os.PathLike | None = None, *,
                      signed_by_model: Mapping[str, bool] | None = None, title: str | None = None,
                      labels: Sequence[str] | None = None, max_chars: int = 90, fontsize: float = 9.0,
                      max_tokens: int | None = 200, note: str | None = None) -> Path:
    """Figure 3 as PNG (and PDF): one panel per model ((a) Transformer, (b) DT, (c) DGT, ...), tokens in a
    monospace font on backgrounds shaded by relevance, wrapped at ``max_chars`` characters per line; under
    each panel's label its colour scale (the bar with its end values), and at the foot a one-line reading
    guide (:func:`reading_guide`) and ``note`` (e.g. what the models were trained on).

    Only the first ``max_tokens`` tokens are drawn (an ellipsis marks the cut). Returns the PNG path.
    """
    return save_as(text_rollout_figure(tokens_by_model, scores_by_model, signed_by_model=signed_by_model,
                                       title=title, labels=labels, max_chars=max_chars, fontsize=fontsize,
                                       max_tokens=max_tokens, note=note), out_png, out_pdf)


def reading_guide(signed: bool) -> str:
    """One line saying how to read a token's colour (docs/METHODS.md, Attention rollout: signed rows are
    L1-normalised with their signs kept)."""
    if signed:
        return ("Signed: red = added to the class token, blue = subtracted; deep blue weighs as much as deep red "
                "and is no vote against the class.")
    return "Positive (classic rollout): darker red = more attention flows from this token into the class token."


def _draw_scale(ax, x: float, y: float, lo: float, hi: float, signed: bool, fontsize: float) -> None:
    """A small horizontal colour bar at (x, y) inches (top-left) with its end values and, when signed, 0."""
    cmap = colormaps[SIGNED_CMAP] if signed else colormaps[TEXT_POSITIVE_CMAP]
    ramp = np.linspace(0.0, 1.0, 256)[None, :]
    if not signed:
        ramp = ramp * 0.85                                           # as token_colors: the darkest end readable
    w, h = 1.6, 0.09
    ax.imshow(ramp, cmap=cmap, vmin=0.0, vmax=1.0, extent=(x, x + w, y + h, y), aspect="auto",
              interpolation="bilinear")
    ax.add_patch(Rectangle((x, y), w, h, facecolor="none", edgecolor="0.4", linewidth=0.4))
    small = fontsize - 2.0
    ax.text(x - 0.05, y + h / 2, _fmt_signed(lo), fontsize=small, va="center", ha="right")
    ax.text(x + w + 0.05, y + h / 2, _fmt_signed(hi) + ("" if signed else "  (white = lowest)"),
            fontsize=small, va="center", ha="left")
    if signed:
        ax.text(x + w / 2, y + h + 0.02, "0", fontsize=small, va="top", ha="center")


def _fmt_signed(v: float) -> str:
    return f"{v:+.3g}".replace("-", "−")


def text_rollout_figure(tokens_by_model: Mapping[str, Sequence[str]], scores_by_model: Mapping[str, Sequence[float]],
                        *, signed_by_model: Mapping[str, bool] | None = None, title: str | None = None,
                        labels: Sequence[str] | None = None, max_chars: int = 90, fontsize: float = 9.0,
                        max_tokens: int | None = 200, note: str | None = None) -> Figure:  # long: one layout pass
    """The figure of :func:`plot_text_rollout`."""
    names = _check_text_inputs(tokens_by_model, scores_by_model)
    signed_by_model = dict(signed_by_model or {})
    char_w = 0.602 * fontsize / 72.0       # DejaVu Sans Mono advance, inches
    line_h = 1.55 * fontsize / 72.0
    width_in = max_chars * char_w + 0.4
    blocks = []
    for i, n in enumerate(names):
        toks = [str(t) for t in tokens_by_model[n]]
        s = np.asarray(scores_by_model[n], dtype=np.float64)
        cut = max_tokens is not None and len(toks) > max_tokens
        if cut:
            toks, s = toks[:max_tokens], s[:max_tokens]
        signed = signed_by_model.get(n, bool((s < 0).any()))
        label = labels[i] if labels is not None else f"({chr(ord('a') + i)}) {display_name(n)}"
        blocks.append((label, toks, s, signed, _wrap([t.replace("\n", " ") for t in toks], max_chars), cut))
    title_h = 0.35 if title else 0.0
    scale_h = 0.28
    heights = [line_h * (len(b[4]) + 1.4) + scale_h for b in blocks]
    foot_pt = fontsize - 2.0
    foot = [reading_guide(sig) for sig in dict.fromkeys(b[3] for b in blocks)]
    foot_w = int((width_in - 0.3) / (0.49 * foot_pt / 72.0))  # characters per line
    foot_lines = [w for para in foot + ([note] if note else []) for w in textwrap.wrap(para, foot_w)]
    foot_h = 1.45 * foot_pt / 72.0 * len(foot_lines) + (0.1 if foot_lines else 0.0)
    height_in = title_h + sum(heights) + 0.15 + foot_h
    with style():
        fig = Figure(figsize=(width_in, height_in))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, width_in)
        ax.set_ylim(height_in, 0)
        ax.axis("off")
        y = 0.1
        if title:
            ax.text(0.2, y + 0.15, title, fontsize=fontsize + 1, va="center", ha="left", weight="bold")
            y += title_h
        for (label, toks, s, signed, lines, cut), h in zip(blocks, heights):
            key = "   (signed: white = 0, red +, blue −)" if signed else "   (positive: white = lowest)"
            ax.text(0.2, y + 0.5 * line_h, label + key, fontsize=fontsize, va="center", ha="left", weight="bold")
            y += line_h * 1.2
            m = float(np.abs(s).max()) if s.size else 1.0
            lo, hi = (-m, m) if signed else ((float(s.min()), float(s.max())) if s.size else (0.0, 1.0))
            _draw_scale(ax, 0.2 + 0.6, y + 0.03, lo, hi, signed, fontsize)
            y += scale_h
            cols = token_colors(s, signed)
            for li, line in enumerate(lines):
                x = 0.2
                for j in line:
                    t = toks[j].replace("\n", " ")
                    w = len(t) * char_w
                    ax.add_patch(Rectangle((x - 0.01, y + 0.08 * line_h), w + 0.02, 0.84 * line_h,
                                           facecolor=cols[j], edgecolor="none"))
                    ax.text(x, y + 0.5 * line_h, t, fontsize=fontsize, family="DejaVu Sans Mono", va="center",
                            ha="left", color=_text_colour(cols[j]))
                    x += w + char_w
                if cut and li == len(lines) - 1:
                    ax.text(x, y + 0.5 * line_h, "…", fontsize=fontsize, family="DejaVu Sans Mono",
                            va="center", ha="left")
                y += line_h
            y = y + 0.2 * line_h
        for line in foot_lines:
            ax.text(0.2, y + 0.5 * 1.45 * foot_pt / 72.0, line, fontsize=foot_pt, va="center",
                    ha="left", color="0.3")
            y += 1.45 * foot_pt / 72.0
    return fig


# --- figures from stored rollout sets (the report's entry points) ------------------------------------

def pick_sets(sets: Sequence, kind: str, models: Sequence[str] | None = None,
              dataset: str | None = None) -> list:
    """From stored rollout sets (:class:`robustbench_dgsa.rollout.runs.RolloutSet`), one set per model that
    all show the same inputs: the (dataset, data_key) group covering the most models (ties: the group whose
    dataset/key sorts first); per model the set with the lowest seed, then run id. In the model table's order
    (ViT, DViT, DGViT, ...; Transformer, DT, DGT, ...), then any other model alphabetically."""
    cands = [s for s in sets if s.kind == kind and (dataset is None or s.dataset == dataset)
             and (models is None or s.model in models)]
    if not cands:
        return []
    groups: dict[tuple[str, str], list] = {}
    for s in cands:
        groups.setdefault((s.dataset, s.data_key), []).append(s)
    best = sorted(groups.items(), key=lambda kv: (-len({s.model for s in kv[1]}), kv[0]))[0][1]
    per_model: dict[str, object] = {}
    for s in sorted(best, key=lambda s: (s.seed, s.run_id)):
        per_model.setdefault(s.model, s)
    return [per_model[m] for m in model_order(per_model)]


def _class_name(s, label: int) -> str:
    classes = s.classes
    if classes and 0 <= int(label) < len(classes):
        return str(classes[int(label)])
    return str(int(label))


def render_figure2(sets: Sequence, out_png: str | os.PathLike, out_pdf: str | os.PathLike | None = None, *,
                   max_images: int = 4, models: Sequence[str] | None = None, dataset: str | None = None,
                   title: str | None = None) -> dict | None:
    """Figure 2 from stored image rollout sets: rows = the first ``max_images`` images, columns = image, then
    each model (ViT, DViT, DGViT, ...). Returns a description (models, runs, modes, dataset) for provenance,
    or None when there is no image set."""
    chosen = pick_sets(sets, "image", models, dataset)
    if not chosen:
        return None
    k = min(max_images, min(len(s) for s in chosen))
    ref = chosen[0]
    heat = {s.model: s.heatmaps[:k] for s in chosen}
    signed = {s.model: s.signed for s in chosen}
    titles = {s.model: f"{display_name(s.model)}\n[{s.mode}]" for s in chosen}
    row_labels = [_class_name(ref, ref.labels[i]) for i in range(k)]
    sal = ref.salient[:k] if getattr(ref, "salient", None) is not None else None
    plot_rollout_grid(ref.images[:k], heat, out_png, out_pdf, signed_by_model=signed, row_labels=row_labels,
                      column_titles=titles, title=title, salient=sal)
    return {"dataset": ref.dataset, "data_key": ref.data_key, "images": k, "salient_outlined": sal is not None,
            "models": [s.model for s in chosen], "runs": [s.run_id for s in chosen],
            "seeds": [s.seed for s in chosen], "specs": [s.spec.tag for s in chosen],
            "files": [str(s.path) for s in chosen]}


def render_figure3(sets: Sequence, out_png: str | os.PathLike, out_pdf: str | os.PathLike | None = None,
                   out_html: str | os.PathLike | None = None, *, index: int = 0,
                   models: Sequence[str] | None = None, dataset: str | None = None,
                   title: str | None = None) -> dict | None:
    """Figure 3 from stored text rollout sets: text number ``index`` shaded per model ((a) Transformer,
    (b) DT, (c) DGT, ...). Writes PNG (+ PDF, + HTML when given; the image carries ``title`` only when given —
    the report puts it in the caption). Returns a provenance description or None."""
    chosen = pick_sets(sets, "text", models, dataset)
    if not chosen:
        return None
    i = min(index, min(len(s) for s in chosen) - 1)
    ref = chosen[0]
    toks = {s.model: s.tokens[i] for s in chosen}
    scores = {s.model: s.scores[i] for s in chosen}
    signed = {s.model: s.signed for s in chosen}
    labels = [f"({chr(ord('a') + j)}) {display_name(s.model)} [{s.mode}]" for j, s in enumerate(chosen)]
    label = _class_name(ref, ref.labels[i])
    t = title or f"{ref.dataset} example {i} (label: {label})"
    plot_text_rollout(toks, scores, out_png, out_pdf, signed_by_model=signed, title=title, labels=labels)
    if out_html is not None:
        render_text_rollout_html(toks, scores, out_html, signed_by_model=signed, title=t, labels=labels)
    return {"dataset": ref.dataset, "data_key": ref.data_key, "index": i, "label": label,
            "models": [s.model for s in chosen], "runs": [s.run_id for s in chosen],
            "seeds": [s.seed for s in chosen], "specs": [s.spec.tag for s in chosen],
            "files": [str(s.path) for s in chosen]}
