"""Study 002 robustness, stability and sensitivity next to Brier and AUROC (section 4, Table 6).

P-RB from the (items x prompts) confidence matrix of each (model, dataset, protocol, evaluator)
across the compared variants (002 eq. 3; NaN where a prompt gave no confidence). A-STB / A-SST
need M sampled answers per item, each scored by the confidence method and grouped by meaning
(002 section 4.2). With ``answer=fixed`` (default) P-RB re-scores the first prompt's answer under
every prompt; the fixed-answer and per-sample confidences come from record extras ``supplied``
written by the cross stage (auditlang/run/cross.py). Brier and
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

def _samples(rd: RunData, df, key: str) -> tuple[list, list, int] | None:
    """Per item: the confidences of its K sampled answers and their semantic groups, from record
    extras ``supplied`` (source ``samples:<protocol>``, written by the cross stage). Samples with
    no confidence (an empty answer, a failed request) are left out and counted (third value)."""
    confs, groups, dropped = [], [], 0
    for i in df.index:
        got = [x for x in rd.extras(i).get("supplied") or [] if x.get("source") == key]
        if not got:
            continue
        got.sort(key=lambda x: int(x.get("index", 0)))
        keep = [x for x in got if x.get("confidence") is not None and not math.isnan(float(x["confidence"]))]
        dropped += len(got) - len(keep)
        if keep:
            confs.append([float(x["confidence"]) for x in keep])
            groups.append([str(x.get("group")) for x in keep])
    return (confs, groups, dropped) if confs else None


def _fixed(rd: RunData, df, key: str) -> dict[str, float]:
    """item id -> this prompt's confidence in the fixed answer (extras ``supplied``, source ``key``)."""
    out: dict[str, float] = {}
    for i in df.index:
        for x in rd.extras(i).get("supplied") or []:
            if x.get("source") == key:
                out[str(rd.records.at[i, "item_id"])] = math.nan if x.get("confidence") is None else float(x["confidence"])
    return out


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
                    fixed = getattr(c, "answer", "own") == "fixed"
                    if fixed and len(frames) == len(variants) and len(variants) >= 2:
                        key = f"variant:{variants[0]}"
                        cols = [{i: float(x) for i, x in frames[variants[0]]["confidence"].items()}]
                        cols += [_fixed(rd, rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=p, evaluator=e), key)
                                 for v in variants[1:]]
                        if not any(cols[1:]):
                            t.nc(f"P-RB: records carry no confidences of the fixed answer (extras 'supplied', source "
                                 f"'{key}', from the cross stage); answer=own scores each prompt's own answer", where)
                        else:
                            mat = np.array([[col.get(str(i), col.get(i, math.nan)) for col in cols] for i in items])
                            try:
                                r = prompt_robustness(mat)
                                prb, prb_ex = r.value, r.n_excluded
                            except ValueError as err:
                                t.nc(f"P-RB: {err}", where)
                    elif len(frames) == len(variants) and len(variants) >= 2:
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
                    got = _samples(rd, first, f"samples:{c.samples}") if c.samples and not first.empty else None
                    if not c.samples:
                        t.nc("A-STB / A-SST: the comparison names no samples= protocol (K sampled answers per item, "
                             "study 002 section 4.2)", where)
                    elif got is None:
                        t.nc(f"A-STB / A-SST: records carry no scored samples (extras 'supplied', source "
                             f"'samples:{c.samples}', from the cross stage)", where)
                    else:
                        if got[2]:
                            t.nc(f"A-STB / A-SST: {got[2]} sampled answer(s) without a confidence left out", where)
                        for fn, label in ((answer_stability, "A-STB"), (answer_sensitivity, "A-SST")):
                            try:
                                val = fn(got[0], got[1]).value
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
    if c.samples:
        t.notes.append(f"A-STB / A-SST: the K answers of protocol '{c.samples}' under prompt {variants[0]}, each scored "
                       "by the row's protocol; semantic groups from "
                       + (f"judge evaluator '{c.grouping}' (002 App. A.1)" if c.grouping else
                          "the evaluator's normalised answer (no grouping= judge given)") + ".")
    if getattr(c, "answer", "own") == "fixed":
        t.notes.append(f"P-RB: the answer generated under {variants[0]} re-scored under every prompt (002 App. A.3).")
    else:
        t.notes.append("P-RB: each prompt scores its own generated answer (answer=own).")
    t.notes.append(f"Prompts: {', '.join(variants)}. Std is the population standard deviation (002 eqs. 3-4).")
    out.tables.append(t)
    return out
