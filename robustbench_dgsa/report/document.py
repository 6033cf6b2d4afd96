"""The report being built (:class:`Report`): the store's rows and run records, the artefacts written so far
(figures, tables, other files), the notes of what was skipped, and the warnings.

Every artefact gets a ``<stem>.sources.json`` sidecar naming the runs, config hashes, git commits, store path
(relative to the report) and a SHA-256 of the rows it was made from; every file is written atomically.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from robustbench_dgsa.report.frost import frost_substitutes
from robustbench_dgsa.report.figures import save_figure
from robustbench_dgsa.report.tables import Table
from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.paths import safe_name


def _rows_sha256(rows: pd.DataFrame) -> str:
    """SHA-256 of ``rows`` as sorted CSV: the same rows give the same hash whatever their order."""
    if rows.empty:
        return hashlib.sha256(b"").hexdigest()
    cols = sorted(rows.columns)
    body = rows[cols].sort_values(cols, kind="stable").to_csv(index=False, lineterminator="\n")
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass
class Artefact:
    """One entry of the index: its files, how it is shown inline, its sources sidecar."""

    section: str
    key: str
    title: str
    files: dict[str, str]                      # format -> path relative to the report folder
    caption: str = ""
    image: str | None = None                   # PNG shown inline
    table_html: str | None = None              # table shown inline (HTML index)
    table_md: str | None = None                # table shown inline (Markdown index)
    sources: str | None = None                 # sidecar, relative
    provenance: str = ""                       # one-line summary of the sidecar
    n_columns: int = 0                         # columns of the inline table (a wide one gets a scroll hint)


@dataclass
class Report:
    """The report being built: the store's rows and run records, the artefacts written, skips, warnings."""

    store_dir: Path
    out_dir: Path
    df: pd.DataFrame
    runs: dict[str, dict[str, Any]]
    final_dir: Path | None = None               # where the report ends up (out_dir may be a staging folder)
    artefacts: list[Artefact] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)   # (section, title, reason)
    warnings: list[str] = field(default_factory=list)
    cell_tests: bool = False                    # some cell-level tests were shown (caveat)
    collapsed: set[str] = field(default_factory=set)   # sections shown last, folded (synthetic-only Findings)

    _by_dataset: dict[str, pd.DataFrame] = field(default_factory=dict)

    _frost: dict[str, str] | None = None

    def procedural_frost(self, dataset: str) -> bool:
        """Whether frost on ``dataset`` was made with the procedural substitute textures (run provenance /
        corruption manifest say so): every frost number and image of it is then marked."""
        if self._frost is None:
            self._frost = frost_substitutes(self.df, self.runs, self.store_dir)
        return dataset in self._frost

    def rel(self, path: str | os.PathLike) -> str:
        """``path`` relative to the report folder (``../store``): a report names no absolute path of the machine
        that built it, and stays right when report and store move together."""
        here = (self.final_dir or self.out_dir).resolve()
        try:
            return Path(os.path.relpath(Path(path).resolve(), here)).as_posix()
        except ValueError:   # another drive (Windows): no relative path exists
            return Path(path).name

    def rows_of(self, dataset: str) -> pd.DataFrame:
        """All store rows of one dataset (cached: the metrics helpers then scan only these)."""
        if dataset not in self._by_dataset:
            self._by_dataset[dataset] = self.df[self.df["dataset"] == dataset].reset_index(drop=True)
        return self._by_dataset[dataset]

    # -- sources ---------------------------------------------------------------------------------------
    def _write_sources(self, stem: str, rows: pd.DataFrame, extra: dict[str, Any] | None = None
                       ) -> tuple[str, str]:
        stem = safe_name(stem)
        rows = rows if rows is not None else self.df.iloc[0:0]
        run_ids = sorted(set(rows["run_id"])) if len(rows) else []
        commits = sorted(set(rows["git_commit"]) - {""}) if len(rows) else []
        info = {
            "artefact": stem,
            "store": self.rel(self.store_dir),
            "n_rows": int(len(rows)),
            "rows_sha256": _rows_sha256(rows),
            "run_ids": run_ids,
            "config_hashes": sorted(set(rows["config_hash"]) - {""}) if len(rows) else [],
            "git_commits": commits,
            "package_versions": sorted(set(rows["package_version"]) - {""}) if len(rows) else [],
            "datasets": sorted(set(rows["dataset"]) - {""}) if len(rows) else [],
            "models": sorted(set(rows["model"]) - {""}) if len(rows) else [],
            "kinds": sorted(set(rows["kind"]) - {""}) if len(rows) else [],
        }
        if extra:
            info.update(extra)
        rel = f"{stem}.sources.json"
        atomic.write_json(self.out_dir / rel, info)
        if not len(rows):   # a table typed in from the paper: say so, not "0 rows" and the hash of nothing
            published = (extra or {}).get("published_sha256")
            return rel, (f"the paper's printed numbers, typed in from its text (robustbench_dgsa/report/published.csv,"
                         f" sha256 {published[:12]}); no results of this store" if published else "")
        short = ", ".join(c[:10] for c in commits[:3]) + (" …" if len(commits) > 3 else "")
        summary = (f"{len(rows)} rows from {len(run_ids)} runs"
                   + (f", git {short}" if commits else "")
                   + f"; rows sha256 {info['rows_sha256'][:12]}")
        if extra and "published_sha256" in extra:
            summary += f"; published values sha256 {extra['published_sha256'][:12]}"
        return rel, summary

    # -- artefacts -------------------------------------------------------------------------------------
    def figure(self, section: str, stem: str, title: str, fig, rows: pd.DataFrame, caption: str = "",
               extra: dict[str, Any] | None = None) -> None:
        stem = safe_name(stem)  # stems carry dataset names from the store
        png, pdf = save_figure(fig, self.out_dir, stem)
        src, prov = self._write_sources(stem, rows, extra)
        self.artefacts.append(Artefact(section, stem, title, {"PNG": png.name, "PDF": pdf.name}, caption,
                                       image=png.name, sources=src, provenance=prov))

    def files(self, section: str, stem: str, title: str, files: dict[str, str], rows: pd.DataFrame,
              caption: str = "", image: str | None = None, extra: dict[str, Any] | None = None) -> None:
        stem = safe_name(stem)  # stems carry dataset names from the store
        src, prov = self._write_sources(stem, rows, extra)
        self.artefacts.append(Artefact(section, stem, title, files, caption, image=image, sources=src,
                                       provenance=prov))

    def table(self, section: str, stem: str, title: str, table: Table, rows: pd.DataFrame,
              extra: dict[str, Any] | None = None) -> None:
        stem = safe_name(stem)  # stems carry dataset names from the store
        if not table.caption:
            table.caption = title
        atomic.write_text(self.out_dir / f"{stem}.md", table.to_markdown())
        atomic.write_text(self.out_dir / f"{stem}.tex", table.to_latex(label=f"tab:{stem}"))
        src, prov = self._write_sources(stem, rows, extra)
        self.artefacts.append(Artefact(section, stem, title, {"Markdown": f"{stem}.md", "LaTeX": f"{stem}.tex"},
                                       table_html=table.to_html(caption=False),
                                       table_md=table.to_markdown(caption=False),
                                       sources=src, provenance=prov, n_columns=len(table.columns)))

    def skip(self, section: str, title: str, reason: str) -> None:
        self.skipped.append((section, title, reason))

    def attempt(self, section: str, title: str, fn: Callable[[], None]) -> None:
        """Run one recipe; a data problem (UserError, ValueError, KeyError) skips it with a note."""
        try:
            fn()
        except (UserError, ValueError, KeyError) as e:
            self.skip(section, title, f"could not be made: {e}")
