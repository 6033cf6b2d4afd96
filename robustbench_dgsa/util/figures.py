"""The one figure style and the one figure saver (report figures, rollout plots, CD diagrams).

:func:`style` applies matplotlib's *defaults* plus :data:`STYLE` — never the user's ``matplotlibrc`` — and
:func:`save_figure` re-applies it while saving, so the look, the resolution (:data:`DPI` for every PNG) and the
bytes do not depend on the machine's configuration. PNGs carry no software tag, PDFs no dates and a fixed
producer: the same figure gives the same bytes on every run. Files are written atomically.

Within :func:`saving_in_background` (the report builder uses it), :func:`save_figure` hands each figure to a
forked child process and returns at once, so encoding PNGs and subsetting PDF fonts run on another core while the
caller draws the next figure; the bytes are the same, and leaving the block waits for every file.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
import warnings
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
    """Write ``<stem>.<fmt>`` for each format (PNG at :data:`DPI`, vector PDF) atomically; returns the paths.
    Within :func:`saving_in_background` the files are written by a child process (see there)."""
    paths = [Path(out_dir) / f"{stem}.{ext}" for ext in formats]
    _write_or_hand_off(fig, paths)
    return paths


def _write_or_hand_off(fig: Figure, paths: Sequence[Path]) -> None:
    """Write the files now, or (within :func:`saving_in_background`) have one child process write them all, in
    the same order: drawing a figure can move its layout, so a later format depends on the earlier ones."""
    if _BACKGROUND is not None:
        _BACKGROUND.save(fig, paths)
    else:
        _write_files(fig, paths)


def _write_files(fig: Figure, paths: Sequence[Path]) -> None:
    with style():
        for path in paths:
            ext = path.suffix.lstrip(".").lower()
            with atomic.atomic_path(path) as tmp:
                if ext == "png":
                    _save_png(fig, tmp)
                else:
                    fig.savefig(tmp, format=ext, dpi=DPI, metadata=_META.get(ext), bbox_inches=None)


#: the most figures written by child processes at once (and no more than the CPUs this process may use)
MOST_BACKGROUND_SAVES = 4


class _ChildSaves:
    """Figures being written by forked child processes: at most ``most`` at once; :meth:`wait` reaps them all and
    raises the first failure (an ``OSError`` keeps its errno, so a full disk still reads as one)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.running: list[tuple[int, int, str]] = []   # (pid, read end of the child's error pipe, file name)
        self.failure: BaseException | None = None

    def save(self, fig: Figure, paths: Sequence[Path]) -> None:
        if threading.active_count() > 1:   # a lock another thread holds would stay locked in the child
            _write_files(fig, paths)
            return
        while len(self.running) >= self.most:
            self._reap(self.running.pop(0))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:                                      # the child: write the files, report, never return
            os.close(read_end)
            status = 0
            try:
                warnings.showwarning = _warning_to_stderr
                _write_files(fig, paths)
            except BaseException as e:                   # noqa: BLE001 - every failure goes to the parent
                status = 1
                os.write(write_end, json.dumps({"type": type(e).__name__, "message": str(e),
                                                "errno": getattr(e, "errno", None)}).encode()[:60000])
            finally:
                os._exit(status)
        os.close(write_end)
        self.running.append((pid, read_end, paths[0].name))

    def wait(self) -> None:
        while self.running:
            self._reap(self.running.pop(0))
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure

    def _reap(self, child: tuple[int, int, str]) -> None:
        pid, read_end, name = child
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            said = pipe.read()
        if (status == 0 and not said) or self.failure is not None:
            return
        err = json.loads(said) if said else {"type": "", "message": f"the process writing it ended with status "
                                                                   f"{os.waitstatus_to_exitcode(status)}"}
        text = f"figure {name} could not be written: {err['type'] + ': ' if err['type'] else ''}{err['message']}"
        if err.get("errno"):
            self.failure = OSError(err["errno"], text)
        elif err["type"] == "UserError":
            self.failure = UserError(err["message"])
        else:
            self.failure = RuntimeError(text)


def _warning_to_stderr(message, category, filename, lineno, file=None, line=None) -> None:
    """A child's warning line, written straight to stderr's file descriptor (no Python-level lock involved)."""
    os.write(2, f"warning: {message}\n".encode(errors="replace"))


_BACKGROUND: _ChildSaves | None = None


def background_saves_possible() -> bool:
    """Whether :func:`saving_in_background` can use child processes here: Linux (``fork`` without the caveats it
    has on macOS) and more than one CPU available to this process."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and len(os.sched_getaffinity(0)) > 1


@contextlib.contextmanager
def saving_in_background(most: int | None = None) -> Iterator[None]:
    """Within the block, :func:`save_figure` (and :func:`save_as`) returns at once and a forked child process writes
    the files (same bytes, atomically), at most ``most`` at a time (default: the CPUs this process may use, at
    most :data:`MOST_BACKGROUND_SAVES`: the caller mostly waits for them). Leaving the block waits for every
    child, also on an error; a child's failure is raised then (the error's errno kept). Where
    :func:`background_saves_possible` is false, inside another such block, or while this process runs other
    threads (a lock one of them holds would stay locked in the child), figures are written in place as usual.
    A caller must not read a file saved within the block before leaving it."""
    global _BACKGROUND
    if _BACKGROUND is not None or not background_saves_possible():
        yield
        return
    cpus = len(os.sched_getaffinity(0))
    saves = _ChildSaves(most if most is not None else min(MOST_BACKGROUND_SAVES, cpus))
    _BACKGROUND = saves
    try:
        yield
    except BaseException:
        _BACKGROUND = None
        with contextlib.suppress(Exception):
            saves.wait()                                  # the error in the block is the one to report
        raise
    _BACKGROUND = None
    saves.wait()


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
    entries skipped, e.g. an optional PDF), in that order; see :func:`save_figure`. Returns the first path."""
    paths = [_checked_format(Path(p)) for p in (path, *more) if p is not None]
    _write_or_hand_off(fig, paths)
    return paths[0]


def _checked_format(path: Path) -> Path:
    fmt = path.suffix.lstrip(".").lower() or "png"
    if fmt not in ("png", "pdf", "svg"):
        raise UserError(f"figure format must be .png, .pdf or .svg, got {path.name!r}")
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    return path.with_name(f"{stem}.{fmt}")


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
