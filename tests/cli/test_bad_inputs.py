"""Bad input across every command: one clear line, the right exit code, no traceback, nothing left behind.

Each case runs the real entry point (``robustbench_dgsa.cli.main``, the error boundary included) in-process, in
a fresh working folder, against shared fixtures (a trained tiny checkpoint, a results store, input files). It
asserts:

* the exit code: 2 for usage errors (a bad option value, name, path or file given by the user), 1 for failures
  found while running (e.g. a data file that no longer matches its manifest); 130 is never expected here;
* exactly one non-empty line on stderr, starting with ``error:``, and no ``Traceback``;
* no new or changed files: the case's working folder and every shared fixture folder are as they were.

``USAGE`` / ``RUN`` below name the expected exit code. A case is a row: id, expected code, arguments (with
``{placeholders}`` for fixture paths).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Every case under the suite's address-space bound (tests/conftest.py): an unbounded allocation fails the case.
pytestmark = pytest.mark.usefixtures("memory_bound")

USAGE, RUN = 2, 1
TINY_SET = ["--set", "model.dim=16", "--set", "model.depth=1", "--set", "model.heads=2",
            "--set", "model.head_hidden=16", "--set", "data.max_train=64", "--set", "data.max_test=32"]


# --------------------------------------------------------------------------------------------- fixtures

def _write_inputs(d: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    p: dict[str, Path] = {}
    p["npy"] = d / "images.npy"
    np.save(p["npy"], rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    p["float_npy"] = d / "floats.npy"
    np.save(p["float_npy"], rng.random((4, 32, 32, 3)).astype(np.float32) * 1000)
    p["flat_npy"] = d / "flat.npy"
    np.save(p["flat_npy"], rng.integers(0, 256, (4, 32), dtype=np.uint8))
    p["junk_npy"] = d / "junk.npy"
    p["junk_npy"].write_bytes(b"not a numpy file at all\x00\x01")
    p["npz_no_x"] = d / "nox.npz"
    np.savez(p["npz_no_x"], images=rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8))
    p["png"] = d / "photo.png"
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(p["png"])
    p["fake_png"] = d / "fake.png"
    p["fake_png"].write_text("this is text, not a PNG\n")
    p["bomb"] = d / "bomb.png"  # 14000 x 14000 = 196 M pixels: over Pillow's decompression-bomb error limit
    Image.new("1", (14000, 14000)).save(p["bomb"], optimize=False)
    p["bomb_dir"] = d / "bomb_folder" / "cat"  # an image folder (class "cat") holding the bomb
    p["bomb_dir"].mkdir(parents=True)
    shutil.copy(p["bomb"], p["bomb_dir"] / "bomb.png")
    p["bomb_dir"] = p["bomb_dir"].parent
    p["tsv"] = d / "reviews.tsv"
    p["tsv"].write_text("text\tlabel\na fine film\t1\na dull film\t0\n", encoding="utf-8")
    p["bad_quote_tsv"] = d / "quote.tsv"
    p["bad_quote_tsv"].write_text('text\tlabel\n"a fine film\t1\na dull film\t0\nmore\t1\n', encoding="utf-8")
    p["latin1_txt"] = d / "latin1.tsv"
    p["latin1_txt"].write_bytes("text\tlabel\ncaf\xe9 cr\xe8me\t1\n".encode("latin-1"))
    p["a_file"] = d / "a_file.txt"
    p["a_file"].write_text("I am a file\n")
    p["a_dir"] = d / "a_dir"
    p["a_dir"].mkdir()
    (p["a_dir"] / "keep.txt").write_text("x\n")
    p["cfg_list"] = d / "list.json"
    p["cfg_list"].write_text("[1, 2, 3]\n")
    p["cfg_null"] = d / "null_batch.json"
    p["cfg_null"].write_text(json.dumps({"train": {"batch_size": None}}))
    p["cfg_type"] = d / "wrong_type.toml"
    p["cfg_type"].write_text('[train]\nepochs = "ten"\n')
    p["cfg_unknown"] = d / "unknown.toml"
    p["cfg_unknown"].write_text("[train]\nepochz = 3\n")
    p["cfg_section"] = d / "section.toml"
    p["cfg_section"].write_text("[trainer]\nepochs = 3\n")
    p["cfg_bytes"] = d / "bytes.toml"
    p["cfg_bytes"].write_bytes(b"[train]\nepochs = 3 # \xff\xfe\n")
    p["cfg_syntax"] = d / "syntax.toml"
    p["cfg_syntax"].write_text("[train\nepochs = 3\n")
    p["junk_ckpt"] = d / "junk.safetensors"
    p["junk_ckpt"].write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json")
    p["empty_tsv"] = d / "empty.tsv"
    p["empty_tsv"].write_text("", encoding="utf-8")
    p["no_label_tsv"] = d / "nolabel.tsv"
    p["no_label_tsv"].write_text("text\tscore\na fine film\t1\n", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict[str, Path]:
    """Inputs, a trained tiny ViT (synthetic-vision) and a results store with its rows; plus damaged copies."""
    d = tmp_path_factory.mktemp("bad_inputs")
    paths = _write_inputs(d)
    from robustbench_dgsa.cli import app
    from typer.testing import CliRunner
    res = CliRunner().invoke(app, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "tiny",
                                   "--epochs", "1", "--device", "cpu", *TINY_SET, "--out", str(d / "run"),
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    ckpts = sorted((d / "run").rglob("checkpoint.safetensors"))
    assert ckpts, "training wrote no checkpoint"
    paths["ckpt"] = ckpts[0]
    stores = sorted(p.parent for p in (d / "run").rglob("rows") if p.is_dir())
    paths["store"] = stores[0]
    res = CliRunner().invoke(app, ["evaluate", "--checkpoint", str(paths["ckpt"]), "--corruption", "contrast",
                                   "--severity", "1", "--device", "cpu", "--store", str(paths["store"]), "--quiet"])
    assert res.exit_code == 0, res.output
    for name, junk in (("junk_store", b'{"run_id": "x", "value": \n'), ("latin1_store", b"\xff\xfe\xfa garbage\n")):
        copy = d / name
        shutil.copytree(paths["store"], copy)
        rows = sorted((copy / "rows").rglob("*.jsonl"))
        target = rows[0] if rows else copy / "rows" / "x.jsonl"
        target.write_bytes(target.read_bytes() + junk)
        paths[name] = copy
    sweep = d / "sweep"
    sweep.mkdir()
    (sweep / "jobs.jsonl").write_text('{"id": "a", "model": \n')
    (sweep / "sweep.json").write_text("{}")
    paths["garbage_jobs"] = sweep
    sweep2 = d / "sweep2"
    sweep2.mkdir()
    (sweep2 / "jobs.jsonl").write_text("")
    (sweep2 / "sweep.json").write_text("not json {")
    paths["garbage_sweep_json"] = sweep2
    res = CliRunner().invoke(app, ["sweep", "plan", str(d / "sweep_ok"), "--model", "vit", "--dataset",
                                   "synthetic-vision", "--preset", "tiny", "--device", "cpu", *TINY_SET])
    assert res.exit_code == 0, res.output
    paths["sweep_ok"] = d / "sweep_ok"
    ro = d / "read_only"
    ro.mkdir()
    ro.chmod(0o555)
    paths["read_only"] = ro
    return paths


# --------------------------------------------------------------------------------------------- cases

CASES: list[tuple[str, int, list[str]]] = [
    # models
    ("models-unknown-model", USAGE, ["models", "--model", "nope"]),
    ("models-image-size-0", USAGE, ["models", "--image-size", "0"]),
    ("models-patch-not-dividing", USAGE, ["models", "--image-size", "32", "--patch-size", "5"]),
    ("models-set-bad-type", USAGE, ["models", "--set", "model.dim=abc"]),
    ("models-set-unknown-key", USAGE, ["models", "--set", "model.dimm=16"]),
    # corrupt
    ("corrupt-missing-input", USAGE, ["corrupt", "--input", "nope.npy", "--out", "o"]),
    ("corrupt-unknown-corruption", USAGE, ["corrupt", "--input", "{npy}", "--corruption", "fogg", "--out", "o"]),
    ("corrupt-severity-7", USAGE, ["corrupt", "--input", "{npy}", "--severity", "7", "--out", "o"]),
    ("corrupt-severity-0-3", USAGE, ["corrupt", "--input", "{npy}", "--severity", "0-3", "--out", "o"]),
    ("corrupt-severity-text", USAGE, ["corrupt", "--input", "{npy}", "--severity", "high", "--out", "o"]),
    ("corrupt-float-array", USAGE, ["corrupt", "--input", "{float_npy}", "--out", "o"]),
    ("corrupt-flat-array", USAGE, ["corrupt", "--input", "{flat_npy}", "--out", "o"]),
    ("corrupt-junk-npy", USAGE, ["corrupt", "--input", "{junk_npy}", "--out", "o"]),
    ("corrupt-npz-without-x", USAGE, ["corrupt", "--input", "{npz_no_x}", "--out", "o"]),
    ("corrupt-out-is-file", USAGE, ["corrupt", "--input", "{npy}", "--corruption", "contrast", "--severity", "1",
                                    "--out", "{a_file}"]),
    ("corrupt-preview-is-dir", USAGE, ["corrupt", "--input", "{npy}", "--corruption", "contrast", "--severity", "1",
                                       "--out", "o", "--preview", "{a_dir}"]),
    ("corrupt-bad-device", USAGE, ["corrupt", "--input", "{npy}", "--device", "tpu", "--out", "o"]),
    ("corrupt-max-examples-0", USAGE, ["corrupt", "--input", "{npy}", "--max-examples", "0", "--out", "o"]),
    ("corrupt-unknown-dataset", USAGE, ["corrupt", "--input", "cifar11", "--out", "o"]),
    ("corrupt-preview-not-png", USAGE, ["corrupt", "--input", "{npy}", "--corruption", "contrast", "--severity", "1",
                                        "--out", "o", "--preview", "p.txt"]),
    ("corrupt-bomb-image-folder", USAGE, ["corrupt", "--input", "{bomb_dir}", "--corruption", "contrast",
                                          "--severity", "1", "--out", "o"]),
    # corrupt-text
    ("corrupt-text-missing-file", USAGE, ["corrupt-text", "--input", "nope.tsv", "--out", "o"]),
    ("corrupt-text-bogus-encoding", USAGE, ["corrupt-text", "--input", "{tsv}", "--encoding", "bogus", "--out", "o"]),
    ("corrupt-text-not-utf8", USAGE, ["corrupt-text", "--input", "{latin1_txt}", "--out", "o"]),
    ("corrupt-text-unknown-noise", USAGE, ["corrupt-text", "--input", "{tsv}", "--text-noise", "typoo", "--out", "o"]),
    ("corrupt-text-severity-9", USAGE, ["corrupt-text", "--input", "{tsv}", "--severity", "9", "--out", "o"]),
    ("corrupt-text-unterminated-quote", USAGE, ["corrupt-text", "--input", "{bad_quote_tsv}", "--out", "o"]),
    ("corrupt-text-unknown-column", USAGE, ["corrupt-text", "--input", "{tsv}", "--text-column", "review", "--out", "o"]),
    ("corrupt-text-out-is-file", USAGE, ["corrupt-text", "--input", "{tsv}", "--out", "{a_file}"]),
    ("corrupt-text-empty-file", USAGE, ["corrupt-text", "--input", "{empty_tsv}", "--out", "o"]),
    ("corrupt-text-bad-seed", USAGE, ["corrupt-text", "--input", "{tsv}", "--seed", "x", "--out", "o"]),
    # train
    ("train-unknown-model", USAGE, ["train", "--model", "nope", "--dataset", "synthetic-vision", "--out", "o"]),
    ("train-unknown-dataset", USAGE, ["train", "--model", "vit", "--dataset", "nope", "--out", "o"]),
    ("train-modality-mismatch", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-text", "--out", "o"]),
    ("train-epochs-0", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--epochs", "0", "--out", "o"]),
    ("train-epochs-negative", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--epochs", "-1", "--out", "o"]),
    ("train-batch-size-0", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--batch-size", "0", "--out", "o"]),
    ("train-batch-size-negative", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--batch-size", "-5", "--out", "o"]),
    ("train-lr-negative", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--lr", "-1", "--out", "o"]),
    ("train-set-epochs-float", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.epochs=1.5", "--out", "o"]),
    ("train-set-epochs-2.5", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.epochs=2.5", "--out", "o"]),
    ("train-set-lr-list", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.lr=[1,2]", "--out", "o"]),
    ("train-set-unknown-section", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "trainer.lr=1", "--out", "o"]),
    ("train-set-unknown-key", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.lrr=1", "--out", "o"]),
    ("train-set-no-equals", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.lr", "--out", "o"]),
    ("train-config-top-level-list", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_list}", "--out", "o"]),
    ("train-config-null-batch", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_null}", "--out", "o"]),
    ("train-config-wrong-type", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_type}", "--out", "o"]),
    ("train-config-unknown-key", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_unknown}", "--out", "o"]),
    ("train-config-unknown-section", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_section}", "--out", "o"]),
    ("train-config-non-utf8", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_bytes}", "--out", "o"]),
    ("train-config-syntax", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "{cfg_syntax}", "--out", "o"]),
    ("train-config-missing", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--config", "nope.toml", "--out", "o"]),
    ("train-unknown-preset", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--preset", "huge", "--out", "o"]),
    ("train-bad-seed", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--seed", "0-x", "--out", "o"]),
    ("train-bad-device", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--device", "cuda:x", "--out", "o"]),
    ("train-out-is-file", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--epochs", "1", *TINY_SET, "--out", "{a_file}"]),
    ("train-store-is-file", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--epochs", "1", *TINY_SET, "--out", "o",
                                    "--store", "{a_file}"]),
    ("train-missing-real-data", USAGE, ["train", "--model", "vit", "--dataset", "cifar10", "--data-root", "nodata",
                                        "--out", "o"]),
    ("train-tsv-unterminated-quote", USAGE, ["train", "--model", "transformer", "--dataset", "tsv:{bad_quote_tsv}",
                                             "--epochs", "1", *TINY_SET, "--out", "o"]),
    ("train-tsv-not-utf8", USAGE, ["train", "--model", "transformer", "--dataset", "tsv:{latin1_txt}", "--epochs",
                                   "1", *TINY_SET, "--out", "o"]),
    ("train-folder-missing", USAGE, ["train", "--model", "vit", "--dataset", "folder:nope", "--out", "o"]),
    ("train-set-lr-zero", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.lr=0", "--out", "o"]),
    ("train-set-batch-null", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--set", "train.batch_size=null", "--out", "o"]),
    ("train-seed-range-reversed", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--seed", "4-0", "--out", "o"]),
    ("train-out-read-only", USAGE, ["train", "--model", "vit", "--dataset", "synthetic-vision", "--epochs", "1", *TINY_SET,
                                    "--out", "{read_only}/o"]),
    # evaluate
    ("evaluate-missing-checkpoint", USAGE, ["evaluate", "--checkpoint", "nope.safetensors"]),
    ("evaluate-junk-checkpoint", USAGE, ["evaluate", "--checkpoint", "{junk_ckpt}"]),
    ("evaluate-unknown-corruption", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption", "fogg",
                                            "--store", "s"]),
    ("evaluate-severity-6", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--severity", "6", "--store", "s"]),
    ("evaluate-missing-corruption-dir", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption-dir", "nope",
                                                "--store", "s"]),
    ("evaluate-store-is-file", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption", "contrast",
                                       "--severity", "1", "--store", "{a_file}"]),
    ("evaluate-batch-size-0", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--batch-size", "0", "--store", "s"]),
    ("evaluate-modality-mismatch", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--dataset", "synthetic-text",
                                           "--store", "s"]),
    ("evaluate-max-examples-0", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--max-examples", "0", "--store", "s"]),
    ("evaluate-junk-store", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption", "contrast",
                                    "--severity", "1", "--store", "{junk_store}"]),
    ("evaluate-unknown-dataset", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--dataset", "nope", "--store", "s"]),
    ("evaluate-unknown-text-noise", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--text-noise", "typoo", "--store", "s"]),
    ("evaluate-bad-device", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--device", "gpu", "--store", "s"]),
    ("evaluate-corruption-dir-is-file", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption-dir", "{a_file}",
                                                "--store", "s"]),
    ("evaluate-non-utf8-store", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption", "contrast",
                                        "--severity", "1", "--store", "{latin1_store}"]),
    ("evaluate-store-read-only", USAGE, ["evaluate", "--checkpoint", "{ckpt}", "--corruption", "contrast",
                                         "--severity", "1", "--store", "{read_only}/s"]),
    # rollout
    ("rollout-missing-image", USAGE, ["rollout", "nope.png", "--checkpoint", "{ckpt}", "--out", "r.png"]),
    ("rollout-missing-checkpoint", USAGE, ["rollout", "{png}", "--checkpoint", "nope.safetensors", "--out", "r.png"]),
    ("rollout-not-an-image", USAGE, ["rollout", "{fake_png}", "--checkpoint", "{ckpt}", "--out", "r.png"]),
    ("rollout-unknown-mode", USAGE, ["rollout", "{png}", "--checkpoint", "{ckpt}", "--mode", "weird",
                                     "--out", "r.png"]),
    ("rollout-discard-ratio-1.5", USAGE, ["rollout", "{png}", "--checkpoint", "{ckpt}", "--discard-ratio", "1.5",
                                          "--out", "r.png"]),
    ("rollout-out-is-dir", USAGE, ["rollout", "{png}", "--checkpoint", "{ckpt}", "--out", "{a_dir}"]),
    ("rollout-decompression-bomb", USAGE, ["rollout", "{bomb}", "--checkpoint", "{ckpt}", "--out", "r.png"]),
    ("rollout-unknown-model", USAGE, ["rollout", "{png}", "--model", "nope", "--out", "r.png"]),
    ("rollout-severity-9", USAGE, ["rollout", "{png}", "--checkpoint", "{ckpt}", "--metrics", "--store", "s",
                                   "--severity", "9"]),
    ("rollout-text-with-image-model", USAGE, ["rollout", "--text", "a fine film", "--checkpoint", "{ckpt}",
                                              "--out", "r.png"]),
    ("rollout-empty-text", USAGE, ["rollout", "--text", " ", "--checkpoint", "{ckpt}", "--out", "r.png"]),
    ("rollout-image-and-text", USAGE, ["rollout", "{png}", "--text", "hi", "--checkpoint", "{ckpt}", "--out", "r.png"]),
    ("rollout-no-input", USAGE, ["rollout", "--checkpoint", "{ckpt}", "--out", "r.png"]),
    ("rollout-out-not-png", USAGE, ["rollout", "{png}", "--checkpoint", "{ckpt}", "--out", "r.txt"]),
    ("rollout-metrics-store-is-file", USAGE, ["rollout", "--metrics", "--checkpoint", "{ckpt}", "--store", "{a_file}"]),
    ("rollout-metrics-with-image", USAGE, ["rollout", "{png}", "--metrics", "--checkpoint", "{ckpt}", "--store", "s"]),
    # compare
    ("compare-missing-store", USAGE, ["compare", "--store", "nope"]),
    ("compare-unknown-model", USAGE, ["compare", "--store", "{store}", "--model", "nope"]),
    ("compare-alpha-2", USAGE, ["compare", "--store", "{store}", "--alpha", "2"]),
    ("compare-csv-is-dir", USAGE, ["compare", "--store", "{store}", "--csv", "{a_dir}"]),
    ("compare-junk-row", USAGE, ["compare", "--store", "{junk_store}"]),
    ("compare-non-utf8-row", USAGE, ["compare", "--store", "{latin1_store}"]),
    ("compare-unknown-metric", USAGE, ["compare", "--store", "{store}", "--metric", "nope"]),
    ("compare-unknown-condition", USAGE, ["compare", "--store", "{store}", "--condition", "nope"]),
    ("compare-unknown-dataset", USAGE, ["compare", "--store", "{store}", "--dataset", "nope"]),
    ("compare-unknown-reference", USAGE, ["compare", "--store", "{store}", "--reference", "nope"]),
    ("compare-latex-is-dir", USAGE, ["compare", "--store", "{store}", "--latex", "{a_dir}"]),
    ("compare-cd-plot-is-dir", USAGE, ["compare", "--store", "{store}", "--cd-plot", "{a_dir}"]),
    ("compare-tie-tol-negative", USAGE, ["compare", "--store", "{store}", "--tie-tol", "-1"]),
    ("compare-store-is-file", USAGE, ["compare", "--store", "{a_file}"]),
    ("compare-csv-read-only", USAGE, ["compare", "--store", "{store}", "--csv", "{read_only}/s.csv"]),
    # report
    ("report-missing-store", USAGE, ["report", "--store", "nope", "--out", "rep"]),
    ("report-out-is-file", USAGE, ["report", "--store", "{store}", "--out", "{a_file}"]),
    ("report-junk-row", USAGE, ["report", "--store", "{junk_store}", "--out", "rep"]),
    ("report-unknown-dataset", USAGE, ["report", "--store", "{store}", "--out", "rep", "--dataset", "nope"]),
    ("report-unknown-reference", USAGE, ["report", "--store", "{store}", "--out", "rep", "--reference", "nope"]),
    ("report-store-is-file", USAGE, ["report", "--store", "{a_file}", "--out", "rep"]),
    ("report-non-utf8-row", USAGE, ["report", "--store", "{latin1_store}", "--out", "rep"]),
    ("report-out-read-only", USAGE, ["report", "--store", "{store}", "--out", "{read_only}/rep"]),
    # export
    ("export-missing-store", USAGE, ["export", "--store", "nope", "--out", "e"]),
    ("export-no-robustbench-dataset", USAGE, ["export", "--store", "{store}", "--out", "e"]),
    ("export-unknown-robustbench-dataset", USAGE, ["export", "--store", "{store}", "--out", "e", "--dataset",
                                                    "tiny-imagenet"]),
    ("export-dataset-traversal", USAGE, ["export", "--store", "{store}", "--out", "e", "--dataset", "../../x"]),
    ("export-unknown-format", USAGE, ["export", "--format", "csv", "--store", "{store}", "--out", "e"]),
    ("export-unknown-model", USAGE, ["export", "--store", "{store}", "--out", "e", "--dataset", "cifar10",
                                     "--model", "nope"]),
    ("export-unknown-store-dataset", USAGE, ["export", "--store", "{store}", "--out", "e", "--store-dataset", "nope"]),
    ("export-out-is-file", USAGE, ["export", "--store", "{store}", "--out", "{a_file}", "--dataset", "cifar10"]),
    ("export-junk-row", USAGE, ["export", "--store", "{junk_store}", "--out", "e", "--dataset", "cifar10"]),
    # reproduce
    ("reproduce-quick-unknown-corruption", USAGE, ["reproduce", "--quick", "--corruption", "fogg", "--out", "rp"]),
    ("reproduce-quick-unknown-noise", USAGE, ["reproduce", "--quick", "--text-noise", "typoo", "--out", "rp"]),
    ("reproduce-bad-seed", USAGE, ["reproduce", "--seed", "a-b", "--out", "rp"]),
    ("reproduce-unknown-preset", USAGE, ["reproduce", "--preset", "huge", "--out", "rp"]),
    ("reproduce-out-is-file", USAGE, ["reproduce", "--quick", "--out", "{a_file}"]),
    ("reproduce-quick-unknown-model", USAGE, ["reproduce", "--quick", "--model", "nope", "--out", "rp"]),
    ("reproduce-quick-unknown-image-dataset", USAGE, ["reproduce", "--quick", "--image-dataset", "nope", "--out", "rp"]),
    ("reproduce-quick-severity-0", USAGE, ["reproduce", "--quick", "--severity", "0", "--out", "rp"]),
    ("reproduce-bad-device", USAGE, ["reproduce", "--quick", "--device", "tpu", "--out", "rp"]),
    ("reproduce-max-examples-0", USAGE, ["reproduce", "--quick", "--max-examples", "0", "--out", "rp"]),
    # sweep
    ("sweep-plan-unknown-model", USAGE, ["sweep", "plan", "sw", "--model", "nope", "--dataset", "synthetic-vision"]),
    ("sweep-plan-unknown-key", USAGE, ["sweep", "plan", "sw", "--model", "vit", "--set", "train.nokey=1", "--dataset", "synthetic-vision"]),
    ("sweep-plan-bad-epochs", USAGE, ["sweep", "plan", "sw", "--model", "vit", "--set", "train.epochs=0", "--dataset", "synthetic-vision"]),
    ("sweep-run-garbage-jobs", USAGE, ["sweep", "run", "{garbage_jobs}"]),
    ("sweep-run-garbage-sweep-json", USAGE, ["sweep", "run", "{garbage_sweep_json}"]),
    ("sweep-run-missing", USAGE, ["sweep", "run", "nope"]),
    ("sweep-run-workers-negative", USAGE, ["sweep", "run", "{garbage_jobs}", "--workers", "-3"]),
    ("sweep-status-missing", USAGE, ["sweep", "status", "nope"]),
    ("sweep-slurm-time-bogus", USAGE, ["sweep", "slurm", "{garbage_jobs}", "--time", "bogus"]),
    ("sweep-slurm-gpus-negative", USAGE, ["sweep", "slurm", "{garbage_jobs}", "--gpus", "-1"]),
    ("sweep-slurm-mem-unit", USAGE, ["sweep", "slurm", "{garbage_jobs}", "--mem", "12Q"]),
    ("sweep-slurm-missing", USAGE, ["sweep", "slurm", "nope"]),
    ("sweep-plan-unknown-dataset", USAGE, ["sweep", "plan", "sw", "--model", "vit", "--dataset", "nope"]),
    ("sweep-plan-bad-seed", USAGE, ["sweep", "plan", "sw", "--model", "vit", "--dataset", "synthetic-vision",
                                    "--seed", "x"]),
    ("sweep-plan-severity-8", USAGE, ["sweep", "plan", "sw", "--model", "vit", "--dataset", "synthetic-vision",
                                      "--severity", "8"]),
    ("sweep-plan-modality-mismatch", USAGE, ["sweep", "plan", "sw", "--model", "vit", "--dataset", "synthetic-text"]),
    ("sweep-plan-into-file", USAGE, ["sweep", "plan", "{a_file}", "--model", "vit", "--dataset", "synthetic-vision"]),
    ("sweep-status-garbage-jobs", USAGE, ["sweep", "status", "{garbage_jobs}"]),
    ("sweep-run-one-missing", USAGE, ["sweep", "run-one", "nope", "--index", "0"]),
    ("sweep-run-one-garbage-jobs", USAGE, ["sweep", "run-one", "{garbage_jobs}", "--index", "0"]),
    ("sweep-run-one-index-negative", USAGE, ["sweep", "run-one", "{sweep_ok}", "--index", "-1"]),
    ("sweep-run-one-index-out-of-range", USAGE, ["sweep", "run-one", "{sweep_ok}", "--index", "99"]),
    ("sweep-run-bad-devices", USAGE, ["sweep", "run", "{sweep_ok}", "--devices", "x,y"]),
]


def _snapshot(folders: list[Path]) -> dict[str, tuple[int, int]]:
    snap = {}
    for folder in folders:
        if folder.is_dir():
            for p in folder.rglob("*"):
                st = p.stat()
                snap[str(p)] = (st.st_size, st.st_mtime_ns) if p.is_file() else (-1, 0)
        elif folder.exists():
            st = folder.stat()
            snap[str(folder)] = (st.st_size, st.st_mtime_ns)
    return snap


# Cases that depend on another branch's work in progress (run, but allowed to fail): none at the moment. The
# store-integrity cases (junk / non-UTF-8 rows) pass since the jobs branch's store.py refuses malformed rows.
STORE_INTEGRITY: set[str] = set()
# Read-only folders: root writes into them anyway (os.access says yes), so these only mean something as a user.
READ_ONLY = {"train-out-read-only", "evaluate-store-read-only", "compare-csv-read-only", "report-out-read-only"}


def _param(case: tuple[str, int, list[str]]):
    marks = []
    if case[0] in STORE_INTEGRITY:
        marks.append(pytest.mark.xfail(reason="store integrity: jobs branch", strict=False))
    if case[0] in READ_ONLY:
        marks.append(pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                                        reason="root ignores folder permissions"))
    return pytest.param(*case, marks=marks, id=case[0])


@pytest.mark.parametrize("case_id, expected, args", [_param(c) for c in CASES])
def test_bad_input(case_id, expected, args, fx, tmp_path, run_main):
    filled = [a.format(**{k: str(v) for k, v in fx.items()}) if "{" in a else a for a in args]
    watched = [tmp_path, fx["store"], fx["ckpt"].parent, fx["a_dir"], fx["a_file"], fx["junk_store"],
               fx["garbage_jobs"], fx["garbage_sweep_json"], fx["sweep_ok"], fx["latin1_store"], fx["read_only"]]
    before = _snapshot(watched)
    code, out, err = run_main(filled, tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert code == expected, f"exit {code}, expected {expected}; stderr:\n{err}\nstdout:\n{out}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"expected one 'error:' line, got:\n{err}"
    assert _snapshot(watched) == before, "files were created or changed"


def test_the_suite_is_broad():
    ids = [c[0] for c in CASES]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    assert STORE_INTEGRITY | READ_ONLY <= set(ids)
    assert len(CASES) - len(STORE_INTEGRITY) - len(READ_ONLY) >= 60, "at least 60 cases that run and must pass"
    commands = {args[0] if args[0] != "sweep" else " ".join(args[:2]) for _, _, args in CASES}
    assert len(CASES) >= 60
    assert commands >= {"models", "corrupt", "corrupt-text", "train", "evaluate", "rollout", "compare", "report",
                        "export", "reproduce", "sweep plan", "sweep run", "sweep run-one", "sweep slurm",
                        "sweep status"}


# --------------------------------------------------------------------------------------------- issue 35, items 6, 8

def _one_error_line(code: int, err: str, expected: int = USAGE) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == expected, f"exit {code}, expected {expected}; stderr:\n{err}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"expected one 'error:' line, got:\n{err}"
    return lines[0]


def test_corrupt_text_refuses_a_lone_surrogate_naming_file_and_line(tmp_path, run_main):
    """Item 8: a ``\\ud800`` escape (half a UTF-16 pair) in a JSONL decodes to a lone surrogate that no output can
    hold; refused on read, naming the file and line (was an internal UnicodeEncodeError while writing)."""
    src = tmp_path / "reviews.jsonl"
    src.write_text('{"text": "a fine film", "label": 1}\n{"text": "bad \\ud800 half", "label": 0}\n',
                   encoding="utf-8")
    code, _, err = run_main(["corrupt-text", "--input", str(src), "--out", "o"], tmp_path)
    line = _one_error_line(code, err)
    assert "reviews.jsonl line 2" in line and "surrogate" in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("side, size, says", [(1, 32, "at least 163 pixels"), (200, 64, "need textures larger")],
                         ids=["1x1-photos", "too-small-for-64px"])
def test_frost_photographs_too_small_for_the_crop_are_refused_before_any_work(side, size, says, tmp_path,
                                                                             run_main):
    """Item 8: a frost folder of 1 x 1 PNGs passed the entry check and then failed inside OpenCV (``!dsize.empty()``);
    photographs too small for any regime are refused when loaded, and ones too small for the images at hand
    (200 px photos resized x0.3 for 64 px images) before anything is corrupted."""
    from corruptions.frost import FROST_FILES
    frost = tmp_path / "frost"
    frost.mkdir()
    for name in FROST_FILES:
        Image.fromarray(np.full((side, side, 3), 230, np.uint8)).save(frost / name)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 256, (2, size, size, 3), dtype=np.uint8))
    code, _, err = run_main(["corrupt", "--input", "x.npy", "--corruption", "frost", "--severity", "1",
                             "--frost-dir", str(frost), "--out", "o", "--quiet"], tmp_path)
    line = _one_error_line(code, err)
    assert says in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("shape", [(1, 200, 3), (200, 1, 3)], ids=["1-pixel-high", "1-pixel-wide"])
def test_rollout_of_a_one_pixel_strip_draws_its_figure(shape, tmp_path, run_main):
    """Item 6: the grey outline of a 1-pixel-high or -wide image is drawn on its strip repeated to two samples
    (was an internal error from matplotlib's contour: ``Input z must be at least a (2, 2) shaped array``)."""
    Image.fromarray(np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)).save(tmp_path / "strip.png")
    code, out, err = run_main(["rollout", "strip.png", "--model", "vit", "--out", "r.png", "--quiet"], tmp_path)
    assert code == 0, err
    assert "error" not in err, err
    with Image.open(tmp_path / "r.png") as im:
        assert im.size[0] > 100 and im.size[1] > 100
    assert np.load(tmp_path / "r.npy").shape[:2] == shape[:2]
