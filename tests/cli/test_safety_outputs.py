"""Never touch what is not ours (issue 22, items 1-7): no user file deleted, no device replaced, no write outside
the output, names escaped in every report format, submitit's pickles kept private, a tampered corruption file
never used.

CLI cases run the real entry point (``robustbench_dgsa.cli.main`` with its error boundary, the ``run_main``
fixture) and assert the exit code, exactly one ``error:`` line and no traceback, and that nothing outside the
output changed (a snapshot by ``lstat``: a device node or FIFO stays one; a symbolic link is not followed).
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from robustbench_dgsa import store

USAGE = 2
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>|x\x00y"


# --------------------------------------------------------------------------------------------- helpers

def _snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path under ``roots`` (not following links) -> (type, size, mtime, link target)."""
    snap: dict[str, tuple] = {}
    for root in roots:
        todo = [root]
        while todo:
            p = todo.pop()
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
            snap[str(p)] = (stat.S_IFMT(st.st_mode), st.st_size if stat.S_ISREG(st.st_mode) else 0,
                            st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0, link)
            if stat.S_ISDIR(st.st_mode):
                todo += list(p.iterdir())
    return snap


def _one_error(code: int, err: str, expected: int = USAGE) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert code == expected, f"exit {code}, expected {expected}; stderr:\n{err}"
    assert len(lines) == 1 and lines[0].startswith("error:"), f"expected one 'error:' line, got:\n{err}"
    return lines[0]


def _eval_store(path: Path, models=("vit", "dvit"), seeds=(0,)) -> Path:
    """A small store of evaluation rows (clean + fog 1-2) for ``models``."""
    rng = np.random.default_rng(0)
    for k, model in enumerate(models):
        for seed in seeds:
            w = store.RunWriter(path, f"eval-{k}-{seed}", base=dict(kind="eval", model=model, dataset="cifar10",
                                                                      seed=seed, split="test", metric="accuracy",
                                                                      n=100))
            rows = [dict(condition="clean", severity=0, value=0.8 + 0.01 * k + 0.005 * rng.standard_normal())]
            rows += [dict(condition="fog", severity=s, value=0.7 - 0.05 * s + 0.01 * k, source="regenerated")
                     for s in (1, 2)]
            w.add_rows(rows)
    return path


def _special_nodes(d: Path) -> dict[str, Path]:
    """A character device (1, 7: what /dev/full is) and a FIFO in ``d``; skips where mknod is not allowed."""
    d.mkdir(parents=True, exist_ok=True)
    nodes = {"fifo": d / "pipe.csv", "fifo_png": d / "pipe.png", "fifo_npy": d / "heat.npy", "dev": d / "full.csv",
             "dev_png": d / "full.png", "dev_tex": d / "full.tex"}
    for k in ("fifo", "fifo_png", "fifo_npy"):
        os.mkfifo(nodes[k])
    try:
        for k in ("dev", "dev_png", "dev_tex"):
            os.mknod(nodes[k], stat.S_IFCHR | 0o600, os.makedev(1, 7))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot make a device node here: {e}")
    return nodes


def _kinds(nodes: dict[str, Path]) -> dict[str, bool]:
    return {k: (stat.S_ISFIFO if k.startswith("fifo") else stat.S_ISCHR)(os.lstat(p).st_mode)
            for k, p in nodes.items()}


# --------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return _eval_store(tmp_path_factory.mktemp("safety") / "store")


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    """One report (through the CLI) of a store whose model names carry HTML, a pipe and a NUL, built into a
    folder that a previous report wrote, with a manifest that lists paths outside it and a folder."""
    root = tmp_path_factory.mktemp("hostile")
    st = _eval_store(root / "store", models=("vit", SCRIPT, IMG), seeds=(0, 1))
    out, outside = root / "rep", root / "outside"
    out.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    (out / "sub").mkdir()
    (out / "sub" / "inner.txt").write_text("keep me too\n")
    (out / "stale.md").write_text("written by the previous report\n")
    (out / "user.txt").write_text("not listed: not the report's\n")
    (out / "manifest.json").write_text(json.dumps({"kind": "dgsa-bench report", "version": 1, "files": [
        "../outside/victim.txt", str(outside / "victim.txt"), "sub", "sub/inner.txt", "stale.md",
        "..", ".", ""]}))
    return st, out, outside


# --------------------------------------------------------------------------------------------- 1. foreign manifests

@pytest.mark.parametrize("manifest", [
    {"files": ["thesis.tex"]},                                                     # a user's own manifest
    {"corruptions": {"fog": {}}, "files": {"fog.n64.s13.npy": {"sha256": "0" * 64}}},  # a CIFAR-C folder's
    "not json {",
])
def test_report_refuses_a_folder_with_a_foreign_manifest(small_store, tmp_path, run_main, manifest):
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "thesis.tex").write_text("\\documentclass{article}\n")
    (folder / "fog.n64.s13.npy").write_bytes(b"\x93NUMPY")
    (folder / "manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    before = _snapshot(tmp_path, small_store)
    code, _, err = run_main(["report", "--store", str(small_store), "--out", str(folder)], tmp_path)
    line = _one_error(code, err)
    assert "manifest.json" in line and "no dgsa-bench report wrote" in line
    assert _snapshot(tmp_path, small_store) == before
    assert not list(tmp_path.glob(".*partial*"))


def test_reproduce_refuses_a_folder_with_a_foreign_manifest_before_any_work(tmp_path, run_main):
    folder = tmp_path / "cifar-c"
    folder.mkdir()
    (folder / "fog.n64.s13.npy").write_bytes(b"\x93NUMPY")
    (folder / "manifest.json").write_text(json.dumps({"files": {"fog.n64.s13.npy": {}}, "corruptions": ["fog"]}))
    before = _snapshot(tmp_path)
    code, _, err = run_main(["reproduce", "--quick", "--device", "cpu", "--out", str(folder), "--quiet"], tmp_path)
    assert "no dgsa-bench report wrote" in _one_error(code, err)
    assert _snapshot(tmp_path) == before


def test_report_rebuild_removes_only_plain_files_its_own_manifest_listed(hostile_report, run_main, tmp_path):
    st, out, outside = hostile_report
    before_outside = _snapshot(outside)
    code, stdout, err = run_main(["report", "--store", str(st), "--out", str(out), "--json"], tmp_path)
    assert code == 0, err
    assert _snapshot(outside) == before_outside                          # nothing outside the report touched
    assert (outside / "victim.txt").read_text() == "keep me\n"
    assert (out / "sub" / "inner.txt").read_text() == "keep me too\n"   # nor a folder or a path with a separator
    assert (out / "user.txt").exists()                                   # not listed: not the report's
    assert not (out / "stale.md").exists()                               # listed by the previous report: removed
    man = json.loads((out / "manifest.json").read_text())
    assert man["kind"] == "dgsa-bench report" and "index.md" in man["files"]
    assert all(f == os.path.basename(f) for f in man["files"])


def test_report_prune_never_follows_or_removes_a_listed_link(tmp_path):
    """The CLI refuses a link inside --out (below); the rebuild's clean-up itself still removes only regular
    files: a listed link to a file outside stays, and so does its target; a listed FIFO stays a FIFO."""
    import types

    from robustbench_dgsa.report.folder import prune

    out, outside = tmp_path / "rep", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    (out / "link.txt").symlink_to(outside / "victim.txt")
    os.mkfifo(out / "pipe.md")
    (out / "old.md").write_text("stale\n")
    prune(out, types.SimpleNamespace(artefacts=[]), ["link.txt", "pipe.md", "old.md", "../outside/victim.txt"])
    assert (out / "link.txt").is_symlink() and (outside / "victim.txt").read_text() == "keep me\n"
    assert stat.S_ISFIFO(os.lstat(out / "pipe.md").st_mode) and not (out / "old.md").exists()
    assert json.loads((out / "manifest.json").read_text())["kind"] == "dgsa-bench report"


def test_report_accepts_an_older_reports_manifest_and_removes_nothing(tmp_path):
    """A report folder written before manifests carried their kind ({"files": [...]} with the index files) is
    still rebuilt, and nothing its manifest lists is removed; a lookalike without the index files is refused."""
    from robustbench_dgsa.report.folder import previous_files
    from robustbench_dgsa.util.errors import UserError

    out = tmp_path / "old"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"files": ["index.html", "index.md", "manifest.json",
                                                             "table_gone.md"]}))
    assert previous_files(out) == []
    (out / "manifest.json").write_text(json.dumps({"files": ["thesis.tex", "manifest.json"]}))
    with pytest.raises(UserError, match="no dgsa-bench report wrote"):
        previous_files(out)


# --------------------------------------------------------------------------------------------- 2. devices, FIFOs

def test_outputs_that_are_devices_or_fifos_are_refused_never_replaced(small_store, tmp_path, run_main):
    nodes = _special_nodes(tmp_path / "nodes")
    img = tmp_path / "in" / "photo.png"
    img.parent.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(img)
    npy = tmp_path / "in" / "images.npy"
    np.save(npy, np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    work = tmp_path / "work"
    work.mkdir()
    cases = [
        ["compare", "--store", str(small_store), "--csv", str(nodes["dev"])],
        ["compare", "--store", str(small_store), "--csv", str(nodes["fifo"])],
        ["compare", "--store", str(small_store), "--latex", str(nodes["dev_tex"])],
        ["rollout", str(img), "--model", "vit", "-o", str(nodes["dev_png"])],
        ["rollout", str(img), "--model", "vit", "-o", str(nodes["fifo_png"])],
        ["rollout", str(img), "--model", "vit", "-o", str(nodes["fifo_npy"].with_suffix(".png"))],  # its .npy
        ["corrupt", "--input", str(npy), "--corruption", "contrast", "--severity", "1", "--preview",
         str(nodes["dev_png"])],
        ["report", "--store", str(small_store), "--out", str(nodes["dev"])],
        ["train", "--model", "vit", "--dataset", "synthetic-vision", "--out", str(nodes["fifo"])],
    ]
    for args in cases:
        before = _snapshot(tmp_path, small_store)
        code, _, err = run_main(args, work)
        line = _one_error(code, err)
        assert ("character device" in line or "FIFO" in line), (args, line)
        assert _snapshot(tmp_path, small_store) == before, args
        assert all(_kinds(nodes).values()), args


def test_the_atomic_writers_never_rename_over_a_special_file(tmp_path):
    """Second line of defence, under every writer: the suite's and the corruptions library's."""
    from corruptions import atomic as catomic
    from corruptions.errors import CorruptionError
    from robustbench_dgsa.util import atomic
    from robustbench_dgsa.util.errors import UserError

    nodes = _special_nodes(tmp_path)
    for p in nodes.values():
        with pytest.raises(UserError, match="not a regular file"):
            atomic.write_text(p, "x")
        with pytest.raises(CorruptionError, match="not a regular file"):
            catomic.write_bytes(p, b"x")
    assert all(_kinds(nodes).values())
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(p.name for p in nodes.values())  # no temporaries
    atomic.write_text(tmp_path / "plain.txt", "ok")                    # a regular file is still written
    assert (tmp_path / "plain.txt").read_text() == "ok"


# --------------------------------------------------------------------------------------------- 3. --name traversal

@pytest.mark.parametrize("name", ["../../../X", "a/b", "..", "{tmp}/abs"])
def test_report_name_never_leaves_reports(small_store, tmp_path, run_main, name):
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    before = _snapshot(tmp_path, small_store)
    code, _, err = run_main(["report", "--store", str(small_store), "--name", name.format(tmp=tmp_path)], work)
    line = _one_error(code, err)
    assert "one folder name" in line
    assert _snapshot(tmp_path, small_store) == before                    # nothing anywhere: not even reports/


# --------------------------------------------------------------------------------------------- 4. symlinks in --out

@pytest.mark.parametrize("link", ["store", "store/rows", "vit-synthetic-vision-s0"])
def test_train_refuses_a_symbolic_link_inside_its_output(tmp_path, run_main, link):
    out, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.txt").write_text("user data\n")
    (out / link).parent.mkdir(parents=True, exist_ok=True)
    (out / link).symlink_to(outside, target_is_directory=True)
    before = _snapshot(tmp_path)
    code, _, err = run_main(["train", "--model", "vit", "--dataset", "synthetic-vision", "--seed", "0,1",
                             "--epochs", "1", "--set", "model.dim=16", "--set", "model.depth=1",
                             "--out", str(out), "--quiet"], tmp_path)
    line = _one_error(code, err)
    assert "symbolic link" in line and link.split("/")[-1] in line
    assert _snapshot(tmp_path) == before
    assert sorted(p.name for p in outside.iterdir()) == ["mine.txt"]


@pytest.mark.parametrize("command", [
    ["corrupt", "--input", "{npy}", "--corruption", "contrast", "--severity", "1", "--out", "{out}"],
    ["corrupt-text", "--input", "{tsv}", "--out", "{out}"],
    ["export", "--store", "{store}", "--dataset", "cifar10", "--out", "{out}"],
    ["report", "--store", "{store}", "--out", "{out}"],
    ["sweep", "run", "{out}"],
    ["sweep", "plan", "{out}", "--model", "vit", "--dataset", "synthetic-vision"],
], ids=lambda c: " ".join(c[:2]) if c[0] == "sweep" else c[0])
def test_every_output_folder_refuses_a_link_inside(small_store, tmp_path, run_main, command):
    out, outside = tmp_path / "out", tmp_path / "outside"
    (out / "store").mkdir(parents=True)
    outside.mkdir()
    (outside / "mine.txt").write_text("user data\n")
    (out / "store" / "rows").symlink_to(outside, target_is_directory=True)
    npy, tsv = tmp_path / "images.npy", tmp_path / "reviews.tsv"
    np.save(npy, np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    tsv.write_text("text\tlabel\na fine film\t1\na dull film\t0\n", encoding="utf-8")
    args = [a.format(out=out, npy=npy, tsv=tsv, store=small_store) for a in command]
    before = _snapshot(tmp_path, small_store)
    code, _, err = run_main(args, tmp_path)
    assert "symbolic link" in _one_error(code, err)
    assert _snapshot(tmp_path, small_store) == before


def test_links_in_hidden_folders_are_not_searched_but_a_hidden_link_is_refused(tmp_path):
    from robustbench_dgsa.cli.options import check_no_links
    from robustbench_dgsa.util.errors import UserError

    out = tmp_path / "out"
    (out / ".venv" / "bin").mkdir(parents=True)
    (out / ".venv" / "bin" / "python").symlink_to(sys.executable)   # `--out .` in a project with a venv
    check_no_links(out)
    (out / "store").mkdir()
    (out / "store" / ".compact.lock").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(UserError, match="compact.lock is a symbolic link"):
        check_no_links(out)


def test_evaluate_refuses_a_linked_default_store(tmp_path, run_main):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    (run / "checkpoint.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (run / "store").symlink_to(outside, target_is_directory=True)
    before = _snapshot(tmp_path)
    code, _, err = run_main(["evaluate", "--checkpoint", str(run / "checkpoint.safetensors"), "--corruption",
                             "contrast", "--severity", "1", "--device", "cpu"], tmp_path)
    line = _one_error(code, err)
    assert "symbolic link" in line
    assert _snapshot(tmp_path) == before


# --------------------------------------------------------------------------------------------- 5. names escaped

def test_report_escapes_names_in_markdown_and_drops_control_characters(hostile_report, run_main, tmp_path):
    st, out, _ = hostile_report
    if not (out / "index.md").exists():  # built by the rebuild test; build here when run alone
        code, _, err = run_main(["report", "--store", str(st), "--out", str(out), "--json"], tmp_path)
        assert code == 0, err
    md = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.md") if not p.is_symlink()}
    tex = {p.name: p.read_bytes() for p in out.glob("*.tex")}
    html_ = {p.name: p.read_bytes() for p in out.glob("*.html")}
    assert len(md) >= 3 and tex and html_
    assert any("&lt;script&gt;" in t for t in md.values())             # the name is there, escaped
    for name, text in md.items():
        assert "<script" not in text.lower() and "<img" not in text.lower(), name
        assert "\x00" not in text, name
        width = None  # every row of a table keeps its header's column count: a "|" in a name is escaped
        for row in text.splitlines():
            if not row.startswith("|"):
                width = None
                continue
            n = len(row.replace("\\|", "").split("|"))
            width = n if width is None else width
            assert n == width, (name, row)
    for name, data in {**tex, **html_}.items():
        assert b"\x00" not in data, name
        assert b"<script" not in data.lower() and b"<img src=x" not in data.lower(), name  # figures: own <img>


def test_report_tex_with_hostile_names_compiles(hostile_report, compile_latex):
    _, out, _ = hostile_report
    if not list(out.glob("*.tex")):
        pytest.skip("report not built")
    assert compile_latex(list(out.glob("*.tex"))) == {}


def test_table_writer_escapes_every_format():
    from robustbench_dgsa.report.tables import Table

    t = Table(["model", "acc"], [[SCRIPT, "1.0"], [IMG, "<0.001"], ["[x](javascript:alert(1))", "`c`"]],
              caption=f"caption {SCRIPT}", notes=[f"note {IMG}"])
    md, tex, html_ = t.to_markdown(), t.to_latex(), t.to_html()
    assert "<script" not in md and "<img" not in md and "\x00" not in md
    assert "[x](" not in md and "\\[x\\](javascript" in md                # no link: brackets escaped
    assert "&lt;script&gt;" in md and "\\|x" in md and "&lt;0.001" in md
    assert "\x00" not in tex and "\x00" not in html_ and "<script" not in html_
    assert all(len(r.replace("\\|", "").split("|")) == 4 for r in md.splitlines() if r.startswith("|"))


# --------------------------------------------------------------------------------------------- 6. submitit

def test_sweep_slurm_help_says_submitit_pickles(run_main, tmp_path):
    code, out, _ = run_main(["sweep", "slurm", "--help"], tmp_path)
    assert code == 0
    text = " ".join(out.split())
    assert "pickle" in text and "0700" in text


def test_submitit_folder_is_private(tmp_path, run_main, monkeypatch):
    import types

    seen: dict = {}

    class FakeExecutor:
        def __init__(self, folder):
            p = Path(folder)
            seen["folder"], seen["mode"] = p, stat.S_IMODE(os.stat(p).st_mode)
            (p / "job.pkl").write_bytes(b"pickled by submitit")

        def update_parameters(self, **kw):
            seen["params"] = kw

        def map_array(self, fn, *args):
            return [types.SimpleNamespace(job_id=f"42_{i}") for i in range(len(args[0]))]

    monkeypatch.setitem(sys.modules, "submitit", types.SimpleNamespace(AutoExecutor=FakeExecutor))
    sweep_dir = tmp_path / "sweep"
    code, _, err = run_main(["sweep", "plan", str(sweep_dir), "--model", "vit", "--dataset", "synthetic-vision",
                             "--preset", "tiny", "--device", "cpu"], tmp_path)
    assert code == 0, err
    # even a folder made world-writable beforehand is made private before submitit writes into it
    (sweep_dir / "slurm" / "submitit").mkdir(parents=True)
    os.chmod(sweep_dir / "slurm" / "submitit", 0o777)
    code, out, err = run_main(["sweep", "slurm", str(sweep_dir), "--submitit"], tmp_path)
    assert code == 0, err
    assert "submitted" in out
    assert seen["folder"] == (sweep_dir / "slurm" / "submitit").resolve() and seen["mode"] == 0o700
    assert stat.S_IMODE(os.stat(sweep_dir / "slurm" / "submitit").st_mode) == 0o700


# --------------------------------------------------------------------------------------------- 7. digest cache

def test_same_size_edit_with_restored_mtime_is_caught(tmp_path, monkeypatch):
    from corruptions.errors import CorruptionError
    from corruptions.layout import load_corrupted, regenerate

    monkeypatch.setenv("CORRUPTIONS_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    out = tmp_path / "cifar-c"
    regenerate(images, np.arange(4) % 2, out, "contrast", "1")
    x, _ = load_corrupted(out, "contrast", 1)                    # verified; the digest is now cached
    assert (tmp_path / "cache" / "sha256-cache.json").is_file()
    f = next(p for p in out.glob("contrast*.npy"))
    st = os.stat(f)
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF                                             # same size, one byte changed
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))             # and the old mtime restored
    assert os.stat(f).st_size == st.st_size and os.stat(f).st_mtime_ns == st.st_mtime_ns
    with pytest.raises(CorruptionError, match="contents differ"):
        load_corrupted(out, "contrast", 1)


# --------------------------------------------------------------------------------------------- names in compare --latex

TEX_NAMES = ("vit\n\\input{/etc/hostname}", "dvit%\r\\write18{touch pwned}\\immediate")


def _tex_without_comments(text: str) -> str:
    """What TeX reads of ``text``: each line up to its first unescaped ``%``."""
    return "\n".join(re.split(r"(?<!\\)%", line, maxsplit=1)[0] for line in text.split("\n"))


def test_compare_latex_keeps_names_out_of_live_tex(tmp_path, run_main):
    """Issue 35, item 1: ``compare --latex`` wrote the model names raw into its ``%`` header comments, so a newline
    in a name ended the comment and ``\\input{/etc/hostname}`` became live LaTeX. Comments and cells now go through
    the report's one LaTeX escaper: no line break inside a comment, no control word from a name outside one."""
    st = _eval_store(tmp_path / "store", models=("dgvit", *TEX_NAMES), seeds=(0, 1, 2))
    code, _, err = run_main(["compare", "--store", str(st), "--latex", "cmp.tex"], tmp_path)
    assert code == 0, err
    text = (tmp_path / "cmp.tex").read_text(encoding="utf-8")
    live = _tex_without_comments(text)
    for word in ("\\input", "\\write18", "\\immediate"):
        assert word not in live, word
    assert "\r" not in text
    header = [ln for ln in text.split("\n") if "models=" in ln]
    assert len(header) == 1 and header[0].startswith("% ") and "hostname" in header[0]   # the names, inert


# --------------------------------------------------------------------------------------------- outputs and stores

OUTPUT_CASES = {   # id: (arguments, with {S} the store and {W} the working folder; words the error names)
    "compare-csv-in-rows": (["compare", "--store", "{S}", "--csv", "{S}/rows/evil.jsonl"], "inside the results store"),
    "compare-latex-in-store": (["compare", "--store", "{S}", "--latex", "{S}/cmp.tex"], "inside the results store"),
    "compare-csv-is-latex": (["compare", "--store", "{S}", "--csv", "x", "--latex", "x"], "same path"),
    "compare-plot-is-csv": (["compare", "--store", "{S}", "--csv", "{W}/x.png", "--cd-plot", "x.png"], "same path"),
    "report-out-is-store": (["report", "--store", "{S}", "--out", "{S}"], "is the results store"),
    "report-out-in-rows": (["report", "--store", "{S}", "--out", "{S}/rows"], "inside the results store"),
    "export-out-in-store": (["export", "--store", "{S}", "--out", "{S}/rb", "--dataset", "cifar10"],
                            "inside the results store"),
    "evaluate-store-in-store": (["evaluate", "--pretrained", "vit", "--store", "{S}/rows", "--dataset",
                                 "synthetic-vision", "--max-examples", "4"], "inside the results store"),
    "train-out-is-store": (["train", "-m", "vit", "-d", "synthetic-vision", "--out", "{S}", "--preset", "tiny"],
                           "is the results store"),
    "train-out-is-its-store": (["train", "-m", "vit", "-d", "synthetic-vision", "--out", "o", "--store", "o",
                                "--preset", "tiny"], "same path"),
    "reproduce-out-in-store": (["reproduce", "--quick", "--out", "{S}/rep"], "inside the results store"),
    "sweep-plan-in-store": (["sweep", "plan", "{S}/sw", "-m", "vit", "-d", "synthetic-vision"],
                            "inside the results store"),
    "corrupt-out-in-store": (["corrupt", "--input", "{W}/x.npy", "--out", "{S}/c", "--corruption", "fog",
                              "--severity", "1"], "inside the results store"),
}


@pytest.mark.parametrize("case", list(OUTPUT_CASES))
def test_outputs_never_land_in_a_store_or_on_each_other(case, tmp_path, run_main):
    """Issue 35, item 3: ``compare --csv S/rows/evil.jsonl`` broke the store, ``report --out S`` wrote ~100 files
    among ``rows/``, ``--csv x --latex x`` overwrote one with the other. One check of where every command writes
    (``store.check_outputs``): one ``error:`` line, exit 2, nothing written anywhere."""
    args, words = OUTPUT_CASES[case]
    st = _eval_store(tmp_path / "S", models=("vit", "dvit"), seeds=(0, 1))
    work = tmp_path / "W"
    work.mkdir()
    np.save(work / "x.npy", np.zeros((2, 32, 32, 3), np.uint8))
    before = _snapshot(tmp_path)
    code, _, err = run_main([a.replace("{S}", str(st)).replace("{W}", str(work)) for a in args], work)
    line = _one_error(code, err)
    assert words in line, line
    assert _snapshot(tmp_path) == before, "something was written"


def test_report_beside_its_store_is_still_allowed(tmp_path, run_main):
    """The control: reproduce's layout (the report in a folder that holds the store) stays allowed."""
    st = _eval_store(tmp_path / "rep" / "store", seeds=(0, 1))
    code, _, err = run_main(["report", "--store", str(st), "--out", str(tmp_path / "rep")], tmp_path)
    assert code == 0, err
    assert (tmp_path / "rep" / "index.md").is_file()
