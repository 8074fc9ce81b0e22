"""Study 003 accuracy-controlled comparisons: raw vs IA / DA / CA views and ranking reversals.

For each model pair, dataset, variant, confidence protocol and evaluator (a "case"), on the items
both models answered with a confidence: raw ECE and Brier per model; IA on both-right U
both-wrong (003 section 4.1); DA with the more accurate model reweighted to the other's accuracy
(section 4.2); CA on the shared candidate pool (section 4.3): each model's own answer plus the
other model's answer, which the cross stage (auditlang/plan/crossdata.py) has each model score; read
from record extras ``supplied``. A reversal is a view whose signed difference (model 1 - model 2) has the opposite
sign of the raw one (section 5.2); patterns follow Figure 4.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import numpy as np

from auditlang.metrics.aligned import (
    candidate_aligned,
    distribution_aligned,
    instance_aligned,
    is_reversal,
    reversal_pattern,
    weighted_brier,
    weighted_ece,
)
from auditlang.metrics.registry import validate_params
from auditlang.score.cellmetrics import audit_metrics
from auditlang.report.comparisons.common import (
    CellGroup,
    Comparison,
    bootstrap_settings,
    by_item,
    cell_groups,
    ece_bins,
    known,
    model_family,
)
from auditlang.report.comparisons.reversals import Case, pooled_tables
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table
from auditlang.evaluators.string_match import normalize_answer
from auditlang.score.rundiff import DiffMetric, paired_cell_diff

VIEW_NAMES = {"instance": "IA", "distribution": "DA", "candidate": "CA"}


def _norm(pred: Any) -> str | None:

    return None if pred is None else normalize_answer(str(pred))


def _candidates(rd: RunData, df, other: str, items: list) -> tuple[np.ndarray, np.ndarray] | None:
    """This model's confidence and the candidate-level gold for every (item, candidate) of the
    shared pool U_i = {own answer, ``other``'s answer} (003 section 4.3; U_i is a set: an answer
    equal to the own one after normalisation is one candidate). The other model's answer and this
    model's confidence in it come from record extras ``supplied`` (source ``model:<other>``,
    written by the cross stage). None when no record carries them."""
    conf, corr = [], []
    seen = False
    key = f"model:{other}"
    by = by_item(df)
    for i in items:
        if i not in by.index:
            continue
        row = by.loc[i]
        own_pred = row["pred"] if isinstance(row["pred"], str) else None
        if not (math.isnan(float(row["confidence"])) or math.isnan(float(row["correct"]))):
            conf.append(float(row["confidence"]))
            corr.append(float(row["correct"]))
        x = rd.extras(int(row["_row"])) if "_row" in row.index else {}
        for cand in x.get("supplied") or []:
            if cand.get("source") != key:
                continue
            seen = True
            if own_pred is not None and _norm(cand.get("pred")) == _norm(own_pred):
                continue  # the same answer: one candidate
            if cand.get("confidence") is None or cand.get("correct") is None:
                continue
            conf.append(float(cand["confidence"]))
            corr.append(float(cand["correct"]))
    return (np.asarray(conf), np.asarray(corr)) if seen and conf else None


def _ece_column(rd: RunData, aid: str, bins: int) -> str:
    """The cells-table column of the audit's equal-width ECE with ``bins`` bins ("" when it has none)."""
    for ref in audit_metrics(rd.spec, aid):
        if ref.name == "ece" and validate_params("ece", dict(ref.params)) == validate_params(
                "ece", {"bins": bins, "binning": "equal_width"}):
            return ref.label
    return ""


def _cell_value(rd: RunData, aid: str, key: tuple[str, ...], column: str) -> float:
    """The per-cell table's value of ``column`` for (model, dataset, variant, protocol, evaluator),
    NaN when the table has no such column or cell."""
    cells = rd.cells
    if cells.empty or column not in cells.columns:
        return math.nan
    mask = cells["audit"].astype(str) == aid
    for col, val in zip(("model", "dataset", "variant", "protocol", "evaluator"), key):
        mask &= cells[col].astype(str) == val
    got = cells.loc[mask, column]
    return float(got.iat[0]) if len(got) == 1 else math.nan


def _raw_intervals(r1, r2, items: list, bins: int, B: int, seed: int, level: float,
                   where: str) -> dict[str, tuple[float, float]]:
    """(low, high) of the raw ECE and Brier difference model 1 - model 2 on ``items``: the paired
    bootstrap of :func:`auditlang.score.rundiff.paired_cell_diff`, the one ``auditc diff`` uses."""
    a, b = r2.loc[items].reset_index(), r1.loc[items].reset_index()  # its B - A = model 1 - model 2
    out = {}
    for metric, m in (("ECE", DiffMetric("ECE", "ece", (("bins", bins), ("binning", "equal_width")))),
                      ("Brier", DiffMetric("Brier", "brier"))):
        d = paired_cell_diff(where, a, b, m, B=B, seed=seed, level=level)
        out[metric] = (d.low, d.high)
    return out


def _with_row(df):
    """The records with their row index as a column (``by_item`` re-indexes by item)."""
    return df.assign(_row=df.index)


def pair_type(rd: RunData, m1: str, m2: str) -> str:
    """003's pair types from the model declarations: "mode" (one checkpoint, enable_thinking differs),
    "effort" (reasoning_effort differs), "size" (two checkpoints of one declared family), else "model"."""
    a, b = rd.spec.get(m1), rd.spec.get(m2)

    def ckpt(o) -> tuple:
        return o.ctor, getattr(o.value, "path", None) or getattr(o.value, "name", None)

    if ckpt(a) == ckpt(b):
        for fld, kind in (("enable_thinking", "mode"), ("reasoning_effort", "effort")):
            if getattr(a.value, fld, None) != getattr(b.value, fld, None):
                return kind
        return "configuration"
    fa, fb = model_family(rd, m1), model_family(rd, m2)
    return "size" if fa and fa == fb else "model"


def _retained(rd: RunData, aid: str, m1: str, m2: str, d: str, v: str, p: str, e: str) -> tuple[int, int]:
    """(|D_IA|, |D|) on 003 App. E.4's base: D is every item of the dataset in the run (failed requests
    included), D_IA the items whose correctness both models' records know and share."""
    n_d = int(rd.rows(aid, dataset=d, variant=v)["item_id"].nunique())
    z = [known(rd.rows(aid, model=m, dataset=d, variant=v, protocol=p, evaluator=e), False)
         .drop_duplicates("item_id").set_index("item_id")["correct"] for m in (m1, m2)]
    both = z[0].index.intersection(z[1].index)
    return int((z[0].loc[both] == z[1].loc[both]).sum()), n_d


def aligned(rd: RunData, name: str, c) -> Comparison:
    audits = [x for x in c.all_audits()]
    bins, label = ece_bins(rd, c.metric)
    views = [VIEW_NAMES[v] for v in c.views]
    out = Comparison(name, "aligned", c.audit, shape="aligned")
    long = Table(name, f"Raw and accuracy-controlled calibration per model pair ({name}, {label} and Brier)",
                 ["audit", "model_1", "model_2", "dataset", "variant", "protocol", "evaluator", "metric", "view",
                  "value_1", "value_2", "diff (1-2)", "diff (1-2) lo", "diff (1-2) hi", "reversal"])
    B, seed, level = bootstrap_settings(rd, c.audit)
    cases = Table(f"{name}_cases", f"Accuracy gap and ranking-reversal pattern per case ({name})",
                  ["audit", "model_1", "model_2", "pair type", "dataset", "variant", "protocol", "evaluator", "n_items",
                   "acc_1", "acc_2", "acc gap (1-2)", "|D_IA|", "|D|", "IA retention", "ECE reversals",
                   "Brier reversals"])
    patterns: dict[str, Counter] = {"ECE": Counter(), "Brier": Counter()}
    view_rev: dict[tuple[str, str], list[bool]] = {}
    pooled: list[Case] = []
    for aid in audits:
        a = rd.audit(aid)
        ece_col = _ece_column(rd, aid, bins)
        pairs = [tuple(p) for p in c.pairs] or list(itertools.combinations(a.models, 2))
        for m1, m2 in pairs:
            ptype = pair_type(rd, m1, m2)
            for g in cell_groups(rd, aid, by=("dataset", "variant", "protocol", "evaluator"), over={"model": (m1, m2)}):
                case = _case(rd, aid, (m1, m2), g, bins, ece_col, views, long, (B, seed, level))
                if case is None:
                    continue
                vals, items, acc1, acc2, shared = case
                n_ia, n_d = _retained(rd, aid, m1, m2, *g.key)
                pc = Case(aid, m1, m2, ptype, *g.key, acc1, acc2, n_ia, n_d, shared=shared)
                pats = _patterns(vals, pc, views, view_rev, patterns)
                pooled.append(pc)
                cases.add(aid, m1, m2, ptype, *g.key, items, acc1, acc2, acc1 - acc2, n_ia, n_d,
                          n_ia / n_d if n_d else math.nan, pats["ECE"], pats["Brier"])
    long.notes.append("diff (1-2) = model_1 - model_2, the pair as declared (003 Tables 10-14: delta = Model1 - Model2). "
                      "A reversal: the aligned difference has the strictly opposite sign of the raw one (study 003 "
                      "section 5.2); ties are not reversals.")
    long.notes.append(f"raw diff (1-2): interval of the paired bootstrap of `auditc diff` and contrast() over the "
                      f"shared items (B={B}, seed={seed}, level {level * 100:g} %); the aligned views (IA, DA, CA) "
                      "re-align the items and are shown without intervals")
    if len(audits) > 1:
        long.notes.append(f"cases pooled over the audits {', '.join(audits)} (audits=)")
    s = Table(f"{name}_summary", f"Ranking-reversal rates per view ({name})",
              ["metric", "view", "n_cases", "n_reversals", "reversal rate"])
    for (metric, view), revs in sorted(view_rev.items()):
        s.add(metric, view, len(revs), int(sum(revs)), float(np.mean(revs)))
    for metric, cnt in patterns.items():
        total = sum(cnt.values())
        for pat, n in sorted(cnt.items()):
            s.notes.append(f"{metric} pattern {pat}: {n} of {total} cases ({100.0 * n / total:.1f}%)")
    extra, info = pooled_tables(name, pooled, views, c, level)
    out.tables += [long, cases, s, *extra]
    out.data = {"patterns": patterns, "cases": cases.records(), "views": views, "audits": audits,
                "pooled": pooled, **info}
    out.summary += reversal_summary(patterns["ECE"], views, "ECE")
    return out


def _patterns(vals: dict, pc: Case, views: list[str], view_rev: dict, patterns: dict[str, Counter]) -> dict[str, str]:
    """One case's reversal pattern per metric (003 Figure 4), its differences set on ``pc`` and its
    reversals counted per view."""
    pats: dict[str, str] = {}
    for metric, vv in vals.items():
        raw_diff = vv["raw"][0] - vv["raw"][1]
        pc.diffs[metric] = {k: x[0] - x[1] for k, x in vv.items()}
        for k, x in vv.items():
            if k != "raw":
                view_rev.setdefault((metric, k), []).append(is_reversal(raw_diff, x[0] - x[1]))
        pat = reversal_pattern(raw_diff, {k: x for k, x in pc.diffs[metric].items() if k != "raw"})
        pats[metric] = "+".join(sorted(pat)) or "none"
        missing = [w for w in views if w not in vv]
        if missing:  # a view that could not be computed neither agrees nor reverses
            pats[metric] += f" ({'/'.join(missing)} not computed)"
        patterns[metric][pats[metric]] += 1
    return pats


def _case(rd: RunData, aid: str, pair: tuple[str, str], g: CellGroup, bins: int, ece_col: str, views: list[str],
          long: Table, boot: tuple[int, int, float]):
    """One case's raw and aligned (value_1, value_2) per metric and view, its rows added to ``long``;
    None when the two models share no item with a confidence."""
    m1, m2 = pair
    where = f"{m1} vs {m2} / {g.where}"
    r1, r2 = (by_item(known(g.rows[m], True)) for m in pair)
    items = [i for i in r1.index if i in r2.index]
    if not items:
        long.nc("the two models share no item with a confidence", where)
        return None
    c1, z1 = r1.loc[items, "confidence"].to_numpy(float), r1.loc[items, "correct"].to_numpy(float)
    c2, z2 = r2.loc[items, "confidence"].to_numpy(float), r2.loc[items, "correct"].to_numpy(float)
    vals: dict[str, dict[str, tuple[float, float]]] = {"ECE": {}, "Brier": {}}
    # raw: the per-cell table's own number where the case holds every item of the cell with a confidence (one
    # computation shown twice), else the same estimator on the shared items, said in a note with the n used
    keys = [(m, *g.key) for m in pair]
    full = (len(items) == len(r1), len(items) == len(r2))
    vals["ECE"]["raw"] = tuple(_cell_value(rd, aid, k, ece_col) if whole else math.nan for k, whole in zip(keys, full))
    vals["Brier"]["raw"] = tuple(_cell_value(rd, aid, k, "brier") if whole else math.nan for k, whole in zip(keys, full))
    fresh = {"ECE": (weighted_ece(c1, z1, bins=bins), weighted_ece(c2, z2, bins=bins)),
             "Brier": (weighted_brier(c1, z1), weighted_brier(c2, z2))}
    for metric in ("ECE", "Brier"):
        vals[metric]["raw"] = tuple(x if not math.isnan(x) else y for x, y in zip(vals[metric]["raw"], fresh[metric]))
    if not all(full):
        long.notes.append(f"{where}: raw, IA, DA and CA use the n={len(items)} items both models answered with a "
                          f"confidence ({m1}'s cell has {len(r1)}, {m2}'s {len(r2)}), so raw ECE and Brier differ "
                          "from the per-cell table there")
    _view_values(rd, pair, g, items, (c1, z1, c2, z2), bins, views, vals, long, where)
    _long_rows(long, (aid, *pair, *g.key), vals, views, _raw_intervals(r1, r2, items, bins, *boot, where))
    right, wrong = (z1 == 1) & (z2 == 1), (z1 == 0) & (z2 == 0)  # both models' confidences there (003 Fig. 6)
    shared = {"both-right": np.concatenate([c1[right], c2[right]]), "both-wrong": np.concatenate([c1[wrong], c2[wrong]])}
    return vals, len(items), float(z1.mean()), float(z2.mean()), shared


def _view_values(rd: RunData, pair: tuple[str, str], g: CellGroup, items: list, arrays: tuple, bins: int,
                 views: list[str], vals: dict, long: Table, where: str) -> None:
    """The IA, DA and CA (value_1, value_2) of one case's requested views into ``vals``; a view that
    cannot be computed is said in ``long``."""
    c1, z1, c2, z2 = arrays
    if "IA" in views:
        try:
            ia = instance_aligned(c1, z1, c2, z2, bins=bins)
            vals["ECE"]["IA"], vals["Brier"]["IA"] = (ia.ece_a, ia.ece_b), (ia.brier_a, ia.brier_b)
        except ValueError as err:
            long.nc(f"IA: {err}", where)
    if "DA" in views:
        try:
            da = distribution_aligned(c1, z1, c2, z2, bins=bins)
            vals["ECE"]["DA"], vals["Brier"]["DA"] = (da.ece_a, da.ece_b), (da.brier_a, da.brier_b)
        except ValueError as err:
            long.nc(f"DA: {err}", where)
    if "CA" in views:
        m1, m2 = pair
        k1 = _candidates(rd, _with_row(g.rows[m1]), m2, items)
        k2 = _candidates(rd, _with_row(g.rows[m2]), m1, items)
        if k1 is None or k2 is None:
            long.nc("CA: records carry no cross-model candidate scores (extras 'supplied' from the cross stage; study "
                    "003 section 4.3 needs every model to score the shared answer pool)", where)
        else:
            ca1, ca2 = candidate_aligned(*k1, bins=bins), candidate_aligned(*k2, bins=bins)
            vals["ECE"]["CA"], vals["Brier"]["CA"] = (ca1.ece, ca2.ece), (ca1.brier, ca2.brier)


def _long_rows(long: Table, head: tuple, vals: dict, views: list[str], raw_ci: dict) -> None:
    """One case's rows of the long table: per metric its raw and view values (``head``: audit, the
    pair, dataset, variant, protocol, evaluator), a view not computed said as such."""
    for metric, vv in vals.items():
        raw_diff = vv["raw"][0] - vv["raw"][1]
        for k, (x1, x2) in vv.items():
            rev: Any = "" if k == "raw" else is_reversal(raw_diff, x1 - x2)
            lo, hi = raw_ci[metric] if k == "raw" else (math.nan, math.nan)
            long.add(*head, metric, k, x1, x2, x1 - x2, lo, hi, rev)
        for w in views:
            if w not in vv:  # said in the long table too, never a silent gap
                long.add(*head, metric, w, *[math.nan] * 5, "not computed")


def reversal_summary(cnt: Counter, views: list[str], metric: str) -> list[str]:
    """Agreement with raw over the cases where every requested view was computed, and the cases
    where a view was not (never counted as agreeing), with 003's default view named (§6
    "Practical Recommendations": DA is the default reporting view, IA corroborates, CA diagnoses)."""
    total = sum(cnt.values())
    complete = {k: n for k, n in cnt.items() if "not computed" not in k}
    n_complete = sum(complete.values())
    lines = []
    if "DA" in views:
        lines.append("default view: DA (study 003 §6 recommends Distribution-Aligned as the default reporting view; "
                     "IA corroborates, CA is a diagnostic)")
    else:
        lines.append(f"default view: DA (study 003 §6) is not among the requested views ({', '.join(views) or 'none'})")
    if n_complete:
        lines.append(f"{complete.get('none', 0)} of {n_complete} cases with every requested view computed: every "
                     f"accuracy-controlled {metric} view agrees with raw")
    else:
        lines.append(f"no case has every requested view computed, so agreement with raw ({metric}) is not assessed")
    if total > n_complete:
        lines.append(f"{total - n_complete} of {total} cases miss a view that could not be computed (not counted as "
                     "agreeing): " + ", ".join(f"{k} {n}" for k, n in sorted(cnt.items()) if "not computed" in k))
    return lines
