"""Dataset registry and the one entry point :func:`load_dataset`.

Names: ``cifar10``, ``cifar100``, ``fashion-mnist``, ``svhn``, ``imagenet`` (ILSVRC2012 train + val, streamed from
the files), ``tiny-imagenet`` (validation set only: see :mod:`.imagenet`), ``imdb``, ``20newsgroups``, ``rotten-tomatoes``,
``agnews``, ``mnli``, ``synthetic-vision``, ``synthetic-text``.

Generic sources (no registry entry):

* ``folder:PATH`` — an image folder ``PATH/<split>/<class>/*.png|jpg`` (see :func:`.vision.load_image_folder`);
* ``npz:PATH`` / ``npy:PATH`` — image arrays: an ``.npz`` holding ``x`` uint8 (N, H, W, C) and optionally ``y``,
  or an ``.npy`` holding ``x`` only (no labels; only ``unlabeled_ok=True`` callers such as ``corrupt`` accept
  that); PATH may contain ``{split}`` (see :func:`.vision.load_image_arrays`);
* ``csv:PATH``, ``tsv:PATH``, ``jsonl:PATH``, ``json:PATH`` — text files with ``text`` and ``label`` columns
  (options ``text_column``, ``label_column``, ``classes``, ``test_fraction``); PATH may contain ``{split}``
  or be a folder with ``train.csv``/``test.csv`` (see :func:`.text.load_text_file`);
* a bare path is detected: a file ending in .npy/.npz -> image arrays; .csv/.tsv/.jsonl/.json -> text file;
  a folder with
  ``train.*``/``test.*`` text files -> text files; a folder with ``<split>/<class>/`` image sub-folders -> image
  folder.

``data_root``: ``None`` means ``$DGSA_DATA_ROOT`` or ``./data``. Every loader also looks in dataset sub-folders
(``<root>/cifar10``, ``<root>/fashion-mnist``, ``<root>/text``, ...), so ``--data-root ../shared/data`` works.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from robustbench_dgsa.util.errors import DataError, UserError
from . import imagenet, readers, synthetic, text, vision
from .locate import resolve_root
from .imagenet import ImageFiles
from .text import TextData
from .vision import ImageData


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    modality: str                      # "image" | "text"
    num_classes: int
    classes: list[str] | None          # None until loaded (generic sources)
    description: str
    layout_hint: str                   # one line: which files to put where (<root> = the data root)
    splits: tuple[str, ...] = ("train", "test")
    downloadable: bool = False         # torchvision can fetch it (--download)
    label: str = ""                    # how reports and figures name it (CIFAR-10, 20 Newsgroups, ...)
    streams: bool = False              # read from files on demand (load_dataset(..., stream=True) -> ImageFiles)


_SYN_HINT = "embedded in the code; no files needed"

DATASETS: dict[str, DatasetInfo] = {
    "cifar10": DatasetInfo("cifar10", "image", 10, list(vision.CIFAR10_CLASSES),
                           "CIFAR-10, 32x32 RGB, 50,000 train / 10,000 test (split test-exact: the 1,017 exact "
                           "test images of the shared JPEG copy)", vision.HINTS["cifar10"],
                           vision.CIFAR10_SPLITS, True, label="CIFAR-10"),
    "cifar100": DatasetInfo("cifar100", "image", 100, list(vision.CIFAR100_FINE),
                            "CIFAR-100 (fine labels), 32x32 RGB, 50,000 / 10,000", vision.HINTS["cifar100"],
                            ("train", "test"), True, label="CIFAR-100"),
    "fashion-mnist": DatasetInfo("fashion-mnist", "image", 10, list(vision.FASHION_CLASSES),
                                 "Fashion-MNIST, 28x28 grayscale, 60,000 / 10,000", vision.HINTS["fashion-mnist"],
                                 ("train", "test"), True, label="FashionMNIST"),
    "svhn": DatasetInfo("svhn", "image", 10, list(vision.SVHN_CLASSES),
                        "SVHN cropped digits, 32x32 RGB, 73,257 / 26,032", vision.HINTS["svhn"],
                        ("train", "test", "extra"), True, label="SVHN"),
    "imagenet": DatasetInfo("imagenet", "image", 1000, None,
                            "ImageNet-1k (ILSVRC2012), 1,281,167 train / 50,000 val as split test, streamed from "
                            "the JPEGs: RandomResizedCrop(224) + flip for training, Resize(256) + CenterCrop(224) "
                            "for evaluation (ImageNet-C's inputs); nothing is downloaded", imagenet.HINTS["imagenet"],
                            ("train", "test"), label="ImageNet-1k", streams=True),
    "tiny-imagenet": DatasetInfo("tiny-imagenet", "image", 200, None,
                                 "Tiny-ImageNet validation set as split test (10,000), 64x64: Tiny-ImageNet-C's "
                                 "inputs", imagenet.HINTS["tiny-imagenet"], ("test",), label="Tiny-ImageNet"),
    "imdb": DatasetInfo("imdb", "text", 2, list(text.IMDB_CLASSES),
                        "IMDB movie reviews (Maas et al. 2011), 25,000 / 25,000, neg/pos", text.HINTS["imdb"],
                        label="IMDB"),
    "20newsgroups": DatasetInfo("20newsgroups", "text", 20, list(text.NEWSGROUPS_CLASSES),
                                "20 Newsgroups by date, 11,314 / 7,532, headers/footers/quotes removed by default",
                                text.HINTS["20newsgroups"], label="20 Newsgroups"),
    "rotten-tomatoes": DatasetInfo("rotten-tomatoes", "text", 2, list(text.RT_CLASSES),
                                   "Rotten Tomatoes sentence polarity v1.0; no official split: the Hugging Face "
                                   "split 8,530 / 1,066 / 1,066 (train / validation / test)",
                                   text.HINTS["rotten-tomatoes"], text.RT_SPLITS, label="Rotten Tomatoes"),
    "agnews": DatasetInfo("agnews", "text", 4, list(text.AGNEWS_CLASSES),
                          "AG News topic classification, 120,000 / 7,600", text.HINTS["agnews"], label="AG News"),
    "mnli": DatasetInfo("mnli", "text", 3, list(text.MNLI_CLASSES),
                        "MultiNLI (GLUE), test = dev_matched; premise <sep> hypothesis", text.HINTS["mnli"],
                        ("train", "test", "test-mismatched"), label="MNLI"),
    "synthetic-vision": DatasetInfo("synthetic-vision", "image", 6, list(synthetic.VISION_CLASS_NAMES[:6]),
                                    "embedded: 32x32 noisy textured images with one 8x8 patch striped in the "
                                    "class colour, class = colour x stripe orientation (salient region known); "
                                    "2,000 / 500 by default, num_classes 2-10 (default 6)", _SYN_HINT,
                                    label="synthetic vision (embedded)"),
    "synthetic-text": DatasetInfo("synthetic-text", "text", 4, list(synthetic.TEXT_CLASS_NAMES),
                                  "embedded: filler sentences with 1-3 class keywords (salient tokens known); "
                                  "2,000 / 500 by default", _SYN_HINT, label="synthetic text (embedded)"),
}

def dataset_label(name: str) -> str:
    """How a report names a dataset: the registry's label (``cifar10`` -> ``CIFAR-10``); the name itself for a
    dataset the registry does not know (a generic source such as ``folder:...``)."""
    info = DATASETS.get(name)
    return info.label if info is not None and info.label else name


GENERIC_PREFIXES = ("folder:", "npy:", "npz:", "csv:", "tsv:", "jsonl:", "json:", "text:")
ARRAY_EXTS = (".npy", ".npz")


def valid_names_line() -> str:
    return (", ".join(DATASETS) + "; or folder:PATH (image folder), npz:PATH / npy:PATH (image arrays), "
            "csv:PATH / tsv:PATH / jsonl:PATH (text files)")


def _classify_generic(name: str) -> tuple[str, str] | None:
    """``("folder"|"arrays"|"textfile", path spec)`` for a generic source name, else None."""
    for prefix in GENERIC_PREFIXES:
        if name.startswith(prefix):
            spec = name[len(prefix):]
            if not spec:
                raise UserError(f"dataset {name!r}: give a path after {prefix!r}")
            kind = {"folder:": "folder", "npy:": "arrays", "npz:": "arrays"}.get(prefix, "textfile")
            return (kind, spec)
    looks_like_path = os.sep in name or "/" in name or name.startswith((".", "~")) or \
        name.lower().endswith(text.TEXT_FILE_EXTS + ARRAY_EXTS)
    p = Path(name).expanduser()
    if not (looks_like_path or p.exists()):
        return None
    if name.lower().endswith(ARRAY_EXTS):
        return ("arrays", name)
    if name.lower().endswith(text.TEXT_FILE_EXTS) or "{split}" in name:
        return ("textfile", name)
    if p.is_dir():
        if any((p / f"{s}{ext}").is_file() for s in ("train", "test") for ext in text.TEXT_FILE_EXTS):
            return ("textfile", name)
        return ("folder", name)
    if p.is_file():
        raise UserError(f"dataset path {name!r}: files must end in .csv, .tsv, .jsonl, .json, .npy or .npz "
                        "(or use folder:PATH for an image folder)")
    raise DataError(f"dataset path {name!r} does not exist (a folder:PATH needs PATH/<split>/<class>/*.png|jpg, "
                    "a text file PATH.csv/.jsonl needs text and label columns)")


def get_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of a registry name or a generic source (classes None until loaded)."""
    if name in DATASETS:
        return DATASETS[name]
    kind = _classify_generic(name)
    if kind is None:
        raise UserError(f"unknown dataset {name!r} (valid: {valid_names_line()})")
    if kind[0] == "folder":
        return DatasetInfo(name, "image", 0, None, f"image folder {kind[1]}",
                           f"{kind[1]}/<split>/<class>/*.png|jpg")
    if kind[0] == "arrays":
        return DatasetInfo(name, "image", 0, None, f"image arrays {kind[1]}",
                           f"{kind[1]}: .npz with x uint8 (N, H, W, C) and y, or .npy with x only")
    return DatasetInfo(name, "text", 0, None, f"text file(s) {kind[1]}",
                       f"{kind[1]} with columns text,label (CSV header row, or JSONL objects)")


def check_source_exists(name: str, splits: tuple[str, ...] = ("train", "test")) -> None:
    """A one-line error unless ``name`` is a registered dataset or a generic source whose files are there now in
    its layout, for each of ``splits`` (what training reads): the path exists; an image folder has the split
    folders, each with class folders (:func:`.vision.check_image_folder`); an array source has each split's
    ``.npz`` / ``.npy`` file, whose header is readable and within bounds (:func:`.readers.check_array_file`).
    ``folder:`` / ``npz:`` / ``csv:`` ... paths are otherwise only checked when the data is loaded."""
    if name in DATASETS:
        return
    kind = _classify_generic(name)
    if kind is None:
        raise UserError(f"unknown dataset {name!r} (valid: {valid_names_line()})")
    spec = kind[1]
    for path in ([spec.replace("{split}", s) for s in splits] if "{split}" in spec else [spec]):
        if not Path(path).expanduser().exists():
            raise DataError(f"dataset {name!r}: {path} does not exist")
    try:
        if kind[0] == "folder":
            for split in splits:
                vision.check_image_folder(spec, split, classes=True)
        elif kind[0] == "arrays":
            for split in splits:
                readers.check_array_file(vision.array_path(spec, split))
    except DataError as e:
        raise DataError(f"dataset {name!r}: {e}") from None


def check_files(name: str, data_root: str | os.PathLike | None) -> None:
    """A one-line DataError now, not when a job starts, when a dataset that cannot be downloaded (ImageNet) is
    not under the data root."""
    if name == "imagenet":
        imagenet.check_present(resolve_root(data_root))


def modality_of(name: str) -> str:
    return get_info(name).modality


# --- loading ---------------------------------------------------------------------------------------------------

def _synthetic_vision(split: str, root: Path, download: bool, *, seed: int = 0, n_train: int = 2000,
                      n_test: int = 500, num_classes: int = 6, image_size: int = 32, noise: float = 0.06,
                      n_distractors: int = 2) -> ImageData:
    kw = dict(n_train=n_train, n_test=n_test, num_classes=num_classes, image_size=image_size, noise=noise,
              n_distractors=n_distractors)
    x, y, sal = _generated(synthetic.make_synthetic_vision, split, seed, kw)
    mean, std = _synthetic_stats(seed, kw, x if split == "train" and n_train == _STATS_N else None)
    opts = ", ".join(f"{k}={v}" for k, v in kw.items())
    return ImageData(x, y, list(synthetic.VISION_CLASS_NAMES[:num_classes]), "synthetic-vision",
                     f"embedded generator (seed {seed}, {opts})", salient=sal, mean=mean, std=std)


_GENERATED: dict[tuple, tuple] = {}
_GENERATED_MAX = 4
_GENERATED_MAX_BYTES = 64 << 20


def _generated(make: Callable[..., tuple], split: str, seed: int, kw: dict[str, Any]) -> tuple:
    """``make(split, seed, **kw)`` (a synthetic generator: deterministic in its arguments), remembered for the
    last :data:`_GENERATED_MAX` argument sets of this process and returned as fresh copies (a caller may change
    them). The main job loads each split several times per job (train, test, evaluation) in every worker. A
    split of more than :data:`_GENERATED_MAX_BYTES` image bytes is not remembered (it would be held twice)."""
    key = (make.__name__, split, int(seed), tuple(sorted(kw.items())))
    if key not in _GENERATED:
        made = make(split, seed, **kw)
        if isinstance(made[0], np.ndarray) and made[0].nbytes > _GENERATED_MAX_BYTES:
            return made
        if len(_GENERATED) >= _GENERATED_MAX:
            del _GENERATED[next(iter(_GENERATED))]
        _GENERATED[key] = made
    data, y, salient = _GENERATED[key]
    copy = (lambda v: v.copy()) if isinstance(data, np.ndarray) else list
    return copy(data), y.copy(), (salient.copy() if isinstance(salient, np.ndarray) else [list(s) for s in salient])


_STATS_MEMO: dict[tuple, tuple] = {}
_STATS_N = 2000


def _synthetic_stats(seed: int, kw: dict[str, Any], x_train: np.ndarray | None) -> tuple:
    """Per-channel mean/std of the synthetic training split generated with ``n_train=2000`` and the same
    seed and options, so that every split and size of one configuration normalises alike."""
    ref = {k: v for k, v in kw.items() if k not in ("n_train", "n_test")}
    key = (seed, tuple(sorted(ref.items())))
    if key not in _STATS_MEMO:
        if x_train is None:
            x_train = synthetic.make_synthetic_vision("train", seed, n_train=_STATS_N, **ref)[0]
        _STATS_MEMO[key] = vision.channel_stats(x_train)
    return _STATS_MEMO[key]


def _synthetic_text(split: str, root: Path, download: bool, *, seed: int = 0, n_train: int = 2000,
                    n_test: int = 500, num_classes: int = 4, min_words: int = 12, max_words: int = 30,
                    max_keywords: int = 3, max_distractors: int = 2) -> TextData:
    kw = dict(n_train=n_train, n_test=n_test, num_classes=num_classes, min_words=min_words, max_words=max_words,
              max_keywords=max_keywords, max_distractors=max_distractors)
    texts, y, sal = _generated(synthetic.make_synthetic_text, split, seed, kw)
    opts = ", ".join(f"{k}={v}" for k, v in kw.items())
    return TextData(texts, y, list(synthetic.TEXT_CLASS_NAMES[:num_classes]), "synthetic-text",
                    f"embedded generator (seed {seed}, {opts})", salient=sal)


_LOADERS: dict[str, Callable[..., Any]] = {
    "cifar10": vision.load_cifar10,
    "cifar100": vision.load_cifar100,
    "fashion-mnist": vision.load_fashion_mnist,
    "svhn": vision.load_svhn,
    "imagenet": imagenet.load_imagenet,
    "tiny-imagenet": imagenet.load_tiny_imagenet,
    "imdb": text.load_imdb,
    "20newsgroups": text.load_20newsgroups,
    "rotten-tomatoes": text.load_rotten_tomatoes,
    "agnews": text.load_agnews,
    "mnli": text.load_mnli,
    "synthetic-vision": _synthetic_vision,
    "synthetic-text": _synthetic_text,
}


def _call(loader: Callable[..., Any], label: str, args: tuple, seed: int, options: dict[str, Any]) -> Any:
    params = inspect.signature(loader).parameters
    valid = [p.name for p in params.values() if p.kind == inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UserError(f"{label}: unknown option(s) {', '.join(unknown)} "
                        f"(valid: {', '.join(v for v in valid if v != 'seed') or 'none'})")
    kwargs = dict(options)
    if "seed" in valid:
        kwargs["seed"] = seed
    return loader(*args, **kwargs)


def load_dataset(name: str, split: str = "train", *, data_root: str | os.PathLike | None = None,
                 download: bool = False, seed: int = 0, **options: Any) -> ImageData | TextData | ImageFiles:
    """Load one split of a dataset as :class:`ImageData` or :class:`TextData`.

    ``split``: "train" or "test" (the official partitions); also "test-exact" (cifar10), "extra" (svhn),
    "validation" (rotten-tomatoes), "test-mismatched" (mnli) — see ``DATASETS[name].splits``.
    ``download``: let torchvision fetch CIFAR-10/100, Fashion-MNIST or SVHN when the files are absent.
    ``seed``: used by the synthetic generators, the seeded Rotten Tomatoes split and single-file text splits.
    ``options``: per-dataset keyword options (unknown ones are a UserError that lists the valid ones), e.g.
    ``source="jpeg"`` (cifar10), ``label_mode="coarse"`` (cifar100), ``remove=()`` (20newsgroups),
    ``split_mode="seeded"`` / ``encoding="latin-1"`` (rotten-tomatoes), ``n_train=`` / ``num_classes=``
    (synthetic), ``text_column=`` / ``label_column=`` / ``encoding=`` (text files), ``image_size=`` (image folders),
    ``unlabeled_ok=True`` (image folders and arrays without labels), ``split_optional=True`` (image folders),
    ``stream=True`` / ``max_images=N`` (imagenet: file paths and labels only, an :class:`.imagenet.ImageFiles`
    whose images are decoded on demand; its split ``train`` always streams).
    Every user file is opened by :mod:`.readers` (one policy for alpha, palette, 16-bit and grayscale images).

    Raises UserError for an unknown name/split/option and DataError (one line, saying which files to put
    where) for missing, misplaced or inconsistent files.
    """
    if not isinstance(name, str) or not name:
        raise UserError(f"dataset name must be a non-empty string (valid: {valid_names_line()})")
    if name in _LOADERS:
        info = DATASETS[name]
        if split not in info.splits:
            raise UserError(f"{name}: unknown split {split!r} (valid: {', '.join(info.splits)})")
        root = resolve_root(data_root) if name not in ("synthetic-vision", "synthetic-text") else Path(".")
        return _call(_LOADERS[name], name, (split, root, download), seed, options)
    kind = _classify_generic(name)
    if kind is None:
        raise UserError(f"unknown dataset {name!r} (valid: {valid_names_line()})")
    if kind[0] == "folder":
        return _call(vision.load_image_folder, name, (kind[1], split), seed, options)
    if kind[0] == "arrays":
        return _call(vision.load_image_arrays, name, (kind[1], split), seed, options)
    return _call(text.load_text_file, name, (kind[1], split), seed, options)
