"""The ``compare`` command's outputs: its tables as text cells (the report's own number and p-value formats),
and the files it writes (CSV, booktabs LaTeX through the report's one table writer, critical-difference
diagrams through the report's one figure saver). :func:`compare_store` is the whole command without the
printing."""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .tables import fmt_p

if TYPE_CHECKING:  # numpy / pandas are imported when a table is formatted
    import pandas as pd

    from robustbench_dgsa.analysis.compare import Comparison

#: columns that hold p-values (printed by the report's p-value format)
P_COLS = {"p", "p_holm", "min_p", "iman_davenport_p"}
TITLES = {
    "seed_summary": "Seed summary (mean ± SD over seeds, 95% t-interval)",
    "pairwise": "Pairwise differences over seeds (Δ = A − B; the primary claim): Welch / paired t, Holm, Hedges' g",
    "robustness": "Robustness (means over seeds)",
    "wilcoxon_cells": "Consistency across conditions: Wilcoxon signed-rank over seed-averaged cells of the same "
                      "trained models (not independent evidence; wins/ties/losses for A)",
    "friedman": "Friedman test over cells of the same trained models (consistency across conditions); "
                "Kendall's W = effect size",
    "avg_ranks": "Average ranks (1 = best)",
    "posthoc_wilcoxon": "Post-hoc pairwise Wilcoxon over cells (consistency across conditions), Holm",
}
_SHOW = {
    "seed_summary": ["dataset", "condition", "model", "n", "mean ± SD", "ci_lo", "ci_hi", "note"],
    "pairwise": ["dataset", "condition", "model_a", "model_b", "n_a", "n_b", "diff", "ci_lo", "ci_hi", "test", "t",
                 "df", "p", "p_holm", "g", "verdict", "aso_eps_min", "note"],
    "wilcoxon_cells": ["dataset", "model_a", "model_b", "n_cells", "wins", "ties", "losses", "median_diff", "W",
                       "p", "p_holm", "min_p", "verdict"],
    "friedman": ["dataset", "blocks", "k", "n_blocks", "n_seeds", "statistic", "p", "kendall_w",
                 "iman_davenport_F", "iman_davenport_p", "verdict"],
    "avg_ranks": ["dataset", "blocks", "model", "avg_rank", "mean"],
    "posthoc_wilcoxon": ["dataset", "model_a", "model_b", "n_cells", "wins", "ties", "losses", "median_diff", "W",
                         "p", "p_holm", "verdict"],
}
_THREE_DIGITS = ("t", "df", "g", "W", "kendall_w")


def fmt_value(v: Any, fmt: str = "{:.4f}") -> str:
    """One cell of a compare table: "–" for missing, yes/no, integers as such, floats by ``fmt`` (±inf kept)."""
    import numpy as np
    import pandas as pd

    if v is None or v is pd.NA:
        return "–"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "–"
        return ("inf" if f > 0 else "-inf") if math.isinf(f) else fmt.format(f)
    return str(v)


def fmt_p_value(v: Any) -> str:
    """A p-value cell: the report's one p-value format (:func:`.tables.fmt_p`)."""
    import numpy as np

    finite = isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v))
    return fmt_p(float(v) if finite else None)


def display_frame(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The columns of table ``name`` that are shown, in order (the seed summary with a "mean ± SD" column)."""
    df = df.copy()
    if name == "seed_summary":
        df["mean ± SD"] = [f"{fmt_value(m)} ± {fmt_value(s)}" if math.isfinite(s) else fmt_value(m)
                         for m, s in zip(df["mean"], df["sd"])]
    cols = _SHOW.get(name, list(df.columns))
    return df[[c for c in cols if c in df.columns]]


def cells(show: pd.DataFrame) -> list[list[str]]:
    """The rows of a shown table as text, each column by its format."""
    return [[fmt_p_value(r[c]) if c in P_COLS else fmt_value(r[c], "{:.3f}" if c in _THREE_DIGITS else "{:.4f}")
             for c in show.columns] for _, r in show.iterrows()]


def write_csv(cmp: Comparison, path: Path) -> list[Path]:
    """The first table at ``path``, every other beside it as ``<stem>.<table>.csv`` (full precision)."""
    from robustbench_dgsa.util import atomic

    written = []
    for i, (name, df) in enumerate(cmp.tables.items()):
        p = path if i == 0 else path.with_name(f"{path.stem}.{name}{path.suffix or '.csv'}")
        atomic.write_text(p, df.to_csv(index=False))
        written.append(p)
    return written


def write_latex(cmp: Comparison, path: Path) -> Path:
    """Every table as booktabs LaTeX through the report's one table writer, the same cells as printed."""
    from robustbench_dgsa.util import atomic

    from .tables import LATEX_PREAMBLE, Table, latex_comment

    parts = ["% dgsa-bench compare; preamble: " + LATEX_PREAMBLE.replace("\n", " "),
             latex_comment(f"metric={cmp.info['metric']} models={','.join(cmp.info['models'])} "
                           f"reference={cmp.info['reference']} alpha={cmp.info['alpha']:g}")]
    parts += [latex_comment(f"warning: {w}") for w in cmp.warnings]
    for name, df in cmp.tables.items():
        show = display_frame(name, df)
        notes = [f for f in cmp.families if (name == "pairwise") == ("t-test" in f)] if name in (
            "pairwise", "wilcoxon_cells", "posthoc_wilcoxon") else []
        t = Table([str(c) for c in show.columns], cells(show), TITLES.get(name, name), notes)
        parts += ["", t.to_latex(label=f"tab:compare-{name}")]
    atomic.write_text(path, "\n".join(parts) + "\n")
    return path


def write_cd_diagrams(cmp: Comparison, path: Path) -> list[Path]:
    """One critical-difference diagram per Friedman test (``path``, or ``<stem>.<test><suffix>`` for several);
    none (and a warning in ``cmp``) when no test has >= 3 models."""
    from robustbench_dgsa.models.registry import display_name
    from robustbench_dgsa.util.figures import save_as
    from robustbench_dgsa.util.paths import safe_name

    from .figures import cd_diagram

    if not cmp.cd_diagrams:
        cmp.warnings.append("no critical-difference diagram: needs >= 3 models and a Friedman test")
    written = []
    for title, ranks, cliques, note in cmp.cd_diagrams:
        p = path if len(cmp.cd_diagrams) == 1 else path.with_name(f"{path.stem}.{safe_name(title)}{path.suffix}")
        named = {display_name(m): r for m, r in ranks.items()}
        bars = None if cliques is None else [[display_name(m) for m in g] for g in cliques]
        written.append(save_as(cd_diagram(named, bars, note=note), p))
    return written


def compare_store(store: str | Path, *, csv: Path | None = None, latex: Path | None = None,
                  cd_plot: Path | None = None, **options: Any) -> tuple[Comparison, list[Path]]:
    """Read ``store``, compare its models (``options``: those of
    :func:`robustbench_dgsa.analysis.compare.run_compare`) and write the files asked for. Returns the comparison
    and the files written."""
    from robustbench_dgsa import store as store_mod
    from robustbench_dgsa.analysis.compare import run_compare

    cmp = run_compare(store_mod.load_results(store), store_label=str(store), **options)
    written: list[Path] = []
    if csv is not None:
        written += write_csv(cmp, csv)
    if latex is not None:
        written.append(write_latex(cmp, latex))
    if cd_plot is not None:
        written += write_cd_diagrams(cmp, cd_plot)
    return cmp, written
