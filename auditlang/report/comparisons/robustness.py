"""Study 002 robustness, stability and sensitivity next to Brier and AUROC (section 4, Table 6).

P-RB from the (items x prompts) confidence matrix of each (model, dataset, protocol, evaluator)
across the compared variants (002 eq. 3; NaN where a prompt gave no confidence). A-STB / A-SST
need M sampled answers per item, each scored by the confidence method and grouped by meaning
(002 section 4.2); they are read from record extras ``sample_confidences`` (list of floats) and
``sample_groups`` (list of group labels, same length) of the first variant's records. Brier and
AUROC are computed per variant and averaged over the variants (macro over prompts).
"""

from __future__ import annotations

import math

import numpy as np

from auditlang.metrics.calibration import brier
from auditlang.metrics.discrimination import auroc
from auditlang.metrics.robustness import answer_sensitivity, answer_stability, prompt_robustness
from auditlang.report.comparisons.common import Comparison, by_item, known
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable

SAMPLE_KEYS = ("sample_confidences", "sample_groups")


def _samples(rd: RunData, df) -> tuple[list, list] | None:
    confs, groups = [], []
    for i in df.index:
        x = rd.extras(i)
        c, g = x.get(SAMPLE_KEYS[0]), x.get(SAMPLE_KEYS[1])
        if not isinstance(c, list) or not isinstance(g, list) or len(c) != len(g) or not c:
            return None
        confs.append([math.nan if v is None else float(v) for v in c])
        groups.append([str(v) for v in g])
    return confs, groups


def robustness(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    variants = list(c.variants) or list(a.variants)
    out = Comparison(name, "robustness", c.audit)
    t = Table(name, f"Robustness (P-RB), stability (A-STB) and sensitivity (A-SST) with Brier and AUROC ({name})",
              ["model", "dataset", "protocol", "evaluator", "n_items", "P-RB", "P-RB items excluded", "A-STB", "A-SST",
               "Brier (mean over prompts)", "AUROC (mean over prompts)"])
    if len(variants) < 2:
        t.notes.append(not_computable(f"P-RB needs at least two prompts; the comparison names {variants}"))
    for m in a.models:
        for d in a.datasets:
            for p in a.protocols:
                for e in rd.evaluators(c.audit):
                    where = f"{m} / {d} / {p} / {e}"
                    frames = {v: by_item(rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=p, evaluator=e))
                              for v in variants}
                    frames = {v: f for v, f in frames.items() if not f.empty}
                    if not frames:
                        continue
                    items = list(dict.fromkeys(i for f in frames.values() for i in f.index))
                    prb, prb_ex = math.nan, ""
                    if len(frames) == len(variants) and len(variants) >= 2:
                        mat = np.array([[float(frames[v]["confidence"].get(i, math.nan)) for v in variants] for i in items])
                        try:
                            r = prompt_robustness(mat)
                            prb, prb_ex = r.value, r.n_excluded
                        except ValueError as err:
                            t.nc(f"P-RB: {err}", where)
                    elif len(variants) >= 2:
                        t.nc(f"P-RB: no records for variant(s) {[v for v in variants if v not in frames]}", where)
                    stb = sst = math.nan
                    first = rd.rows(c.audit, model=m, dataset=d, variant=variants[0], protocol=p, evaluator=e)
                    got = _samples(rd, first) if not first.empty else None
                    if got is None:
                        t.nc(f"A-STB / A-SST: records carry no per-sample confidences and semantic groups "
                             f"(extras {' / '.join(SAMPLE_KEYS)}; study 002 section 4.2)", where)
                    else:
                        for fn, label in ((answer_stability, "A-STB"), (answer_sensitivity, "A-SST")):
                            try:
                                val = fn(*got).value
                            except ValueError as err:
                                t.nc(f"{label}: {err}", where)
                                val = math.nan
                            if label == "A-STB":
                                stb = val
                            else:
                                sst = val
                    briers, aurocs = [], []
                    for v, f in frames.items():
                        k = known(f, True)
                        if k.empty:
                            continue
                        cc, zz = k["confidence"].to_numpy(float), k["correct"].to_numpy(float)
                        briers.append(brier(cc, zz))
                        au = auroc(cc, zz)
                        if math.isnan(au):
                            t.nc("AUROC: only one outcome class", f"{where} / {v}")
                        else:
                            aurocs.append(au)
                    t.add(m, d, p, e, len(items), prb, prb_ex, stb, sst,
                          float(np.mean(briers)) if briers else math.nan, float(np.mean(aurocs)) if aurocs else math.nan)
    if c.grouping:
        t.notes.append(f"Semantic groups are those of evaluator '{c.grouping}' as recorded in the extras.")
    t.notes.append(f"Prompts: {', '.join(variants)}. Std is the population standard deviation (002 eqs. 3-4).")
    out.tables.append(t)
    return out
