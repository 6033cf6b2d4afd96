"""The one table writer (report and ``compare``): Markdown, LaTeX (booktabs) and HTML from one table object.

A :class:`Table` holds display strings (numbers already formatted), a caption and notes. LaTeX output
compiles with pdflatex under :data:`LATEX_PREAMBLE` (booktabs + amsmath, nothing else): every Unicode sign
the suite prints becomes math mode (±, ×, χ², Σ, Δ, ...), a minus sign in a number is a true minus (``$-$``),
and tables of :data:`WIDE_COLUMNS` or more columns use ``table*`` in a smaller font with narrower column gaps.

Text from the data (model, dataset, class names) is escaped for each format: in Markdown ``<``, ``>`` and ``&``
become entities and ``|``, ``[``, ``]``, backticks and backslashes are backslash-escaped (no raw HTML tag, link
or broken table row reaches a ``.md``), in HTML everything is entity-escaped, in LaTeX special characters are
escaped; control characters (NUL, escape, newlines inside a cell, ...) never reach any of them
(:func:`printable`).
"""
from __future__ import annotations

import html
import math
import re
import unicodedata
from dataclasses import dataclass, field

#: what every ``.tex`` the suite writes needs (the report states it)
LATEX_PREAMBLE = ("\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n\\usepackage{amsmath}\n\\usepackage{graphicx}")
WIDE_COLUMNS = 8


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    notes: list[str] = field(default_factory=list)
    align: str | None = None          # one letter per column: l / r / c; default: first l, rest r

    def _align(self) -> str:
        if self.align and len(self.align) == len(self.columns):
            return self.align
        return "l" + "r" * (len(self.columns) - 1)

    def to_markdown(self, caption: bool = True) -> str:
        esc = lambda s: md_escape(printable(s, cell=True))  # noqa: E731
        sep = {"l": ":--", "r": "--:", "c": ":-:"}
        out = []
        if self.caption and caption:
            out += [f"**{md_escape(printable(self.caption))}**", ""]
        out.append("| " + " | ".join(esc(c) for c in self.columns) + " |")
        out.append("|" + "|".join(sep[a] for a in self._align()) + "|")
        for r in self.rows:
            out.append("| " + " | ".join(esc(v) for v in r) + " |")
        if self.notes:
            out.append("")
            out += [f"- {md_escape(printable(n))}" for n in self.notes]
        return "\n".join(out) + "\n"

    def to_latex(self, label: str | None = None) -> str:
        """A booktabs ``table`` (``table*``, smaller, for :data:`WIDE_COLUMNS`+ columns); see :data:`LATEX_PREAMBLE`."""
        env = "table*" if len(self.columns) >= WIDE_COLUMNS else "table"
        lines = [f"\\begin{{{env}}}[t]", "\\centering"]
        if env == "table*":
            lines += ["\\small", "\\setlength{\\tabcolsep}{4pt}"]
        if self.caption:
            lines.append(f"\\caption{{{latex_escape(self.caption)}}}")
        if label:
            lines.append(f"\\label{{{label}}}")
        # shrink to the line width only when wider (\\width = the tabular's natural width, graphicx)
        lines.append("\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%")
        lines.append(f"\\begin{{tabular}}{{{self._align()}}}")
        lines.append("\\toprule")
        lines.append(" & ".join(latex_escape(c) for c in self.columns) + " \\\\")
        lines.append("\\midrule")
        for r in self.rows:
            lines.append(" & ".join(latex_escape(v) for v in r) + " \\\\")
        lines.append("\\bottomrule")
        lines.append("\\end{tabular}}")
        if self.notes:
            lines.append("\\par\\smallskip")
            lines.append("\\parbox{\\linewidth}{\\footnotesize\\raggedright")
            lines += [latex_escape(n) + "\\par" for n in self.notes]
            lines.append("}")
        lines.append(f"\\end{{{env}}}")
        return "\n".join(lines) + "\n"

    def to_html(self, caption: bool = True) -> str:
        cls = {"l": "l", "r": "r", "c": "c"}
        esc = lambda v: html.escape(printable(v))  # noqa: E731
        al = self._align()
        out = ["<table>"]
        if self.caption and caption:
            out.append(f"<caption>{esc(self.caption)}</caption>")
        out.append("<thead><tr>" + "".join(f'<th class="{cls[a]}">{esc(c)}</th>'
                                           for a, c in zip(al, self.columns)) + "</tr></thead>")
        out.append("<tbody>")
        for r in self.rows:   # a number with its ± SD or an interval never breaks across lines (class nw)
            out.append("<tr>" + "".join(f'<td class="{cls[a]}{" nw" if _ONE_LINE.search(str(v)) else ""}">'
                                        f'{esc(v)}</td>' for a, v in zip(al, r)) + "</tr>")
        out.append("</tbody></table>")
        if self.notes:
            out.append('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in self.notes)
                       + "</ul>")
        return "\n".join(out)


_LATEX_TEXT = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
               "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
               "<": "$<$", ">": "$>$", "|": "$|$", "—": "---", "–": "--", "…": "\\ldots{}", "’": "'",
               "‘": "`", "“": "``", "”": "''", "§": "\\S{}", "°": "$^\\circ$", "\u00a0": "~"}
_LATEX_MATH = {"±": "\\pm", "×": "\\times", "−": "-", "Δ": "\\Delta", "Σ": "\\Sigma", "χ": "\\chi",
               "α": "\\alpha", "ε": "\\varepsilon", "κ": "\\kappa", "λ": "\\lambda", "σ": "\\sigma",
               "μ": "\\mu", "≥": "\\geq", "≤": "\\leq", "≈": "\\approx", "≠": "\\neq", "→": "\\to",
               "·": "\\cdot", "†": "^{\\dagger}", "‡": "^{\\ddagger}",
               "²": "^{2}", "³": "^{3}", "√": "\\surd", "∞": "\\infty",
               "⁴": "^{4}", "⁻": "^{-}", "¹": "^{1}", "ⁿ": "^{n}", "∈": "\\in", "₀": "_{0}", "₁": "_{1}"}
# a hyphen used as a minus sign: at the start or after a space / bracket / slash, before a digit or a dot-digit
_MINUS = re.compile(r"(?:(?<=^)|(?<=[\s(\[/=,;]))-(?=\.?\d)")


_ONE_LINE = re.compile(r"\d\s*±\s*\d|^\[.*\]$")   # "24.62 ± 0.31", "[-1.20, 3.40]"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MD_SPECIAL = re.compile(r"([\\`\[\]|])")


def printable(s: object, cell: bool = False) -> str:
    """``s`` as text without control characters: NUL, escape, DEL, C1 codes and bidirectional overrides become
    U+FFFD; tabs and line breaks stay (``cell``: become spaces, so a table row stays one line)."""
    text = str(s)
    keep = "" if cell else "\t\n\r"
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else (" " if m.group() in "\t\n\r" else "\ufffd"),
                        text)


def md_escape(s: object) -> str:
    """Text for Markdown (a table cell, a caption, a list item): ``&``, ``<``, ``>`` as HTML entities (no raw tag
    or autolink survives), backslash, backtick, ``[``, ``]`` and ``|`` backslash-escaped (no code span, link or
    extra table column)."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(str(s), quote=False))


def md_inline(text: object) -> str:
    """Markdown for a line with `code` spans (the report's header lines): the spans become ``<code>`` elements
    with escaped contents, the rest is :func:`md_escape`-d; control characters removed."""
    out = []
    for i, chunk in enumerate(printable(text, cell=True).split("`")):
        out.append(f"<code>{html.escape(chunk, quote=False)}</code>" if i % 2 else md_escape(chunk))
    return "".join(out)


def latex_escape(s: object) -> str:
    """Text for a LaTeX table cell: special characters escaped, Unicode signs in math mode (χ² → ``$\\chi^{2}$``),
    hyphens used as minus signs → ``$-$``; any other non-ASCII letter falls back to its ASCII base (é → e);
    control characters never reach the file (a NUL or escape would break pdflatex; see :func:`printable`)."""
    text = _MINUS.sub("\u2212", printable(s, cell=True))
    out: list[str] = []
    math_run: list[str] = []

    def flush() -> None:
        if math_run:
            out.append("$" + " ".join(math_run) + "$")
            math_run.clear()

    for ch in text:
        if ch in _LATEX_MATH:
            math_run.append(_LATEX_MATH[ch])
            continue
        flush()
        if ch in _LATEX_TEXT:
            out.append(_LATEX_TEXT[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append(unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?")
    flush()
    return "".join(out)


def latex_comment(text: object) -> str:
    """A ``%`` comment line for a ``.tex`` file: ``text`` through :func:`latex_escape`, so a line break in it
    (a model name, a warning) cannot end the comment and nothing in it is live LaTeX even outside one."""
    return "% " + latex_escape(text)


def rounded(v: float, digits: int = 2) -> str:
    """The one rounding of a number for print: ``v`` with ``digits`` decimals, after snapping it to 12
    significant digits, so one quantity summed in two orders (197/800 as 0.24624999999999997 and as
    0.24625000000000002) prints the same everywhere (24.62; ties to even, as Python rounds an exact 24.625)."""
    v = float(v)
    if math.isfinite(v) and v != 0.0:
        v = float(f"{v:.12g}")
    return f"{v:.{digits}f}"


def fmt_mean_sd(mean: float, sd: float | None, digits: int = 2) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return rounded(mean, digits)
    return f"{rounded(mean, digits)} ± {rounded(sd, digits)}"


def fmt_num(v: float | None, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return rounded(v, digits)


def fmt_count(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{int(round(v)):,}"


def fmt_p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    return "<0.001" if p < 1e-3 else rounded(p, 3)
