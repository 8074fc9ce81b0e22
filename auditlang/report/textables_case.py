"""LaTeX forms of study 002's case studies (``case_study``: Tables 9 / 10 and their summaries 2 / 3),
in the paper's block shape: the model and dataset named on a case's first row, a rule between
cases, the question and answer in the notes (the paper's line over each block), no column the
page cannot hold. Table 3's one-column-per-answer summary is set transposed (a row per distinct
answer, a column per method), as a page holds it; the Markdown/CSV/HTML forms keep the paper's."""

from __future__ import annotations

import math
from typing import Any

from auditlang.report.comparisons import Comparison
from auditlang.report.tables import UNDEFINED_MARK, Table, fixed
from auditlang.report.textables import TexTable, _num, _table

LABELS = ("model", "dataset", "item", "question", "y", "y*", "Corr.", "CE")


def _value(v: Any, digits: int) -> str:
    return fixed(float(v), digits) if _num(v) and not math.isnan(float(v)) else UNDEFINED_MARK


SHORT_ANSWER = 12  # characters: longer sampled answers go to the notes, not into a number column


def _per_case(c: Comparison, t: Table) -> TexTable:
    """Table 9 / 10: a row per case and method. by=samples: the sampled answers' row first, as 002
    prints it, when every answer is short; otherwise they are listed in the notes (y_k = ...)."""
    values = [col for col in t.columns if col not in LABELS]
    recs = t.records()
    answers = [r for r in recs if r["CE"] == "answer"]
    inline = all(len(str(r[v] or "")) <= SHORT_ANSWER for r in answers for v in values)
    tt = TexTable(t.name, t.title, ["model", "dataset", "CE", *values], [False, False, False] + [True] * len(values))
    last, listed = None, []
    for i, r in enumerate(recs):
        case = (r["model"], r["dataset"], r["item"])
        text = r["CE"] == "answer"  # the sampled answers as the evaluator reads them
        if text and not inline:
            shown = "; ".join(f"{v} = {r[v]}" for v in values if r[v] is not None)
            listed.append(f"Sampled answers of {r['model']} / {r['dataset']} (item {r['item']}): {shown}.")
            continue
        cells = [r["model"] if case != last else "", r["dataset"] if case != last else "", r["CE"]]
        cells += [("" if r[v] is None else str(r[v])) if text else _value(r[v], t.digits) for v in values]
        if last is not None and case != last:
            tt.rules.add(len(tt.rows))
        tt.add(cells, f"{t.name}[{i}]")
        last = case
    notes = t.all_notes()
    heads = [n for n in notes if n.startswith("Case ") and " rows: " not in n]  # "Case k: model ..., question"
    tt.notes += heads + listed + [n for n in notes if n not in heads]
    return tt


def _prompts_summary(t: Table) -> TexTable:
    """Table 2: per method, max / min / mean / P-RB, one column block per case."""
    cols = t.columns[1:]
    header: list[Any] = ["CE"] + [tuple(col.rsplit(" ", 1)) for col in cols]
    tt = TexTable(t.name, t.title, header, [False] + [True] * len(cols))
    for i, r in enumerate(t.records()):
        tt.add([r["CE"]] + [_value(r[col], t.digits) for col in cols], f"{t.name}[{i}]")
    tt.notes += t.all_notes()
    return tt


def _samples_summary(t: Table, labels: list[str]) -> TexTable:
    """Table 3, transposed: a row per case and distinct answer (then the case's A-STB and A-SST), a
    column per method."""
    methods = [r[0] for r in t.rows]
    tt = TexTable(t.name, t.title + " (set transposed: a row per distinct answer, a column per method)",
                  ["case", "answer", *methods], [False, False] + [True] * len(methods))
    by_col = {col: [r[k] for r in t.rows] for k, col in enumerate(t.columns) if k}
    for n, lab in enumerate(dict.fromkeys(labels)):
        mine = [col for col in t.columns[1:] if col.startswith(f"{lab}: ")]
        stats = [f"{lab} A-STB", f"{lab} A-SST"]
        if n:
            tt.rules.add(len(tt.rows))
        for k, col in enumerate(mine + [s for s in stats if s in by_col]):
            shown = col[len(lab) + 2:] if col in mine else col.rsplit(" ", 1)[1]
            tt.add([lab if k == 0 else "", shown] + [_value(v, t.digits) for v in by_col[col]], f"{t.name}[{col}]")
    tt.notes += [n.replace("One column per distinct sampled answer text", "One row per distinct sampled answer text")
                 for n in t.all_notes()]  # the note of the Markdown form, whose answers are columns
    return tt


def case_study_tables(c: Comparison) -> list[TexTable]:
    """The per-case table and its summary, each in a shape a page holds (see the module's doc)."""
    t, s = _table(c), _table(c, "_summary")
    out = [] if t is None else [_per_case(c, t)]
    if s is not None and s.rows:
        labels = [f"{r['model']} / {r['dataset']}" for r in t.records()] if t is not None else []
        out.append(_prompts_summary(s) if s.columns[1:] and s.columns[1].endswith(" max") else _samples_summary(s, labels))
    return out
