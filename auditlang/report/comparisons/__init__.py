"""The comparisons a spec declares (``compare NAME = ctor(audit, ...)``), computed from the records.

One module per family, each function registered as a ``comparison`` component by
``resolve/schema.py``; every function takes (RunData, compare name, compare value) and returns a
:class:`Comparison`. A comparison that fails as a whole (e.g. a metric of the wrong kind) becomes a
table holding one "not computable: <reason>" note, never a number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from auditlang.core.registry import REGISTRY
from auditlang.report.comparisons.common import Comparison
from auditlang.report.comparisons.verbal import vpr_summary, vpr_tables
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable

__all__ = ["COMPARISONS", "Comparison", "compute_all", "compute_one", "vpr_summary", "vpr_tables"]

# compare constructor name -> function (the component registry's ``comparison`` entries)
COMPARISONS: Mapping[str, Callable[[RunData, str, object], Comparison]] = REGISTRY.view("comparison")


def compute_one(rd: RunData, cid: str) -> Comparison:
    """The outcome of compare ``cid``, kept in ``rd.computed``; the comparisons it reads (``reads()``:
    grid_rows' grids) are computed first unless this run data holds them already."""
    obj = rd.spec.get(cid)
    for src in obj.value.reads():
        if src not in rd.computed:
            compute_one(rd, src)
    name = cid.replace(".", "_")
    try:  # the function the compare's registry entry declares (a plugin's as a built-in's)
        out = REGISTRY.get("comparison", obj.ctor).load()(rd, name, obj.value)
    except ValueError as err:
        t = Table(name, f"{obj.ctor} ({cid})", [])
        t.notes.append(not_computable(str(err)))
        out = Comparison(name, obj.ctor, obj.value.audit, tables=[t])
    out.cid = cid
    rd.computed[cid] = out
    return out


def compute_all(rd: RunData, done: Mapping[str, Comparison] | None = None) -> list[Comparison]:
    """Every declared comparison, in declaration order; those in ``done`` (compare id ->
    comparison, computed earlier from the same run data) or in ``rd.computed`` (a grid a grid_rows
    declared before it has read) are not computed again."""
    done = {**rd.computed, **(done or {})}
    return [done[cid] if cid in done else compute_one(rd, cid) for cid in rd.spec.of_kind("compare")]
