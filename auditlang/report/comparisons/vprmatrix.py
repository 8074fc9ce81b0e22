"""Study 000's verbal parse-rate tables (App. D.2 Table 7, D.3 Table 8): the VPR of some models per
dataset, a column per (variant, verbal protocol), cells below the audit's inclusion threshold marked
with a cross, each value with the per-cell percentile interval of ``metrics/cells.csv`` (the ``vpr``
metric's, when the audit declares it) and, with exactly two protocols, the difference second - first
per variant (Table 8's delta: percent_0_100 - decimal_01).
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any

from auditlang.report.comparisons.common import Comparison
from auditlang.report.comparisons.verbal import BELOW, verbal_protocols, vpr_summary
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable


def vpr_matrix(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    models = list(c.models) or list(a.models)
    protocols = list(c.protocols) or verbal_protocols(rd, c.audit)
    variants = list(c.variants) or list(a.variants)
    s = vpr_summary(rd, c.audit)
    cols = _columns(protocols, variants)
    delta = len(protocols) == 2
    header = ["model", "dataset", "evaluator"]
    for v in variants:
        for p in protocols:
            header += [cols[(v, p)]] + ([f"{cols[(v, p)]} lo", f"{cols[(v, p)]} hi"] if c.intervals else [])
        if delta:
            header.append(_delta(v, variants))
    out = Comparison(name, "vpr_matrix", c.audit, shape="vpr_matrix")
    t = Table(name, f"Verbal parse rate per dataset ({name}; study 000 App. D.2-D.3)", header)
    ci = _intervals(rd, c.audit) if c.intervals else {}
    for m, e, d in product(models, rd.evaluators(c.audit), a.datasets):
        row = _row(rd, c, t, (m, d, e), variants, protocols, s, ci, cols)
        if all(x != x for x in row[3:]):
            t.nc("no verbal records", f"{m} / {d} / {e}")
            continue
        t.add(*row)
    if rd.vpr_declared(c.audit) and c.mark_below:
        t.notes.append(f"{BELOW} = below the inclusion threshold VPR >= {s.threshold:.2f} ({rd.vpr_source(c.audit)}).")
    elif c.mark_below:
        t.notes.append(not_computable("below-threshold marks: the audit declares no vpr_threshold"))
    if c.intervals:
        t.notes.append("Intervals: the per-cell percentile bootstrap of the vpr metric (metrics/cells.csv; 000 App. E.2 "
                       "'Per-cell VPR'); blank where the audit's metrics do not list vpr.")
    if delta:
        t.notes.append(f"delta = VPR under {protocols[1]} - VPR under {protocols[0]} (000 Table 8).")
    out.tables.append(t)
    out.data = {"protocols": protocols, "variants": variants, "intervals": bool(c.intervals), "columns": cols,
                "threshold": s.threshold if rd.vpr_declared(c.audit) and c.mark_below else None}
    return out


def _row(rd: RunData, c, t: Table, key: tuple[str, str, str], variants: list[str], protocols: list[str], s,
         ci: dict, cols: dict[tuple[str, str], str]) -> list[Any]:
    """One (model, dataset, evaluator) row: each (variant, protocol)'s VPR (with its interval), the
    below-threshold marks on ``t`` for the row about to be added, and the per-variant delta."""
    m, d, e = key
    row: list[Any] = [m, d, e]
    below = c.mark_below and rd.vpr_declared(c.audit)
    for v in variants:
        vals = [s.cells.get((m, d, v, p, e), math.nan) for p in protocols]
        for p, x in zip(protocols, vals):
            row += [x] + (list(ci.get((m, d, v, p, e), (math.nan, math.nan))) if c.intervals else [])
            if below and x == x and x < s.threshold:
                t.marks[(len(t.rows), cols[(v, p)])] = "below"
        if len(protocols) == 2:
            row.append(vals[1] - vals[0])
    return row


def _columns(protocols: list[str], variants: list[str]) -> dict[tuple[str, str], str]:
    """(variant, protocol) -> its column: the variant when one protocol (Table 7), the protocol when one
    variant (Table 8), else both."""
    if len(protocols) == 1:
        return {(v, protocols[0]): v for v in variants}
    if len(variants) == 1:
        return {(variants[0], p): f"VPR ({p})" for p in protocols}
    return {(v, p): f"{v} ({p})" for v in variants for p in protocols}


def _delta(v: str, variants: list[str]) -> str:
    return "delta" if len(variants) == 1 else f"delta ({v})"


def _intervals(rd: RunData, aid: str) -> dict[tuple[str, str, str, str, str], tuple[float, float]]:
    """(model, dataset, variant, protocol, evaluator) -> the vpr metric's interval from the cell table."""
    cells = rd.cells
    if cells.empty or "vpr lo" not in cells.columns:
        return {}
    sub = cells[cells["audit"] == aid]
    return {(r.model, r.dataset, r.variant, r.protocol, r.evaluator): (float(r._asdict()["vpr_lo"]),
                                                                      float(r._asdict()["vpr_hi"]))
            for r in sub.rename(columns={"vpr lo": "vpr_lo", "vpr hi": "vpr_hi"}).itertuples()}
