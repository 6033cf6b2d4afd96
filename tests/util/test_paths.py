"""File names built from data stay inside their folder (issue 12, item 2).

``util.paths.safe_name`` is the one slug: the unit tests pin its properties; the end-to-end test builds a store
whose dataset, model and run names hold ``../``, absolute paths and odd Unicode, then runs ``report``
and ``export`` through the CLI and saves rollout sets, and walks the file system: every new file is under the
folder the user chose, and no folder is made from a name.
"""
from __future__ import annotations

import json

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.util.paths import inside, is_safe_name, safe_name

HOSTILE = ["../../escape", "../..", "..", ".", "", "/abs/path/data", "folder:/abs/path", "a/b\\c", "C:\\x\\y",
           "Ünï©ødé ☃ データ", "x\u202egnp.exe", "nul\x00byte", "con", "con.txt", ".hidden", "-rf", "a" * 400,
           "tab\tnew\nline", "~/home"]


@pytest.mark.parametrize("name", ["cifar10", "vit", "synthetic-vision", "dgvit", "fig4_severity_cifar10",
                                  "train-20261123T052922-0cec34", "unaggregated_results.csv", "vit_swiglu"])
def test_safe_names_are_kept(name):
    assert safe_name(name) == name


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_become_one_plain_component(name, tmp_path):
    s = safe_name(name)
    assert is_safe_name(s) and safe_name(s) == s          # safe, and idempotent
    assert s.isascii() and s.isprintable() and "/" not in s and "\\" not in s and ".." not in s
    assert not s.startswith((".", "-", "~")) and len(s) <= 100
    assert Path(s).name == s and (tmp_path / s).resolve().parent == tmp_path.resolve()
    assert inside(tmp_path, name, name).resolve().parent.parent == tmp_path.resolve()


def test_different_names_never_share_a_file():
    names = HOSTILE + ["folder:/data/a/b", "folder:/data/a_b", "a b", "a_b", "a?b", "Café", "Cafe"]
    slugs = [safe_name(n) for n in names]
    assert len(set(slugs)) == len(set(names))


# -------------------------------------------------------------------------------------- end to end

# From <tmp>/a/b/c/rep, "fig4_severity_" + "../../../../x" resolved by the OS is <tmp>/a/x: outside --out.
BAD_DATASETS = ["../../../../escaped ☃ データ", "folder:/abs/path/to/images"]
BAD_MODELS = ["vit", "../../../../evil-model", "/abs/módel ☃"]
# A condition outside the known names (e.g. "../../cond") never gets this far: the store's reader refuses it (issue
# 35; tests/cli/test_safety_results.py::test_broken_row_is_an_error_naming_file_and_line[unknown-condition]).
BAD_CONDITIONS = ["fog", "contrast"]


def _hostile_store(store_dir: Path) -> None:
    from robustbench_dgsa.rollout.runs import save_rollout_set
    rng = np.random.default_rng(0)
    for ds in BAD_DATASETS:
        for k, model in enumerate(BAD_MODELS):
            for seed in range(3):
                base = dict(model=model, dataset=ds, seed=seed, config_hash="h")
                w = store.RunWriter(store_dir, f"eval-{k}-{seed}-{abs(hash(ds)) % 997}",
                                    dict(base, kind="eval", split="test", n=100, source="on-the-fly"))
                clean = .8 + .02 * k + rng.normal(0, .01)
                rows = [dict(condition="clean", severity=0, metric="accuracy", value=clean)]
                rows += [dict(condition=c, severity=s, metric="accuracy", value=clean - .05 * s)
                         for c in BAD_CONDITIONS for s in range(1, 6)]
                w.add_rows(rows)
                tw = store.RunWriter(store_dir, f"train-{k}-{seed}-{abs(hash(ds)) % 997}", dict(base, kind="train"))
                tw.add_rows([dict(split="val", metric="accuracy", epoch=e, value=.5 + .1 * e) for e in (1, 2)])
            run = f"rollout-{k}-{abs(hash(ds)) % 997}"
            store.RunWriter(store_dir, run, dict(model=model, dataset=ds, seed=0, kind="rollout", split="test")) \
                .add_rows([dict(condition="clean", severity=0, metric="rollout_mass", source="positive|mean|d0",
                                value=.3 + .1 * k)])
            imgs = (np.arange(2 * 8 * 8 * 3).reshape(2, 8, 8, 3) % 251).astype(np.uint8)
            save_rollout_set(store_dir, run, kind="image", model=model, dataset=ds, seed=0, mode="positive|mean|d0",
                             labels=[0, 1], images=imgs, heatmaps=np.linspace(0, 1, 2 * 64).reshape(2, 8, 8),
                             meta={"classes": ["../../cls", "/abs/cls"]})
    # a rollout set whose run id and model are hostile themselves
    save_rollout_set(store_dir, "../../../run", kind="image", model="/abs/../model", dataset="../x", seed=0,
                     mode="positive|mean|d0", labels=[0], images=np.zeros((1, 8, 8, 3), np.uint8),
                     heatmaps=np.zeros((1, 8, 8), np.float32))


def _tree(root: Path) -> set[Path]:
    return {Path(dp) / f for dp, dns, fns in os.walk(root) for f in [*fns, *dns]}


def _main(args: list[str], capsys) -> int:
    from robustbench_dgsa.cli import main
    old = sys.argv
    sys.argv = ["dgsa-bench", *args]
    try:
        main()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        sys.argv = old
        capsys.readouterr()
    return 0


@pytest.mark.slow
def test_report_export_and_rollout_sets_write_only_under_their_folder(tmp_path, capsys):
    root = tmp_path / "a" / "b" / "c"   # "../../" from the output folders still lands inside tmp_path
    store_dir = root / "store"
    _hostile_store(store_dir)
    rollouts = store_dir / "rollouts"
    assert rollouts.is_dir() and {p.parent for p in _tree(store_dir) if p.suffix == ".npz"} == {rollouts}
    assert all(is_safe_name(p.name) for p in rollouts.iterdir())
    before = _tree(tmp_path)

    rep, exp = root / "rep", root / "exp"
    assert _main(["report", "--store", str(store_dir), "--out", str(rep)], capsys) == 0
    for ds in BAD_DATASETS:
        assert _main(["export", "--store", str(store_dir), "--out", str(exp), "--dataset", "cifar10",
                      "--store-dataset", ds], capsys) == 0

    new = _tree(tmp_path) - before
    assert new, "nothing was written"
    outside = sorted(str(p) for p in new if not (p.is_relative_to(rep) or p.is_relative_to(exp)))
    assert not outside, f"written outside --out: {outside}"
    # no folder made from a name: the report is flat; export has only model_info/cifar10/corruptions
    assert {p.parent for p in new if p.is_relative_to(rep)} <= {rep, root}
    assert {p for p in new if p.is_dir()} <= {rep, exp, exp / "model_info", exp / "model_info" / "cifar10",
                                               exp / "model_info" / "cifar10" / "corruptions"}
    names = [p.name for p in new]
    assert all(n.isascii() and ".." not in n.replace("...", "") for n in names), names
    # every model got its own record (distinct slugs): a model_info file (complete grid) or an entry of the side
    # file of incomplete grids; and the report drew each dataset's figures
    jsons = sorted((exp / "model_info" / "cifar10" / "corruptions").glob("*.json"))
    side = exp / "incomplete_grids.cifar10.json"
    incomplete = json.loads(side.read_text())["models"] if side.is_file() else {}
    assert len(jsons) + len(incomplete) == len(BAD_MODELS)
    for ds in BAD_DATASETS:
        assert (rep / f"{safe_name(f'fig2_rollout_{ds}')}.png").is_file()
