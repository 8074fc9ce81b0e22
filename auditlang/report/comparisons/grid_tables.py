"""Study 001's appendix tables that rearrange one protocol grid's per-setting gaps (issue 41).

* ``<name>_parse_rate`` (001 Table 11): the verbal protocol's parse rate per setting as a matrix,
  one row per model pair (family and size) and variant group (base / Instruct), one column per
  dataset;
* ``<name>_scorers`` (Table 22, audits with several evaluators): per group, one row per evaluator
  with macro g_A, g_A - g_B, g_A - g_C and the mean per-setting |change of g_A| against the first
  evaluator;
* ``<name>_axes`` (Table 4): the mean absolute change of g when one factor changes, over every
  setting of the grid: identity axes regroup g_A over the settings (pairs of settings that differ
  in that factor only), protocol axes are the per-setting shifts of the grid.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from auditlang.report.comparisons.common import axis_levels
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable
from auditlang.resolve.models import group_label, model_attribute


def _pair(rd: RunData, mid: str) -> str:
    """A model's pair (001 Table 11's "Model pair"): its family and size, else its name."""
    fam, size = model_attribute(rd.spec, mid, "family"), model_attribute(rd.spec, mid, "size")
    if fam is None:
        return mid
    return f"{fam} {size:g}B" if size is not None else str(fam)


def parse_rate_table(rd: RunData, name: str, c, parse: dict[tuple[str, str, str], float]) -> Table:
    """001 Table 11: rows (model pair, variant group), columns the datasets; the share of the verbal
    protocol's items whose confidence parsed (each item once; the same under every evaluator)."""
    datasets = axis_levels(rd, c.audit, "dataset")
    variants = axis_levels(rd, c.audit, "variant")
    many = len(variants) > 1
    t = Table(f"{name}_parse_rate", f"Verbal parse rate of {c.verbal} per model and dataset ({name}; study 001 "
              "Table 11)", ["model pair", "variant", *(["prompt"] if many else []), *datasets])
    models = axis_levels(rd, c.audit, "model")
    pairs = list(dict.fromkeys(_pair(rd, m) for m in models))
    order = {"base": 0, "Instruct": 1}
    rows = sorted(((pairs.index(_pair(rd, m)), order.get(group_label(rd.spec, m, ["instruct"]), 2), m) for m in models))
    for _, _, m in rows:
        for v in variants:
            t.add(_pair(rd, m), group_label(rd.spec, m, ["instruct"]), *([v] if many else []),
                  *(parse.get((m, d, v), math.nan) for d in datasets))
    t.notes.append(f"Parse rate = items whose {c.verbal} confidence parsed / items with a {c.verbal} record (001 "
                   "App. E); model pair = the model's family and size; variant = its instruct= attribute "
                   "(base / Instruct).")
    return t


def _macro(settings: dict, lab: str) -> tuple[float, int]:
    vals = [g[lab] for g in settings.values() if not math.isnan(g.get(lab, math.nan))]
    return (float(np.mean(vals)) if vals else math.nan), len(vals)


def _diff(g: dict, a: str, b: str) -> float:
    return g.get(a, math.nan) - g.get(b, math.nan)


def scorer_table(rd: RunData, name: str, c, groups: dict, labels: list[str]) -> list[Table]:
    """001 Table 22: per group (group_by=, variant), one row per evaluator: macro g_A, g_A - g_B,
    g_A - g_C over its settings and the mean |g_A(evaluator) - g_A(first evaluator)| over the settings
    both define. Only for audits with more than one evaluator."""
    evaluators = axis_levels(rd, c.audit, "evaluator")
    if len(evaluators) < 2:
        return []
    a, b, cc = labels[0], labels[1], labels[2]
    gb = bool(getattr(c, "group_by", None))
    t = Table(f"{name}_scorers", f"Scorer sensitivity of the grid ({name}; study 001 Table 22)",
              [*(["group"] if gb else []), "variant", "evaluator", "n_settings", "g_A", "g_A - g_B", "g_A - g_C",
               f"mean |delta g_A| vs {evaluators[0]}"])
    blocks = list(dict.fromkeys(k[:-1] for k in groups))
    for blk in blocks:
        first = groups.get((*blk, evaluators[0]), {})
        for e in evaluators:
            st = groups.get((*blk, e))
            if st is None:
                continue
            both = [abs(g[a] - first[k][a]) for k, g in st.items()
                    if k in first and not math.isnan(g.get(a, math.nan)) and not math.isnan(first[k].get(a, math.nan))]
            ab = [_diff(g, a, b) for g in st.values() if not math.isnan(_diff(g, a, b))]
            ac = [_diff(g, a, cc) for g in st.values() if not math.isnan(_diff(g, a, cc))]
            delta = "" if e == evaluators[0] else (float(np.mean(both)) if both else math.nan)
            t.add(*blk, e, _macro(st, a)[1], _macro(st, a)[0], float(np.mean(ab)) if ab else math.nan,
                  float(np.mean(ac)) if ac else math.nan, delta)
    t.notes.append(f"Macro means over the (model, dataset) settings of each group (n_settings: where g_A is defined); "
                   f"mean |delta g_A|: the mean over the settings of |g_A under the evaluator - g_A under "
                   f"{evaluators[0]}| (the first evaluator of the audit, 001's main lenient scorer).")
    return [t]


IDENTITY = (("instruct", "Variant (base vs. Instruct)"), ("family", "Model family"), ("dataset", "Dataset identity"))


def _identity_pairs(rd: RunData, settings: dict, axis: str) -> tuple[list[float], int]:
    """|g_A - g_A'| over the pairs of settings that differ in ``axis`` only (a model is its family,
    size and instruct attributes; ``dataset``: the same model on two datasets), and the number of
    settings whose model does not declare the attribute."""
    attrs = {m: {k: model_attribute(rd.spec, m, k) for k in ("family", "size", "instruct")} for m, _ in settings}
    missing = sum(1 for m, _ in settings if axis != "dataset" and attrs[m][axis] is None)
    out = []
    for (k1, g1), (k2, g2) in itertools.combinations(settings.items(), 2):
        (m1, d1), (m2, d2) = k1, k2
        if axis == "dataset":
            ok = m1 == m2 and d1 != d2
        else:
            a1, a2 = attrs[m1], attrs[m2]
            rest = [x for x in ("family", "size", "instruct") if x != axis and not (axis == "family" and x == "size")]
            ok = (d1 == d2 and a1[axis] is not None and a2[axis] is not None and a1[axis] != a2[axis]
                  and all(a1[x] == a2[x] for x in rest))
        if ok and not math.isnan(g1) and not math.isnan(g2):
            out.append(abs(g1 - g2))
    return out, missing


def _differ(rd: RunData, p: str, q: str) -> str:
    """The token-probability axes (their disclosure names) two protocols differ on, parts of an axis
    (the prefix template of the context) folded into it: "Conditioning context (C4)"."""
    vp, vq = rd.spec.get(p).value, rd.spec.get(q).value
    names = dict(getattr(vp, "AXES", ()))
    parts = getattr(vp, "AXIS_PARTS", {})
    axes = dict.fromkeys(parts.get(f, f) for f in names if getattr(vp, f, None) != getattr(vq, f, None))
    return " and ".join(names[a] for a in axes)


def axes_table(rd: RunData, name: str, c, groups: dict, labels: list[str], rpair: tuple[str, str] | None) -> Table:
    """001 Table 4: mean |delta g| per source of variation over every setting of the grid (groups
    pooled), per variant and evaluator, largest first; protocol axes marked (bold)."""
    a, b, cc = labels[0], labels[1], labels[2]
    configs = list(c.configs)
    ctx = _differ(rd, configs[0], configs[1]) or "configuration"
    t = Table(f"{name}_axes", f"Mean absolute shift in g when one factor is changed ({name}; study 001 Table 4)",
              ["variant", "evaluator", "source of variation", "kind", "n", "mean |delta g|"])
    pooled: dict[tuple[str, str], dict] = {}
    for key, st in groups.items():
        pooled.setdefault(key[-2:], {}).update(st)
    for (v, e), st in pooled.items():
        rows = []
        for axis, label in IDENTITY:
            diffs, missing = _identity_pairs(rd, {k: g.get(a, math.nan) for k, g in st.items()}, axis)
            if missing:
                t.nc(f"{missing} setting(s) whose model declares no {axis}= (left out of that axis)", f"{v} / {e}")
            if diffs:
                rows.append((label, "identity", len(diffs), float(np.mean(diffs))))
            else:
                t.nc(f"no two settings differ in {axis} only", f"{v} / {e}")
        proto = [(f"{ctx} ({configs[0]} vs {configs[1]})", b), (f"ECE estimator ({labels[0].split('|')[1]} vs "
                                                                 f"{labels[2].split('|')[1]})", cc)]
        if rpair:
            r = rpair[1].split("|")[0]
            proto.insert(1, (f"{_differ(rd, configs[0], r) or 'configuration'} ({configs[0]} vs {r})", rpair[1]))
        for label, other in proto:
            vals = [abs(_diff(g, a, other)) for g in st.values() if not math.isnan(_diff(g, a, other))]
            if vals:
                rows.append((label, "protocol", len(vals), float(np.mean(vals))))
        for label, kind, n, val in sorted(rows, key=lambda r: -r[3]):
            t.add(v, e, label, kind, n, val)
            if kind == "protocol":
                t.marks[(len(t.rows) - 1, "mean |delta g|")] = "best"
    t.notes.append("Identity axes regroup g_A over the settings: the mean |g_A - g_A'| over the pairs of settings that "
                   "differ in that factor only (variant: the base and Instruct model of one family and size on one "
                   "dataset; family: two families with the same instruct= on one dataset; dataset: one model on two "
                   "datasets). Protocol axes: the mean over the settings of |g_A - g_X| for the grid's context "
                   "(g_B), token readout (readout=) and estimator (g_C) changes; bold: protocol axes (as 001 marks them). "
                   "Rows largest first; n = pairs (identity) or settings (protocol).")
    if not t.rows:
        t.notes.append(not_computable("no setting with a g_A gap"))
    return t
