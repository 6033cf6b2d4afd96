"""A regenerated directory's ``manifest.json``: read, check against the files, build."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from ..errors import CorruptionError
from .digest import _hash_file, file_sha256
from .official import OFFICIAL_BLOCK, is_official_layout, layout_suffix

MANIFEST_NAME = "manifest.json"
LABELS_NAME = "labels.npy"
MANIFEST_FORMAT = "corruptions-layout/1"
REGENERATED_PHRASE = "CIFAR-10-C-style (regenerated)"


@dataclass(frozen=True)
class Manifest:
    """A regenerated directory's ``manifest.json`` (``data`` is the parsed JSON). ``skipped``: corruptions a
    ``regenerate`` call found already finished with the same parameters and did not recompute."""
    path: Path
    data: dict
    skipped: tuple = ()

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def corruptions(self) -> list[str]:
        return list(self.data["corruptions"])

    @property
    def severities(self) -> list[int]:
        return [int(s) for s in self.data["severities"]]

    @property
    def n(self) -> int:
        return int(self.data["n"])

    @property
    def seed(self) -> int:
        return int(self.data["seed"])

    @property
    def files(self) -> dict[str, dict]:
        return dict(self.data["files"])

    @property
    def labels_file(self) -> str | None:
        """The labels file this manifest lists (``labels.npy`` or ``labels.n<N>.s<...>.npy``), or None."""
        files = self.data["files"]
        for fname, entry in files.items():
            if isinstance(entry, dict) and entry.get("role") == "labels":
                return fname
        return LABELS_NAME if LABELS_NAME in files else None

    @property
    def has_labels(self) -> bool:
        return self.labels_file is not None

    @property
    def official_layout(self) -> bool:
        if "official_layout" in self.data:
            return bool(self.data["official_layout"])
        return is_official_layout(self.n, self.severities) and all(
            f"{c}.npy" in self.data["files"] for c in self.corruptions)

    def file_of(self, corruption: str) -> str:
        """The file name that holds ``corruption`` in this directory."""
        files = self.data["files"]
        for fname, entry in files.items():
            if isinstance(entry, dict) and entry.get("corruption") == corruption and entry.get("role") != "labels":
                return fname
        if f"{corruption}.npy" in files:
            return f"{corruption}.npy"
        return f"{corruption}{layout_suffix(self.n, self.severities)}.npy"

    @property
    def frost_source(self) -> str | None:
        return self.data.get("frost_source")


def manifest_json(directory: str | os.PathLike) -> dict | None:
    """The parsed ``manifest.json`` of a directory (either layout), None when there is none; CorruptionError when
    it cannot be read or parsed."""
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CorruptionError(f"{path}: unreadable manifest ({e})") from None


def read_manifest(directory: str | os.PathLike) -> Manifest | None:
    """The directory's manifest, or None when it has none (an official directory)."""
    path = Path(directory) / MANIFEST_NAME
    data = manifest_json(directory)
    if data is None:
        return None
    missing = [k for k in ("format", "corruptions", "severities", "n", "files", "seed") if k not in data]
    if missing or not str(data.get("format", "")).startswith("corruptions-layout/"):
        raise CorruptionError(f"{path}: not a corruption-layout manifest (missing {', '.join(missing) or 'format'})")
    return Manifest(path, data)


def check_manifest(directory: str | os.PathLike, files: Iterable[str] | None = None, *,
                   cached: bool = False) -> None:
    """Re-hash the files the manifest lists (or only ``files``); CorruptionError on a missing or changed one.

    ``cached``: reuse a digest computed earlier for the same file (path, size, mtime, ctime, inode, device).
    """
    man = read_manifest(directory)
    if man is None:
        raise CorruptionError(f"{directory}: no {MANIFEST_NAME}")
    wanted = man.files if files is None else {f: man.files[f] for f in files if f in man.files}
    for fname, entry in wanted.items():
        path = man.directory / fname
        if not path.is_file():
            raise CorruptionError(f"{path}: listed in the manifest but missing")
        got = file_sha256(path) if cached else _hash_file(path, "sha256")
        if got != entry["sha256"]:
            raise CorruptionError(f"{path}: contents differ from {man.path.name} (SHA-256 {got[:12]}..., "
                                  f"expected {str(entry['sha256'])[:12]}...); regenerate or restore the file")


def library_versions() -> dict[str, str]:
    """Versions of the libraries the corruptions depend on (recorded in every manifest)."""
    import platform
    out = {"python": platform.python_version()}
    dists = {"numpy": ("numpy",), "scipy": ("scipy",), "pillow": ("pillow", "Pillow"), "torch": ("torch",),
             "scikit-image": ("scikit-image",), "imagecorruptions": ("imagecorruptions",),
             "opencv": ("opencv-python-headless", "opencv-python", "opencv-contrib-python",
                        "opencv-contrib-python-headless")}
    for key, names in dists.items():
        for name in names:
            try:
                out[key] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    try:  # the cv2 actually imported (may differ from the wheel metadata)
        import cv2
        out["opencv"] = cv2.__version__
    except Exception:  # noqa: BLE001 - optional
        pass
    return out



def _run_key(data: dict) -> dict:
    inp = data.get("input", {})
    return {"format": data.get("format"), "constants_version": data.get("constants_version"),
            "seed": data.get("seed"), "severities": data.get("severities"), "n": data.get("n"),
            "image_shape": inp.get("image_shape"), "images_sha256": inp.get("images_sha256"),
            "labels_sha256": inp.get("labels_sha256"), "library_versions": data.get("library_versions")}


def _difference(old: dict, new_key: dict) -> str:
    old_key = _run_key(old)
    diff = [k for k in new_key if old_key.get(k) != new_key[k]]
    return ", ".join(k.replace("_sha256", "") for k in diff) or "settings"


def _manifest_data(old: dict | None, run_key: dict, suffix: str, entries: dict, description: str,
                   input_description: str | None, frost_source: str | None, device: Any, created: str,
                   registry) -> dict:
    files = dict(old["files"]) if old else {}
    files.update(entries)
    in_files = [e.get("corruption") or f[:-4] for f, e in files.items()
                if f != LABELS_NAME and not (isinstance(e, dict) and e.get("role") == "labels")]
    listed = [nm for nm in registry.ALL if nm in in_files]
    listed += [nm for nm in in_files if nm not in listed]  # names the registry lacks
    if old and frost_source is None:
        frost_source = old.get("frost_source")
    n, sevs = run_key["n"], run_key["severities"]
    return {
        "format": MANIFEST_FORMAT,
        "description": description,
        "note": "Regenerated with keyed randomness; not the published arrays (the reference generator had no "
                "seed, so the random corruptions match the official files only in distribution).",
        "constants": next((r.name for r in registry.REGIMES.values()
                           if r.constants_version == run_key["constants_version"]), None),
        "constants_version": run_key["constants_version"],
        "seed": run_key["seed"],
        "severities": sevs,
        "corruptions": listed,
        "n": n,
        "official_layout": suffix == "",
        "layout": f"<corruption>{suffix}.npy: uint8 ({len(sevs)}*{n}, H, W, 3) HWC RGB; rows [i*{n}, (i+1)*{n}) "
                  f"hold severity severities[i]; labels{suffix}.npy: the {n} labels tiled {len(sevs)} times"
                  + ("" if suffix == "" else f"; not the official layout (which is 5 blocks of {OFFICIAL_BLOCK:,} "
                     "rows, severities 1..5): the file names carry N and the severities so that a reader "
                     "assuming the official layout finds no file instead of mixing severities"),
        "randomness": "keyed by (seed, corruption, severity, image index): any subset regenerates identically",
        "frost_source": frost_source,
        "input": {"description": input_description, "n": n, "image_shape": run_key["image_shape"],
                  "images_sha256": run_key["images_sha256"], "labels_sha256": run_key["labels_sha256"]},
        "files": files,
        "library_versions": run_key["library_versions"],
        "device": "auto" if device is None else str(device),
        "created": created,
        "updated_from": old.get("created") if old else None,
    }

