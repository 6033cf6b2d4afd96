"""The CIFAR-10-C / CIFAR-100-C file layout: write it (regeneration), read it (official or regenerated), compare.

Layout (docs/METHODS.md, Image corruptions): one ``<corruption>.npy`` per corruption, uint8 (S*N, H, W, 3) HWC RGB with
the S severities stacked in blocks of N rows (official: S = 5 blocks of 10,000, severities 1..5), and
``labels.npy``, the N labels tiled once per block (uint8 in the official files).

A regenerated directory also has ``manifest.json`` (written last): the constants version, seed, severities and
their order, N, frost texture source, per-file SHA-256/shape/dtype, library versions, input hashes and the
phrase "CIFAR-10-C-style (regenerated)" - regenerated data is never the official CIFAR-10-C, because 11 of the
19 corruptions are random and the reference generator had no seed.

Writing is streamed and all-or-nothing: every output is filled chunk by chunk in a memory map under a hidden
temporary name in the output folder, renamed only when all of them are complete, and the manifest comes last.
An interrupted run leaves hidden ``.*.partial`` files at most, never a final-named file that looks complete;
each run holds an advisory lock on its own partial files, and the next run into the folder deletes unlocked
(dead) ones. The manifest is read, merged and written under an exclusive lock on the folder, so concurrent
runs into one folder end with one manifest listing every file.

Only a set of 10,000 images per block with severities 1..5 uses the official file names. Any other set (a
``--limit``, a subset or reordering of severities) is written as ``<corruption>.n<N>.s<severities>.npy`` and
``labels.n<N>.s<severities>.npy`` with ``"official_layout": false`` in the manifest: a reader that assumes
5 x 10,000 rows per ``<corruption>.npy`` fails (no such file) instead of mixing severities, and
:func:`load_corrupted` reads the names from the manifest.

Reading a regenerated directory checks each file against the manifest's SHA-256; the digests are cached by
path, size, modification and change time, inode and device (``$CORRUPTIONS_CACHE`` or the user cache folder) so
re-reads are free, and an edit that restores the old size and mtime is still re-hashed (the ctime moves).

ImageNet-C and Tiny-ImageNet-C use a folder tree instead, ``<corruption>/<severity>/<wnid>/<file>`` (one JPEG
per image): :mod:`.folders` writes it from the validation images (:func:`regenerate_val_folders`) and reads the
official and the regenerated trees (:func:`list_folder_conditions`, :func:`condition_files`, :func:`read_images`).
"""
from __future__ import annotations

from .checks import ProgressWrapper, check_images, name_list
from .digest import file_sha256
from .folders import (FOLDERS_FORMAT, SUMS_NAME, FolderManifest, condition_files, condition_sums, is_folder_layout,
                      list_folder_conditions, read_images, regenerate_folders, regenerate_val_folders)
from .locks import clean_stale_partials
from .manifest import (LABELS_NAME, MANIFEST_FORMAT, MANIFEST_NAME, REGENERATED_PHRASE, Manifest, check_manifest,
                       library_versions, read_manifest)
from .official import (CIFAR10C_MD5, CIFAR100C_MD5, OFFICIAL_BLOCK, OFFICIAL_MD5, OFFICIAL_NAMES, OFFICIAL_SEVERITIES,
                       is_official_layout, layout_suffix)
from .read import check_corrupted, list_available, load_corrupted
from .verify import verify_against
from .write import regenerate

__all__ = ["CIFAR100C_MD5", "CIFAR10C_MD5", "FOLDERS_FORMAT", "FolderManifest", "LABELS_NAME", "MANIFEST_FORMAT",
           "MANIFEST_NAME", "Manifest", "OFFICIAL_BLOCK", "OFFICIAL_MD5", "OFFICIAL_NAMES", "OFFICIAL_SEVERITIES",
           "ProgressWrapper", "REGENERATED_PHRASE", "SUMS_NAME", "check_corrupted", "check_images", "check_manifest",
           "clean_stale_partials", "condition_files", "condition_sums", "file_sha256", "is_folder_layout",
           "is_official_layout", "layout_suffix", "library_versions", "list_available", "list_folder_conditions",
           "load_corrupted", "name_list", "read_images", "read_manifest", "regenerate", "regenerate_folders",
           "regenerate_val_folders", "verify_against"]
