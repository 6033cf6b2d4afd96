"""robustbench_dgsa/report/published.csv (package data): the paper's published numbers, checked cell by cell against the paper's text.

The paper text (``../shared/papers/dgsa-paper.txt``) is parsed independently here, table by table, and every
number it prints for Tables 1, 2, 3, 7, 8 and 9 must be in the CSV with the same digits (and nothing else
may be). Skipped when the paper text is absent (a user's machine); the structural checks always run.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from robustbench_dgsa.models import MODEL_NAMES
from robustbench_dgsa.report.published import PUBLISHED_CSV, load_published

PAPER = Path(__file__).resolve().parents[3] / "shared" / "papers" / "dgsa-paper.txt"
PM = re.compile(r"(\d+\.\d+) \\pm (\d+\.\d+)")
TIMES = re.compile(r"\$\\times (\S+?)\$")


@pytest.fixture(scope="module")
def paper_lines() -> list[str]:
    if not PAPER.is_file():
        pytest.skip("paper text (../shared/papers/dgsa-paper.txt) not available")
    return PAPER.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def pub():
    return load_published()


def _section(lines: list[str], start: str, stop: str) -> list[str]:
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(stop))
    return lines[i + 1:j]


def _cells(pub, table: str) -> dict[tuple, tuple[str, str]]:
    g = pub[pub["table"] == table]
    return {(r.dataset, r.model, r.proj, r.drop, r.metric): (r.mean_text, r.sd_text) for r in g.itertuples()}


def _accuracy_rows(section: list[str], baseline: str, models: tuple[str, str]) -> list[tuple]:
    """(model, proj, drop, [(mean, sd), ...]) per row of Table 1 / 3 as printed."""
    out, current = [], baseline
    for line in section:
        head = line.split("\t")[0].strip()
        if head.startswith(("DViT", "DT")) and "\\pm" not in line:
            current = models[0]
        elif head.startswith(("DGViT", "DGT")) and "\\pm" not in line:
            current = models[1]
        pairs = PM.findall(line)
        if not pairs:
            continue
        times = TIMES.findall(line)
        proj = times[0] if times else ""
        drop = times[1] if len(times) > 1 else ""
        out.append((current if times else baseline, proj, drop, pairs))
    return out


def test_table1_every_cell(paper_lines, pub):
    rows = _accuracy_rows(_section(paper_lines, "Table 1:", "Table 2:"), "vit", ("dvit", "dgvit"))
    assert len(rows) == 9
    cells = _cells(pub, "1")
    seen = set()
    for model, proj, drop, pairs in rows:
        datasets = ["cifar10", "cifar100", "fashion-mnist", "svhn"] if model == "vit" else \
            ["cifar10", "cifar100", "fashion-mnist|svhn"]   # the text gives 3 values for 4 columns
        assert len(pairs) == len(datasets), (model, proj, drop)
        for ds, (m, s) in zip(datasets, pairs):
            key = (ds, model, proj.replace("16/3", "16/3"), drop, "accuracy")
            assert cells[key] == (m, s), key
            seen.add(key)
    assert seen == set(cells)


def test_table2_every_cell(paper_lines, pub):
    sec = _section(paper_lines, "Table 2:", "These narrow")
    cells = _cells(pub, "2")
    vit = PM.findall(next(line for line in sec if line.startswith("ViT")))
    assert cells[("imagenet", "vit", "", "", "accuracy")] == vit[0]
    found = {}
    model, variants, values = None, [], []
    for line in sec + ["END"]:
        if line.startswith(("DViT", "DGViT", "END")):
            for (p, d), v in zip(variants, values):
                found[("imagenet", model, p, d, "accuracy")] = v
            model = "dvit" if line.startswith("DViT") else "dgvit"
            variants, values = [], []
        elif TIMES.findall(line):
            variants.append(tuple(TIMES.findall(line)))
        elif PM.findall(line) and model:
            values.append(PM.findall(line)[0])
    assert len(found) == 4
    for key, v in found.items():
        assert cells[key] == v, key
    assert set(found) | {("imagenet", "vit", "", "", "accuracy")} == set(cells)


def test_table3_every_cell(paper_lines, pub):
    rows = _accuracy_rows(_section(paper_lines, "Table 3:", "Models. We compare"), "transformer", ("dt", "dgt"))
    assert len(rows) == 7
    cells = _cells(pub, "3")
    datasets = ["rotten-tomatoes", "imdb", "mnli", "agnews", "20newsgroups"]
    seen = set()
    for model, proj, _, pairs in rows:
        assert len(pairs) == 5
        for ds, v in zip(datasets, pairs):
            key = (ds, model, proj, "", "accuracy")
            assert cells[key] == v, key
            seen.add(key)
    assert seen == set(cells)


def test_tables_7_and_8_every_cell(paper_lines, pub):
    cells7 = _cells(pub, "7")
    seen = set()
    for line in _section(paper_lines, "Table 7:", "Table 8:"):
        parts = line.split("\t")
        if not parts[-1].endswith("M"):
            continue
        proj = TIMES.findall(line)
        values = [p[:-1] for p in parts[1:]]
        models = ["transformer"] if parts[0] == "Transformer" else ["dt", "dgt"]
        for m in models:
            for ds, v in zip(["rotten-tomatoes", "imdb", "agnews", "20newsgroups"], values):
                key = (ds, m, proj[0] if proj else "", "", "params")
                assert cells7[key] == (v, ""), key
                seen.add(key)
    assert seen == set(cells7)
    cells8 = _cells(pub, "8")
    seen = set()
    for line in _section(paper_lines, "Table 8:", "Dataset\tModel"):
        parts = line.split("\t")
        if len(parts) != 4 or not parts[1].endswith("M"):
            continue
        proj = TIMES.findall(line)
        params, mem, gflops = parts[1][:-1], parts[2], parts[3]
        mem_mb = str(int(round(float(mem[:-1]) * 1000))) if mem.endswith("k") else mem
        for m in (["transformer"] if parts[0] == "Transformer" else ["dt", "dgt"]):
            p = proj[0] if proj else ""
            for metric, v in (("params", params), ("memory", mem_mb), ("flops", gflops)):
                assert cells8[("mnli", m, p, "", metric)] == (v, ""), (m, p, metric)
                seen.add(("mnli", m, p, "", metric))
    assert seen == set(cells8)


def test_table9_every_cell(paper_lines, pub):
    names = {"CIFAR-10": "cifar10", "CIFAR-100": "cifar100", "FashionMNIST": "fashion-mnist", "SVHN": "svhn",
             "ImageNet-1k": "imagenet"}
    models = {"ViTx4": "vit", "DViTx4": "dvit", "DGViTx4": "dgvit"}
    cells = _cells(pub, "9")
    pattern = re.compile(r"^(\S+)\t(\S+)\t([\d,]+)\t([\d.]+) GFLOPs\t([\d.]+) it/s \(([\d.]+) img/s\)\t"
                         r"([\d.]+) ms\t([\d.]+) MB\t([\d.]+) MB$")
    n = 0
    for line in paper_lines:
        m = pattern.match(line)
        if not m:
            continue
        ds, model = names[m.group(1)], models[m.group(2)]
        expect = {"params": m.group(3).replace(",", ""), "flops": m.group(4), "throughput": m.group(5),
                  "throughput_img": m.group(6), "latency": m.group(7), "peak_fwd_memory": m.group(8),
                  "peak_train_memory": m.group(9)}
        for metric, v in expect.items():
            assert cells[(ds, model, "4", "", metric)] == (v, ""), (ds, model, metric)
        n += 1
    assert n == 15 and len(cells) == 15 * 7


def test_published_csv_structure(pub):
    assert PUBLISHED_CSV.is_file()
    assert list(pub.columns[:11]) == ["table", "dataset", "model", "variant", "proj", "drop", "metric", "mean",
                                      "sd", "unit", "note"]
    assert set(pub["table"]) == {"1", "2", "3", "7", "8", "9"}
    assert set(pub["model"]) <= set(MODEL_NAMES)
    from robustbench_dgsa.data import DATASETS
    for d in set(pub["dataset"]):
        assert all(p in DATASETS or p == "imagenet" for p in d.split("|")), d
    assert pub["mean"].notna().all()
    acc = pub[pub["metric"] == "accuracy"]
    assert (acc["unit"] == "%").all() and acc["sd"].notna().all() and acc["mean"].between(40, 100).all()
    assert not pub.duplicated(["table", "dataset", "model", "proj", "drop", "metric"]).any()
    # spot checks that need no paper text
    row = pub[(pub["table"] == "9") & (pub["dataset"] == "cifar100") & (pub["model"] == "vit")
              & (pub["metric"] == "params")]
    assert float(row["mean"].iloc[0]) == 6_611_428     # the paper's Table 9 count for C=100
    row = pub[(pub["table"] == "3") & (pub["dataset"] == "20newsgroups") & (pub["model"] == "dgt")
              & (pub["proj"] == "16/3")]
    assert float(row["mean"].iloc[0]) == pytest.approx(63.53)
