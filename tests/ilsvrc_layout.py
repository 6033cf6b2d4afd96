"""The tiny ILSVRC2012 layout the ImageNet tests train and plan on (``make_ilsvrc``), shared by
tests/data/test_imagenet_train.py and tests/jobs/test_table2_slurm.py.

3 wnids x 4 training JPEGs of varied sizes, 2 validation images per class, either flat (with
``ILSVRC2012_validation_ground_truth.txt`` + ``meta.mat``, ILSVRC2012_IDs not in wnid order, as in the real
devkit) or sorted into ``val/<wnid>/``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

WNIDS = ("n01440764", "n01443537", "n01484850")     # sorted
ILSVRC_IDS = {"n01440764": 449, "n01443537": 450, "n01484850": 442}   # the devkit's ids are not in wnid order
TRAIN_SIZES = ((300, 260), (260, 300), (400, 240), (257, 257))
VAL_WNIDS = ("n01484850", "n01440764", "n01443537", "n01440764", "n01484850", "n01443537")  # by val number


def _jpeg(path: Path, rng, w: int, h: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path, quality=95)


def _write_meta(path: Path) -> None:
    import scipy.io

    dtype = [("ILSVRC2012_ID", "O"), ("WNID", "O"), ("num_children", "O")]
    syn = np.array([(ILSVRC_IDS[w], w, 0) for w in WNIDS] + [(1001, "n00001740", 3)], dtype=dtype)
    scipy.io.savemat(path, {"synsets": syn})


def make_ilsvrc(root: Path, *, flat: bool, train: bool = True) -> Path:
    """The tiny ILSVRC2012 layout under ``root``."""
    rng = np.random.default_rng(0)
    if train:
        for w in WNIDS:
            for j, (width, height) in enumerate(TRAIN_SIZES):
                _jpeg(root / "train" / w / f"{w}_{j + 1}.JPEG", rng, width, height)
    rng = np.random.default_rng(1)
    for k, w in enumerate(VAL_WNIDS):
        name = f"ILSVRC2012_val_{k + 1:08d}.JPEG"
        _jpeg(root / "val" / name if flat else root / "val" / w / name, rng, 300 + 10 * k, 260)
    if flat:
        (root / "ILSVRC2012_validation_ground_truth.txt").write_text(
            "".join(f"{ILSVRC_IDS[w]}\n" for w in VAL_WNIDS))
        _write_meta(root / "meta.mat")
    return root
