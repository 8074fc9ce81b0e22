"""The per-cell table of the HTML report: metrics first, one readable label per cell, one table per audit.

Identifier columns (audit, model, dataset, variant, protocol, evaluator, confidence kind) collapse
into a single "cell" label; the metric columns (each value with its bootstrap interval on a
second line) follow it, then the counts. Rows are grouped by audit and sortable by any column
(``data-sort`` holds the raw value; the template's script sorts on a header click).
"""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from auditlang.report.tables import LEGEND, NA_MARK, UNDEFINED_MARK, fixed

IDS = ("audit", "model", "dataset", "variant", "protocol", "evaluator", "confidence_kind")
COUNTS = ("n", "n_error", "n_correct_known", "n_conf", "n_conf_missing", "answer_parse_rate", "vpr", "scale_mismatch_rate",
          "mean_confidence")
LABEL_AXES = ("model", "dataset", "variant", "protocol", "evaluator")


def metric_columns(cells: pd.DataFrame) -> list[str]:
    """Metric columns in table order (accuracy first), without their ``lo`` / ``hi`` companions."""
    skip = set(IDS) | set(COUNTS) | {"cell_id", "excluded"}
    cols = [c for c in cells.columns if c not in skip and not (c.endswith((" lo", " hi")) and c[:-3] in cells.columns)]
    return sorted(cols, key=lambda c: (c != "accuracy", list(cells.columns).index(c)))


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


NA_TD = f'<td class="na" data-sort="">{NA_MARK}</td>'  # not applicable to the cell (tables.NA)


def _metric_td(row: pd.Series, col: str) -> str:
    v = _num(row.get(col))
    if v is None:
        return f'<td class="num" data-sort="">{UNDEFINED_MARK}</td>'
    lo, hi = _num(row.get(f"{col} lo")), _num(row.get(f"{col} hi"))
    ci = f'<span class="ci">[{fixed(lo)}, {fixed(hi)}]</span>' if lo is not None and hi is not None else ""
    return f'<td class="num" data-sort="{v!r}">{fixed(v)}{ci}</td>'


def _plain_td(v: Any, count: bool) -> str:
    f = _num(v)
    if f is None:
        return f'<td data-sort="{html.escape(str(v))}">{html.escape(UNDEFINED_MARK if v is None or v != v else str(v))}</td>'
    shown = str(int(f)) if count and f == int(f) else fixed(f)
    return f'<td class="num" data-sort="{f!r}">{shown}</td>'


def _wbr(name: str) -> str:
    """A column name with line-break opportunities after ``_ ( = ,`` (headers wrap at word parts)."""
    out = html.escape(name)
    for ch in "_(=,":
        out = out.replace(ch, ch + "<wbr>")
    return out


def label(row: pd.Series) -> str:
    """model · dataset · variant · protocol · evaluator (+ confidence kind), HTML-escaped."""
    parts = [html.escape(str(row[a])) for a in LABEL_AXES if a in row and isinstance(row[a], str)]
    kind = row.get("confidence_kind")
    why = row.get("excluded")
    return (" · ".join(parts) + (f' <span class="kind">{html.escape(str(kind))}</span>' if isinstance(kind, str) else "")
            + (f' <strong class="excluded">excluded ({html.escape(why)}): calibration values for reference only'
               '</strong>' if isinstance(why, str) and why else ""))


def errors_note(cells: pd.DataFrame) -> str:
    """The sentence under every per-cell table: how many items failed, and that metrics skip them."""
    n_err = int(cells["n_error"].fillna(0).sum()) if "n_error" in cells.columns else 0
    if not n_err:
        return "0 request errors: every item of every cell was answered."
    bad = int((cells["n_error"].fillna(0) > 0).sum())
    return (f"{n_err} items in {bad} cells are missing because a request failed in the engine (n_error per cell); "
            "every metric uses the n answered items only. Rerun `auditc run` on this run directory to retry them.")


def cells_html(cells: pd.DataFrame, notes: list[str] | None = None, na: dict[str, set[str]] | None = None) -> str:
    """One sortable table per audit (metrics first), after the notes on the cells (degenerate
    answer sets, confidence metrics on fewer items than n, ...); an empty frame says so."""
    if cells.empty:
        return '<p class="nc">not computable: the run has no scored records</p>'
    counts = [c for c in COUNTS if c in cells.columns]
    n_err = int(cells["n_error"].fillna(0).sum()) if "n_error" in cells.columns else 0
    out = [f'<p class="{"nc" if n_err else "note"}" id="request-errors">{html.escape(errors_note(cells))}</p>']
    na = na or {}
    notes = list(notes or []) + [LEGEND]
    out.append('<ul class="notes" id="cell-notes">' + "".join(
        f'<li class="{"nc" if n.startswith("WARNING") else "note"}">{html.escape(n)}</li>' for n in notes) + "</ul>")
    for aid, g in cells.groupby("audit", sort=False) if "audit" in cells.columns else [("", cells)]:
        metrics = [c for c in metric_columns(cells) if g[c].notna().any()]  # this audit's metrics
        out.append(f'<section class="table cells" id="cells-{html.escape(str(aid))}"><h3>Audit {html.escape(str(aid))} '
                   f'({len(g)} cells)</h3>')
        head = ['<th class="label" data-type="text">cell: model · dataset · variant · protocol · evaluator</th>']
        head += [f'<th class="metric" data-type="num">{_wbr(c)}</th>' for c in metrics]
        head += [f'<th class="count" data-type="num">{_wbr(c)}</th>' for c in counts]
        out.append('<table class="sortable"><thead><tr>' + "".join(head) + "</tr></thead><tbody>")
        for _, row in g.sort_values([a for a in LABEL_AXES if a in g.columns], kind="stable").iterrows():
            tds = [f'<td class="label" data-sort="{html.escape(str(row.get("cell_id", "")))}">{label(row)}</td>']
            skip = na.get(str(row.get("cell_id", "")), set())
            tds += [NA_TD if c in skip else _metric_td(row, c) for c in metrics]
            tds += [NA_TD if c in skip else _plain_td(row[c], c.startswith("n")) for c in counts]
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</tbody></table></section>")
    return "\n".join(out)
