"""Datasets: loaders for the official layouts, embedded synthetic sets, splits and the text pipeline.

Entry point: :func:`load_dataset(name, split, data_root=..., download=..., seed=..., **options)
<robustbench_dgsa.data.registry.load_dataset>` -> :class:`ImageData` or :class:`TextData`.
Every user file (images, image arrays, text tables) is opened by :mod:`.readers`, which states the one policy
for alpha, palette, 16-bit and grayscale images.
"""
from . import readers
from .cache import cache_root, extract_archive
from .registry import DATASETS, DatasetInfo, dataset_label, get_info, load_dataset, modality_of, valid_names_line
from .splits import stratified_split, stratified_subsample
from .synthetic import make_synthetic_text, make_synthetic_vision
from .text import TextData, load_text_file, strip_newsgroup_footer, strip_newsgroup_header, strip_newsgroup_quoting
from .vision import ImageData, channel_stats, load_image_arrays, load_image_folder, read_idx, to_model_input
from .vocab import PAD, PAD_ID, SEP, SEP_ID, SPECIALS, UNK, UNK_ID, Vocab, tokenize

__all__ = [
    "DATASETS", "DatasetInfo", "ImageData", "TextData", "Vocab", "PAD", "UNK", "SEP", "PAD_ID", "UNK_ID", "SEP_ID",
    "SPECIALS", "cache_root", "channel_stats", "dataset_label", "extract_archive", "get_info", "load_dataset",
    "load_image_arrays", "load_image_folder",
    "load_text_file", "make_synthetic_text", "make_synthetic_vision", "modality_of", "read_idx", "readers",
    "strip_newsgroup_footer", "strip_newsgroup_header", "strip_newsgroup_quoting", "stratified_split",
    "stratified_subsample", "to_model_input", "tokenize", "valid_names_line",
]
