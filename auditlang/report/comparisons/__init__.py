"""The comparisons a spec declares (``compare NAME = ctor(audit, ...)``), computed from the records.

One module per family; every function takes (RunData, compare name, compare value) and returns a
:class:`Comparison`. A comparison that fails as a whole (e.g. a metric of the wrong kind) becomes a
table holding one "not computable: <reason>" note, never a number.
"""

from __future__ import annotations

from collections.abc import Callable

from auditlang.report.comparisons.aligned import aligned
from auditlang.report.comparisons.common import Comparison
from auditlang.report.comparisons.consistency import consistency
from auditlang.report.comparisons.grid import protocol_grid
from auditlang.report.comparisons.normshift import norm_shift
from auditlang.report.comparisons.provenance import provenance
from auditlang.report.comparisons.repair import evaluator_repair
from auditlang.report.comparisons.robustness import robustness
from auditlang.report.comparisons.spread import size_spread, spread
from auditlang.report.comparisons.verbal import ece_gap, vpr_summary, vpr_tables
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable

__all__ = ["COMPARISONS", "Comparison", "compute_all", "compute_one", "vpr_summary", "vpr_tables"]

COMPARISONS: dict[str, Callable[[RunData, str, object], Comparison]] = {
    "spread": spread, "size_spread": size_spread, "ece_gap": ece_gap, "norm_shift": norm_shift,
    "evaluator_repair": evaluator_repair, "protocol_grid": protocol_grid, "robustness": robustness,
    "aligned": aligned, "consistency": consistency, "provenance": provenance,
}


def compute_one(rd: RunData, cid: str) -> Comparison:
    obj = rd.spec.get(cid)
    name = cid.replace(".", "_")
    try:
        return COMPARISONS[obj.ctor](rd, name, obj.value)
    except ValueError as err:
        t = Table(name, f"{obj.ctor} ({cid})", [])
        t.notes.append(not_computable(str(err)))
        return Comparison(name, obj.ctor, obj.value.audit, tables=[t])


def compute_all(rd: RunData) -> list[Comparison]:
    """Every declared comparison, in declaration order."""
    return [compute_one(rd, cid) for cid in rd.spec.of_kind("compare")]
