"""RobustBench's ``Linf`` / ``L2`` model_info files from the adversarial rows of a results store (threat models
registered with ``robustbench=True``; :mod:`robustbench_dgsa.engine.threat_models`).

Writes ``model_info/<dataset>/<Linf|L2>/<model>.json`` with RobustBench's fields (``link``, ``name``, ``authors``,
``additional_data``, ``number_forward_passes``, ``dataset``, ``venue``, ``architecture``, ``eps`` as RobustBench
spells it (``"8/255"``, ``"0.5"``), ``clean_acc``, ``reported``, ``autoattack_acc``, ``footnote``), accuracies as
percentage strings with two decimals (mean over seeds). ``autoattack_acc`` comes only from full AutoAttack
(standard version) rows at RobustBench's standard radius for the dataset (8/255 / 0.5 on CIFAR, 4/255 on
ImageNet): numbers of APGD-CE alone or of APGD-CE + APGD-T are weaker attacks and never exported as AutoAttack.
"""
from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from robustbench_dgsa import store
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.paths import safe_name

KIND = "adversarial"                 # the store's kind of adversarial rows (engine.adversarial.KIND)
FIELDS = ("link", "name", "authors", "additional_data", "number_forward_passes", "dataset", "venue",
          "architecture", "eps", "clean_acc", "reported", "autoattack_acc", "footnote")


def eps_text(eps: float, threat_model: str) -> str:
    """RobustBench's spelling: Linf radii as k/255, L2 as a decimal."""
    if threat_model == "Linf":
        k = Fraction(eps * 255).limit_denominator(8)
        return f"{k}/255" if k.denominator == 1 else f"{float(eps):.6g}"
    return f"{float(eps):g}"


def robustbench_threat(condition: str, dataset: str) -> tuple[str, float] | None:
    """(RobustBench's folder name, standard radius) of a stored condition, from the threat-model registry; None
    for a threat model RobustBench does not have, or without a standard radius for ``dataset``."""
    from robustbench_dgsa.engine.threat_models import get_threat_model
    from robustbench_dgsa.util.errors import UserError
    try:
        tm = get_threat_model(condition)
    except UserError:
        return None
    if not tm.robustbench or dataset not in tm.standard_eps:
        return None
    return tm.name, float(tm.standard_eps[dataset])


def adversarial_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["kind"] == KIND) & (df["metric"] == "accuracy")]


def export_adversarial(store_dir: str | Path, out_dir: str | Path, *, dataset: str | None = None,
                       models: Sequence[str] | None = None) -> tuple[list[Path], dict[str, dict[str, Any]],
                                                                     list[str]]:
    """Write the Linf / L2 model_info JSONs; returns (files, records by "<dataset>/<tm>/<model>", skipped)."""
    rows = adversarial_rows(store.load_results(store_dir))
    runs = store.load_runs(store_dir)
    files: list[Path] = []
    records: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for (ds, cond, model), sub in rows.groupby(["dataset", "condition", "model"]):
        if models and model not in models:
            continue
        rb = dataset or str(ds)
        threat = robustbench_threat(str(cond), rb)
        if threat is None:
            skipped.append(f"{model} {cond} on {ds}: no RobustBench standard radius")
            continue
        tm, std = threat
        aa = sub[(sub["attack"] == "autoattack") & ((sub["eps"] - std).abs() < 1e-9)]
        if aa.empty:
            skipped.append(f"{model} {tm} on {ds}: no full-AutoAttack rows at eps {eps_text(std, tm)}")
            continue
        record = _record(str(model), rb, tm, std, aa, runs)
        path = Path(out_dir) / "model_info" / safe_name(rb) / tm / f"{safe_name(str(model))}.json"
        atomic.write_text(path, json.dumps(record, indent=2) + "\n")
        files.append(path)
        records[f"{rb}/{tm}/{model}"] = record
    return files, records, skipped


def _record(model: str, rb: str, tm: str, eps: float, aa: pd.DataFrame, runs: dict[str, dict[str, Any]]
            ) -> dict[str, Any]:
    clean = []
    for rid, g in aa.groupby("run_id"):
        steps = runs.get(str(rid), {}).get("steps", [])
        clean += [s["clean_acc"] for s in steps if math.isclose(float(s.get("eps", -1)), eps, abs_tol=1e-9)]
    seeds = sorted(set(int(s) for s in aa["seed"]))
    n = sorted(set(int(v) for v in aa["n"]))
    versions = sorted(set(aa["source"]))
    return {
        "link": "", "name": model, "authors": "", "additional_data": False, "number_forward_passes": 1,
        "dataset": rb, "venue": "", "architecture": f"dgsa-bench {model}", "eps": eps_text(eps, tm),
        "clean_acc": f"{100 * sum(clean) / len(clean):.2f}" if clean else "",
        "reported": None, "autoattack_acc": f"{100 * float(aa['value'].mean()):.2f}",
        "footnote": f"AutoAttack (standard version, {', '.join(versions)}) on the first {'/'.join(map(str, n))} "
                    f"test images; mean over {len(aa)} run(s) (seeds {', '.join(map(str, seeds))}); "
                    "measured by dgsa-bench, not RobustBench.",
    }
