"""``dgsa-bench report``: every figure / table recipe from a small synthetic store (no model is run).

The store is built with :class:`store.RunWriter` and :func:`rollout_runs.save_rollout_set` exactly as the
training / evaluation / rollout code writes it: 3 image models and 3 text models × 3 seeds, clean + corrupted
(or noisy) cells, per-epoch curves, benchmark rows, rollout rows and rollout sets.
"""
from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.config import resolve_config
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.models import get_model_config
from robustbench_dgsa.report.build import build_report
from robustbench_dgsa.report.published import load_published, paper_variant, published_value

CORRUPTIONS = ["gaussian_noise", "fog", "contrast", "jpeg_compression", "spatter"]
TEXT_NOISE = ["char_swap", "keyboard", "word_dropout"]


def make_store(store_dir: Path, seeds=(0, 1, 2), corruptions=CORRUPTIONS, text_noise=TEXT_NOISE, epochs=3,
               rollout_sets: bool = True, text: bool = True, image_dataset: str = "synthetic-vision") -> Path:
    """A small store with every kind of row the report reads; deterministic values."""
    from robustbench_dgsa.rollout.runs import save_rollout_set

    rng = np.random.default_rng(0)
    specs = [(image_dataset, ("vit", "dvit", "dgvit"), list(corruptions), "image")]
    if text:
        specs.append(("synthetic-text", ("transformer", "dt", "dgt"), list(text_noise), "text"))
    for ds, models, conds, modality in specs:
        for k, model in enumerate(models):
            cfg = resolve_config(get_model_config(model), ds, "tiny")
            h = cfg.hash()
            for seed in seeds:
                base = dict(model=model, config_hash=h, dataset=ds, seed=seed)
                tw = store.RunWriter(store_dir, f"train-{ds}-{model}-{seed}", dict(base, kind="train"))
                tw.write_provenance({"kind": "train", "config": cfg.to_dict(), "config_hash": h, "seed": seed})
                rows = []
                for ep in range(1, epochs + 1):
                    for split in ("train", "val"):
                        rows.append(dict(split=split, metric="loss", epoch=ep,
                                         value=1.5 / ep + 0.1 * k + rng.normal(0, .02)))
                        rows.append(dict(split=split, metric="accuracy", epoch=ep,
                                         value=min(.99, .4 + .1 * ep + .02 * k + rng.normal(0, .01))))
                tw.add_rows(rows)
                ew = store.RunWriter(store_dir, f"eval-{ds}-{model}-{seed}",
                                     dict(base, kind="eval", split="test", n=300, source="on-the-fly"))
                clean = .80 + .02 * k + rng.normal(0, .01)
                rows = [dict(condition="clean", severity=0, metric="accuracy", value=clean, source="synthetic")]
                for c in conds:
                    for s in range(1, 6):
                        rows.append(dict(condition=c, severity=s, metric="accuracy",
                                         value=clean - .06 * s * (1 - .1 * k) + rng.normal(0, .01)))
                        if modality == "text":
                            rows.append(dict(condition=c, severity=s, metric="cer", value=.03 * s))
                            rows.append(dict(condition=c, severity=s, metric="wer", value=.08 * s))
                ew.add_rows(rows)
                run = f"rollout-{ds}-{model}-{seed}"
                rw = store.RunWriter(store_dir, run, dict(base, kind="rollout", split="test"))
                modes = ["positive"] if model in ("vit", "transformer") else ["signed", "positive"]
                rows = []
                for mode in modes:
                    tag = f"{mode}|mean|d0"
                    rows += [dict(condition="clean", severity=0, metric="rollout_mass", source=f"{tag}|mass=positive",
                                  value=.3 + .1 * k + rng.normal(0, .01)),
                             dict(condition="clean", severity=0, metric="rollout_mass_chance", value=.25,
                                  source=f"{tag}|mass=positive")]
                    if modality == "image":
                        rows += [dict(condition=c, severity=s, metric="rollout_drift", source=tag,
                                      value=.9 - .05 * s + .02 * k + rng.normal(0, .01))
                                 for c in conds[:2] for s in range(1, 6)]
                rw.add_rows(rows)
                if rollout_sets and seed == seeds[0]:
                    mode = f"{modes[0]}|mean|d0"
                    if modality == "image":
                        imgs = (np.arange(4 * 16 * 16 * 3).reshape(4, 16, 16, 3) % 251).astype(np.uint8)
                        heat = np.linspace(-1 if modes[0] == "signed" else 0, 1, 4 * 16 * 16).reshape(4, 16, 16)
                        save_rollout_set(store_dir, run, kind="image", model=model, dataset=ds, seed=seed, mode=mode,
                                         labels=[0, 1, 0, 1], images=imgs, heatmaps=heat,
                                         meta={"classes": ["square", "circle"]})
                    else:
                        toks = [["[CLS]", "the", "film", "was", "great", "fun"], ["a", "dull", "plot"]]
                        scores = [np.linspace(-.2 if modes[0] == "signed" else 0, 1, len(t)) for t in toks]
                        save_rollout_set(store_dir, run, kind="text", model=model, dataset=ds, seed=seed, mode=mode,
                                         labels=[1, 0], tokens=toks, scores=scores,
                                         meta={"classes": ["negative", "positive"]})
            bw = store.RunWriter(store_dir, f"bench-{ds}-{model}",
                                 dict(model=model, config_hash=h, dataset=ds, kind="bench", source="cpu"))
            bw.add_rows([dict(metric="params", value=1e5 * (3 - k)), dict(metric="flops", value=2e7 * (3 - k)),
                         dict(metric="train_throughput", value=500. - 50 * k), dict(metric="latency_ms", value=5. + k),
                         dict(metric="peak_memory_mb", value=50. + 10 * k)])
    return store_dir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    store_dir = make_store(root / "store")
    out = build_report(store_dir, root / "report")
    return store_dir, out


def _index_links(out: Path) -> tuple[list[str], list[str]]:
    md = (out / "index.md").read_text()
    md_links = [x for x in re.findall(r"\]\(([^)]+)\)", md) if not x.startswith("#")]

    class P(HTMLParser):
        links: list[str] = []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            for key in ("href", "src"):
                if a.get(key) and not a[key].startswith("#"):
                    self.links.append(a[key])

    p = P()
    p.links = []
    p.feed((out / "index.html").read_text())
    return md_links, p.links


def test_every_recipe_writes_its_files(built):
    _, out = built
    for stem in ("fig4_severity_synthetic-vision", "fig4_severity_synthetic-text", "fig5_curves_synthetic-vision",
                 "fig5_curves_synthetic-text", "fig2_rollout_synthetic-vision", "fig3_rollout_synthetic-text",
                 "cd_diagram_synthetic-vision"):
        for ext in ("png", "pdf", "sources.json"):
            assert (out / f"{stem}.{ext}").stat().st_size > 0, f"{stem}.{ext}"
    assert (out / "fig3_rollout_synthetic-text.html").is_file()
    for stem in ("table1_accuracy_vision", "table3_accuracy_text", "table9_efficiency",
                 "robustness_synthetic-vision", "robustness_synthetic-text", "relative_ce_synthetic-vision",
                 "text_noise_synthetic-text", "significance_seeds_synthetic-vision",
                 "significance_cells_synthetic-vision", "friedman_synthetic-vision", "significance_seeds_synthetic-text",
                 "rollout_mass_synthetic-vision", "rollout_mass_synthetic-text", "rollout_drift_synthetic-vision",
                 "paper_table1", "paper_table2", "paper_table3", "paper_table7", "paper_table8", "paper_table9"):
        for ext in ("md", "tex", "sources.json"):
            assert (out / f"{stem}.{ext}").stat().st_size > 0, f"{stem}.{ext}"
        tex = (out / f"{stem}.tex").read_text()
        assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
        body = "\n".join(line for line in tex.splitlines() if not line.startswith("\\label"))
        assert "±" not in body and "_" not in body.replace("\\_", ""), stem  # escaped for LaTeX
    # PNGs are PNGs, PDFs are PDFs
    assert (out / "fig4_severity_synthetic-vision.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "fig4_severity_synthetic-vision.pdf").read_bytes()[:5] == b"%PDF-"
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_tables_put_ours_beside_the_papers(built):
    _, out = built
    t1 = (out / "table1_accuracy_vision.md").read_text()
    assert "| Synthetic" not in t1 and "synthetic vision (embedded)" in t1
    assert "dataset not in the paper" in t1          # synthetic data: no paper value, said so
    assert re.search(r"\| DGViT \| \d+\.\d\d ± \d+\.\d\d \| 3 \|", t1)
    t9 = (out / "table9_efficiency.md").read_text()
    assert "ours (cpu)" in t9 and "paper (A10G" in t9 and "6,591,626" in t9 and "| 1.441 |" in t9
    text = (out / "text_noise_synthetic-text.md").read_text()
    assert "| char swap | 5 | 15.0 | 40.0 |" in text  # realised CER / WER in %
    rob = (out / "robustness_synthetic-vision.md").read_text()
    assert "mCA over the benchmark cells present (20 of 75)" in rob
    drift = (out / "rollout_drift_synthetic-vision.md").read_text()
    assert "mean of all" in drift


def test_paper_row_is_matched_by_variant(tmp_path):
    pub = load_published()
    assert paper_variant({"attention": "mhsa", "ffn": "gelu", "ffn_ratio": 4.0}) == ("", "")
    assert paper_variant({"attention": "dgsa", "ffn": "swiglu", "ffn_ratio": 16 / 3, "ffn_dropout2": True}) \
        == ("16/3", "2")
    r = published_value(pub, "cifar10", "dgvit", tables=("1",), proj="4", drop="2")
    assert r["mean"] == pytest.approx(78.06) and r["sd"] == pytest.approx(0.41)
    r = published_value(pub, "svhn", "dvit", tables=("1",), proj="2", drop="2")   # ambiguous column
    assert r["mean"] == pytest.approx(93.39) and "|" in r["dataset"]
    r = published_value(pub, "imdb", "dgt", tables=("3",), proj="4", drop="1")     # Table 3 has no dropout
    assert r["mean"] == pytest.approx(86.97)
    assert published_value(pub, "synthetic-vision", "vit", tables=("1",)) is None


def test_index_links_resolve_and_record_sources(built):
    store_dir, out = built
    md_links, html_links = _index_links(out)
    assert len(md_links) > 40 and len(html_links) > 40
    for link in md_links + html_links:
        assert not link.startswith(("http:", "https:", "/")), link
        assert (out / link).is_file(), link
    html = (out / "index.html").read_text()
    for needle in ("Figure 2", "Figure 3", "Figure 4", "Figure 5", "Table 1", "Table 3", "Table 9",
                   "Wilcoxon", "Friedman", "Average-rank diagram", "Robustness summary", "Rollout salient mass"):
        assert needle in html, needle
    assert "<style>" in html and "<script" not in html
    src = json.loads((out / "fig4_severity_synthetic-vision.sources.json").read_text())
    assert src["store"] == "../store" and (out / src["store"]).resolve() == store_dir.resolve()   # relative
    assert len(src["run_ids"]) == 9 and src["config_hashes"] and src["git_commits"]
    assert re.fullmatch(r"[0-9a-f]{64}", src["rows_sha256"]) and src["n_rows"] > 0
    assert "Made from" in (out / "index.md").read_text()
    fig2 = json.loads((out / "fig2_rollout_synthetic-vision.sources.json").read_text())
    assert [s["file"].split("/")[:3] for s in fig2["rollout_sets"]] == [["..", "store", "rollouts"]] * 3


def test_paper_value_beside_ours_on_a_paper_dataset(tmp_path):
    store_dir = make_store(tmp_path / "store", seeds=(0, 1), corruptions=["fog"], text=False, rollout_sets=False,
                           epochs=1, image_dataset="cifar10")
    out = build_report(store_dir, tmp_path / "report", datasets=["cifar10"])
    t1 = (out / "table1_accuracy_vision.md").read_text()
    assert re.search(r"\| CIFAR-10 \| ViT \| \d+\.\d\d ± \d+\.\d\d \| 2 \| 75\.90 ± 0\.09 \| Table 1 \| [+-]\d+\.\d\d \|", t1)
    # registry DViT / DGViT: SwiGLU ×4, one dropout -> the paper's "proj ×4, drop ×1" rows
    assert "| 76.40 ± 0.40 | Table 1, proj×4 drop×1 |" in t1 and "| 77.77 ± 0.29 | Table 1, proj×4 drop×1 |" in t1
    t9 = (out / "table9_efficiency.md").read_text()
    assert "CIFAR-10" in t9 and "6,591,626" in t9


def test_missing_data_is_skipped_with_a_note(tmp_path):
    store_dir = make_store(tmp_path / "store", seeds=(0,), corruptions=["fog"], text=False, rollout_sets=False,
                           epochs=1)
    for p in (store_dir / "rows").glob("bench-*"):
        p.unlink()
    out = build_report(store_dir, tmp_path / "report")
    md = (out / "index.md").read_text()
    assert "Skipped: Table 3" in md and "Skipped: Figure 2" in md and "Skipped: Figure 3" in md
    assert "Skipped: Table 9 (ours)" in md
    assert (out / "fig4_severity_synthetic-vision.png").is_file()
    assert "single seed" in (out / "index.md").read_text()
    # a rebuild after the data changed removes artefacts it no longer makes
    (out / "stale.txt").write_text("not ours")
    shutil.rmtree(store_dir / "rows")
    (store_dir / "rows").mkdir()
    store.RunWriter(store_dir, "only-train", dict(kind="train", model="vit", dataset="synthetic-vision", seed=0)) \
        .add_rows([dict(split="train", metric="loss", value=1.0, epoch=1)])
    out = build_report(store_dir, out)
    assert not (out / "fig4_severity_synthetic-vision.png").exists()
    assert (out / "stale.txt").exists()            # files the report did not write are left alone
    assert (out / "fig5_curves_synthetic-vision.png").exists()


def test_bad_input_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        build_report(tmp_path / "nope", tmp_path / "out")
    store_dir = make_store(tmp_path / "store", seeds=(0,), corruptions=["fog"], text=False, rollout_sets=False,
                           epochs=1)
    with pytest.raises(UserError, match="not in the store"):
        build_report(store_dir, tmp_path / "out", datasets=["cifar10"])
    with pytest.raises(UserError, match="reference model"):
        build_report(store_dir, tmp_path / "out", reference="resnet")


def test_report_cli_and_pdfs_identical_across_builds(built, tmp_path):
    """A second build (through the CLI, one dataset) rewrites the same artefacts byte for byte."""
    from typer.testing import CliRunner

    from robustbench_dgsa.cli import app
    store_dir, out = built
    res = CliRunner().invoke(app, ["report", "--store", str(store_dir), "--out", str(tmp_path / "r"),
                                   "--datasets", "synthetic-text"])
    assert res.exit_code == 0, res.output
    again = tmp_path / "r"
    assert (again / "index.html").is_file()
    assert "index.html" in res.output and "DGT" in res.output
    assert not (again / "fig4_severity_synthetic-vision.png").exists()
    pdfs = sorted(p.name for p in again.glob("*.pdf"))
    assert {"fig4_severity_synthetic-text.pdf", "fig5_curves_synthetic-text.pdf", "fig3_rollout_synthetic-text.pdf",
            "cd_diagram_synthetic-text.pdf"} <= set(pdfs)
    for name in pdfs:
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    for name in ("table3_accuracy_text.tex", "paper_table9.md"):
        assert (out / name).read_text() == (again / name).read_text(), name
    name = "fig4_severity_synthetic-text.sources.json"   # the same but for the store's path relative to each report
    a, b = (json.loads((d / name).read_text()) for d in (out, again))
    assert (out / a.pop("store")).resolve() == (again / b.pop("store")).resolve() and a == b


# ------------------------------------------------------------------------------------------ navigation
def test_contents_link_every_artefact_and_findings_then_warnings_come_first(built):
    """Synthetic data only (the main job): the warnings come first, then the figures and tables; the Findings
    ("no claim (synthetic data)") come last, folded in one <details> block (HTML and Markdown)."""
    _, out = built
    page = (out / "index.html").read_text()
    nav = page[page.index("<nav"):page.index("</nav>")]
    ids = set(re.findall(r'id="([^"]+)"', page))
    targets = re.findall(r'href="#([^"]+)"', nav)
    assert targets[0] == "caveats" and targets[-1].startswith("findings") and "findings" in targets
    for t in targets:
        assert t in ids, t                                     # every contents entry lands somewhere
    for stem in ("fig4_severity_synthetic-vision", "table1_accuracy_vision", "cd_diagram_synthetic-vision",
                 "significance_seeds_synthetic-vision", "fig2_rollout_synthetic-vision", "paper_table9"):
        assert stem in targets and f'href="#{stem}"' in page.split("</nav>", 1)[1]   # listed + self-link
    h2 = re.findall(r'<h2 id="([^"]+)"', page)
    assert h2[0] == "caveats" and h2[-1] == "findings" and "Warnings and caveats" in page
    folded = page.split('<h2 id="findings"', 1)[1]
    assert folded.index("<details>") < folded.index("findings_claims") < folded.index("</details>")
    assert "no claim (synthetic data)" in folded
    md = (out / "index.md").read_text()
    assert md.index("## Warnings and caveats") < md.index("## Clean accuracy") < md.index("## Findings")
    assert md.index("## Findings") < md.index("<details>") < md.index("</details>")
    for anchor in re.findall(r"\]\(#([^)]+)\)", md):
        assert f'<a id="{anchor}"></a>' in md, anchor
    plain = __import__("html").unescape(page)
    assert "Seeds below the paper's 5" in plain and "Cells share models" in plain
    assert "Subset:" in plain                                   # tiny preset: max_train / max_test


def _verdicts(out: Path) -> list[str]:
    """Every value of a 'Verdict' column in the report's Markdown tables."""
    found = []
    for md in out.glob("*.md"):
        if md.name.startswith("findings") or md.name == "index.md":   # the Findings' own words (tested in
            continue                      # tests/analysis/test_findings.py); the index repeats every table
        lines = [ln for ln in md.read_text().splitlines() if ln.startswith("|")]
        if not lines:
            continue
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        col = next((c for c in ("Verdict", "Welch (sensitivity)") if c in header), None)   # the seed table's
        if col is None:                          # Welch column is a labelled sensitivity analysis, same words
            continue
        k = header.index(col)
        found += [[c.strip() for c in ln.strip("|").split("|")][k] for ln in lines[2:]]
    return found


@pytest.mark.parametrize("seeds", [(0,), (0, 1)])
def test_fewer_than_three_seeds_make_no_significance_claim(tmp_path, seeds):
    store_dir = make_store(tmp_path / "store", seeds=seeds, corruptions=["fog", "contrast"], text=False,
                           rollout_sets=False, epochs=1)
    out = build_report(store_dir, tmp_path / "report")
    verdicts = _verdicts(out)
    if len(seeds) > 1:
        assert verdicts and set(verdicts) == {f"not testable: {len(seeds)} seeds"}
    text = (out / "index.md").read_text() + "".join(p.read_text() for p in out.glob("*.tex"))
    assert not re.search(r"Significant\W+yes|\| significant \||\bsignificantly\b|consistent across conditions \|",
                         text)
    assert "not independent evidence" in text or len(seeds) == 1
    assert f"Seeds below the paper's 5: {len(seeds)} seed" in text


def test_five_seeds_still_report_the_seed_level_tests(tmp_path):
    store_dir = make_store(tmp_path / "store", seeds=(0, 1, 2, 3, 4), corruptions=["fog", "contrast"], text=False,
                           rollout_sets=False, epochs=1)
    out = build_report(store_dir, tmp_path / "report")
    seeds_tab = (out / "significance_seeds_synthetic-vision.md").read_text()
    assert "| 5/5 |" in seeds_tab and "Welch t" in seeds_tab and "Holm over a family of" in seeds_tab
    verdicts = _verdicts(out)
    assert "significant" in verdicts and not any(v.startswith("not testable") for v in verdicts)
    assert "Seeds below the paper's" not in (out / "index.md").read_text()
    cells = (out / "significance_cells_synthetic-vision.md").read_text()
    assert "consistent across conditions" in cells and "| significant |" not in cells


def test_frost_substitute_is_flagged(tmp_path):
    store_dir = make_store(tmp_path / "store", seeds=(0,), corruptions=["frost"], text=False, rollout_sets=False,
                           epochs=1)
    for run_id in set(store.load_results(store_dir).query("kind == 'eval'")["run_id"]):
        (store_dir / "runs" / f"{run_id}.json").write_text(json.dumps({"kind": "eval", "frost_source": "procedural"}))
    page = (build_report(store_dir, tmp_path / "report") / "index.html").read_text()
    caveats = page[page.index('id="caveats"'):page.index("</ul>", page.index('id="caveats"'))]
    assert "frost" in caveats and "procedural" in caveats


# ------------------------------------------------------------------------------------------ figures
_HOSTILE_RC = """backend: pdf
figure.dpi: 37
savefig.dpi: 55
savefig.bbox: tight
savefig.transparent: True
font.size: 21
font.family: serif
lines.linewidth: 6
lines.marker: x
axes.prop_cycle: cycler('color', ['r', 'g'])
axes.grid: False
image.cmap: jet
pdf.compression: 0
"""


def test_figures_identical_across_builds_and_with_a_hostile_matplotlibrc(tmp_path):
    import subprocess
    import sys

    # three seeds: with fewer the rank diagram is not drawn (not testable), and it is one of the figures checked
    store_dir = make_store(tmp_path / "store", seeds=(0, 1, 2), corruptions=["fog", "contrast"], text=False,
                           epochs=2)
    a = build_report(store_dir, tmp_path / "a")
    b = build_report(store_dir, tmp_path / "b")
    rc = tmp_path / "mplrc"
    rc.mkdir()
    (rc / "matplotlibrc").write_text(_HOSTILE_RC)
    env = dict(__import__("os").environ, MPLCONFIGDIR=str(rc), OMP_NUM_THREADS="1")
    code = ("import sys, matplotlib; assert matplotlib.rcParams['font.size'] == 21; "
            "from robustbench_dgsa.report.build import build_report; build_report(sys.argv[1], sys.argv[2])")
    subprocess.run([sys.executable, "-c", code, str(store_dir), str(tmp_path / "c")], check=True, env=env)
    figs = sorted(p.name for p in a.iterdir() if p.suffix in (".png", ".pdf"))
    assert len(figs) >= 8 and {"fig2_rollout_synthetic-vision.png", "cd_diagram_synthetic-vision.pdf"} <= set(figs)
    for name in figs:
        ref = (a / name).read_bytes()
        assert (b / name).read_bytes() == ref, name
        assert (tmp_path / "c" / name).read_bytes() == ref, f"{name} changes with the user's matplotlibrc"
    from PIL import Image
    for name in figs:
        if name.endswith(".png"):
            with Image.open(a / name) as im:
                assert round(im.info["dpi"][0]) == 200, name


def test_no_text_is_clipped_in_any_figure(tmp_path):
    from robustbench_dgsa.report.figures import cd_diagram, severity_figure
    from robustbench_dgsa.util.figures import text_overflow
    import pandas as pd

    rows = [dict(model=m, seed=0, condition=c, severity=s, value=80 - 5 * s - k)
            for k, m in enumerate(("vit", "dvit", "dgvit")) for c in ("gaussian_noise", "elastic_transform")
            for s in range(1, 6)]
    acc = pd.DataFrame(rows)
    clean = pd.DataFrame([dict(model=m, seed=0, value=85.0) for m in ("vit", "dvit", "dgvit")])
    fig = severity_figure(acc, clean, ["gaussian_noise", "elastic_transform"], ["vit", "dvit", "dgvit"],
                          labels={"vit": "ViT", "dvit": "DViT", "dgvit": "DGViT"},
                          mean_panel=("mean of 15 benchmark corruptions", ["gaussian_noise", "elastic_transform"]))
    assert text_overflow(fig) == []
    long = {"A very long custom model name (variant ×4)": 1.2, "DGViT": 2.1, "Another long name, dropout ×2": 2.7}
    assert text_overflow(cd_diagram(long, [["DGViT", "Another long name, dropout ×2"]], note="bars: Holm")) == []


# ------------------------------------------------------------------------------------------ LaTeX
def test_latex_escape_math_and_minus():
    from robustbench_dgsa.report.tables import Table, latex_escape
    assert latex_escape("χ² = 3.1, p < 0.001") == "$\\chi ^{2}$ = 3.1, p $<$ 0.001"
    assert latex_escape("Σ_s err") == "$\\Sigma$\\_s err"
    assert latex_escape("-0.53") == "$-$0.53" and latex_escape("[-1.20, 3.4]") == "[$-$1.20, 3.4]"
    assert latex_escape("x-ray 5%") == "x-ray 5\\%" and latex_escape("Δ ours − paper") == "$\\Delta$ ours $-$ paper"
    wide = Table([f"c{i}" for i in range(10)], [["1"] * 10], "wide").to_latex()
    assert "\\begin{table*}" in wide and "\\resizebox" in wide
    assert "\\begin{table}" in Table(["a", "b"], [["1", "2"]]).to_latex()


def test_every_report_table_compiles(built, compile_latex):
    _, out = built
    tex = list(out.glob("*.tex"))
    assert len(tex) >= 20
    assert compile_latex(tex) == {}
