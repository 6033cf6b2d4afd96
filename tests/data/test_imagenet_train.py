"""ImageNet-1k as a training dataset: the ILSVRC2012 layout (``train/<wnid>/``; ``val/`` flat with the devkit's
ground truth or sorted into ``val/<wnid>/``), torchvision's class order, the train / eval transforms, streaming
through DataLoader workers, a short training run end to end, the paper preset and ``reproduce``'s Table 2 plan,
and the one-line errors for a missing ImageNet.

The fixture is a tiny generated ILSVRC layout (tests/ilsvrc_layout.py): 3 wnids x 4 training JPEGs of varied
sizes, 2 validation images per class, once flat (with ``ILSVRC2012_validation_ground_truth.txt`` + ``meta.mat``,
ILSVRC2012_IDs not in wnid order, as in the real devkit) and once sorted into ``val/<wnid>/``.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from robustbench_dgsa.data import load_dataset
from robustbench_dgsa.data.imagenet import FileDataset, ImageFiles, make_transform

from ilsvrc_layout import VAL_WNIDS, WNIDS, make_ilsvrc   # tests/ilsvrc_layout.py


@pytest.fixture(scope="module")
def ilsvrc(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("ilsvrc")
    return {"flat": make_ilsvrc(base / "flat", flat=True), "sorted": make_ilsvrc(base / "sorted", flat=False)}


def _quiet_load(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_dataset(*args, **kw)


# --- listing and class order ---------------------------------------------------------------------------------

def test_train_split_lists_files_in_imagefolder_order(ilsvrc):
    from torchvision.datasets import ImageFolder

    tr = _quiet_load("imagenet", "train", data_root=ilsvrc["sorted"])
    assert isinstance(tr, ImageFiles) and tr.classes == list(WNIDS)
    ref = ImageFolder(str(ilsvrc["sorted"] / "train"))
    assert ref.classes == tr.classes
    assert [Path(p).relative_to(ilsvrc["sorted"] / "train").as_posix() for p, _ in ref.samples] == list(tr.files)
    assert tr.y.tolist() == [t for _, t in ref.samples]


def test_flat_and_sorted_val_agree(ilsvrc):
    flat = _quiet_load("imagenet", "test", data_root=ilsvrc["flat"], stream=True)
    srt = _quiet_load("imagenet", "test", data_root=ilsvrc["sorted"], stream=True)
    assert flat.classes == srt.classes == list(WNIDS)
    assert flat.names == srt.names  # the generator's order: by class, then file name
    by_name = dict(zip(flat.names, flat.y.tolist()))
    for k, w in enumerate(VAL_WNIDS):
        assert by_name[f"{w}/ILSVRC2012_val_{k + 1:08d}.JPEG"] == WNIDS.index(w)
    assert srt.y.tolist() == flat.y.tolist()
    mem = _quiet_load("imagenet", "test", data_root=ilsvrc["flat"], max_images=2)
    assert mem.x.shape == (2, 224, 224, 3) and mem.y.tolist() == flat.y[:2].tolist()


def test_partial_val_keeps_the_training_class_indices(tmp_path, ilsvrc):
    import shutil

    root = tmp_path / "partial"
    shutil.copytree(ilsvrc["sorted"], root)
    shutil.rmtree(root / "val" / WNIDS[0])
    val = _quiet_load("imagenet", "test", data_root=root, stream=True)
    assert val.classes == list(WNIDS) and set(val.y.tolist()) == {1, 2}  # standard indices kept
    shutil.rmtree(root / "train")
    with pytest.warns(UserWarning, match="not the standard"):
        val_only = load_dataset("imagenet", "test", data_root=root, stream=True)
    assert val_only.classes == list(WNIDS[1:]) and set(val_only.y.tolist()) == {0, 1}


# --- transforms ----------------------------------------------------------------------------------------------

def test_eval_transform_is_resize_256_centre_crop_224(ilsvrc):
    from torchvision import transforms as T

    tr = _quiet_load("imagenet", "train", data_root=ilsvrc["sorted"])
    ds = tr.dataset(224, train=False)
    ref = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(tr.mean, tr.std)])
    for i in (0, 2):   # a portrait and a landscape image
        x, label = ds[i]
        with Image.open(tr.root / tr.files[i]) as im:
            want = ref(im.convert("RGB"))
        assert label == int(tr.y[i]) and x.shape == (3, 224, 224)
        assert torch.allclose(x, want, atol=1e-5)


def test_train_transform_is_random_but_seeded(ilsvrc):
    tr = _quiet_load("imagenet", "train", data_root=ilsvrc["sorted"])
    ds = tr.dataset(224, train=True)
    state = torch.random.get_rng_state()
    a, b, c = ds[(1, 7)][0], ds[(1, 7)][0], ds[(1, 8)][0]
    assert torch.equal(torch.random.get_rng_state(), state)   # the global RNG (dropout) is not touched
    assert a.shape == (3, 224, 224) and torch.equal(a, b) and not torch.equal(a, c)
    eval_x = tr.dataset(224, train=False)[1][0]
    assert not torch.equal(a, eval_x)


def test_worker_processes_give_the_same_batches(ilsvrc):
    from robustbench_dgsa.engine.streaming import Loader

    tr = _quiet_load("imagenet", "train", data_root=ilsvrc["sorted"])
    ds = tr.dataset(32, train=True)
    batches = [[(0, 5), (3, 6)], [], [(7, 9)]]   # an empty share: a rank's part of a too-small global batch
    main = [(x.clone(), y.clone()) for x, y in Loader(ds, 0, torch.device("cpu")).run(batches)]
    work = list(Loader(ds, 1, torch.device("cpu")).run(batches))
    assert [x.shape for x, _ in main] == [(2, 3, 32, 32), (0, 3, 32, 32), (1, 3, 32, 32)]
    assert main[0][1].tolist() == [int(tr.y[0]), int(tr.y[3])]
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(main, work))


def test_ranks_decode_disjoint_shares_of_each_batch():
    """In a process group each rank's DataLoader gets its share of every global batch: together exactly the batch,
    with the same per-example seeds as one process."""
    from robustbench_dgsa.engine import distributed
    from robustbench_dgsa.engine.streaming import train_batches

    split_idx = np.arange(100, 111)
    order = torch.randperm(11, generator=torch.Generator().manual_seed(0))

    def batches(world):
        return train_batches(split_idx, order, 4, 3, 5, lambda n: distributed.batch_shard(n, world))
    one = batches(distributed.SINGLE)
    ranks = [batches(distributed.World(rank=r, size=2, local_rank=r, backend="gloo")) for r in (0, 1)]
    assert [len(b) for b in one] == [4, 4, 3]
    for step, items in enumerate(one):
        assert sorted(ranks[0][step] + ranks[1][step]) == sorted(items)
        assert not set(ranks[0][step]) & set(ranks[1][step])


# --- training end to end, the paper preset, reproduce --------------------------------------------------------

def test_train_end_to_end_on_the_fixture(ilsvrc, tmp_path, run_main):
    out = tmp_path / "run"
    code, stdout, err = run_main(["train", "--model", "dgvit", "--dataset", "imagenet", "--data-root",
                                  str(ilsvrc["sorted"]), "--preset", "tiny", "--epochs", "2", "--batch-size", "4",
                                  "--set", "model.image_size=48", "--set", "model.patch_size=16",
                                  "--set", "data.augment=true", "--data-workers", "0", "--out", str(out),
                                  "--json", "--quiet"], tmp_path)
    assert code == 0, err
    summary = json.loads(stdout)
    run = summary["runs"][0]
    assert run["final"]["n_test"] == len(VAL_WNIDS) and len(run["history"]) == 2
    assert run["history"][0]["n_train"] + run["history"][0]["n_val"] == 12
    from robustbench_dgsa.models.checkpoint import read_checkpoint_meta

    cfg, meta = read_checkpoint_meta(Path(run["checkpoint"]))
    assert (cfg.image_size, cfg.patch_size, cfg.num_classes) == (48, 16, 3)
    assert meta["classes"] == list(WNIDS) and meta["preprocess"]["image_size"] == 48


def test_paper_preset_follows_table_4_for_imagenet():
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.models import get_model_config

    for m in ("vit", "dvit", "dgvit"):
        cfg = resolve_config(get_model_config(m), "imagenet", "paper")
        assert (cfg.model.image_size, cfg.model.patch_size, cfg.train.batch_size) == (224, 16, 64)
        assert (cfg.train.epochs, cfg.train.lr, cfg.model.dim, cfg.model.depth) == (100, 3e-4, 256, 8)
        assert cfg.model.ffn_ratio == 4.0 and cfg.model.ffn_dropout2
    cfg = resolve_config(get_model_config("dgvit"), "imagenet", "paper", overrides={"model.ffn_ratio": "16/3"})
    assert cfg.model.ffn_ratio == pytest.approx(16 / 3)
    assert resolve_config(get_model_config("dgvit"), "cifar10", "paper").model.patch_size == 4


def test_reproduce_plans_table_2(ilsvrc, tmp_path):
    from robustbench_dgsa.jobs.reproduce import make_plan

    plan = make_plan(tmp_path / "r", preset="paper", data_root=ilsvrc["sorted"], image_dataset="imagenet",
                     text_dataset="none", seeds=(0, 1))
    assert {(j.model, j.dataset, j.seed) for j in plan.jobs} == {
        (m, "imagenet", s) for m in ("vit", "dvit", "dgvit") for s in (0, 1)}
    assert all(j.preset == "paper" for j in plan.jobs)
    from robustbench_dgsa.config import resolve_config
    from robustbench_dgsa.models import get_model_config

    job = next(j for j in plan.jobs if j.model == "dgvit")
    cfg = resolve_config(get_model_config(job.model), job.dataset, job.preset, overrides=job.overrides)
    assert (cfg.model.image_size, cfg.model.patch_size, cfg.train.batch_size, cfg.model.ffn_ratio) == (224, 16, 64, 4)
    wide = make_plan(tmp_path / "w", preset="paper", data_root=ilsvrc["sorted"], image_dataset="imagenet",
                     text_dataset="none", seeds=(0,), ffn_ratio="16/3")
    ratios = {j.model: j.overrides.get("model.ffn_ratio") for j in wide.jobs}
    assert ratios == {"vit": None, "dvit": "16/3", "dgvit": "16/3"}   # ViT has one row in Table 2


# --- missing ImageNet ----------------------------------------------------------------------------------------

def _one_error(code: int, out: str, err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err, err
    assert len([ln for ln in lines if ln.startswith("error:")]) == 1, err
    return next(ln for ln in lines if ln.startswith("error:"))


def test_missing_imagenet_is_one_error_naming_the_layout(tmp_path, run_main):
    empty = tmp_path / "data"
    empty.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    line = _one_error(*run_main(["reproduce", "--preset", "paper", "--image-dataset", "imagenet", "--text-dataset",
                                 "none", "--data-root", str(empty), "--out", str(tmp_path / "rep")], tmp_path))
    assert "train/<wnid>/*.JPEG" in line and "val/" in line and str(empty) in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    line = _one_error(*run_main(["train", "--model", "vit", "--dataset", "imagenet", "--data-root", str(empty),
                                 "--out", str(tmp_path / "t")], tmp_path))
    assert "train/<wnid>/*.JPEG" in line and "ILSVRC2012_validation_ground_truth.txt" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_evaluate_max_examples_reads_only_those(ilsvrc, monkeypatch):
    """``evaluate --max-examples N`` on ImageNet decodes N images, not the whole validation set."""
    from corruptions import imagenet as cimg

    from robustbench_dgsa.engine import evaluate

    calls = []
    real = cimg.read_image
    monkeypatch.setattr(cimg, "read_image", lambda p: calls.append(p) or real(p))
    plan = evaluate.EvalPlan(dataset="imagenet", split="test", data_root=str(ilsvrc["sorted"]), max_test=2)
    subject = evaluate.EvalSubject(model=None, preprocess={}, name="m", modality="image", classes=list(WNIDS),
                                   trained_on="imagenet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = evaluate._load_eval_data(subject, plan)
    assert len(calls) == 2 and data.raw.shape == (2, 224, 224, 3)
    assert np.array_equal(data.raw_all[data.idx], data.raw)
