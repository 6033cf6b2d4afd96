"""ImageNet and Tiny-ImageNet validation sets: the clean images behind ImageNet-C and Tiny-ImageNet-C.

Split ``test`` is the validation set (ImageNet's test labels are not public; the -C sets are made from val).
The files are listed and prepared by the corruption generators' own code (:mod:`corruptions.imagenet`), so a clean
image is exactly the input its corrupted copies were made from:

* ``imagenet``: ``<root>/val/<wnid>/*.JPEG`` (also ``<root>/imagenet/val``, ``<root>/ILSVRC2012/val``), or the flat
  ``val/ILSVRC2012_val_*.JPEG`` with the devkit's ground truth; ``Resize(256)`` + ``CenterCrop(224)``;
* ``tiny-imagenet``: ``<root>/tiny-imagenet-200/val/images`` with ``val_annotations.txt`` (or ``val/<wnid>/``);
  ``Resize((64, 64))``.

Classes are the WordNet ids present, sorted (torchvision ``ImageFolder``'s order, the standard class indices when
all 1000 / 200 classes are there). ``ImageData.names`` holds each image's ``<wnid>/<file>``, the name its copies
have in the -C folder layout. The whole split is held in memory (50,000 x 224 x 224 x 3 bytes = 7.5 GB for all of
ImageNet val).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from robustbench_dgsa.util.errors import DataError, UserError
from .vision import ImageData

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
HINTS = {
    "imagenet": "<root>/val/<wnid>/*.JPEG (or <root>/val/*.JPEG with the devkit's "
                "ILSVRC2012_validation_ground_truth.txt and meta.mat)",
    "tiny-imagenet": "<root>/tiny-imagenet-200/val/images/*.JPEG with "
                     "<root>/tiny-imagenet-200/val/val_annotations.txt",
}
_CHUNK = 256


def load_val_set(dataset: str, split: str, root: Path, download: bool = False, *,
                 max_images: int | None = None) -> ImageData:
    """The ``test`` (validation) split of ``dataset`` ("imagenet" or "tiny-imagenet") under ``root``, after the
    generator's input step; ``max_images``: only the first N in the generator's order."""
    from corruptions.errors import CorruptionError
    from corruptions.imagenet import LISTINGS, load_inputs

    if download:
        raise UserError(f"{dataset} cannot be downloaded; put the files at {HINTS[dataset]}")
    if split != "test":
        raise UserError(f"{dataset}: only the test split (the validation images) is available, not {split!r}")
    try:
        images = LISTINGS[dataset](root).head(max_images)
    except CorruptionError as e:
        raise DataError(f"{dataset}: {e}; put the files at {HINTS[dataset].replace('<root>', str(root))}") from None
    x = None
    for start in range(0, len(images), _CHUNK):
        try:
            part, _ = load_inputs(images, start, min(start + _CHUNK, len(images)), dataset)
        except CorruptionError as e:
            raise DataError(f"{dataset}: {e}") from None
        if x is None:
            x = np.empty((len(images), *part.shape[1:]), dtype=np.uint8)
        x[start:start + len(part)] = part
    return ImageData(x=x, y=images.labels, classes=list(images.classes), name=dataset,
                     source=images.description, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                     names=tuple(images.out_names))


def load_imagenet(split: str, root: Path, download: bool = False, *, max_images: int | None = None) -> ImageData:
    """ImageNet val at 224 x 224 (Resize(256) + CenterCrop(224)), as ImageNet-C's inputs."""
    return load_val_set("imagenet", split, root, download, max_images=max_images)


def load_tiny_imagenet(split: str, root: Path, download: bool = False, *,
                       max_images: int | None = None) -> ImageData:
    """Tiny-ImageNet val at 64 x 64 (Resize((64, 64))), as Tiny-ImageNet-C's inputs."""
    return load_val_set("tiny-imagenet", split, root, download, max_images=max_images)
