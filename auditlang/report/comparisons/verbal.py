"""Study 000 verbal-confidence tables: the VPR matrix and ECE_gap / signed over-confidence.

VPR = parsed / total per cell; cells below the inclusion threshold (audit.vpr_threshold, else
settings.vpr_threshold; 000 appendix D.1: 0.80) are marked and excluded from ECE_verbal means.
ECE_gap = ECE_verbal - ECE_token (000 section 4.2, appendix E.2): verbal on its parsed rows,
token on every row of the paired token cell; over-confidence on the parsed rows. ``datasets=``
restricts the comparison to some of the audit's datasets (000 Table 2 is MMLU-Pro only); the
by-model table gives, per model, the means over the VPR-passing cells of accuracy, ECE_token,
ECE_verbal and ECE_gap (Table 2's columns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff
from auditlang.metrics.calibration import ece
from auditlang.metrics.verbal import ece_gap as ece_gap_metric
from auditlang.metrics.verbal import overconfidence, vpr_filter
from auditlang.report.comparisons.common import Comparison, bootstrap_settings, by_item, ece_bins, known
from auditlang.report.rundata import RunData
from auditlang.score.cellmetrics import parses_verbal
from auditlang.report.tables import Table, not_computable

BELOW = "✗"


@dataclass
class VprSummary:
    threshold: float
    cells: dict[tuple[str, str, str, str, str], float] = field(default_factory=dict)  # (m, d, v, p, e) -> VPR
    excluded: list[tuple[tuple[str, str, str, str, str], float, str]] = field(default_factory=list)


def verbal_protocols(rd: RunData, aid: str) -> list[str]:
    """The audit's protocols whose program reads a stated number (``Program.verbal_parse``: VPR applies)."""
    return [p for p in rd.audit(aid).protocols if parses_verbal(rd.spec, p)]


def vpr_summary(rd: RunData, aid: str) -> VprSummary:
    """VPR of every verbal cell of an audit and the cells the threshold excludes."""
    s = VprSummary(rd.vpr_threshold(aid))
    a = rd.audit(aid)
    for p in verbal_protocols(rd, aid):
        for m in a.models:
            for d in a.datasets:
                for v in a.variants:
                    for e in rd.evaluators(aid):
                        df = rd.rows(aid, model=m, dataset=d, variant=v, protocol=p, evaluator=e)
                        if not df.empty:
                            s.cells[(m, d, v, p, e)] = float(df["confidence_parsed"].astype(bool).mean())
    sel = vpr_filter(s.cells, s.threshold)
    s.excluded = list(sel.excluded)
    return s


def vpr_tables(rd: RunData, aid: str) -> list[Table]:
    """One VPR matrix (rows model x dataset, columns variants) per verbal protocol and evaluator."""
    s = vpr_summary(rd, aid)
    a = rd.audit(aid)
    tables = []
    for p in verbal_protocols(rd, aid):
        for e in rd.evaluators(aid):
            mark = f"{BELOW} = below {s.threshold:.2f}" if rd.vpr_declared(aid) else "no inclusion threshold declared"
            t = Table(f"vpr_{aid}_{p}_{e}", f"Verbal parse rate, audit {aid}, protocol {p}, evaluator {e} ({mark})",
                      ["model", "dataset", *a.variants])
            for m in a.models:
                for d in a.datasets:
                    vals = []
                    for v in a.variants:
                        vpr = s.cells.get((m, d, v, p, e))
                        vals.append("–" if vpr is None else f"{vpr:.3f}" + (f" {BELOW}" if vpr < s.threshold else ""))
                    t.add(m, d, *vals)
            excl = [(k, vpr) for k, vpr, _ in s.excluded if k[3] == p and k[4] == e]
            if rd.vpr_declared(aid):
                t.notes.append(f"Inclusion threshold VPR >= {s.threshold:.2f} ({rd.vpr_source(aid)}); "
                               f"{len(excl)} of {sum(1 for k in s.cells if k[3] == p and k[4] == e)} cells excluded from "
                               "ECE_verbal means.")
            else:
                t.notes.append("No inclusion threshold declared (vpr_threshold): no cell is excluded for its VPR.")
            t.notes += [f"excluded: {k[0]} / {k[1]} / {k[2]} (VPR {vpr:.3f})" for k, vpr in excl]
            tables.append(t)
    return tables


def ece_gap(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    bins, label = ece_bins(rd, c.metric)
    B, seed, level = bootstrap_settings(rd, c.audit)
    thr = rd.vpr_threshold(c.audit)
    out = Comparison(name, "ece_gap", c.audit, shape="ece_gap")
    t = Table(name, f"ECE_gap = ECE({c.verbal}) - ECE({c.token}) and signed over-confidence ({name}, {label})",
              ["model", "dataset", "variant", "evaluator", "n", "vpr", "included", "ece_verbal", "ece_token", "ece_gap",
               "ece_gap lo", "ece_gap hi", "overconf_vs_acc", "overconf_vs_acc lo", "overconf_vs_acc hi",
               "overconf_vs_token", "overconf_vs_token lo", "overconf_vs_token hi", "n_token_missing"])
    sens: list[tuple[str, str, float, float]] = []  # (model, evaluator, VPR, overconf_vs_acc) of every cell
    cell_means: list[dict[str, Any]] = []  # per cell: accuracy, mean verbal and mean token confidence on the parsed rows
    per_model: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    vprs: dict[Any, float] = {}
    datasets = [d for d in a.datasets if not c.datasets or d in c.datasets]
    variants = [v for v in a.variants if not c.variants or v in c.variants]
    for m in a.models:
        for d in datasets:
            for v in variants:
                for e in rd.evaluators(c.audit):
                    vr = rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=c.verbal, evaluator=e)
                    tr = rd.rows(c.audit, model=m, dataset=d, variant=v, protocol=c.token, evaluator=e)
                    where = f"{m} / {d} / {v} / {e}"
                    if vr.empty or tr.empty:
                        t.nc(f"no records of protocol '{c.verbal if vr.empty else c.token}'", where)
                        continue
                    vpr = float(vr["confidence_parsed"].astype(bool).mean())
                    vprs[(m, d, v, e)] = vpr
                    vk = by_item(known(vr, False))
                    tk = by_item(known(tr, False))
                    items = [i for i in vk.index if i in tk.index]
                    verbal = np.where(vk.loc[items, "confidence_parsed"].astype(bool), vk.loc[items, "confidence"], np.nan)
                    verbal = verbal.astype(float)
                    token = tk.loc[items, "confidence"].to_numpy(dtype=float)
                    z = vk.loc[items, "correct"].to_numpy(dtype=float)
                    keep = ~np.isnan(token)
                    n_missing = int((~keep).sum())
                    verbal, token, z = verbal[keep], token[keep], z[keep]
                    included = vpr >= thr
                    if not (~np.isnan(verbal)).any():
                        t.nc("ECE_gap: no verbal confidence parsed (VPR = 0)", where)
                        e_tok = float(ece(token, z, bins=bins)) if len(z) else math.nan
                        t.add(m, d, v, e, len(z), vpr, included, math.nan, e_tok,
                              math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan,
                              math.nan, n_missing)
                        continue
                    ok = ~np.isnan(verbal)
                    e_v = float(ece(verbal[ok], z[ok], bins=bins))
                    e_t = float(ece(token, z, bins=bins))
                    gap = ece_gap_metric(verbal, token, z, bins=bins)
                    # paired example bootstrap of ECE(verbal, parsed rows) - ECE(token, all rows): NaN verbal rows
                    # get weight 0 on the verbal side only (000 appendix E.2)
                    ci = paired_bootstrap_diff("ece", (verbal, z), (token, z), B=B, seed=seed, level=level,
                                               bins=bins, missing="drop") if len(z) > 1 else None
                    oc = overconfidence(verbal, z, token)
                    oc_ci = _overconf_intervals(verbal[ok], z[ok], token[ok], B, seed, level)
                    sens.append((m, e, vpr, oc.vs_accuracy))
                    cell_means.append({"model": m, "dataset": d, "variant": v, "evaluator": e, "included": bool(included),
                                  "accuracy": float(z[ok].mean()), "verbal": float(verbal[ok].mean()),
                                  "token": float(token[ok].mean())})
                    t.add(m, d, v, e, len(z), vpr, included, e_v, e_t, gap, ci.low if ci else math.nan,
                          ci.high if ci else math.nan, oc.vs_accuracy, *oc_ci[0], oc.vs_token, *oc_ci[1], n_missing)
                    if included:
                        acc = float(np.mean(z)) if len(z) else math.nan
                        per_model.setdefault((m, e), []).append((acc, e_t, e_v, gap, oc.vs_accuracy, oc.vs_token))
    sel = vpr_filter(vprs, thr)
    t.notes.append(f"Token rows with a missing token confidence are dropped (n_token_missing); unparsed verbal rows are "
                   f"dropped from ECE_verbal only. Bootstrap: items within the cell, B={B}, seed={seed}; over-confidence "
                   "intervals resample the (verbal, token, correct) triples of the parsed rows (000 App. E.2).")
    t.notes += [f"excluded (VPR < {thr:.2f}): {' / '.join(k)} (VPR {vpr:.3f})" for k, vpr, _ in sel.excluded]
    if not rd.vpr_declared(c.audit):
        t.notes.append("No inclusion threshold declared (vpr_threshold): every cell with a parsed verbal confidence "
                       "enters the means (study 000's VPR >= 0.80 applies only where declared).")
    out.tables.append(t)
    scope = f" on {', '.join(datasets)}" if c.datasets else ""
    scope += f", variants {', '.join(variants)}" if c.variants else ""
    s = Table(f"{name}_by_model", f"Means over VPR-passing cells{scope} ({name})",
              ["model", "evaluator", "n_included", "n_excluded", "mean accuracy", "mean ece_token", "mean ece_verbal",
               "mean ece_gap", "mean overconf_vs_acc", "mean overconf_vs_token"])
    for m in a.models:
        for e in rd.evaluators(c.audit):
            rows = per_model.get((m, e), [])
            n_ex = sum(1 for k, _, _ in sel.excluded if k[0] == m and k[3] == e)
            means = [float(np.mean([r[i] for r in rows])) if rows else math.nan for i in range(6)]
            s.add(m, e, len(rows), n_ex, *means)
            if not rows:
                s.notes.append(not_computable(f"mean ECE_gap for {m} / {e}: no cell passes VPR >= {thr:.2f}"))
    if c.datasets:
        s.notes.append(f"Datasets: {', '.join(datasets)} only (datasets=); study 000 Table 2 reports MMLU-Pro, means over "
                       "the valid variants with VPR >= 0.80.")
    if c.variants:
        s.notes.append(f"Variants: {', '.join(variants)} only (variants=); n_included counts the cells of these variants "
                       "that pass the VPR threshold.")
    out.tables.append(s)
    if c.thresholds:
        out.tables.append(_threshold_table(name, a.models, rd.evaluators(c.audit), sens, list(c.thresholds), scope))
    out.data = {"excluded": sel.excluded, "threshold": thr, "means": cell_means, "verbal": c.verbal, "token": c.token}
    out.summary.append(f"{len(sel.included)} cells included, {len(sel.excluded)} excluded at VPR >= {thr:.2f}"
                       if rd.vpr_declared(c.audit) else f"{len(sel.included)} cells included (no VPR threshold declared)")
    return out


def _overconf_intervals(verbal: np.ndarray, z: np.ndarray, token: np.ndarray, B: int, seed: int,
                        level: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Intervals of mean(verbal) - accuracy and mean(verbal) - mean(token) on the parsed rows: the
    (verbal, token, correct) triples resampled together (000 App. E.2 "Per-cell signed overconfidence")."""
    if verbal.size < 2:
        return (math.nan, math.nan), (math.nan, math.nan)
    out = []
    for other in (z, token):
        ci = bootstrap_ci(lambda v, o: float(v.mean() - o.mean()), verbal, other, B=B, seed=seed, level=level)
        out.append((float(ci.low), float(ci.high)))
    return out[0], out[1]


def _threshold_table(name: str, models: list[str], evaluators: list[str], sens: list[tuple[str, str, float, float]],
                     thresholds: list[float], scope: str) -> Table:
    """000 Table 6: per model, the mean over-confidence vs accuracy over the cells passing each VPR threshold
    [n = the cells contributing]."""
    t = Table(f"{name}_thresholds", f"Mean overconf_vs_acc under VPR thresholds{scope} ({name}, study 000 Table 6)",
              ["model", "evaluator"] + [x for th in thresholds for x in (f"VPR >= {th:.2f}", f"n >= {th:.2f}")])
    for m in models:
        for e in evaluators:
            vals: list = []
            for th in thresholds:
                xs = [oc for mm, ee, vpr, oc in sens if mm == m and ee == e and vpr >= th and not math.isnan(oc)]
                vals += [float(np.mean(xs)) if xs else math.nan, len(xs)]
            t.add(m, e, *vals)
    t.notes.append("Each mean is over the cells whose VPR reaches the threshold; n counts them (000 D.1: the per-model "
                   "means change by at most 0.020 across 0.70 / 0.80 / 0.90).")
    return t
