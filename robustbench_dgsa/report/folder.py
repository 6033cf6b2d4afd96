"""The report folder: its default place (``reports/<name>``), the refusal of a folder another tool owns (a
``manifest.json`` no report wrote), moving a finished report in from its staging folder, and removing only the
files the previous report's own manifest lists."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from robustbench_dgsa.util import atomic
from robustbench_dgsa.util.errors import UserError
from robustbench_dgsa.util.paths import is_safe_name, safe_name

if TYPE_CHECKING:
    from robustbench_dgsa.report.document import Report

REPORT_KIND = "dgsa-bench report"   # marks a manifest.json as a report's own (only those files are ever removed)


def report_folder(store_dir: Path, out_dir: str | os.PathLike | None, name: str | None) -> Path:
    """``out_dir``, else ``reports/<name>``: a name is one folder name (never a path that leaves ``reports/``)."""
    if out_dir is not None:
        return Path(out_dir)
    if name is not None and not is_safe_name(name):
        raise UserError(f"report name {name!r} is not one folder name: use letters, digits, '.', '_', '+' and '-' "
                        f"(no '/', '..' or spaces), or give the report folder itself")
    return Path("reports") / (name or safe_name(store_dir.resolve().parent.name or "report"))


def check_report_folder(out: Path) -> None:
    """UserError when ``out`` cannot take a report: a file, or a folder whose manifest.json no report wrote
    (for callers that write the report last, e.g. the main job: checked before any work)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"report folder {out} is a file")
    previous_files(out)


def previous_files(out: Path) -> list[str]:
    """The files the previous report in ``out`` wrote (its own manifest.json lists them), which a rebuild may
    remove; [] for a new folder, a folder without a manifest or an older report's manifest (nothing is removed
    then). UserError, before any work, when ``out`` holds a manifest.json that no report wrote."""
    path = out / "manifest.json"
    if not os.path.lexists(path):
        return []
    data = None
    if path.is_file() and not path.is_symlink():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
    files = data.get("files") if isinstance(data, dict) else None
    if isinstance(files, list) and all(isinstance(f, str) for f in files):
        if data.get("kind") == REPORT_KIND:
            return files
        if set(data) == {"files"} and {"index.md", "index.html", "manifest.json"} <= set(files):
            return []  # written by a report before manifests carried their kind: kept, nothing removed
    raise UserError(f"report folder {out} holds a manifest.json that no dgsa-bench report wrote (another tool's "
                    f"folder?); nothing was changed: choose a new or empty folder")


def _plain_name(name: str) -> bool:
    """One visible file name directly inside a folder: no separators, no ``..``, not hidden."""
    return (bool(name) and name == os.path.basename(name) and "\\" not in name and "\x00" not in name
            and not name.startswith("."))


def publish(stage: Path, out: Path, rep: Report, previous: Sequence[str] = ()) -> None:
    """Move a finished report from ``stage`` into ``out`` (same file system: renames), the index last, then
    remove what the previous report there wrote (``previous``) and this one did not. Nothing moves when a
    target is a device, FIFO, socket or folder."""
    out.mkdir(parents=True, exist_ok=True)
    last = ("index.md", "index.html")
    files = [f for f in sorted(stage.iterdir(), key=lambda p: p.name in last) if f.is_file()]
    for f in files:
        atomic.refuse_special(out / f.name)
    for f in files:
        atomic.replace(f, out / f.name)
    prune(out, rep, previous)


def prune(out: Path, rep: Report, previous: Sequence[str]) -> None:
    """Remove the files the previous report listed that this build did not write (skipped artefacts): only
    plain names directly in ``out`` that are regular files (never a link, a folder or a special file); then
    write this report's own manifest."""
    keep = {"index.md", "index.html", "manifest.json", "summary.json"}
    for a in rep.artefacts:
        keep.update(a.files.values())
        if a.image:
            keep.add(a.image)
        if a.sources:
            keep.add(a.sources)
    for f in previous:
        if f in keep or not _plain_name(f):
            continue
        try:
            st = os.lstat(out / f)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            (out / f).unlink()
    atomic.write_json(out / "manifest.json", {"kind": REPORT_KIND, "version": 1, "files": sorted(keep)})
