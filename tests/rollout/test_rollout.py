"""Attention rollout: analytic cases, modes, fusion, discard, models, numbers, stored sets, figures."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from robustbench_dgsa.rollout import core as R
from robustbench_dgsa.rollout.core import RolloutSpec, cls_relevance, rollout


def eye_maps(n_layers: int, N: int, heads: int = 2, B: int = 1) -> list[torch.Tensor]:
    return [torch.eye(N, dtype=torch.float64).expand(B, heads, N, N).clone() for _ in range(n_layers)]


def random_softmax(B: int, h: int, N: int, gen: torch.Generator) -> torch.Tensor:
    return torch.softmax(torch.randn(B, h, N, N, generator=gen, dtype=torch.float64) * 2, dim=-1)


def classic_rollout_reference(maps: list[torch.Tensor]) -> torch.Tensor:
    """Straightforward loop (Abnar & Zuidema): mean over heads, 0.5 W + 0.5 I, rows to 1, product."""
    B, _, N, _ = maps[0].shape
    out = torch.zeros(B, N, N, dtype=torch.float64)
    for b in range(B):
        result = np.eye(N)
        for m in maps:
            w = m[b].numpy().mean(0)
            a = 0.5 * w + 0.5 * np.eye(N)
            for i in range(N):
                a[i] = a[i] / a[i].sum()
            result = a @ result
        out[b] = torch.from_numpy(result)
    return out


# --- analytic cases ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["signed", "positive", "raw"])
def test_identity_layers_keep_cls_on_itself(mode):
    joint = rollout(eye_maps(4, 7), mode=mode)
    assert torch.allclose(joint, torch.eye(7, dtype=torch.float64).expand(1, 7, 7))
    rel = cls_relevance(joint)
    assert rel.shape == (1, 6)
    assert torch.all(rel == 0)


def test_one_hot_chain_routes_cls_with_exact_weights():
    N = 6
    lower = torch.eye(N, dtype=torch.float64)
    lower[3] = 0
    lower[3, 5] = 1            # layer 1: token 3 attends only to token 5
    upper = torch.eye(N, dtype=torch.float64)
    upper[0] = 0
    upper[0, 3] = 1            # layer 2: CLS attends only to token 3
    maps = [lower[None, None], upper[None, None]]
    # (A+I)/2: layer-2 CLS row = ½e0 + ½e3; layer-1 row 3 = ½e3 + ½e5, CLS row = e0
    # joint CLS row = ½·e0 + ½·(½e3 + ½e5) = [½, 0, 0, ¼, 0, ¼]
    expected = torch.tensor([0.5, 0, 0, 0.25, 0, 0.25], dtype=torch.float64)
    for mode in ("positive", "signed"):
        joint = rollout(maps, mode=mode)
        assert torch.equal(joint[0, 0], expected)
        assert torch.equal(cls_relevance(joint)[0], expected[1:])
    # the other order (layer 1: CLS→3, layer 2: 3→5): CLS keeps ½ on itself, ½ on 3, token 5 gets nothing
    joint = rollout([upper[None, None], lower[None, None]], mode="positive")
    assert torch.equal(joint[0, 0], torch.tensor([0.5, 0, 0, 0.5, 0, 0], dtype=torch.float64))
    # J = A2·A1 with A1 = the CLS→3 map (row 3 = e3) and A2 = the 3→5 map (row 3 = ½e3 + ½e5)
    assert torch.equal(joint[0, 3], torch.tensor([0, 0, 0, 0.5, 0, 0.5], dtype=torch.float64))


def test_signed_normalisation_keeps_signs_and_bounds():
    gen = torch.Generator().manual_seed(0)
    B, h, N = 2, 3, 9
    a1, a2 = random_softmax(B, h, N, gen), random_softmax(B, h, N, gen)
    lam = 0.8
    attn = a1 - lam * a2                      # DiffAttn-like combined map: rows sum to 1 − λ
    spec = RolloutSpec("signed")
    fused = attn.mean(1)
    normed = R.normalize_rows(fused, "l1")
    assert torch.allclose(normed.abs().sum(-1), torch.ones(B, N, dtype=torch.float64))
    nz = fused != 0
    assert torch.equal(torch.sign(normed[nz]), torch.sign(fused[nz]))
    # a layer's transition matrix and the joint map keep |row|₁ = 1 and have negative entries
    t = R.layer_transition(attn, spec)
    assert torch.allclose(t.abs().sum(-1), torch.ones(B, N, dtype=torch.float64))
    joint = rollout([attn, attn, attn], mode="signed")
    assert (joint < 0).any()
    assert torch.all(joint.abs().sum(-1) <= 1 + 1e-12)
    # positive mode: non-negative rows summing to 1
    jp = rollout([attn, attn], mode="positive")
    assert torch.all(jp >= 0)
    assert torch.allclose(jp.sum(-1), torch.ones(B, N, dtype=torch.float64))


def test_head_fusion_mean_max_min():
    heads = torch.tensor([[[1.0, -2.0], [0.5, 3.0]],
                          [[-1.0, 4.0], [2.5, 0.0]],
                          [[3.0, 1.0], [-0.5, 6.0]]], dtype=torch.float64)[None]   # (1, 3, 2, 2)
    assert torch.equal(R.fuse_heads(heads, "mean")[0], torch.tensor([[1.0, 1.0], [2.5 / 3, 3.0]],
                                                                    dtype=torch.float64))
    assert torch.equal(R.fuse_heads(heads, "max")[0], torch.tensor([[3.0, 4.0], [2.5, 6.0]], dtype=torch.float64))
    assert torch.equal(R.fuse_heads(heads, "min")[0], torch.tensor([[-1.0, -2.0], [-0.5, 0.0]],
                                                                   dtype=torch.float64))
    assert isinstance(R.fuse_heads(heads.numpy(), "max"), np.ndarray)
    with pytest.raises(ValueError):
        R.fuse_heads(heads, "median")
    # fusion reaches the rollout: max-fused positive rollout of two one-hot heads = both targets
    h1 = torch.zeros(1, 2, 3, 3, dtype=torch.float64)
    h1[0, 0, :, 1] = 1
    h1[0, 1, :, 2] = 1
    j = rollout([h1], mode="positive", head_fusion="max")
    assert torch.allclose(j[0, 0], torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64))


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_discard_zeroes_the_right_fraction(ratio):
    gen = torch.Generator().manual_seed(1)
    N = 10
    a = torch.rand(2, N, N, generator=gen, dtype=torch.float64) + 0.01     # no zeros, no ties
    a[:, 0, 0] = 1e-6                                                       # smallest, but protected
    out = R.discard_lowest(a, ratio)
    k = int(np.floor(ratio * N * N))
    for b in range(2):
        zeroed = out[b] == 0
        assert int(zeroed.sum()) == k
        assert out[b, 0, 0] == a[b, 0, 0]
        kept = a[b][~zeroed]
        dropped = a[b][zeroed]
        # every dropped entry is at most every kept entry, CLS→CLS aside
        kept_wo_cls = kept[kept != a[b, 0, 0]]
        assert dropped.max() <= kept_wo_cls.min()
    # magnitude, not value: a large negative entry survives
    s = torch.full((1, 4, 4), 0.5, dtype=torch.float64)
    s[0, 2, 3] = -5.0
    s[0, 1, 1] = 0.01
    out = R.discard_lowest(s, 1 / 16)
    assert out[0, 1, 1] == 0 and out[0, 2, 3] == -5.0
    # and through rollout: the spec records it
    spec = RolloutSpec("signed", "mean", 0.9)
    assert spec.tag == "signed|mean|d0.9"
    assert RolloutSpec.from_tag(spec.tag) == spec


def test_positive_mode_on_mhsa_equals_classic_rollout():
    gen = torch.Generator().manual_seed(2)
    maps = [random_softmax(3, 4, 8, gen) for _ in range(5)]
    ref = classic_rollout_reference(maps)
    got = rollout([{"attn": m} for m in maps])           # MHSA dicts: default mode is positive
    assert torch.allclose(got, ref, atol=1e-12)
    assert torch.allclose(rollout(maps, mode="signed"), ref, atol=1e-12)   # non-negative maps: same
    assert torch.allclose(rollout(maps, mode="raw"), ref, atol=1e-12)
    got_np = rollout([m.numpy() for m in maps], mode="positive")
    assert isinstance(got_np, np.ndarray)
    np.testing.assert_allclose(got_np, ref.numpy(), atol=1e-12)


def test_modes_and_defaults_from_map_dicts():
    gen = torch.Generator().manual_seed(3)
    a_pos, a_neg = random_softmax(1, 2, 5, gen), random_softmax(1, 2, 5, gen)
    g = torch.rand(1, 2, 5, generator=gen, dtype=torch.float64)
    g4 = g[..., None]
    attn = g4 * a_pos - (1 - g4) * a_neg
    dgsa = [{"attn": attn, "a_pos": a_pos, "a_neg": a_neg, "gate": g}]
    assert R.infer_attention(dgsa) == "dgsa"
    assert R.infer_attention([{"attn": attn, "a_pos": a_pos, "a_neg": a_neg, "lambda": 0.5}]) == "diff"
    assert torch.equal(rollout(dgsa), rollout(dgsa, mode="signed"))
    assert torch.allclose(rollout(dgsa, mode="a_pos"), classic_rollout_reference([a_pos]), atol=1e-12)
    assert torch.allclose(rollout(dgsa, mode="a_neg"), classic_rollout_reference([a_neg]), atol=1e-12)
    with pytest.warns(R.RolloutWarning):
        rollout(dgsa, mode="raw")
    with pytest.raises(ValueError, match="differential"):
        rollout([{"attn": a_pos}], mode="a_pos")
    with pytest.raises(ValueError):
        RolloutSpec("nope")
    with pytest.raises(ValueError):
        RolloutSpec("signed", "mean", 1.0)
    assert R.default_mode("mhsa") == "positive" and R.default_mode("dgsa") == "signed"
    assert RolloutSpec("signed").signed and not RolloutSpec("positive").signed


def test_image_helpers_reshape_and_upsample():
    rel = torch.arange(16, dtype=torch.float64).reshape(1, 16)
    grid = R.relevance_grid(rel)
    assert grid.shape == (1, 4, 4) and grid[0, 1, 0] == 4          # row-major patch order
    up = R.upsample(grid, 32)
    assert up.shape == (1, 32, 32)
    assert torch.allclose(up.mean(), grid.mean(), atol=0.05)
    const = R.upsample(torch.ones(2, 4, 4), (8, 12))
    assert const.shape == (2, 8, 12) and torch.allclose(const, torch.ones(2, 8, 12))
    joint = torch.eye(17, dtype=torch.float64)[None]
    assert R.image_heatmaps(joint, 16).shape == (1, 16, 16)
    with pytest.raises(ValueError):
        R.relevance_grid(torch.zeros(1, 15))


# --- models, numbers, stored sets, figures -----------------------------------------------------------

TINY = dict(dim=16, depth=2, heads=2, head_hidden=16, num_classes=3)
IMAGE_PRE = {"modality": "image", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], "image_size": 16,
             "in_chans": 3}


def tiny_model(name: str, **kw):
    from robustbench_dgsa.models import create_model, get_model_config
    torch.manual_seed(0)
    extra = dict(image_size=16, patch_size=4) if get_model_config(name).modality == "image" else {}
    return create_model(name, **{**TINY, **extra, **kw}).eval()


def text_setup():
    from robustbench_dgsa.data.vocab import Vocab
    vocab = Vocab.build(["the striker scored a goal", "rain and thunderstorm today"], min_freq=1)
    return vocab, {"modality": "text", "vocab": vocab.to_list(), "max_len": 8}


@pytest.mark.parametrize("name", ["vit", "dvit", "dgvit"])
def test_vision_models_rollout_shapes(name):
    from robustbench_dgsa.rollout.runs import image_rollout, image_rollout_full
    model = tiny_model(name)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        _, maps = model(x, return_attention=True)
    assert len(maps) == 2
    joint = rollout(maps)
    assert joint.shape == (2, 17, 17)
    expected_mode = "positive" if name == "vit" else "signed"
    assert R.RolloutSpec.resolve(model.config.attention).mode == expected_mode
    if name != "vit":
        for m in ("a_pos", "a_neg", "raw"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", R.RolloutWarning)
                assert rollout(maps, mode=m).shape == (2, 17, 17)
    imgs = np.random.default_rng(0).integers(0, 256, (3, 20, 24, 3), dtype=np.uint8)  # any size: resized
    heat, preds = image_rollout(model, imgs, IMAGE_PRE)
    assert heat.shape == (3, 20, 24) and heat.dtype == np.float32 and preds.shape == (3,)
    full = image_rollout_full(model, imgs[..., 0], IMAGE_PRE, mode="positive")       # grayscale stack
    assert full.relevance.shape == (3, 4, 4) and full.spec.tag == "positive|mean|d0"
    assert np.all(full.heatmaps >= 0)


@pytest.mark.parametrize("name", ["transformer", "dt", "dgt"])
def test_text_models_rollout_shapes(name):
    from robustbench_dgsa.rollout.runs import text_rollout, text_rollout_full
    vocab, pre = text_setup()
    model = tiny_model(name, vocab_size=len(vocab), max_len=8)
    texts = ["The striker scored a GOAL!", "rain", "a b c d e f g h i j"]
    toks, scores = text_rollout(model, texts, pre)
    assert toks[0] == ["the", "striker", "scored", "a", "goal", "!"]
    assert [len(t) for t in toks] == [6, 1, 8]                    # truncated to max_len
    assert [len(s) for s in scores] == [6, 1, 8]
    full = text_rollout_full(model, texts, pre)
    assert full.unknown[0].tolist() == [False, False, False, False, False, True]
    assert full.probs.shape == (3, 3)
    # padded tokens get exactly zero relevance in the joint map
    from robustbench_dgsa.engine.predict import prepare_texts
    ids, mask = prepare_texts(texts, pre)
    with torch.no_grad():
        _, maps = model(ids, key_padding_mask=mask, return_attention=True)
    rel = cls_relevance(rollout(maps))
    assert torch.all(rel[1, 1:] == 0)


def test_salient_mass_and_drift_numbers():
    from robustbench_dgsa.rollout.runs import heatmap_correlation, rollout_drift, salient_mass, top_fraction_mass
    masks = np.zeros((2, 8, 8), dtype=bool)
    masks[0, 2:4, 2:6] = True
    masks[1, :, :4] = True
    np.testing.assert_allclose(salient_mass(masks.astype(np.float32), masks), [1.0, 1.0])
    np.testing.assert_allclose(salient_mass(np.ones((2, 8, 8)), masks), [8 / 64, 0.5])     # chance level
    signed = np.where(masks, 1.0, -3.0)
    np.testing.assert_allclose(salient_mass(signed, masks), [1.0, 1.0])                    # positive part
    np.testing.assert_allclose(salient_mass(signed, masks, how="abs"), [8 / (8 + 3 * 56), 32 / (32 + 96)])
    assert np.isnan(salient_mass(-np.ones((1, 8, 8)), masks[:1])[0])
    # text: ragged token scores with token masks
    np.testing.assert_allclose(salient_mass([np.array([0.1, 0.6, 0.3])], [np.array([0, 1, 0], bool)]), [0.6])
    assert top_fraction_mass(np.r_[np.zeros(9), 1.0], 0.1) == 1.0
    a = np.random.default_rng(0).random((3, 5, 5))
    np.testing.assert_allclose(heatmap_correlation(a, a), 1.0)
    np.testing.assert_allclose(heatmap_correlation(a, -a), -1.0)
    assert np.isnan(heatmap_correlation(np.ones((1, 4)), a[:1, 0, :4])[0])
    model = tiny_model("dgvit")
    imgs = np.random.default_rng(1).integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    r = rollout_drift(model, imgs, lambda x: x.copy(), 1, IMAGE_PRE)
    np.testing.assert_allclose(r, 1.0, atol=1e-6)
    r2 = rollout_drift(model, imgs, lambda x: 255 - x, 1, IMAGE_PRE)
    assert np.all(r2 < 1.0)


def test_rollout_sets_roundtrip_and_figures(tmp_path):
    from robustbench_dgsa.rollout.plots import render_figure2, render_figure3
    from robustbench_dgsa.rollout.runs import RolloutSpec as RS, load_rollout_sets, save_rollout_set
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    store = tmp_path / "store"
    for name, spec in (("dgvit", RS("signed")), ("vit", RS("positive")), ("dvit", RS("signed", "max", 0.5))):
        heat = rng.standard_normal((3, 16, 16)).astype(np.float32)
        p = save_rollout_set(store, f"r-{name}", kind="image", model=name, dataset="synthetic-vision", seed=1,
                             mode=spec, images=images, heatmaps=heat, labels=[0, 1, 2], preds=[0, 2, 2],
                             probs=[0.9, 0.5, 0.7], salient=np.zeros((3, 16, 16), bool),
                             meta={"classes": ["a", "b", "c"]})
        assert p == store / "rollouts" / f"r-{name}__{name}.npz"
    toks = [["the", "goal", "!"], ["rain"]]
    for name in ("dgt", "transformer", "dt"):
        save_rollout_set(store, f"t-{name}", kind="text", model=name, dataset="synthetic-text", seed=0,
                         mode="signed|mean|d0", tokens=toks, scores=[[0.2, -0.5, 0.1], [1.0]], labels=[3, 1],
                         salient=[[False, True, False], [True]], meta={"classes": list("abcd")})
    sets = load_rollout_sets(store)
    assert len(sets) == 6
    dv = [s for s in sets if s.model == "dvit"][0]
    assert dv.kind == "image" and dv.spec == RS("signed", "max", 0.5) and dv.signed
    assert dv.images.dtype == np.uint8 and np.array_equal(dv.images, images) and dv.heatmaps.shape == (3, 16, 16)
    assert dv.classes == ["a", "b", "c"] and dv.seed == 1 and dv.probs.dtype == np.float32
    tx = load_rollout_sets(store, kind="text", models=["dgt"])[0]
    assert tx.tokens == toks and np.allclose(tx.scores[0], [0.2, -0.5, 0.1]) and tx.preds.tolist() == [-1, -1]
    assert [s.tolist() for s in tx.salient] == [[False, True, False], [True]]
    # Figure 2 from the sets alone: columns ordered ViT, DViT, DGViT
    info = render_figure2(sets, tmp_path / "f2.png", max_images=2)
    assert info["models"] == ["vit", "dvit", "dgvit"] and info["images"] == 2
    assert (tmp_path / "f2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    info = render_figure3(sets, tmp_path / "f3.png", None, tmp_path / "f3.html")
    assert info["models"] == ["transformer", "dt", "dgt"] and info["label"] == "d"
    page = (tmp_path / "f3.html").read_text()
    assert "(c) DGT" in page and ">goal<" in page
    assert not list((store / "rollouts").glob(".*"))          # no temporary files left behind


def test_grid_pdf_is_deterministic(tmp_path, monkeypatch):
    from robustbench_dgsa.rollout.plots import plot_rollout_grid
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    heat = {"vit": rng.random((2, 16, 16)), "dvit": rng.standard_normal((2, 4, 4)),
            "dgvit": rng.standard_normal((2, 16, 16))}
    plot_rollout_grid(imgs, heat, tmp_path / "a.png", tmp_path / "a.pdf", row_labels=["x", "y"])
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1234567890")
    plot_rollout_grid(imgs, heat, tmp_path / "b.png", tmp_path / "b.pdf", row_labels=["x", "y"])
    assert (tmp_path / "a.pdf").read_bytes() == (tmp_path / "b.pdf").read_bytes()
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_metrics_run_writes_rollout_rows(tmp_path):
    from robustbench_dgsa.rollout.runs import load_rollout_sets, rollout_metrics_run
    from robustbench_dgsa.store import load_results
    model = tiny_model("dgvit", image_size=32, num_classes=6)
    pre = {**IMAGE_PRE, "image_size": 32}
    summ = rollout_metrics_run(model, tmp_path / "store", "synthetic-vision", corruptions=["gaussian_noise"],
                               severities=[1, 3], max_examples=12, n_figure=4, preprocess=pre,
                               meta={"model": "dgvit", "seed": 2, "config_hash": "abc"})
    df = load_results(tmp_path / "store")
    assert set(df["kind"]) == {"rollout"} and set(df["model"]) == {"dgvit"} and set(df["seed"]) == {2}
    mass = df[df["metric"] == "rollout_mass"]
    assert sorted(mass["source"]) == ["positive|mean|d0|mass=positive", "signed|mean|d0|mass=positive"]
    assert (mass["condition"] == "clean").all() and mass["value"].between(0, 1).all()
    drift = df[df["metric"] == "rollout_drift"]
    assert len(drift) == 4 and set(drift["severity"]) == {1, 3} and set(drift["condition"]) == {"gaussian_noise"}
    assert drift["value"].between(-1, 1).all() and (drift["n"] == 12).all()
    chance = df[df["metric"] == "rollout_mass_chance"]["value"]
    assert np.allclose(chance, 64 / 1024)                       # 8x8 salient box in 32x32 images
    sets = load_rollout_sets(tmp_path / "store")
    assert len(sets) == 1 and len(sets[0]) == 4 and sets[0].salient.shape == (4, 32, 32)
    assert summ["run_id"] == sets[0].run_id


def test_metrics_run_text(tmp_path):
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.data.vocab import Vocab
    from robustbench_dgsa.rollout.runs import rollout_metrics_run
    from robustbench_dgsa.store import load_results
    train = load_dataset("synthetic-text", "train", seed=0)
    vocab = Vocab.build(train.texts, min_freq=2)
    pre = {"modality": "text", "vocab": vocab.to_list(), "max_len": 48}
    model = tiny_model("dgt", vocab_size=len(vocab), max_len=48, num_classes=4)
    rollout_metrics_run(model, tmp_path / "s", "synthetic-text", max_examples=10, preprocess=pre,
                        meta={"model": "dgt", "seed": 0})
    df = load_results(tmp_path / "s")
    assert set(df["metric"]) == {"rollout_mass", "rollout_mass_chance"}
    assert df["value"].between(0, 1).all()


def test_figure2_one_symmetric_scale_per_column_with_colour_bars_and_salient_outline():
    from robustbench_dgsa.rollout.plots import POSITIVE_CMAP, SIGNED_CMAP, rollout_grid_figure
    from robustbench_dgsa.util.figures import text_overflow
    rng = np.random.default_rng(5)
    imgs = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    heat = {"vit": rng.random((3, 16, 16)), "dvit": rng.standard_normal((3, 16, 16)) * [[[1.0]], [[3.0]], [[0.5]]],
            "a rather long custom model name": rng.standard_normal((3, 4, 4))}
    sal = np.zeros((3, 16, 16), bool)
    sal[:, 4:9, 4:9] = True
    fig = rollout_grid_figure(imgs, heat, signed_by_model={"vit": False, "dvit": True,
                                                           "a rather long custom model name": True},
                              row_labels=["a", "b", "c"], salient=sal)
    axes = fig.axes
    grid = [ax for ax in axes if ax.get_label() != "<colorbar>"]
    bars = [ax for ax in axes if ax.get_label() == "<colorbar>"]
    assert len(grid) == 3 * 4 and len(bars) == 3                      # one colour bar per model column
    for c, name in enumerate(heat, start=1):
        ims = [grid[r * 4 + c].images[-1] for r in range(3)]
        limits = {im.get_clim() for im in ims}
        assert len(limits) == 1, name                                  # one scale for the whole column
        lo, hi = limits.pop()
        cmaps = {im.get_cmap().name for im in ims}
        if name == "vit":
            assert cmaps == {POSITIVE_CMAP} and lo == pytest.approx(heat[name].min())
        else:
            assert cmaps == {SIGNED_CMAP} and lo == pytest.approx(-hi)  # symmetric about 0
            assert hi == pytest.approx(np.abs(heat[name]).max())
    assert all(grid[r * 4].collections for r in range(3))              # salient region outlined
    assert any("diverging" in b.get_xlabel() for b in bars) and any("sequential" in b.get_xlabel() for b in bars)
    assert text_overflow(fig) == []
