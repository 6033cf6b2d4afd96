"""Tables 1, 3 and 9 of the paper remade from the store, ours beside the paper's: clean accuracy mean ± SD over
seeds per dataset and model (Table 1: images, Table 3: text), and parameters, FLOPs, throughput, latency and
peak memory (Table 9, ``kind="bench"`` rows) with the machine load each timing was measured under."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from robustbench_dgsa.analysis import metrics
from robustbench_dgsa.models.registry import model_order
from robustbench_dgsa.report.labels import ACC_SCALE, dataset_label, display_name
from robustbench_dgsa.report.published import PUBLISHED_CSV, paper_variant, published_value
from robustbench_dgsa.report.tables import Table, fmt_count, fmt_mean_sd, fmt_num

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report


def accuracy_tables(rep: Report, pub: pd.DataFrame, pub_sha: str, datasets: dict[str, str],
                     cfgs: dict[str, dict[str, Any]]) -> None:
    for modality, stem, number, paper_tables in (("image", "table1_accuracy_vision", "1", ("1", "2")),
                                                  ("text", "table3_accuracy_text", "3", ("3",))):
        title = f"Table {number}: clean test accuracy (%), mean ± SD over seeds, ours beside the paper's"
        dsets = [d for d, m in datasets.items() if m == modality]
        if not dsets:
            rep.skip("accuracy", f"Table {number}", f"no {'image' if modality == 'image' else 'text'} "
                     "evaluation results in the store")
            continue
        records, notes, used_rows = [], [], []
        ambiguous = False
        for ds in dsets:
            clean = metrics.clean_accuracy(rep.rows_of(ds), dataset=ds)
            if clean.empty:
                continue
            d = rep.rows_of(ds)
            raw = d[(d["kind"] == "eval") & (d["condition"] == "clean") & (d["metric"] == "accuracy")]
            used_rows.append(raw)
            for model in model_order(clean["model"]):
                vals = clean.loc[clean["model"] == model, "value"].to_numpy(float) * ACC_SCALE
                sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else float("nan")
                h = sorted(set(raw.loc[raw["model"] == model, "config_hash"]))
                cfg = cfgs.get(h[0]) if h else None
                proj, drop = paper_variant(cfg["model"] if cfg else None)
                p = published_value(pub, ds, model, tables=paper_tables, proj=proj, drop=drop)
                if p is not None:
                    ambiguous |= "|" in p["dataset"]
                    ptxt = f"{p['mean_text']} ± {p['sd_text']}" + ("†" if "|" in p["dataset"] else "")
                    pref = f"Table {p['table']}" + (f", {p['variant']}" if p["variant"] else "")
                    delta = f"{float(np.mean(vals)) - p['mean']:+.2f}"
                else:
                    in_paper = bool(pub[[ds in d.split("|") for d in pub["dataset"]]].shape[0])
                    ptxt, pref, delta = "—", ("no row for this model/variant" if in_paper
                                               else "dataset not in the paper"), "—"
                if len(h) > 1:
                    rep.warnings.append(f"{ds}/{model}: {len(h)} different configs pooled in Table {number}")
                records.append([dataset_label(ds), display_name(model), fmt_mean_sd(float(np.mean(vals)), sd),
                                str(len(vals)), ptxt, pref, delta])
        if not records:
            rep.skip("accuracy", f"Table {number}", "no clean accuracy rows")
            continue
        notes.append("Ours: clean accuracy on the test split, mean ± sample SD (ddof 1) over training seeds; "
                     "SD is blank with one seed. Paper: as printed (5 seeds).")
        notes.append("Datasets the paper does not report (e.g. the embedded synthetic sets) have no paper value; "
                     "the paper's full tables are under 'The paper's published numbers'.")
        if ambiguous:
            notes.append("† The paper's text gives three values for four dataset columns in the DViT/DGViT rows "
                         "of Table 1; the third is FashionMNIST or SVHN.")
        t = Table(["Dataset", "Model", "Ours (%)", "Seeds", "Paper (%)", "Paper row", "Δ ours − paper"],
                  records, title, notes, align="llrrrlr")
        rep.table("accuracy", stem, title, t, pd.concat(used_rows), extra={"published": str(PUBLISHED_CSV.name),
                                                                         "published_sha256": pub_sha})


def efficiency_table(rep: Report, pub: pd.DataFrame, pub_sha: str) -> None:
    title = "Table 9: parameters, FLOPs, throughput, latency, peak memory"
    bench = rep.df[rep.df["kind"] == "bench"]
    ours_cols = [("params", "Params", fmt_count, 1.0),
                 ("flops", "G mult-adds / sample", lambda v: fmt_num(v, 4), 0.5e-9),
                 ("train_throughput", "Throughput (samples/s)", lambda v: fmt_num(v, 1), 1.0),
                 ("latency_ms", "Latency (ms)", lambda v: fmt_num(v, 2), 1.0),
                 ("peak_memory_mb", "Peak train memory (MB)", lambda v: fmt_num(v, 1), 1.0)]
    recs = []
    if not bench.empty:
        bench = bench.sort_values("created", kind="stable")
        for (ds, src), g in bench.groupby(["dataset", "source"], sort=True):
            for m in model_order(g["model"]):
                gm = g[g["model"] == m]
                row = [_device_label(src), dataset_label(ds), display_name(m)]
                for metric, _, f, scale in ours_cols:
                    v = gm.loc[gm["metric"] == metric, "value"]
                    row.append(f(float(v.mean()) * scale) if len(v) else "—")
                recs.append(row)
    bench_ds = set(bench["dataset"]) if not bench.empty else set()
    p9 = pub[pub["table"] == "9"]
    paper_ds = [d for d in dict.fromkeys(p9["dataset"]) if d in bench_ds] or ["cifar10"]
    for ds in paper_ds:
        g = p9[p9["dataset"] == ds]
        for m in model_order(g["model"]):
            gm = g[g["model"] == m]
            val = dict(zip(gm["metric"], gm["mean_text"]))
            recs.append(["paper (A10G, 224×224/16)", dataset_label(ds), display_name(m),
                         fmt_count(float(val["params"])), val["flops"], val["throughput_img"], val["latency"],
                         val["peak_train_memory"]])
    if bench.empty:
        rep.skip("efficiency", "Table 9 (ours)", "no benchmark rows (kind=bench) in the store: "
                 "only the paper's values are shown")
    notes = ["Ours: measured at the preset's model size (the trained checkpoint) on the device named in the first "
             "column: throughput = training samples per second (forward + backward + AdamW step); latency = one "
             "forward pass of one training-size batch; peak train memory = CUDA peak allocation during a training "
             "step, or on CPU parameters + gradients + AdamW state + the activations saved for backward; "
             "multiply-adds analytic per sample (robustbench_dgsa.models.flops: FLOPs / 2).",
             "Paper: Table 9 as printed (ViT×4 / DViT×4 / DGViT×4 at 224×224, patch 16, on an A10G; its "
             "'FLOPs / Img' are multiply-adds; throughput in img/s; memory = 'Peak Train Mem'). The absolute "
             "numbers are not comparable (other size, device and data); the ratios between models are."]
    notes.append(_load_note(rep, bench))
    t = Table(["Source", "Dataset", "Model"] + [c[1] for c in ours_cols], recs, title, notes, align="lll" + "r" * 5)
    rep.table("efficiency", "table9_efficiency", title, t, bench,
              extra={"published": PUBLISHED_CSV.name, "published_sha256": pub_sha})


def _load_note(rep: Report, bench: pd.DataFrame) -> str:
    """Under Table 9: the machine load each of our timings was measured under (1-minute load average / cores,
    read by the benchmark right after its timed steps; rows ``load_avg_1m``, provenance ``cpu_cores``)."""
    if bench.empty:
        return "Machine load: no timings of ours."
    load = bench[bench["metric"] == "load_avg_1m"]
    load = load[np.isfinite(load["value"].astype(float))]
    if load.empty:
        return ("Machine load during our timings: not recorded (measured before the benchmark recorded it); "
                "timings on a busy machine are slower.")
    parts = []
    for r in load.itertuples(index=False):
        cores = (rep.runs.get(r.run_id) or {}).get("cpu_cores")
        parts.append(f"{display_name(r.model)} {float(r.value):.2f}" + (f" on {int(cores)} cores" if cores else ""))
    busy = any(float(r.value) > float((rep.runs.get(r.run_id) or {}).get("cpu_cores") or np.inf)
               for r in load.itertuples(index=False))
    return ("Machine load during our timings (1-minute load average read right after the timed steps): "
            + "; ".join(parts) + "." + (" A load above the core count means other work shared the CPUs: "
                                        "throughput and latency are slower than on an idle machine." if busy else ""))


def _device_label(src: str) -> str:
    """"cpu:x86_64x2" -> "ours (CPU, 2 threads)"; "cuda:NVIDIA H100" -> "ours (NVIDIA H100)"."""
    kind, _, rest = src.partition(":")
    if kind == "cpu" and "x" in rest:
        threads = rest.rsplit("x", 1)[1]
        return f"ours (CPU, {threads} thread{'' if threads == '1' else 's'})"
    return f"ours ({rest or src})" if src else "ours"
