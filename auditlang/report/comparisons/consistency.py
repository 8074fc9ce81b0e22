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
from auditlang.report.comparisons.common import CellGroup, Comparison, cell_groups, model_family, model_size
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
    cross_types = _cross_by_type(rd, name, cross, ref)
    sizes = _size_means(rd, name, summ)
    out.tables += [intra, summ, cross, abst, settings, _by_model(name, summ, bool(c.best_worst)), cross_types, sizes]
    if len(c.probes) == 2:
        out.tables.append(_probe_difference(name, summ, list(c.probes)))
    out.data = {"heat": heat, "reference": ref, "cross_by_type": _cross_heat(cross_types, list(c.probes)),
                "size_means": _size_data(sizes, list(c.probes))}
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


ORIGINAL = "original"  # the variant type of the reference variant in the tables by variant type


def _blocks(recs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The (model, dataset, evaluator) groups of by-type rows, in order."""
    return list(dict.fromkeys((r["model"], r["dataset"], r["evaluator"]) for r in recs))


def block_label(key: tuple[str, str, str], keys: list[tuple[str, str, str]]) -> str:
    """A column block's name: its model, with the dataset and evaluator where they vary."""
    return " / ".join(x for j, x in enumerate(key) if j == 0 or len({k[j] for k in keys}) > 1)


def _by_model(name: str, summ: Table, best_worst: bool) -> Table:
    """004 Tables 1 and 6: the by-type means with the models as column blocks (one column per model
    and metric), a row per probe and variant type; with ``best_worst`` each probe's best (highest)
    and worst (lowest) variant type per column marked, compared at the two decimals shown (ties
    all marked; none when all are equal)."""
    recs = summ.records()
    keys = _blocks(recs)
    cols = [f"{block_label(k, keys)} {mt}" for k in keys for mt in TYPE_METRICS]
    t = Table(f"{name}_by_model", f"Intra-method consistency by variant type, the models as column blocks: mean over "
              f"the variants of each type ({name}; 004 Tables 1, 6)", ["probe", "variant type", *cols], digits=2)
    vals = {(r["probe"], r["variant type"], k): r for r in recs for k in [(r["model"], r["dataset"], r["evaluator"])]}
    rows = list(dict.fromkeys((r["probe"], r["variant type"]) for r in recs))
    for p, vt in rows:
        t.add(p, vt, *(float(vals[(p, vt, k)][f"{mt} mean"]) if (p, vt, k) in vals else math.nan
                       for k in keys for mt in TYPE_METRICS))
    if best_worst:
        _mark_best_worst(t, cols)
        t.notes.append("Per probe and column: the best (highest) variant type in bold, the worst (lowest) underlined, "
                       "compared at the two decimals shown; ties are all marked (004 Table 1).")
    t.notes.append("Each value is the mean over the variants of its type (004 Tables 1 and 6: the mean over seeds or "
                   "one-shot examples); their population std is in the by-type table.")
    return t


def _mark_best_worst(t: Table, cols: list[str]) -> None:
    """``t.marks`` of each probe's rows: per column the rows whose value, at ``t.digits`` decimals, is
    the probe's highest ("best") or lowest ("worst") when these differ."""
    probes = t.column("probe")
    for p in dict.fromkeys(probes):
        idx = [i for i, x in enumerate(probes) if x == p]
        for col in cols:
            j = t.columns.index(col)
            shown = {i: round(float(t.rows[i][j]), t.digits) for i in idx if not math.isnan(float(t.rows[i][j]))}
            if len(set(shown.values())) < 2:
                continue
            hi, lo = max(shown.values()), min(shown.values())
            t.marks.update({(i, col): "best" if v == hi else "worst" for i, v in shown.items() if v in (hi, lo)})


def _probe_difference(name: str, summ: Table, probes: list[str]) -> Table:
    """004 Table 3: the two probes' by-type means, the second's with its difference from the first
    (second - first; 004's "(+.29)")."""
    first, second = probes
    t = Table(f"{name}_difference", f"Intra-method consistency by variant type of {first} and {second}, with the "
              f"difference {second} - {first} ({name}; 004 Table 3)",
              ["model", "dataset", "evaluator", "probe", "variant type",
               *(f"{mt}{x}" for mt in TYPE_METRICS for x in ("", f" - {first}"))], digits=2)
    recs = summ.records()
    base = {(r["model"], r["dataset"], r["evaluator"], r["variant type"]): r for r in recs if r["probe"] == first}
    for p in probes:
        for r in (x for x in recs if x["probe"] == p):
            b = base.get((r["model"], r["dataset"], r["evaluator"], r["variant type"]))
            t.add(r["model"], r["dataset"], r["evaluator"], p, r["variant type"],
                  *(v for mt in TYPE_METRICS for v in (float(r[f"{mt} mean"]), math.nan if p == first or b is None
                                                       else float(r[f"{mt} mean"]) - float(b[f"{mt} mean"]))))
    t.notes.append(f"Each value is the mean over the variants of its type; the difference columns give {second}'s "
                   f"mean minus {first}'s for the same model, dataset, evaluator and variant type (blank for "
                   f"{first} itself).")
    return t


def _cross_by_type(rd: RunData, name: str, cross: Table, ref: str) -> Table:
    """004 Figures 4-8: the cross-method DecCons and IoU_cons of every probe pair, the mean over the
    variants of each type (the reference variant its own type, ``original``)."""
    t = Table(f"{name}_cross_by_type", f"Cross-method consistency by variant type, mean over the variants of each "
              f"type ({name}; 004 Figures 4-8)", ["model", "dataset", "evaluator", "variant type", "probe_1", "probe_2",
                                                  "n_variants", "DecCons mean", "IoU_cons mean"])
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for r in cross.records():
        vt = ORIGINAL if r["variant"] == ref else variant_type(rd, r["variant"])
        groups.setdefault((r["model"], r["dataset"], r["evaluator"], vt, r["probe_1"], r["probe_2"]), []).append(
            (float(r["DecCons"]), float(r["IoU_cons"])))
    for k, vals in groups.items():
        arr = np.asarray(vals, dtype=float)
        t.add(*k, len(vals), float(arr[:, 0].mean()), float(arr[:, 1].mean()))
    t.notes.append(f"The reference variant '{ref}' is the type '{ORIGINAL}'; every other type is the mean over its "
                   "variants (004 Figures 4-7: over the three seeds or the one-shot examples).")
    return t


def _cross_heat(t: Table, probes: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(model, dataset, evaluator) -> the variant types and each metric's {(type, p1, p2): mean} of
    :func:`_cross_by_type`, for the figures."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in t.records():
        hm = out.setdefault((r["model"], r["dataset"], r["evaluator"]),
                            {"probes": probes, "types": [], "DecCons": {}, "IoU_cons": {}})
        if r["variant type"] not in hm["types"]:
            hm["types"].append(r["variant type"])
        for mt in ("DecCons", "IoU_cons"):
            hm[mt][(r["variant type"], r["probe_1"], r["probe_2"])] = r[f"{mt} mean"]
    return out


def _size_means(rd: RunData, name: str, summ: Table) -> Table:
    """004 Figure 2: per dataset, evaluator, probe and model (with its declared size and family),
    the mean IoU_cons over the variant types (the mean of the by-type means)."""
    t = Table(f"{name}_by_size", f"Mean intra-method IoU_cons over the variant types per probe and model size "
              f"({name}; 004 Figure 2)", ["dataset", "evaluator", "probe", "model", "size (B)", "family", "n_types",
                                          "IoU_cons mean"])
    groups: dict[tuple, list[float]] = {}
    for r in summ.records():
        groups.setdefault((r["dataset"], r["evaluator"], r["probe"], r["model"]), []).append(float(r["IoU_cons mean"]))
    for (d, e, p, m), vals in groups.items():
        t.add(d, e, p, m, model_size(rd, m)[0], model_family(rd, m), len(vals), float(np.mean(vals)))
    t.notes.append("Each value is the mean over the variant types of the by-type means (each type weighted once); the "
                   "size is the model's declared size (else the embedded catalogue's).")
    return t


def _size_data(t: Table, probes: list[str]) -> dict[str, Any]:
    """:func:`_size_means` for the figure: sizes and families per model, values per (dataset,
    evaluator, probe, model)."""
    recs = t.records()
    return {"probes": probes, "sizes": {r["model"]: r["size (B)"] for r in recs},
            "families": {r["model"]: r["family"] for r in recs},
            "values": {(r["dataset"], r["evaluator"], r["probe"], r["model"]): r["IoU_cons mean"] for r in recs}}
