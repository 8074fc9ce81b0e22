"""Study 000 label-set normalisation shift (appendix C.2, Table 4) and top-k coverage (C.3, Table 5).

Per cell: shift = |ECE(p_raw) - ECE(p_norm)|, each on its own protocol's rows. Summaries per
variant and over all cells: mean |shift| with a cell-level percentile bootstrap (statistic
numpy.mean, appendix E.2), median, max, share of cells above 0.05 and 0.20. Coverage: the fraction
of examples whose top-k window held every valid label, and the cells with full coverage, read
from the normalised protocol's records (extras ``full_coverage`` or ``label_coverage``).
"""

from __future__ import annotations

import math

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci
from auditlang.metrics.calibration import ece
from auditlang.report.comparisons.common import Comparison, bootstrap_settings, cell_groups, ece_bins, known
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable

COVERAGE_KEYS = ("full_coverage", "label_coverage")


def _coverage_flag(extras: dict) -> bool | None:
    for k in COVERAGE_KEYS:
        if k in extras and extras[k] is not None:
            v = extras[k]
            return bool(v >= 1.0) if isinstance(v, (int, float)) and not isinstance(v, bool) else bool(v)
    return None


def norm_shift(rd: RunData, name: str, c) -> Comparison:
    bins, label = ece_bins(rd, c.metric)
    B, seed, level = bootstrap_settings(rd, c.audit)
    out = Comparison(name, "norm_shift", c.audit, shape="norm_shift")
    t = Table(name, f"ECE_token shift under label-set normalisation ({name}: {c.raw} vs {c.norm}, {label})",
              ["model", "dataset", "variant", "evaluator", "n_raw", "n_norm", "ece_raw", "ece_norm", "abs_shift"])
    shifts: dict[str, list[float]] = {}
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "variant", "evaluator"),
                         over={"protocol": (c.raw, c.norm)}):
        raw, norm = known(g.rows[c.raw], True), known(g.rows[c.norm], True)
        if raw.empty or norm.empty:
            t.nc(f"no scored confidences for protocol '{c.raw if raw.empty else c.norm}'", g.where)
            continue
        er = float(ece(raw["confidence"].to_numpy(float), raw["correct"].to_numpy(float), bins=bins))
        en = float(ece(norm["confidence"].to_numpy(float), norm["correct"].to_numpy(float), bins=bins))
        t.add(*g.key, len(raw), len(norm), er, en, abs(er - en))
        shifts.setdefault(g.key[2], []).append(abs(er - en))
    out.tables.append(t)
    s = Table(f"{name}_summary", f"Per-variant |ECE_raw - ECE_norm| ({name})",
              ["variant", "n_cells", "mean |shift|", "mean |shift| lo", "mean |shift| hi", "median", "max",
               "% > 0.05", "% > 0.20"])
    groups = list(shifts.items()) + ([("all cells", [x for v in shifts.values() for x in v])] if shifts else [])
    for v, xs in groups:
        arr = np.asarray(xs, dtype=float)
        ci = bootstrap_ci(np.mean, arr, B=B, seed=seed, level=level) if arr.size > 1 else None
        s.add(v, int(arr.size), float(arr.mean()), ci.low if ci else math.nan, ci.high if ci else math.nan,
              float(np.median(arr)), float(arr.max()), 100.0 * float(np.mean(arr > 0.05)), 100.0 * float(np.mean(arr > 0.20)))
    s.notes.append(f"Cell-level percentile bootstrap of the mean (B={B}, seed={seed}; study 000 appendix E.2).")
    if not shifts:
        s.notes.append(not_computable("no cell has scored confidences under both protocols"))
    out.tables.append(s)
    out.tables.append(_coverage(rd, name, c))
    out.summary.append(f"mean |shift| over {sum(len(x) for x in shifts.values())} cells: "
                       f"{np.mean([x for v in shifts.values() for x in v]):.3f}" if shifts else "no shift computable")
    return out


def _coverage(rd: RunData, name: str, c) -> Table:
    a = rd.audit(c.audit)
    ev = rd.evaluators(c.audit)[0]
    top_k = getattr(rd.spec.get(c.norm).value, "top_k", None)
    t = Table(f"{name}_coverage", f"Top-{top_k} window coverage of the valid label set ({c.norm})",
              ["dataset", "n_examples", "example-level coverage", "cells with full coverage", "n_cells"])
    for d in a.datasets:
        flags, full_cells, n_cells, lacking = [], 0, 0, 0
        for m in a.models:
            for v in a.variants:
                df = rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=c.norm, evaluator=ev)
                if df.empty:
                    continue
                cell = [_coverage_flag(rd.extras(i)) for i in df.index]
                if any(f is None for f in cell):
                    lacking += 1
                    continue
                n_cells += 1
                flags += cell
                full_cells += int(all(cell))
        if lacking:
            t.notes.append(not_computable(f"coverage on {d}: {lacking} cell(s) of '{c.norm}' record no label coverage "
                                          f"(extras {' / '.join(COVERAGE_KEYS)})"))
        if flags:
            t.add(d, len(flags), float(np.mean(flags)), full_cells, n_cells)
    t.notes.append("Example-level coverage = share of examples whose window held every valid label (study 000 Table 5).")
    return t
