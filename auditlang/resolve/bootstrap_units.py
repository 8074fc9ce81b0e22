"""Which resampling unit each interval uses under ``bootstrap(unit=...)`` (issue 10 item 2).

``auto`` (the default) gives every interval the unit its study defines. An explicit unit must be
one the comparison can use; otherwise the spec is rejected (E159, at the comparison). Study 000
App. E.2 and study 001 §3.2 define:

| interval | auto | allowed |
|---|---|---|
| per-cell metrics (cells table) | cell: examples within the cell | cell, paired, macro (= cell within each setting) |
| ``spread`` / ``size_spread`` | paired: items of a (model, dataset), max - min over variants on the resample | paired |
| ``ece_gap`` | the (verbal, token, correct) rows of one cell, paired | cell, paired (the same here) |
| ``norm_shift`` | cell: the per-cell shifts themselves are resampled | cell |
| ``protocol_grid`` | paired within a setting (g_X, shifts) + macro over settings (Table 2) | paired, macro |
| ``contrast`` | paired: the items both cells scored, the same resample on both sides | paired |

``evaluator_repair``, ``robustness``, ``consistency``, ``context_shift`` and ``parse_matched`` (and
the study-002 table comparisons) compute no intervals, ``vpr_matrix`` shows its cells', and ``aligned`` only
for its raw difference (paired as ``contrast``, its accuracy-controlled views have none): the unit
does not change them. ``unit=macro`` on an audit with no ``protocol_grid`` has nothing to average
over settings: a warning (W159), and its per-cell intervals are cell-level.
"""

from __future__ import annotations

SUPPORTED_UNITS: dict[str, tuple[str, ...]] = {
    "spread": ("paired",),
    "size_spread": ("paired",),
    "ece_gap": ("cell", "paired"),
    "norm_shift": ("cell",),
    "protocol_grid": ("paired", "macro"),
    "contrast": ("paired",),
}

WHY = {
    "spread": "a spread compares variant accuracies on the same resampled items (000 App. E.2)",
    "size_spread": "a spread compares variant accuracies on the same resampled items (000 App. E.2)",
    "ece_gap": "ECE(verbal) - ECE(token) is resampled as (verbal, token, correct) rows of one cell (000 App. E.2)",
    "norm_shift": "the per-cell |shift| values themselves are resampled (000 App. E.2, 'cell-level')",
    "protocol_grid": "g_X pairs verbal and token confidence on a setting's items, and macro means resample settings "
                     "(001 §3.2)",
    "contrast": "a contrast resamples the items both cells scored, the same indices on both sides (`auditc diff`'s "
                "paired bootstrap)",
}

# what each comparison's intervals resample under ``auto`` (its study's unit), and the comparisons
# that compute no interval at all: the facts the methods text states per comparison (issue 39 item 3)
AUTO_RESAMPLES: dict[str, str] = {
    "spread": "the items of each (model, dataset), paired across variants (000 App. E.2)",
    "size_spread": "the items of each (model, dataset), paired across variants (000 App. E.2)",
    "ece_gap": "the (verbal, token, correct) rows of each cell, paired (000 App. E.2)",
    "norm_shift": "the per-cell shifts themselves (000 App. E.2)",
    "protocol_grid": "the items of each setting, paired across configurations, with macro means over settings "
                     "(001 §3.2)",
    "provenance": "the items of each contrast (and the pooled items for the pooled rows)",
    # report/comparisons/aligned.py _raw_intervals: the raw rows only, paired as contrast() and auditc diff
    "aligned": "the items both models answered with a confidence, the same resample on both sides (the paired "
               "bootstrap of contrast() and auditc diff), for the raw ECE and Brier differences only; the "
               "accuracy-controlled views (IA, DA, CA) have no intervals",
    # report/comparisons/contrast.py: score/rundiff.paired_cell_diff, auditc diff's paired bootstrap
    "contrast": "the items both cells scored, the same resample on both sides (the paired bootstrap of auditc diff)",
    # report/comparisons/vprmatrix.py: each VPR's interval is its cell's (intervals=false: none)
    "vpr_matrix": "the items of each cell (each verbal parse rate's per-cell interval)",
}
NO_INTERVALS = ("evaluator_repair", "robustness", "consistency", "case_study", "simulation", "grid_rows",
                "context_shift", "parse_matched")


def comparison_resamples(ctor: str, unit: str, value=None) -> str | None:
    """What the intervals of a ``ctor`` comparison (its parameters ``value``, where given) resample
    under bootstrap ``unit``; None when it computes no interval; "" when the comparison (a plugin's)
    declares nothing. Every built-in comparison is in AUTO_RESAMPLES or NO_INTERVALS."""
    if ctor in NO_INTERVALS or getattr(value, "intervals", True) is False:
        return None
    if ctor not in AUTO_RESAMPLES:
        return ""
    if unit == "auto" or ctor not in SUPPORTED_UNITS:
        return AUTO_RESAMPLES[ctor]
    return {"cell": "the items of each cell", "paired": "the items of each (model, dataset), paired across its cells",
            "macro": "the items within each setting, with macro means over settings"}[unit]


def audit_unit(spec, audit_id: str) -> str:
    """The ``unit`` of the audit's ``bootstrap(...)`` (``auto`` when it declares none)."""
    b = spec.get(audit_id).value.bootstrap
    if b and b in spec.objects:
        return spec.get(b).value.unit
    return "auto"


def check_units(spec, bag) -> None:
    """E159 for an explicit unit a comparison cannot use; W159 for ``macro`` with nothing to aggregate."""
    for aid, audit in spec.of_kind("audit").items():
        unit = audit_unit(spec, aid)
        if unit == "auto":
            continue
        b = spec.get(audit.value.bootstrap)
        comps = [c for c in spec.of_kind("compare").values() if c.value.audit == aid]
        for c in comps:
            allowed = SUPPORTED_UNITS.get(c.ctor)
            if allowed is not None and unit not in allowed:
                bag.error("E159", f"compare '{c.id}' ({c.ctor}) cannot use bootstrap unit={unit} of audit '{aid}': "
                          f"{WHY[c.ctor]}", c.span,
                          hint=f"use unit={' or unit='.join(allowed)} or unit=auto in bootstrap '{b.id}', or a "
                               "separate audit for this comparison")
        if unit == "macro" and not any(c.ctor == "protocol_grid" for c in comps):
            bag.warning("W159", f"bootstrap '{b.id}' asks for unit=macro, but no comparison of audit '{aid}' averages "
                        "over settings (only protocol_grid does, 001 §3.2); its per-cell intervals are cell-level",
                        b.param_span("unit"),
                        hint="use unit=auto or unit=cell (per-cell intervals), or add a protocol_grid comparison")
