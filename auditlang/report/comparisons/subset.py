"""Study 001 App. F (Table 12): the parseable-subset matched analysis. Per (model, dataset,
evaluator) of one audit: the verbal protocol's parse rate, the token protocol's calibration error on
its full sample (tok_full) and on the items whose verbal confidence parsed (tok_sub), and the signed
gaps g_full = est(verbal) - tok_full and g_sub = est(verbal) - tok_sub (the verbal side always on its
parseable rows). The notes give the mean |tok_sub - tok_full| and on how many cells the gap's sign
is unchanged, as 001's caption does.
"""

from __future__ import annotations

import math

import numpy as np

from auditlang.report.comparisons.common import ECE10, Comparison, cell_groups, known, metric_choice
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table


def _side(df) -> tuple[np.ndarray, np.ndarray]:
    d = known(df, True)
    return d["confidence"].to_numpy(float), d["correct"].to_numpy(float)


def parse_matched(rd: RunData, name: str, c) -> Comparison:
    est = metric_choice(rd, c.metric, ECE10)
    a = rd.audit(c.audit)
    models = list(c.models) or list(a.models)
    evals = list(c.evaluators) or rd.evaluators(c.audit)
    several = len(evals) > 1
    out = Comparison(name, "parse_matched", c.audit, shape="parse_matched")
    t = Table(name, f"Token-side {est.label} on the full sample vs the verbal-parseable subset ({name}; 001 Table 12)",
              ["model", "dataset", *(["evaluator"] if several else []), "parse", "tok_full", "tok_sub", "g_full",
               "g_sub"])
    moved, kept, compared = [], 0, 0
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "evaluator"), over={"protocol": (c.verbal, c.token)},
                         levels={"model": models, "evaluator": evals}):
        m, d, e = g.key
        vdf, tdf = g.rows[c.verbal], g.rows[c.token]
        if vdf.empty or tdf.empty:
            t.nc(f"no records of protocol '{c.verbal if vdf.empty else c.token}'", g.where)
            continue
        parsed = vdf[vdf["confidence_parsed"].astype(bool)]
        ev = est(*_side(parsed)) if len(known(parsed, True)) else math.nan
        full = _side(tdf)
        sub = _side(tdf[tdf["item_id"].isin(set(parsed["item_id"]))])
        tok_full = est(*full) if full[0].size else math.nan
        tok_sub = est(*sub) if sub[0].size else math.nan
        parse = len(parsed.drop_duplicates("item_id")) / len(vdf.drop_duplicates("item_id"))
        g_full, g_sub = ev - tok_full, ev - tok_sub
        t.add(m, d, *([e] if several else []), parse, tok_full, tok_sub, g_full, g_sub)
        if not (math.isnan(tok_full) or math.isnan(tok_sub)):
            moved.append(abs(tok_sub - tok_full))
        if not (math.isnan(g_full) or math.isnan(g_sub)):
            compared += 1
            kept += int(np.sign(g_full) == np.sign(g_sub))
    t.notes.append(f"parse: the share of the cell's items whose {c.verbal} confidence parsed; tok_sub restricts "
                   f"{c.token} to those items; g = {est.label}({c.verbal}, parsed rows) - {est.label}({c.token}).")
    if moved:
        t.notes.append(f"Mean |tok_sub - tok_full| = {np.mean(moved):.3f}; the gap sign is unchanged on {kept} of "
                       f"{compared} cells.")
    out.tables.append(t)
    out.summary.append(f"gap sign unchanged by the parse matching on {kept} of {compared} cells")
    return out
