"""util.figures.save_figure: an opaque figure's PNG is written as RGB (fewer bytes, the same picture); a figure
with see-through pixels keeps its alpha channel."""
from __future__ import annotations

import io

import matplotlib
import numpy as np
from PIL import Image

from robustbench_dgsa.util.figures import DPI, save_figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _figure(transparent: bool):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.imshow(np.linspace(0, 1, 64).reshape(8, 8), cmap="viridis")
    ax.set_title("x")
    if transparent:
        fig.patch.set_alpha(0.0)
        ax.patch.set_alpha(0.0)
    return fig


def test_opaque_png_is_rgb_with_the_pixels_matplotlib_drew(tmp_path):
    fig = _figure(transparent=False)
    reference = io.BytesIO()
    fig.savefig(reference, format="png", dpi=DPI)          # matplotlib's own RGBA file of the same figure
    path = save_figure(fig, tmp_path, "f", ("png",))[0]
    plt.close(fig)
    with Image.open(path) as im, Image.open(reference) as ref:
        assert im.mode == "RGB" and ref.mode == "RGBA"
        assert round(im.info["dpi"][0]) == DPI
        assert np.array_equal(np.asarray(im), np.asarray(ref.convert("RGB")))
    assert path.stat().st_size < len(reference.getvalue())


def test_png_with_transparent_pixels_keeps_its_alpha(tmp_path):
    fig = _figure(transparent=True)
    reference = io.BytesIO()
    fig.savefig(reference, format="png", dpi=DPI)
    path = save_figure(fig, tmp_path, "t", ("png",))[0]
    plt.close(fig)
    with Image.open(path) as im, Image.open(reference) as ref:
        assert im.mode == "RGBA" and im.getchannel("A").getextrema()[0] < 255
        assert round(im.info["dpi"][0]) == DPI and np.array_equal(np.asarray(im), np.asarray(ref))
