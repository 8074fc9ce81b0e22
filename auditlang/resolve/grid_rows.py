"""The rows a ``grid_rows`` comparison shows, known from the spec (001 Tables 3, 5, 16, 20), and its checks.

One rule for both: the resolver checks ``groups=`` and ``labels=`` against these rows (E157) and
the report lays its table out by them (report/comparisons/grid_rows.py).
"""

from __future__ import annotations

from typing import NamedTuple

from auditlang.core.diagnostics import DiagnosticBag
from auditlang.resolve.models import group_label
from auditlang.resolve.spec import Spec


class GridRow(NamedTuple):
    grid: str  # the protocol_grid's compare id
    group: str  # its group label under group_by= ("" for an ungrouped grid)
    variant: str
    evaluator: str
    label: str  # the row name: labels= in order, else the group label, else the grid's one model (its id)


def _grid_rows_of(spec: Spec, c, gid: str) -> list[tuple[str, str, str, str, str]]:
    """(grid, group, variant, evaluator, default label) of one source grid, in the grid's own order."""
    g = spec.get(gid).value
    a = spec.get(g.audit).value
    ev = c.evaluator or (a.evaluators[0] if a.evaluators else "")
    gb = list(g.group_by or [])
    groups = list(dict.fromkeys(group_label(spec, m, gb) for m in a.models)) if gb else [""]
    if gb and c.groups:  # the kept groups in the order groups= names them (labels= follow that order)
        groups = [grp for grp in dict.fromkeys(c.groups) if grp in groups]
    out = []
    for grp in groups:
        default = grp or (a.models[0] if len(a.models) == 1 else gid)
        out += [(gid, grp, v, ev, default + (f" ({v})" if len(a.variants) > 1 else "")) for v in a.variants]
    return out


def grid_rows(spec: Spec, c) -> list[GridRow]:
    """Every row of ``grid_rows`` comparison value ``c``: each grid's groups (those ``groups=`` keeps, in
    its order; else the grid's own order) and variants, grids in the order of ``grids=``; named by
    ``labels=`` when given in full."""
    raw = [r for gid in c.grids for r in _grid_rows_of(spec, c, gid)]
    labels = list(c.labels) if len(c.labels) == len(raw) else [r[4] for r in raw]
    return [GridRow(*r[:4], lab) for r, lab in zip(raw, labels)]


def check_grid_rows(spec: Spec, comp, bag: DiagnosticBag) -> None:
    """E157: grids= names one or more protocol_grid comparisons, gaps= two distinct subscripts,
    evaluator= is in each grid's audit,
    every groups= label is a group of some grid (so each kept label gives a row), and labels= names
    every row once."""
    c = comp.value
    if not c.grids:
        bag.error("E157", f"compare '{comp.id}': grids= names no comparison", comp.param_span("grids"),
                  hint="name the protocol_grid comparisons whose summaries it shows, e.g. grid_rows([grid], ...)")
        return
    if c.gaps and (len(c.gaps) != 2 or len(set(c.gaps)) != 2):
        bag.error("E157", f"compare '{comp.id}': gaps= names {len(set(c.gaps))} distinct gap(s); it names the first "
                  "and the second", comp.param_span("gaps"), hint='two subscripts, e.g. gaps=["gen", "gold"]')
    bad = [g for g in c.grids if g in spec.objects and spec.get(g).ctor != "protocol_grid"]
    for g in bad:
        bag.error("E157", f"compare '{comp.id}': '{g}' is a {spec.get(g).ctor} comparison; grid_rows reads "
                  "protocol_grid summaries", comp.param_span("grids"), hint="name protocol_grid comparisons in grids=")
    if bad or any(g not in spec.objects for g in c.grids):
        return
    for g in c.grids:
        a = spec.get(spec.get(g).value.audit).value
        if c.evaluator and c.evaluator not in a.evaluators:
            bag.error("E157", f"compare '{comp.id}': evaluator '{c.evaluator}' is not in the audit of grid '{g}'",
                      comp.param_span("evaluator"), hint=f"that audit has: {', '.join(a.evaluators)}")
            return
    every = {grp for g in c.grids for grp in _all_groups(spec, g)}
    for grp in c.groups:
        if grp not in every:
            bag.error("E157", f"compare '{comp.id}': no grid of grids= has the group '{grp}'",
                      comp.param_span("groups"), hint=f"the grids' groups: {', '.join(sorted(every)) or 'none'}")
    n = len([r for gid in c.grids for r in _grid_rows_of(spec, c, gid)])
    if c.labels and len(c.labels) != n:
        bag.error("E157", f"compare '{comp.id}': labels= names {len(c.labels)} row(s), the table has {n}",
                  comp.param_span("labels"), hint="one label per row: each grid's kept groups (and variants), in order")


def _all_groups(spec: Spec, gid: str) -> list[str]:
    g = spec.get(gid).value
    gb = list(g.group_by or [])
    return [group_label(spec, m, gb) for m in spec.get(g.audit).value.models] if gb else []
