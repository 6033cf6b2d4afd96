"""The one reader (``data/readers.py``): the same PNGs give the same pixels through ``corrupt``, the ``folder:``
dataset source (what ``evaluate --dataset folder:...`` loads) and ``rollout``; ``npy:`` / ``npz:`` sources; and
every bad input it guards (bombs, huge images, broken text tables, encodings, damaged archives) is one line."""
from __future__ import annotations

import io
import json
import lzma
import struct
import sys
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from corruptions import api, layout
from robustbench_dgsa.cli import app, main
from robustbench_dgsa.data import load_dataset, readers
from robustbench_dgsa.util.errors import DataError

H, W = 12, 16
rng = np.random.default_rng(7)
RGB = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
ALPHA = rng.integers(0, 256, (H, W), dtype=np.uint8)
ALPHA[0, :4] = 0      # fully transparent: must become white whatever colour it hides
ALPHA[1, :4] = 255    # opaque: unchanged
PAL_INDEX = rng.integers(0, 8, (H, W), dtype=np.uint8)
PALETTE = rng.integers(0, 256, (8, 3), dtype=np.uint8)
G16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
G16[0, :3] = [0, 65535, 128]
GRAY = rng.integers(0, 256, (H, W), dtype=np.uint8)


def _expected() -> dict[str, np.ndarray]:
    """The policy computed independently of the code under test (uint8 RGB, grayscale replicated)."""
    a = ALPHA.astype(np.int64)[..., None]
    rgba = ((RGB.astype(np.int64) * a + 255 * (255 - a) + 127) // 255).astype(np.uint8)
    pal = PALETTE[PAL_INDEX]
    g16 = ((G16.astype(np.int64) * 255 + 32767) // 65535).astype(np.uint8)
    rep = lambda g: np.repeat(g[..., None], 3, axis=-1)  # noqa: E731
    return {"1_rgba": rgba, "2_palette": pal, "3_gray16": rep(g16), "4_gray": rep(GRAY)}


EXPECTED = _expected()
NAMES = list(EXPECTED)


def _write_pngs(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    p = {n: folder / f"{n}.png" for n in NAMES}
    Image.fromarray(np.dstack([RGB, ALPHA]), "RGBA").save(p["1_rgba"])
    pim = Image.fromarray(PAL_INDEX, "P")
    pim.putpalette(PALETTE.ravel().tolist())
    pim.save(p["2_palette"])
    Image.fromarray(G16).save(p["3_gray16"])
    Image.fromarray(GRAY, "L").save(p["4_gray"])
    return p


@pytest.fixture(scope="module")
def pngs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pngs")
    files = _write_pngs(root / "imgs" / "test" / "things")
    with Image.open(files["3_gray16"]) as im, Image.open(files["2_palette"]) as pm:
        assert im.mode.startswith("I;16") and pm.mode == "P"  # the test really feeds 16-bit and palette files
    return files


def test_policy_per_mode(pngs):
    for name, path in pngs.items():
        got = readers.to_rgb(readers.read_image(path))
        assert got.dtype == np.uint8 and np.array_equal(got, EXPECTED[name]), name
    assert np.array_equal(readers.read_image(pngs["4_gray"]), GRAY)  # grayscale stays one channel in the reader
    rgba = EXPECTED["1_rgba"]
    assert (rgba[0, :4] == 255).all() and np.array_equal(rgba[1, :4], RGB[1, :4])


def test_palette_with_transparency_and_la(tmp_path):
    pim = Image.fromarray(PAL_INDEX, "P")
    pim.putpalette(PALETTE.ravel().tolist())
    pim.info["transparency"] = 3
    pim.save(tmp_path / "t.png", transparency=3)
    want = PALETTE[PAL_INDEX].copy()
    want[PAL_INDEX == 3] = 255
    assert np.array_equal(readers.read_image(tmp_path / "t.png"), want)
    Image.fromarray(np.dstack([GRAY, ALPHA]), "LA").save(tmp_path / "la.png")
    a = ALPHA.astype(np.int64)
    assert np.array_equal(readers.read_image(tmp_path / "la.png"), (GRAY * a + 255 * (255 - a) + 127) // 255)


def test_same_pixels_through_folder_source_corrupt_and_rollout(pngs, tmp_path, monkeypatch):
    stack = np.stack([EXPECTED[n] for n in NAMES])
    imgs = pngs["1_rgba"].parents[2]
    # evaluate --dataset folder:...  (the folder source)
    ds = load_dataset(f"folder:{imgs}", "test")
    assert np.array_equal(ds.x, stack) and ds.y.tolist() == [0, 0, 0, 0]
    assert any("transparency" in n for n in ds.notes) and any("16-bit" in n for n in ds.notes)
    # corrupt: a deterministic corruption of what it read == the same corruption of the policy's pixels
    out = tmp_path / "c"
    res = CliRunner().invoke(app, ["corrupt", "-i", str(imgs), "-o", str(out), "--corruption", "contrast", "-s", "2",
                                   "--constants", "cifar", "--json"])
    assert res.exit_code == 0, res.output
    x, _ = layout.load_corrupted(out, "contrast", 2)
    assert np.array_equal(x, api.corrupt(stack, "contrast", 2, constants="cifar"))
    # rollout: the image array the rollout path hands to the model
    import robustbench_dgsa.rollout.runs as runs
    seen: list[np.ndarray] = []
    original = runs.image_rollout_full

    def spy(model, images, *a, **kw):
        seen.append(np.asarray(images).copy())
        return original(model, images, *a, **kw)

    monkeypatch.setattr(runs, "image_rollout_full", spy)
    import robustbench_dgsa.rollout.plots as plots
    monkeypatch.setattr(plots, "plot_image_rollout", lambda img, heat, out, **kw: Path(out).write_bytes(b""))
    for name in NAMES:
        res = CliRunner().invoke(app, ["rollout", str(pngs[name]), "--model", "vit", "--out",
                                       str(tmp_path / f"{name}.png")])
        assert res.exit_code == 0, res.output
        assert np.array_equal(readers.to_rgb(seen[-1][0]), EXPECTED[name]), name


def test_large_images_are_bounded_before_rollout(tmp_path, monkeypatch):
    """Rollout reads images at most MAX_SIDE on the longer side, so the model input and the saved heatmap stay
    small whatever the file (the 10,000 x 10,000 case, measured in the report, is this with MAX_SIDE = 1024)."""
    import robustbench_dgsa.rollout.runs as runs
    big = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    Image.fromarray(big).save(tmp_path / "big.png")
    monkeypatch.setattr(runs, "MAX_SIDE", 20)
    out = tmp_path / "r.png"
    res = CliRunner().invoke(app, ["rollout", str(tmp_path / "big.png"), "--model", "vit", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.with_suffix(".json").read_text())
    assert np.load(out.with_suffix(".npy")).shape == (16, 20) and doc["heatmaps_shape"] == [16, 20]
    assert doc["original_size"] == [40, 50] and doc["image_shape"] == [16, 20, 3]
    assert np.array_equal(readers.read_image(tmp_path / "big.png", max_side=20),
                          np.asarray(Image.fromarray(big).resize((20, 16), Image.Resampling.BILINEAR)))
    assert runs.bound_images(np.zeros((2, 3000, 100, 1), np.uint8), 1024).shape == (2, 1024, 34, 1)


def test_npz_and_npy_sources(tmp_path):
    x = np.stack([EXPECTED[n] for n in NAMES])
    np.savez(tmp_path / "d.npz", x=x, y=np.array([0, 1, 1, 2]))
    ds = load_dataset(f"npz:{tmp_path / 'd.npz'}", "test")
    assert np.array_equal(ds.x, x) and ds.y.tolist() == [0, 1, 1, 2] and ds.classes == ["0", "1", "2"]
    assert ds.modality == "image" and ds.mean[0] == pytest.approx(x[..., 0].mean() / 255)
    bare = load_dataset(str(tmp_path / "d.npz"), "train", classes=["a", "b", "c"])  # bare path detected
    assert bare.classes == ["a", "b", "c"] and np.array_equal(bare.x, x)
    # RGBA arrays follow the same policy as RGBA files
    np.savez(tmp_path / "rgba.npz", x=np.dstack([RGB, ALPHA])[None], y=[0])
    assert np.array_equal(load_dataset(f"npz:{tmp_path / 'rgba.npz'}", "test").x[0], EXPECTED["1_rgba"])
    # {split} pattern; grayscale (N, H, W) becomes (N, H, W, 1)
    for split, n in (("train", 6), ("test", 2)):
        np.savez(tmp_path / f"{split}.npz", x=rng.integers(0, 256, (n, 5, 5), dtype=np.uint8), y=np.arange(n) % 2)
    te = load_dataset(f"npz:{tmp_path}/{{split}}.npz", "test")
    assert te.x.shape == (2, 5, 5, 1) and len(te.mean) == 1
    assert te.mean[0] == pytest.approx(np.load(tmp_path / "train.npz")["x"].mean() / 255)  # train statistics
    # .npy: images only; refused for training/evaluation, accepted where labels are not needed
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(DataError, match="no labels"):
        load_dataset(f"npy:{tmp_path / 'x.npy'}", "test")
    un = load_dataset(f"npy:{tmp_path / 'x.npy'}", "test", unlabeled_ok=True)
    assert un.classes == [] and (un.y == -1).all() and np.array_equal(un.x, x)
    # a seeded split of one file
    np.savez(tmp_path / "big.npz", x=rng.integers(0, 256, (20, 4, 4, 3), dtype=np.uint8), y=np.arange(20) % 2)
    a = load_dataset(f"npz:{tmp_path / 'big.npz'}", "train", test_fraction=0.2, seed=1)
    b = load_dataset(f"npz:{tmp_path / 'big.npz'}", "test", test_fraction=0.2, seed=1)
    assert (len(a), len(b)) == (16, 4) and np.bincount(b.y).tolist() == [2, 2]
    assert not {bytes(v) for v in a.x} & {bytes(v) for v in b.x}


def test_corrupt_npz_goes_through_the_dataset_source(tmp_path):
    x = np.stack([EXPECTED[n] for n in NAMES])
    np.savez(tmp_path / "d.npz", x=np.dstack([RGB, ALPHA])[None].repeat(2, 0), y=[1, 0])
    res = CliRunner().invoke(app, ["corrupt", "-i", str(tmp_path / "d.npz"), "-o", str(tmp_path / "o"),
                                   "--corruption", "brightness", "-s", "3", "--constants", "cifar",
                                   "--json"])
    assert res.exit_code == 0, res.output
    got, y = layout.load_corrupted(tmp_path / "o", "brightness", 3)
    assert y.tolist() == [1, 0] and np.array_equal(got, api.corrupt(x[:1].repeat(2, 0), "brightness", 3,
                                                                                constants="cifar"))


def test_text_tables(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes('\ufefftext,label\n"a, b",1\n\n"multi\nline",0\n'.encode("utf-8"))
    t = readers.read_table(p)
    assert t.columns == ["text", "label"] and [r["text"] for r in t.rows] == ["a, b", "multi\nline"]
    assert t.lines == [2, 4]
    (tmp_path / "l1.csv").write_bytes("text,label\ncaf\xe9,1\n".encode("latin-1"))
    assert readers.read_table(tmp_path / "l1.csv", encoding="latin-1").rows[0]["text"] == "café"


def _one_line_error(args: list[str], monkeypatch, capsys, cwd: Path) -> str:
    """Run the real entry point in process; assert a non-zero exit, one error line and no traceback."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["dgsa-bench", *args])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as exc:
        main()
    err = capsys.readouterr().err
    assert (exc.value.code or 0) != 0, err
    assert "Traceback" not in err and "Aborted" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning")]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def _bomb_png(path: Path, side: int = 15000) -> None:
    """A PNG whose header claims side x side pixels (over Pillow's limit); opening it must not decode it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))


def _rt_archive(path: Path, truncate: bool) -> None:
    words = np.random.default_rng(0).integers(0, 10 ** 6, 40000).astype(str)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name in ("rt-polarity.pos", "rt-polarity.neg"):
            data = "\n".join(" ".join(words[i:i + 8]) for i in range(0, len(words), 8)).encode()
            info = tarfile.TarInfo(f"rt-polaritydata/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = lzma.compress(buf.getvalue())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw[: len(raw) * 3 // 4] if truncate else raw)


def _make_bad_files(tmp: Path) -> None:
    bomb = tmp / "bomb" / "test" / "c" / "bomb.png"
    bomb.parent.mkdir(parents=True)
    _bomb_png(bomb)
    (tmp / "quote.tsv").write_text('text\tlabel\nfine\t1\n"never closed\t0\nmore\t1\n', encoding="utf-8")
    (tmp / "ragged.csv").write_text("text,label\nok,1\nextra,1,2\n", encoding="utf-8")
    (tmp / "latin.csv").write_bytes("text,label\nok,1\ncaf\xe9 cr\xe8me,0\n".encode("latin-1"))
    _rt_archive(tmp / "root" / "rt-polaritydata.tar.xz", truncate=True)


def _case_args(tmp: Path) -> dict[str, tuple[list[str], str]]:
    out = str(tmp / "out")
    return {
        "bomb-rollout": (["rollout", str(tmp / "bomb" / "test" / "c" / "bomb.png"), "--model", "vit", "--out",
                          f"{out}.png"], "decompression-bomb"),
        "bomb-corrupt": (["corrupt", "-i", str(tmp / "bomb"), "-o", out, "--corruption", "contrast", "-s", "1"],
                         "decompression-bomb"),
        "quote-corrupt-text": (["corrupt-text", "-i", str(tmp / "quote.tsv"), "-o", out], "line 3: unterminated"),
        "quote-train": (["train", "-m", "transformer", "-d", f"tsv:{tmp / 'quote.tsv'}", "-o", out, "--epochs", "1"],
                        "quote.tsv line 3: unterminated quote"),
        "ragged-csv": (["corrupt-text", "-i", str(tmp / "ragged.csv"), "-o", out], "line 3: 3 fields"),
        "bogus-encoding": (["corrupt-text", "-i", str(tmp / "latin.csv"), "-o", out, "--encoding", "bogus"],
                           "unknown text encoding 'bogus'"),
        "non-utf8": (["corrupt-text", "-i", str(tmp / "latin.csv"), "-o", out], "latin.csv line 3: not valid utf-8"),
        "non-utf8-train": (["train", "-m", "transformer", "-d", f"csv:{tmp / 'latin.csv'}", "-o", out],
                           "latin.csv line 3: not valid utf-8"),
        "truncated-tar-xz": (["corrupt-text", "-i", "rotten-tomatoes", "--data-root", str(tmp / "root"), "-o", out],
                             "truncated or damaged"),
    }


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    _make_bad_files(d)
    return d


@pytest.mark.parametrize("case", sorted(_case_args(Path("."))))
def test_bad_input_is_one_line(case, bad_dir, monkeypatch, capsys, tmp_path):
    """Real entry point (``main()``) in process: non-zero exit, exactly one ``error:`` line naming the file
    (and line), no traceback, no "Aborted.", nothing written."""
    monkeypatch.setenv("DGSA_CACHE", str(tmp_path / "cache"))
    args, needle = _case_args(bad_dir)[case]
    line = _one_line_error(args, monkeypatch, capsys, tmp_path)
    assert needle in line, line
    assert not (bad_dir / "out").exists() and not (bad_dir / "out.png").exists()
