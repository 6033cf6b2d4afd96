"""The report a reader can trust at a glance (issue 21, "The report"): single-seed tables say so, no rank diagram
without a test, one rounding per number, full-precision p-values in ``compare --json``, caveats beside what they
qualify, relative paths, the machine load of Table 9, procedural frost marked wherever it shows, job-named progress
lines, narrow-screen HTML, dataset labels from the registry.

One small synthetic store (image models only, written as the engine writes it: a 3-seed and a 2-seed dataset) and
one report of it keep the file fast; the main job's quick run is covered by tests/jobs/test_reproduce.py.
"""
from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from robustbench_dgsa import store
from robustbench_dgsa.report import accuracy_figures, labels
from robustbench_dgsa.report.document import Report
from robustbench_dgsa.report.build import build_report
from robustbench_dgsa.report.tables import fmt_mean_sd, fmt_num, rounded

sys.path.insert(0, str(Path(__file__).parent))
from test_report import make_store  # noqa: E402  (the report tests' store builder)

CORRUPTIONS = ["gaussian_noise", "fog", "frost", "contrast"]


def _drop_runs(store_dir: Path, kind: str, seeds: set[int]) -> None:
    """Remove every run of ``kind`` with one of ``seeds`` from a freshly written store (rows + provenance)."""
    for f in (store_dir / "rows").glob(f"{kind}-*.jsonl"):
        if int(f.stem.rsplit("-", 1)[1]) in seeds:
            f.unlink()
            (store_dir / "runs" / f"{f.stem}.json").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One store, one report (root/report beside root/store), image models only:

    * synthetic-vision: 3 seeds, 4 corruptions with procedural frost, rollout rows of seed 0 only, a bench row
      with the machine load;
    * cifar10 (labelled CIFAR-10): 2 seeds (nothing testable), 2 corruptions, rollout rows of both seeds.
    """
    root = tmp_path_factory.mktemp("fixes")
    sd = make_store(root / "store", seeds=(0, 1, 2), corruptions=CORRUPTIONS, text=False, rollout_sets=False,
                    epochs=1)
    _drop_runs(sd, "rollout", {1, 2})
    for run_id in set(store.load_results(sd).query("kind == 'eval'")["run_id"]):
        prov = sd / "runs" / f"{run_id}.json"
        rec = json.loads(prov.read_text()) if prov.is_file() else {"kind": "eval"}
        prov.write_text(json.dumps({**rec, "frost_source": "procedural"}))
    make_store(sd, seeds=(0, 1), corruptions=["fog", "contrast"], text=False, rollout_sets=False, epochs=1,
               image_dataset="cifar10")
    w = store.RunWriter(sd, "bench-load-vit", dict(model="vit", dataset="synthetic-vision", kind="bench",
                                                   source="cpu:x86_64x1"))
    w.write_provenance({"kind": "bench", "cpu_cores": 2, "load_avg_1m": 3.5})
    w.add_rows([dict(metric="latency_ms", value=4.0), dict(metric="load_avg_1m", value=3.5)])
    return sd, build_report(sd, root / "report")


def _md_table(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip().strip("|").split(" | ")] for ln in lines]
    return cells[0], cells[2:]


# ------------------------------------------------------------------------------ 1. single-seed rollout tables
def test_single_seed_rollout_tables_name_their_seed(built):
    _, out = built
    for stem in ("rollout_mass_synthetic-vision", "rollout_drift_synthetic-vision"):
        text = (out / f"{stem}.md").read_text()
        assert "single seed: seed 0" in text and "every value is from seed 0" in text
        assert "over seeds" not in text and " ± " not in text, stem
    md = (out / "index.md").read_text()
    rollout = md[md.index('<a id="rollout_mass_synthetic-vision"></a>'):md.index('<a id="efficiency"></a>')]
    assert "mean ± sd over seeds" not in rollout.lower() and "± SD over seeds" not in rollout


def test_several_rollout_seeds_are_aggregated(built):
    _, out = built            # rollout rows of seeds 0 and 1
    text = (out / "rollout_mass_cifar10.md").read_text()
    assert "Mean ± sample SD over 2 seeds (0, 1)" in text and "single seed" not in text
    _, rows = _md_table(out / "rollout_mass_cifar10.md")
    assert all(" ± " in c for r in rows for c in r[2:] if c != "—")


# ------------------------------------------------------------------------------ 2. rank diagram
def test_no_rank_diagram_with_two_seeds(built):
    _, out = built
    assert not (out / "cd_diagram_cifar10.png").exists() and (out / "cd_diagram_synthetic-vision.png").exists()
    md = (out / "index.md").read_text()
    assert "*Skipped: Average-rank diagram: CIFAR-10* — not drawn: not testable (n &lt; 3) — 2 seeds per model" in md


def test_every_pair_differs_is_said_in_the_caption(built):
    _, out = built
    assert (out / "cd_diagram_synthetic-vision.png").is_file()
    post = _md_table(out / "significance_cells_synthetic-vision.md")[1]
    assert post and all(r[-1].startswith("consistent") for r in post)   # every pair told apart ...
    md = (out / "index.md").read_text()
    assert "No bars: every pair differs" in md                          # ... and the caption says so


def test_an_untestable_diagram_is_marked_as_such():
    from robustbench_dgsa.report.figures import cd_diagram
    fig = cd_diagram({"A": 1.2, "B": 1.8, "C": 3.0}, None, note="no bars: pairwise tests not testable")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "not testable (n < 3)" in texts


# ------------------------------------------------------------------------------ 3. one number, one print
def test_one_quantity_prints_once_whichever_way_it_was_summed():
    a = float(np.mean(np.r_[np.ones(197), np.zeros(603)]))          # 197/800 as a mean of 800 cells
    b = float(np.mean([np.mean(np.r_[np.ones(k), np.zeros(100 - k)]) for k in (20, 30, 27, 25, 24, 26, 23, 22)]))
    c = 0.24624999999999997                                           # ... and as an ulp either side
    assert b * 8 * 100 == pytest.approx(197)
    assert {rounded(x * 100) for x in (a, b, c, 0.24625000000000002)} == {"24.62"}
    assert fmt_mean_sd(c * 100, 0.0) == fmt_mean_sd(0.24625000000000002 * 100, 0.0) == "24.62 ± 0.00"
    assert fmt_num(-0.0049999999999999, 2) == fmt_num(-0.005000000000000001, 2)


def test_clean_accuracy_is_the_same_string_in_table1_and_the_robustness_table(built):
    _, out = built
    h1, t1 = _md_table(out / "table1_accuracy_vision.md")
    hr, tr = _md_table(out / "robustness_synthetic-vision.md")
    ours = {r[h1.index("Model")]: r[h1.index("Ours (%)")] for r in t1}
    summ = {r[0]: r[hr.index("Clean")] for r in tr}
    assert ours and ours == summ


def test_compare_json_writes_p_values_at_full_precision(built):
    from scipy import stats as sps
    from typer.testing import CliRunner

    from robustbench_dgsa.cli import app
    sd, _ = built
    res = CliRunner().invoke(app, ["compare", "--store", str(sd), "--dataset", "synthetic-vision", "--models",
                                   "vit,dvit,dgvit", "--condition", "clean", "--all-pairs", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    pw = pd.DataFrame(doc["tables"]["pairwise"])
    ev = store.load_results(sd).query("kind == 'eval' and condition == 'clean' and metric == 'accuracy' "
                                      "and dataset == 'synthetic-vision'")
    assert set(pw["dataset"]) == {"synthetic-vision"} and len(pw) == 3
    acc = {m: g.sort_values("seed")["value"].to_numpy() for m, g in ev.groupby("model")}
    for r in pw.itertuples(index=False):
        expected = sps.ttest_ind(acc[r.model_a], acc[r.model_b], equal_var=False).pvalue
        assert r.p == float(expected)             # the float itself, not a rounded copy
    # Holm in the JSON is Holm of the JSON's p-values (not of rounded ones)
    p = pw["p"].to_numpy(float)
    order = np.argsort(p)
    holm = np.maximum.accumulate(np.minimum(1, (len(p) - np.arange(len(p))) * p[order]))
    assert np.array_equal(pw["p_holm"].to_numpy(float)[order], holm)


def test_comparison_records_keep_tiny_p_values():
    from robustbench_dgsa.analysis.compare import Comparison
    cmp = Comparison(tables={"pairwise": pd.DataFrame({"p": [5.96e-14, float("nan")], "p_holm": [1.192e-13, 1.0],
                                                       "model_a": ["a", "b"]})})
    recs = json.loads(json.dumps(cmp.to_dict()))["tables"]["pairwise"]
    assert recs[0]["p"] == 5.96e-14 and recs[0]["p_holm"] == 2 * 5.96e-14 and recs[1]["p"] is None


# ------------------------------------------------------------------------------ 4. caveats, paths, load
def test_retention_has_its_caveat_beside_it(built):
    text = (built[1] / "robustness_synthetic-vision.md").read_text()
    header, _ = _md_table(built[1] / "robustness_synthetic-vision.md")
    assert "Retention†" in header
    assert "† Retention = robust accuracy / clean accuracy" in text and "at chance accuracy keeps 100 %" in text


def test_configs_count_is_explained(built):
    md = (built[1] / "index.md").read_text()
    line = next(ln for ln in md.splitlines() if "Setup on synthetic vision" in ln)
    assert "(3 configs)" not in line
    assert "3 run configurations (one per model" in line and "all with this size and schedule" in line


def test_paper_footnotes_are_marked_on_their_rows(built):
    out = built[1]
    header, rows = _md_table(out / "paper_table8.md")
    text = (out / "paper_table8.md").read_text()
    note = re.search(r"^- (\S) paper gives one row for DT/DGT$", text, re.M)
    assert note, text
    mark = note.group(1)
    for r in rows:
        assert r[0].endswith(mark) == r[0].startswith(("DT", "DGT")), r       # the rows it is about, only those
    h1, _ = _md_table(out / "paper_table1.md")
    t1 = (out / "paper_table1.md").read_text()
    m1 = re.search(r"^- (\S) paper text gives 3 values", t1, re.M).group(1)
    assert [h for h in h1 if h.endswith(m1)] == [f"FashionMNIST or SVHN{m1}"]   # the column it is about
    assert "Note: measured at 224x224" in (out / "paper_table9.md").read_text()  # true of every value: plain


def test_warnings_are_said_once(built):
    md = (built[1] / "index.md").read_text()
    block = md[md.index("## Warnings and caveats"):md.index('<a id="accuracy"></a>')]
    assert block.count("not independent evidence") == 1        # the caveat, not again per dataset
    assert "fewer than 5 seeds" not in block and "Seeds below the paper's 5" in block
    assert "mCA incomplete" not in block
    items = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert len(items) == len(set(items))


def test_paths_are_relative_to_the_report(built):
    sd, out = built
    root = str(sd.parent.resolve())
    md, html = (out / "index.md").read_text(), (out / "index.html").read_text()
    assert "<code>../store</code>" in md
    for path in [out / "index.md", out / "index.html", *out.glob("*.sources.json")]:
        text = path.read_text()
        assert root not in text and not re.search(r"(?<![\w.])/(tmp|home|root|work)/", text), path.name
    src = json.loads((out / "table1_accuracy_vision.sources.json").read_text())
    assert src["store"] == "../store" and (out / src["store"]).resolve() == sd.resolve()
    assert html.count("../store") >= 1


def test_table9_prints_the_machine_load(built):
    text = (built[1] / "table9_efficiency.md").read_text()
    assert "Machine load during our timings" in text and "ViT 3.50 on 2 cores" in text
    assert "A load above the core count" in text


def test_benchmark_records_the_machine_load():
    from robustbench_dgsa.jobs.bench import Measurement, machine_load
    load, cores = machine_load()
    assert cores >= 1 and (np.isnan(load) or load >= 0)
    assert {"load_avg_1m", "cpu_cores"} <= set(Measurement.__dataclass_fields__)


# ------------------------------------------------------------------------------ 5. procedural frost
def test_procedural_frost_is_marked_wherever_its_numbers_show(built):
    out = built[1]
    md = (out / "index.md").read_text()
    fig4 = md[md.index('<a id="fig4_severity_synthetic-vision"></a>'):]
    assert labels.PROCEDURAL_FROST_NOTE in fig4[:fig4.index("<sub>")]          # Figure 4's caption
    header, _ = _md_table(out / "robustness_synthetic-vision.md")
    assert {"mCA‡", "mCE‡", "weather‡"} <= set(header) and "noise" in header
    assert "‡ " + labels.PROCEDURAL_FROST_NOTE in (out / "robustness_synthetic-vision.md").read_text()
    _, rows = _md_table(out / "relative_ce_synthetic-vision.md")
    assert "(procedural)" not in (out / "relative_ce_cifar10.md").read_text()   # not where frost was real/absent
    names = [r[0] for r in rows]
    assert "frost (procedural)" in names and "fog" in names and names[0].endswith("‡")


def test_figure4_frost_panel_says_procedural(built, monkeypatch):
    seen = {}

    def spy(*a, **kw):   # what the recipe would draw, not drawn
        seen.update(kw["condition_labels"])
    monkeypatch.setattr(accuracy_figures, "severity_figure", spy)
    sd, _ = built
    rep = Report(sd, sd.parent / "unused", store.load_results(sd), store.load_runs(sd))
    accuracy_figures.severity_figures(rep, {"synthetic-vision": "image"})
    assert seen["frost"] == "frost (procedural)" and seen["fog"] == "fog"


def test_preview_grid_labels_procedural_frost_rows():
    from corruptions.frost import PROCEDURAL, FrostTextures
    from corruptions.preview import _row_name
    proc = FrostTextures(PROCEDURAL, ())
    assert _row_name("frost", proc) == "frost (procedural)"
    assert _row_name("fog", proc) == "fog" and _row_name("frost", SimpleNamespace(source="dir:x")) == "frost"


def test_corrupt_says_procedural_frost_once_in_one_line(tmp_path, run_main, monkeypatch):
    import corruptions.frost as frost_mod
    monkeypatch.setattr(frost_mod, "_DEFAULT", None)
    monkeypatch.setattr(frost_mod, "_imagecorruptions_files", lambda: None)   # no real textures anywhere
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 255, (2, 32, 32, 3)).astype(np.uint8))
    code, _, err = run_main(["corrupt", "-i", "x.npy", "--corruption", "frost", "--severity", "1", "--out", "c",
                             "--preview", "p.png"], tmp_path)
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "procedural" in ln.lower() and "warning" in ln.lower()]
    assert len(lines) == 1, err
    assert "warnings.warn" not in err and "ResultWarning" not in err and "Traceback" not in err


# ------------------------------------------------------------------------------ 6. progress lines
def test_worker_lines_name_their_job(monkeypatch, capsys):
    from robustbench_dgsa.jobs import reproduce as rp
    from robustbench_dgsa.util.progress import log

    monkeypatch.setattr(rp, "_train_and_evaluate", lambda *a: log("[evaluate] 95 corrupted conditions: mean 0.7"))
    monkeypatch.setattr(rp, "_rollout", lambda *a: log("[rollout] done"))
    job = SimpleNamespace(model="dvit", dataset="synthetic-vision", seed=1)
    rp._job_task(None, job, False, {}, True)
    rp._job_task(None, job, False, {}, True, False)
    err = capsys.readouterr().err.splitlines()
    tag = "[dvit synthetic-vision seed 1] "
    assert err == [tag + "[evaluate] 95 corrupted conditions: mean 0.7", tag + "[rollout] done", tag + "[rollout] done"]
    log("after")
    assert capsys.readouterr().err == "after\n"                     # the prefix ends with the job


def test_time_line_says_phases_overlap():
    from robustbench_dgsa.cli.report_cmd import _time_line
    t = {"phases": {"corrupt": 90.0, "train_evaluate": 300.0, "rollout": 0.0, "bench": 20.0, "report": 50.0,
                    "total": 370.0}, "phase_order": ["corrupt", "train_evaluate", "rollout", "bench", "report"],
         "within": {"corrupt": "train_evaluate"}}
    line = _time_line(t)
    assert line.startswith("Time: 370.0s wall (corrupt 90.0s within train_evaluate, train_evaluate 300.0s")
    assert "phases overlap" in line
    t["phases"]["corrupt"] = 0.0
    assert "overlap" not in _time_line(t)


# ------------------------------------------------------------------------------ 7. narrow screens
class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack: list[tuple[str, dict]] = []
        self.imgs: list[tuple[str, str | None]] = []      # (src, href of the enclosing link)
        self.pm_cells: list[str] = []                     # classes of the cells holding "±"
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            link = next((x for t, x in reversed(self.stack) if t == "a"), None)
            self.imgs.append((a["src"], link.get("href") if link else None))
        if tag == "td":
            self._cell = a.get("class", "")
        self.stack.append((tag, a))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop()[0] != tag:
            pass
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None and re.search(r"\d ± \d", data):
            self.pm_cells.append(self._cell)


def test_narrow_screen_html(built):
    page = (built[1] / "index.html").read_text()
    css = page[page.index("<style>"):page.index("</style>")]
    assert re.search(r"\.tablewrap th:first-child,\.tablewrap td:first-child\{position:sticky;left:0", css)
    assert "overflow-x:auto" in css and "radial-gradient" in css          # scrollable, with a shadow cue
    assert re.search(r"@media \(max-width:700px\)\{\.scrollhint\{display:block\}\}", css)
    assert "td.nw{white-space:nowrap}" in css
    p = _Html()
    p.feed(page)
    assert p.pm_cells and all("nw" in c.split() for c in p.pm_cells)   # every "mean ± SD" stays on one line
    assert p.imgs and all(href == src for src, href in p.imgs)          # every figure opens full size
    n_wide = sum(1 for m in re.finditer(r"<table>.*?</thead>", page, re.S)
                 if len(re.findall(r"<th[ >]", m.group())) >= 5)
    assert page.count('class="scrollhint"') == n_wide > 0


# ------------------------------------------------------------------------------ 8. one table of dataset facts
def test_dataset_labels_come_from_the_registry():
    from robustbench_dgsa.data.registry import DATASETS
    assert not hasattr(labels, "DATASET_LABELS")
    assert all(info.label for info in DATASETS.values())
    assert labels.dataset_label("cifar10") == DATASETS["cifar10"].label == "CIFAR-10"
    assert labels.dataset_label("imagenet") == "ImageNet-1k" and labels.dataset_label("folder:x") == "folder:x"


def test_marked_tables_compile(built, compile_latex):
    out = built[1]
    tex = [out / f"{s}.tex" for s in ("paper_table8", "paper_table1", "robustness_synthetic-vision",
                                      "relative_ce_synthetic-vision", "rollout_mass_synthetic-vision")]
    assert compile_latex(tex) == {}
