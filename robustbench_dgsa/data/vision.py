"""Image datasets: official layouts, the shared JPEG copy of CIFAR-10, image folders, preprocessing.

All loaders return :class:`ImageData` with ``x`` uint8 (N, H, W, C), C = 1 or 3, in the official order.
Local files are parsed here (pickles, IDX, .mat; images and arrays through :mod:`.readers`) — torchvision is used only to *download*
(``download=True``) when the files are absent, so its checksum test never rejects locally provided files.

Sources per dataset (searched in ``<root>`` and the sub-folders listed in ``_SUBDIRS``):

* ``cifar10``: official ``cifar-10-batches-py/`` (or ``cifar-10-python.tar.gz``); else the shared JPEG copy
  ``cifar10-jpeg75/{train,test}/<class>/<index:05d>.jpg`` or its archive ``cifar10-jpeg75.tar.xz`` (JPEG quality 75,
  lossy; the ``source`` says so). Split ``"test-exact"``: ``cifar10-test-exact-first1017.npz`` (the first 1,017
  official test images, exact pixels), or the first 1,017 images of the official test batch when the pickles
  are there. Option ``source="auto"|"official"|"jpeg"`` forces one source.
* ``cifar100``: ``cifar-100-python/{train,test,meta}`` (or ``cifar-100-python.tar.gz``); ``label_mode="fine"``
  (default, 100 classes) or ``"coarse"`` (20).
* ``fashion-mnist``: ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` in ``<root>``, ``<root>/fashion-mnist``
  or ``<root>/FashionMNIST/raw`` (C = 1).
* ``svhn``: ``{train,test,extra}_32x32.mat`` (label 10 -> 0).
* image folders: ``<folder>/<split>/<class>/*.{png,jpg,jpeg,bmp,gif,webp,tif,tiff}``, and ``.npy`` / ``.npz``
  image arrays; both read by :mod:`.readers` (its docstring states the pixel policy).

Normalisation constants (``mean``/``std``, per channel, on the [0, 1] scale): published values for CIFAR-10
(also used for its JPEG copy, so one model applies to both), CIFAR-100, Fashion-MNIST and SVHN; computed from
the *training* split for image folders and the synthetic set.
"""
from __future__ import annotations

import gzip
import os
import pickle
import re
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import scipy.io
import torch
import torch.nn.functional as F

from robustbench_dgsa.util.errors import DataError, UserError
from . import cache, readers
from .locate import bases, find_first, missing_error
from .splits import stratified_split

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
CIFAR100_FINE = (
    "apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly camel can "
    "castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur dolphin "
    "elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion lizard lobster "
    "man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree pear pickup_truck "
    "pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea seal shark shrew skunk "
    "skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table tank telephone television tiger "
    "tractor train trout tulip turtle wardrobe whale willow_tree wolf woman worm").split()
CIFAR100_COARSE = (
    "aquatic_mammals fish flowers food_containers fruit_and_vegetables household_electrical_devices "
    "household_furniture insects large_carnivores large_man-made_outdoor_things large_natural_outdoor_scenes "
    "large_omnivores_and_herbivores medium_mammals non-insect_invertebrates people reptiles small_mammals trees "
    "vehicles_1 vehicles_2").split()
FASHION_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot"]
SVHN_CLASSES = [str(i) for i in range(10)]

# Published per-channel statistics of the training sets (pixel values scaled to [0, 1]).
STATS = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)),
}

_SUBDIRS = {
    "cifar10": ["cifar10", "cifar-10", "CIFAR10", "CIFAR-10"],
    "cifar100": ["cifar100", "cifar-100", "CIFAR100", "CIFAR-100"],
    "fashion-mnist": ["fashion-mnist", "FashionMNIST/raw", "FashionMNIST", "fashion_mnist", "fashionmnist"],
    "svhn": ["svhn", "SVHN"],
}
HINTS = {
    "cifar10": "<root>/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta} (official python version), "
               "or <root>/cifar10/cifar10-jpeg75.tar.xz (JPEG copy) plus cifar10-test-exact-first1017.npz "
               "for split test-exact",
    "cifar100": "<root>/cifar-100-python/{train,test,meta} (official python version)",
    "fashion-mnist": "<root>/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz "
                     "(or directly in <root>, or in <root>/FashionMNIST/raw/)",
    "svhn": "<root>/svhn/{train,test}_32x32.mat (or directly in <root>)",
}
IMAGE_EXTS = readers.IMAGE_EXTS


@dataclass
class ImageData:
    """An image split. ``x`` uint8 (N, H, W, C); ``y`` int64 (N,); ``salient`` bool (N, H, W) or None."""
    x: np.ndarray
    y: np.ndarray
    classes: list[str]
    name: str
    source: str
    salient: np.ndarray | None = None
    mean: tuple[float, ...] = field(default=(0.5, 0.5, 0.5))
    std: tuple[float, ...] = field(default=(0.25, 0.25, 0.25))
    notes: tuple[str, ...] = ()  # what the reading policy did (e.g. "2 image(s) with transparency: ...")
    names: tuple[str, ...] | None = None  # per image, where a -C folder layout names its copies (<wnid>/<file>)

    modality = "image"  # class attribute, not a field

    def __post_init__(self) -> None:
        if self.x.ndim != 4 or self.x.dtype != np.uint8 or self.x.shape[-1] not in (1, 3):
            raise DataError(f"{self.name}: images must be uint8 (N, H, W, 1|3), got {self.x.dtype} {self.x.shape}")
        if len(self.y) != len(self.x):
            raise DataError(f"{self.name}: {len(self.x)} images but {len(self.y)} labels ({self.source})")
        self.y = np.asarray(self.y, dtype=np.int64)
        self.mean = tuple(float(v) for v in self.mean)
        self.std = tuple(float(v) for v in self.std)

    def __len__(self) -> int:
        return len(self.y)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def channels(self) -> int:
        return int(self.x.shape[-1])

    def subset(self, idx) -> "ImageData":
        """A new ImageData with the examples at ``idx`` (in that order)."""
        idx = np.asarray(idx, dtype=np.int64)
        return replace(self, x=self.x[idx], y=self.y[idx],
                       salient=None if self.salient is None else self.salient[idx])


# --- preprocessing ---------------------------------------------------------------------------------------------

def to_model_input(x_uint8, mean: Sequence[float], std: Sequence[float], *, image_size: int | None = None,
                   in_chans: int = 3, crop_pct: float | None = None, interpolation: str = "bilinear"):
    """uint8 images (N, H, W, C) (or (N, H, W) grayscale; numpy or torch) -> float32 tensor (N, C, H, W).

    Steps: scale to [0, 1]; replicate a single channel to 3 when ``in_chans == 3`` (mean/std of length 1 are
    replicated too); resize to ``image_size`` x ``image_size`` with bilinear interpolation with antialiasing
    (``torch.nn.functional.interpolate(..., mode="bilinear", antialias=True, align_corners=False)``) when the size
    differs; then ``(x - mean) / std`` per channel. Three-channel data cannot feed a one-channel model
    (UserError). Memory: the result is float32, 12 bytes per RGB pixel; convert large arrays in chunks.

    ``crop_pct`` (timm's data config; needs ``image_size``): instead of the plain resize, timm's evaluation
    transform: the shorter side to floor(image_size / crop_pct) (the longer one in proportion) with
    ``interpolation`` (bilinear or bicubic with antialiasing, clipped to [0, 1]; or nearest), then the centre
    image_size x image_size crop.
    """
    x = x_uint8 if isinstance(x_uint8, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x_uint8))
    if x.dtype != torch.uint8:
        raise UserError(f"images must be uint8 (0..255), got {x.dtype}")
    if x.ndim == 3:
        x = x.unsqueeze(-1)
    if x.ndim != 4 or x.shape[-1] not in (1, 3):
        raise UserError(f"images must be (N, H, W, C) with C = 1 or 3, got shape {tuple(x.shape)}")
    x = x.permute(0, 3, 1, 2).to(torch.float32).div_(255.0)
    mean_t = torch.as_tensor(list(mean), dtype=torch.float32).flatten()
    std_t = torch.as_tensor(list(std), dtype=torch.float32).flatten()
    c = x.shape[1]
    if len(mean_t) != c or len(std_t) != c:
        if len(mean_t) == 1 and len(std_t) == 1:
            mean_t, std_t = mean_t.repeat(c), std_t.repeat(c)
        elif c == 1 and len(mean_t) == 3 and len(std_t) == 3 and in_chans == 3:
            pass  # grayscale data normalised with 3-channel stats after replication below
        else:
            raise UserError(f"mean/std have {len(mean_t)}/{len(std_t)} values for {c}-channel images")
    if c != in_chans:
        if c == 1 and in_chans == 3:
            x = x.expand(-1, 3, -1, -1)
            if len(mean_t) == 1:
                mean_t, std_t = mean_t.repeat(3), std_t.repeat(3)
        else:
            raise UserError(f"the model expects {in_chans}-channel images but the data has {c} channels")
    if crop_pct is not None and image_size is not None:
        x = resize_center_crop(x, int(image_size), float(crop_pct), interpolation)
    elif image_size is not None and (x.shape[-2] != image_size or x.shape[-1] != image_size):
        x = F.interpolate(x, size=(int(image_size), int(image_size)), mode="bilinear", antialias=True,
                          align_corners=False)
    else:
        x = x.contiguous()
    return (x - mean_t.view(1, -1, 1, 1)) / std_t.view(1, -1, 1, 1)


INTERPOLATIONS = ("bilinear", "bicubic", "nearest")


def resize_center_crop(x, size: int, crop_pct: float, interpolation: str = "bilinear"):
    """timm's evaluation resize and crop of float (N, C, H, W) in [0, 1]: the shorter side to
    floor(size / crop_pct), the longer one to int(that * long / short) (torchvision ``Resize(int)``), then the
    centre ``size`` x ``size`` crop (offsets round((side - size) / 2))."""
    import math

    if interpolation not in INTERPOLATIONS:
        raise UserError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")
    h, w = int(x.shape[-2]), int(x.shape[-1])
    scale = int(math.floor(size / crop_pct))
    new = (scale, int(scale * w / h)) if h <= w else (int(scale * h / w), scale)
    if new != (h, w):
        smooth = interpolation != "nearest"
        x = F.interpolate(x, size=new, mode=interpolation, antialias=smooth,
                          **({"align_corners": False} if smooth else {}))
        if interpolation == "bicubic":
            x = x.clamp(0.0, 1.0)
    if min(new) < size:
        raise UserError(f"crop of {size} px from images resized to {new[0]}x{new[1]}")
    top, left = int(round((new[0] - size) / 2.0)), int(round((new[1] - size) / 2.0))
    return x[..., top:top + size, left:left + size].contiguous()


def channel_stats(x: np.ndarray, chunk: int = 4096) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and (population) std of uint8 images (N, H, W, C), on the [0, 1] scale."""
    c = x.shape[-1]
    s = np.zeros(c)
    ss = np.zeros(c)
    n = 0
    for i in range(0, len(x), chunk):
        part = x[i:i + chunk].reshape(-1, c).astype(np.float64)
        s += part.sum(0)
        ss += (part * part).sum(0)
        n += len(part)
    if n == 0:
        return tuple([0.5] * c), tuple([0.25] * c)
    mean = s / n
    std = np.sqrt(np.maximum(ss / n - mean * mean, 0.0))
    std = np.where(std > 1e-6, std, 1.0)
    return tuple(float(v / 255) for v in mean), tuple(float(v / 255) for v in std)


# --- helpers ---------------------------------------------------------------------------------------------------

def _download(name: str, root: Path, split: str) -> None:
    """Fetch with torchvision into ``root`` (only called when the local files are absent)."""
    try:
        import torchvision.datasets as tvd  # only for downloads: a heavy import every data load would pay
        root.mkdir(parents=True, exist_ok=True)
        if name == "cifar10":
            tvd.CIFAR10(str(root), train=True, download=True)
        elif name == "cifar100":
            tvd.CIFAR100(str(root), train=True, download=True)
        elif name == "fashion-mnist":
            tvd.FashionMNIST(str(root), train=True, download=True)
            tvd.FashionMNIST(str(root), train=False, download=True)
        elif name == "svhn":
            tvd.SVHN(str(root), split=split, download=True)
    except Exception as e:  # network errors come in many types
        raise DataError(f"{name}: download into {root} failed ({type(e).__name__}: {' '.join(str(e).split())}); "
                        f"without internet put the files at {HINTS[name].replace('<root>', str(root))}") from None


class _SafeUnpickler(pickle.Unpickler):
    """Unpickler for the CIFAR python batches: plain containers and numpy arrays only."""
    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"),
        ("__builtin__", "object"), ("builtins", "object"),
        ("_codecs", "encode"),  # bytes in protocol-2 pickles written by Python 3
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_pickle(path: Path, dataset: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            obj = _SafeUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise DataError(f"{dataset}: cannot read {path} as a CIFAR python batch ({e}); "
                        "is it truncated or in another format?") from None
    if not isinstance(obj, dict):
        raise DataError(f"{dataset}: {path} is not a CIFAR python batch (no dict inside)")
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def _batch_arrays(d: dict[str, Any], label_key: str, path: Path, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    if "data" not in d or label_key not in d:
        raise DataError(f"{dataset}: {path} lacks '{'data' if 'data' not in d else label_key}' "
                        f"(keys: {', '.join(sorted(map(str, d)))})")
    data = np.asarray(d["data"], dtype=np.uint8)
    labels = np.asarray(d[label_key], dtype=np.int64).ravel()
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{dataset}: {path} has data of shape {data.shape}, expected (N, 3072)")
    if len(labels) != len(data):
        raise DataError(f"{dataset}: {path} has {len(data)} images but {len(labels)} labels")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


def _check_labels(y: np.ndarray, n_classes: int, what: str) -> None:
    if len(y) and (y.min() < 0 or y.max() >= n_classes):
        raise DataError(f"{what}: labels outside 0..{n_classes - 1} (found {y.min()}..{y.max()})")


def _unknown_split(name: str, split: str, valid: Sequence[str]) -> UserError:
    return UserError(f"{name}: unknown split {split!r} (valid: {', '.join(valid)})")


# --- CIFAR-10 --------------------------------------------------------------------------------------------------

CIFAR10_SPLITS = ("train", "test", "test-exact")
_EXACT_NPZ = "cifar10-test-exact-first1017.npz"


def _find_cifar_batches(places: list[Path], folder: str, marker: str, tarball: str) -> Path | None:
    d = find_first(places, [folder], kind="dir")
    if d is not None:
        return d
    for p in places:  # data root pointed at the batches folder itself
        if (p / marker).is_file():
            return p
    tb = find_first(places, [tarball], kind="file")
    if tb is not None:
        ext = cache.extract_archive(tb)
        if (ext / folder).is_dir():
            return ext / folder
    return None


def _cifar10_official(batches: Path, split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    xs, ys = [], []
    for fname in files:
        p = batches / fname
        if not p.is_file():
            raise DataError(f"cifar10: {p} is missing; the folder {batches} must hold data_batch_1..5, "
                            "test_batch and batches.meta")
        x, y = _batch_arrays(_read_pickle(p, "cifar10"), "labels", p, "cifar10")
        xs.append(x)
        ys.append(y)
    classes = list(CIFAR10_CLASSES)
    meta = batches / "batches.meta"
    if meta.is_file():
        names = _read_pickle(meta, "cifar10").get("label_names")
        if names:
            classes = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    x, y = np.concatenate(xs), np.concatenate(ys)
    _check_labels(y, len(classes), f"cifar10 ({batches})")
    return x, y, classes


_JPEG_RE = re.compile(r"(?:^|/)cifar10-jpeg75/(train|test)/([^/]+)/(\d+)\.jpe?g$", re.IGNORECASE)
_JPEG_COUNTS = {"train": 50000, "test": 10000}
JPEG_NOTE = "JPEG quality 75 (lossy, MAE about 5.8/255 against the original pixels)"


def _assemble_indexed(name: str, split: str, items: dict[int, tuple[int, np.ndarray]], expected: int,
                      where: str) -> tuple[np.ndarray, np.ndarray]:
    if sorted(items) != list(range(expected)):
        have = len(items)
        raise DataError(f"{name}: {where} has {have} {split} images with indices that are not exactly "
                        f"0..{expected - 1}; the archive or folder is incomplete or altered")
    x = np.stack([items[i][1] for i in range(expected)])
    y = np.array([items[i][0] for i in range(expected)], dtype=np.int64)
    return x, y


def _cifar10_jpeg_archive(archive: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Decode ``cifar10-jpeg75.tar.xz`` straight from the tar stream (cached per split as .npy).

    Each split's file numbers must be exactly 0..N-1. Reading stops early once the requested split holds
    the official count (10,000 test / 50,000 train) with all indices present; the shared archive lists the
    test split first, so the test split never needs the train part decompressed. Any other split read
    completely on the way is cached too.
    """
    key = cache.file_key(archive)
    entry = cache.cache_root() / "decoded" / f"cifar10-jpeg75-{split}-{key}"
    if (entry / ".complete").is_file():
        x, y = cache.load_arrays(entry, "x", "y")
        return x, y
    found: dict[str, dict[int, tuple[int, np.ndarray]]] = {s: {} for s in _JPEG_COUNTS}
    cls_index = {c: i for i, c in enumerate(CIFAR10_CLASSES)}
    complete: set[str] = set()
    for member, read in cache.iter_archive(archive):
        m = _JPEG_RE.search(member)
        if not m:
            continue
        s, cname, idx = m.group(1).lower(), m.group(2), int(m.group(3))
        if cname not in cls_index:
            raise DataError(f"cifar10: unexpected class folder {cname!r} in {archive} ({member})")
        if idx in found[s]:
            raise DataError(f"cifar10: image number {idx} appears twice in the {s} split of {archive}")
        found[s][idx] = (cls_index[cname], readers.to_rgb(readers.decode_image_bytes(read(), f"{archive}:{member}")))
        if len(found[s]) == _JPEG_COUNTS[s] and max(found[s]) == _JPEG_COUNTS[s] - 1:
            complete.add(s)
            if s == split:
                break
    if not found[split]:
        raise DataError(f"cifar10: {archive} holds no cifar10-jpeg75/{split}/<class>/<index>.jpg files")
    out = None
    for s, items in found.items():
        if s != split and s not in complete:
            continue  # partly read on the way: not cached
        xs, ys = _assemble_indexed("cifar10", s, items, len(items), str(archive))
        cache.cached_dir("decoded", f"cifar10-jpeg75-{s}", key,
                         lambda tmp, xs=xs, ys=ys: cache.save_arrays(tmp, x=xs, y=ys))
        if s == split:
            out = (xs, ys)
    assert out is not None
    return out


def load_cifar10(split: str, root: Path, download: bool = False, *, source: str = "auto") -> ImageData:
    if split not in CIFAR10_SPLITS:
        raise _unknown_split("cifar10", split, CIFAR10_SPLITS)
    if source not in ("auto", "official", "jpeg"):
        raise UserError(f"cifar10: source must be auto, official or jpeg; got {source!r}")
    places = bases(root, _SUBDIRS["cifar10"])
    mean, std = STATS["cifar10"]
    batches = None
    if source in ("auto", "official"):
        batches = _find_cifar_batches(places, "cifar-10-batches-py", "data_batch_1", "cifar-10-python.tar.gz")
    if split == "test-exact":
        npz = find_first(places, [_EXACT_NPZ], kind="file") if source != "official" else None
        if npz is not None:
            z = readers.read_npz(npz, ["x", "y"], ["index"])
            x = np.asarray(z["x"], dtype=np.uint8)
            if np.ndim(z["y"]) != 1 or len(x) != len(z["y"]):
                raise DataError(f"cifar10: {npz} has {len(x)} images but {np.shape(z['y'])} labels")
            y = readers.check_labels(z["y"], len(x), f"cifar10: {npz}")
            _check_labels(y, len(CIFAR10_CLASSES), f"cifar10 ({npz})")
            index = np.asarray(z["index"]) if "index" in z else np.arange(len(y))
            if not np.array_equal(index, np.arange(len(y))):
                raise DataError(f"cifar10: {npz} index array is not 0..{len(y) - 1}")
            return ImageData(x, y, list(CIFAR10_CLASSES), "cifar10",
                             f"{npz} (exact official pixels of test images 0..{len(y) - 1}; subset)",
                             mean=mean, std=std)
        if batches is not None:
            x, y, classes = _cifar10_official(batches, "test")
            return ImageData(x[:1017], y[:1017], classes, "cifar10",
                             f"{batches} (official python batches, test images 0..1016)", mean=mean, std=std)
        if download and source != "jpeg":
            _download("cifar10", root, split)
            return load_cifar10(split, root, False, source="official")
        raise missing_error("cifar10 (split test-exact)", root, f"<root>/cifar10/{_EXACT_NPZ} or " + HINTS["cifar10"],
                            markers=[_EXACT_NPZ, "test_batch"], looked=places)
    if batches is not None:
        x, y, classes = _cifar10_official(batches, split)
        return ImageData(x, y, classes, "cifar10", f"{batches} (official python batches)", mean=mean, std=std)
    if source in ("auto", "jpeg"):
        folder = find_first(places, ["cifar10-jpeg75"], kind="dir")
        if folder is None and root.name == "cifar10-jpeg75" and (root / split).is_dir():
            folder = root  # data root pointed at the extracted folder itself
        if folder is not None and (folder / split).is_dir():
            x, y, classes, where, _ = _read_folder_split(folder, split, order="number", classes=CIFAR10_CLASSES)
            if not np.array_equal(where, np.arange(len(y))):
                raise DataError(f"cifar10: file numbers in {folder / split} are not exactly 0..{len(y) - 1}")
            return ImageData(x, y, classes, "cifar10", f"{folder / split} ({JPEG_NOTE})", mean=mean, std=std)
        archive = find_first(places, ["cifar10-jpeg75.tar.xz"], kind="file")
        if archive is not None:
            x, y = _cifar10_jpeg_archive(archive, split)
            return ImageData(x, y, list(CIFAR10_CLASSES), "cifar10", f"{archive} ({JPEG_NOTE})",
                             mean=mean, std=std)
    if download and source != "jpeg":
        _download("cifar10", root, split)
        return load_cifar10(split, root, False, source="official")
    raise missing_error("cifar10", root, HINTS["cifar10"], downloadable=True, looked=places,
                        markers=["cifar-10-batches-py", "data_batch_1", "test_batch", "cifar10-jpeg75.tar.xz"])


# --- CIFAR-100 -------------------------------------------------------------------------------------------------

def load_cifar100(split: str, root: Path, download: bool = False, *, label_mode: str = "fine") -> ImageData:
    if split not in ("train", "test"):
        raise _unknown_split("cifar100", split, ("train", "test"))
    if label_mode not in ("fine", "coarse"):
        raise UserError(f"cifar100: label_mode must be fine or coarse, got {label_mode!r}")
    places = bases(root, _SUBDIRS["cifar100"])
    folder = _find_cifar_batches(places, "cifar-100-python", "meta", "cifar-100-python.tar.gz")
    if folder is not None and not (folder / "train").is_file() and not (folder / "test").is_file():
        folder = None
    if folder is None and download:
        _download("cifar100", root, split)
        folder = _find_cifar_batches(bases(root, []), "cifar-100-python", "meta", "cifar-100-python.tar.gz")
    if folder is None:
        raise missing_error("cifar100", root, HINTS["cifar100"], downloadable=True, looked=places,
                            markers=["cifar-100-python", "cifar-100-python.tar.gz"])
    p = folder / split
    if not p.is_file():
        raise DataError(f"cifar100: {p} is missing; the folder {folder} must hold train, test and meta")
    x, y = _batch_arrays(_read_pickle(p, "cifar100"), f"{label_mode}_labels", p, "cifar100")
    classes = list(CIFAR100_FINE if label_mode == "fine" else CIFAR100_COARSE)
    if (folder / "meta").is_file():
        names = _read_pickle(folder / "meta", "cifar100").get(f"{label_mode}_label_names")
        if names:
            classes = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    _check_labels(y, len(classes), f"cifar100 ({p})")
    mean, std = STATS["cifar100"]
    return ImageData(x, y, classes, "cifar100", f"{folder} (official python version, {label_mode} labels)",
                     mean=mean, std=std)


# --- Fashion-MNIST ---------------------------------------------------------------------------------------------

def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (gzip-compressed if the name ends in .gz) of unsigned bytes."""
    try:
        raw = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
    except (OSError, EOFError) as e:
        raise DataError(f"cannot read IDX file {path}: {e}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{path} is not an IDX file of unsigned bytes (bad magic number)")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise DataError(f"{path}: truncated IDX header")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise DataError(f"{path}: IDX header says {dims} ({int(np.prod(dims))} values) but the file holds "
                        f"{data.size}; the file is truncated or corrupt")
    return data.reshape(dims)


def load_fashion_mnist(split: str, root: Path, download: bool = False) -> ImageData:
    if split not in ("train", "test"):
        raise _unknown_split("fashion-mnist", split, ("train", "test"))
    prefix = "train" if split == "train" else "t10k"
    names = {k: [f"{prefix}-{k}-ubyte.gz", f"{prefix}-{k}-ubyte"] for k in ("images-idx3", "labels-idx1")}
    places = bases(root, _SUBDIRS["fashion-mnist"])
    img = find_first(places, names["images-idx3"], kind="file")
    lab = find_first(places, names["labels-idx1"], kind="file")
    if (img is None or lab is None) and download:
        _download("fashion-mnist", root, split)
        places = bases(root, _SUBDIRS["fashion-mnist"])
        img = find_first(places, names["images-idx3"], kind="file")
        lab = find_first(places, names["labels-idx1"], kind="file")
    if img is None or lab is None:
        raise missing_error("fashion-mnist", root, HINTS["fashion-mnist"], downloadable=True, looked=places,
                            markers=names["images-idx3"] + names["labels-idx1"])
    x = read_idx(img)
    y = read_idx(lab).astype(np.int64)
    if x.ndim != 3 or y.ndim != 1:
        raise DataError(f"fashion-mnist: {img} must hold (N, 28, 28) images and {lab} (N,) labels; "
                        f"got {x.shape} and {y.shape}")
    if len(x) != len(y):
        raise DataError(f"fashion-mnist: {img.name} has {len(x)} images but {lab.name} has {len(y)} labels")
    _check_labels(y, 10, f"fashion-mnist ({lab})")
    mean, std = STATS["fashion-mnist"]
    return ImageData(x[..., None].copy(), y, list(FASHION_CLASSES), "fashion-mnist",
                     f"{img.parent} (official IDX files)", mean=mean, std=std)


# --- SVHN ------------------------------------------------------------------------------------------------------

def load_svhn(split: str, root: Path, download: bool = False) -> ImageData:
    if split not in ("train", "test", "extra"):
        raise _unknown_split("svhn", split, ("train", "test", "extra"))
    fname = f"{split}_32x32.mat"
    places = bases(root, _SUBDIRS["svhn"])
    path = find_first(places, [fname], kind="file")
    if path is None and download:
        _download("svhn", root, split)
        path = find_first(bases(root, _SUBDIRS["svhn"]), [fname], kind="file")
    if path is None:
        raise missing_error("svhn", root, HINTS["svhn"].replace("{train,test}", split), downloadable=True,
                            looked=places, markers=[fname])
    try:
        mat = scipy.io.loadmat(str(path))
    except (ValueError, NotImplementedError, OSError, TypeError) as e:
        raise DataError(f"svhn: cannot read {path} with scipy.io.loadmat: {e}") from None
    if "X" not in mat or "y" not in mat:
        raise DataError(f"svhn: {path} lacks the arrays X and y")
    X = np.asarray(mat["X"])
    if X.ndim != 4 or X.shape[:3] != (32, 32, 3):
        raise DataError(f"svhn: {path} X has shape {X.shape}, expected (32, 32, 3, N)")
    x = np.ascontiguousarray(X.transpose(3, 0, 1, 2)).astype(np.uint8)
    y = np.asarray(mat["y"]).astype(np.int64).ravel()
    if len(x) != len(y):
        raise DataError(f"svhn: {path} has {len(x)} images but {len(y)} labels")
    y[y == 10] = 0
    _check_labels(y, 10, f"svhn ({path})")
    mean, std = STATS["svhn"]
    return ImageData(x, y, list(SVHN_CLASSES), "svhn", f"{path} (official .mat, label 10 -> 0)", mean=mean, std=std)


# --- image folders ---------------------------------------------------------------------------------------------

_NUM_RE = re.compile(r"(\d+)")


def _class_dirs(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))


def _list_folder(base: Path, classes: Sequence[str] | None, unlabeled_ok: bool
                 ) -> tuple[list[str], list[tuple[int, Path]]]:
    """Classes and ``(class index or -1, file)`` for every image below ``base`` (recursive).

    Labelled when every image sits below a first-level class folder; otherwise an error, or (``unlabeled_ok``)
    no labels at all (classes ``[]``, label -1)."""
    files = readers.list_image_files(base)
    if not files:
        raise DataError(f"no images (*.png, *.jpg, ...) in {base}/<class>/")
    rel = [f.relative_to(base) for f in files]
    if all(len(r.parts) >= 2 for r in rel):
        found = sorted({r.parts[0] for r in rel})
        classes = list(classes) if classes is not None else found
        index = {c: i for i, c in enumerate(classes)}
        extra = [c for c in found if c not in index]
        if extra:
            raise DataError(f"{base} has class folder(s) {', '.join(extra)} that are not among the classes "
                            f"{', '.join(classes)} (from the train split)")
        return classes, [(index[r.parts[0]], f) for r, f in zip(rel, files)]
    if not unlabeled_ok:
        loose = next(r for r in rel if len(r.parts) < 2)
        raise DataError(f"{base / loose} is not inside a class folder; expected {base}/<class>/*.png|jpg")
    return [], [(-1, f) for f in files]


def _read_folder_split(folder: Path, split: str | None, *, order: str = "name", classes: Sequence[str] | None = None,
                       image_size: int | None = None, unlabeled_ok: bool = False
                       ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, list[str]]:
    """Decode the images below ``<folder>/<split>`` (``folder`` itself when ``split`` is None) with
    :mod:`.readers` (cached as .npy). Returns x, y, classes, file numbers (or -1), notes.

    ``order="name"``: by class, then natural sort of the relative paths; ``"number"``: by the number in the file
    name across classes (the official order of the CIFAR-10 JPEG copy).
    """
    d = folder if split is None else folder / split
    classes, items = _list_folder(d, classes, unlabeled_ok)

    def number(f: Path) -> int:
        m = _NUM_RE.findall(f.stem)
        return int(m[-1]) if m else -1

    if order == "number":
        items.sort(key=lambda cf: (number(cf[1]), cf[0], readers.natural_key(cf[1].relative_to(d).as_posix())))
    else:
        items.sort(key=lambda cf: (cf[0], readers.natural_key(cf[1].relative_to(d).as_posix())))
    listing = []
    for _, f in items:
        st = f.stat()
        listing.append((f.relative_to(d).as_posix(), st.st_size, st.st_mtime_ns))
    key = cache.listing_key(listing, extra={"folder": str(d.resolve()), "order": order, "classes": list(classes),
                                            "image_size": image_size, "policy": readers.IMAGE_POLICY_VERSION,
                                            "max_pixels": readers.max_pixels()})

    def build(tmp: Path) -> None:
        size = None if image_size is None else (int(image_size), int(image_size))
        decoded = [readers.decode_image_file(f, size=size) for _, f in items]
        x, notes = readers.stack_images(decoded, str(d))
        cache.save_arrays(tmp, x=x, y=np.array([c for c, _ in items], dtype=np.int64),
                          nums=np.array([number(f) for _, f in items], dtype=np.int64))
        cache.save_json(tmp, "classes.json", list(classes))
        cache.save_json(tmp, "notes.json", notes)

    entry = cache.cached_dir("decoded", f"folder-{split or 'all'}", key, build)
    x, y, nums = cache.load_arrays(entry, "x", "y", "nums")
    return x, y, list(classes), nums, list(cache.load_json(entry, "notes.json"))


def check_image_folder(folder: str | os.PathLike, split: str | None, *, classes: bool = False) -> list[str]:
    """The sub-folders of image folder ``folder`` (its splits); a DataError unless it is a folder with the split
    folder ``split`` (when given) that, with ``classes``, holds class folders: what :func:`load_image_folder`
    checks first, and what ``sweep plan`` checks for each split a job reads before any job runs."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataError(f"image folder {folder} does not exist; expected {folder}/<split>/<class>/*.png|jpg")
    try:
        splits = _class_dirs(folder)
        if split is not None and split not in splits:
            raise DataError(f"image folder {folder} has no split folder {split!r} (found: "
                            f"{', '.join(splits[:8]) or 'none'}{', ...' if len(splits) > 8 else ''}); expected "
                            f"{folder}/{split}/<class>/*.png|jpg")
        if split is not None and classes and not _class_dirs(folder / split):
            raise DataError(f"image folder {folder / split} has no class folders; expected "
                            f"{folder}/{split}/<class>/*.png|jpg")
    except PermissionError:
        raise DataError(f"image folder {folder}: cannot read it (permission denied)") from None
    return splits


def load_image_folder(folder: str | os.PathLike, split: str, *, image_size: int | None = None,
                      order: str = "name", split_optional: bool = False, unlabeled_ok: bool = False) -> ImageData:
    """Images in ``<folder>/<split>/<class>/**/*.{png,jpg,jpeg,bmp,gif,webp,tif,tiff}``, read by the policy of
    :mod:`.readers` (alpha composited over white, palette expanded, 16-bit scaled to 8 bits).

    Classes are the sorted class-folder names of the ``train`` split (of the requested split when there is no
    train split), so label ids agree across splits. Images are RGB, or one channel when every image is
    grayscale; all must have one size unless ``image_size`` resizes them (antialiased bilinear). ``mean``/``std``
    are computed from the train split. Decoded arrays are cached (see :mod:`.cache`).

    ``split_optional``: when ``<folder>/<split>`` does not exist, read ``folder`` itself (its first-level
    folders are then the classes). ``unlabeled_ok``: images outside class folders are allowed; the data then
    has no labels (``classes == []``, every label -1). ``dgsa-bench corrupt`` uses both; training does not.
    """
    folder = Path(folder).expanduser()
    if order not in ("name", "number"):
        raise UserError(f"image folder: order must be name or number, got {order!r}")
    splits = check_image_folder(folder, None if split_optional else split)
    sub: str | None = split if split in splits else None
    classes = None
    if sub is not None and "train" in splits and sub != "train":
        classes = _list_folder(folder / "train", None, unlabeled_ok)[0] or None
    x, y, classes, _, notes = _read_folder_split(folder, sub, order=order, classes=classes, image_size=image_size,
                                                 unlabeled_ok=unlabeled_ok)
    if sub is None or sub == "train" or "train" not in splits:
        mean, std = channel_stats(x)
    else:
        xt = _read_folder_split(folder, "train", order=order, classes=classes, image_size=image_size,
                                unlabeled_ok=unlabeled_ok)[0]
        mean, std = channel_stats(xt)
    where = folder if sub is None else folder / sub
    label_note = f"{len(classes)} classes from sub-folders" if classes else "no class sub-folders: no labels"
    return ImageData(x, y, classes, f"folder:{folder}", f"{where} (image folder, {label_note})", mean=mean, std=std,
                     notes=tuple(notes))


# --- image arrays (.npy / .npz) --------------------------------------------------------------------------------

def array_path(spec: str, split: str) -> Path:
    """The file of ``split`` in an array source ``spec`` (a file, a ``{split}`` pattern or a folder)."""
    if "{split}" in spec:
        return Path(spec.replace("{split}", split)).expanduser()
    p = Path(spec).expanduser()
    if p.is_dir():
        for ext in (".npz", ".npy"):
            if (p / f"{split}{ext}").is_file():
                return p / f"{split}{ext}"
        raise DataError(f"array folder {p} has no {split}.npz or {split}.npy")
    return p


def load_image_arrays(spec: str, split: str, *, seed: int = 0, classes: Sequence[str] | None = None,
                      test_fraction: float | None = None, unlabeled_ok: bool = False) -> ImageData:
    """Images from ``.npy`` (``x`` only) or ``.npz`` (``x`` uint8 (N, H, W[, C]) and optionally ``y``) files,
    read by :mod:`.readers` (never unpickled).

    ``spec``: a file (served whole for every split), a pattern with ``{split}`` (``data/{split}.npz``) or a folder
    with ``<split>.npz``/``.npy``. ``test_fraction``: split one file into train/test by a seeded stratified split
    instead. ``classes``: the class names (default ``"0" .. "K-1"``). Without ``y`` the data has no labels, an
    error unless ``unlabeled_ok``. ``mean``/``std`` are computed from the data (the train file of a pattern).
    """
    path = array_path(spec, split)
    x, y = readers.read_array_file(path)
    x = readers.check_image_stack(x, str(path))
    if classes is None and path.suffix.lower() == ".npz":  # an .npz may name its classes (array ``classes``)
        named = readers.read_npz(path, [], ["classes"]).get("classes")
        classes = None if named is None else [str(c) for c in np.asarray(named).reshape(-1)]
    if y is None:
        if not unlabeled_ok:
            raise DataError(f"{path} holds no labels; save an .npz with arrays x and y to train or evaluate on it")
        y, names = np.full(len(x), -1, dtype=np.int64), []
    else:
        y = readers.check_labels(y, len(x), str(path))
        k = int(y.max()) + 1 if len(y) else 0
        names = [str(c) for c in classes] if classes is not None else [str(i) for i in range(k)]
        if k > len(names):
            raise DataError(f"{path}: labels go up to {k - 1} but {len(names)} class names were given")
    source = f"{path} (arrays, {len(x)} images{'' if names else ', no labels'})"
    if test_fraction is not None and "{split}" not in spec and not Path(spec).expanduser().is_dir():
        train_idx, test_idx = stratified_split(y, float(test_fraction), seed)
        idx = train_idx if split == "train" else test_idx
        source += f" ({split}: seeded stratified split, test_fraction {test_fraction}, seed {seed})"
        x_train = x[train_idx]
        x, y = x[idx], y[idx]
    else:
        x_train = x
        if "{split}" in spec and split != "train" and Path(spec.replace("{split}", "train")).expanduser().is_file():
            x_train = readers.check_image_stack(readers.read_array_file(array_path(spec, "train"))[0], spec)
    mean, std = channel_stats(x_train)
    return ImageData(x, y, names, f"arrays:{spec}", source, mean=mean, std=std)
