"""The report's pages: ``index.md`` and ``index.html`` with the header lines, the caveats first, the contents, then
every artefact in its section (figures inline, tables inline, links to every format and the sources sidecar, a
note for each skipped artefact); relative links only, every text from the data escaped."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd
from PIL import Image

from robustbench_dgsa.models.registry import model_order
from robustbench_dgsa.report.document import Artefact, Report
from robustbench_dgsa.report.caveats import test_examples_words, train_sizes, train_words
from robustbench_dgsa.report.labels import dataset_label, display_name
from robustbench_dgsa.report.tables import LATEX_PREAMBLE, md_escape, md_inline, printable
from robustbench_dgsa.util import atomic

WIDE_TABLE = 5      # an HTML table of this many columns or more shows a "scroll sideways" hint on a narrow screen


SECTIONS = (
    ("findings", "Findings"),
    ("caveats", "Warnings and caveats"),
    ("accuracy", "Clean accuracy (Tables 1 and 3)"),
    ("severity", "Accuracy vs corruption severity (Figure 4)"),
    ("robustness", "Robustness summary"),
    ("significance", "Statistical comparisons"),
    ("curves", "Training and validation curves (Figure 5)"),
    ("rollout", "Attention rollout (Figures 2 and 3)"),
    ("adversarial", "Adversarial robustness"),
    ("efficiency", "Efficiency (Table 9)"),
    ("published", "The paper's published numbers"),
)


_CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;max-width:1180px;margin:1.5em auto;
padding:0 1.2em;color:#1d2125;line-height:1.45;background:#fff}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:2em;border-bottom:2px solid #e3e6ea;padding-bottom:.2em}
h3{font-size:1.02em;margin:1.4em 0 .4em}
.meta{color:#5a6270;font-size:.9em}.meta code{font-size:.95em}
nav{background:#f6f8fa;border:1px solid #e3e6ea;border-radius:6px;padding:.6em 1em;margin:1em 0;font-size:.9em}
nav ol{margin:.3em 0 0 0;padding-left:1.4em;columns:2 22em;column-gap:2em}nav li{break-inside:avoid}
nav ul{margin:.1em 0 .3em 0;padding-left:1.1em;font-size:.95em}
a.self{color:#b0b7c0;font-weight:normal;font-size:.8em;margin-left:.3em;visibility:hidden}
h2:hover a.self,h3:hover a.self,a.self:focus{visibility:visible}
ul.caveats{background:#fff8e6;border:1px solid #f0d58a;border-radius:6px;padding:.6em 1em .6em 2em}
ul.caveats li{margin:.25em 0}details{margin:.6em 0;font-size:.9em}summary{cursor:pointer;color:#5a6270}
section{scroll-margin-top:.5em}h2{scroll-margin-top:.5em}
@media (max-width:700px){body{padding:0 .6em}nav ol{columns:1}table{font-size:.8em}}
a{color:#0b5cad;text-decoration:none}a:hover{text-decoration:underline}
figure{margin:.6em 0 1.4em 0}figure img{max-width:100%;height:auto;border:1px solid #eceef1;border-radius:4px}
figcaption,.caption{color:#4a515c;font-size:.88em;margin-top:.3em}
.links{font-size:.85em;color:#5a6270}.links a{margin-right:.7em}
.prov{font-size:.78em;color:#7a828e;margin-top:.15em}
table{border-collapse:collapse;margin:.4em 0;font-size:.86em;font-variant-numeric:tabular-nums}
caption{caption-side:top;text-align:left;font-weight:600;padding-bottom:.35em;color:#1d2125}
th,td{padding:.28em .7em;border-bottom:1px solid #e3e6ea}thead th{border-bottom:2px solid #9aa3ad;background:#f6f8fa}
td.r,th.r{text-align:right}td.l,th.l{text-align:left}td.c,th.c{text-align:center}
tbody tr:hover{background:#fafbfc}
ul.notes{font-size:.82em;color:#4a515c;margin:.3em 0 0 0;padding-left:1.2em}
.skipped li{color:#7a4b00}.warn li{color:#7a4b00}
.tablewrap{overflow-x:auto;-webkit-overflow-scrolling:touch;
background:linear-gradient(to right,#fff 30%,rgba(255,255,255,0)) left/2.5em 100% no-repeat local,
linear-gradient(to left,#fff 30%,rgba(255,255,255,0)) right/2.5em 100% no-repeat local,
radial-gradient(farthest-side at 0 50%,rgba(0,0,0,.22),rgba(0,0,0,0)) left/1em 100% no-repeat scroll,
radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.22),rgba(0,0,0,0)) right/1em 100% no-repeat scroll}
.tablewrap table{margin:.4em 0}
.tablewrap th:first-child,.tablewrap td:first-child{position:sticky;left:0;z-index:1;background:#fff;
box-shadow:inset -1px 0 0 #e3e6ea}
.tablewrap thead th:first-child{background:#f6f8fa}
td.nw{white-space:nowrap}
.scrollhint{display:none;font-size:.78em;color:#7a828e;text-align:right;margin-top:.3em}
@media (max-width:700px){.scrollhint{display:block}}
"""


def write_index(rep: Report, title: str, header: list[str], caveats: list[str]) -> None:
    by_section: dict[str, list[Artefact]] = {}
    for a in rep.artefacts:
        by_section.setdefault(a.section, []).append(a)
    skipped_by: dict[str, list[tuple[str, str]]] = {}
    for sec, t, reason in rep.skipped:
        skipped_by.setdefault(sec, []).append((t, reason))
    sections = [(sec, t) for sec, t in SECTIONS
                if sec == "caveats" or by_section.get(sec) or skipped_by.get(sec)]
    # a collapsed section (Findings of synthetic data only: no claim) comes after the figures, folded
    sections = ([st for st in sections if st[0] not in rep.collapsed]
                + [st for st in sections if st[0] in rep.collapsed])
    warnings = list(dict.fromkeys(rep.warnings))
    atomic.write_text(rep.out_dir / "index.md", _index_md(title, header, caveats, warnings, sections, by_section,
                                                          skipped_by, rep.collapsed))
    atomic.write_text(rep.out_dir / "index.html", _index_html(rep, title, header, caveats, warnings, sections,
                                                              by_section, skipped_by))


def _index_md(title, header, caveats, warnings, sections, by_section, skipped_by, collapsed=frozenset()) -> str:
    """index.md; every text from the data escaped (:func:`md_escape`: no raw HTML tag, link or control char)."""
    m = lambda t: md_escape(printable(t, cell=True))  # noqa: E731
    md = [f"# {m(title)}", ""] + [f"- {md_inline(h)}" for h in header] + ["", "**Contents**", ""]
    for sec, sec_title in sections:
        md.append(f"- [{m(sec_title)}](#{sec})")
        md += [f"  - [{m(a.title)}](#{a.key})" for a in by_section.get(sec, [])]
    md.append("")
    for sec, sec_title in sections:
        md += [f'<a id="{sec}"></a>', "", f"## {sec_title}", ""]
        if sec == "caveats":
            md += [f"- {m(c)}" for c in caveats] or ["- None found."]
            if warnings:
                md += ["", f"Other warnings ({len(warnings)}):", ""] + [f"- {m(w)}" for w in warnings]
            md.append("")
            continue
        if sec in collapsed:
            md += [f"<details><summary>{html.escape(sec_title)}: {len(by_section.get(sec, []))} artefact(s), "
                   "no claim (synthetic data)</summary>", ""]
        for a in by_section.get(sec, []):
            md += [f'<a id="{a.key}"></a>', "", f"### {m(a.title)}", ""]
            if a.image:
                md += [f"![{m(a.title)}]({a.image})", ""]
            if a.caption:
                md += [m(a.caption), ""]
            if a.table_md:
                md += [a.table_md, ""]
            links = [f"[{fmt}]({path})" for fmt, path in a.files.items()]
            if a.sources:
                links.append(f"[sources]({a.sources})")
            md += [" · ".join(links), ""]
            if a.provenance:
                md += [f"<sub>Made from {m(a.provenance)}.</sub>", ""]
        for t, reason in skipped_by.get(sec, []):
            md += [f"- *Skipped: {m(t)}* — {m(reason)}", ""]
        if sec in collapsed:
            md += ["</details>", ""]
    return "\n".join(md).rstrip() + "\n"


def _index_html(rep, title, header, caveats, warnings, sections, by_section, skipped_by) -> str:
    e = lambda t: html.escape(printable(t))  # noqa: E731
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{e(title)}</title>", f"<style>{_CSS}</style>", "</head><body>", f"<h1>{e(title)}</h1>"]
    parts.append('<div class="meta">' + "<br>".join(_md_inline(h) for h in header) + "</div>")
    toc = []
    for sec, sec_title in sections:
        sub = "".join(f'<li><a href="#{e(a.key)}">{e(a.title)}</a></li>' for a in by_section.get(sec, []))
        toc.append(f'<li><a href="#{sec}">{e(sec_title)}</a>' + (f"<ul>{sub}</ul>" if sub else "") + "</li>")
    nav = '<nav aria-label="Contents"><strong>Contents</strong><ol>' + "".join(toc) + "</ol></nav>"
    for sec, sec_title in sections:
        parts.append(f'<h2 id="{sec}">{e(sec_title)} <a class="self" href="#{sec}" aria-label="link to this '
                     f'section">¶</a></h2>')
        if sec == "caveats":   # first thing after the header, then the contents
            parts.append('<ul class="caveats">' + ("".join(f"<li>{e(c)}</li>" for c in caveats)
                                                   or "<li>None found.</li>") + "</ul>")
            if warnings:
                parts.append(f"<details><summary>Other warnings ({len(warnings)})</summary><ul class=\"warn\">"
                             + "".join(f"<li>{e(w)}</li>" for w in warnings) + "</ul></details>")
            parts.append(nav)
            continue
        if sec in rep.collapsed:
            parts.append(f"<details><summary>{e(sec_title)}: {len(by_section.get(sec, []))} artefact(s), no claim "
                         "(synthetic data)</summary>")
        for a in by_section.get(sec, []):
            parts.append(f'<section id="{e(a.key)}"><h3>{e(a.title)} <a class="self" href="#{e(a.key)}" '
                         f'aria-label="link to this artefact">¶</a></h3>')
            if a.image:
                size = _display_width(rep.out_dir / a.image)
                parts.append(f'<figure><a href="{e(a.image)}"><img src="{e(a.image)}" alt="{e(a.title)}"{size}></a>'
                             + (f"<figcaption>{e(a.caption)}</figcaption>" if a.caption else "") + "</figure>")
            elif a.caption:
                parts.append(f'<p class="caption">{e(a.caption)}</p>')
            if a.table_html:
                if a.n_columns >= WIDE_TABLE:
                    parts.append('<div class="scrollhint" aria-hidden="true">scroll sideways for more →</div>')
                parts.append(f'<div class="tablewrap" tabindex="0">{a.table_html}</div>')
            links = [f'<a href="{e(p)}">{e(f)}</a>' for f, p in a.files.items()]
            if a.sources:
                links.append(f'<a href="{e(a.sources)}">sources</a>')
            parts.append(f'<div class="links">{" ".join(links)}</div>')
            if a.provenance:
                parts.append(f'<div class="prov">Made from {e(a.provenance)}.</div>')
            parts.append("</section>")
        skips = skipped_by.get(sec, [])
        if skips:
            parts.append('<ul class="skipped">' + "".join(f"<li><em>Skipped: {e(t)}</em> — {e(r)}</li>"
                                                          for t, r in skips) + "</ul>")
        if sec in rep.collapsed:
            parts.append("</details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _display_width(png: Path) -> str:
    """``width`` attribute showing a PNG at its physical size (its pixels at its dpi, 96 CSS px per inch)."""
    try:
        with Image.open(png) as im:
            dpi = float((im.info.get("dpi") or (96.0,))[0]) or 96.0
            return f' width="{round(im.width * 96.0 / dpi)}"'
    except (OSError, ValueError):
        return ""


def _md_inline(text: str) -> str:
    """The little Markdown the header lines use: `code`."""
    out = []
    for i, chunk in enumerate(printable(text).split("`")):
        out.append(f"<code>{html.escape(chunk)}</code>" if i % 2 else html.escape(chunk))
    return "".join(out)


def header_lines(rep: Report, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str]) -> list[str]:
    """The lines under the report's title: store, datasets, models, seeds, setup per dataset, code, and how the
    artefacts were made."""
    df = rep.df
    commits = sorted(set(df["git_commit"]) - {""})
    return [f"Store: `{rep.rel(rep.store_dir)}` (relative to this report) — {len(df)} rows, "
            f"{df['run_id'].nunique()} runs",
            "Datasets: " + (", ".join(f"{dataset_label(d)} ({m})" for d, m in datasets.items()) or "none"),
            "Models: " + ", ".join(display_name(m) for m in model_order(set(df["model"]) - {""})),
            "Seeds: " + ", ".join(str(s) for s in sorted(set(df.loc[df["seed"] >= 0, "seed"]))),
            *_setup_lines(df, cfgs, datasets, rep),
            "Code: " + (", ".join(f"`{c[:12]}`" for c in commits) or "unknown")
            + f"; package {', '.join(sorted(set(df['package_version']) - {''})) or '?'}",
            "Every artefact was regenerated from the stored results only; each links its `sources.json` "
            "(runs, configs, commits, rows hash).",
            "Figures: PNG (200 dpi) and vector PDF; tables: Markdown and LaTeX, which compile with pdflatex under "
            "the preamble `" + LATEX_PREAMBLE.replace("\n", " ") + "`."]


def _setup_lines(df: pd.DataFrame, cfgs: dict[str, dict[str, Any]], datasets: dict[str, str],
                 rep: Report | None = None) -> list[str]:
    """One line per dataset: the model size and training schedule the runs used (from their configs)."""
    out = []
    for ds in datasets:
        hashes = sorted(set(df.loc[(df["dataset"] == ds) & (df["kind"] == "train"), "config_hash"]) - {""})
        cfg = next((cfgs[h] for h in hashes if h in cfgs), None)
        if cfg is None:
            continue
        m, t, d = cfg["model"], cfg["train"], cfg["data"]
        sizes = train_sizes(rep.runs, ds) if rep is not None else []
        n = (f", trained on {train_words(sizes)}" if sizes else
             f", up to {d['max_train']:,} training examples" if d.get("max_train") else "")
        tests = test_examples_words(df, ds, d.get("max_test"), d.get("test_subset") or "first")
        n += f", {tests}" if tests else ""
        out.append(f"Setup on {dataset_label(ds)}: D={m['dim']}, {m['depth']} layers, {m['heads']} heads; "
                   f"{t['epochs']} epochs, batch {t['batch_size']}, lr {t['lr']:g}{n}{_precision_words(df, ds)}"
                   + _configs_words([cfgs[h] for h in hashes if h in cfgs], len(hashes),
                                    df.loc[(df["dataset"] == ds) & (df["kind"] == "train"), "model"].nunique()))
    return out


def _precision_words(df: pd.DataFrame, ds: str) -> str:
    """The precision the runs on a dataset computed in (store column ``precision``; rows from before it was
    recorded read fp32): "; computed in fp32", or "; computed in bf16 and fp32" where both are present."""
    if "precision" not in df.columns:
        return ""
    found = sorted(set(df.loc[(df["dataset"] == ds) & df["kind"].isin(["train", "eval"]), "precision"]) - {""})
    if not found:
        return ""
    return f"; computed in {' and '.join(found)}"


def _differing_keys(configs: list[dict[str, Any]], *, skip: str) -> list[str]:
    """Dotted config keys whose values differ between configurations of the same model (e.g. a vocabulary
    size built from each seed's training subset)."""
    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": repr(v)})
        return out
    by_model: dict[str, list[dict[str, Any]]] = {}
    for c in configs:
        f = flat(c)
        by_model.setdefault(f.get(skip, ""), []).append(f)
    keys = {k for group in by_model.values() for k in set().union(*group)
            if len({g.get(k) for g in group}) > 1}
    return sorted(keys)


def _configs_words(configs: list[dict[str, Any]], n: int, n_models: int) -> str:
    """What "N configs" behind a setup line means: the runs on a dataset used N run configurations (config
    hashes; each model has its own), and whether they share the size and schedule the line shows."""
    if n <= 1:
        return ""
    shape = lambda c: (c["model"].get("dim"), c["model"].get("depth"), c["model"].get("heads"),  # noqa: E731
                       c["train"].get("epochs"), c["train"].get("batch_size"), c["train"].get("lr"),
                       c["data"].get("max_train"), c["data"].get("max_test"))
    if len({shape(c) for c in configs}) <= 1:
        which = ("one per model: they differ in the model's own settings, e.g. its attention" if n == n_models
                 else f"for {n_models} model{'s' if n_models != 1 else ''}; besides the model's own settings they "
                      f"differ in {', '.join(_differing_keys(configs, skip='model.name')) or 'other settings'}")
        return f" — {n} run configurations ({which}), all with this size and schedule"
    return (f" — {n} run configurations that differ in size or schedule (the first is shown; each artefact's "
            "sources.json lists the config hashes)")
