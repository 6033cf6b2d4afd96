"""``dgsa-bench corrupt`` and ``dgsa-bench corrupt-text`` through the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from corruptions import api, layout
from corruptions.errors import CorruptionError
from robustbench_dgsa.cli import app
from robustbench_dgsa.util.errors import UserError

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def arrays(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    y = np.arange(10) % 4
    np.save(d / "x.npy", x)
    np.savez(d / "xy.npz", x=x, y=y)
    np.save(d / "gray.npy", x[..., 1])
    np.save(d / "float.npy", x.astype(np.float32) / 255)
    np.savez(d / "noxy.npz", images=x)
    (d / "broken.npy").write_bytes(b"\x93NUMPY garbage")
    return d


def _run(*args: str):
    return runner.invoke(app, list(args))


def test_corrupt_npz_json_and_roundtrip(tmp_path, arrays):
    out = tmp_path / "out"
    res = _run("corrupt", "--input", str(arrays / "xy.npz"), "--out", str(out), "--corruption", "contrast,gaussian_noise",
               "-s", "1,3", "--seed", "2", "--chunk-size", "4", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["n"] == 10 and summary["labels"] is True and summary["severities"] == [1, 3]
    assert set(summary["corruptions"]) == {"contrast", "gaussian_noise"}
    assert summary["description"] == "CIFAR-C-style (regenerated)"  # not called CIFAR-10 for an npz input
    man = layout.read_manifest(out)
    assert summary["files"] == {k: v["sha256"] for k, v in man.files.items()}
    x = np.load(arrays / "xy.npz")["x"]
    xs, ys = layout.load_corrupted(out, "gaussian_noise", 3)
    assert np.array_equal(xs, api.corrupt(x, "gaussian_noise", 3, seed=2))
    assert np.array_equal(ys, np.arange(10) % 4)


def test_corrupt_npy_limit_grayscale_preview_and_verify(tmp_path, arrays):
    out, png, ref = tmp_path / "out", tmp_path / "grid.png", tmp_path / "ref"
    gray = np.load(arrays / "gray.npy")[:6]
    layout.regenerate(np.repeat(gray[..., None], 3, -1), None, ref, "contrast", "1-5")
    res = _run("corrupt", "-i", str(arrays / "gray.npy"), "-o", str(out), "--corruption", "contrast", "-s", "2",
               "--limit", "6", "--preview", str(png), "--preview-images", "2", "--verify-against", str(ref))
    assert res.exit_code == 0, res.output
    assert "replicated to 3 channels" in res.output
    assert png.is_file() and not (out / "labels.npy").exists()
    x, y = layout.load_corrupted(out, "contrast", 2)
    assert x.shape == (6, 32, 32, 3) and y is None
    assert "PSNR" in res.output and "bytewise" in res.output  # the verify table
    assert np.array_equal(x, api.corrupt(np.repeat(gray[..., None], 3, -1), "contrast", 2))
    # verify-only mode: no --input
    res = _run("corrupt", "--out", str(out), "--verify-against", str(out), "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["verify"]
    assert rows[0]["identical_fraction"] == 1.0 and rows[0]["psnr_db"] == "inf"


def test_corrupt_preview_only(tmp_path, arrays):
    png = tmp_path / "p.png"
    res = _run("corrupt", "-i", str(arrays / "x.npy"), "--corruption", "gaussian_noise", "-s", "1-5", "--preview", str(png))
    assert res.exit_code == 0, res.output
    assert png.is_file() and [p.name for p in tmp_path.iterdir()] == ["p.png"]


def test_corrupt_image_folder_with_classes(tmp_path):
    from PIL import Image
    root = tmp_path / "imgs" / "test"
    rng = np.random.default_rng(0)
    for cls in ("cat", "dog"):
        (root / cls).mkdir(parents=True)
        for i in (1, 2, 10):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(root / cls / f"{i}.png")
    Image.fromarray(rng.integers(0, 256, (32, 32), dtype=np.uint8), mode="L").save(root / "dog" / "11.png")
    out = tmp_path / "out"
    res = _run("corrupt", "-i", str(tmp_path / "imgs"), "-o", str(out), "--corruption", "contrast", "-s", "1", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["n"] == 7 and summary["labels"] is True and "2 classes" in summary["input"]
    assert any("grayscale" in n for n in summary["notes"])
    _, y = layout.load_corrupted(out, "contrast", 1)
    assert list(y) == [0, 0, 0, 1, 1, 1, 1]


def test_corrupt_dataset_name(tmp_path):
    out = tmp_path / "out"
    res = _run("corrupt", "-i", "synthetic-vision", "--split", "test", "--limit", "6", "-o", str(out),
               "--corruption", "contrast", "-s", "1", "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["n"] == 6 and s["labels"] is True and "synthetic-vision" in s["input"]
    from robustbench_dgsa.data import load_dataset
    ds = load_dataset("synthetic-vision", "test")
    x, y = layout.load_corrupted(out, "contrast", 1)
    assert np.array_equal(y, ds.y[:6]) and np.array_equal(x, api.corrupt(ds.x[:6], "contrast", 1))
    res = _run("corrupt", "-i", "synthetic-text", "-o", str(tmp_path / "o2"), "--corruption", "contrast")
    assert isinstance(res.exception, CorruptionError) and "corrupt-text" in str(res.exception)


@pytest.mark.parametrize("args, exc, match", [
    (["--corruption", "gaussian_nosie"], CorruptionError, "valid"),
    (["-s", "6"], CorruptionError, "6"),
    (["-s", "0"], CorruptionError, "0"),
    (["--input-file", "float.npy"], UserError, "uint8"),  # the reader's DataError (a UserError)
    (["--input-file", "noxy.npz"], UserError, "'x'"),
    (["--input-file", "broken.npy"], UserError, "cannot read"),
    (["--input-file", "missing.npy"], UserError, "no such file"),
])
def test_corrupt_bad_inputs(tmp_path, arrays, args, exc, match):
    if args[0] == "--input-file":
        inp, extra = str(arrays / args[1]), []
    else:
        inp, extra = str(arrays / "x.npy"), args
    out = tmp_path / "out"
    res = _run("corrupt", "-i", inp, "-o", str(out), *extra)
    assert res.exit_code != 0
    assert isinstance(res.exception, exc), repr(res.exception)
    assert match in str(res.exception)
    assert not out.exists()


def test_corrupt_needs_out_or_preview(arrays):
    res = _run("corrupt", "-i", str(arrays / "x.npy"))
    assert isinstance(res.exception, UserError) and "--out" in str(res.exception)


def test_main_turns_errors_into_one_line_and_exit_2(tmp_path, arrays):
    """The real entry point (one subprocess: ~3 s of imports): existing output of a different run without
    --overwrite -> exit 2, one 'error:' message, no traceback, nothing touched. (CliRunner tests cover the
    other errors in-process; the same run again is skipped, see test_corrupt_rerun_is_skipped.)"""
    out = tmp_path / "out"
    layout.regenerate(np.load(arrays / "x.npy"), None, out, "contrast", "1")
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    code = "import sys; from robustbench_dgsa.cli import main; sys.argv[0] = 'dgsa-bench'; main()"
    for extra, needle in ((["--corruption", "contrast", "-s", "1", "--seed", "3"], "--overwrite"),):
        proc = subprocess.run([sys.executable, "-c", code, "corrupt", "-i", str(arrays / "x.npy"), "-o", str(out),
                               *extra], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert proc.returncode == 2, proc.stderr
        err = proc.stderr[proc.stderr.index("error:"):] if "error:" in proc.stderr else ""
        message = " ".join(ln.strip() for ln in err.splitlines() if ln.strip())  # Rich may wrap at 80 columns
        assert message.count("error:") == 1 and needle in message, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_corrupt_rerun_is_skipped(tmp_path, arrays):
    out = tmp_path / "out"
    args = ("corrupt", "-i", str(arrays / "x.npy"), "-o", str(out), "--corruption", "contrast", "-s", "1")
    assert _run(*args).exit_code == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    res = _run(*args)
    assert res.exit_code == 0, res.output
    assert "skipped" in res.output and "contrast" in res.output
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_corrupt_overwrite(tmp_path, arrays):
    out = tmp_path / "out"
    assert _run("corrupt", "-i", str(arrays / "x.npy"), "-o", str(out), "--corruption", "contrast", "-s", "1").exit_code == 0
    res = _run("corrupt", "-i", str(arrays / "x.npy"), "-o", str(out), "--corruption", "contrast", "-s", "1", "--seed", "3")
    assert isinstance(res.exception, UserError) and "pass --overwrite" in str(res.exception)
    res = _run("corrupt", "-i", str(arrays / "x.npy"), "-o", str(out), "--corruption", "contrast", "-s", "1", "--seed", "3",
               "--overwrite")
    assert res.exit_code == 0, res.output
    assert layout.read_manifest(out).seed == 3


# ---------------------------------------------------------------------------------------------- text


def test_corrupt_text_txt_and_csv(tmp_path):
    from corruptions import text as tn
    lines = ["the movie was great and the actors were fine", "terrible plot , awful pacing", "",
             "a quiet , lovely little film about memory"]
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    res = _run("corrupt-text", "-i", str(tmp_path / "a.txt"), "-o", str(out), "--noise", "keyboard,word_swap",
               "-s", "1,5", "--seed", "1", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["n"] == 3  # the blank line is not an example
    assert [(c["noise"], c["severity"]) for c in summary["conditions"]] == [
        ("keyboard", 1), ("keyboard", 5), ("word_swap", 1), ("word_swap", 5)]
    man = json.loads((out / "manifest.json").read_text())
    assert man["text_noise_version"] == tn.TEXT_NOISE_VERSION and man["seed"] == 1
    assert set(man["table"]) == {"keyboard", "word_swap"}
    texts = [ln for ln in lines if ln]
    rows = [json.loads(r) for r in (out / "keyboard_s5.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == tn.add_text_noise(texts, "keyboard", 5, seed=1)
    assert all(r["label"] is None for r in rows)
    assert man["files"]["keyboard_s5.jsonl"]["cer"] > man["files"]["keyboard_s1.jsonl"]["cer"] or \
        man["files"]["keyboard_s1.jsonl"]["cer"] == 0

    csv_path = tmp_path / "b.csv"
    csv_path.write_text('review,sentiment\n"good, fun film",1\nbad film,0\n', encoding="utf-8")
    res = _run("corrupt-text", "-i", str(csv_path), "-o", str(tmp_path / "o2"), "--text-column", "review",
               "--label-column", "sentiment", "--noise", "word_dropout", "-s", "2")
    assert res.exit_code == 0, res.output
    assert "word_dropout" in res.output and "CER" in res.output
    rows = [json.loads(r) for r in (tmp_path / "o2" / "word_dropout_s2.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows] == [1, 0] and [r["index"] for r in rows] == [0, 1]

    res = _run("corrupt-text", "-i", str(csv_path), "-o", str(tmp_path / "o3"), "--noise", "word_dropout")
    assert isinstance(res.exception, CorruptionError) and "review" in str(res.exception)  # lists the columns
    res = _run("corrupt-text", "-i", str(csv_path), "-o", str(tmp_path / "o3"), "--text-column", "review",
               "--noise", "typo")
    assert isinstance(res.exception, CorruptionError) and "keyboard" in str(res.exception)
    res = _run("corrupt-text", "-i", str(csv_path), "-o", str(tmp_path / "o2"), "--text-column", "review",
               "--noise", "word_dropout", "-s", "2")
    assert isinstance(res.exception, UserError) and "pass --overwrite" in str(res.exception)
    assert not (tmp_path / "o3").exists()


def test_corrupt_text_dataset_name(tmp_path):
    res = _run("corrupt-text", "-i", "synthetic-text", "--limit", "20", "-o", str(tmp_path / "o"),
               "--noise", "word_dropout,ocr", "-s", "1-5", "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["n"] == 20 and len(s["conditions"]) == 10
    rows = [json.loads(r) for r in (tmp_path / "o" / "clean.jsonl").read_text().splitlines()]
    from robustbench_dgsa.data import load_dataset
    ds = load_dataset("synthetic-text", "test")
    assert [r["text"] for r in rows] == ds.texts[:20] and [r["label"] for r in rows] == ds.y[:20].tolist()
    wer = [c["wer"] for c in s["conditions"] if c["noise"] == "word_dropout"]
    assert wer == sorted(wer) and wer[-1] > 0


def test_corrupt_text_jsonl(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps({"text": f"example number {i} with some words", "label": i % 2})
                           for i in range(8)) + "\n", encoding="utf-8")
    res = _run("corrupt-text", "-i", str(p), "-o", str(tmp_path / "o"), "--noise", "char", "-s", "3",
               "--limit", "5", "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["n"] == 5 and len(s["conditions"]) == 6
    assert all(0 < c["cer"] < 1 for c in s["conditions"])


def test_regenerated_sets_are_named_after_their_dataset():
    from robustbench_dgsa.engine.evaluate import dataset_family
    from robustbench_dgsa.jobs.corrupt import regenerated_phrase as _regenerated_phrase
    assert _regenerated_phrase("cifar100") == "CIFAR-100-C-style (regenerated)"
    assert _regenerated_phrase("cifar10") == "CIFAR-10-C-style (regenerated)"
    assert _regenerated_phrase(None) == "CIFAR-C-style (regenerated)"
    assert dataset_family("cifar100", None) == "cifar100" and dataset_family("npz:/x.npz", None) is None
    assert dataset_family("npz:/x.npz", "/data/CIFAR-100-C") == "cifar100"
