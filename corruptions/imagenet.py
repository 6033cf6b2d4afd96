"""ImageNet and Tiny-ImageNet inputs of the corruption generators: the validation folders, listed as the generators
walk them, and each generator's input step.

* ImageNet val: ``val/<wnid>/<file>`` (sorted classes, files sorted within a class: torchvision ``ImageFolder``'s
  and the generator's order), or the flat ``val/ILSVRC2012_val_NNNNNNNN.JPEG`` of the official archive with the
  devkit's labels (``ILSVRC2012_validation_ground_truth.txt`` + ``meta.mat``) or Kaggle's ``LOC_val_solution.csv``;
* Tiny-ImageNet val: ``tiny-imagenet-200/val/images/*.JPEG`` with ``val/val_annotations.txt``, or ``val/<wnid>/``.

Input steps (:data:`INPUT_STEPS`), as the generators apply them to a PIL image converted to RGB: ImageNet-C
``Resize(256)`` (shorter side to 256, PIL bilinear; the longer side int(256 * long / short)) then
``CenterCrop(224)`` (offsets round((side - 224) / 2)); Tiny-ImageNet-C ``Resize((64, 64))`` (squashed, PIL
bilinear).
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .errors import CorruptionError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm")  # the generators' list
_WNID = re.compile(r"n\d{8}")
_VAL_NUMBER = re.compile(r"ILSVRC2012_val_(\d+)")


# ---------------------------------------------------------------------------------------------- input steps


def imagenet_input(im) -> np.ndarray:
    """torchvision ``Resize(256)`` then ``CenterCrop(224)`` of a PIL RGB image, as uint8 (224, 224, 3)."""
    from PIL import Image

    w, h = im.size
    if not ((w <= h and w == 256) or (h <= w and h == 256)):  # Resize returns the image as is at 256
        size = (256, int(256 * h / w)) if w < h else (int(256 * w / h), 256)
        im = im.resize(size, Image.BILINEAR)
    w, h = im.size
    if w < 224 or h < 224:
        raise CorruptionError(f"image of {w}x{h} after Resize(256) is smaller than the 224x224 crop")
    top, left = int(round((h - 224) / 2.0)), int(round((w - 224) / 2.0))
    return np.asarray(im.crop((left, top, left + 224, top + 224)), dtype=np.uint8)


def tiny_imagenet_input(im) -> np.ndarray:
    """torchvision ``Resize((64, 64))`` of a PIL RGB image (squashed; PIL bilinear), as uint8 (64, 64, 3)."""
    from PIL import Image

    return np.asarray(im.resize((64, 64), Image.BILINEAR), dtype=np.uint8)


INPUT_STEPS: dict[str, Callable] = {"imagenet": imagenet_input, "tiny-imagenet": tiny_imagenet_input}


def read_image(path: str | os.PathLike) -> tuple:
    """(PIL RGB image, the file's bytes) of one input file (``Image.open(f).convert('RGB')``)."""
    from PIL import Image, UnidentifiedImageError

    data = Path(path).read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.convert("RGB"), data
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise CorruptionError(f"{path}: not a readable image ({e})") from None


# ---------------------------------------------------------------------------------------------- listings


@dataclass(frozen=True)
class ImageList:
    """The images of a validation folder in the generator's order: ``files`` relative to ``root``, the class
    (WordNet id) of each, the sorted class list (a label is its class's position) and the output name of each
    (``<wnid>/<file name>``, the official -C layout's)."""

    root: Path
    files: tuple
    wnids: tuple
    classes: tuple
    description: str

    def __len__(self) -> int:
        return len(self.files)

    @property
    def labels(self) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.classes)}
        return np.array([index[w] for w in self.wnids], dtype=np.int64)

    @property
    def out_names(self) -> list[str]:
        return [f"{w}/{Path(f).name}" for f, w in zip(self.files, self.wnids)]

    def head(self, n: int | None) -> "ImageList":
        """The first ``n`` images (all for None)."""
        if n is None or n >= len(self.files):
            return self
        return ImageList(self.root, self.files[:n], self.wnids[:n], self.classes,
                         f"{self.description}, first {n} images")

    def digest(self) -> str:
        """SHA-256 over the relative paths, classes and file sizes (identifies the input set cheaply)."""
        h = hashlib.sha256()
        for f, w in zip(self.files, self.wnids):
            h.update(f"{f}\t{w}\t{(self.root / f).stat().st_size}\n".encode())
        return h.hexdigest()


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _class_folders(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.is_dir())


def _from_class_folders(val: Path, description: str) -> ImageList:
    files, wnids = [], []
    classes = _class_folders(val)
    for c in classes:
        for root, _, names in sorted(os.walk(val / c)):
            for name in sorted(names):
                if _is_image(name):
                    files.append(os.path.relpath(os.path.join(root, name), val))
                    wnids.append(c)
    if not files:
        raise CorruptionError(f"{val}: no images in its class folders")
    return ImageList(val, tuple(files), tuple(wnids), tuple(classes), description)


def _devkit_labels(roots: Sequence[Path]) -> dict[int, str] | None:
    """{val image number: wnid} from the ILSVRC2012 devkit (ground truth + meta.mat) under one of ``roots``."""
    for r in roots:
        for d in (r, r / "ILSVRC2012_devkit_t12" / "data", r / "data"):
            gt, meta = d / "ILSVRC2012_validation_ground_truth.txt", d / "meta.mat"
            if gt.is_file() and meta.is_file():
                from scipy.io import loadmat

                syn = loadmat(meta, squeeze_me=True)["synsets"]
                by_id = {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in syn if int(s["num_children"]) == 0}
                ids = [int(v) for v in gt.read_text().split()]
                return {i + 1: by_id[v] for i, v in enumerate(ids)}
    return None


def _kaggle_labels(roots: Sequence[Path]) -> dict[int, str] | None:
    """{val image number: wnid} from Kaggle's ``LOC_val_solution.csv`` (first word of PredictionString)."""
    for r in roots:
        path = r / "LOC_val_solution.csv"
        if path.is_file():
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
            return {int(_VAL_NUMBER.search(row["ImageId"]).group(1)): row["PredictionString"].split()[0]
                    for row in rows}
    return None


def _flat_val(val: Path, roots: Sequence[Path], description: str) -> ImageList:
    names = sorted(n for n in os.listdir(val) if _is_image(n))
    labels = _devkit_labels(roots) or _kaggle_labels(roots)
    if labels is None:
        raise CorruptionError(f"{val}: flat validation images need their labels: the devkit's "
                              f"ILSVRC2012_validation_ground_truth.txt and meta.mat, or LOC_val_solution.csv")
    wnids = []
    for n in names:
        m = _VAL_NUMBER.match(n)
        if m is None or int(m.group(1)) not in labels:
            raise CorruptionError(f"{val / n}: no label for this file in the ground truth")
        wnids.append(labels[int(m.group(1))])
    order = sorted(range(len(names)), key=lambda i: (wnids[i], names[i]))  # the class-folder order
    return ImageList(val, tuple(names[i] for i in order), tuple(wnids[i] for i in order),
                     tuple(sorted(set(wnids))), description)


def _find_val(root: Path, subdirs: Sequence[str]) -> Path | None:
    for s in subdirs:
        d = root / s if s else root
        if d.is_dir() and (any(_WNID.fullmatch(p.name) for p in d.iterdir() if p.is_dir())
                           or any(_is_image(p.name) for p in d.iterdir())):
            return d
    return None


def list_imagenet_val(root: str | os.PathLike) -> ImageList:
    """The ImageNet validation images under ``root`` (``root/val``, ``root/imagenet/val``, ``root/ILSVRC2012/val``
    or ``root`` itself), in the generator's order."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise CorruptionError(f"{root}: no such folder")
    val = _find_val(root, ("val", "imagenet/val", "ILSVRC2012/val", ""))
    if val is None:
        raise CorruptionError(f"{root}: no ImageNet validation folder (expected val/<wnid>/*.JPEG, or val/*.JPEG "
                              f"with the devkit's ground truth)")
    if any(_WNID.fullmatch(p.name) for p in val.iterdir() if p.is_dir()):
        return _from_class_folders(val, f"ImageNet val {val}")
    return _flat_val(val, (root, val.parent, val), f"ImageNet val {val} (flat, devkit labels)")


def list_tiny_imagenet_val(root: str | os.PathLike) -> ImageList:
    """The Tiny-ImageNet validation images under ``root`` (``tiny-imagenet-200/val`` or ``val``): ``images/`` with
    ``val_annotations.txt``, or ``<wnid>/`` class folders."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise CorruptionError(f"{root}: no such folder")
    for val in (root / "tiny-imagenet-200" / "val", root / "val", root):
        ann = val / "val_annotations.txt"
        if ann.is_file() and (val / "images").is_dir():
            pairs = sorted((line.split("\t")[1], line.split("\t")[0]) for line in ann.read_text().splitlines()
                           if line.strip())
            files = tuple(f"images/{f}" for _, f in pairs)
            missing = [f for f in files[:50] if not (val / f).is_file()]
            if missing:
                raise CorruptionError(f"{val}: {missing[0]} is listed in val_annotations.txt but missing")
            return ImageList(val, files, tuple(w for w, _ in pairs), tuple(sorted({w for w, _ in pairs})),
                             f"Tiny-ImageNet val {val}")
        if val.is_dir() and any(_WNID.fullmatch(p.name) for p in val.iterdir() if p.is_dir()):
            return _from_class_folders(val, f"Tiny-ImageNet val {val}")
    raise CorruptionError(f"{root}: no Tiny-ImageNet validation folder (expected tiny-imagenet-200/val/images with "
                          f"val_annotations.txt, or val/<wnid>/)")


LISTINGS: dict[str, Callable[[str | os.PathLike], ImageList]] = {
    "imagenet": list_imagenet_val, "tiny-imagenet": list_tiny_imagenet_val}


def load_inputs(images: ImageList, start: int, stop: int, regime: str) -> tuple[np.ndarray, list[str]]:
    """Images ``start:stop`` after ``regime``'s input step, as uint8 (n, S, S, 3), and the SHA-256 of each file."""
    step = INPUT_STEPS[regime]
    out, sums = [], []
    for f in images.files[start:stop]:
        im, data = read_image(images.root / f)
        out.append(step(im))
        sums.append(hashlib.sha256(data).hexdigest())
    return np.stack(out), sums
