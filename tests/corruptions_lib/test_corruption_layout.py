"""Official CIFAR-C layout: regenerate -> manifest -> load_corrupted round trips, chunking/subset independence,
official-directory loading (small fake blocks), refusal to overwrite, interrupted runs, verify_against, preview."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from corruptions import api, layout
from corruptions.errors import CorruptionError

CHEAP = ["gaussian_noise", "contrast"]  # one random, one deterministic; both fast


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (20, 4, 4, 3)).astype(np.float32)
    x = np.kron(base, np.ones((1, 8, 8, 1), np.float32)) + rng.normal(0, 12, (20, 32, 32, 3))
    return np.clip(x, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    return np.arange(20, dtype=np.int64) % 10


@pytest.fixture(autouse=True)
def _digest_cache(tmp_path_factory, monkeypatch):
    """Keep the SHA-256 cache of these tests out of the user's cache folder."""
    monkeypatch.setenv("CORRUPTIONS_CACHE", str(tmp_path_factory.mktemp("digest-cache")))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(d: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (_sha(p), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


# ---------------------------------------------------------------------------------------------- round trips


def test_roundtrip_all_severities(tmp_path, images, labels):
    out = tmp_path / "c"
    man = layout.regenerate(images, labels, out, CHEAP, "1-5", seed=3, chunk_size=8)
    # 20 images: not the official 5 x 10,000 layout, so the names say so (an official reader finds nothing)
    assert sorted(p.name for p in out.iterdir()) == ["contrast.n20.s12345.npy", "gaussian_noise.n20.s12345.npy",
                                                      "labels.n20.s12345.npy", "manifest.json"]
    data = json.loads((out / "manifest.json").read_text())
    assert data == man.data
    assert data["description"] == "CIFAR-10-C-style (regenerated)"
    assert data["severities"] == [1, 2, 3, 4, 5] and data["n"] == 20 and data["seed"] == 3
    assert data["official_layout"] is False and not man.official_layout
    assert set(data["corruptions"]) == set(CHEAP)
    from corruptions import registry
    assert data["constants_version"] == registry.CONSTANTS_VERSION
    assert {"numpy", "scipy", "pillow", "torch", "opencv"} <= set(data["library_versions"])
    assert data["frost_source"] is None  # frost not requested
    for name, entry in data["files"].items():
        assert _sha(out / name) == entry["sha256"], name
        arr = np.load(out / name)
        assert list(arr.shape) == entry["shape"] and str(arr.dtype) == entry["dtype"]
    layout.check_manifest(out)

    raw = np.load(out / "gaussian_noise.n20.s12345.npy")
    assert raw.shape == (100, 32, 32, 3) and raw.dtype == np.uint8
    lab = np.load(out / "labels.n20.s12345.npy")
    assert lab.dtype == np.uint8 and lab.shape == (100,)
    assert np.array_equal(lab, np.tile(labels, 5))
    for name in CHEAP:
        for s in range(1, 6):
            x, y = layout.load_corrupted(out, name, s)
            assert x.dtype == np.uint8 and y.dtype == np.int64
            assert np.array_equal(x, api.corrupt(images, name, s, seed=3))
            assert np.array_equal(y, labels)
        x_all, y_all = layout.load_corrupted(out, name)
        assert x_all.shape[0] == 100 and np.array_equal(y_all, np.tile(labels, 5))
    assert layout.list_available(out) == {c: [1, 2, 3, 4, 5] for c in data["corruptions"]}
    # severities really differ (the blocks are not copies)
    assert not np.array_equal(raw[:20], raw[80:])


def test_roundtrip_selected_severities_in_given_order(tmp_path, images, labels):
    out = tmp_path / "c"
    man = layout.regenerate(images, labels, out, "contrast", [3, 1], seed=0)  # blocks in the order given
    assert man.severities == [3, 1]
    raw = np.load(out / "contrast.n20.s31.npy")
    assert raw.shape == (40, 32, 32, 3)
    assert np.array_equal(raw[:20], api.corrupt(images, "contrast", 3))
    assert np.array_equal(raw[20:], api.corrupt(images, "contrast", 1))
    x, y = layout.load_corrupted(out, "contrast", 1)
    assert np.array_equal(x, raw[20:]) and np.array_equal(y, labels)
    assert layout.list_available(out) == {"contrast": [3, 1]}
    with pytest.raises(CorruptionError, match="holds severities 3,1"):
        layout.load_corrupted(out, "contrast", 2)
    with pytest.raises(CorruptionError, match="not in this directory"):
        layout.load_corrupted(out, "gaussian_noise", 3)
    with pytest.raises(CorruptionError, match="valid names"):
        layout.load_corrupted(out, "gaussian_nosie", 3)


def test_no_labels_and_wide_labels(tmp_path, images):
    layout.regenerate(images, None, tmp_path / "a", "contrast", "2")
    assert not list((tmp_path / "a").glob("labels*"))
    x, y = layout.load_corrupted(tmp_path / "a", "contrast", 2)
    assert y is None and x.shape == (20, 32, 32, 3)
    big = np.arange(20) * 100  # max label 1900 >= 256: not uint8
    layout.regenerate(images, big, tmp_path / "b", "contrast", "2")
    assert np.load(tmp_path / "b" / "labels.n20.s2.npy").dtype == np.int64
    assert np.array_equal(layout.load_corrupted(tmp_path / "b", "contrast", 2)[1], big)


def test_chunking_and_subset_independence(tmp_path, images, labels):
    a = layout.regenerate(images, labels, tmp_path / "a", CHEAP, "1,5", seed=5, chunk_size=7)
    b = layout.regenerate(images, labels, tmp_path / "b", CHEAP, "1,5", seed=5, chunk_size=1000)
    for name in ("gaussian_noise.n20.s15.npy", "contrast.n20.s15.npy", "labels.n20.s15.npy"):
        assert a.files[name]["sha256"] == b.files[name]["sha256"]
        assert _sha(tmp_path / "a" / name) == _sha(tmp_path / "b" / name)
    # the first 9 images regenerate exactly as inside the full run (what --limit relies on)
    layout.regenerate(images[:9], labels[:9], tmp_path / "c", "gaussian_noise", "1,5", seed=5, chunk_size=4)
    full = np.load(tmp_path / "a" / "gaussian_noise.n20.s15.npy")
    part = np.load(tmp_path / "c" / "gaussian_noise.n9.s15.npy")
    for blk in range(2):
        assert np.array_equal(part[blk * 9:(blk + 1) * 9], full[blk * 20:blk * 20 + 9])
    # another seed gives other noise
    layout.regenerate(images, labels, tmp_path / "d", "gaussian_noise", "1", seed=6)
    assert not np.array_equal(np.load(tmp_path / "d" / "gaussian_noise.n20.s1.npy"), full[:20])


def test_progress_wrapper_is_used(tmp_path, images):
    seen = {}

    def wrapper(items, total=None, description=""):
        seen["total"], seen["description"] = total, description
        yield from items

    layout.regenerate(images, None, tmp_path / "a", CHEAP, "1,2", chunk_size=8, progress=wrapper)
    assert seen["total"] == 2 * 2 * 3


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad, match", [
    (np.zeros((4, 32, 32, 3), np.float32), "uint8"),
    (np.zeros((4, 32, 32), np.uint8), "shape"),
    (np.zeros((4, 3, 32, 32), np.uint8), "channels first"),
    (np.zeros((0, 32, 32, 3), np.uint8), "empty"),
    ([[1, 2, 3]], "NumPy"),
])
def test_bad_images(tmp_path, bad, match):
    with pytest.raises(CorruptionError, match=match):
        layout.regenerate(bad, None, tmp_path / "o", "contrast", "1")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kwargs, match", [
    ({"corruptions": "contrast,nope"}, "valid"),
    ({"severities": "0"}, "0"),
    ({"severities": "6"}, "6"),
    ({"severities": [1, 1]}, "repeat"),
    ({"labels": np.arange(3)}, "labels"),
    ({"labels": -np.ones(20, np.int64)}, "non-negative"),
    ({"seed": -1}, "seed"),
    ({"chunk_size": 0}, "chunk_size"),
])
def test_bad_arguments(tmp_path, images, labels, kwargs, match):
    args = {"labels": labels, "corruptions": "contrast", "severities": "1-5"}
    args.update(kwargs)
    with pytest.raises(CorruptionError, match=match):
        layout.regenerate(images, args.pop("labels"), tmp_path / "o", args.pop("corruptions"),
                          args.pop("severities"), **args)
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------- safety


def test_existing_output_is_refused_and_untouched(tmp_path, images, labels):
    out = tmp_path / "c"
    layout.regenerate(images, labels, out, CHEAP, "1-5", seed=1)
    before = _files(out)
    # the same run again: already finished with the same parameters -> skipped, nothing rewritten
    again = layout.regenerate(images, labels, out, "gaussian_noise", "1-5", seed=1)
    assert again.skipped == ("gaussian_noise",) and _files(out) == before
    # a final-named file the manifest does not vouch for is refused
    np.save(out / "brightness.n20.s12345.npy", np.zeros((1, 32, 32, 3), np.uint8))
    with pytest.raises(CorruptionError, match=r"brightness\.n20\.s12345\.npy.*overwrite"):
        layout.regenerate(images, labels, out, "brightness", "1-5", seed=1)
    (out / "brightness.n20.s12345.npy").unlink()
    # a different run (other seed) cannot be merged into the manifest either
    with pytest.raises(CorruptionError, match=r"manifest\.json.*seed"):
        layout.regenerate(images, labels, out, "brightness", "1-5", seed=2)
    assert _files(out) == before
    # overwrite replaces the files and the manifest
    with pytest.warns(UserWarning, match=r"contrast\.n20"):
        man = layout.regenerate(images, labels, out, "gaussian_noise", "1-5", seed=9, overwrite=True)
    fname = "gaussian_noise.n20.s12345.npy"
    assert man.seed == 9 and _sha(out / fname) == man.files[fname]["sha256"]
    assert man.corruptions == ["gaussian_noise"]  # contrast.npy belongs to the old run: no longer listed
    assert layout.list_available(out) == {"gaussian_noise": [1, 2, 3, 4, 5]}


def test_compatible_runs_merge_into_one_manifest(tmp_path, images, labels):
    out = tmp_path / "c"
    layout.regenerate(images, labels, out, "contrast", "1,2", seed=4)
    lab_before = _files(out)["labels.n20.s12.npy"]
    man = layout.regenerate(images, labels, out, "gaussian_noise", "1,2", seed=4)
    assert set(man.corruptions) == {"contrast", "gaussian_noise"}
    assert _files(out)["labels.n20.s12.npy"] == lab_before  # not rewritten
    layout.check_manifest(out)
    assert set(layout.list_available(out)) == {"contrast", "gaussian_noise"}


def test_interrupted_run_leaves_nothing_that_looks_complete(tmp_path, images, labels, monkeypatch):
    real = api.corrupt
    calls = {"n": 0}

    def flaky(x, name, severity, **kw):
        if len(x) > 1:  # past the one-image preflight: fail after the first real chunk
            calls["n"] += 1
            if calls["n"] > 1:
                raise RuntimeError("simulated crash")
        return real(x, name, severity, **kw)

    monkeypatch.setattr(api, "corrupt", flaky)
    out = tmp_path / "c"
    with pytest.raises(RuntimeError, match="simulated"):
        layout.regenerate(images, labels, out, CHEAP, "1-5", chunk_size=5)
    assert calls["n"] == 2
    assert not out.exists()  # no final-named file, no manifest, temp files removed, the new folder too
    out.mkdir()  # an existing folder stays (empty)

    def interrupted(x, name, severity, **kw):
        if len(x) > 1 and name == "gaussian_noise":  # the second corruption: the first one is complete
            raise KeyboardInterrupt
        return real(x, name, severity, **kw)

    monkeypatch.setattr(api, "corrupt", interrupted)
    with pytest.raises(KeyboardInterrupt):
        layout.regenerate(images, labels, out, ["contrast", "gaussian_noise"], "1-5")
    assert list(out.iterdir()) == []


def test_partial_files_are_not_listed(tmp_path):
    (tmp_path / ".contrast.npy.abc123.partial").write_bytes(b"half")
    assert layout.list_available(tmp_path) == {}
    with pytest.raises(CorruptionError):
        layout.load_corrupted(tmp_path, "contrast", 1)


def test_check_manifest_detects_changed_file(tmp_path, images):
    layout.regenerate(images, None, tmp_path, "contrast", "1")
    raw = np.load(tmp_path / "contrast.n20.s1.npy")
    raw[0, 0, 0, 0] ^= 1
    np.save(tmp_path / "contrast.n20.s1.npy", raw)
    with pytest.raises(CorruptionError, match="SHA-256"):
        layout.check_manifest(tmp_path)
    with pytest.raises(CorruptionError, match="SHA-256"):
        layout.load_corrupted(tmp_path, "contrast", 1, check_md5=True)
    # reading checks by default now (cached digest); only an explicit verify=False loads a changed file
    with pytest.raises(CorruptionError, match=r"contrast\.n20\.s1\.npy: contents differ"):
        layout.load_corrupted(tmp_path, "contrast", 1)
    assert layout.load_corrupted(tmp_path, "contrast", 1, verify=False)[0].shape == (20, 32, 32, 3)


# ---------------------------------------------------------------------------------------------- official layout


def _fake_official(d: Path, block: int = 4, names=("gaussian_noise", "frost"), n_labels_blocks: int = 5) -> None:
    d.mkdir(parents=True, exist_ok=True)
    rows = 5 * block
    for k, name in enumerate(names):
        x = np.zeros((rows, 32, 32, 3), np.uint8)
        x[:, 0, 0, 0] = np.arange(rows)  # row marker
        x[:, 0, 0, 1] = k
        np.save(d / f"{name}.npy", x)
    np.save(d / "labels.npy", np.tile(np.arange(block, dtype=np.uint8) % 10, n_labels_blocks))


def test_official_layout_slicing(tmp_path):
    d = tmp_path / "CIFAR-10-C"
    _fake_official(d, block=4)
    assert layout.list_available(d) == {"gaussian_noise": [1, 2, 3, 4, 5], "frost": [1, 2, 3, 4, 5]}
    for s in range(1, 6):
        x, y = layout.load_corrupted(d, "frost", s, n_clean=4)
        assert x.shape == (4, 32, 32, 3)
        assert list(x[:, 0, 0, 0]) == list(range((s - 1) * 4, s * 4)) and set(x[:, 0, 0, 1]) == {1}
        assert y.dtype == np.int64 and list(y) == [0, 1, 2, 3]
    x, _ = layout.load_corrupted(d, "gaussian_noise", 2)  # block size inferred: a fifth of the file
    assert list(x[:, 0, 0, 0]) == [4, 5, 6, 7]
    with pytest.raises(CorruptionError, match="5 severity blocks of 3"):
        layout.load_corrupted(d, "frost", 1, n_clean=3)
    with pytest.raises(CorruptionError, match="severity 6"):
        layout.load_corrupted(d, "frost", 6)
    with pytest.raises(CorruptionError, match="severity 0"):
        layout.load_corrupted(d, "frost", 0)
    with pytest.raises(CorruptionError, match="no such directory"):
        layout.load_corrupted(tmp_path / "nope", "frost", 1)


def test_official_labels_10000_mistake(tmp_path):
    d = tmp_path / "c"
    _fake_official(d, block=4, n_labels_blocks=1)  # 4 labels for 20 rows: the clean labels, untiled
    with pytest.raises(CorruptionError, match=r"tiled once per block.*np\.tile") as e:
        layout.load_corrupted(d, "frost", 1)
    assert "4 entries" in str(e.value) and "20 rows" in str(e.value)
    np.save(d / "labels.npy", np.arange(7, dtype=np.uint8))
    with pytest.raises(CorruptionError, match="7 entries"):
        layout.load_corrupted(d, "frost", 1)
    bad = np.tile(np.arange(4, dtype=np.uint8), 5)
    bad[9] = 3
    np.save(d / "labels.npy", bad)
    with pytest.raises(CorruptionError, match="block 3 differs"):
        layout.load_corrupted(d, "frost", 1)
    (d / "labels.npy").unlink()
    with pytest.raises(CorruptionError, match="missing"):
        layout.load_corrupted(d, "frost", 1)


def test_official_md5_check(tmp_path, monkeypatch):
    d = tmp_path / "c"
    _fake_official(d, block=4)
    with pytest.raises(CorruptionError, match="md5.*CIFAR10-C"):
        layout.load_corrupted(d, "frost", 1, check_md5=True)
    md5 = {p.stem: hashlib.md5(p.read_bytes()).hexdigest() for p in d.glob("*.npy")}
    table = dict(layout.CIFAR100C_MD5, **md5)
    monkeypatch.setitem(layout.OFFICIAL_MD5, "cifar100", table)
    x, _ = layout.load_corrupted(d, "frost", 2, check_md5=True)  # labels md5 picks the CIFAR-100 table
    assert x.shape == (4, 32, 32, 3)
    with pytest.raises(CorruptionError, match="CIFAR10-C"):
        layout.load_corrupted(d, "frost", 2, check_md5=True, dataset="cifar10")
    assert layout.CIFAR10C_MD5["labels"] == "c439b113295ed5254878798ffe28fd54"
    assert len(layout.CIFAR10C_MD5) == len(layout.CIFAR100C_MD5) == 20


def test_official_shape_errors(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    np.save(d / "frost.npy", np.zeros((21, 32, 32, 3), np.uint8))
    np.save(d / "labels.npy", np.zeros(21, np.uint8))
    with pytest.raises(CorruptionError, match="5 severity blocks"):
        layout.load_corrupted(d, "frost", 1)
    np.save(d / "frost.npy", np.zeros((20, 32, 32), np.float32))
    with pytest.raises(CorruptionError, match="uint8"):
        layout.load_corrupted(d, "frost", 1)
    (d / "frost.npy").write_bytes(b"not an npy file")
    with pytest.raises(CorruptionError, match="readable"):
        layout.load_corrupted(d, "frost", 1)


# ---------------------------------------------------------------------------------------------- verify_against


def test_verify_against_identical_and_different(tmp_path, images, labels):
    layout.regenerate(images, labels, tmp_path / "a", CHEAP, "1,3", seed=0)
    layout.regenerate(images, labels, tmp_path / "b", CHEAP, "1,3", seed=0, chunk_size=3)
    df = layout.verify_against(tmp_path / "a", tmp_path / "b")
    assert len(df) == 4 and set(df["corruption"]) == set(CHEAP)
    assert (df["mean_abs_diff"] == 0).all() and (df["identical_fraction"] == 1).all()
    assert np.isinf(df["psnr_db"]).all() and (df["max_abs_diff"] == 0).all()
    assert (df["mean_regen"] == df["mean_official"]).all()
    assert dict(zip(df["corruption"], df["comparison"])) == {"gaussian_noise": "distributional",
                                                             "contrast": "bytewise"}
    assert df.attrs["labels_identical"] is True

    # another seed: random corruption differs bytewise but agrees in distribution; deterministic identical
    layout.regenerate(images, labels, tmp_path / "c", CHEAP, "1,3", seed=1)
    df = layout.verify_against(tmp_path / "a", tmp_path / "c").set_index(["corruption", "severity"])
    g = df.loc[("gaussian_noise", 3)]
    assert g["identical_fraction"] < 0.5 and g["mean_abs_diff"] > 1
    assert abs(g["mean_regen"] - g["mean_official"]) < 1.5 and abs(g["std_regen"] - g["std_official"]) < 1.5
    assert df.loc[("contrast", 3), "identical_fraction"] == 1.0
    assert len(df) == 4  # only severities present in both

    # against a small "official" directory (5 blocks), first N images compared
    off = tmp_path / "off"
    off.mkdir()
    np.save(off / "contrast.npy", np.concatenate([api.corrupt(images, "contrast", s) for s in range(1, 6)]))
    np.save(off / "labels.npy", np.tile(labels.astype(np.uint8), 5))
    df = layout.verify_against(tmp_path / "a", off)
    assert list(df["corruption"]) == ["contrast", "contrast"] and (df["identical_fraction"] == 1).all()
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorruptionError, match="no corruption"):
        layout.verify_against(tmp_path / "a", tmp_path / "empty")


# ---------------------------------------------------------------------------------------------- preview


def test_preview_grid(tmp_path, images):
    from PIL import Image

    from corruptions.preview import preview_grid
    out = preview_grid(images[:2], CHEAP, "1,5", tmp_path / "sub" / "grid.png", seed=0, title="test")
    assert out == tmp_path / "sub" / "grid.png" and out.is_file()
    with Image.open(out) as im:
        w, h = im.size
    assert w > 3 * 64 and h > 4 * 64  # 3 columns (clean + 2 severities), 4 rows (2 images x 2 corruptions)
    assert [p.name for p in out.parent.iterdir()] == ["grid.png"]
    with pytest.raises(CorruptionError):
        preview_grid(images[:2], "nope", "1", tmp_path / "g.png")
    with pytest.raises(CorruptionError, match="png"):
        preview_grid(images[:2], "contrast", "1", tmp_path / "g.jpg")


# ---------------------------------------------------------------------------------------------- integrity, merging


def test_tampered_file_is_refused_on_read(tmp_path, images, labels):
    out = tmp_path / "c"
    layout.regenerate(images, labels, out, "contrast", "1,2", seed=0)
    x, _ = layout.load_corrupted(out, "contrast", 2)  # verified and cached
    cache = json.loads((Path(os.environ["CORRUPTIONS_CACHE"]) / "sha256-cache.json").read_text())
    assert str((out / "contrast.n20.s12.npy").resolve()) in cache
    path = out / "contrast.n20.s12.npy"
    raw = np.load(path)
    raw[25, 3, 3, 1] ^= 0x10  # same size, other bytes, new mtime
    np.save(path, raw)
    with pytest.raises(CorruptionError, match=r"contrast\.n20\.s12\.npy: contents differ from manifest\.json"):
        layout.load_corrupted(out, "contrast", 2)
    # the labels are checked as well
    layout.regenerate(images, labels, out, "contrast", "1,2", seed=0, overwrite=True)
    lab = out / "labels.n20.s12.npy"
    np.save(lab, (np.load(lab) + 1) % 10)
    with pytest.raises(CorruptionError, match=r"labels\.n20\.s12\.npy: contents differ"):
        layout.load_corrupted(out, "contrast", 1)


def test_digest_cache_file_is_parsed_once_per_change(tmp_path, images, labels, monkeypatch):
    """A verified read parses the digest cache file only when the file changed since this process last parsed
    it (each evaluation verifies one file per condition; the file holds up to 4,096 entries). Another process's
    write is seen at the next read, and a digest stays valid only for its file's stamp."""
    from corruptions.layout import digest

    out = tmp_path / "c"
    layout.regenerate(images, labels, out, "contrast", "1,2", seed=0)
    layout.load_corrupted(out, "contrast", 1)                  # hashes and caches file + labels (a write)
    layout.load_corrupted(out, "contrast", 1)                  # parses the written file once
    cache_file = Path(os.environ["CORRUPTIONS_CACHE"]) / "sha256-cache.json"
    parsed = []
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (parsed.append(1) if self == cache_file else None)
                        or real_read(self, *a, **k))
    for _ in range(5):
        layout.load_corrupted(out, "contrast", 2)
    assert parsed == []                                        # unchanged file: never read again
    data = json.loads(real_read(cache_file))
    other = str((tmp_path / "elsewhere.npy").resolve())
    data[other] = {"size": 1, "mtime_ns": 1, "ctime_ns": 1, "ino": 1, "dev": 1, "sha256": "0" * 64, "t": 0}
    tmp = cache_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, cache_file)                                # "another process" rewrote the cache
    assert other in digest._read_digest_cache(cache_file) and len(parsed) == 1
    path = out / "contrast.n20.s12.npy"
    raw = np.load(path)
    raw[25, 3, 3, 1] ^= 0x10
    np.save(path, raw)                                         # a changed data file is still re-hashed
    with pytest.raises(CorruptionError, match="contents differ"):
        layout.load_corrupted(out, "contrast", 2)


def test_concurrent_runs_merge_into_one_manifest(tmp_path, images, labels, monkeypatch):
    """Run B starts and finishes while run A is still writing (both saw no manifest at the start): A's commit
    re-reads the manifest under the folder lock and keeps B's entries."""
    out = tmp_path / "c"
    real = api.corrupt
    state = {"done": False}

    def corrupt_and_interleave(x, name, severity, **kw):
        if name == "contrast" and len(x) > 1 and not state["done"]:
            state["done"] = True
            layout.regenerate(images, labels, out, "gaussian_noise", "1,2", seed=4)  # run B, complete
        return real(x, name, severity, **kw)

    monkeypatch.setattr(api, "corrupt", corrupt_and_interleave)
    man = layout.regenerate(images, labels, out, "contrast", "1,2", seed=4)  # run A
    assert state["done"]
    assert set(man.corruptions) == {"contrast", "gaussian_noise"}
    assert set(layout.read_manifest(out).files) == {"contrast.n20.s12.npy", "gaussian_noise.n20.s12.npy",
                                                     "labels.n20.s12.npy"}
    layout.check_manifest(out)
    monkeypatch.setattr(api, "corrupt", real)
    for name in ("contrast", "gaussian_noise"):
        assert np.array_equal(layout.load_corrupted(out, name, 2)[0], api.corrupt(images, name, 2, seed=4))


def test_conflicting_concurrent_run_is_refused_and_leaves_nothing(tmp_path, images, labels, monkeypatch):
    out = tmp_path / "c"
    out.mkdir()
    real = api.corrupt

    def other_run_meanwhile(x, name, severity, **kw):
        if name == "contrast" and len(x) > 1 and not (out / "manifest.json").exists():
            layout.regenerate(images, labels, out, "gaussian_noise", "1,2", seed=5)  # different seed
        return real(x, name, severity, **kw)

    monkeypatch.setattr(api, "corrupt", other_run_meanwhile)
    with pytest.raises(CorruptionError, match="different seed meanwhile"):
        layout.regenerate(images, labels, out, "contrast", "1,2", seed=4)
    assert sorted(p.name for p in out.iterdir()) == ["gaussian_noise.n20.s12.npy", "labels.n20.s12.npy",
                                                      "manifest.json"]
    assert layout.read_manifest(out).seed == 5


def test_rerun_skips_finished_and_adds_missing(tmp_path, images, labels, monkeypatch):
    out = tmp_path / "c"
    layout.regenerate(images, labels, out, "contrast", "1", seed=2)
    before = _files(out)
    seen = []
    real = api.corrupt
    monkeypatch.setattr(api, "corrupt", lambda x, name, s, **kw: seen.append(name) or real(x, name, s, **kw))
    man = layout.regenerate(images, labels, out, CHEAP, "1", seed=2)
    assert man.skipped == ("contrast",) and set(seen) == {"gaussian_noise"}  # contrast not recomputed
    after = _files(out)
    assert after["contrast.n20.s1.npy"] == before["contrast.n20.s1.npy"]
    assert set(man.corruptions) == set(CHEAP)
    # a finished file whose bytes no longer match is not skipped: it is refused as foreign output
    raw = np.load(out / "contrast.n20.s1.npy")
    raw[0, 0, 0, 0] ^= 1
    np.save(out / "contrast.n20.s1.npy", raw)
    with pytest.raises(CorruptionError, match=r"contrast\.n20\.s1\.npy.*overwrite"):
        layout.regenerate(images, labels, out, "contrast", "1", seed=2)


def test_stale_partials_of_killed_runs_are_cleaned(tmp_path, images, labels):
    import fcntl
    out = tmp_path / "c"
    out.mkdir()
    stale = out / ".contrast.n20.s1.npy.deadbeef.partial"  # what kill -9 leaves (nobody holds its lock)
    stale.write_bytes(b"\x00" * 1000)
    live = out / ".gaussian_noise.n20.s1.npy.0badf00d.partial"  # a live run's file: locked
    live.write_bytes(b"\x00" * 10)
    old = os.path.getmtime(stale) - 3600
    os.utime(stale, (old, old))
    os.utime(live, (old, old))
    fd = os.open(live, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        layout.regenerate(images, labels, out, "contrast", "1", seed=0)
        assert not stale.exists() and live.exists()
    finally:
        os.close(fd)
    assert layout.clean_stale_partials(out) == [live.name] and not live.exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".partial")]


def test_subset_names_make_an_official_reader_fail(tmp_path, images, labels):
    out = tmp_path / "c"
    layout.regenerate(images, labels, out, "contrast", "1,3", seed=0)
    man = layout.read_manifest(out)
    assert man.data["official_layout"] is False and "not the official layout" in man.data["layout"]
    # a reader that assumes <corruption>.npy with 5 x 10,000 rows finds no file instead of mixing severities
    with pytest.raises(FileNotFoundError):
        np.load(out / "contrast.npy")
    with pytest.raises(FileNotFoundError):
        np.load(out / "labels.npy")
    # our official reader (no manifest) refuses too; with the manifest the set reads correctly
    (out / "manifest.json").rename(tmp_path / "manifest.json")
    with pytest.raises(CorruptionError, match="not in this directory"):
        layout.load_corrupted(out, "contrast", 3)
    (tmp_path / "manifest.json").rename(out / "manifest.json")
    x, y = layout.load_corrupted(out, "contrast", 3)
    assert np.array_equal(x, api.corrupt(images, "contrast", 3)) and np.array_equal(y, labels)
    # the official names are kept for exactly 5 x 10,000 (checked on the naming rule, not by writing 50,000)
    assert layout.layout_suffix(10_000, [1, 2, 3, 4, 5]) == ""
    assert layout.layout_suffix(10_000, [1, 3]) == ".n10000.s13"
    assert layout.layout_suffix(9_999, [1, 2, 3, 4, 5]) == ".n9999.s12345"
    assert layout.layout_suffix(10_000, [5, 4, 3, 2, 1]) == ".n10000.s54321"


def test_digest_cache_own_write_is_not_parsed_again_and_other_entries_stay(tmp_path, images, labels, monkeypatch):
    """This process's own write of the digest cache is remembered as written (not parsed again at the next
    read), and a new digest keeps the entries another process wrote before it."""
    from corruptions.layout import digest

    out = tmp_path / "c"
    layout.regenerate(images, labels, out, "contrast,brightness", "1", seed=0)
    cache_file = Path(os.environ["CORRUPTIONS_CACHE"]) / "sha256-cache.json"
    other = str((tmp_path / "elsewhere.npy").resolve())
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    cache_file.write_text(json.dumps({other: {"size": 1, "mtime_ns": 1, "ctime_ns": 1, "ino": 1, "dev": 1,
                                              "sha256": "0" * 64, "t": 0}}))
    parsed = []
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (parsed.append(1) if self == cache_file else None)
                        or real_read(self, *a, **k))
    layout.load_corrupted(out, "contrast", 1)         # parses the file once, then writes two new digests
    layout.load_corrupted(out, "brightness", 1)       # one more new digest; the file it wrote is not parsed
    layout.load_corrupted(out, "contrast", 1)
    assert len(parsed) == 1
    on_disk = json.loads(real_read(cache_file))
    assert other in on_disk and len(on_disk) == 4     # the other entry, two data files, the labels file
    assert on_disk == digest._read_digest_cache(cache_file)
