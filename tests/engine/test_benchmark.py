"""benchmark(model): outside models (timm ViT, torchvision ResNet) on the synthetic set and a regenerated
directory; numbers equal a hand-written loop; rows in the one schema, usable by compare."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from robustbench_dgsa import store
from robustbench_dgsa.data import load_dataset
from robustbench_dgsa.util.errors import UserError

N = 40
CORR = ["gaussian_noise", "contrast"]
SEVS = [1, 5]


def _timm_vit():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=6, img_size=32, patch_size=8,
                             depth=2, embed_dim=32, num_heads=2)


def _resnet():
    tv = pytest.importorskip("torchvision.models.resnet")
    torch.manual_seed(1)
    return tv.ResNet(tv.BasicBlock, [1, 1, 1, 1], num_classes=6)


def _hand_accuracy(model, x_uint8, y, mean, std, size, crop=None):
    """Independent loop: uint8 -> [0,1] -> resize (timm's resize + centre crop when ``crop`` = (crop_pct,
    interpolation)) -> normalise -> model -> argmax, 8 at a time."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, len(x_uint8), 8):
            xb = torch.from_numpy(np.ascontiguousarray(x_uint8[s:s + 8])).permute(0, 3, 1, 2).float() / 255.0
            if crop is not None:
                scale = int(np.floor(size / crop[0]))
                xb = F.interpolate(xb, size=(scale, scale), mode=crop[1], antialias=True, align_corners=False)
                top = int(round((scale - size) / 2.0))
                xb = xb.clamp(0, 1)[..., top:top + size, top:top + size]
            elif size is not None and xb.shape[-1] != size:
                xb = F.interpolate(xb, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
            xb = (xb - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
            correct += int((model(xb).argmax(1).numpy() == y[s:s + 8]).sum())
    return correct / len(y)


@pytest.fixture(scope="module")
def test_split():
    data = load_dataset("synthetic-vision", "test")
    return np.asarray(data.x)[:N], np.asarray(data.y)[:N]


@pytest.fixture(scope="module")
def regen_dir(tmp_path_factory, test_split):
    from corruptions.layout import regenerate
    x, y = test_split
    d = tmp_path_factory.mktemp("regen") / "synthetic-c"
    regenerate(x, y, d, CORR, SEVS, seed=3)
    return d


@pytest.mark.parametrize("which", ["timm_vit", "resnet"])
def test_on_the_fly_equals_hand_loop(which, test_split, tmp_path):
    from corruptions import corrupt
    from robustbench_dgsa.engine.benchmark import benchmark
    from robustbench_dgsa.models.external import Preprocess
    model = _timm_vit() if which == "timm_vit" else _resnet()
    pre = Preprocess.from_timm(model) if which == "timm_vit" else Preprocess((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))
    rows = benchmark(model, "synthetic-vision", corruption=CORR, severity=SEVS, max_examples=N, preprocess=pre,
                     name=which, seed=5, store=tmp_path / "store", device="cpu", batch_size=16,
                     amp="off")  # the hand loop computes in fp32
    acc = rows[rows.metric == "accuracy"].set_index(["condition", "severity"])["value"]
    x, y = test_split
    crop = (pre.crop_pct, pre.interpolation) if pre.crop_pct is not None else None  # timm's whole data config
    assert acc[("clean", 0)] == pytest.approx(_hand_accuracy(model, x, y, pre.mean, pre.std, pre.image_size, crop))
    for c in CORR:
        for s in SEVS:
            xc = corrupt(x, c, s, seed=5, indices=np.arange(N))
            assert acc[(c, s)] == pytest.approx(_hand_accuracy(model, xc, y, pre.mean, pre.std, pre.image_size, crop))
    # one schema, named by the caller, identified by a weights hash; predictions stored like the suite's own
    assert list(rows.columns) == list(store.COLUMNS)
    assert set(rows.kind) == {"eval"} and set(rows.model) == {which} and set(rows.seed) == {-1}
    assert set(rows.n) == {N} and set(rows[rows.condition != "clean"].source) == {"on-the-fly"}
    from robustbench_dgsa.models.external import count_parameters, weights_sha256
    sha = weights_sha256(model)
    assert set(rows.config_hash) == {f"weights-{sha[:16]}"}
    prov = store.load_runs(tmp_path / "store")[rows.attrs["run_id"]]
    assert prov["parameters"] == count_parameters(model) and prov["weights_sha256"] == sha
    preds = store.load_predictions(tmp_path / "store", rows.attrs["run_id"])
    assert len(preds) == N * (1 + len(CORR) * len(SEVS))


def test_regenerated_directory_equals_hand_loop(regen_dir, test_split, tmp_path):
    from corruptions.layout import load_corrupted
    from robustbench_dgsa.engine.benchmark import benchmark
    model = _resnet()
    rows = benchmark(model, "synthetic-vision", corruption=CORR, severity=SEVS, corruption_dir=regen_dir,
                     max_examples=N, name="resnet-tiny", device="cpu", amp="off")  # as the hand loop: fp32
    acc = rows[rows.metric == "accuracy"].set_index(["condition", "severity"])["value"]
    assert set(rows[rows.condition != "clean"].source) == {"regenerated"}
    _, y = test_split
    ident = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), None)
    for c in CORR:
        for s in SEVS:
            xc, yc = load_corrupted(regen_dir, c, s)
            assert np.array_equal(yc, y)
            assert acc[(c, s)] == pytest.approx(_hand_accuracy(model, xc, y, *ident))
    assert rows.attrs["store"] is None  # temporary store: only the returned rows remain


def test_timm_model_on_regenerated_dir_then_compare(regen_dir, tmp_path):
    """Two outside models in one store: compare treats them like registered models."""
    from robustbench_dgsa.analysis.compare import run_compare
    from robustbench_dgsa.engine.benchmark import benchmark
    from robustbench_dgsa.models.external import Preprocess
    sd = tmp_path / "store"
    vit = _timm_vit()
    benchmark(vit, "synthetic-vision", corruption=CORR, severity=SEVS, corruption_dir=regen_dir, max_examples=N,
              preprocess=Preprocess.from_timm(vit), name="timm-vit", store=sd, device="cpu")
    benchmark(_resnet(), "synthetic-vision", corruption=CORR, severity=SEVS, corruption_dir=regen_dir,
              max_examples=N, name="resnet", store=sd, device="cpu")
    cmp = run_compare(store.load_results(sd), dataset="synthetic-vision", partial=True)
    assert set(cmp.info["models"]) == {"timm-vit", "resnet"}


def test_benchmark_errors(test_split):
    from robustbench_dgsa.engine.benchmark import benchmark
    model = _resnet()
    with pytest.raises(UserError, match="registered"):
        benchmark(model, "synthetic-vision", name="dgvit", corruption=None, max_examples=N, device="cpu")
    tv = pytest.importorskip("torchvision.models.resnet")
    wrong = tv.ResNet(tv.BasicBlock, [1, 1, 1, 1], num_classes=4)
    with pytest.raises(UserError, match="6 classes"):
        benchmark(wrong, "synthetic-vision", corruption=None, max_examples=N, device="cpu")
    with pytest.raises(UserError, match="tokenizer"):
        benchmark(model, "synthetic-text", device="cpu")


def test_external_loaders(tmp_path):
    pytest.importorskip("timm")
    from safetensors.torch import save_file
    from robustbench_dgsa.models.external import load_module_model, load_timm_model, weights_sha256
    kw = dict(num_classes=6, img_size=32, patch_size=8, depth=1, embed_dim=16, num_heads=2)
    with pytest.raises(UserError, match="random_init"):
        load_timm_model("vit_tiny_patch16_224", **kw)
    a = load_timm_model("vit_tiny_patch16_224", random_init=True, **kw)
    assert a.random_init and a.preprocess is None  # raw [0, 1] input unless timm's is asked for
    assert a.name == "vit_tiny_patch16_224-random-init-s0" and a.init_seed == 0
    assert load_timm_model("vit_tiny_patch16_224", random_init=True, timm_norm=True, **kw).preprocess.image_size == 32
    # seeded: the same seed draws the same weights (torch's generator untouched), another seed other weights
    state = torch.random.get_rng_state()
    again = load_timm_model("vit_tiny_patch16_224", random_init=True, seed=0, **kw)
    other = load_timm_model("vit_tiny_patch16_224", random_init=True, seed=1, **kw)
    assert torch.equal(state, torch.random.get_rng_state())
    assert weights_sha256(again.model) == weights_sha256(a.model) != weights_sha256(other.model)
    assert other.name.endswith("-random-init-s1")
    w = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in a.model.state_dict().items()}, str(w))
    b = load_timm_model("vit_tiny_patch16_224", weights=w, **kw)
    assert not b.random_init and weights_sha256(b.model) == weights_sha256(a.model)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x80\x04not safetensors")
    with pytest.raises(UserError, match="safetensors"):
        load_timm_model("vit_tiny_patch16_224", weights=bad, **kw)
    m = load_module_model("torchvision.models.resnet:resnet18", num_classes=6)
    assert m.name == "resnet18" and m.source == "module:torchvision.models.resnet:resnet18"
    with pytest.raises(UserError, match="package.module:factory"):
        load_module_model("not a spec")


def test_cli_evaluate_timm_and_module(tmp_path):
    pytest.importorskip("timm")
    from typer.testing import CliRunner
    from robustbench_dgsa.cli import app
    sd = tmp_path / "store"
    base = ["evaluate", "--dataset", "synthetic-vision", "--max-test", "8", "--store", str(sd), "--device", "cpu",
            "--quiet"]
    r = CliRunner().invoke(app, base + ["--timm", "test_vit"])
    assert isinstance(r.exception, UserError) and "random_init" in str(r.exception)
    # raw [0, 1] input at the data's size by default; --timm-norm: timm's mean/std and test_vit's 160 px
    r = CliRunner().invoke(app, base + ["--timm", "test_vit", "--random-init", "--store", str(tmp_path / "raw")])
    assert r.exit_code == 0, r.output
    prov = next(iter(store.load_runs(tmp_path / "raw").values()))
    assert prov["input_convention"] == "raw" and prov["preprocess"]["image_size"] is None
    assert set(store.load_results(tmp_path / "raw").model) == {"test_vit-random-init-s0"}
    r = CliRunner().invoke(app, base + ["--timm", "test_vit", "--random-init", "--seed", "3", "--timm-norm",
                                        "--name", "vt", "--corruptions", "contrast", "--severity", "2", "--json"])
    assert r.exit_code == 0, r.output
    rows = store.load_results(sd)
    assert set(rows.model) == {"vt"} and set(rows.condition) == {"clean", "contrast"}
    prov = next(iter(store.load_runs(sd).values()))
    assert prov["random_init"] is True and prov["model_source"] == "timm:test_vit" and prov["init_seed"] == 3
    assert prov["preprocess"]["image_size"] == 160 and prov["input_convention"] == "timm"
    # the same name for other weights (another seed) is refused, never mixed into one model
    r = CliRunner().invoke(app, base + ["--timm", "test_vit", "--random-init", "--seed", "4", "--timm-norm",
                                        "--name", "vt"])
    assert isinstance(r.exception, UserError) and "another model named 'vt'" in str(r.exception)
    r = CliRunner().invoke(app, base + ["--timm", "test_vit", "--weights", "w.safetensors", "--seed", "4"])
    assert isinstance(r.exception, UserError) and "--seed goes with --random-init" in str(r.exception)
    r = CliRunner().invoke(app, base + ["--module", "torchvision.models.resnet:resnet18"])
    assert isinstance(r.exception, UserError) and "1000 logits" in str(r.exception)
    r = CliRunner().invoke(app, base + ["--module", "torchvision.models.resnet:resnet18", "--model-args",
                                        "num_classes=6", "--name", "rn18"])
    assert r.exit_code == 0, r.output
    assert set(store.load_results(sd).model) == {"vt", "rn18"}
    r = CliRunner().invoke(app, base + ["--module", "torchvision.models.resnet:resnet18", "--checkpoint", "x"])
    assert isinstance(r.exception, UserError) and "exactly one" in str(r.exception)


class _BagOfWords(torch.nn.Module):
    """A tiny outside text model: mean of word embeddings -> linear."""

    def __init__(self, vocab, classes=4):
        super().__init__()
        torch.manual_seed(2)
        self.emb = torch.nn.EmbeddingBag(len(vocab) + 2, 8, mode="mean", padding_idx=0)
        self.out = torch.nn.Linear(8, classes)

    def forward(self, ids):
        return self.out(self.emb(ids))


def test_text_model_with_tokenizer_hook_equals_hand_loop():
    from corruptions.text import TEXT_NOISE_TYPES, add_text_noise
    from robustbench_dgsa.engine.benchmark import benchmark
    texts = list(load_dataset("synthetic-text", "train").texts)
    vocab = {w: i + 2 for i, w in enumerate(sorted({w for t in texts for w in t.split()}))}

    def tokenizer(batch):
        rows = [[vocab.get(w, 1) for w in t.split()][:32] for t in batch]
        ids = torch.zeros(len(rows), 32, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        return ids

    model = _BagOfWords(vocab)
    noise = TEXT_NOISE_TYPES[0]
    rows = benchmark(model, "synthetic-text", text_noise=noise, severity=3, max_examples=N, tokenizer=tokenizer,
                     name="bow", device="cpu", seed=4, amp="off")  # as the hand loop: fp32
    acc = rows[rows.metric == "accuracy"].set_index(["condition", "severity"])["value"]
    test = load_dataset("synthetic-text", "test")
    y = np.asarray(test.y)[:N]
    clean = list(test.texts)[:N]
    with torch.no_grad():
        assert acc[("clean", 0)] == pytest.approx(float((model(tokenizer(clean)).argmax(1).numpy() == y).mean()))
        noisy = add_text_noise(clean, noise, 3, seed=4, indices=np.arange(N))
        assert acc[(noise, 3)] == pytest.approx(float((model(tokenizer(noisy)).argmax(1).numpy() == y).mean()))
    assert set(rows[rows.condition == noise].metric) == {"accuracy", "cer", "wer"}


def test_pth_checkpoints_load_through_weights_only_and_pickles_are_refused(tmp_path, plant_pickle, capsys):
    """A torchvision model's state_dict saved as .pth loads (torch.load(weights_only=True), with a note); a planted
    pickle whose __reduce__ runs code is refused and never executed; a pickle of more than tensors is refused."""
    from torchvision.models import resnet18
    from robustbench_dgsa.models.external import load_module_model, load_weights, weights_sha256
    torch.manual_seed(3)
    src = resnet18(num_classes=6)
    pth = tmp_path / "resnet18.pth"
    torch.save(src.state_dict(), pth)
    m = load_module_model("torchvision.models:resnet18", weights=pth, num_classes=6)
    assert weights_sha256(m.model) == weights_sha256(src)
    assert "weights_only=True" in capsys.readouterr().err
    wrapped = tmp_path / "ckpt.pt"   # the common {"state_dict": ..., "epoch": ...} layout
    torch.save({"state_dict": src.state_dict(), "epoch": 3}, wrapped)
    other = resnet18(num_classes=6)
    load_weights(other, wrapped)
    assert weights_sha256(other) == weights_sha256(src)
    bad, marker = tmp_path / "evil.pth", tmp_path / "pwned"
    plant_pickle(bad, marker)
    with pytest.raises(UserError, match="refused weights evil.pth"):
        load_weights(resnet18(num_classes=6), bad)
    assert not marker.exists()
    whole = tmp_path / "whole_model.pth"
    torch.save(src, whole)  # a pickled module: needs more than tensors
    with pytest.raises(UserError, match="refused weights whole_model.pth"):
        load_weights(resnet18(num_classes=6), whole)


def test_first_n_by_default_stratified_on_request():
    from robustbench_dgsa.engine.predict import select_test, subset_label, subset_note
    y = np.repeat(np.arange(4), 5)          # stored class by class
    first = select_test(y, 8)
    assert list(first) == list(range(8)) and subset_label(y, first) == "first 8 of 20"
    assert "cover 2 of the 4 classes" in subset_note(y, first)
    strat = select_test(y, 8, "stratified")
    assert sorted(np.bincount(y[strat]).tolist()) == [2, 2, 2, 2] and subset_label(y, strat).startswith("stratified 8")
    assert list(select_test(y, 8, "auto")) == list(strat)
    assert list(select_test(np.arange(20) % 4, 8, "auto")) == list(range(8))
    with pytest.raises(UserError, match="first, stratified, auto"):
        select_test(y, 8, "random")


def test_rb_rollout_one_image(tmp_path):
    timm = pytest.importorskip("timm")
    import robustbench_dgsa as rb
    from PIL import Image
    torch.manual_seed(0)
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=6, img_size=32, patch_size=8,
                            depth=2, embed_dim=32, num_heads=2)
    img = np.random.default_rng(0).integers(0, 256, (40, 36, 3), dtype=np.uint8)
    heat = rb.rollout(vit, img)
    assert heat.shape == (40, 36) and heat.dtype == np.float32 and np.isfinite(heat).all()
    Image.fromarray(img).save(tmp_path / "i.png")
    assert np.array_equal(rb.rollout(vit, tmp_path / "i.png"), heat)
    assert not np.array_equal(rb.rollout(vit, img, timm_norm=True), heat)  # another input, another map
    with pytest.raises(UserError, match="image must be"):
        rb.rollout(vit, img.astype(np.float32))


def test_benchmark_severity_all_is_the_one_rule():
    """``severity="all"`` reads as 1..5, as ``--severity all`` does (one parser: corruptions.registry)."""
    from corruptions.errors import CorruptionError
    from robustbench_dgsa.engine.benchmark import benchmark

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(32 * 32 * 3, 6))
    rows = benchmark(model, "synthetic-vision", corruption="contrast", severity="all", max_examples=8, device="cpu")
    assert sorted(set(rows[rows.condition == "contrast"].severity)) == [1, 2, 3, 4, 5]
    with pytest.raises(CorruptionError, match="severity must be in 1..5"):
        benchmark(model, "synthetic-vision", corruption="contrast", severity="0-2", max_examples=8, device="cpu")
