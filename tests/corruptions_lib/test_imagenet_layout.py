"""ImageNet-C / Tiny-ImageNet-C folder layouts end to end: ``corrupt --input imagenet|tiny-imagenet`` writes the
official tree (names, 224 / 64 px JPEG at quality 85, SHA-256 manifest, resumable, re-runs skip), and ``evaluate
--corruption-dir`` reads the regenerated and the official tree, every file once, with the right labels.

The fixtures are tiny generated validation folders: a few classes of random JPEGs (300x260 px for ImageNet, so
the Resize(256) + CenterCrop(224) step really crops; 80x70 px for Tiny-ImageNet, squashed to 64x64).
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from corruptions.api import corrupt
from corruptions.imagenet import imagenet_input, tiny_imagenet_input
from corruptions.layout import folders

CORRUPTIONS, SEVERITIES = ("gaussian_noise", "contrast"), (1, 3)
WNIDS = ("n01440764", "n01443537", "n01484850")
SIDE = {"imagenet": 224, "tiny-imagenet": 64}


def _jpeg(path: Path, rng, w: int, h: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path, quality=95)


def _make_imagenet(root: Path) -> dict[str, str]:
    """val/<wnid>/*.JPEG, 2 images per class; {<wnid>/<file>: wnid}."""
    rng, names = np.random.default_rng(1), {}
    for k, w in enumerate(WNIDS):
        for j in range(2):
            name = f"ILSVRC2012_val_{10 * k + j + 1:08d}.JPEG"
            _jpeg(root / "val" / w / name, rng, 300, 260)
            names[f"{w}/{name}"] = w
    return names


def _make_tiny(root: Path) -> dict[str, str]:
    """tiny-imagenet-200/val/images/*.JPEG + val_annotations.txt (class order differs from file order)."""
    rng, names, lines = np.random.default_rng(2), {}, []
    val = root / "tiny-imagenet-200" / "val"
    for i, w in enumerate((WNIDS[1], WNIDS[0], WNIDS[1], WNIDS[0])):
        name = f"val_{i}.JPEG"
        _jpeg(val / "images" / name, rng, 80, 70)
        lines.append(f"{name}\t{w}\t0\t0\t63\t63")
        names[f"{w}/{name}"] = w
    (val / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return names


MAKERS = {"imagenet": _make_imagenet, "tiny-imagenet": _make_tiny}


def _source_file(root: Path, dataset: str, name: str) -> Path:
    if dataset == "imagenet":
        return root / "val" / name
    return root / "tiny-imagenet-200" / "val" / "images" / name.split("/", 1)[1]


def _images_under(out: Path) -> dict[str, Path]:
    """Every file of the tree except the bookkeeping (manifest.json, SHA256SUMS), by relative path."""
    return {p.relative_to(out).as_posix(): p for p in out.rglob("*")
            if p.is_file() and p.name not in ("manifest.json", folders.SUMS_NAME)}


def _q85_tables() -> dict:
    buf = io.BytesIO()
    Image.new("RGB", (16, 16)).save(buf, format="JPEG", quality=85, optimize=True)
    return Image.open(buf).quantization


@pytest.mark.parametrize("dataset", ["imagenet", "tiny-imagenet"])
def test_corrupt_writes_the_official_layout(dataset, run_main, tmp_path):
    root, out = tmp_path / "data", tmp_path / "out"
    names = MAKERS[dataset](root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    args = ["corrupt", "--input", dataset, "--data-root", str(root), "--out", str(out), "--corruption",
            ",".join(CORRUPTIONS), "--severity", ",".join(map(str, SEVERITIES)), "--device", "cpu", "--json"]
    code, stdout, err = run_main(args, tmp_path)
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["n"] == len(names) and summary["skipped"] == []

    # exactly OUT/<corruption>/<severity>/<wnid>/<file>, nothing else
    files = _images_under(out)
    assert set(files) == {f"{c}/{s}/{n}" for c in CORRUPTIONS for s in SEVERITIES for n in names}
    side, q85 = SIDE[dataset], _q85_tables()
    for path in files.values():
        with Image.open(path) as im:
            assert (im.format, im.mode, im.size) == ("JPEG", "RGB", (side, side))
            assert im.quantization == q85  # saved at quality 85, as the reference generators

    # manifest -> SHA256SUMS -> every file
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["constants"] == dataset and manifest["n"] == len(names)
    assert set(manifest["conditions"]) == {f"{c}/{s}" for c in CORRUPTIONS for s in SEVERITIES}
    for key, entry in manifest["conditions"].items():
        sums = (out / key / folders.SUMS_NAME).read_bytes()
        assert hashlib.sha256(sums).hexdigest() == entry["sha256sums"] and entry["files"] == len(names)
        listed = dict(line.split("  ")[::-1] for line in sums.decode().splitlines())
        assert listed == {n: hashlib.sha256((out / key / n).read_bytes()).hexdigest() for n in names}

    # the deterministic corruption is the reference pipeline byte for byte: input step, corrupt, truncate, q85
    step = imagenet_input if dataset == "imagenet" else tiny_imagenet_input
    for n in names:
        x = step(Image.open(_source_file(root, dataset, n)).convert("RGB"))[None].copy()
        buf = io.BytesIO()
        Image.fromarray(corrupt(x, "contrast", 3, constants=dataset)[0]).save(buf, format="JPEG", **folders.SAVE_ARGS)
        assert (out / "contrast" / "3" / n).read_bytes() == buf.getvalue()

    # a re-run skips every finished condition and touches no file; the inputs were never changed
    stamps = {k: p.stat().st_mtime_ns for k, p in files.items()}
    code, stdout, err = run_main(args, tmp_path)
    assert code == 0, err
    assert sorted(json.loads(stdout)["skipped"]) == sorted(f"{c}/{s}" for c in CORRUPTIONS for s in SEVERITIES)
    assert {k: p.stat().st_mtime_ns for k, p in _images_under(out).items()} == stamps
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_interrupted_run_resumes_after_its_last_finished_chunk(tmp_path, monkeypatch):
    from corruptions.imagenet import list_imagenet_val

    root = tmp_path / "data"
    _make_imagenet(root)
    images = list_imagenet_val(root)
    whole = folders.regenerate_folders(images, tmp_path / "whole", ["contrast"], [2], constants="imagenet",
                                       chunk_size=2, device="cpu")
    commit, calls = folders._commit_chunk, []

    def dies_on_second_chunk(run, start, *a, **k):
        calls.append(start)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return commit(run, start, *a, **k)

    monkeypatch.setattr(folders, "_commit_chunk", dies_on_second_chunk)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        folders.regenerate_folders(images, out, ["contrast"], [2], constants="imagenet", chunk_size=2, device="cpu")
    assert not (out / "manifest.json").exists()  # nothing vouches for an unfinished run
    first = {n: (out / "contrast" / "2" / n).stat().st_mtime_ns for n in images.out_names[:2]}
    monkeypatch.setattr(folders, "_commit_chunk", commit)
    again = folders.regenerate_folders(images, out, ["contrast"], [2], constants="imagenet", chunk_size=2,
                                       device="cpu")
    assert again.conditions == whole.conditions  # same SHA256SUMS as the uninterrupted run
    assert {n: (out / "contrast" / "2" / n).stat().st_mtime_ns for n in first} == first  # finished chunk kept


@pytest.mark.parametrize("case", ["no-data-root", "missing-root", "empty-root", "preview", "cifar-constants"])
def test_bad_val_inputs_are_one_error_line(case, run_main, tmp_path):
    (tmp_path / "empty").mkdir()
    _make_imagenet(tmp_path / "data")
    root = {"no-data-root": None, "missing-root": tmp_path / "nope", "empty-root": tmp_path / "empty"}.get(
        case, tmp_path / "data")
    extra = {"preview": ["--preview", str(tmp_path / "p.png")], "cifar-constants": ["--constants", "cifar"]}
    args = ["corrupt", "--input", "imagenet", "--out", str(tmp_path / "out"), "--corruption", "contrast"]
    args += ([] if root is None else ["--data-root", str(root)]) + extra.get(case, [])
    code, _, err = run_main(args, tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "p.png").exists()


# ---------------------------------------------------------------------------------------------- evaluate


class _Oracle(torch.nn.Module):
    """Knows the label of every image it may see (by its pixels) and records each one it is shown."""

    def __init__(self, labels: dict[bytes, int], n_classes: int):
        super().__init__()
        self.labels, self.n_classes, self.unknown = labels, n_classes, 0
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        out = torch.zeros(len(x), self.n_classes)
        for i, img in enumerate(x.float()):
            key = hashlib.sha256(np.round(img.numpy() * 255).astype(np.uint8).tobytes()).digest()
            if key in self.labels:
                out[i, self.labels[key]] = 1.0
            else:
                self.unknown += 1
        return out + 0 * self.dummy


def _pixels_key(path_or_array) -> bytes:
    a = path_or_array if isinstance(path_or_array, np.ndarray) else np.asarray(Image.open(path_or_array).convert("RGB"))
    return hashlib.sha256(np.ascontiguousarray(a.transpose(2, 0, 1)).tobytes()).digest()


@pytest.fixture(scope="module", params=["imagenet", "tiny-imagenet"])
def regenerated(request, tmp_path_factory):
    dataset = request.param
    base = tmp_path_factory.mktemp(dataset)
    names = MAKERS[dataset](base / "data")
    folders.regenerate_val_folders(dataset, base / "data", base / "regen", list(CORRUPTIONS), list(SEVERITIES),
                                   device="cpu")
    official = base / "official"  # the published sets carry no manifest and no SHA256SUMS
    shutil.copytree(base / "regen", official,
                    ignore=lambda d, entries: [e for e in entries if e in ("manifest.json", folders.SUMS_NAME)])
    # the published Tiny-ImageNet-C holds other crops than Tiny-ImageNet's val (hendrycks/robustness#39): other names
    shutil.copytree(official, base / "other")
    for k, p in enumerate(sorted((base / "other").rglob("*.JPEG"))):
        p.rename(p.with_name(f"ILSVRC2012_val_{90000 + k:08d}.JPEG"))
    return dataset, base, names


@pytest.mark.parametrize("kind", ["regen", "official", "other"])
def test_evaluate_reads_every_file_once_with_its_label(regenerated, kind, monkeypatch):
    from robustbench_dgsa.data import load_dataset
    from robustbench_dgsa.engine.benchmark import benchmark

    dataset, base, names = regenerated
    cdir = base / kind
    clean = load_dataset(dataset, "test", data_root=base / "data")
    classes = sorted(set(names.values()))
    assert clean.classes == classes and list(clean.names) == sorted(names, key=lambda n: (names[n], n))
    labels = {_pixels_key(x): int(y) for x, y in zip(clean.x, clean.y)}
    for p in _images_under(cdir).values():
        labels[_pixels_key(p)] = classes.index(p.parent.name)  # the wnid folder is the class
    reads: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: (reads.append(self), real(self))[1])
    model = _Oracle(labels, len(classes))
    rows = benchmark(model, dataset, data_root=base / "data", corruption=list(CORRUPTIONS), severity=list(SEVERITIES),
                     corruption_dir=cdir, device="cpu")
    table = rows.attrs["table"]
    assert len(table) == 1 + len(CORRUPTIONS) * len(SEVERITIES)
    assert model.unknown == 0  # every image it saw is a clean image or a file of the tree
    assert (table["accuracy"] == 1.0).all() and (table["n"] == len(names)).all()  # every label right
    assert set(table.loc[table.condition != "clean", "source"]) == {"regenerated" if kind == "regen" else "official"}
    assert rows.attrs["dataset_family"] == dataset
    image_reads = [p for p in reads if str(p).startswith(str(cdir)) and p.name not in (folders.SUMS_NAME,
                                                                                          "manifest.json")]
    assert sorted(p.relative_to(cdir).as_posix() for p in image_reads) == sorted(_images_under(cdir))  # once each


def test_evaluate_refuses_a_tampered_or_incomplete_folder(regenerated, tmp_path):
    from corruptions.errors import CorruptionError
    from robustbench_dgsa.engine.benchmark import benchmark
    from robustbench_dgsa.util.errors import DataError

    dataset, base, names = regenerated
    n_classes = len(set(names.values()))
    model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, n_classes))
    kw = dict(data_root=base / "data", corruption=["contrast"], severity=[1], device="cpu")
    for kind, damage, match in (("regen", "tamper", "differ"), ("official", "delete", "missing")):
        cdir = tmp_path / f"{kind}-{damage}"
        shutil.copytree(base / kind, cdir)
        victim = cdir / "contrast" / "1" / sorted(names)[0]
        if damage == "tamper":
            victim.write_bytes(victim.read_bytes() + b"\0")
        else:
            victim.unlink()
        with pytest.raises((DataError, CorruptionError), match=match):
            benchmark(model, dataset, corruption_dir=cdir, **kw)
