"""The one place that opens image files, image arrays and text tables.

Every path that reads user files — the ``folder:`` / ``npy:`` / ``npz:`` / ``csv:`` / ``tsv:`` / ``jsonl:`` /
``json:`` dataset sources (so ``train`` and ``evaluate``), ``dgsa-bench corrupt``, ``corrupt-text`` and
``rollout`` — calls the functions below, so one file gives the same pixels and the same rows everywhere.

Image policy (``IMAGE_POLICY_VERSION`` 1; the result is always uint8, (H, W) grayscale or (H, W, 3) RGB):

* **Palette** (``P``, ``PA``) images are expanded to RGB, or to RGBA when the palette has transparency.
* **Alpha** (``RGBA``, ``LA``, ``PA``, or a ``transparency`` colour in the file) is composited over a fixed
  white background: ``out = (c * a + 255 * (255 - a) + 127) // 255`` per channel (exact integer rounding), and
  the alpha channel is then dropped. A fully opaque image is therefore unchanged; transparent pixels become
  white whatever colour they hide. Arrays with 2 (gray + alpha) or 4 (RGBA) channels get the same treatment.
* **16-bit** grayscale (``I;16*``, and ``I`` whose values are taken as 16-bit) is scaled to 8 bits with
  correct rounding, ``(v * 255 + 32767) // 65535`` (0 -> 0, 65535 -> 255; a fixed scale, never a per-image
  stretch). 16-bit RGB PNGs are reduced to 8 bits by Pillow itself when it opens them. Float images (``F``)
  are rounded and clipped to 0..255. Bilevel (``1``) images become 0 / 255 grayscale.
* **Grayscale** stays one channel here (``(H, W)``, or ``(N, H, W, 1)`` for stacks); consumers that want RGB
  call :func:`to_rgb`, which replicates the channel (``corrupt`` always; an image folder when its images are
  mixed gray and colour; models with three input channels through ``to_model_input``). Consumers that want
  one channel from colour use :func:`rgb_to_gray` (ITU-R 601-2 luma, rounded).
* Other modes (CMYK, YCbCr, LAB, HSV) are converted to RGB by Pillow.
* **Size**: an image over Pillow's decompression-bomb limit (``2 * PIL.Image.MAX_IMAGE_PIXELS`` pixels, the
  point where Pillow refuses to decode) is refused with one line naming the file. ``max_side`` (used by
  ``rollout``) downscales larger images before anything else is done with them, keeping the aspect ratio;
  every resize here is Pillow's antialiased bilinear filter.

Arrays: ``.npy`` (one uint8 array) and ``.npz`` (``x`` uint8 (N, H, W[, C]) and optionally ``y`` integer
labels), always read with ``allow_pickle=False``. Stacks must be uint8; (N, H, W) is grayscale. Before any data
is read or decompressed, each array's header (shape × item size) is checked (:func:`check_array_file`): at most
:data:`MAX_ARRAY_BYTES`; a ``.npy`` must hold the bytes its header declares (a truncated file or a header
declaring a huge shape is one line, not an allocation); an ``.npz`` member (its header read from the first
decompressed bytes only) must match the archive's record of its size and may not inflate more than
:data:`MAX_INFLATION` times its stored size once over :data:`INFLATION_FLOOR` bytes (a decompression bomb).

Text tables: ``.csv`` / ``.tsv`` (header row; quoting as in Python's ``csv`` module, strict: an unterminated
quote is an error naming the file and the line where the field opened, and so is a row with more or fewer
fields than the header), ``.jsonl`` (one object per line), ``.json`` (a list of objects) and ``.txt`` (one
example per non-blank line). Text is decoded with the given ``encoding`` (default UTF-8, a BOM is dropped);
an unknown encoding or bytes that do not decode are one-line errors naming the file (and the line).
All errors are :class:`~robustbench_dgsa.util.errors.DataError` (or ``UserError`` for a bad argument).
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from robustbench_dgsa.util.errors import DataError, UserError

IMAGE_POLICY_VERSION = 1
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
BACKGROUND = 255  # alpha is composited over white
TEXT_TABLE_EXTS = (".csv", ".tsv", ".jsonl", ".json")
_NUM_RE = re.compile(r"(\d+)")


# --- images: the policy --------------------------------------------------------------------------------------

def max_pixels() -> int:
    """Pillow's refusal point for decompression bombs (read at call time, so Pillow's setting is honoured)."""
    limit = Image.MAX_IMAGE_PIXELS
    return 2 * int(limit) if limit else 0


def flatten_alpha(a: np.ndarray) -> np.ndarray:
    """uint8 (..., 2|4) gray/colour + alpha -> (..., 1|3) composited over white (see the module docstring)."""
    a = np.asarray(a)
    out = np.empty(a.shape[:-1] + (a.shape[-1] - 1,), dtype=np.uint8)
    rows = max(1, (1 << 24) // max(1, int(np.prod(a.shape[1:]))))  # bounded temporaries for large stacks
    for s in range(0, len(a), rows):
        part = a[s:s + rows]
        alpha = part[..., -1:].astype(np.uint32)
        col = part[..., :-1].astype(np.uint32)
        out[s:s + rows] = ((col * alpha + BACKGROUND * (255 - alpha) + 127) // 255).astype(np.uint8)
    return out


def _scale16(a: np.ndarray) -> np.ndarray:
    v = np.clip(np.asarray(a).astype(np.int64), 0, 65535).astype(np.uint32)
    return ((v * 255 + 32767) // 65535).astype(np.uint8)


def _normalise_mode(im):
    """Pillow-level step of the policy: palette expanded, transparency made explicit, exotic modes to RGB."""
    mode = im.mode
    if mode in ("P", "PA"):
        return im.convert("RGBA" if mode == "PA" or "transparency" in im.info else "RGB")
    if mode in ("L", "RGB") and "transparency" in im.info:
        return im.convert("LA" if mode == "L" else "RGBA")
    if mode == "1":
        return im.convert("L")
    if mode in ("La", "RGBa"):
        return im.convert(mode.upper())
    if mode in ("L", "LA", "RGB", "RGBA", "F", "I") or mode.startswith("I;16"):
        return im
    return im.convert("RGB")


def pil_to_array(im) -> np.ndarray:
    """A Pillow image -> uint8 (H, W) or (H, W, 3) by the policy of this module."""
    im = _normalise_mode(im)
    mode = im.mode
    if mode == "I" or mode.startswith("I;16"):
        return _scale16(np.asarray(im))
    if mode == "F":
        return np.clip(np.rint(np.asarray(im, dtype=np.float64)), 0, 255).astype(np.uint8)
    a = np.array(im, dtype=np.uint8)  # a writable copy
    if mode in ("LA", "RGBA"):
        a = flatten_alpha(a[None])[0]
        return a[..., 0] if mode == "LA" else a
    return a


def _bilinear(im, size: tuple[int, int]):
    return im.resize(size, Image.Resampling.BILINEAR, reducing_gap=3.0 if min(im.size) > 4 * min(size) else None)


def _fit(w: int, h: int, max_side: int) -> tuple[int, int]:
    scale = max_side / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def resize_array(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8 (H, W) or (H, W, 3) -> the same resized to ``size`` = (width, height) (antialiased bilinear)."""
    if a.shape[1] == size[0] and a.shape[0] == size[1]:
        return a
    return np.asarray(_bilinear(Image.fromarray(np.ascontiguousarray(a)), size), dtype=np.uint8)


def downscale(a: np.ndarray, max_side: int) -> np.ndarray:
    """uint8 (H, W[, 3]) with its longer side reduced to ``max_side`` (unchanged when already small enough)."""
    h, w = a.shape[:2]
    return a if max(h, w) <= max_side else resize_array(a, _fit(w, h, max_side))


@dataclass(frozen=True)
class DecodedImage:
    """One decoded image: ``pixels`` uint8 (H, W) or (H, W, 3); the file's own ``mode`` and ``size`` (w, h)."""
    pixels: np.ndarray
    mode: str
    size: tuple[int, int]
    path: Path
    transparency: bool = False  # the file names a transparent colour (palette, L or RGB)

    @property
    def gray(self) -> bool:
        return self.pixels.ndim == 2

    @property
    def had_alpha(self) -> bool:
        return self.mode in ("RGBA", "LA", "PA", "La", "RGBa") or self.transparency


def _open(path: Path):
    """Open (header only) with one-line errors for missing files, non-images and decompression bombs."""
    if not path.exists():
        raise DataError(f"image not found: {path}")
    if not path.is_file():
        raise DataError(f"not an image file: {path} (a directory?)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(path)
    except Image.DecompressionBombError:
        raise DataError(f"{path}: image is over the decompression-bomb limit of {max_pixels():,} pixels; "
                        "refusing to decode it (downscale it first)") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise DataError(f"cannot read image {path}: not a readable image file ({type(e).__name__})") from None
    limit = max_pixels()
    if limit and im.size[0] * im.size[1] > limit:
        im.close()
        raise DataError(f"{path}: image of {im.size[0]}x{im.size[1]} pixels is over the decompression-bomb limit "
                        f"of {limit:,} pixels; refusing to decode it (downscale it first)")
    return im


def check_image_file(path: str | Path) -> tuple[int, int]:
    """Cheap check (header only): the file opens as an image within the size limit. Returns (width, height)."""
    with _open(Path(path)) as im:
        return im.size


def decode_image_file(path: str | Path, *, max_side: int | None = None,
                      size: tuple[int, int] | None = None) -> DecodedImage:
    """Read an image file by the module's policy. ``max_side``: downscale so the longer side is at most this;
    ``size`` = (width, height): resize to exactly this (after the policy, so pixels agree with other readers)."""
    p = Path(path)
    with _open(p) as im:
        mode, orig, transparency = im.mode, im.size, "transparency" in im.info
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                if max_side is not None and max(orig) > max_side and im.format == "JPEG":
                    im.draft(im.mode, _fit(*orig, max_side))  # JPEG decodes at 1/2, 1/4 or 1/8 scale directly
                im.load()
                im2 = _normalise_mode(im)
                if max_side is not None and max(im2.size) > max_side and im2.mode in ("L", "LA", "RGB", "RGBA"):
                    im2 = _bilinear(im2, _fit(*im2.size, max_side))  # before decoding the policy: bounded memory
                a = pil_to_array(im2)
        except (OSError, SyntaxError, ValueError, EOFError) as e:
            raise DataError(f"cannot decode image {p}: {' '.join(str(e).split()) or type(e).__name__} "
                            "(truncated or corrupt file?)") from None
    if max_side is not None:
        a = downscale(a, max_side)
    if size is not None:
        a = resize_array(a, size)
    return DecodedImage(a, mode, orig, p, transparency)


def read_image(path: str | Path, *, max_side: int | None = None) -> np.ndarray:
    """uint8 (H, W) grayscale or (H, W, 3) RGB by the module's policy (see :func:`decode_image_file`)."""
    return decode_image_file(path, max_side=max_side).pixels


def decode_image_bytes(data: bytes, where: str) -> np.ndarray:
    """An image held in memory (an archive member) by the same policy."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            return pil_to_array(im)
    except Image.DecompressionBombError:
        raise DataError(f"{where}: image is over the decompression-bomb limit of {max_pixels():,} pixels") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise DataError(f"cannot decode image {where}: {e}") from None


def to_rgb(x: np.ndarray) -> np.ndarray:
    """Replicate grayscale to three channels: (H, W) / (..., H, W, 1) -> (..., 3); RGB is returned as is."""
    x = np.asarray(x)
    if x.shape[-1] == 3 and x.ndim >= 3:
        return x
    if x.shape[-1] == 1 and x.ndim >= 3:
        return np.repeat(x, 3, axis=-1)
    return np.repeat(x[..., None], 3, axis=-1)


def rgb_to_gray(x: np.ndarray) -> np.ndarray:
    """uint8 (..., 3) -> (..., 1) luma (ITU-R 601-2: 0.299 R + 0.587 G + 0.114 B, rounded)."""
    x = np.asarray(x)
    return np.rint(x.astype(np.float64) @ np.array([0.299, 0.587, 0.114]))[..., None].astype(np.uint8)


# --- images: folders and stacks ------------------------------------------------------------------------------

def natural_key(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in _NUM_RE.split(name))


def list_image_files(base: Path) -> list[Path]:
    """Image files (by extension) below ``base``, recursively, hidden files and folders skipped, sorted
    naturally by relative path."""
    found = []
    for p in base.rglob("*"):
        rel = p.relative_to(base)
        if p.suffix.lower() in IMAGE_EXTS and not any(part.startswith(".") for part in rel.parts) and p.is_file():
            found.append(p)
    return sorted(found, key=lambda p: natural_key(p.relative_to(base).as_posix()))


def stack_images(decoded: Sequence[DecodedImage], where: str) -> tuple[np.ndarray, list[str]]:
    """One uint8 stack (N, H, W, 1|3) from decoded images of one size: one channel when every image is
    grayscale, else RGB (grayscale ones replicated). Returns (x, notes describing what the policy did)."""
    if not decoded:
        raise DataError(f"no images in {where}")
    first = decoded[0]
    for d in decoded:
        if d.pixels.shape[:2] != first.pixels.shape[:2]:
            raise DataError(f"images in {where} have different sizes ({first.path.name}: {first.pixels.shape[1]}x"
                            f"{first.pixels.shape[0]}, {d.path.name}: {d.pixels.shape[1]}x{d.pixels.shape[0]}); "
                            "resize them to one size (image_size=N resizes on load)")
    gray = sum(d.gray for d in decoded)
    if gray == len(decoded):
        x = np.stack([d.pixels for d in decoded])[..., None]
    else:
        x = np.stack([to_rgb(d.pixels) for d in decoded])
    notes = []
    if gray and gray < len(decoded):
        notes.append(f"{gray} grayscale image(s): replicated to 3 channels")
    for label, n in (("with transparency: composited over white", sum(d.had_alpha for d in decoded)),
                     ("with a palette: expanded", sum(d.mode in ("P", "PA") for d in decoded)),
                     ("16-bit: scaled to 8 bits", sum(d.mode == "I" or d.mode.startswith("I;16") for d in decoded))):
        if n:
            notes.append(f"{n} image(s) {label}")
    return x, notes


# --- arrays --------------------------------------------------------------------------------------------------

#: the most bytes one array may declare (shape × item size): 16 GiB, twice ImageNet's 50,000 validation images
#: at 224 px as uint8; checked from the header before anything is allocated, read or decompressed
MAX_ARRAY_BYTES = 2**34
#: an .npz member over INFLATION_FLOOR bytes that inflates more than this many times its stored size is refused
#: as a decompression bomb (deflate shrinks real image arrays by far less; zeros shrink ~1000 times)
MAX_INFLATION = 100
INFLATION_FLOOR = 64 << 20


def _npy_header(f: Any, where: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, declared data bytes) from the ``.npy`` header at the start of stream ``f``."""
    from numpy.lib import format as npy_format
    try:
        version = npy_format.read_magic(f)
        read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        shape, _, dtype = read(f)
    except (ValueError, OSError, EOFError, SyntaxError, zipfile.BadZipFile) as e:
        raise DataError(f"{where}: cannot read as a .npy array ({' '.join(str(e).split())[:200]})") from None
    if dtype.hasobject:
        raise DataError(f"{where}: holds Python objects (a pickle), which are never read; save plain arrays")
    size = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if size > MAX_ARRAY_BYTES:
        raise DataError(f"{where}: its header declares a {dtype} array of shape {tuple(shape)} ({size:,} bytes), "
                        f"over the limit of {MAX_ARRAY_BYTES:,} bytes ({MAX_ARRAY_BYTES >> 30} GiB)")
    return tuple(shape), dtype, size


def _check_npz_member(zf: zipfile.ZipFile, name: str, where: str) -> None:
    """The header checks of member ``name`` (``x`` -> ``x.npy``) of an open ``.npz``, decompressing only its
    header."""
    info = zf.getinfo(f"{name}.npy")
    with zf.open(info) as f:
        shape, dtype, size = _npy_header(f, f"{where} array {name!r}")
        header = f.tell()
    if header + size != info.file_size:
        raise DataError(f"{where}: array {name!r} declares shape {shape} {dtype} ({size:,} bytes) but the archive "
                        f"stores {max(0, info.file_size - header):,} bytes for it; the file is damaged or truncated")
    if size > INFLATION_FLOOR and info.file_size > MAX_INFLATION * max(1, info.compress_size):
        raise DataError(f"{where}: array {name!r} would inflate from {info.compress_size:,} to {info.file_size:,} "
                        f"bytes (over {MAX_INFLATION} times); refused as a decompression bomb")


def check_array_file(path: str | Path, names: Sequence[str] = ("x", "y")) -> None:
    """DataError unless the ``.npy`` file, or the ``names`` arrays an ``.npz`` holds, pass the header checks of
    the module docstring (size bound, declared = stored bytes, no decompression bomb); reads headers only."""
    p = Path(path).expanduser()
    _check_file(p)
    if p.suffix.lower() != ".npz":
        try:
            with open(p, "rb") as f:
                _, _, size = _npy_header(f, str(p))
                have = p.stat().st_size - f.tell()
        except OSError as e:
            raise DataError(f"{p}: cannot read ({e.strerror or e})") from None
        if have < size:
            raise DataError(f"{p}: its header declares {size:,} bytes of data but the file holds {have:,}; it is "
                            "truncated or damaged")
        return
    try:
        with zipfile.ZipFile(p) as zf:
            present = {n[:-4] for n in zf.namelist() if n.endswith(".npy")}
            for name in (n for n in names if n in present):
                _check_npz_member(zf, name, str(p))
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError) as e:
        raise DataError(f"{p}: cannot read as a .npz archive ({' '.join(str(e).split())})") from None


def read_npz(path: str | Path, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The named arrays of an ``.npz`` (no pickles): every ``required`` one, and the ``optional`` ones present;
    their headers checked first (:func:`check_array_file`)."""
    p = Path(path).expanduser()
    check_array_file(p, (*required, *optional))
    try:
        with np.load(p, allow_pickle=False) as z:
            missing = [n for n in required if n not in z.files]
            if missing:
                need = " and ".join(repr(n) for n in required)
                extra = f" (and optionally {', '.join(repr(n) for n in optional)})" if optional else ""
                raise DataError(f"{p}: needs an array named {need}{extra}; it has {', '.join(z.files) or 'none'}")
            return {n: z[n] for n in (*required, *optional) if n in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(f"{p}: cannot read as a .npz archive ({' '.join(str(e).split())})") from None


def _check_file(p: Path) -> None:
    if not p.exists():
        raise DataError(f"{p}: no such file")
    if not p.is_file():
        raise DataError(f"{p}: not a file")


def read_array_file(path: str | Path) -> tuple[np.ndarray, np.ndarray | None]:
    """``(x, y or None)`` from a ``.npy`` (x only) or ``.npz`` (``x`` and optional ``y``), no pickles."""
    p = Path(path).expanduser()
    suffix = p.suffix.lower()
    if suffix == ".npz":
        z = read_npz(p, ["x"], ["y"])
        return z["x"], z.get("y")
    if suffix != ".npy":
        raise DataError(f"{p}: arrays must be a .npy or .npz file")
    check_array_file(p)
    try:
        return np.load(p, allow_pickle=False), None
    except (OSError, ValueError, EOFError) as e:
        raise DataError(f"{p}: cannot read as a .npy array ({' '.join(str(e).split())})") from None


def check_image_stack(x: Any, where: str) -> np.ndarray:
    """A uint8 stack (N, H, W, 1|3) from (N, H, W) or (N, H, W, 1|2|3|4) by the module's policy."""
    if not isinstance(x, np.ndarray):
        raise DataError(f"{where}: expected a NumPy array, got {type(x).__name__}")
    if x.dtype != np.uint8:
        hint = (" (floats in [0,1]? convert with (x * 255).round().astype(np.uint8))" if x.dtype.kind == "f" else "")
        raise DataError(f"{where}: images must be uint8 (0..255), got {x.dtype}{hint}")
    if x.ndim == 3:
        return np.ascontiguousarray(x)[..., None]
    if x.ndim == 4 and x.shape[-1] in (1, 3):
        return np.ascontiguousarray(x)
    if x.ndim == 4 and x.shape[-1] in (2, 4):
        return flatten_alpha(x)
    if x.ndim == 4 and x.shape[1] in (1, 3):
        raise DataError(f"{where}: shape {x.shape} looks channels-first; transpose to (N, H, W, C)")
    raise DataError(f"{where}: images must have shape (N, H, W, 3), (N, H, W, 1) or (N, H, W), got {x.shape}")


#: labels are class indices 0..MAX_CLASSES-1 (the model config's num_classes bound): a larger one is a broken
#: file, refused before anything is sized by it (class lists, counts, one-hot tensors)
MAX_CLASSES = 10**6


def check_labels(y: Any, n: int, where: str) -> np.ndarray:
    """Labels ``y`` for ``n`` images: 1-D integers in 0..MAX_CLASSES-1, one per image (int64); DataError
    naming ``where`` otherwise. Checked on read, before any allocation that depends on their values."""
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n or y.dtype.kind not in "iu":
        raise DataError(f"{where}: labels 'y' must be {n} integers (1-D), got {y.dtype} {y.shape}")
    if n and y.min() < 0:
        raise DataError(f"{where}: labels 'y' must be >= 0, found {y.min()}")
    if n and y.max() >= MAX_CLASSES:
        raise DataError(f"{where}: labels 'y' must be class indices below {MAX_CLASSES:,}, found {y.max()}")
    return y.astype(np.int64)


# --- text ----------------------------------------------------------------------------------------------------

def check_encoding(encoding: str) -> str:
    """The codec name for ``encoding``; UserError for an unknown one, or a codec that does not decode bytes to
    text (``hex``, ``rot13``, ``zlib``: codecs.lookup knows them, decoding text with them fails)."""
    try:
        name = codecs.lookup(encoding).name
        b"a".decode(name, "ignore")  # b"" skips the check
        return name
    except (LookupError, TypeError):
        raise UserError(f"unknown text encoding {encoding!r} (e.g. utf-8, latin-1, cp1252)") from None


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """The decoded text of a file; a UTF-8 BOM is dropped. One-line errors name the file and the line."""
    p = Path(path)
    name = check_encoding(encoding)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{p}: is a folder, not a text file") from None
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror or e})") from None
    try:
        return raw.decode("utf-8-sig" if name == "utf-8" else name)
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise DataError(f"{p} line {line}: not valid {encoding} (byte 0x{raw[e.start]:02x}); give the file's "
                        "encoding (e.g. latin-1 or cp1252)") from None


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """Non-blank lines of a text file (one example per line)."""
    return [line for line in read_text(path, encoding).splitlines() if line.strip()]


@dataclass
class Table:
    """Rows of a text table. ``columns`` in file order; ``lines[i]``: the line where row ``i`` starts."""
    path: Path
    columns: list[str]
    rows: list[dict[str, Any]]
    lines: list[int]


def _csv_rows(path: Path, text: str, delimiter: str) -> Table:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    rows, lines = [], []
    while True:
        start = reader.line_num + 1
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            what = "unterminated quote (a field opened with \" is never closed)" if "end of data" in str(e) else e
            raise DataError(f"{path} line {start}: {what}") from None
        if not rec or (len(rec) == 1 and not rec[0].strip() and header is not None):
            continue
        if header is None:
            header = [h.strip() for h in rec]
            continue
        if len(rec) != len(header):
            raise DataError(f"{path} line {start}: {len(rec)} fields but the header has {len(header)} "
                            f"({', '.join(header)})")
        rows.append(dict(zip(header, rec)))
        lines.append(start)
    return Table(path, header or [], rows, lines)


def _jsonl_rows(path: Path, text: str) -> Table:
    rows, lines = [], []
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise DataError(f"{path} line {k}: not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path} line {k}: each line must be a JSON object")
        _check_unicode(obj, f"{path} line {k}")
        rows.append(obj)
        lines.append(k)
    return Table(path, list(rows[0]) if rows else [], rows, lines)


def _check_unicode(obj: Any, where: str) -> None:
    """DataError when a text of ``obj`` (keys and values, nested) holds a lone surrogate (a ``\\ud800`` escape
    without its pair): JSON decodes it, but it is no Unicode character and no text file can hold it."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as e:
                raise DataError(f"{where}: the text holds a lone surrogate \\u{ord(item[e.start]):04x} (half of a "
                                "UTF-16 pair), which is not a character; fix or remove that escape") from None


def read_table(path: str | Path, fmt: str | None = None, *, encoding: str = "utf-8") -> Table:
    """A CSV/TSV (header row), JSONL or JSON (list of objects) file as a :class:`Table`."""
    p = Path(path)
    fmt = (fmt or p.suffix.lower().lstrip(".")).lower()
    if fmt not in ("csv", "tsv", "jsonl", "json"):
        raise UserError(f"unknown text table format {fmt!r} for {p} (valid: csv, tsv, jsonl, json)")
    text = read_text(p, encoding)
    if fmt in ("csv", "tsv"):
        return _csv_rows(p, text, "\t" if fmt == "tsv" else ",")
    if fmt == "jsonl":
        return _jsonl_rows(p, text)
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise DataError(f"{p}: not JSON ({e})") from None
    if not isinstance(obj, list) or not all(isinstance(r, dict) for r in obj):
        raise DataError(f"{p} must hold a JSON list of objects")
    for i, r in enumerate(obj, 1):
        _check_unicode(r, f"{p} item {i}")
    return Table(p, list(obj[0]) if obj else [], obj, list(range(1, len(obj) + 1)))
