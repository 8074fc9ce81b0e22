"""Paired contrasts inside one run: ``compare NAME = contrast(AUDIT, models=[a, b], metrics=[...])``.

One axis (models, variants, protocols or evaluators) is contrasted; for every pair of its names
(first - second, in the order given) and every combination of the other axes, the two cells'
records are paired by item and the difference a - b gets the percentile interval of
:func:`auditlang.score.rundiff.paired_cell_diff`, the same paired bootstrap as ``auditc diff``
(the items known in both cells, ``default_rng(seed).integers(0, n, (B, n))``, the audit's
``bootstrap(resamples, seed, level)``).
"""

from __future__ import annotations

import itertools
import math

from auditlang.metrics import precision as prec
from auditlang.metrics.registry import METRICS, validate_params
from auditlang.report.comparisons.common import Comparison, bootstrap_settings
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table
from auditlang.score.cellmetrics import audit_metrics
from auditlang.score.rundiff import DiffMetric, cautions, paired_cell_diff

SUPPORTED_INPUTS = ("correct", "conf+correct")  # metrics computed from one cell's records
AXIS_COLUMN = {"models": "model", "variants": "variant", "protocols": "protocol", "evaluators": "evaluator"}
OTHER_AXES = ("model", "dataset", "variant", "protocol", "evaluator")
# the defaults of `auditc plan --precision` (cli/__init__.py): planning accuracy, item correlation, alpha, power
PLAN_P, PLAN_RHO, PLAN_ALPHA, PLAN_POWER = 0.5, 0.0, 0.05, 0.8


def contrast_metrics(rd: RunData, c) -> tuple[list[DiffMetric], list[str]]:
    """(metrics compared, labels of those skipped because no single cell's records give them)."""
    refs = [rd.spec.metrics[m] for m in ([c.metric] if c.metric else []) + list(c.metrics)] or audit_metrics(rd.spec, c.audit)
    keep, skipped = [], []
    for ref in dict.fromkeys(refs):
        spec = METRICS.get(ref.name)
        if spec is None or spec.inputs not in SUPPORTED_INPUTS:
            skipped.append(ref.label)
        else:
            keep.append(DiffMetric(ref.label, ref.name, ref.params))
    return keep, skipped


def _known(m: DiffMetric) -> str:
    """What a cell's item needs for ``m``: a known correctness, or a confidence too."""
    return "known correctness" if METRICS[m.name].inputs == "correct" else "confidence"


def _num(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _cell_tail(axis: str, name: str, sel: dict[str, str]) -> str:
    """The cell id after the audit of the cell with ``axis == name`` and the other axes ``sel``."""
    parts = {**sel, axis: name}
    return "/".join(parts[k] for k in OTHER_AXES)


def _levels(rd: RunData, aid: str, column: str) -> list[str]:
    a = rd.audit(aid)
    return {"model": list(a.models), "dataset": list(a.datasets), "variant": list(a.variants),
            "protocol": list(a.protocols), "evaluator": rd.evaluators(aid)}[column]


def contrast(rd: RunData, name: str, c) -> Comparison:
    field_name, names = c.axis()
    if not field_name:
        raise ValueError("contrast() takes exactly one axis (models, variants, protocols or evaluators)")
    axis = AXIS_COLUMN[field_name]
    B, seed, level = bootstrap_settings(rd, c.audit)
    metrics, skipped = contrast_metrics(rd, c)
    others = [x for x in OTHER_AXES if x != axis]
    pct = f"{level * 100:g} %"
    out = Comparison(name, "contrast", c.audit, shape="contrast")
    t = Table(name, f"Paired contrasts a - b over {axis}s ({name}): delta with its {pct} paired bootstrap interval",
              ["a", "b", *others, "metric", "n_paired", "value_a", "value_b", "delta", "delta lo", "delta hi",
               "significant", "half-width", "planned half-width", "planned MDD"])
    n_items = {cell.id: cell.n_items for cell in rd.plan.cells}
    rows = []
    for x, y in itertools.combinations(list(dict.fromkeys(names)), 2):
        for combo in itertools.product(*(_levels(rd, c.audit, o) for o in others)):
            sel = dict(zip(others, combo))
            ra = rd.rows(c.audit, **{axis: x}, **sel)
            rb = rd.rows(c.audit, **{axis: y}, **sel)
            where = f"{x} vs {y} / " + " / ".join(combo)
            if ra.empty or rb.empty:
                t.nc(f"no answered item in the {x if ra.empty else y} cell", where)
                continue
            for m in metrics:
                # paired_cell_diff gives its second argument minus its first: b-cell first, so delta = a - b
                d = paired_cell_diff(where, rb, ra, m, B=B, seed=seed, level=level)
                rows.append(d)
                if d.note:
                    t.nc(d.note, f"{where} / {m.label}")
                elif d.n_paired < max(d.n_a, d.n_b):  # d.n_b: the a cell's usable items, d.n_a the b cell's
                    note = (f"{where}: value_a and value_b use the n_paired={d.n_paired} items both cells scored "
                            f"({x}'s cell has {d.n_b}, {y}'s {d.n_a} with a {_known(m)}), so they differ from the "
                            "per-cell table there")
                    if note not in t.notes:
                        t.notes.append(note)
                n = min(n_items.get(f"{c.audit}/{cid_a}", 0), n_items.get(f"{c.audit}/{cid_b}", 0)) \
                    if (cid_a := _cell_tail(axis, x, sel)) and (cid_b := _cell_tail(axis, y, sel)) else 0
                plan = prec.analytic_contrast(m.name, n, PLAN_P, PLAN_RHO, level, PLAN_ALPHA, PLAN_POWER,
                                              validate_params(m.name, dict(m.params))) if n else None
                half = (d.high - d.low) / 2 if not (math.isnan(d.low) or math.isnan(d.high)) else math.nan
                t.add(x, y, *combo, m.label, d.n_paired, d.b, d.a, d.diff, d.low, d.high,
                      "" if d.significant is None else d.significant, half,
                      _num(plan.half_width if plan else None), _num(plan.mdd if plan else None))
    t.legend = True
    t.notes.append(f"delta = a - b on the items both cells scored (n_paired); interval: paired percentile bootstrap "
                   f"over those items, B={B} resamples, seed={seed}, level {pct}, the same resample on both sides "
                   "(the bootstrap of `auditc diff`); significant: the interval excludes 0")
    t.notes.append(f"planned: what `auditc plan --precision` plans for these pairs before the run, analytic, at the "
                   f"cells' declared items (planning accuracy p={PLAN_P}, item correlation rho={PLAN_RHO}, "
                   f"MDD at alpha={PLAN_ALPHA}, power={PLAN_POWER}; its defaults); half-width: the observed interval's")
    if skipped:
        t.notes.append(f"not contrasted: {', '.join(skipped)} (not computed from one cell's records)")
    t.notes += cautions(rows)
    out.tables.append(t)
    sig = [r for r in rows if r.significant]
    tested = [r for r in rows if r.significant is not None]
    out.summary.append(f"{len(sig)} of {len(tested)} paired contrast(s) over {axis}s exclude 0 at {pct} "
                       f"(B={B}, seed={seed})")
    out.data = {"axis": axis, "B": B, "seed": seed, "level": level,
                "rows": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                         for r in t.records()]}
    return out
