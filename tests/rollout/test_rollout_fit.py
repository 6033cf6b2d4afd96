"""Rollout figures a newcomer sees: any image aspect keeps every title, colour bar and note on the canvas; the
figure says what the models were trained on; the text rollout ranks tokens by magnitude, prints them cleanly and
carries a colour scale with a reading guide."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

# (height, width): 1:4 portrait, 3:4, square, a 3:2 photograph, a 4:1 panorama
ASPECTS = [(80, 20), (80, 60), (48, 48), (60, 90), (20, 80)]
TITLES = {f"{i}:{m}": f"{m.upper()}\nsigned · seed 0\ncat 47%" for i, m in enumerate(("vit", "dvit", "dgvit"))}
NOTE = ("models trained on CIFAR-10: 10 classes (airplane, automobile, bird, cat, deer, dog, frog, horse, ship, "
        "truck); the image is resized to 32 × 32; every prediction is one of these classes, whatever the input "
        "shows.\npositive = classic rollout (MHSA maps are non-negative); signed = rows L1-normalised, sign kept "
        "(DiffAttn/DGSA maps subtract); the positive mode shows every model's positive part on one footing. "
        "Column titles: model, rollout mode and training seed, predicted class and its probability.")


@pytest.mark.parametrize("hw", ASPECTS, ids=["1x4", "3x4", "1x1", "3x2", "4x1"])
def test_figure2_of_any_aspect_keeps_every_text_inside_the_canvas(hw):
    from robustbench_dgsa.rollout.plots import rollout_grid_figure
    from robustbench_dgsa.util.figures import text_overflow
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (1, *hw, 3), dtype=np.uint8)
    heat = {k: rng.standard_normal((1, *hw)) for k in TITLES}
    fig = rollout_grid_figure(img, heat, signed_by_model={k: True for k in heat}, column_titles=TITLES,
                              footnote=NOTE)
    assert text_overflow(fig, pad_px=0.0) == []
    w, h = fig.get_size_inches()
    assert 0.2 < h / w < 2.5                     # sized from the image, not an extreme canvas


@pytest.mark.parametrize("hw", ASPECTS, ids=["1x4", "3x4", "1x1", "3x2", "4x1"])
def test_one_model_figure_of_any_aspect_keeps_every_text_inside_the_canvas(hw):
    from robustbench_dgsa.rollout.plots import image_rollout_figure
    from robustbench_dgsa.util.figures import text_overflow
    rng = np.random.default_rng(1)
    fig = image_rollout_figure(rng.integers(0, 256, (*hw, 3), dtype=np.uint8), rng.standard_normal(hw),
                               signed=True, title="DGViT — signed · seed 0 rollout; predicted cat 47%",
                               footnote=NOTE)
    assert text_overflow(fig, pad_px=0.0) == []


def test_grow_to_fit_enlarges_a_canvas_too_small_for_its_texts():
    from matplotlib.figure import Figure

    from robustbench_dgsa.util.figures import grow_to_fit_texts, text_overflow
    fig = Figure(figsize=(2.0, 1.0), layout="constrained")
    ax = fig.subplots()
    ax.set_title("a title\nof three\nlines")
    fig.supxlabel("a note far wider than the two inches this canvas has to offer")
    assert text_overflow(fig)                                      # clipped as built
    before = fig.get_size_inches().copy()
    assert text_overflow(grow_to_fit_texts(fig)) == []
    assert (fig.get_size_inches() >= before).all()


@pytest.fixture
def zoo(tiny_zoo, monkeypatch):
    import robustbench_dgsa.models.zoo as zoo_module
    monkeypatch.setattr(zoo_module, "ZOO_DIR", tiny_zoo[0])
    return tiny_zoo


def test_rollout_of_a_3_2_photo_leaves_the_canvas_edges_blank(zoo, tmp_path, run_main):
    """The PNG itself: nothing drawn on its outermost pixels (a clipped title would touch the top edge)."""
    rng = np.random.default_rng(2)
    Image.fromarray(rng.integers(0, 256, (300, 451, 3), dtype=np.uint8)).save(tmp_path / "photo.png")
    code, out, err = run_main(["rollout", str(tmp_path / "photo.png"), "-o", str(tmp_path / "fig.png")], tmp_path)
    assert code == 0, err
    px = np.asarray(Image.open(tmp_path / "fig.png").convert("L"))
    for edge in (px[:3], px[-3:], px[:, :3], px[:, -3:]):
        assert edge.min() == 255


def test_figure_names_the_models_training_data_and_classes(monkeypatch, tmp_path):
    """The shipped CIFAR-10 models: the figure's note names CIFAR-10, its 10 classes and the 32 x 32 input."""
    import robustbench_dgsa.rollout.plots as plots
    from robustbench_dgsa.rollout.explain import data_note, explain_image
    from robustbench_dgsa.rollout.sources import zoo_sources
    sources = zoo_sources("image")
    note = data_note(sources)
    assert note.startswith("models trained on CIFAR-10: 10 classes (airplane, automobile, bird, cat, deer, dog, "
                           "frog, horse, ship, truck)")
    assert "32 × 32" in note
    seen = {}
    monkeypatch.setattr(plots, "plot_rollout_grid", lambda *a, **kw: seen.update(kw))
    Image.fromarray(np.zeros((30, 45, 3), np.uint8)).save(tmp_path / "x.png")
    explain_image(tmp_path / "x.png", sources, tmp_path / "x_rollout.png")
    assert seen["footnote"].startswith(note)


def test_strongest_tokens_rank_by_magnitude_with_their_sign():
    from robustbench_dgsa.rollout.explain import strongest
    scores = np.array([0.04, -0.144, 0.01, -0.019, 0.001])
    assert strongest(scores, 3) == [1, 0, 3]                     # the strongly negative token comes first


def test_token_list_prints_a_comma_token_cleanly():
    from robustbench_dgsa.cli.render import token_list
    line = token_list({"top_tokens": ["gripping", ",", "a"], "top_scores": [-0.144, 0.0098, 0.0414]})
    assert line == '"gripping" −0.144, "," +0.0098, "a" +0.0414'
    assert ",," not in line


def test_text_rollout_cli_lists_strongest_tokens_by_magnitude(zoo, tmp_path, run_main):
    code, out, err = run_main(["rollout", "--text", "a gripping, beautifully acted film"], tmp_path)
    assert code == 0, err
    doc = json.loads((tmp_path / "text_rollout.json").read_text())
    for m in doc["models"]:
        mags = [abs(v) for v in m["top_scores"]]
        assert mags == sorted(mags, reverse=True) and mags[0] == pytest.approx(max(abs(v) for v in m["scores"]))
    assert "strongest tokens (by |relevance|)" in out and ",," not in out


def test_text_figure_has_a_colour_scale_per_model_and_a_reading_guide():
    from robustbench_dgsa.rollout.plots import reading_guide, text_rollout_figure
    from robustbench_dgsa.util.figures import text_overflow
    toks = {"dt": ["a", "gripping", ",", "film"], "transformer": ["a", "gripping", ",", "film"]}
    scores = {"dt": [0.04, -0.144, 0.01, 0.0], "transformer": [0.1, 0.3, 0.05, 0.08]}
    fig = text_rollout_figure(toks, scores, signed_by_model={"dt": True, "transformer": False}, title="t",
                              note="models trained on IMDB: 2 classes (neg, pos)")
    ax = fig.axes[0]
    assert len(ax.images) == 2                                    # one colour bar per model
    texts = [t.get_text() for t in ax.texts]
    assert reading_guide(True) in texts and reading_guide(False) in texts
    assert "−0.144" in texts and "+0.144" in texts                  # the signed scale is symmetric about 0
    assert "no vote against the class" in reading_guide(True)
    assert text_overflow(fig, pad_px=0.0) == []


def test_text_page_carries_the_reading_guide(tmp_path):
    from robustbench_dgsa.rollout.plots import reading_guide, render_text_rollout_html
    page = render_text_rollout_html({"dgt": ["a", ","]}, {"dgt": [0.1, -0.2]}, tmp_path / "t.html").read_text()
    assert reading_guide(True) in page
