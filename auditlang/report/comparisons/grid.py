"""Study 001 protocol grid: signed gaps g_X = est(c_verb) - est(c_tok,X), shifts and sign flips.

Per setting (model, dataset; within each variant and evaluator) and for every token
configuration x estimator: the verbal side uses its parseable rows, the token side its full
sample (001 section 3.1; no item intersection). With two configurations (bare, verbal prefix)
and two estimators (10-bin ECE, bin-free mean) the four gaps are the A-D grid of 001 section
3.2: A = (config 1, estimator 1), B = (config 2, estimator 1), C = (config 1, estimator 2),
D = (config 2, estimator 2); shifts A-B (context), A-C (estimator), interaction A-B-C+D and the
sign flips g_A vs g_B, g_A vs g_C (Tables 2-3). Other shapes get pairwise contrasts against the
first configuration / estimator (001 Table 5 style). rho = ECE(c_verb) / ECE(c_tok; config 1) is
the Tian ratio of 001 appendix J.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from auditlang.metrics.protocol import GRID, contrast_summary, sign_flips
from auditlang.report.comparisons.common import (
    ECE10,
    CellGroup,
    Comparison,
    MetricChoice,
    bootstrap_settings,
    cell_groups,
    is_calibration,
    known,
    metric_choice,
)
from auditlang.report.comparisons.grid_intervals import Setting, grid_intervals
from auditlang.report.comparisons.grid_tables import axes_table, parse_rate_table, scorer_table
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable
from auditlang.resolve.models import group_label


def _side(df, parsed_only: bool) -> tuple[np.ndarray, np.ndarray]:
    df = known(df, True)
    if parsed_only:
        df = df[df["confidence_parsed"].astype(bool)]
    return df["confidence"].to_numpy(float), df["correct"].to_numpy(float)


def _aligned(df, items: pd.Index, parsed_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """``_side`` on ``items``: NaN confidence where the row is not usable (resamples drop it)."""
    d = known(df, True)
    if parsed_only:
        d = d[d["confidence_parsed"].astype(bool)]
    d = d.drop_duplicates("item_id").set_index("item_id").reindex(items)
    return d["confidence"].to_numpy(float), d["correct"].to_numpy(float)


def _est(est: MetricChoice, side: tuple[np.ndarray, np.ndarray]) -> float:
    return est(*side) if side[0].size else math.nan


def _group_cols(c) -> list[str]:
    return ["group"] if c.group_by else []


def protocol_grid(rd: RunData, name: str, c) -> Comparison:
    ests = [metric_choice(rd, m, ECE10) for m in c.estimators] or [metric_choice(rd, None, ECE10)]
    ref = metric_choice(rd, c.reference, ECE10) if getattr(c, "reference", None) else None
    if ref is not None and ref.label not in {es.label for es in ests}:
        ests.append(ref)
    configs = list(c.configs)
    # the A-D grid's estimator axis is two calibration estimators (001 App. L: "The estimator axis
    # (10-bin vs. bin-free) exists only for ECE"); two scoring rules such as Brier and AUROC get
    # each its own prefix shift instead
    is_grid = (len(configs) == 2 and len(ests) == 2 and ref is None
               and all(is_calibration(es.name) for es in ests))
    combos = [(cf, es) for es in ests for cf in configs]
    rdo = getattr(c, "readout", None) if is_grid else None
    if rdo:  # the readout configuration: its gap under the first estimator only (g_A^T2)
        combos.append((rdo, ests[0]))
    gcols = [f"g[{cf} | {es.label}]" for cf, es in combos]
    extra = ["g_A", "g_B", "g_C", "g_D", "A-B", "A-C", "interaction", *(["readout"] if rdo else [])] if is_grid else []
    gb = list(getattr(c, "group_by", []) or [])
    out = Comparison(name, "protocol_grid", c.audit, shape="protocol_grid")
    t = Table(name, f"Signed calibration gaps g = est({c.verbal}) - est(token config) ({name})",
              [*_group_cols(c), "model", "dataset", "variant", "evaluator", "n_verbal_parsed", *gcols, *extra, "rho"])
    groups: dict[tuple[str, ...], dict[tuple[str, str], dict[str, float]]] = {}
    settings_by_group: dict[tuple[str, ...], list[Setting]] = {}
    parse: dict[tuple[str, str, str], float] = {}
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "variant", "evaluator"),
                         over={"protocol": (c.verbal, *configs, *([rdo] if rdo else []))}):
        grp = (group_label(rd.spec, g.key[0], gb),) if gb else ()
        got = _grid_row(t, c, g, grp, [*configs, *([rdo] if rdo else [])], ests, combos, is_grid)
        m, d, v, e = g.key
        vdf = g.rows[c.verbal]
        if not vdf.empty and (m, d, v) not in parse:
            parse[(m, d, v)] = float(vdf.drop_duplicates("item_id")["confidence_parsed"].astype(bool).mean())
        if got is not None:
            groups.setdefault((*grp, v, e), {})[(m, d)] = got[0]
            if got[1] is not None:
                settings_by_group.setdefault((*grp, v, e), []).append(got[1])
    if gb:
        t.notes.append(f"Groups: the models' {', '.join(gb)} (group_by=); macro means and sign flips are per group.")
    out.tables.append(t)
    contrasts = contrast_pairs(configs, ests, ref, is_grid)
    rpair = (f"{configs[0]}|{ests[0].label}", f"{rdo}|{ests[0].label}") if rdo else None
    out.tables.append(_summary(name, c, groups, configs, ests, is_grid, contrasts, rpair))
    out.tables.extend(_intervals(rd, name, c, settings_by_group, combos, is_grid,
                                 contrasts + ([("readout", *rpair)] if rpair else [])))
    out.tables.extend(_appendix_tables(rd, name, c, parse, groups, combos, is_grid, rpair))
    out.data = {"groups": groups, "group_by": gb, "reference": ref.label if ref else None,
                "readout": list(rpair) if rpair else None, "sign_pattern": _sign_pattern(rd, configs, ests),
                "readouts": (rd.spec.get(configs[0]).value.readout, rd.spec.get(rdo).value.readout) if rdo else None}
    return out


def _appendix_tables(rd: RunData, name: str, c, parse: dict, groups: dict, combos: list, is_grid: bool,
                     rpair: tuple[str, str] | None) -> list[Table]:
    """The ``tables=`` this grid declares (001 Tables 11, 22, 4); scorers and axes need the A-D shape."""
    want = list(getattr(c, "tables", []) or [])
    out = [parse_rate_table(rd, name, c, parse)] if "parse_rate" in want else []
    labels = [f"{cf}|{es.label}" for cf, es in combos[:4]]
    for kind, build in (("scorers", lambda: scorer_table(rd, name, c, groups, labels)),
                        ("axes", lambda: [axes_table(rd, name, c, groups, labels, rpair)])):
        if kind not in want:
            continue
        if is_grid:
            out.extend(build())
        else:
            t = Table(f"{name}_{kind}", f"{kind} ({name})", [])
            t.notes.append(not_computable(f"tables=[{kind}] needs the 2 x 2 A-D grid (two configurations, two "
                                          "calibration estimators, no reference=)"))
            out.append(t)
    return out


def _sign_pattern(rd: RunData, configs: list[str], ests: list[MetricChoice]) -> dict[str, Any] | None:
    """The two configurations and the first estimator when the configurations differ only in the
    scored answer (001 Figure 1: generated vs gold), else None."""
    if len(configs) != 2:
        return None
    a, b = (rd.spec.get(cf).value for cf in configs)
    if type(a) is not type(b) or not hasattr(a, "scored"):
        return None
    differ = [k for k in type(a).model_fields if getattr(a, k) != getattr(b, k)]
    return {"configs": configs, "estimator": ests[0].label} if differ == ["scored"] else None


def _grid_row(t: Table, c, g: CellGroup, grp: tuple[str, ...], configs: list[str], ests: list[MetricChoice],
              combos: list, is_grid: bool) -> tuple[dict[str, float], Setting | None] | None:
    """One setting's row of gaps: (its gaps by "config|estimator", the setting for the intervals, None
    when it has no item); None when the verbal protocol has no parseable confidence there (said in a note)."""
    m, d, v, e = g.key
    vdf = g.rows[c.verbal]
    if vdf.empty:
        t.nc(f"no records of verbal protocol '{c.verbal}'", g.where)
        return None
    verbal = _side(vdf, True)
    if verbal[0].size == 0:
        t.nc("no parseable verbal confidence", g.where)
        return None
    tokens = {cf: _side(g.rows[cf], False) for cf in configs}
    for cf, tok in tokens.items():
        if tok[0].size == 0:
            t.nc(f"no token confidences for '{cf}'", g.where)
    e_verbal = {es.label: _est(es, verbal) for es in ests}
    gaps: dict[str, float] = {}
    row_gaps = []
    for cf, es in combos:
        gaps[f"{cf}|{es.label}"] = e_verbal[es.label] - _est(es, tokens[cf])
        row_gaps.append(gaps[f"{cf}|{es.label}"])
    e_tok0 = _est(ests[0], tokens[configs[0]])
    rho = e_verbal[ests[0].label] / e_tok0 if e_tok0 and not math.isnan(e_tok0) else math.nan
    grid_vals: list[Any] = []
    if is_grid:
        gA, gB, gC, gD = row_gaps[0], row_gaps[1], row_gaps[2], row_gaps[3]
        grid_vals = [gA, gB, gC, gD, gA - gB, gA - gC, gA - gB - gC + gD, *(gA - x for x in row_gaps[4:])]
    t.add(*grp, m, d, v, e, int(verbal[0].size), *row_gaps, *grid_vals, rho)
    tdfs = {cf: g.rows[cf] for cf in configs}
    allrows = pd.concat([vdf, *tdfs.values()])
    items = pd.Index(allrows.drop_duplicates("item_id").sort_values(["item_index", "item_id"])["item_id"])
    setting = Setting((m, d), _aligned(vdf, items, True), {cf: _aligned(tdf, items, False) for cf, tdf in tdfs.items()},
                      dict(gaps))
    return gaps, (setting if items.size else None)


def contrast_pairs(configs: list[str], ests: list[MetricChoice], ref: MetricChoice | None,
                   is_grid: bool) -> list[tuple[str, str, str]]:
    """(kind, first gap, second gap) of a grid that is not the 2 x 2 A-D shape: per estimator,
    each configuration against the first (``context``: 001 Table 19's prefix shift g^M_A - g^M_B
    under metric M; Table 9's readouts); with ``reference=``, each other estimator against it on
    the first configuration (``estimator``: Table 10's g_A - g_C per bin count). Different metrics
    are never contrasted with each other otherwise (a Brier gap minus an NLL gap has no meaning)."""
    if is_grid:
        return []
    out = [("context", f"{configs[0]}|{es.label}", f"{cf}|{es.label}") for es in ests for cf in configs[1:]]
    if ref is not None:
        out += [("estimator", f"{configs[0]}|{es.label}", f"{configs[0]}|{ref.label}") for es in ests
                if es.label != ref.label]
    return out


def _intervals(rd: RunData, name: str, c, settings_by_group: dict, combos, is_grid: bool,
               contrasts: list[tuple[str, str, str]]) -> list[Table]:
    """Per-setting paired intervals and macro-bootstrap intervals of every gap and shift."""
    B, seed, level = bootstrap_settings(rd, c.audit)
    if c.resamples:
        B = c.resamples
    pct = f"{level * 100:g}%"
    gcol = _group_cols(c)
    ps = Table(f"{name}_setting_ci", f"Per-setting gaps with {pct} paired bootstrap intervals ({name}; 001 §3.2)",
               [*gcol, "model", "dataset", "variant", "evaluator", "quantity", "value", "value lo", "value hi"])
    mt = Table(f"{name}_macro_ci", f"Macro means over settings with {pct} macro-bootstrap intervals ({name}; "
               "001 §3.2, Table 2)", [*gcol, "variant", "evaluator", "n_settings", "quantity", "macro mean",
                                      "bootstrap mean", "macro lo", "macro hi", "interval"])
    notes: set[str] = set()
    for key, settings in settings_by_group.items():
        per, macro, nt = grid_intervals(settings, combos, is_grid, B, seed, level, bool(c.resamples),
                                        [(a, b) for _, a, b in contrasts])
        notes.update(nt)
        for skey, q, point, ci in per:
            ps.add(*key[:-2], skey[0], skey[1], *key[-2:], q, point, ci.low if ci else math.nan,
                   ci.high if ci else math.nan)
        for _, q, point, ci, n in macro:
            ns = "" if ci is None or math.isnan(ci.low) else ("excludes 0" if ci.excludes(0.0) else "ns (covers 0)")
            mt.add(*key, n, q, point, ci.boot_mean if ci else math.nan, ci.low if ci else math.nan,
                   ci.high if ci else math.nan, ns)
    how = (f"B={B}, seed={seed}; items resampled once per setting (verbal side: its parsed rows; token side: all rows), "
           "settings independently (one generator, settings in model/dataset order); the macro replicate is the "
           "equal-weight mean over the settings where the quantity is defined (n_settings). 001 reports the bootstrap "
           "mean in Table 2.")
    for tb in (ps, mt):
        tb.notes.append(how)
        tb.notes.extend(sorted(notes))
    return [ps, mt]


def _defined(settings: dict, *labels: str) -> dict:
    """The settings where every gap in ``labels`` is a number."""
    return {k: g for k, g in settings.items() if not any(math.isnan(g.get(lab, math.nan)) for lab in labels)}


def _summary(name: str, c, groups: dict, configs: list[str], ests: list[MetricChoice], is_grid: bool,
             contrasts: list[tuple[str, str, str]], rpair: tuple[str, str] | None = None) -> Table:
    gcol = _group_cols(c)
    if is_grid:
        s = Table(f"{name}_summary", f"A-D grid macro summary ({name}; study 001 Tables 2-3)",
                  [*gcol, "variant", "evaluator", "n_settings", "quantity", "definition", "macro mean", "mean |.|",
                   "sign flips"])
    else:
        s = Table(f"{name}_summary", f"Protocol contrasts per metric ({name}; study 001 Tables 5, 9, 10, 19)",
                  [*gcol, "variant", "evaluator", "n_settings", "axis", "contrast", "macro first", "macro second",
                   "macro shift", "mean |shift|", "sign flips"])
    for key, settings in groups.items():
        where = " / ".join(key)
        if is_grid:
            labels = [f"{cf}|{es.label}" for es in ests for cf in configs]
            lab = dict(zip("ABCD", labels))
            defs = dict(zip("ABCD", (f"{cf} with {es.label}" for es in ests for cf in configs)))
            if rpair:
                lab["R"] = rpair[1]
            for x in "ABCD":
                ok = _defined(settings, lab[x])
                if ok:
                    s.add(*key, len(ok), f"g_{x}", f"{GRID[x]} [{defs[x]}]",
                          float(np.mean([g[lab[x]] for g in ok.values()])), math.nan, "")
            names = {"A-B": "context shift g_A - g_B", "A-C": "estimator shift g_A - g_C",
                     "interaction": "second-order g_A - g_B - g_C + g_D"}
            parts = {"A-B": ("AB", (1, -1)), "A-C": ("AC", (1, -1)), "interaction": ("ABCD", (1, -1, -1, 1))}
            if rpair:  # 001 Table 2 puts the token-readout row after g_D, before the context shift
                names = {"readout": f"token readout g_A - g_A' [g_A' = {rpair[1].replace('|', ' with ')}]", **names}
                parts = {"readout": ("AR", (1, -1)), **parts}
            for k, (xs, ws) in parts.items():
                ok = _defined(settings, *(lab[x] for x in xs))
                if not ok:
                    continue
                vals = np.array([sum(w * g[lab[x]] for x, w in zip(xs, ws)) for g in ok.values()])
                flips: Any = ""
                if k != "interaction" and len(xs) == 2:
                    flips = sign_flips([g[lab[xs[0]]] for g in ok.values()], [g[lab[xs[1]]] for g in ok.values()])
                s.add(*key, len(ok), k, names[k], float(vals.mean()), float(np.abs(vals).mean()), flips)
        else:
            for axis, first, second in contrasts:
                ok = _defined(settings, first, second)
                if not ok:
                    s.notes.append(not_computable(f"{first} vs {second} ({where}): no setting where both gaps are "
                                                  "defined"))
                    continue
                cs = contrast_summary([g[first] for g in ok.values()], [g[second] for g in ok.values()])
                s.add(*key, cs.n, axis, f"{first} vs {second}", cs.macro_first, cs.macro_second, cs.macro_shift,
                      cs.mean_abs_shift, cs.flips)
            if not contrasts:
                s.notes.append("only one configuration and no reference= estimator: no contrast to report")
        dropped = {lab: len(settings) - len(_defined(settings, lab)) for lab in next(iter(settings.values()), {})}
        for lab, nd in dropped.items():
            if nd:
                s.notes.append(not_computable(f"{nd} setting(s) of {where} have no {lab} gap: left out of the means "
                                              "of that gap only"))
    s.notes.append("Macro means weight (model, dataset) settings equally, over the settings where the quantity is "
                   "defined (n_settings); a sign flip is a strictly opposite sign.")
    return s
