"""``dgsa-bench compare`` on a small synthetic store written with store.RunWriter."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robustbench_dgsa import store

MODELS = {"vit": 0.0, "dvit": 0.01, "dgvit": 0.02}
CELLS = [("gaussian_noise", s) for s in range(1, 6)] + [("fog", s) for s in range(1, 6)]


def _make_store(path: Path, seeds: int = 3) -> Path:
    rng = np.random.default_rng(0)
    for model, off in MODELS.items():
        for seed in range(seeds):
            w = store.RunWriter(path, f"eval-{model}-{seed}",
                                base=dict(kind="eval", model=model, dataset="cifar10", seed=seed, split="test",
                                          metric="accuracy", n=1000))
            rows = [dict(condition="clean", severity=0, value=0.80 + off + 0.004 * rng.standard_normal())]
            rows += [dict(condition=c, severity=s, value=0.75 - 0.05 * s + off + 0.004 * rng.standard_normal(),
                          source="regenerated") for c, s in CELLS]
            w.add_rows(rows)
    return path


def _run(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    from robustbench_dgsa.cli import main
    monkeypatch.setattr(sys, "argv", ["dgsa-bench", "compare", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return _make_store(tmp_path_factory.mktemp("cmp") / "store")


def test_compare_prints_tables_and_writes_csv_latex(small_store, tmp_path, monkeypatch, capsys):
    csv, tex, cd = tmp_path / "out.csv", tmp_path / "out.tex", tmp_path / "cd.pdf"
    code, out, err = _run(monkeypatch, capsys, "--store", str(small_store), "--models", "vit,dvit,dgvit",
                          "--condition", "clean,gaussian_noise,fog:3", "--csv", str(csv), "--latex", str(tex),
                          "--cd-plot", str(cd))
    assert code == 0, err
    for title in ("Seed summary", "Pairwise differences", "Wilcoxon signed-rank over seed-averaged cells",
                  "Friedman test", "Average ranks", "Holm over a family of 6 Welch t-test(s)"):
        assert title in out
    assert "fewer than 5 seeds" in err  # warnings on stderr, tables on stdout
    assert "not the full 75" in err  # honest: 10 of the 75 benchmark cells
    summary = pd.read_csv(csv)
    assert set(summary["model"]) == set(MODELS) and set(summary["condition"]) == {"clean", "gaussian_noise", "fog:3"}
    assert (summary["n"] == 3).all()
    pairwise = pd.read_csv(tmp_path / "out.pairwise.csv")
    assert set(pairwise["model_b"]) == {"vit"} and {"p", "p_holm", "g", "ci_lo", "ci_hi"} <= set(pairwise.columns)
    ranks = pd.read_csv(tmp_path / "out.avg_ranks.csv")
    assert ranks.iloc[0]["model"] == "dgvit"
    text = tex.read_text()
    assert "\\toprule" in text and "\\midrule" in text and "\\bottomrule" in text and "Holm over" in text
    assert cd.read_bytes().startswith(b"%PDF")


def test_compare_json_paired_reference(small_store, monkeypatch, capsys):
    code, out, _ = _run(monkeypatch, capsys, "--store", str(small_store), "--reference", "dgvit", "--paired",
                        "--condition", "clean", "--json")
    assert code == 0
    doc = json.loads(out)
    pw = pd.DataFrame(doc["tables"]["pairwise"])
    assert set(pw["model_b"]) == {"dgvit"} and set(pw["test"]) == {"paired t"}
    assert doc["info"]["reference"] == "dgvit"
    assert any("paired t-test" in f for f in doc["families"])


def test_compare_errors_are_one_clear_line(small_store, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _run(monkeypatch, capsys, "--store", str(empty))
    assert code != 0 and "no evaluation results" in err
    code, _, err = _run(monkeypatch, capsys, "--store", str(tmp_path / "absent"))
    assert code != 0 and "not found" in err
    code, _, err = _run(monkeypatch, capsys, "--store", str(small_store), "--models", "vit,nope")
    assert code != 0 and "unknown model" in err and "nope" in err
    code, _, err = _run(monkeypatch, capsys, "--store", str(small_store), "--dataset", "imdb")
    assert code != 0 and "unknown dataset" in err
    code, _, err = _run(monkeypatch, capsys, "--store", str(small_store), "--condition", "mca")
    assert code != 0 and "needs all 75 cells" in err  # strict mCA on an incomplete store
    assert "Traceback" not in err


def test_compare_single_seed_refuses(tmp_path, monkeypatch, capsys):
    s = _make_store(tmp_path / "one", seeds=1)
    code, out, err = _run(monkeypatch, capsys, "--store", str(s), "--condition", "clean")
    assert code == 0, err
    assert "refusing a claim" in err and "single seed" in err


def test_compare_two_seeds_marks_nothing_significant(tmp_path, monkeypatch, capsys):
    s = _make_store(tmp_path / "two", seeds=2)
    code, out, err = _run(monkeypatch, capsys, "--store", str(s), "--all-pairs", "--json")
    assert code == 0, err
    doc = json.loads(out)
    for name in ("pairwise", "wilcoxon_cells", "posthoc_wilcoxon", "friedman"):
        verdicts = {r["verdict"] for r in doc["tables"][name]}
        assert verdicts == {"not testable: 2 seeds"}, (name, verdicts)
        assert not any(r.get("reject") for r in doc["tables"][name])
    assert all(r["p"] == r["p"] for r in doc["tables"]["pairwise"])       # the numbers are still shown
    assert any("not independent evidence" in w for w in doc["warnings"])
    code, out, _ = _run(monkeypatch, capsys, "--store", str(s), "--all-pairs")
    assert "not testable: 2 seeds" in out
    assert not re.search(r"(?<!not )significant", out.replace("not significant", ""))


def test_compare_defaults_match_the_report(tmp_path, monkeypatch, capsys):
    """Image and text models in one store: ViT is the reference on the image dataset, Transformer on the
    text one, no pair mixes modalities; piped tables fit 100 columns (wrapped, never cut), or with --wide are
    as wide as they need."""
    path = tmp_path / "mixed"
    rng = np.random.default_rng(1)
    for ds, models, conds in (("cifar10", ("vit", "dvit", "dgvit"), CELLS),
                              ("imdb", ("transformer", "dt", "dgt"), [("char_swap", s) for s in range(1, 6)])):
        for k, model in enumerate(models):
            for seed in range(3):
                w = store.RunWriter(path, f"eval-{ds}-{model}-{seed}",
                                    base=dict(kind="eval", model=model, dataset=ds, seed=seed, split="test",
                                              metric="accuracy", n=100))
                w.add_rows([dict(condition="clean", severity=0, value=0.8 + 0.01 * k + 0.003 * rng.standard_normal())]
                           + [dict(condition=c, severity=sv, value=0.7 - 0.03 * sv + 0.01 * k
                                   + 0.003 * rng.standard_normal()) for c, sv in conds])
    code, out, err = _run(monkeypatch, capsys, "--store", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["info"]["references"] == {"cifar10": "vit", "imdb": "transformer"}
    pw = pd.DataFrame(doc["tables"]["pairwise"])
    assert set(pw.loc[pw["dataset"] == "cifar10", "model_b"]) == {"vit"}
    assert set(pw.loc[pw["dataset"] == "imdb", "model_b"]) == {"transformer"}
    assert not any("in common" in w or re.search(r"\b(dt|dgt|transformer) vs (vit|dvit|dgvit)\b", w)
                   for w in doc["warnings"]), doc["warnings"]
    code, out, _ = _run(monkeypatch, capsys, "--store", str(path))
    assert max(len(line) for line in out.splitlines()) <= 100 and "…" not in out    # 100 columns, nothing cut
    code, out, _ = _run(monkeypatch, capsys, "--store", str(path), "--wide")
    assert max(len(line) for line in out.splitlines()) > 120 and "…" not in out    # --wide: never cut at 80


def test_compare_latex_compiles(small_store, tmp_path, monkeypatch, capsys, compile_latex):
    tex = tmp_path / "cmp.tex"
    code, _, err = _run(monkeypatch, capsys, "--store", str(small_store), "--all-pairs", "--latex", str(tex))
    assert code == 0, err
    text = tex.read_text()
    assert "χ" not in text and "Σ" not in text and "−" not in text and "Δ" not in text   # all in math mode
    assert "\\toprule" in text and "not independent evidence" in text
    assert compile_latex([tex]) == {}
