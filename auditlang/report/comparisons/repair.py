"""Study 000 evaluator repair (section 4.1, appendix C.1, Table 1).

On the same generations of ``variant`` (e.g. format_change), each repair evaluator's accuracy is
set against the base evaluator's:

    gap recovery % = 100 (acc_repair - acc_base) / (acc_reference - acc_base)

where acc_base is the base evaluator's accuracy on ``variant`` and acc_reference its accuracy on
``reference_variant``. (000 Table 1 uses the mean of the four non-format_change variants as the
reference; a spec names one reference variant.) Also reported: previously-correct predictions
that the repair turns wrong ("stability of recoveries", appendix C.1).
"""

from __future__ import annotations

import math

import numpy as np

from auditlang.report.comparisons.common import Comparison, by_item, known
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable


def evaluator_repair(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    protocol = a.protocols[0]
    out = Comparison(name, "evaluator_repair", c.audit)
    t = Table(name, f"Evaluator repair ({name}): {c.base} vs {', '.join(c.repairs)} on variant {c.variant}",
              ["model", "dataset", "repair", "n_items", f"acc {c.base} @ {c.reference_variant}", f"acc {c.base} @ {c.variant}",
               "acc repair", "gap recovery %", "correct -> wrong"])
    per_repair: dict[str, list[float]] = {r: [] for r in c.repairs}
    for model in a.models:
        for ds in a.datasets:
            ref = known(rd.rows(c.audit, model=model, dataset=ds, variant=c.reference_variant, protocol=protocol,
                                evaluator=c.base), False)
            base = known(rd.rows(c.audit, model=model, dataset=ds, variant=c.variant, protocol=protocol,
                                 evaluator=c.base), False)
            if ref.empty or base.empty:
                t.notes.append(not_computable(f"{model} / {ds}: no records of evaluator '{c.base}' on "
                                              f"{'variant ' + c.reference_variant if ref.empty else 'variant ' + c.variant}"))
                continue
            acc_ref = float(ref["correct"].mean())
            b = by_item(base)
            for rep in c.repairs:
                r = known(rd.rows(c.audit, model=model, dataset=ds, variant=c.variant, protocol=protocol, evaluator=rep), False)
                if r.empty:
                    t.notes.append(not_computable(f"{model} / {ds}: no records of repair evaluator '{rep}' on {c.variant}"))
                    continue
                r = by_item(r)
                items = [i for i in b.index if i in r.index]
                zb = b.loc[items, "correct"].to_numpy(dtype=float)
                zr = r.loc[items, "correct"].to_numpy(dtype=float)
                acc_b, acc_r = float(zb.mean()), float(zr.mean())
                denom = acc_ref - acc_b
                if denom == 0:
                    rec = math.nan
                    t.notes.append(not_computable(f"gap recovery for {model} / {ds} / {rep}: the base evaluator loses no "
                                                  f"accuracy on {c.variant} (acc_reference = acc_base = {acc_b:.3f})"))
                else:
                    rec = 100.0 * (acc_r - acc_b) / denom
                    per_repair[rep].append(rec)
                broken = int(np.sum((zb == 1) & (zr == 0)))
                t.add(model, ds, rep, len(items), acc_ref, acc_b, acc_r, rec, broken)
    t.notes.append(f"Accuracy on the generations of protocol '{protocol}'; reference = base evaluator on "
                   f"'{c.reference_variant}' (study 000 Table 1 averages four variants instead).")
    out.tables.append(t)
    s = Table(f"{name}_mean", f"Mean gap recovery per repair ({name})", ["repair", "n", "mean gap recovery %"])
    for rep, vals in per_repair.items():
        s.add(rep, len(vals), float(np.mean(vals)) if vals else math.nan)
        if not vals:
            s.notes.append(not_computable(f"mean recovery of '{rep}': no (model, dataset) with a defined recovery"))
    out.tables.append(s)
    out.summary += [f"{rep}: mean recovery {np.mean(v):.1f}%" for rep, v in per_repair.items() if v]
    return out
