"""A small table type rendered to CSV, Markdown, LaTeX (booktabs) and HTML.

Values are kept raw (floats at full precision in CSV); the text renderings show floats with
three decimals and merge ``<col> lo`` / ``<col> hi`` columns into ``value [lo, hi]``.
``notes`` carry explanations and every "not computable: <reason>" line of a comparison.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.report.latex import breakable
from auditlang.report.safe_text import write_report_text

NOT_COMPUTABLE = "not computable"


class NotApplicable:
    """A table value that does not apply to its row (the verbal parse rate of a token-probability
    cell, a calibration metric of an abstention probe): shown ``n/a`` in every format (CSV too),
    never the undefined mark ``–`` (CSV: blank) of a value the records could not give."""

    _one: NotApplicable | None = None

    def __new__(cls) -> NotApplicable:
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def __str__(self) -> str:
        return NA_MARK

    __repr__ = __str__


NA_MARK, UNDEFINED_MARK = "n/a", "–"
MD_MARKS = {"best": "**{}**", "worst": "_{}_", "extreme": "**{}**", "below": "{} ✗"}  # Table.marks in Markdown (no underline there)
MD_UNDERLINE_NOTE = "Underlined values are shown in italics here (Markdown has no underline)."
HTML_MARKS = {"best": "<strong>{}</strong>", "worst": "<u>{}</u>", "extreme": "<strong>{}</strong>", "below": "{} ✗"}
NA = NotApplicable()
LEGEND = (f"{UNDEFINED_MARK} = undefined: the records give no value (no confidence read, one class only, ...; "
          f"blank in CSV); {NA_MARK} = not applicable to this cell (e.g. the verbal parse rate of a token-probability "
          "cell)")


def not_computable(reason: str) -> str:
    """The one phrasing used for every quantity the records cannot support."""
    return f"{NOT_COMPUTABLE}: {reason}"


def safe_name(name: str) -> str:
    """A file-name-safe stem: every character other than letters, digits, '-' and '_' becomes '_'."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def fixed(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` decimals; a value that rounds to zero is written without a sign
    (``0.000``, never ``-0.000``)."""
    s = f"{v:.{digits}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def fmt(v: Any, digits: int = 3) -> str:
    """Display form: floats with ``digits`` decimals, NaN/None as an en dash (undefined), ``NA`` as
    n/a, bools as yes/no."""
    if v is None:
        return UNDEFINED_MARK
    if isinstance(v, NotApplicable):
        return NA_MARK
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return UNDEFINED_MARK if math.isnan(v) else fixed(v, digits)
    if hasattr(v, "item") and not isinstance(v, str):  # numpy scalar
        return fmt(v.item(), digits)
    return str(v)


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, NotApplicable):
        return NA_MARK
    if hasattr(v, "item") and not isinstance(v, str):
        v = v.item()
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return v


@dataclass
class Table:
    """One result table. ``name`` is the file stem; ``rows`` are lists aligned with ``columns``."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    legend: bool = False  # add LEGEND to the notes when a value is undefined or not applicable
    _nc: dict[str, list[str]] = field(default_factory=dict, repr=False)
    row_facts: dict[int, list[str]] = field(default_factory=dict, repr=False)  # row -> the facts it states (claims.json)
    digits: int = 3  # decimals of the text renderings (CSV keeps full precision)
    # (row, column) -> "best" or "worst": bold / underlined in HTML and LaTeX, bold / italic in
    # Markdown (which has no underline), as a paper marks a table's best and worst values; "extreme":
    # bold everywhere (one of a column's lowest or highest values, 000 Table 3); "below": a cross after
    # the value (under the VPR inclusion threshold, 000 Table 7)
    marks: dict[tuple[int, str], str] = field(default_factory=dict, repr=False)

    def nc(self, reason: str, where: str) -> None:
        """Record that ``reason`` makes a quantity not computable at ``where`` (grouped when rendered)."""
        self._nc.setdefault(reason, []).append(where)

    def all_notes(self) -> list[str]:
        """Notes plus one "not computable: <reason>" line per reason, naming where it applies."""
        out = list(self.notes)
        if self.legend and any(v is None or isinstance(v, NotApplicable) or (isinstance(v, float) and math.isnan(v))
                               for r in self.rows for v in r):
            out.append(LEGEND)
        for reason, wheres in self._nc.items():
            shown = "; ".join(wheres[:4]) + (f"; and {len(wheres) - 4} more" if len(wheres) > 4 else "")
            out.append(not_computable(f"{reason} ({len(wheres)}x: {shown})"))
        return out

    def add(self, *values: Any) -> None:
        if len(values) != len(self.columns):
            raise ValueError(f"table {self.name}: row has {len(values)} values for {len(self.columns)} columns")
        self.rows.append(list(values))

    def state(self, facts: list[str], *values: Any) -> None:
        """:meth:`add` a row and name the facts it states (report/claims.json)."""
        self.add(*values)
        self.row_facts[len(self.rows) - 1] = list(facts)

    def column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    # ------------------------------------------------------------ display columns
    def _display(self) -> tuple[list[str], list[list[str]]]:
        cols = [c for c in self.columns if not (c.endswith((" lo", " hi")) and c[:-3] in self.columns)]
        out = []
        for r in self.rows:
            d = dict(zip(self.columns, r))
            cells = []
            for c in cols:
                s = fmt(d[c], self.digits)
                lo, hi = d.get(f"{c} lo"), d.get(f"{c} hi")
                if isinstance(d[c], float) and not math.isnan(d[c]) and isinstance(lo, float) and isinstance(hi, float) \
                        and not (math.isnan(lo) or math.isnan(hi)):
                    s += f" [{fixed(lo)}, {fixed(hi)}]"
                cells.append(s)
            out.append(cells)
        return cols, out

    def _marked(self, i: int, col: str, text: str, how: dict[str, str]) -> str:
        """``text`` of row ``i``, column ``col`` wrapped in its mark's markup (``how``: mark -> format)."""
        mark = self.marks.get((i, col))
        return how[mark].format(text) if mark in how and text != UNDEFINED_MARK else text

    # ------------------------------------------------------------ renderers
    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for r in self.rows:
            w.writerow([_csv_value(v) for v in r])
        return buf.getvalue()

    def to_markdown(self, heading: int = 3) -> str:
        lines = [f"{'#' * heading} {self.title}", ""]
        if self.rows:
            cols, rows = self._display()
            lines.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
            lines.append("|" + "|".join("---" for _ in cols) + "|")
            lines += ["| " + " | ".join(_md_cell(self._marked(i, c, s, MD_MARKS)) for c, s in zip(cols, r)) + " |"
                      for i, r in enumerate(rows)]
            lines.append("")
        lines += [f"- {n}" for n in self.all_notes()]
        if "worst" in self.marks.values():
            lines.append(f"- {MD_UNDERLINE_NOTE}")
        return "\n".join(lines).rstrip() + "\n"

    def to_latex(self, caption: str | None = None, label: str | None = None, wide: bool = False,
                 max_cell: int | None = None) -> str:
        """A booktabs ``tabularx`` at ``\\footnotesize`` that fits ``\\linewidth`` without scaling.

        ``wide``: a ``table*`` (spans both columns of a two-column article). Every column wraps
        (ragged-right ``X``); a cell longer than ``max_cell`` characters (default 48, 90 when
        ``wide``) moves to a lettered note under the table. Needs ``booktabs``, ``tabularx``, ``array``.
        """
        cols, rows = self._display()
        limit = max_cell or (90 if wide else 48)
        moved: list[str] = []
        body = []
        for r in rows:
            cells = []
            for j, c in enumerate(r):
                if len(c) > limit and j > 0:
                    mark = _letter(len(moved))
                    moved.append(f"({mark}) {cols[j]}, {r[0]}: {c}")
                    cells.append(f"see note ({mark})")
                else:
                    cells.append(c)
            body.append(cells)
        hsize = _column_shares(cols, body, moved, wide)
        env = "table*" if wide else "table"
        colspec = "@{}" + "".join(f">{{\\hsize={h:.3f}\\hsize\\raggedright\\arraybackslash\\hspace{{0pt}}}}X"
                                  for h in hsize) + "@{}"
        notes = moved + self.all_notes()
        avail = (WIDE_PT if wide else NARROW_PT) - 2 * SEP_PT * (len(cols) - 1)
        widths = [h * avail / max(len(cols), 1) for h in hsize]
        head_pt = _cell_lines_pt([f"{c}" for c in cols], widths, BOLD_PT) + RULES_PT
        cap = caption or self.title
        cap_pt = CAPTION_LINE_PT * math.ceil(len(cap or "") * PROSE_PT / (WIDE_PT if wide else NARROW_PT) + 0.5)
        # a float taller than a page loses what does not fit (issue 41: 001's table lost notes (c)-(r)):
        # the rows are set in consecutive floats that fit, the notes after them in their own floats
        parts: list[list[list[str]]] = [[]]
        used = cap_pt + head_pt
        for r in body:
            h = _cell_lines_pt(r, widths, PROSE_PT)
            if parts[-1] and used + h > FLOAT_MAX_PT:
                parts.append([])
                used = cap_pt + head_pt
            parts[-1].append(r)
            used += h
        note_parts: list[list[str]] = [[]]
        note_pt = [LINE_PT * math.ceil(len(n) * PROSE_PT * 1.1 / (WIDE_PT if wide else NARROW_PT) + 0.2) for n in notes]
        if notes and used + sum(note_pt) + NOTES_GAP_PT <= FLOAT_MAX_PT:
            last_notes, note_parts = notes, []
        else:
            last_notes = []
            room = FLOAT_MAX_PT - cap_pt
            for n, h in zip(notes, note_pt):
                if note_parts[-1] and sum(note_pt[notes.index(x)] for x in note_parts[-1]) + h > room:
                    note_parts.append([])
                note_parts[-1].append(n)
            note_parts = [x for x in note_parts if x]
        out: list[str] = []
        total = len(parts) + len(note_parts)
        for k, rows_k in enumerate(parts):
            cont = f" (continued, part {k + 1} of {total})" if k else (f" (part 1 of {total})" if total > 1 else "")
            out += [f"\\begin{{{env}}}[tbp]", "\\centering", "\\footnotesize",
                    f"\\setlength{{\\tabcolsep}}{{{SEP_PT:g}pt}}"]
            if cap:
                out.append(f"\\caption{{{breakable(cap + cont)}}}")
            if label and not k:
                out.append(f"\\label{{{label}}}")
            out += [f"\\begin{{tabularx}}{{\\linewidth}}{{{colspec}}}", "\\toprule",
                    " & ".join(f"\\textbf{{{breakable(c)}}}" for c in cols) + " \\\\", "\\midrule"]
            out += [" & ".join(breakable(c) for c in r) + " \\\\" for r in rows_k]
            out += ["\\bottomrule", "\\end{tabularx}"]
            if last_notes and k == len(parts) - 1:
                out.append("\\par\\smallskip{\\raggedright")
                out += [breakable(n) + "\\par" for n in last_notes]
                out.append("}")
            out.append(f"\\end{{{env}}}")
        for k, ns in enumerate(note_parts):
            part = len(parts) + k + 1
            out += [f"\\begin{{{env}}}[tbp]", "\\footnotesize"]
            out.append(f"\\caption{{{breakable((cap or self.name) + f' (notes, part {part} of {total})')}}}")
            out.append("{\\raggedright")
            out += [breakable(n) + "\\par" for n in ns]
            out += ["}", f"\\end{{{env}}}"]
        return "\n".join(out) + "\n"

    def to_html(self) -> str:
        parts = [f'<section class="table" id="t-{html.escape(self.name)}"><h3>{html.escape(self.title)}</h3>']
        if self.rows:
            cols, rows = self._display()
            parts.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr></thead><tbody>")
            for i, r in enumerate(rows):
                parts.append("<tr>" + "".join(f"<td>{self._marked(i, c, html.escape(s), HTML_MARKS)}</td>"
                                              for c, s in zip(cols, r)) + "</tr>")
            parts.append("</tbody></table>")
        if self.all_notes():
            parts.append("<ul class=\"notes\">" + "".join(
                f'<li class="{"nc" if n.startswith(NOT_COMPUTABLE) else "note"}">{html.escape(n)}</li>' for n in self.all_notes())
                + "</ul>")
        parts.append("</section>")
        return "\n".join(parts)

    def write(self, folder: Path) -> list[Path]:
        """Write ``<name>.csv`` and ``<name>.md`` into ``folder``; returns the paths."""
        folder.mkdir(parents=True, exist_ok=True)
        stem = safe_name(self.name)
        csv_path, md_path = folder / f"{stem}.csv", folder / f"{stem}.md"
        csv_path.write_text(self.to_csv(), encoding="utf-8")
        write_report_text(md_path, self.to_markdown(heading=1))  # markup and control characters neutralised
        return [csv_path, md_path]


# Column sizing of Table.to_latex: identifiers break only after . _ / - (latex.IDENT_DEF), so each
# column gets at least the width of its longest unbreakable part, for the narrowest place the table
# goes: one column of a two-column 10pt article (\columnwidth 229.9pt), or across both (table*).
TT_PT, PROSE_PT, BOLD_PT = 4.3, 4.5, 5.2  # \footnotesize character widths: typewriter, roman, bold (pt)
HYPHENATED = 6  # a prose word hyphenates: its widest unbreakable part is about this many characters
SEP_PT = 4.0  # \tabcolsep of the table
NARROW_PT, WIDE_PT = 229.0, 469.0
_IDENT_LIKE = re.compile(r"[A-Za-z0-9]*[._/][\w./-]*|\w+_\w*")


def piece_pt(text: str, bold: bool = False) -> float:
    """Width (pt) of the widest part of ``text`` that cannot break in a ragged-right column: a
    part of an identifier between its break points (. _ / -, and = ( in an expression), with the
    punctuation attached to it, or a prose word's hyphenated part."""
    widest = 0.0
    for tok in text.split():
        ident = bool(_IDENT_LIKE.search(tok)) and any(ch in tok for ch in "._/")
        for part in re.split(r"(?<=[=(._/-])", tok):
            core = part.strip("()[],;:.")
            if not ident and core.isalpha():
                w = (min(len(core), HYPHENATED) + len(part) - len(core)) * (BOLD_PT if bold else PROSE_PT)
            else:
                w = len(part) * (TT_PT if ident else PROSE_PT)
            widest = max(widest, w + 1.0)
    return widest


def _column_shares(cols: list[str], body: list[list[str]], moved: list[str], wide: bool) -> list[float]:
    """tabularx ``\\hsize`` factors (summing to the number of columns): each column at least its
    widest unbreakable part, the rest shared by the columns' text lengths. When the parts cannot
    all fit, the cell with the widest part moves to a lettered note (``body``, ``moved`` updated)."""
    n = len(cols)
    avail = (WIDE_PT if wide else NARROW_PT) - 2 * SEP_PT * (n - 1)
    while True:
        need = [max([piece_pt(cols[j], bold=True)] + [piece_pt(r[j]) for r in body]) for j in range(n)]
        if sum(need) <= avail or n < 2:
            break
        cand = [(piece_pt(r[j]), i, j) for i, r in enumerate(body) for j in range(1, n) if not r[j].startswith("see note")]
        if not cand:
            break
        _, i, j = max(cand)
        mark = _letter(len(moved))
        moved.append(f"({mark}) {cols[j]}, {body[i][0]}: {body[i][j]}")
        body[i][j] = f"see note ({mark})"
    extra = max(avail - sum(need), 0.0)
    length = [1.0 + sum(len(r[j]) for r in body) / max(len(body), 1) for j in range(n)]
    width = [need[j] + extra * length[j] / sum(length) for j in range(n)]
    total = sum(width)
    return [w * n / total for w in width]


# Heights (pt) for splitting a table taller than a page of a 10pt article (\\textheight 550pt) into
# floats: \\footnotesize lines are 9.5pt; a float holds FLOAT_MAX_PT of rows, caption and notes.
LINE_PT, CAPTION_LINE_PT, RULES_PT, NOTES_GAP_PT, FLOAT_MAX_PT = 9.5, 11.0, 12.0, 4.0, 470.0


def _cell_lines_pt(row: list[str], widths: list[float], char_pt: float) -> float:
    """Estimated height of one table row: its tallest cell wrapped at its column width."""
    lines = 1
    for c, w in zip(row, widths):
        lines = max(lines, math.ceil(len(c) * char_pt * 1.1 / max(w, 20.0)))
    return lines * LINE_PT + 1.0


def _letter(i: int) -> str:
    """Note marks a, b, ..., z, aa, ab, ..."""
    return chr(97 + i) if i < 26 else _letter(i // 26 - 1) + chr(97 + i % 26)


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")
