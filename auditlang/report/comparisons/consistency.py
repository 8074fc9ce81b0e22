"""Study 004 consistency of knowledge probes: intra-method (across variants) and cross-method.

Decisions come from record extras ``abstain`` (True = reject / "knowledge gap", False = accept;
missing = no decision). Intra-method: each probe on the reference variant (the first of
``variants``) against every other variant, with IoU_cons, IoU_acc, IoU_rej, DecCons, Agreement
and common-accept accuracy (004 section 3, appendix C), then mean and std per variant type (the
variant's perturbations; Table 1 rows). Agreement compares option *content*, since shuffles move
the letters (004 section 3), using the rendered items of the plan when available. Cross-method:
DecCons and IoU_cons of every probe pair under the same variant. Abstain metrics of Feng et al.
(2024b) per probe and variant (004 section 5.4).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from auditlang.metrics.consistency import abstain_metrics, consistency_report, decision_consistency, iou_cons
from auditlang.report.comparisons.common import CellGroup, Comparison, cell_groups
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table


def _decision(x: dict[str, Any]) -> float:
    ab = x.get("abstain")
    if ab is None:
        return math.nan
    return 0.0 if bool(ab) else 1.0


def variant_type(rd: RunData, vid: str) -> str:
    """The kind of perturbation a variant applies (its perturbation constructors), else its id."""
    v = rd.spec.get(vid).value
    kinds = [rd.spec.get(p).ctor for p in v.perturb]
    if v.fewshot:
        kinds.append(f"fewshot_{v.fewshot}")
    return "+".join(kinds) or vid


def _contents(rd: RunData, aid: str, m: str, d: str, v: str) -> dict[int, dict[str, str]] | None:
    unit = rd.plan.units.get((aid, m, d, v, "test")) if rd.plan.units else None
    if unit is None:
        return None
    out = {}
    for ctx in unit.contexts:
        labels = ctx.valid_labels() or []
        choices = ctx.item.get("choices") or []
        out[int(ctx.index)] = {lab: str(ch) for lab, ch in zip(labels, choices)}
    return out


def _frame(rd: RunData, df, aid: str, m: str, d: str, v: str) -> dict[str, Any] | None:
    """One probe cell's decisions, answers (as option content where the plan has the rendered items)
    and correctness per item; None when the cell has no records."""
    if df.empty:
        return None
    df = df.drop_duplicates("item_id")
    dec = np.array([_decision(rd.extras(i)) for i in df.index], dtype=float)
    df = df.set_index("item_id")
    contents = _contents(rd, aid, m, d, v)
    answers = []
    for _, row in df.iterrows():
        pred = row["pred"]
        if contents is not None and pred is not None and int(row["item_index"]) in contents:
            answers.append(contents[int(row["item_index"])].get(str(pred), str(pred)))
        else:
            answers.append(None if pred is None else str(pred))
    return {"items": list(df.index), "decisions": dec, "answers": answers,
            "correct": df["correct"].to_numpy(float), "by_content": contents is not None}


def _align(f1: dict[str, Any], f2: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, list, list, np.ndarray, np.ndarray]:
    pos2 = {it: k for k, it in enumerate(f2["items"])}
    idx1 = [k for k, it in enumerate(f1["items"]) if it in pos2]
    idx2 = [pos2[f1["items"][k]] for k in idx1]
    return (f1["decisions"][idx1], f2["decisions"][idx2], [f1["answers"][k] for k in idx1],
            [f2["answers"][k] for k in idx2], f1["correct"][idx1], f2["correct"][idx2])


TYPE_METRICS = ("IoU_cons", "IoU_acc", "IoU_rej", "DecCons", "Agreement")  # 004 Table 1's columns, in order
ABSTAIN_METRICS = ("abstain F1", "abstain rate", "abstain precision", "abstain recall", "reliable accuracy",
                   "effective reliability", "abstain accuracy")


def prompt_setting(rd: RunData, vid: str, ref: str) -> str:
    """004 Table 2's prompt settings: ``original`` (the reference variant), ``one-shot`` (a variant
    with a few-shot context) or ``zero-shot`` (a perturbed variant without one: space, options, typo)."""
    if vid == ref:
        return "original"
    return "one-shot" if rd.spec.get(vid).value.fewshot else "zero-shot"


def _abstain_by_setting(rd: RunData, name: str, abst: Table, ref: str) -> Table:
    """004 Table 2 (and Tables 11-14's aggregates): the abstain metrics of each probe per prompt
    setting, the mean over the setting's variants."""
    t = Table(f"{name}_abstain_by_setting", f"Abstain metrics per probe and prompt setting: original, zero-shot "
              f"variants, one-shot variants, mean over the variants ({name}; 004 Table 2)",
              ["model", "dataset", "evaluator", "probe", "setting", "n_variants", *ABSTAIN_METRICS])
    groups: dict[tuple, list[dict]] = {}
    for r in abst.records():
        groups.setdefault((r["model"], r["dataset"], r["evaluator"], r["probe"], prompt_setting(rd, r["variant"], ref)),
                          []).append(r)
    order = {"original": 0, "zero-shot": 1, "one-shot": 2}
    for k in sorted(groups, key=lambda k: (k[:4], order[k[4]])):
        rows = groups[k]
        t.add(*k, len(rows), *(float(np.nanmean([float(r[mt]) for r in rows])) if any(
            not math.isnan(float(r[mt])) for r in rows) else math.nan for mt in ABSTAIN_METRICS))
    t.notes.append(f"original = the reference variant '{ref}'; zero-shot = the perturbed variants without a few-shot "
                   "context (space, options, typo); one-shot = the variants with one (004 §5.4).")
    return t


def consistency(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    variants = list(c.variants) or list(a.variants)
    ref = variants[0]
    out = Comparison(name, "consistency", c.audit, shape="consistency")
    intra = Table(f"{name}_intra", f"Intra-method consistency vs variant '{ref}' ({name})",
                  ["model", "dataset", "evaluator", "probe", "variant", "variant type", "n_items", "IoU_cons", "IoU_acc",
                   "IoU_rej", "DecCons", "Agreement", "common-accept accuracy"])
    cross = Table(f"{name}_cross", f"Cross-method decision consistency ({name})",
                  ["model", "dataset", "evaluator", "variant", "probe_1", "probe_2", "n_items", "DecCons", "IoU_cons"])
    abst = Table(f"{name}_abstain", f"Abstain metrics per probe (Feng et al. 2024b; {name})",
                 ["model", "dataset", "evaluator", "probe", "variant", "abstain rate", "abstain precision",
                  "abstain recall", "abstain F1", "reliable accuracy", "effective reliability", "abstain accuracy"])
    heat: dict[tuple[str, str, str], dict[str, Any]] = {}
    letters_only = False
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "evaluator"),
                         over={"protocol": c.probes, "variant": variants}):
        frames = _probe_frames(rd, c, g, variants, intra, abst)
        letters_only |= any(not f["by_content"] for f in frames.values())
        hm = {"probes": list(c.probes), "variants": variants[1:], "intra": {}, "cross": {}}
        _intra_rows(rd, c, g, frames, variants, intra, hm)
        _cross_rows(c, g, frames, variants, cross, hm)
        heat[g.key] = hm
    if letters_only:
        intra.notes.append("Agreement compares answer letters for some cells (no rendered items in the plan); under "
                           "option shuffles letters move, so those values understate agreement.")
    intra.notes.append("Ratios with an empty denominator are 0 (004 metrics module convention).")
    summ = _by_type(name, intra)
    settings = _abstain_by_setting(rd, name, abst, ref)
    out.tables += [intra, summ, cross, abst, settings]
    out.data = {"heat": heat, "reference": ref}
    return out


def _by_type(name: str, intra: Table) -> Table:
    """004 Tables 1, 7-10: the intra-method metrics' mean and std over the variants of one type."""
    summ = Table(f"{name}_by_type", f"Intra-method consistency by variant type, mean (std) ({name}; 004 Tables 1, 7-10)",
                 ["model", "dataset", "evaluator", "probe", "variant type", "n_variants",
                  *(f"{mt} {x}" for mt in TYPE_METRICS for x in ("mean", "std"))])
    groups: dict[tuple, list[list[float]]] = {}
    for r in intra.records():
        groups.setdefault((r["model"], r["dataset"], r["evaluator"], r["probe"], r["variant type"]), []).append(
            [r[mt] for mt in TYPE_METRICS])
    for k, vals in groups.items():
        arr = np.asarray(vals, dtype=float)
        summ.add(*k, len(vals), *(float(f(arr[:, j])) for j in range(len(TYPE_METRICS)) for f in (np.mean, np.std)))
    summ.notes.append("Mean and population std over the variants of one type (004 Table 1: the mean over seeds or "
                      "one-shot examples; Tables 7-10: mean (std)).")
    return summ


def _probe_frames(rd: RunData, c, g: CellGroup, variants: list[str], intra: Table,
                  abst: Table) -> dict[tuple[str, str], dict[str, Any]]:
    """(probe, variant) -> frame of one (model, dataset, evaluator), for the cells whose records carry
    abstain decisions; each probe cell's abstain metrics added to ``abst``."""
    m, d, e = g.key
    frames: dict[tuple[str, str], dict[str, Any]] = {}
    for p, v in itertools.product(c.probes, variants):
        f = _frame(rd, g.rows[(p, v)], c.audit, m, d, v)
        if f is None:
            continue
        if np.isnan(f["decisions"]).all():
            intra.nc("records carry no abstain decisions (extras 'abstain')", f"{m} / {d} / {p} / {v}")
            continue
        frames[(p, v)] = f
        ok = ~np.isnan(f["decisions"]) & ~np.isnan(f["correct"])
        if ok.any():
            am = abstain_metrics(1.0 - f["decisions"][ok], f["correct"][ok])
            abst.add(m, d, e, p, v, am.abstain_rate, am.abstain_precision, am.abstain_recall,
                     am.abstain_f1, am.reliable_accuracy, am.effective_reliability, am.abstain_accuracy)
    return frames


def _intra_rows(rd: RunData, c, g: CellGroup, frames: dict, variants: list[str], intra: Table, hm: dict) -> None:
    """Each probe on the reference variant against every other variant (004 section 3, appendix C)."""
    m, d, e = g.key
    ref = variants[0]
    for p, v in itertools.product(c.probes, variants[1:]):
        if (p, ref) not in frames or (p, v) not in frames:
            continue
        d1, d2, a1, a2, z1, z2 = _align(frames[(p, ref)], frames[(p, v)])
        both = ~np.isnan(z1) & ~np.isnan(z2)
        rep = consistency_report(d1, d2, answers_1=a1, answers_2=a2,
                                 correct_1=np.where(both, z1, 0.0), correct_2=np.where(both, z2, 0.0))
        intra.add(m, d, e, p, v, variant_type(rd, v), len(d1), rep.iou_cons, rep.iou_acc, rep.iou_rej,
                  rep.dec_cons, rep.agreement, rep.common_accept_accuracy)
        hm["intra"][(p, v)] = rep.iou_cons


def _cross_rows(c, g: CellGroup, frames: dict, variants: list[str], cross: Table, hm: dict) -> None:
    """DecCons and IoU_cons of every probe pair under the same variant (cross-method)."""
    m, d, e = g.key
    for v in variants:
        for p1, p2 in itertools.combinations(c.probes, 2):
            if (p1, v) in frames and (p2, v) in frames:
                d1, d2, *_ = _align(frames[(p1, v)], frames[(p2, v)])
                dc, ic = decision_consistency(d1, d2), iou_cons(d1, d2)
                cross.add(m, d, e, v, p1, p2, len(d1), dc, ic)
                if v == variants[0]:
                    hm["cross"][(p1, p2)] = dc
