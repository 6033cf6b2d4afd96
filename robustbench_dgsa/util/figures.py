"""The one figure style and the one figure saver (report figures, rollout plots, CD diagrams).

:func:`style` applies matplotlib's *defaults* plus :data:`STYLE` — never the user's ``matplotlibrc`` — and
:func:`save_figure` re-applies it while saving, so the look, the resolution (:data:`DPI` for every PNG) and the
bytes do not depend on the machine's configuration. PNGs carry no software tag, PDFs no dates and a fixed
producer: the same figure gives the same bytes on every run. Files are written atomically.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Iterator, Sequence

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib as mpl  # noqa: E402
import matplotlib.text  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from robustbench_dgsa.util import atomic  # noqa: E402
from robustbench_dgsa.util.errors import UserError  # noqa: E402

#: resolution of every PNG the suite writes (the PDF is vector)
DPI = 200

# Fixed look: the same bytes on every machine with the same library versions.
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.0,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "savefig.bbox": None,
    "savefig.pad_inches": 0.1,
    "savefig.transparent": False,
    "savefig.facecolor": "white",
    "savefig.edgecolor": "white",
    "figure.facecolor": "white",
    "pdf.compression": 6,
    "pdf.fonttype": 42,
    "path.simplify": False,
    "svg.hashsalt": "dgsa-bench",
    "image.interpolation": "antialiased",
}
_META = {"png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None, "Producer": None,
                                            "Creator": "dgsa-bench"}}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Matplotlib defaults + :data:`STYLE`, whatever the user's matplotlibrc says; restored afterwards."""
    with mpl.rc_context():
        mpl.rcdefaults()
        mpl.rcParams.update(STYLE)
        yield


def save_figure(fig: Figure, out_dir: str | Path, stem: str, formats: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Write ``<stem>.<fmt>`` for each format (PNG at :data:`DPI`, vector PDF) atomically; returns the paths."""
    paths = []
    with style():
        for ext in formats:
            path = Path(out_dir) / f"{stem}.{ext}"
            with atomic.atomic_path(path) as tmp:
                if ext == "png":
                    _save_png(fig, tmp)
                else:
                    fig.savefig(tmp, format=ext, dpi=DPI, metadata=_META.get(ext), bbox_inches=None)
            paths.append(path)
    return paths


def _save_png(fig: Figure, path: Path) -> None:
    """Matplotlib's RGBA PNG, written as RGB when every pixel is opaque (the style's white figure background):
    the same picture in about 12 % fewer bytes, which matters for the committed reports. Matplotlib's picture is
    passed on uncompressed and written once at zlib's default level (PIL's ``optimize`` made files ~2 % smaller
    and took 4-6x as long: ~1.5 s of the main job's report)."""
    from PIL import Image
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=_META["png"], bbox_inches=None,
                pil_kwargs={"compress_level": 0})
    with Image.open(buf) as im:
        opaque = im.mode == "RGBA" and im.getchannel("A").getextrema() == (255, 255)
        (im.convert("RGB") if opaque else im).save(path, format="png", compress_level=6, dpi=(DPI, DPI))


def save_as(fig: Figure, path: str | Path, *more: str | Path | None) -> Path:
    """Save one file, the format from its suffix (png, pdf, svg), and the same figure to each of ``more`` (None
    entries skipped, e.g. an optional PDF); see :func:`save_figure`. Returns the first path."""
    first = _save_one(fig, path)
    for target in (t for t in more if t is not None):
        _save_one(fig, target)
    return first


def _save_one(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    if fmt not in ("png", "pdf", "svg"):
        raise UserError(f"figure format must be .png, .pdf or .svg, got {path.name!r}")
    return save_figure(fig, path.parent, path.name[: -len(path.suffix)] if path.suffix else path.name, (fmt,))[0]


def _text_boxes(fig: Figure) -> list:
    """(text, window extent in pixels at :data:`DPI`) of every visible, non-empty text of ``fig`` (drawn once)."""
    with style():
        fig.set_dpi(DPI)
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(matplotlib.text.Text)
                if t.get_visible() and t.get_text().strip()]


def text_overflow(fig: Figure, pad_px: float = 0.5) -> list[str]:
    """Texts (titles, labels, tick labels, legend entries) drawn partly outside the figure: a list of them
    (empty = nothing clipped). Measured on the Agg renderer at :data:`DPI`."""
    boxes = _text_boxes(fig)
    W, H = fig.bbox.width, fig.bbox.height
    return [text for text, bb in boxes
            if bb.x0 < -pad_px or bb.y0 < -pad_px or bb.x1 > W + pad_px or bb.y1 > H + pad_px]


def grow_to_fit_texts(fig: Figure, margin_px: float = 6.0, rounds: int = 6) -> Figure:
    """Enlarge a (constrained- or tight-layout) figure until every text lies inside it: each round measures how
    far the texts reach past each edge and adds that (plus ``margin_px``) to the canvas, then lays it out again.
    A figure that already fits is left as it is. Returns ``fig``."""
    for _ in range(rounds):
        boxes = _text_boxes(fig)
        if not boxes:
            return fig
        W, H = fig.bbox.width, fig.bbox.height
        over_x = max(0.0, -min(bb.x0 for _, bb in boxes)) + max(0.0, max(bb.x1 for _, bb in boxes) - W)
        over_y = max(0.0, -min(bb.y0 for _, bb in boxes)) + max(0.0, max(bb.y1 for _, bb in boxes) - H)
        if over_x <= 0.5 and over_y <= 0.5:
            return fig
        w_in, h_in = fig.get_size_inches()
        fig.set_size_inches(w_in + (over_x + margin_px if over_x > 0.5 else 0.0) / DPI,
                            h_in + (over_y + margin_px if over_y > 0.5 else 0.0) / DPI)
    return fig
