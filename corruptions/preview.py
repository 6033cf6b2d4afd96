"""A labelled PNG grid of corrupted examples: one row per (image, corruption), one column per severity.

The images are corrupted with the same keyed randomness as a regeneration (``indices`` default ``0..K-1``),
so image ``i`` of the grid shows exactly what row ``i`` of each severity block of a regenerated file holds.
Uses Matplotlib's object API (no pyplot, no global backend change) and writes the PNG atomically.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .atomic import atomic_path
from .errors import CorruptionError


def _row_name(name: str, frost: Any) -> str:
    """A row's corruption name; frost drawn with the procedural substitute says so on every one of its rows."""
    if name == "frost" and str(getattr(frost, "source", "")).startswith("procedural"):
        return "frost (procedural)"
    return name


def preview_grid(images: np.ndarray, corruptions: str | Sequence[str], severities: str | int | Sequence[int],
                 out_png: str | os.PathLike, *, constants: str | None = None, seed: int = 0, frost: Any = None,
                 device: str | None = None,
                 indices: Sequence[int] | None = None, title: str | None = None, cell_px: int = 64) -> Path:
    """Draw ``images`` (K, H, W, 3) uint8 under each corruption and severity into ``out_png``.

    Layout: rows = images x corruptions (grouped by corruption), columns = "clean" then the severities.
    ``constants``: as :func:`corruptions.corrupt` (default: by image size).
    Returns the PNG path.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from . import api
    from .layout.checks import _resolve_names, _resolve_severities, check_images

    x = check_images(images)
    names = _resolve_names(corruptions)
    sevs = _resolve_severities(severities)
    k, h, w = x.shape[:3]
    idx = np.arange(k) if indices is None else np.asarray(indices, dtype=np.int64)
    if idx.shape != (k,):
        raise CorruptionError(f"indices must have {k} entries, got {idx.shape}")
    if "frost" in names and (frost is None or isinstance(frost, (str, os.PathLike))):
        from .frost import load_frost_textures
        frost = load_frost_textures(frost)
    out = Path(out_png)
    if out.suffix.lower() != ".png":
        raise CorruptionError(f"preview must be a .png file, got {out}")

    scale = max(1, int(round(cell_px / max(h, w))))
    pad = 4
    ch, cw = h * scale, w * scale
    n_rows, n_cols = len(names) * k, 1 + len(sevs)
    mosaic = np.full((n_rows * (ch + pad) + pad, n_cols * (cw + pad) + pad, 3), 255, dtype=np.uint8)

    def put(r: int, c: int, img: np.ndarray) -> None:
        y0, x0 = pad + r * (ch + pad), pad + c * (cw + pad)
        mosaic[y0:y0 + ch, x0:x0 + cw] = np.repeat(np.repeat(img, scale, axis=0), scale, axis=1)

    row_labels = []
    for ci, name in enumerate(names):
        for i in range(k):
            put(ci * k + i, 0, x[i])
            row_labels.append(f"{_row_name(name, frost)} · #{int(idx[i])}")
        for si, sev in enumerate(sevs):
            res = api.corrupt(x, name, sev, constants=constants, seed=seed, indices=idx, device=device, frost=frost)
            for i in range(k):
                put(ci * k + i, 1 + si, np.asarray(res[i]))

    dpi = 100
    fig_w = mosaic.shape[1] / dpi + 1.9 + 0.2
    lines = textwrap.wrap(title, width=max(20, int(fig_w * dpi / 6.5))) if title else []
    left, top = 1.9, 0.35 + (0.17 * len(lines) + 0.1 if lines else 0.0)  # inches for labels and title
    fig_h = mosaic.shape[0] / dpi + top + 0.2
    fig = Figure(figsize=(fig_w, fig_h), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((left / fig_w, 0.2 / fig_h, mosaic.shape[1] / dpi / fig_w, mosaic.shape[0] / dpi / fig_h))
    ax.imshow(mosaic, interpolation="nearest")
    ax.set_xticks([pad + c * (cw + pad) + cw / 2 for c in range(n_cols)])
    ax.set_xticklabels(["clean"] + [f"severity {s}" for s in sevs], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([pad + r * (ch + pad) + ch / 2 for r in range(n_rows)])
    ax.set_yticklabels(row_labels, fontsize=7)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for ci in range(1, len(names)):  # a rule between corruption groups
        ax.axhline(ci * k * (ch + pad) + pad / 2, color="0.4", linewidth=0.8)
    if lines:
        fig.suptitle("\n".join(lines), fontsize=9, y=1 - 0.08 / fig_h, va="top")

    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return out
