"""Study 002's Tables 6-8 in one layout each, pooled over several ``robustness`` comparisons
(``robustness(..., pool=[other robustness comparisons])``): 002 prints the answer-prompt methods,
GPT-4o and VC in one table with the nine models as columns and AVG, so the comparison that names
``pool=`` writes, from its own ``_avg`` table and its pooled comparisons' (each computed as the report
computes it), keyed by each comparison's ``methods=`` names (else its protocols):

* ``NAME_pooled`` (002 Table 6): a row per method and metric (P-RB, A-STB, A-SST, Brier, AUROC and
  the audits' ECE-family metrics), a column per model (every comparison's models, in order) and AVG;
  a (method, model) value is the first comparison's that has it;
* ``NAME_pooled_prb`` (002 Table 7): P-RB of every method that two or more comparisons measure on a
  common model, one row per comparison: ``Conf-P`` where the comparison varies the confidence
  prompts (``protocols=``), ``Ans-P`` where it varies the answer prompts;
* ``NAME_pooled_sst`` (002 Table 8): A-SST against Y^min and against every answer outside Y^max.
"""

from __future__ import annotations

import math

import numpy as np

from auditlang.report.comparisons.common import Comparison
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table

# <compare>_avg metric -> 002 Table 6's row label
LABELS = {"P-RB": "P-RB ↑", "A-STB": "A-STB ↑", "A-SST": "A-SST ↑", "Brier (mean over prompts)": "Brier ↓",
          "AUROC (mean over prompts)": "AUROC ↑"}
FIXED = ("protocol", "evaluator", "metric", "AVG", "n_models")


def _avg(c: Comparison) -> tuple[list[str], list[dict]]:
    t = next((x for x in c.tables if x.name == f"{c.name}_avg"), None)
    if t is None:
        return [], []
    return [m for m in t.columns if m not in FIXED], t.records()


def _points(parts: list[Comparison]) -> tuple[list[str], dict[tuple[str, str, str, str], list[tuple[int, float]]]]:
    """(models in order, (evaluator, method, metric, model) -> [(part index, value)])."""
    models: list[str] = []
    pts: dict[tuple[str, str, str, str], list[tuple[int, float]]] = {}
    for k, c in enumerate(parts):
        ms, recs = _avg(c)
        models += [m for m in ms if m not in models]
        names = c.data.get("methods") or {}
        for r in recs:
            for m in ms:
                v = float(r[m]) if r[m] is not None else math.nan
                pts.setdefault((r["evaluator"], names.get(r["protocol"], r["protocol"]), r["metric"], m), []).append((k, v))
    return models, pts


def _mean(xs: list[float]) -> float:
    ok = [x for x in xs if not math.isnan(x)]
    return float(np.mean(ok)) if ok else math.nan


def _label(metric: str) -> str:
    return LABELS.get(metric, metric.replace(" (mean over prompts)", " ↓") if "ece" in metric.lower() else metric)


def pooled_tables(rd: RunData, name: str, parts: list[Comparison]) -> list[Table]:
    models, pts = _points(parts)
    cols = ["evaluator", "CE", "metric", *models, "AVG"]
    t6 = Table(f"{name}_pooled", f"Per method and metric, each model's mean over the datasets and AVG, the comparisons "
               f"{', '.join(c.name for c in parts)} pooled ({name}; study 002 Table 6)", list(cols))
    t8 = Table(f"{name}_pooled_sst", f"A-SST against Y^min and against every answer outside Y^max ({name}; study 002 "
               "Table 8)", ["evaluator", "CE", "Y", *models, "AVG"])
    keys = list(dict.fromkeys((e, meth) for e, meth, _, _ in pts))
    for e, meth in keys:
        metrics = list(dict.fromkeys(mt for (e2, m2, mt, _) in pts if (e2, m2) == (e, meth)))
        first = {mt: [pts.get((e, meth, mt, m), [(0, math.nan)])[0][1] for m in models] for mt in metrics}
        for mt in metrics:
            if mt == "A-SST not max" or all(math.isnan(v) for v in first[mt]):
                continue
            t6.add(e, meth, _label(mt), *first[mt], _mean(first[mt]))
        for mt, y in (("A-SST", "Y^min"), ("A-SST not max", "Y^!=max")):
            if mt in first and not all(math.isnan(v) for v in first[mt]):
                t8.add(e, meth, y, *first[mt], _mean(first[mt]))
    t6.notes.append("A model's value is its mean over the datasets (each comparison's NAME_avg); a (method, model) "
                    "value measured by several comparisons is the first one's, in the order "
                    f"{', '.join(c.name for c in parts)}; AVG is the equal-weight mean over the models with a value.")
    t8.notes.append("Y^min: A-SST of 002 eq. 7 (Y^max against the smallest other group); Y^!=max: against every "
                    "answer outside Y^max (002 App. A.8).")
    return [t6, _prb_table(name, parts, models, pts), t8]


def _prb_table(name: str, parts: list[Comparison], models: list[str], pts) -> Table:
    """002 Table 7: P-RB of a method measured by two or more comparisons on a common model."""
    t = Table(f"{name}_pooled_prb", f"P-RB of a method under the confidence prompts (Conf-P) and under the answer "
              f"prompts (Ans-P) ({name}; study 002 Table 7)", ["evaluator", "CE", "prompts", "comparison", *models, "AVG"])
    for e, meth in dict.fromkeys((e, meth) for e, meth, mt, _ in pts if mt == "P-RB"):
        by_part: dict[int, dict[str, float]] = {}
        for m in models:
            for k, v in pts.get((e, meth, "P-RB", m), []):
                by_part.setdefault(k, {})[m] = v
        shared = [k for k in by_part if any(set(by_part[k]) & set(by_part[j]) for j in by_part if j != k)]
        for k in shared:
            vals = [by_part[k].get(m, math.nan) for m in models]
            prompts = "Conf-P" if "prompts" in parts[k].data else "Ans-P"
            t.add(e, meth, prompts, parts[k].name, *vals, _mean(vals))
    t.notes.append("Conf-P: the comparison varies the confidence-elicitation prompts (protocols=), Ans-P: the answer-"
                   "elicitation prompts (its variants). Only methods two comparisons measure on a common model.")
    return t
