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
from auditlang.report.comparisons.common import AXES, CellGroup, Comparison, bootstrap_settings, cell_groups
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table
from auditlang.score.cellmetrics import audit_metrics
from auditlang.score.rundiff import DiffMetric, cautions, paired_cell_diff

SUPPORTED_INPUTS = ("correct", "conf+correct")  # metrics computed from one cell's records
AXIS_COLUMN = {"models": "model", "variants": "variant", "protocols": "protocol", "evaluators": "evaluator"}
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
    return "/".join(parts[k] for k in AXES)


def _contrast_rows(t: Table, c, axis: str, pair: tuple[str, str], g: CellGroup, metrics: list[DiffMetric],
                   n_items: dict[str, int], where: str, boot: tuple[int, int, float]) -> list:
    """One pair of cells' paired differences, a row per metric, with what the precision plan expected."""
    x, y = pair
    B, seed, level = boot
    sel = dict(zip([o for o in AXES if o != axis], g.key))
    out = []
    for m in metrics:
        # paired_cell_diff gives its second argument minus its first: b-cell first, so delta = a - b
        d = paired_cell_diff(where, g.rows[y], g.rows[x], m, B=B, seed=seed, level=level)
        out.append(d)
        if d.note:
            t.nc(d.note, f"{where} / {m.label}")
        elif d.n_paired < max(d.n_a, d.n_b):  # d.n_b: the a cell's usable items, d.n_a the b cell's
            note = (f"{where}: value_a and value_b use the n_paired={d.n_paired} items both cells scored "
                    f"({x}'s cell has {d.n_b}, {y}'s {d.n_a} with a {_known(m)}), so they differ from the "
                    "per-cell table there")
            if note not in t.notes:
                t.notes.append(note)
        n = min(n_items.get(f"{c.audit}/{_cell_tail(axis, name, sel)}", 0) for name in pair)
        plan = prec.analytic_contrast(m.name, n, PLAN_P, PLAN_RHO, level, PLAN_ALPHA, PLAN_POWER,
                                      validate_params(m.name, dict(m.params))) if n else None
        half = (d.high - d.low) / 2 if not (math.isnan(d.low) or math.isnan(d.high)) else math.nan
        t.add(x, y, *g.key, m.label, d.n_paired, d.b, d.a, d.diff, d.low, d.high,
              "" if d.significant is None else d.significant, half,
              _num(plan.half_width if plan else None), _num(plan.mdd if plan else None))
    return out


def contrast(rd: RunData, name: str, c) -> Comparison:
    field_name, names = c.axis()
    if not field_name:
        raise ValueError("contrast() takes exactly one axis (models, variants, protocols or evaluators)")
    axis = AXIS_COLUMN[field_name]
    B, seed, level = bootstrap_settings(rd, c.audit)
    metrics, skipped = contrast_metrics(rd, c)
    others = [x for x in AXES if x != axis]
    pct = f"{level * 100:g} %"
    out = Comparison(name, "contrast", c.audit, shape="contrast")
    t = Table(name, f"Paired contrasts a - b over {axis}s ({name}): delta with its {pct} paired bootstrap interval",
              ["a", "b", *others, "metric", "n_paired", "value_a", "value_b", "delta", "delta lo", "delta hi",
               "significant", "half-width", "planned half-width", "planned MDD"])
    n_items = {cell.id: cell.n_items for cell in rd.plan.cells}
    rows = []
    for x, y in itertools.combinations(list(dict.fromkeys(names)), 2):
        for g in cell_groups(rd, c.audit, by=others, over={axis: (x, y)}):
            where = f"{x} vs {y} / {g.where}"
            if g.rows[x].empty or g.rows[y].empty:
                t.nc(f"no answered item in the {x if g.rows[x].empty else y} cell", where)
                continue
            rows += _contrast_rows(t, c, axis, (x, y), g, metrics, n_items, where, (B, seed, level))
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
