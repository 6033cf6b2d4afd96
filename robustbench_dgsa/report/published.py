"""The paper's published numbers: :func:`load_published` reads them (package data
``robustbench_dgsa/report/published.csv``, described in ``results/README.md``), :func:`published_value` finds the
row printed beside one of ours, and :func:`published_tables` adds the paper's Tables 1, 2, 3, 7, 8, 9 as typed in
to the report."""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from robustbench_dgsa.report.labels import dataset_label, display_name
from robustbench_dgsa.report.tables import Table, fmt_count
from robustbench_dgsa.util.errors import UserError

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report


#: the paper's published numbers: package data, so every install (wheel, editable, checkout) has them
PUBLISHED_CSV = resources.files("robustbench_dgsa.report") / "published.csv"


def load_published(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The paper's published numbers (Tables 1, 2, 3, 7, 8, 9) as a tidy frame.

    Columns: table, dataset, model, variant, proj, drop, metric, mean (float), sd (float, NaN when not
    printed), unit, note, and mean_text / sd_text (the numbers as the paper prints them). ``dataset`` is a
    suite name (``cifar10``, ``imdb``, ...); a value like ``fashion-mnist|svhn`` marks a cell whose column is
    ambiguous in the paper's text (see ``note``).
    """
    src = Path(path) if path is not None else PUBLISHED_CSV
    if not src.is_file():
        raise UserError(f"published values not found: {src}")
    with src.open("r", encoding="utf-8") as f:
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
    df["mean_text"], df["sd_text"] = df["mean"], df["sd"]
    df["mean"] = pd.to_numeric(df["mean"])
    df["sd"] = pd.to_numeric(df["sd"].replace("", np.nan))
    return df


def proj_label(ratio: float) -> str:
    """The paper's "proj." label of an FFN ratio: 2, 4, 16/3."""
    for label, value in (("2", 2.0), ("4", 4.0), ("16/3", 16 / 3)):
        if abs(float(ratio) - value) < 1e-3:
            return label
    return f"{float(ratio):g}"


def paper_variant(model_cfg: dict[str, Any] | None) -> tuple[str, str]:
    """(proj, drop) of a model config as the paper labels its rows; ("", "") for the GELU baselines."""
    if not model_cfg or model_cfg.get("ffn", "swiglu") != "swiglu" or model_cfg.get("attention") == "mhsa":
        return "", ""
    return proj_label(model_cfg.get("ffn_ratio", 4.0)), "2" if model_cfg.get("ffn_dropout2") else "1"


def published_value(pub: pd.DataFrame, dataset: str, model: str, *, tables: Sequence[str],
                    metric: str = "accuracy", proj: str = "", drop: str = "") -> pd.Series | None:
    """The published row for (dataset, model, variant) in one of ``tables``, or None.

    A row whose ``drop`` is empty (Table 3 prints no dropout) matches any dropout count.
    """
    sub = pub[pub["table"].isin(list(tables)) & (pub["model"] == model) & (pub["metric"] == metric)]
    if sub.empty:  # a model the paper does not have (e.g. a benchmarked outside model)
        return None
    sub = sub[[dataset in d.split("|") for d in sub["dataset"]]]
    sub = sub[(sub["proj"] == proj) & ((sub["drop"] == drop) | (sub["drop"] == ""))]
    return None if sub.empty else sub.iloc[0]


_PAPER_TITLES = {
    "1": "Paper Table 1: accuracy (%) on small vision benchmarks, mean ± SD over 5 seeds",
    "2": "Paper Table 2: accuracy (%) on ImageNet-1k, mean ± SD over 5 seeds",
    "3": "Paper Table 3: accuracy (%) on language benchmarks, mean ± SD over 5 seeds",
    "7": "Paper Table 7: learnable parameters (millions), language benchmarks",
    "8": "Paper Table 8: MNLI parameters, memory and GFLOPs",
    "9": "Paper Table 9: performance and resource metrics (224×224, patch 16)",
}


def published_tables(rep: Report, pub: pd.DataFrame, pub_sha: str) -> None:
    empty = rep.df.iloc[0:0]
    for table, title in _PAPER_TITLES.items():
        g = pub[pub["table"] == table]
        if g.empty:
            continue
        cell = {(r.dataset, r.model, r.variant, r.metric): r for r in g.itertuples(index=False)}
        is9 = table == "9"
        by_dataset = table in ("1", "2", "3", "7")
        marks = _NoteMarks(g, "dataset" if by_dataset else "metric", ["model", "variant"] if by_dataset
                           else ["dataset", "model", "variant"])
        recs = []
        if by_dataset:
            cols = list(dict.fromkeys(g["dataset"]))
            metric = g["metric"].iloc[0]
            for m, v in dict.fromkeys(zip(g["model"], g["variant"])):
                row = [display_name(m) + marks.row((m, v)), v or "—"]
                for d in cols:
                    c = cell.get((d, m, v, metric))
                    if c is None:
                        row.append("—")
                    else:
                        text = f"{c.mean_text}M" if table == "7" else \
                            (f"{c.mean_text} ± {c.sd_text}" if c.sd_text else c.mean_text)
                        row.append(text + marks.cell(c))
                recs.append(row)
            header = ["Model", "Variant"] + [("FashionMNIST or SVHN" if "|" in d else dataset_label(d))
                                             + marks.column(d) for d in cols]
        else:
            metrics_order = list(dict.fromkeys(g["metric"]))
            units = {m: g.loc[g["metric"] == m, "unit"].iloc[0] for m in metrics_order}
            for d, m, v in dict.fromkeys(zip(g["dataset"], g["model"], g["variant"])):
                row = ([dataset_label(d)] if is9 else []) + [display_name(m) + marks.row((d, m, v)), v or "—"]
                for met in metrics_order:
                    c = cell.get((d, m, v, met))
                    row.append("—" if c is None else (fmt_count(c.mean) if units[met] == "count" else c.mean_text)
                               + marks.cell(c))
                recs.append(row)
            header = (["Dataset"] if is9 else []) + ["Model", "Variant"] + [
                f"{met.replace('_', ' ')} ({units[met]})" + marks.column(met) for met in metrics_order]
        n_left = 3 if is9 else 2
        t = Table(header, recs, title, marks.notes() + ["Typed in from the paper's text; see results/README.md."],
                  align="l" * n_left + "r" * (len(header) - n_left))
        rep.table("published", f"paper_table{table}", title, t, empty,
                  extra={"published": PUBLISHED_CSV.name, "published_sha256": pub_sha})


class _NoteMarks:
    """Footnote marks of a published table tied to what they are about: each part of a ``note`` ("a; b") that
    holds for every value of the table is a plain note; one that holds for exactly the values of some columns
    marks those columns' headers; of some rows, those rows' model cells; otherwise each value it is about."""

    SYMBOLS = ("¹", "²", "³", "⁴")

    def __init__(self, g: pd.DataFrame, col: str, row: list[str]) -> None:
        recs = list(g.itertuples(index=False))
        self._keys = {_rec_key(r): (getattr(r, col), tuple(getattr(r, k) for k in row)) for r in recs}
        parts: dict[str, list[Any]] = {}
        for r in recs:
            for part in dict.fromkeys(p.strip() for p in str(r.note).split(";") if p.strip()):
                parts.setdefault(part, []).append(r)
        self._general = [p for p, rs in parts.items() if len(rs) == len(recs)]
        self._order: list[str] = []
        self._col: dict[Any, list[str]] = {}
        self._row: dict[Any, list[str]] = {}
        self._cell: dict[tuple, list[str]] = {}
        for part, rs in parts.items():
            if part in self._general:
                continue
            cols = {self._keys[_rec_key(r)][0] for r in rs}
            rows = {self._keys[_rec_key(r)][1] for r in rs}
            self._order.append(part)
            if len(rs) == sum(self._keys[_rec_key(r)][0] in cols for r in recs):   # whole columns
                for c in cols:
                    self._col.setdefault(c, []).append(part)
            elif len(rs) == sum(self._keys[_rec_key(r)][1] in rows for r in recs):   # whole rows
                for k in rows:
                    self._row.setdefault(k, []).append(part)
            else:
                for r in rs:
                    self._cell.setdefault(_rec_key(r), []).append(part)

    def _mark(self, parts: list[str]) -> str:
        return "".join(self.SYMBOLS[i] if i < len(self.SYMBOLS) else f"[{i + 1}]"
                       for i in sorted(self._order.index(p) for p in parts))

    def column(self, key: Any) -> str:
        return self._mark(self._col.get(key, []))

    def row(self, key: Any) -> str:
        return self._mark(self._row.get(key, []))

    def cell(self, rec: Any) -> str:
        return self._mark(self._cell.get(_rec_key(rec), []))

    def notes(self) -> list[str]:
        """The footnotes, each after its mark, then the notes that hold for the whole table."""
        return [f"{self._mark([p])} {p}" for p in self._order] + [f"Note: {p}" for p in self._general]


def _rec_key(r: Any) -> tuple:
    """A published value's identity (dataset, model, variant, metric)."""
    return (r.dataset, r.model, r.variant, r.metric)
