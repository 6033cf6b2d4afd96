"""The one table writer (report and ``compare``): Markdown, LaTeX (booktabs) and HTML from one table object.

A :class:`Table` holds display strings (numbers already formatted), a caption and notes. LaTeX output
compiles with pdflatex under :data:`LATEX_PREAMBLE` (booktabs + amsmath, nothing else): every Unicode sign
the suite prints becomes math mode (±, ×, χ², Σ, Δ, ...), a minus sign in a number is a true minus (``$-$``),
and tables of :data:`WIDE_COLUMNS` or more columns use ``table*`` in a smaller font with narrower column gaps.
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
        esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
        sep = {"l": ":--", "r": "--:", "c": ":-:"}
        out = []
        if self.caption and caption:
            out += [f"**{self.caption}**", ""]
        out.append("| " + " | ".join(esc(c) for c in self.columns) + " |")
        out.append("|" + "|".join(sep[a] for a in self._align()) + "|")
        for r in self.rows:
            out.append("| " + " | ".join(esc(v) for v in r) + " |")
        if self.notes:
            out.append("")
            out += [f"- {n}" for n in self.notes]
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
        al = self._align()
        out = ["<table>"]
        if self.caption and caption:
            out.append(f"<caption>{html.escape(self.caption)}</caption>")
        out.append("<thead><tr>" + "".join(f'<th class="{cls[a]}">{html.escape(c)}</th>'
                                           for a, c in zip(al, self.columns)) + "</tr></thead>")
        out.append("<tbody>")
        for r in self.rows:
            out.append("<tr>" + "".join(f'<td class="{cls[a]}">{html.escape(str(v))}</td>'
                                        for a, v in zip(al, r)) + "</tr>")
        out.append("</tbody></table>")
        if self.notes:
            out.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
                       + "</ul>")
        return "\n".join(out)


_LATEX_TEXT = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
               "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
               "<": "$<$", ">": "$>$", "|": "$|$", "—": "---", "–": "--", "…": "\\ldots{}", "’": "'",
               "‘": "`", "“": "``", "”": "''", "§": "\\S{}", "°": "$^\\circ$", "\u00a0": "~"}
_LATEX_MATH = {"±": "\\pm", "×": "\\times", "−": "-", "Δ": "\\Delta", "Σ": "\\Sigma", "χ": "\\chi",
               "α": "\\alpha", "ε": "\\varepsilon", "κ": "\\kappa", "λ": "\\lambda", "σ": "\\sigma",
               "μ": "\\mu", "≥": "\\geq", "≤": "\\leq", "≈": "\\approx", "≠": "\\neq", "→": "\\to",
               "·": "\\cdot", "†": "^{\\dagger}", "²": "^{2}", "³": "^{3}", "√": "\\surd", "∞": "\\infty",
               "⁴": "^{4}", "⁻": "^{-}", "¹": "^{1}", "ⁿ": "^{n}", "∈": "\\in", "₀": "_{0}", "₁": "_{1}"}
# a hyphen used as a minus sign: at the start or after a space / bracket / slash, before a digit or a dot-digit
_MINUS = re.compile(r"(?:(?<=^)|(?<=[\s(\[/=,;]))-(?=\.?\d)")


def latex_escape(s: object) -> str:
    """Text for a LaTeX table cell: special characters escaped, Unicode signs in math mode (χ² → ``$\\chi^{2}$``),
    hyphens used as minus signs → ``$-$``; any other non-ASCII letter falls back to its ASCII base (é → e)."""
    text = _MINUS.sub("\u2212", str(s))
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


def fmt_mean_sd(mean: float, sd: float | None, digits: int = 2) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def fmt_num(v: float | None, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}"


def fmt_count(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{int(round(v)):,}"


def fmt_p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    return "<0.001" if p < 1e-3 else f"{p:.3f}"
