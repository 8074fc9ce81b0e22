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

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff
from auditlang.metrics.calibration import ece
from auditlang.metrics.verbal import ece_gap as ece_gap_metric
from auditlang.metrics.verbal import overconfidence, vpr_filter
from auditlang.report.comparisons.common import Comparison, bootstrap_settings, by_item, cell_groups, ece_bins, known
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
    for g in cell_groups(rd, aid, by=("protocol", "model", "dataset", "variant", "evaluator"),
                         levels={"protocol": verbal_protocols(rd, aid)}, skip_empty=True):
        p, m, d, v, e = g.key
        s.cells[(m, d, v, p, e)] = float(g.rows[()]["confidence_parsed"].astype(bool).mean())
    sel = vpr_filter(s.cells, s.threshold)
    s.excluded = list(sel.excluded)
    return s


def _vpr_text(vpr: float | None, threshold: float) -> str:
    """A VPR matrix entry: the rate, marked when below the threshold; a dash where the cell has no records."""
    return "–" if vpr is None else f"{vpr:.3f}" + (f" {BELOW}" if vpr < threshold else "")


def vpr_tables(rd: RunData, aid: str) -> list[Table]:
    """One VPR matrix (rows model x dataset, columns variants) per verbal protocol and evaluator."""
    s = vpr_summary(rd, aid)
    a = rd.audit(aid)
    tables = []
    for p, e in itertools.product(verbal_protocols(rd, aid), rd.evaluators(aid)):
        mark = f"{BELOW} = below {s.threshold:.2f}" if rd.vpr_declared(aid) else "no inclusion threshold declared"
        t = Table(f"vpr_{aid}_{p}_{e}", f"Verbal parse rate, audit {aid}, protocol {p}, evaluator {e} ({mark})",
                  ["model", "dataset", *a.variants])
        for m, d in itertools.product(a.models, a.datasets):
            t.add(m, d, *(_vpr_text(s.cells.get((m, d, v, p, e)), s.threshold) for v in a.variants))
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


GAP_COLUMNS = ("model", "dataset", "variant", "evaluator", "n", "vpr", "included", "ece_verbal", "ece_token", "ece_gap",
               "ece_gap lo", "ece_gap hi", "overconf_vs_acc", "overconf_vs_acc lo", "overconf_vs_acc hi",
               "overconf_vs_token", "overconf_vs_token lo", "overconf_vs_token hi", "n_token_missing")


@dataclass
class _GapCell:
    """What the by-model and threshold tables and the figure need of one cell with a parsed verbal confidence."""

    key: tuple[str, str, str, str]  # (model, dataset, variant, evaluator)
    vpr: float
    included: bool
    means: dict[str, Any]  # accuracy, mean verbal and mean token confidence on the parsed rows
    values: tuple[float, ...]  # accuracy, ECE_token, ECE_verbal, ECE_gap, overconf vs accuracy, vs token


def ece_gap(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    bins, label = ece_bins(rd, c.metric)
    boot = bootstrap_settings(rd, c.audit)
    B, seed, _ = boot
    thr = rd.vpr_threshold(c.audit)
    out = Comparison(name, "ece_gap", c.audit, shape="ece_gap")
    t = Table(name, f"ECE_gap = ECE({c.verbal}) - ECE({c.token}) and signed over-confidence ({name}, {label})",
              list(GAP_COLUMNS))
    datasets = [d for d in a.datasets if not c.datasets or d in c.datasets]
    variants = [v for v in a.variants if not c.variants or v in c.variants]
    scope_levels = {"dataset": datasets, "variant": variants}
    cells, vprs = _gap_cells(rd, c, t, c.verbal, scope_levels, thr, bins, boot)
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
    out.tables.append(_by_model_table(rd, name, c, cells, sel, thr, scope, datasets, variants))
    if c.thresholds:
        sens = [(x.key[0], x.key[3], x.vpr, x.values[4]) for x in cells]  # (model, evaluator, VPR, overconf_vs_acc)
        out.tables.append(_threshold_table(name, a.models, rd.evaluators(c.audit), sens, list(c.thresholds), scope))
    if c.phrasings:
        per = {c.verbal: cells}
        for q in c.phrasings:
            per[q] = _gap_cells(rd, c, Table(f"{name}_{q}", "", list(GAP_COLUMNS)), q, scope_levels, thr, bins, boot)[0]
        out.tables.append(_phrasings_table(name, a.models, rd.evaluators(c.audit), per, thr, scope))
    out.data = {"excluded": sel.excluded, "threshold": thr, "means": [x.means for x in cells], "verbal": c.verbal,
                "token": c.token}
    out.summary.append(f"{len(sel.included)} cells included, {len(sel.excluded)} excluded at VPR >= {thr:.2f}"
                       if rd.vpr_declared(c.audit) else f"{len(sel.included)} cells included (no VPR threshold declared)")
    return out


def _gap_cells(rd: RunData, c, t: Table, verbal: str, levels: dict[str, list[str]], thr: float, bins: int,
               boot: tuple[int, int, float]) -> tuple[list[_GapCell], dict[Any, float]]:
    """The cells of protocol ``verbal`` (paired with ``c.token``) in the comparison's scope, their rows
    added to ``t``, and each cell's VPR."""
    cells: list[_GapCell] = []
    vprs: dict[Any, float] = {}
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "variant", "evaluator"),
                         over={"protocol": (verbal, c.token)}, levels=levels):
        vr, tr = g.rows[verbal], g.rows[c.token]
        if vr.empty or tr.empty:
            t.nc(f"no records of protocol '{verbal if vr.empty else c.token}'", g.where)
            continue
        vprs[g.key] = float(vr["confidence_parsed"].astype(bool).mean())
        if (cell := _gap_cell(t, g.key, vr, tr, vprs[g.key], vprs[g.key] >= thr, bins, boot)) is not None:
            cells.append(cell)
    return cells, vprs


PHRASING_QUANTITIES = (("verbal - acc", 4), ("verbal - tok", 5), ("ECE_gap", 3))  # name, index in _GapCell.values


def _phrasings_table(name: str, models: list[str], evaluators: list[str], per: dict[str, list[_GapCell]], thr: float,
                     scope: str) -> Table:
    """000 Table 9: per model, the means of verbal - acc, verbal - tok and ECE_gap over each phrasing's own
    VPR-passing cells, the phrasings side by side under each quantity, and n per phrasing."""
    ps = list(per)
    t = Table(f"{name}_phrasings", f"Signed over-confidence under {len(ps)} elicitation phrasings{scope} ({name}, study "
              "000 Table 9)", ["model", "evaluator"] + [f"{q} ({p})" for q, _ in PHRASING_QUANTITIES for p in ps]
              + [f"n ({p})" for p in ps])
    for m in models:
        for e in evaluators:
            inc = {p: [x for x in per[p] if x.included and x.key[0] == m and x.key[3] == e] for p in ps}
            means = [float(np.mean([x.values[i] for x in inc[p]])) if inc[p] else math.nan
                     for _, i in PHRASING_QUANTITIES for p in ps]
            t.add(m, e, *means, *(len(inc[p]) for p in ps))
    t.notes.append(f"Each phrasing's means are over its own cells with VPR >= {thr:.2f} (000 App. D.3: the rule "
                   "applied independently to each run); n counts them. verbal - acc = mean verbal confidence - accuracy "
                   "and verbal - tok = mean verbal - mean token confidence on the parsed rows; ECE_gap = ECE_verbal - "
                   "ECE_token.")
    return t


def _gap_cell(t: Table, key: tuple[str, str, str, str], vr, tr, vpr: float, included: bool, bins: int,
              boot: tuple[int, int, float]) -> _GapCell | None:
    """One cell's row of the ECE_gap table: verbal on its parsed rows, token on every row of the paired
    token cell, paired by item; None when no verbal confidence parsed (the row then says so)."""
    m, d, v, e = key
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
    if not (~np.isnan(verbal)).any():
        t.nc("ECE_gap: no verbal confidence parsed (VPR = 0)", " / ".join(key))
        e_tok = float(ece(token, z, bins=bins)) if len(z) else math.nan
        t.add(m, d, v, e, len(z), vpr, included, math.nan, e_tok, *[math.nan] * 9, n_missing)
        return None
    ok = ~np.isnan(verbal)
    e_v = float(ece(verbal[ok], z[ok], bins=bins))
    e_t = float(ece(token, z, bins=bins))
    gap = ece_gap_metric(verbal, token, z, bins=bins)
    B, seed, level = boot
    # paired example bootstrap of ECE(verbal, parsed rows) - ECE(token, all rows): NaN verbal rows
    # get weight 0 on the verbal side only (000 appendix E.2)
    ci = paired_bootstrap_diff("ece", (verbal, z), (token, z), B=B, seed=seed, level=level,
                               bins=bins, missing="drop") if len(z) > 1 else None
    oc = overconfidence(verbal, z, token)
    oc_ci = _overconf_intervals(verbal[ok], z[ok], token[ok], B, seed, level)
    t.add(m, d, v, e, len(z), vpr, included, e_v, e_t, gap, ci.low if ci else math.nan,
          ci.high if ci else math.nan, oc.vs_accuracy, *oc_ci[0], oc.vs_token, *oc_ci[1], n_missing)
    means = {"model": m, "dataset": d, "variant": v, "evaluator": e, "included": bool(included),
             "accuracy": float(z[ok].mean()), "verbal": float(verbal[ok].mean()), "token": float(token[ok].mean())}
    acc = float(np.mean(z)) if len(z) else math.nan
    return _GapCell(key, vpr, bool(included), means, (acc, e_t, e_v, gap, oc.vs_accuracy, oc.vs_token))


def _by_model_table(rd: RunData, name: str, c, cells: list[_GapCell], sel, thr: float, scope: str,
                    datasets: list[str], variants: list[str]) -> Table:
    """000 Table 2's columns: per model and evaluator, the means over the VPR-passing cells."""
    per_model: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    for x in cells:
        if x.included:
            per_model.setdefault((x.key[0], x.key[3]), []).append(x.values)
    s = Table(f"{name}_by_model", f"Means over VPR-passing cells{scope} ({name})",
              ["model", "evaluator", "n_included", "n_excluded", "mean accuracy", "mean ece_token", "mean ece_verbal",
               "mean ece_gap", "mean overconf_vs_acc", "mean overconf_vs_token"])
    for m in rd.audit(c.audit).models:
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
    return s


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
