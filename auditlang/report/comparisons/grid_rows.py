"""Study 001: one results table from several protocol_grid comparisons (Tables 3, 5, 16, 20).

Each row (``layout=columns``: each column) is one group of one grid (resolve/grid_rows.py): its
quantities are read from that grid's own summary table (``<grid>_summary``: the macro means, mean
absolute shifts and sign flips protocol_grid computed) and, for the rho count, from the grid's
per-setting table (its ``rho`` column). Nothing is recomputed from the records.
"""

from __future__ import annotations

import math
from typing import Any

from auditlang.report.comparisons.common import ECE10, Comparison, metric_choice
from auditlang.report.rundata import RunData
from auditlang.report.tables import NA, Table, not_computable
from auditlang.resolve.grid_rows import GridRow, grid_rows as plan_rows

# column -> (A-D grid summary quantity, its summary column; contrast-grid summary axis, its column)
_READ = {
    "g_A": (("g_A", "macro mean"), ("context", "macro first")),
    "g_second": (("g_B", "macro mean"), ("context", "macro second")),
    "context_shift": (("A-B", "macro mean"), ("context", "macro shift")),
    "abs_context": (("A-B", "mean |.|"), ("context", "mean |shift|")),
    "context_flips": (("A-B", "sign flips"), ("context", "sign flips")),
    "estimator_shift": (("A-C", "macro mean"), ("estimator", "macro shift")),
    "abs_estimator": (("A-C", "mean |.|"), None),
}


def gap_names(first: Comparison | None, c) -> tuple[str, str]:
    """The subscripts of the first and the second gap: ``gaps=``, else A, B (an A-D grid) or first, second."""
    if len(c.gaps) == 2:
        return c.gaps[0], c.gaps[1]
    return ("A", "B") if first is not None and _is_grid(first) else ("first", "second")


def _headers(first: Comparison | None, c) -> dict[str, str]:
    a, b = (f"g_{x}" for x in gap_names(first, c))
    return {"g_A": f"macro {a}", "g_second": f"macro {b}", "context_shift": f"macro {a} - {b}",
            "abs_context": f"mean |{a} - {b}|", "context_flips": f"sign flips {a} vs {b}",
            "estimator_shift": "macro g_A - g_C", "abs_estimator": "mean |g_A - g_C|",
            "rho_cells": f"rho <= {c.rho_max:g} cells"}


def _is_grid(src: Comparison) -> bool:
    s = _summary(src)
    return s is not None and "quantity" in s.columns


def _summary(src: Comparison) -> Table | None:
    return next((t for t in src.tables if t.name == f"{src.name}_summary"), None)


def _key(r: dict, row: GridRow) -> bool:
    return (r.get("group", "") or "") == row.group and r["variant"] == row.variant and r["evaluator"] == row.evaluator


def _value(src: Comparison, row: GridRow, col: str, c) -> tuple[Any, str]:
    """(value, why undefined) of quantity ``col`` for ``row`` of grid ``src``."""
    if col == "rho_cells":
        main = next((t for t in src.tables if t.name == src.name), None)
        rhos = [r["rho"] for r in (main.records() if main else []) if _key(r, row)]
        ok = [x for x in rhos if isinstance(x, float) and not math.isnan(x)]
        return (f"{sum(x <= c.rho_max for x in ok)}/{len(ok)}", "") if ok else (math.nan, "no setting with a rho")
    s = _summary(src)
    grid = _is_grid(src)
    how = _READ[col][0 if grid else 1]
    if s is None or how is None:
        return NA, f"{col} needs an A-D grid (two configurations, two calibration estimators)"
    sel, column = how
    recs = [r for r in s.records() if _key(r, row) and (r.get("quantity") if grid else r.get("axis")) == sel]
    if not recs:
        return math.nan, f"no {sel} row in {s.name}"
    r = recs[0]
    v = r[column]
    return (f"{v}/{r['n_settings']}" if column == "sign flips" else v), ""


def layout_of_001(layout: str) -> str:
    """What a grid_rows table shares with study 001 (its layout, not its numbers: the grids are the spec's)."""
    return "in the layout of study 001 Table 16" if layout == "columns" else "in the layout of study 001 Tables 3, 5 and 20"


def grid_rows(rd: RunData, name: str, c) -> Comparison:
    rows = plan_rows(rd.spec, c)
    srcs = {g: rd.computed.get(g) for g in c.grids}
    first = srcs.get(c.grids[0]) if c.grids else None
    heads = _headers(first, c)
    out = Comparison(name, "grid_rows", "", shape="grid_rows")
    lead = "quantity" if c.layout == "columns" else "setting"
    cols = [lead, *([r.label for r in rows] if c.layout == "columns" else [heads[q] for q in c.columns])]
    t = Table(name, f"Protocol-grid summaries in one table ({name}: {', '.join(c.grids)}; {layout_of_001(c.layout)})",
              cols, legend=True)
    cells: dict[tuple[int, str], Any] = {}
    for i, row in enumerate(rows):
        src = srcs.get(row.grid)
        for q in c.columns:
            if src is None:
                cells[(i, q)] = math.nan
                t.nc(f"grid '{row.grid}' was not computed", row.label)
                continue
            v, why = _value(src, row, q, c)
            cells[(i, q)] = v
            if why:
                t.nc(why, row.label)
    if c.layout == "columns":
        for q in c.columns:
            t.add(heads[q], *(cells[(i, q)] for i in range(len(rows))))
    else:
        for i, row in enumerate(rows):
            t.add(row.label, *(cells[(i, q)] for q in c.columns))
    t.notes.extend(_notes(rd, c, rows, srcs))
    out.tables.append(t)
    out.data = {"rows": [r._asdict() for r in rows], "columns": list(c.columns), "layout": c.layout,
                "headers": {q: heads[q] for q in c.columns}, "gaps": gap_names(first, c), "rho_max": c.rho_max,
                "grids": list(c.grids)}
    return out


def _notes(rd: RunData, c, rows: list[GridRow], srcs: dict[str, Comparison | None]) -> list[str]:
    out = []
    for row in rows:
        where = f"{row.grid}" + (f", group {row.group}" if row.group else "") + f", variant {row.variant}, " \
                f"evaluator {row.evaluator}"
        out.append(f"{row.label}: {where}.")
    for g, src in srcs.items():
        gv = rd.spec.get(g).value
        s = _summary(src) if src is not None else None
        if s is None:
            continue
        a, b = gap_names(src, c)
        if _is_grid(src):
            names = {"g_A": f"g_{a}", "g_B": f"g_{b}", "g_C": "g_C"}
            defs = {names[r["quantity"]]: r["definition"] for r in s.records() if r["quantity"] in names}
            txt = "; ".join(f"{k} = {v}" for k, v in defs.items())
        else:
            second = gv.configs[1] if len(gv.configs) > 1 else gv.configs[0]
            txt = f"g_{a} = est({gv.verbal}) - est({gv.configs[0]}), g_{b} = est({gv.verbal}) - est({second}), " \
                  f"est = {metric_choice(rd, gv.estimators[0] if gv.estimators else None, ECE10).label}"
        rho = f" or, for the rho count, from {src.name}'s rho column" if "rho_cells" in c.columns else ""
        out.append(f"{g} (audit {gv.audit}): {txt}. Every value is read from {s.name} (macro means over the group's "
                   f"(model, dataset) settings, mean absolute per-setting shifts, sign flips k/n){rho}.")
    if "rho_cells" in c.columns:
        out.append(f"rho = ECE(verbal) / ECE(token, first configuration) per setting; counted: rho <= {c.rho_max:g} "
                   "(001 Table 16).")
    if not rows:
        out.append(not_computable("no row: groups= keeps none of the grids' groups"))
    return out
