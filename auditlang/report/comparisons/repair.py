"""Study 000 evaluator repair (section 4.1, appendix C.1, Table 1).

On the same generations of ``variant`` (e.g. format_change), each repair evaluator's accuracy is
set against the base evaluator's:

    gap recovery % = 100 (acc_repair - acc_base) / (acc_reference - acc_base)

where acc_base is the base evaluator's accuracy on ``variant`` and acc_reference its accuracy on
``reference_variant``, or the mean of its per-variant accuracies over ``reference_variants``, read
from ``reference_audit`` when given (an audit with the other variants, so the repairs need only run
on ``variant``)
(000 Table 1: the mean of the four non-format_change variants, e.g. Llama-3.2-3B
(0.712 - 0.098) / (0.751 - 0.098) = 94.0 %). The recovery is defined only when the base evaluator
loses accuracy on ``variant`` (acc_reference > acc_base): with no gap, or a negative one, a ratio
would read as a recovery it is not (a repair from 0.50 to 0.00 against a reference of 0.25 would
show +200 %), so it is reported as not computable. Also reported: previously-correct predictions
that the repair turns wrong ("stability of recoveries", appendix C.1).
"""

from __future__ import annotations

import math

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci
from auditlang.report.comparisons.common import CellGroup, Comparison, bootstrap_settings, by_item, cell_groups, known
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable


def evaluator_repair(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    protocol = a.protocols[0]
    refs = c.references()
    ref_audit = c.reference_audit or c.audit
    ref_label = refs[0] if len(refs) == 1 else f"mean of {len(refs)} variants"
    out = Comparison(name, "evaluator_repair", c.audit, shape="evaluator_repair")
    t = Table(name, f"Evaluator repair ({name}): {c.base} vs {', '.join(c.repairs)} on variant {c.variant}",
              ["model", "dataset", "repair", "n_items", f"acc {c.base} @ {ref_label}", f"acc {c.base} @ {c.variant}",
               "acc repair", "gap recovery %", "correct -> wrong"])
    per_repair: dict[str, list[float]] = {r: [] for r in c.repairs}
    B, seed, level = bootstrap_settings(rd, c.audit)
    drop = Table(f"{name}_drop", f"Accuracy drop of {c.base} on {c.variant} against {ref_label} ({name}, study 000 "
                 "Figure 1)", ["model", "dataset", "n_paired", f"acc {c.base} @ {ref_label}", f"acc {c.base} @ {c.variant}",
                               "drop", "drop lo", "drop hi", "relative drop %", "random baseline"])
    for g in cell_groups(rd, c.audit, by=("model", "dataset"), over={"evaluator": (c.base, *c.repairs)},
                         fixed={"variant": c.variant, "protocol": protocol}):
        model, ds = g.key
        ref_accs, missing = _reference_accuracies(rd, ref_audit, refs, protocol, c.base, model, ds)
        base = known(g.rows[c.base], False)
        if missing or base.empty:
            what = f"variant {', '.join(missing)}" if missing else f"variant {c.variant}"
            t.notes.append(not_computable(f"{model} / {ds}: no records of evaluator '{c.base}' on {what}"))
            continue
        b = by_item(base)
        _drop_row(drop, rd, (ref_audit, refs, protocol, c.base), (c.audit, model, ds, c.variant), b, (B, seed, level))
        _repair_rows(t, c, g, b, float(np.mean(ref_accs)), per_repair)
    if ref_audit != c.audit:
        t.notes.append(f"The reference accuracy is read from audit '{ref_audit}' (the same generations: the base "
                       f"evaluator on protocol '{protocol}'); the repairs run on variant '{c.variant}' only.")
    if len(refs) == 1:
        t.notes.append(f"Accuracy on the generations of protocol '{protocol}'; reference = base evaluator on "
                       f"'{refs[0]}' (study 000 Table 1 averages the four non-format_change variants instead).")
    else:
        t.notes.append(f"Accuracy on the generations of protocol '{protocol}'; reference = mean of the base evaluator's "
                       f"accuracies on {', '.join(refs)} (study 000 Table 1, 'Non-fc mean').")
    out.tables.append(t)
    s = Table(f"{name}_mean", f"Mean gap recovery per repair ({name})", ["repair", "n", "mean gap recovery %"])
    for rep, vals in per_repair.items():
        s.add(rep, len(vals), float(np.mean(vals)) if vals else math.nan)
        if not vals:
            s.notes.append(not_computable(f"mean recovery of '{rep}': no (model, dataset) with a defined recovery"))
    out.tables.append(s)
    drop.notes.append(f"drop = mean accuracy of {c.base} over {', '.join(refs)} - its accuracy on {c.variant}, on the "
                      f"items scored under all of them; interval: paired example-level bootstrap of those tuples "
                      f"(000 App. E.2 'ARC-Challenge paired drop'; B={B}, seed={seed}, level {level * 100:g} %). "
                      "relative drop % = 100 drop / reference accuracy (000 §4.1: 72-88 %). random baseline = the "
                      "accuracy of a uniform guess among each item's options, mean 1 / (number of options) over those "
                      "items (000 Figure 1: 0.25 for 4-choice MCQ).")
    out.tables.append(drop)
    out.data = {"drop": drop.records(), "variant": c.variant, "base": c.base, "reference": ref_label}
    out.summary += [f"{rep}: mean recovery {np.mean(v):.1f}%" for rep, v in per_repair.items() if v]
    return out


def _reference_accuracies(rd: RunData, ref_audit: str, refs: list[str], protocol: str, base_ev: str, model: str,
                          ds: str) -> tuple[list[float], list[str]]:
    """(the base evaluator's accuracy on each reference variant with records, the variants without any)."""
    accs, missing = [], []
    for rv in refs:
        ref = known(rd.rows(ref_audit, model=model, dataset=ds, variant=rv, protocol=protocol, evaluator=base_ev), False)
        if ref.empty:
            missing.append(rv)
        else:
            accs.append(float(ref["correct"].mean()))
    return accs, missing


def _repair_rows(t: Table, c, g: CellGroup, b, acc_ref: float, per_repair: dict[str, list[float]]) -> None:
    """One (model, dataset)'s row per repair evaluator: its accuracy against the base's on the same
    items, the gap it recovers and the correct predictions it breaks."""
    model, ds = g.key
    for rep in c.repairs:
        r = known(g.rows[rep], False)
        if r.empty:
            t.notes.append(not_computable(f"{model} / {ds}: no records of repair evaluator '{rep}' on {c.variant}"))
            continue
        r = by_item(r)
        items = [i for i in b.index if i in r.index]
        zb = b.loc[items, "correct"].to_numpy(dtype=float)
        zr = r.loc[items, "correct"].to_numpy(dtype=float)
        acc_b, acc_r = float(zb.mean()), float(zr.mean())
        rec = gap_recovery(acc_ref, acc_b, acc_r)
        if math.isnan(rec):
            t.notes.append(not_computable(
                f"gap recovery for {model} / {ds} / {rep}: the base evaluator loses no accuracy on {c.variant} "
                f"(reference {acc_ref:.3f}, base {acc_b:.3f}), so there is no gap to recover"))
        else:
            per_repair[rep].append(rec)
        broken = int(np.sum((zb == 1) & (zr == 0)))
        t.add(model, ds, rep, len(items), acc_ref, acc_b, acc_r, rec, broken)


def _drop_row(t: Table, rd: RunData, ref: tuple[str, list[str], str, str], cell: tuple[str, str, str, str], base,
              boot: tuple[int, int, float]) -> None:
    """000 Figure 1's paired drop for one (model, dataset): items scored under every reference variant and
    the base cell, resampled together, with the random baseline of those items."""
    ref_audit, refs, protocol, base_ev = ref
    audit, model, ds, variant = cell
    frames = [by_item(known(rd.rows(ref_audit, model=model, dataset=ds, variant=rv, protocol=protocol,
                                    evaluator=base_ev), False)) for rv in refs]
    items = [i for i in base.index if all(i in f.index for f in frames)]
    if not items:
        t.nc("no item scored under both the reference variants and the repaired variant", f"{model} / {ds}")
        return
    arrays = [f.loc[items, "correct"].to_numpy(dtype=float) for f in frames] + [
        base.loc[items, "correct"].to_numpy(dtype=float)]

    def stat(*z: np.ndarray) -> float:
        return float(np.mean([x.mean() for x in z[:-1]]) - z[-1].mean())

    point = stat(*arrays)
    lo = hi = math.nan
    if len(items) > 1:
        ci = bootstrap_ci(stat, *arrays, B=boot[0], seed=boot[1], level=boot[2])
        lo, hi = float(ci.low), float(ci.high)
    mean_ref = float(np.mean([x.mean() for x in arrays[:-1]]))
    chance = random_baseline(rd, (audit, model, ds, variant), base.loc[items, "item_index"].tolist())
    t.add(model, ds, len(items), mean_ref, float(arrays[-1].mean()), point, lo, hi,
          100.0 * point / mean_ref if mean_ref else math.nan, chance)


def random_baseline(rd: RunData, cell: tuple[str, str, str, str], item_indices: list[int]) -> float:
    """Mean over the items of 1 / (number of options): the expected accuracy of a uniform guess (000
    Figure 1's 0.25 line for 4-choice MCQ). NaN when the plan has no options for the items (free-form)."""
    audit, model, ds, variant = cell
    unit = rd.plan.units.get((audit, model, ds, variant, "test")) if rd.plan.units else None
    if unit is None:
        return math.nan
    n_opts = {int(ctx.index): len(ctx.valid_labels() or ()) for ctx in unit.contexts}
    ks = [n_opts.get(int(i), 0) for i in item_indices]
    if not ks or not all(ks):
        return math.nan
    return float(np.mean([1.0 / k for k in ks]))


def gap_recovery(acc_reference: float, acc_base: float, acc_repair: float) -> float:
    """100 (acc_repair - acc_base) / (acc_reference - acc_base); NaN when the base evaluator
    loses no accuracy (acc_reference <= acc_base: no gap, nothing to recover)."""
    gap = acc_reference - acc_base
    if not gap > 0:
        return math.nan
    return 100.0 * (acc_repair - acc_base) / gap
