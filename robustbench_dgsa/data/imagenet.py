"""ImageNet-1k (train and val) and the Tiny-ImageNet validation set.

* ``imagenet``, the official ILSVRC2012 layout under the data root (also under ``<root>/imagenet`` or
  ``<root>/ILSVRC2012``): split ``train`` = ``train/<wnid>/*.JPEG``; split ``test`` = the validation set (ImageNet's
  test labels are not public; ImageNet-C is made from val), either ``val/<wnid>/*.JPEG`` or the flat
  ``val/ILSVRC2012_val_*.JPEG`` with the devkit's ``ILSVRC2012_validation_ground_truth.txt`` + ``meta.mat`` (or
  Kaggle's ``LOC_val_solution.csv``). Nothing is downloaded.
* ``tiny-imagenet``: ``<root>/tiny-imagenet-200/val/images`` with ``val_annotations.txt`` (or ``val/<wnid>/``);
  ``Resize((64, 64))``; split ``test`` only.

Class order (torchvision ``ImageFolder``'s): with ``train/`` present the classes are the sorted training wnids, and
validation images are labelled by that list, so a partial ``val/`` keeps the standard indices; without ``train/``
they are the sorted wnids present in ``val/``. Fewer than 1000 classes gives a one-line warning: the indices are
then not the standard ImageNet-1k ones.

Two ways to read a split:

* streaming, :class:`ImageFiles` (``stream=True``; always for ``train``): file paths and labels only; images are
  decoded on demand by a torch :class:`FileDataset` in DataLoader workers (PIL + torchvision transforms v2):
  training ``RandomResizedCrop(S)`` + horizontal flip, evaluation ``Resize(S * 256 / 224)`` + ``CenterCrop(S)``
  (``Resize(256)`` + ``CenterCrop(224)`` at S = 224); :meth:`ImageFiles.read` decodes chosen images only;
* in memory (split ``test`` without ``stream``): :class:`ImageData` after the ImageNet-C generator's own input step
  (:mod:`corruptions.imagenet`), so a clean image is exactly the input its corrupted copies were made from;
  ``names`` holds each image's ``<wnid>/<file>``, its copies' name in the -C layout. All of ImageNet val is
  50,000 x 224 x 224 x 3 bytes = 7.5 GB: ``max_images`` reads the first N only.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from robustbench_dgsa.util.errors import DataError, UserError
from .vision import ImageData

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
IMAGENET_SIZE = 224
HINTS = {
    "imagenet": "<root>/train/<wnid>/*.JPEG (training; ILSVRC2012_img_train.tar unpacked, one folder per class) "
                "and <root>/val/<wnid>/*.JPEG (or the flat <root>/val/ILSVRC2012_val_*.JPEG with the devkit's "
                "ILSVRC2012_validation_ground_truth.txt and meta.mat in <root>)",
    "tiny-imagenet": "<root>/tiny-imagenet-200/val/images/*.JPEG with "
                     "<root>/tiny-imagenet-200/val/val_annotations.txt",
}
_PLACES = ("", "imagenet", "ILSVRC2012")   # where under the data root the train/ and val/ folders may be
_CHUNK = 256


# --- the streaming split -----------------------------------------------------------------------------------

@dataclass
class ImageFiles:
    """An image split read from files on demand: ``files`` (relative to ``root``), labels ``y``, ``classes``."""
    root: Path
    files: tuple
    y: np.ndarray
    classes: list[str]
    name: str
    source: str
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    names: tuple | None = None        # per image, its <wnid>/<file> in a -C folder layout
    image_size: int = IMAGENET_SIZE   # the side of the evaluation crop at the standard geometry
    notes: tuple = field(default=())

    modality = "image"   # class attributes, not fields
    streaming = True

    def __len__(self) -> int:
        return len(self.y)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def read(self, idx: Sequence[int]) -> ImageData:
        """The images at ``idx`` decoded with the ImageNet-C input step (Resize(256) + CenterCrop(224)), in memory."""
        from corruptions.errors import CorruptionError
        from corruptions.imagenet import INPUT_STEPS, read_image

        idx = np.asarray(idx, dtype=np.int64)
        x = np.empty((len(idx), IMAGENET_SIZE, IMAGENET_SIZE, 3), dtype=np.uint8)
        for k, i in enumerate(idx):
            try:
                x[k] = INPUT_STEPS["imagenet"](read_image(self.root / self.files[i])[0])
            except CorruptionError as e:
                raise DataError(f"{self.name}: {e}") from None
        names = None if self.names is None else tuple(self.names[i] for i in idx)
        return ImageData(x=x, y=self.y[idx], classes=list(self.classes), name=self.name, source=self.source,
                         mean=self.mean, std=self.std, names=names)

    def dataset(self, image_size: int, *, train: bool) -> "FileDataset":
        """A torch dataset of normalised (3, S, S) float images and labels: the training transform
        (RandomResizedCrop + flip) when ``train``, else the evaluation transform."""
        return FileDataset(self.root, self.files, self.y, make_transform(image_size, self.mean, self.std, train))


def make_transform(size: int, mean: Sequence[float], std: Sequence[float], train: bool):
    """torchvision transforms v2 on a PIL RGB image: ``RandomResizedCrop(size)`` + ``RandomHorizontalFlip()``
    (train) or ``Resize(round(size * 256 / 224))`` + ``CenterCrop(size)`` (eval), then scale to [0, 1] and
    normalise with ``mean`` / ``std``."""
    import torch
    from torchvision.transforms import v2

    geometry = ([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip()] if train else
                [v2.Resize(int(round(size * 256 / IMAGENET_SIZE)), antialias=True), v2.CenterCrop(size)])
    return v2.Compose([*geometry, v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                       v2.Normalize(list(mean), list(std))])


class FileDataset:
    """A map-style torch dataset over image files. An item is an index, or ``(index, seed)``: the random
    transform then draws from a generator seeded with ``seed`` (the same crop in any worker, in any process),
    without touching the process's global RNG."""

    def __init__(self, root: Path, files: Sequence[str], labels: np.ndarray, transform: Any) -> None:
        self.root, self.files, self.labels, self.transform = Path(root), tuple(files), np.asarray(labels), transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, item: Any) -> tuple[Any, int]:
        import torch
        from PIL import Image

        i, seed = item if isinstance(item, tuple) else (item, None)
        path = self.root / self.files[int(i)]
        try:
            with Image.open(path) as im:
                im = im.convert("RGB")
        except OSError as e:
            raise DataError(f"{path}: not a readable image ({e})") from None
        if seed is None:
            x = self.transform(im)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seed))
                x = self.transform(im)
        return x, int(self.labels[int(i)])


# --- listing -------------------------------------------------------------------------------------------------

def _find_split_dir(root: Path, split_dir: str) -> Path | None:
    for place in _PLACES:
        d = root / place / split_dir if place else root / split_dir
        if d.is_dir():
            return d
    return None


def _is_wnid(name: str) -> bool:
    return len(name) == 9 and name[0] == "n" and name[1:].isdigit()


def _train_classes(root: Path) -> list[str] | None:
    """The sorted wnid folders of ``train/`` (None without one)."""
    train = _find_split_dir(root, "train")
    if train is None:
        return None
    classes = sorted(p.name for p in train.iterdir() if p.is_dir() and _is_wnid(p.name))
    return classes or None


def _warn_partial(classes: Sequence[str], where: str) -> None:
    if len(classes) < 1000:
        warnings.warn(f"imagenet: {len(classes)} classes ({where}), not 1000: class indices are the positions in "
                      f"this sorted list, not the standard ImageNet-1k indices", stacklevel=3)


def _missing(root: Path, what: str) -> DataError:
    return DataError(f"imagenet: {what} under {root}; put the files at {HINTS['imagenet'].replace('<root>', str(root))}"
                     " (nothing is downloaded)")


def check_present(root: Path) -> None:
    """A one-line DataError unless ``root`` holds an ImageNet layout (``train/<wnid>/`` and ``val/``); cheap: no
    listing of the images."""
    if not root.is_dir():
        raise _missing(root, "no data root")
    if _train_classes(root) is None:
        raise _missing(root, "no training folder train/<wnid>/")
    if _find_split_dir(root, "val") is None:
        raise _missing(root, "no validation folder val/")


def list_train(root: Path) -> ImageFiles:
    """The training images ``train/<wnid>/*`` in ImageFolder order (classes sorted, files sorted per class)."""
    from corruptions.imagenet import IMAGE_EXTENSIONS

    train = _find_split_dir(root, "train")
    classes = _train_classes(root)
    if train is None or classes is None:
        raise _missing(root, "no training folder train/<wnid>/")
    files, labels = [], []
    for k, c in enumerate(classes):
        for dirpath, dirnames, names in os.walk(train / c):
            dirnames.sort()
            for n in sorted(names):
                if n.lower().endswith(IMAGE_EXTENSIONS):
                    files.append(os.path.relpath(os.path.join(dirpath, n), train))
                    labels.append(k)
    if not files:
        raise _missing(root, f"no images in the class folders of {train}")
    _warn_partial(classes, "the training folders")
    return ImageFiles(train, tuple(files), np.asarray(labels, dtype=np.int64), classes, "imagenet",
                      f"ImageNet train {train}", names=tuple(f"{Path(f).parent.name}/{Path(f).name}" for f in files))


def list_val(root: Path):
    """(the validation images in the generator's order, their labels, the class list): labels index the sorted
    training wnids when ``train/`` is present, else the sorted wnids present in ``val/``."""
    from corruptions.errors import CorruptionError
    from corruptions.imagenet import list_imagenet_val

    try:
        images = list_imagenet_val(root)
    except CorruptionError as e:
        raise _missing(root, str(e).replace(f"{root}: ", "", 1)) from None
    classes = _train_classes(root)
    if classes is None:
        classes = list(images.classes)
        _warn_partial(classes, "the wnids present in val/, no train/ folder")
    else:
        unknown = sorted(set(images.classes) - set(classes))
        if unknown:
            raise DataError(f"imagenet: validation class {unknown[0]} has no training folder "
                            f"{_find_split_dir(root, 'train') / unknown[0]}; the val/ and train/ folders disagree")
    index = {c: i for i, c in enumerate(classes)}
    return images, np.array([index[w] for w in images.wnids], dtype=np.int64), list(classes)


# --- loaders -------------------------------------------------------------------------------------------------

def load_imagenet(split: str, root: Path, download: bool = False, *, max_images: int | None = None,
                  stream: bool = False) -> ImageData | ImageFiles:
    """ImageNet-1k split ``train`` (always streaming) or ``test`` (the validation set: streaming with ``stream``,
    else decoded in memory at 224 x 224 like ImageNet-C's inputs); ``max_images``: only the first N."""
    if download:
        raise UserError(f"imagenet cannot be downloaded; put the files at {HINTS['imagenet']}")
    if not root.is_dir():
        raise _missing(root, "no data root")
    if split == "train":
        files = list_train(root)
        if max_images is not None and max_images < len(files):
            keep = np.arange(max_images)
            files = ImageFiles(files.root, files.files[:max_images], files.y[keep], files.classes, files.name,
                               f"{files.source}, first {max_images} images", names=files.names[:max_images])
        return files
    if split != "test":
        raise UserError(f"imagenet: unknown split {split!r} (valid: train, test)")
    images, labels, classes = list_val(root)
    n = len(images) if max_images is None else min(int(max_images), len(images))
    files = ImageFiles(images.root, images.files[:n], labels[:n], classes, "imagenet",
                       images.description + (f", first {n} images" if n < len(images) else ""),
                       names=tuple(images.out_names[:n]))
    return files if stream else files.read(np.arange(n))


def load_tiny_imagenet(split: str, root: Path, download: bool = False, *,
                       max_images: int | None = None) -> ImageData:
    """Tiny-ImageNet val at 64 x 64 (Resize((64, 64))), as Tiny-ImageNet-C's inputs."""
    from corruptions.errors import CorruptionError
    from corruptions.imagenet import LISTINGS, load_inputs

    if download:
        raise UserError(f"tiny-imagenet cannot be downloaded; put the files at {HINTS['tiny-imagenet']}")
    if split != "test":
        raise UserError(f"tiny-imagenet: only the test split (the validation images) is available, not {split!r}")
    try:
        images = LISTINGS["tiny-imagenet"](root).head(max_images)
    except CorruptionError as e:
        raise DataError(f"tiny-imagenet: {e}; put the files at "
                        f"{HINTS['tiny-imagenet'].replace('<root>', str(root))}") from None
    x = None
    for start in range(0, len(images), _CHUNK):
        try:
            part, _ = load_inputs(images, start, min(start + _CHUNK, len(images)), "tiny-imagenet")
        except CorruptionError as e:
            raise DataError(f"tiny-imagenet: {e}") from None
        if x is None:
            x = np.empty((len(images), *part.shape[1:]), dtype=np.uint8)
        x[start:start + len(part)] = part
    return ImageData(x=x, y=images.labels, classes=list(images.classes), name="tiny-imagenet",
                     source=images.description, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                     names=tuple(images.out_names))
