"""Bootstrap intervals of the study 001 protocol grid (§3.2: "We report each g_X with a 95%
bootstrap CI"; Table 2: macro means over settings with macro-bootstrap intervals).

Per setting (model, dataset within a variant and evaluator) the items are resampled once and
every gap of the setting is computed on that resample: the verbal side from the resampled rows
whose verbal confidence parsed, each token configuration from all its resampled rows (unit
``paired``). Settings are resampled independently, one generator seeded with the audit's seed,
settings in (model, dataset) order, and a macro replicate is the equal-weight mean of the
settings' replicates (unit ``macro``; :func:`auditlang.metrics.bootstrap.macro_ci`). Estimators
without a batch form (the kernel ECEs) are resampled only when the comparison sets
``resamples=`` (each replicate is a separate call; 001's appendix diagnostics use 200).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from auditlang.metrics.bootstrap import has_batch, macro_ci, masked_replicates, percentile_ci, setting_indices


@dataclass
class Setting:
    """One setting's item-aligned arrays: verbal (conf with NaN where unparsed, correct) and one
    (conf, correct) pair per token configuration."""

    key: tuple[str, str]
    verbal: tuple[np.ndarray, np.ndarray]
    tokens: dict[str, tuple[np.ndarray, np.ndarray]]
    points: dict[str, float] = field(default_factory=dict)


def quantities(labels: list[str], is_grid: bool, pairs: list[tuple[str, str]] = ()) -> dict[str, dict[str, float]]:
    """Each reported quantity as a signed combination of the gaps ``labels`` (in A, B, C, D order);
    ``pairs`` (first, second): the contrasts of a grid of another shape, ``first - second``."""
    out = {lab: {lab: 1.0} for lab in labels}
    for a, b in pairs:
        out[f"{a} - {b}"] = {a: 1.0, b: -1.0}
    if is_grid:
        a, b, c, d = labels[:4]
        out.update({"g_A - g_B": {a: 1.0, b: -1.0}, "g_A - g_C": {a: 1.0, c: -1.0},
                    "interaction": {a: 1.0, b: -1.0, c: -1.0, d: 1.0}})
    return out


def grid_intervals(settings: list[Setting], combos: list[tuple[str, object]], is_grid: bool, B: int, seed: int,
                   level: float, explicit_resamples: bool, pairs: list[tuple[str, str]] = ()):
    """(per-setting rows, macro rows, notes). A per-setting row: (setting key, quantity, point, CI or
    None); a macro row adds the number of settings where the quantity is defined (an undefined
    value, e.g. AUROC on a setting whose answers are all correct, leaves out that setting from that
    quantity's macro mean only)."""
    labels = [f"{cf}|{es.label}" for cf, es in combos]
    qs = quantities(labels, is_grid, list(pairs))
    ests = {es.label: es for _, es in combos}
    usable = {lab for lab, es in ests.items() if explicit_resamples or has_batch(es.fn)}
    notes = [f"{lab}: no interval (no batch form; set resamples=N on the comparison, e.g. 200 as in 001's appendix "
             "diagnostics)" for lab in ests if lab not in usable]
    idxs = setting_indices([s.verbal[0].size for s in settings], B, seed)
    per_setting, reps_by_q = [], {q: [] for q in qs}
    for s, idx in zip(settings, idxs):
        gap_reps: dict[str, np.ndarray] = {}
        verbal_reps: dict[str, np.ndarray] = {}
        for (cf, es), lab in zip(combos, labels):
            if es.label not in usable:
                continue
            if es.label not in verbal_reps:
                verbal_reps[es.label] = masked_replicates(es.fn, s.verbal if es.inputs != "correct" else s.verbal[1:],
                                                          idx, **es.kwargs)
            tok = s.tokens[cf]
            gap_reps[lab] = verbal_reps[es.label] - masked_replicates(es.fn, tok if es.inputs != "correct" else tok[1:],
                                                                       idx, **es.kwargs)
        for q, comb in qs.items():
            point = sum(w * s.points.get(lab, math.nan) for lab, w in comb.items())
            if all(lab in gap_reps for lab in comb):
                reps = sum(w * gap_reps[lab] for lab, w in comb.items())
                per_setting.append((s.key, q, point, percentile_ci(point, reps, B, seed, level)))
                reps_by_q[q].append((point, reps))
            else:
                per_setting.append((s.key, q, point, None))
                reps_by_q[q].append(None)
    macro = []
    for q, got in reps_by_q.items():
        points = [sum(w * s.points.get(lab, math.nan) for lab, w in qs[q].items()) for s in settings]
        defined = [i for i, p in enumerate(points) if not math.isnan(p)]
        if not defined:
            macro.append((None, q, math.nan, None, 0))
            continue
        ci = None
        if all(got[i] is not None for i in defined):
            ci = macro_ci([points[i] for i in defined], [got[i][1] for i in defined], B, seed, level)
        macro.append((None, q, float(np.mean([points[i] for i in defined])), ci, len(defined)))
    return per_setting, macro, notes
