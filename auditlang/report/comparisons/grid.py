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

from auditlang.metrics.protocol import GRID, contrast_summary, grid_summary
from auditlang.report.comparisons.common import ECE10, Comparison, MetricChoice, bootstrap_settings, known, metric_choice
from auditlang.report.comparisons.grid_intervals import Setting, grid_intervals
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable


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


def protocol_grid(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    ests = [metric_choice(rd, m, ECE10) for m in c.estimators] or [metric_choice(rd, None, ECE10)]
    configs = list(c.configs)
    is_grid = len(configs) == 2 and len(ests) == 2
    combos = [(cf, es) for es in ests for cf in configs]
    gcols = [f"g[{cf} | {es.label}]" for cf, es in combos]
    extra = ["g_A", "g_B", "g_C", "g_D", "A-B", "A-C", "interaction"] if is_grid else []
    out = Comparison(name, "protocol_grid", c.audit)
    t = Table(name, f"Signed calibration gaps g = est({c.verbal}) - est(token config) ({name})",
              ["model", "dataset", "variant", "evaluator", "n_verbal_parsed", *gcols, *extra, "rho"])
    groups: dict[tuple[str, str], dict[tuple[str, str], dict[str, float]]] = {}
    settings_by_group: dict[tuple[str, str], list[Setting]] = {}
    for m in a.models:
        for d in a.datasets:
            for v in a.variants:
                for e in rd.evaluators(c.audit):
                    vdf = rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=c.verbal, evaluator=e)
                    if vdf.empty:
                        t.nc(f"no records of verbal protocol '{c.verbal}'", f"{m} / {d} / {v} / {e}")
                        continue
                    verbal = _side(vdf, True)
                    if verbal[0].size == 0:
                        t.nc("no parseable verbal confidence", f"{m} / {d} / {v} / {e}")
                        continue
                    tokens = {cf: _side(rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=cf, evaluator=e), False)
                              for cf in configs}
                    for cf, tok in tokens.items():
                        if tok[0].size == 0:
                            t.nc(f"no token confidences for '{cf}'", f"{m} / {d} / {v} / {e}")
                    e_verbal = {es.label: _est(es, verbal) for es in ests}
                    gaps: dict[str, float] = {}
                    row_gaps = []
                    for cf, es in combos:
                        g = e_verbal[es.label] - _est(es, tokens[cf])
                        gaps[f"{cf}|{es.label}"] = g
                        row_gaps.append(g)
                    e_tok0 = _est(ests[0], tokens[configs[0]])
                    rho = e_verbal[ests[0].label] / e_tok0 if e_tok0 and not math.isnan(e_tok0) else math.nan
                    grid_vals: list[Any] = []
                    if is_grid:
                        gA, gB, gC, gD = row_gaps[0], row_gaps[1], row_gaps[2], row_gaps[3]
                        grid_vals = [gA, gB, gC, gD, gA - gB, gA - gC, gA - gB - gC + gD]
                    t.add(m, d, v, e, int(verbal[0].size), *row_gaps, *grid_vals, rho)
                    groups.setdefault((v, e), {})[(m, d)] = gaps
                    tdfs = {cf: rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=cf, evaluator=e) for cf in configs}
                    allrows = pd.concat([vdf, *tdfs.values()])
                    items = pd.Index(allrows.drop_duplicates("item_id").sort_values(["item_index", "item_id"])["item_id"])
                    setting = Setting((m, d), _aligned(vdf, items, True),
                                      {cf: _aligned(tdf, items, False) for cf, tdf in tdfs.items()}, dict(gaps))
                    if items.size and not any(math.isnan(x) for x in gaps.values()):
                        settings_by_group.setdefault((v, e), []).append(setting)
    out.tables.append(t)
    out.tables.append(_summary(name, groups, configs, ests, is_grid))
    out.tables.extend(_intervals(rd, name, c, settings_by_group, combos, is_grid))
    out.data = {"groups": groups}
    return out


def _intervals(rd: RunData, name: str, c, settings_by_group: dict, combos, is_grid: bool) -> list[Table]:
    """Per-setting paired intervals and macro-bootstrap intervals of every gap and shift."""
    B, seed, level = bootstrap_settings(rd, c.audit)
    if c.resamples:
        B = c.resamples
    pct = f"{level * 100:g}%"
    ps = Table(f"{name}_setting_ci", f"Per-setting gaps with {pct} paired bootstrap intervals ({name}; 001 §3.2)",
               ["model", "dataset", "variant", "evaluator", "quantity", "value", "value lo", "value hi"])
    mt = Table(f"{name}_macro_ci", f"Macro means over settings with {pct} macro-bootstrap intervals ({name}; "
               "001 §3.2, Table 2)", ["variant", "evaluator", "n_settings", "quantity", "macro mean", "bootstrap mean",
                                       "macro lo", "macro hi", "interval"])
    notes: set[str] = set()
    for (v, e), settings in settings_by_group.items():
        per, macro, nt = grid_intervals(settings, combos, is_grid, B, seed, level, bool(c.resamples))
        notes.update(nt)
        for key, q, point, ci in per:
            ps.add(key[0], key[1], v, e, q, point, ci.low if ci else math.nan, ci.high if ci else math.nan)
        for _, q, point, ci in macro:
            ns = "" if ci is None or math.isnan(ci.low) else ("excludes 0" if ci.excludes(0.0) else "ns (covers 0)")
            mt.add(v, e, len(settings), q, point, ci.boot_mean if ci else math.nan, ci.low if ci else math.nan,
                   ci.high if ci else math.nan, ns)
    how = (f"B={B}, seed={seed}; items resampled once per setting (verbal side: its parsed rows; token side: all rows), "
           "settings independently (one generator, settings in model/dataset order); the macro replicate is the "
           "equal-weight mean over settings. 001 reports the bootstrap mean in Table 2.")
    for tb in (ps, mt):
        tb.notes.append(how)
        tb.notes.extend(sorted(notes))
    return [ps, mt]


def _summary(name: str, groups: dict, configs: list[str], ests: list[MetricChoice], is_grid: bool) -> Table:
    if is_grid:
        s = Table(f"{name}_summary", f"A-D grid macro summary ({name}; study 001 Tables 2-3)",
                  ["variant", "evaluator", "n_settings", "quantity", "definition", "macro mean", "mean |.|", "sign flips"])
    else:
        s = Table(f"{name}_summary", f"Protocol contrasts against {configs[0]} / {ests[0].label} ({name})",
                  ["variant", "evaluator", "n_settings", "contrast", "macro first", "macro second", "macro shift",
                   "mean |shift|", "sign flips"])
    for (v, e), settings in groups.items():
        complete = {k: g for k, g in settings.items() if not any(math.isnan(x) for x in g.values())}
        dropped = len(settings) - len(complete)
        if dropped:
            s.notes.append(not_computable(f"{dropped} setting(s) of {v} / {e} lack a gap and are left out of the macro means"))
        if not complete:
            continue
        if is_grid:
            labels = [f"{cf}|{es.label}" for es in ests for cf in configs]
            gs = grid_summary({k: dict(zip("ABCD", (g[lab] for lab in labels))) for k, g in complete.items()})
            defs = dict(zip("ABCD", (f"{cf} with {es.label}" for es in ests for cf in configs)))
            for x in "ABCD":
                s.add(v, e, len(complete), f"g_{x}", f"{GRID[x]} [{defs[x]}]", gs.macro[x], math.nan, "")
            flips = {"A-B": gs.flips_ab, "A-C": gs.flips_ac, "interaction": ""}
            names = {"A-B": "context shift g_A - g_B", "A-C": "estimator shift g_A - g_C",
                     "interaction": "second-order g_A - g_B - g_C + g_D"}
            for k in ("A-B", "A-C", "interaction"):
                s.add(v, e, len(complete), k, names[k], gs.macro_shifts[k], gs.mean_abs_shifts[k], flips[k])
        else:
            base = f"{configs[0]}|{ests[0].label}"
            alts = [f"{cf}|{ests[0].label}" for cf in configs[1:]] + [f"{configs[0]}|{es.label}" for es in ests[1:]]
            first = [g[base] for g in complete.values()]
            for alt in alts:
                cs = contrast_summary(first, [g[alt] for g in complete.values()])
                s.add(v, e, cs.n, f"{base} vs {alt}", cs.macro_first, cs.macro_second, cs.macro_shift, cs.mean_abs_shift,
                      cs.flips)
            if not alts:
                s.notes.append("only one configuration and one estimator: no contrast to report")
    s.notes.append("Macro means weight (model, dataset) settings equally; a sign flip is a strictly opposite sign.")
    return s
