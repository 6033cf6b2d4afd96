"""Frost textures: the reference's frost1..frost5 photographs, resized as each generator does (x0.2 for CIFAR,
x0.3 for Tiny-ImageNet, native size for ImageNet: ``Regime.frost_scale``; :meth:`FrostTextures.at_scale`).

Lookup order of :func:`load_frost_textures`:

1. a directory the caller names (``frost1.png frost2.png frost3.png frost4.jpg frost5.jpg``; frost6.jpg is
   never used by the reference, ``randint(5)`` picks 0..4);
2. the package data of an installed ``imagecorruptions`` distribution (byte-identical copies), found
   through ``importlib.metadata`` without importing the package (its import fails on recent NumPy);
3. a clearly labelled, deterministic procedural substitute, with a warning.

``FrostTextures.source`` says which: ``"dir:<path>"``, ``"imagecorruptions:<version>"`` or ``"procedural"``.
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .errors import CorruptionError, ResultWarning

FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")
# sizes (H, W) of the photographs, and after cv2.resize(fx=0.2, fy=0.2) (CIFAR's factor)
FROST_NATIVE = ((600, 900), (315, 560), (315, 560), (350, 527), (495, 660))
FROST_SHAPES = ((120, 180), (63, 112), (63, 112), (70, 105), (99, 132))
PROCEDURAL = "procedural"
_CIFAR_SCALE = 0.2


def frost_shapes(scale: float) -> tuple:
    """(H, W) of the five textures after ``cv2.resize(fx=fy=scale)``: OpenCV rounds W * scale and H * scale to the
    nearest integer (half to even)."""
    if scale == 1.0:
        return FROST_NATIVE
    return tuple((int(np.rint(h * scale)), int(np.rint(w * scale))) for h, w in FROST_NATIVE)


@dataclass
class FrostTextures:
    """The 5 textures in use, RGB uint8, resized by ``scale`` (cv2 INTER_LINEAR; 1 = the photographs as they are),
    plus where they came from. ``originals``: the decoded photographs (RGB), from which :meth:`at_scale` resizes;
    None for textures given directly."""

    source: str
    textures: tuple  # 5 arrays (H, W, 3) uint8, RGB
    file_sha256: dict = field(default_factory=dict)  # file name -> sha256 of the bytes read (empty if procedural)
    scale: float = _CIFAR_SCALE
    originals: tuple | None = field(default=None, repr=False, compare=False)
    _stacked: dict = field(default_factory=dict, repr=False, compare=False)
    _scaled: dict = field(default_factory=dict, repr=False, compare=False)

    def at_scale(self, scale: float) -> "FrostTextures":
        """These textures as the generator with frost resize factor ``scale`` uses them (cached)."""
        scale = float(scale)
        if scale == self.scale:
            return self
        if scale not in self._scaled:
            if self.is_procedural:
                self._scaled[scale] = FrostTextures(PROCEDURAL, procedural_textures(scale), scale=scale)
            elif self.originals is None:
                raise CorruptionError(f"these frost textures are resized x{self.scale} and carry no photographs to "
                                      f"resize x{scale}; load them with load_frost_textures()")
            else:
                self._scaled[scale] = FrostTextures(self.source, tuple(_resize(o, scale) for o in self.originals),
                                                    dict(self.file_sha256), scale, self.originals)
        return self._scaled[scale]

    def check_fits(self, h: int, w: int, scale: float) -> None:
        """CorruptionError unless every texture, resized by ``scale`` (OpenCV's rounding), is larger than an
        ``h`` x ``w`` image: the random crop needs a spare row and column. Checked before any resize or crop."""
        if self.is_procedural:
            return
        if self.originals is not None:
            shapes = tuple((int(np.rint(o.shape[0] * scale)), int(np.rint(o.shape[1] * scale)))
                           for o in self.originals) if scale != 1.0 else tuple(o.shape[:2] for o in self.originals)
        elif float(scale) == self.scale:
            shapes = self.shapes
        else:
            return                                    # at_scale refuses these with its own line
        small = [f"{b}x{a}" for a, b in shapes if a <= h or b <= w]
        if small:
            raise CorruptionError(f"frost: {w}x{h} images need textures larger than that after resizing "
                                  f"x{scale:g}; the textures of {self.source} are then "
                                  + ", ".join(f"{b}x{a}" for a, b in shapes))

    @property
    def shapes(self) -> tuple:
        return tuple(t.shape[:2] for t in self.textures)

    @property
    def is_procedural(self) -> bool:
        return self.source == PROCEDURAL

    @property
    def digest(self) -> str:
        """sha256 over the resized texture pixels (identifies what the corruption actually used)."""
        h = hashlib.sha256()
        for t in self.textures:
            h.update(str(t.shape).encode())
            h.update(np.ascontiguousarray(t).tobytes())
        return h.hexdigest()

    def stacked(self, device) -> torch.Tensor:
        """(5, Hmax, Wmax, 3) uint8 tensor on ``device`` (zero padded; crops never reach the padding)."""
        key = str(torch.device(device))
        if key not in self._stacked:
            hm = max(s[0] for s in self.shapes)
            wm = max(s[1] for s in self.shapes)
            arr = np.zeros((len(self.textures), hm, wm, 3), dtype=np.uint8)
            for i, t in enumerate(self.textures):
                arr[i, : t.shape[0], : t.shape[1]] = t
            self._stacked[key] = torch.from_numpy(arr).to(device)
        return self._stacked[key]


def _decode(data: bytes, name: str) -> np.ndarray:
    """cv2.imread semantics (3-channel BGR, alpha dropped), then BGR -> RGB."""
    import cv2

    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise CorruptionError(f"frost texture {name} is not a readable image (cannot be decoded)")
    return np.ascontiguousarray(img[..., ::-1])


def _resize(rgb: np.ndarray, scale: float) -> np.ndarray:
    """``cv2.resize(img, (0, 0), fx=scale, fy=scale)`` (INTER_LINEAR) as the generators call it; scale 1: no resize
    (the ImageNet generator crops the photograph itself). Per channel, so the channel order does not matter."""
    import cv2

    if scale == 1.0:
        return rgb
    return np.ascontiguousarray(cv2.resize(rgb, (0, 0), fx=scale, fy=scale))


def min_photo_side() -> int:
    """The smallest side a frost photograph may have: resized as the generator of the smallest regime does
    (CIFAR: x0.2), it must still be larger than that regime's images (the random crop needs a spare row and
    column); 163 px. Smaller photographs serve no regime and are refused when loaded."""
    from .registry import REGIMES
    return min(int(np.ceil((r.size + 0.5) / r.frost_scale)) for r in REGIMES.values())


def _check_photo(img: np.ndarray, where: str) -> None:
    side = min_photo_side()
    if min(img.shape[:2]) < side:
        raise CorruptionError(f"frost texture {where} is {img.shape[1]}x{img.shape[0]} pixels; the corruption "
                              f"crops image-sized pieces from it after resizing (x0.2 for 32x32 images), so each "
                              f"side must be at least {side} pixels")


def _from_files(paths: dict, source: str) -> FrostTextures:
    originals, sums = [], {}
    for name in FROST_FILES:
        try:
            data = Path(paths[name]).read_bytes()
        except OSError as e:
            raise CorruptionError(f"frost texture {paths[name]} cannot be read: {e.strerror or e}") from None
        sums[name] = hashlib.sha256(data).hexdigest()
        originals.append(_decode(data, str(paths[name])))
        _check_photo(originals[-1], str(paths[name]))
    textures = tuple(_resize(o, _CIFAR_SCALE) for o in originals)
    return FrostTextures(source=source, textures=textures, file_sha256=sums, originals=tuple(originals))


def _imagecorruptions_files():
    """(version, {name: path}) from an installed imagecorruptions distribution, or None."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover
        return None
    try:
        dist = distribution("imagecorruptions")
    except PackageNotFoundError:
        return None
    found = {}
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if len(parts) >= 2 and parts[-2] == "frost" and parts[-1] in FROST_FILES:
            p = Path(dist.locate_file(f))
            if p.is_file():
                found[parts[-1]] = p
    if len(found) != len(FROST_FILES):
        return None
    return dist.version, found


def procedural_textures(scale: float = _CIFAR_SCALE) -> tuple:
    """A deterministic ice-crystal-like stand-in for the 5 textures, at the sizes of the photographs resized by
    ``scale`` (needle length, thickness and density scale with it, so every size looks alike).

    Bright, slightly blue-tinted, with clusters of thin straight needles branching at 60 degrees on a soft
    fractal haze. It is a substitute, not the reference: results made with it are labelled 'procedural'.
    """
    import cv2

    rng = np.random.default_rng(20190108)
    out = []
    k_len = float(scale) / _CIFAR_SCALE
    for h, w in frost_shapes(scale):
        s = 4  # draw at 4x, then downsample (anti-aliased needles)
        big = np.zeros((h * s, w * s), np.float32)
        for _ in range(int(h * w / (60 * k_len * k_len))):
            cy, cx = rng.uniform(0, h * s), rng.uniform(0, w * s)
            base = rng.uniform(0, np.pi)
            length = rng.uniform(3, 12) * s * k_len
            inten = rng.uniform(0.25, 1.0)
            for k in range(3):  # hexagonal symmetry of ice needles
                a = base + k * np.pi / 3
                dy, dx = np.sin(a) * length / 2, np.cos(a) * length / 2
                p0 = (int(cx - dx), int(cy - dy))
                p1 = (int(cx + dx), int(cy + dy))
                cv2.line(big, p0, p1, float(inten), thickness=max(1, int(round(s // 2 * k_len))),
                         lineType=cv2.LINE_AA)
        needles = cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA)
        haze = np.zeros((h, w), np.float32)
        for octave in range(1, 5):
            g = rng.random((max(2, h // (2**octave * 2)), max(2, w // (2**octave * 2)))).astype(np.float32)
            haze += cv2.resize(g, (w, h), interpolation=cv2.INTER_CUBIC) / octave
        haze = (haze - haze.min()) / max(float(np.ptp(haze)), 1e-6)
        lum = np.clip(0.35 + 0.35 * haze + 0.6 * needles, 0, 1)
        rgb = np.stack([lum * 0.88, lum * 0.95, lum], axis=-1) * 255.0
        out.append(np.ascontiguousarray(np.clip(rgb, 0, 255).astype(np.uint8)))
    return tuple(out)


_DEFAULT = None


def load_frost_textures(frost_dir=None) -> FrostTextures:
    """Frost textures from ``frost_dir``, else from an installed imagecorruptions, else procedural (warns).

    A given directory must hold frost1.png, frost2.png, frost3.png, frost4.jpg and frost5.jpg; missing
    files raise CorruptionError naming them. The default lookup (no directory) is cached.
    """
    global _DEFAULT
    if frost_dir is not None:
        d = Path(frost_dir).expanduser()
        if d.exists() and not d.is_dir():
            raise CorruptionError(f"frost directory {d} is a file, not a folder; give the folder holding "
                                  f"{', '.join(FROST_FILES)}")
        if not d.is_dir():
            raise CorruptionError(f"frost directory {d} does not exist")
        missing = [f for f in FROST_FILES if not (d / f).is_file()]
        if missing:
            raise CorruptionError(f"frost directory {d} lacks {', '.join(missing)}")
        return _from_files({f: d / f for f in FROST_FILES}, f"dir:{d.resolve()}")
    if _DEFAULT is not None:
        return _DEFAULT
    found = _imagecorruptions_files()
    if found is not None:
        version, paths = found
        _DEFAULT = _from_files(paths, f"imagecorruptions:{version}")
    else:
        warnings.warn(
            "frost: no texture directory given and no imagecorruptions distribution installed; using a "
            "PROCEDURAL substitute for the frost photographs (results are not the reference's frost; "
            "pass frost_dir=... or `pip install imagecorruptions` to use the real textures)",
            ResultWarning,
            stacklevel=2,
        )
        _DEFAULT = FrostTextures(source=PROCEDURAL, textures=procedural_textures())
    return _DEFAULT
