"""Study 002 robustness, stability and sensitivity next to Brier and AUROC (section 4, Table 6).

P-RB from the (items x prompts) confidence matrix of each (model, dataset, protocol, evaluator)
across the compared variants (002 eq. 3; NaN where a prompt gave no confidence); with
``protocols=[...]`` the prompts are confidence protocols under one variant instead (002 §5: VC
perturbs its confidence-elicitation prompt), one row per (model, dataset, evaluator). A-STB / A-SST
need M sampled answers per item, each scored by the confidence method and grouped by meaning
(002 section 4.2). With ``answer=fixed`` (default) P-RB re-scores the first prompt's answer under
every prompt; the fixed-answer and per-sample confidences come from record extras ``supplied``
written by the cross stage (auditlang/plan/crossdata.py). Brier and
AUROC are computed per variant and averaged over the variants (macro over prompts).
"""

from __future__ import annotations

import itertools
import math
from functools import partial

import numpy as np
import pandas as pd

from auditlang.plan.cross import samples_key
from auditlang.metrics.calibration import brier
from auditlang.metrics.discrimination import auroc
from auditlang.metrics.robustness import answer_sensitivity, answer_stability, prompt_robustness
from auditlang.report.comparisons.common import (CellGroup, Comparison, by_item, cell_groups, known, model_family,
                                                 model_size)
from auditlang.report.comparisons import compute_one
from auditlang.report.comparisons.robustness_pool import pooled_tables
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable


def _samples(rd: RunData, df, key: str) -> tuple[list, list, int] | None:
    """Per item: the confidences of its K sampled answers and their semantic groups, from record
    extras ``supplied`` (source ``samples:<protocol>[@<grouping>]``, written by the cross stage). Samples with
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


def _stability(rd: RunData, c, first, t: Table, where: str) -> tuple[float, float, float, float]:
    """(A-STB, A-SST, share of items qualifying for A-STB, share qualifying for A-SST) of one
    protocol's scored samples under the first variant (NaN when not computable). An item
    qualifies for A-STB when its largest semantic group holds more than one answer (002 eq. 4),
    for A-SST when its answers fall into two or more groups (eqs. 5-7)."""
    vals = {"A-STB": math.nan, "A-SST": math.nan, "A-SST not max": math.nan}
    shares = {"A-STB": math.nan, "A-SST": math.nan, "A-SST not max": math.nan}
    got = _samples(rd, first, samples_key(c.samples, c.grouping)) if c.samples and not first.empty else None
    if not c.samples:
        t.nc("A-STB / A-SST: the comparison names no samples= protocol (K sampled answers per item, "
             "study 002 section 4.2)", where)
    elif got is None:
        t.nc(f"A-STB / A-SST: records carry no scored samples (extras 'supplied', source "
             f"'{samples_key(c.samples, c.grouping)}', from the cross stage)", where)
    else:
        if got[2]:
            t.nc(f"A-STB / A-SST: {got[2]} sampled answer(s) without a confidence left out", where)
        not_max = partial(answer_sensitivity, contrast="not_max")  # 002 App. A.8, Table 8
        for fn, label in ((answer_stability, "A-STB"), (answer_sensitivity, "A-SST"), (not_max, "A-SST not max")):
            try:
                res = fn(got[0], got[1])
                vals[label], shares[label] = res.value, res.coverage
            except ValueError as err:
                shares[label] = 0.0  # no item qualifies
                if label != "A-SST not max":  # the same items as A-SST: said once
                    t.nc(f"{label}: {err}", where)
    return vals["A-STB"], vals["A-SST"], shares["A-STB"], shares["A-SST"], vals["A-SST not max"]


def _brier_auroc(frames: dict, t: Table, where: str) -> tuple[float, float]:
    """Brier and AUROC of every prompt's frame (rows with known correctness and a confidence),
    each averaged over the prompts (macro, 002 Table 6); a prompt with one outcome class has no AUROC."""
    briers, aurocs = [], []
    for key, f in frames.items():
        k = known(f, True)
        if k.empty:
            continue
        cc, zz = k["confidence"].to_numpy(float), k["correct"].to_numpy(float)
        briers.append(brier(cc, zz))
        au = auroc(cc, zz)
        if math.isnan(au):
            t.nc("AUROC: only one outcome class", f"{where} / {key}")
        else:
            aurocs.append(au)
    return (float(np.mean(briers)) if briers else math.nan, float(np.mean(aurocs)) if aurocs else math.nan)


def _mean_finite(xs: list[float]) -> float:
    ok = [x for x in xs if not math.isnan(x)]
    return float(np.mean(ok)) if ok else math.nan


def _prompt_label(rd: RunData, protocols: list[str]) -> str:
    """The protocol column of an across-protocols row, e.g. ``verbalized(7 prompts)``."""
    ctors = list(dict.fromkeys(rd.protocol_ctor(p) for p in protocols))
    return f"{ctors[0] if len(ctors) == 1 else 'protocols'}({len(protocols)} prompts)"


def _across_protocols(rd: RunData, name: str, c, a) -> Comparison:
    """P-RB over CONFIDENCE prompts (002 §5, Table 6 "VC"; App. A.7 Table 7 "Conf-P"): the
    (items x protocols) matrix of one cell's own answers under one answer prompt. The answer is
    the same for every protocol of a unit (one stage-1 answer request), so this is 002's "same
    answer under different prompt formulations" without a cross stage. Brier and AUROC per
    protocol, averaged over the protocols; A-STB / A-SST per protocol over the scored samples,
    averaged over the protocols (002 does not say which VC prompt scores the samples)."""
    protocols = list(c.protocols)
    variants = list(c.variants) or list(a.variants)
    if len(variants) != 1:
        raise ValueError(f"protocols= needs one answer prompt, but the comparison spans variants {variants}")
    v = variants[0]
    label = _prompt_label(rd, protocols)
    mats: dict[tuple[str, str], list[np.ndarray]] = {}  # (model, evaluator) -> per dataset (items x prompts)
    out = Comparison(name, "robustness", c.audit, shape="robustness")
    t = Table(name, f"Robustness (P-RB) across confidence prompts, stability (A-STB) and sensitivity (A-SST) "
              f"with Brier and AUROC ({name})", list(COLUMNS))
    corr = Table(f"{name}_prompt_corr", f"Pearson correlation of the confidences under two confidence prompts, over the "
                 f"items both scored ({name}; study 002 Figs 7-9)",
                 ["model", "dataset", "evaluator", "prompt_1", "prompt_2", "n_items", "pearson r"])
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "variant", "evaluator"), over={"protocol": protocols},
                         levels={"variant": [v]}, skip_empty=True):
        m, d, _, e = g.key
        frames = {p: by_item(g.rows[p]) for p in protocols}
        frames = {p: f for p, f in frames.items() if not f.empty}
        items = list(dict.fromkeys(i for f in frames.values() for i in f.index))
        prb, prb_ex = _prb_over_protocols(g, frames, items, protocols, t, corr, mats)
        stb, sst, stb_sh, sst_sh, nm = _stability_over_protocols(rd, c, g, frames, t)
        br, au = _brier_auroc(frames, t, g.where)
        t.add(m, d, label, e, len(items), prb, prb_ex, stb, sst, stb_sh, sst_sh, br, au, nm)
    t.notes.append(f"Prompts: the confidence protocols {', '.join(protocols)} under the one answer prompt {v}; "
                   "P-RB over each item's confidences in the model's own answer, which every protocol of the cell "
                   "shares (002 section 5: only the confidence-elicitation prompt is perturbed for VC). Std is the "
                   "population standard deviation (002 eq. 3).")
    if c.samples:
        t.notes.append(f"A-STB / A-SST: the K answers of protocol '{c.samples}' under {v}, scored by each listed "
                       "protocol and averaged over the protocols (002 does not say which confidence prompt scores the "
                       "samples); semantic groups from " + (f"judge evaluator '{c.grouping}' (002 App. A.1)" if c.grouping
                                                            else "the evaluator's normalised answer (no grouping= judge given)") + ".")
    t.notes.append("Brier and AUROC: per protocol, averaged over the protocols (macro over prompts, 002 Table 6).")
    out.tables.append(t)
    avg = averages(rd, name, c, t, protocols, by_protocol=True)
    corr.notes.append("Undefined (NaN) where fewer than three items have both confidences or one is constant.")
    pooled = pooled_prompt_correlations(name, mats, protocols)
    out.tables += [avg, metric_correlations(name, avg), corr, pooled, accuracy_table(rd, name, c, t, v)]
    out.data = {"models": _model_facts(rd, t), "prompts": protocols,
                "methods": {label: c.methods[0]} if getattr(c, "methods", None) else {}}
    out.summary += share_summary(t)
    if c.samples:  # the shares of items qualifying for A-STB / A-SST: the checklist's cross-scored answers
        out.cross = [s for s in out.summary if s.startswith(("A-STB", "A-SST"))]
    return out


COLUMNS = ("model", "dataset", "protocol", "evaluator", "n_items", "P-RB", "P-RB items excluded", "A-STB", "A-SST",
           "A-STB share of items qualifying", "A-SST share of items qualifying", "Brier (mean over prompts)",
           "AUROC (mean over prompts)", "A-SST not max")
# 002 Table 6's rows: each a column of the per-cell table, or a calibration metric of the audit read
# from metrics/cells.csv and averaged over the comparison's prompts (its variants, or protocols=)
AVG_METRICS = ("P-RB", "A-STB", "A-SST", "A-SST not max", "Brier (mean over prompts)", "AUROC (mean over prompts)")


def robustness(rd: RunData, name: str, c) -> Comparison:
    out = _robustness(rd, name, c)
    if getattr(c, "pool", None):  # 002 Tables 6-8 in one layout each (report/comparisons/robustness_pool.py)
        out.tables += pooled_tables(rd, name, [out, *(compute_one(rd, cid) for cid in c.pool)])
    return out


def _robustness(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    if getattr(c, "protocols", None):
        return _across_protocols(rd, name, c, a)
    variants = list(c.variants) or list(a.variants)
    out = Comparison(name, "robustness", c.audit, shape="robustness")
    t = Table(name, f"Robustness (P-RB), stability (A-STB) and sensitivity (A-SST) with Brier and AUROC ({name})",
              list(COLUMNS))
    if len(variants) < 2:
        t.notes.append(not_computable(f"P-RB needs at least two prompts; the comparison names {variants}"))
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "protocol", "evaluator"), over={"variant": variants},
                         skip_empty=True):
        frames = {v: by_item(g.rows[v]) for v in variants}
        frames = {v: f for v, f in frames.items() if not f.empty}
        items = list(dict.fromkeys(i for f in frames.values() for i in f.index))
        prb, prb_ex = _prb_over_variants(rd, c, g, frames, items, variants, t)
        stb, sst, q1, q2, sst_nm = _stability(rd, c, g.rows[variants[0]], t, g.where)
        br, au = _brier_auroc(frames, t, g.where)
        t.add(*g.key, len(items), prb, prb_ex, stb, sst, q1, q2, br, au, sst_nm)
    if c.samples:
        t.notes.append("Share of items qualifying: A-STB averages over the items whose largest semantic group holds "
                       "more than one of the K answers (002 eq. 4), A-SST over the items with two or more groups "
                       "(eqs. 5-7); the other items do not enter the metric.")
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
    avg = averages(rd, name, c, t, variants)
    out.tables += [avg, metric_correlations(name, avg), accuracy_table(rd, name, c, t, variants[0])]
    out.data = {"models": _model_facts(rd, t),
                "methods": dict(zip(a.protocols, c.methods)) if getattr(c, "methods", None) else {}}
    out.summary += share_summary(t)
    if c.samples:  # the shares of items qualifying for A-STB / A-SST: the checklist's cross-scored answers
        out.cross = [s for s in out.summary if s.startswith(("A-STB", "A-SST"))]
    return out


def _prb(mat: np.ndarray, t: Table, where: str) -> tuple[float, object]:
    """(P-RB, items excluded) of an (items x prompts) confidence matrix; NaN, said in a note, when undefined."""
    try:
        r = prompt_robustness(mat)
        return r.value, r.n_excluded
    except ValueError as err:
        t.nc(f"P-RB: {err}", where)
        return math.nan, ""


def _prb_over_protocols(g: CellGroup, frames: dict, items: list, protocols: list[str], t: Table,
                        corr: Table, mats: dict) -> tuple[float, object]:
    """P-RB of one cell's answers across its confidence protocols, and each protocol pair's correlation;
    the (items x protocols) matrix is kept in ``mats`` under (model, evaluator) for the pooled correlations."""
    m, d, _, e = g.key
    missing = [p for p in protocols if p not in frames]
    if missing:
        t.nc(f"P-RB: no records for protocol(s) {missing}", g.where)
        return math.nan, ""
    mat = np.array([[float(frames[p]["confidence"].get(i, math.nan)) for p in protocols] for i in items])
    mats.setdefault((m, e), []).append(mat)
    for j, k in itertools.combinations(range(len(protocols)), 2):
        ok = ~np.isnan(mat[:, j]) & ~np.isnan(mat[:, k])
        corr.add(m, d, e, protocols[j], protocols[k], int(ok.sum()), _pearson(mat[ok, j], mat[ok, k]))
    return _prb(mat, t, g.where)


def _stability_over_protocols(rd: RunData, c, g: CellGroup, frames: dict, t: Table) -> tuple[float, ...]:
    """A-STB, A-SST, their shares of qualifying items and A-SST not max, each the mean over the
    protocols that score the samples (NaN where none does)."""
    vals: list[tuple[float, ...]] = []
    for p in frames if c.samples else []:
        vals.append(_stability(rd, c, g.rows[p], t, f"{g.where} / {p}"))
    if not c.samples:
        _stability(rd, c, frames[next(iter(frames))], t, g.where)  # the "no samples=" note, once
    return tuple(_mean_finite([x[k] for x in vals]) for k in range(5))


def _prb_over_variants(rd: RunData, c, g: CellGroup, frames: dict, items: list, variants: list[str],
                       t: Table) -> tuple[float, object]:
    """P-RB of one (model, dataset, protocol, evaluator) across the variants: each prompt's own answer,
    or with ``answer=fixed`` the first prompt's answer re-scored under every prompt."""
    if len(variants) < 2:
        return math.nan, ""
    if len(frames) != len(variants):
        t.nc(f"P-RB: no records for variant(s) {[v for v in variants if v not in frames]}", g.where)
        return math.nan, ""
    if getattr(c, "answer", "own") != "fixed":
        return _prb(np.array([[float(frames[v]["confidence"].get(i, math.nan)) for v in variants] for i in items]),
                    t, g.where)
    key = f"variant:{variants[0]}"
    cols = [{i: float(x) for i, x in frames[variants[0]]["confidence"].items()}]
    cols += [_fixed(rd, g.rows[v], key) for v in variants[1:]]
    if not any(cols[1:]):
        t.nc(f"P-RB: records carry no confidences of the fixed answer (extras 'supplied', source "
             f"'{key}', from the cross stage); answer=own scores each prompt's own answer", g.where)
        return math.nan, ""
    return _prb(np.array([[col.get(str(i), col.get(i, math.nan)) for col in cols] for i in items]), t, g.where)


def share_summary(t: Table) -> list[str]:
    """How many of the items enter A-STB and A-SST (002 eqs. 4-7 average over qualifying items only)."""
    out = []
    for metric in ("A-STB", "A-SST"):
        col = f"{metric} share of items qualifying"
        vals = [float(r[col]) for r in t.records() if r.get(col) is not None and not math.isnan(float(r[col]))]
        if vals:
            out.append(f"{metric}: on average {100 * float(np.mean(vals)):.1f}% of the items qualify "
                       f"(min {100 * min(vals):.1f}%, max {100 * max(vals):.1f}% over {len(vals)} rows)")
        else:
            out.append(f"{metric}: not computable: no row has scored samples, so no item qualifies")
    return out



def _cell_calibration(rd: RunData, c, t: Table, prompts: list[str], by_protocol: bool) -> dict[tuple, dict[str, float]]:
    """(model, dataset, protocol, evaluator) -> {calibration metric: mean over the prompts} from
    metrics/cells.csv: the audit's ECE-family metrics (002 Table 6's ECE and smECE rows)."""
    cells = rd.cells
    if cells is None or cells.empty:
        return {}
    cols = [col for col in cells.columns if ("ece" in col.lower()) and not col.endswith((" lo", " hi"))]
    cells = cells[cells["audit"] == c.audit]
    out: dict[tuple, dict[str, float]] = {}
    for r in t.records():
        if by_protocol:
            sel = cells[(cells.model == r["model"]) & (cells.dataset == r["dataset"]) & (cells.evaluator == r["evaluator"])
                        & cells.protocol.isin(prompts)]
        else:
            sel = cells[(cells.model == r["model"]) & (cells.dataset == r["dataset"]) & (cells.evaluator == r["evaluator"])
                        & (cells.protocol == r["protocol"]) & cells.variant.isin(prompts)]
        out[(r["model"], r["dataset"], r["protocol"], r["evaluator"])] = {
            f"{col} (mean over prompts)": float(pd.to_numeric(sel[col], errors="coerce").mean()) for col in cols}
    return out


def averages(rd: RunData, name: str, c, t: Table, prompts: list[str], by_protocol: bool = False) -> Table:
    """002 Table 6: per confidence method and metric, each model's mean over the datasets and the
    average over the models (AVG); undefined values (NaN) are left out of a mean, which counts the
    datasets / models it averages (n)."""
    recs = t.records()
    models = list(dict.fromkeys(r["model"] for r in recs))
    calib = _cell_calibration(rd, c, t, prompts, by_protocol)
    extra = list(dict.fromkeys(k for v in calib.values() for k in v))
    a = Table(f"{name}_avg", f"Per method and metric: each model's mean over the datasets and the average over the "
              f"models ({name}; study 002 Table 6)", ["protocol", "evaluator", "metric", *models, "AVG", "n_models"])
    for p in dict.fromkeys(r["protocol"] for r in recs):
        for e in dict.fromkeys(r["evaluator"] for r in recs):
            rows = [r for r in recs if r["protocol"] == p and r["evaluator"] == e]
            if not rows:
                continue
            for metric in (*AVG_METRICS, *extra):
                per_model = []
                for m in models:
                    vals = [calib.get((m, r["dataset"], p, e), {}).get(metric, math.nan) if metric in extra
                            else r.get(metric) for r in rows if r["model"] == m]
                    per_model.append(_mean_finite([float(v) for v in vals if v is not None]))
                if all(math.isnan(v) for v in per_model):
                    continue
                a.add(p, e, metric, *per_model, _mean_finite(per_model), sum(not math.isnan(v) for v in per_model))
    a.notes.append("A model's value is the mean over its datasets of the per-cell values above (NaN left out); AVG is "
                   "the equal-weight mean over the models (002 Table 6 'AVG'). 'A-SST not max' compares Y^max with "
                   "every answer outside it (002 App. A.8, Table 8); calibration metrics are the cells' values "
                   "(metrics/cells.csv) averaged over the prompts.")
    return a


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def metric_correlations(name: str, avg: Table) -> Table:
    """002 Fig 4: the Pearson correlation of every two metrics over the (method, model) values of
    ``avg`` (each model's mean over the datasets), per evaluator."""
    t = Table(f"{name}_metric_corr", f"Pearson correlation of two metrics over the (method, model) points ({name}; "
              "study 002 Fig 4)", ["evaluator", "metric_1", "metric_2", "n_points", "pearson r"])
    recs = avg.records()
    models = [col for col in avg.columns if col not in ("protocol", "evaluator", "metric", "AVG", "n_models")]
    for e in dict.fromkeys(r["evaluator"] for r in recs):
        vals: dict[str, dict[tuple[str, str], float]] = {}
        for r in recs:
            if r["evaluator"] == e:
                vals.setdefault(r["metric"], {}).update({(r["protocol"], m): float(r[m]) for m in models})
        for m1, m2 in itertools.combinations(list(vals), 2):
            keys = [k for k in vals[m1] if k in vals[m2] and not math.isnan(vals[m1][k]) and not math.isnan(vals[m2][k])]
            x = np.array([vals[m1][k] for k in keys])
            y = np.array([vals[m2][k] for k in keys])
            t.add(e, m1, m2, len(keys), _pearson(x, y))
    t.notes.append("Points: one per method (protocol) and model, its mean over the datasets; NaN with fewer than "
                   "three points or a constant metric.")
    return t


def pooled_prompt_correlations(name: str, mats: dict[tuple[str, str], list[np.ndarray]], protocols: list[str]) -> Table:
    """002 Figs 7-9: per model and evaluator, the Pearson correlation of every two confidence prompts
    over the items of all its datasets pooled (each item one point, its dataset's rows stacked)."""
    t = Table(f"{name}_prompt_corr_pooled", f"Pearson correlation of the confidences under two confidence prompts, "
              f"the items of every dataset pooled ({name}; study 002 Figs 7-9)",
              ["model", "evaluator", "prompt_1", "prompt_2", "n_items", "pearson r"])
    for (m, e), blocks in mats.items():
        mat = np.vstack(blocks)
        for j, k in itertools.combinations(range(len(protocols)), 2):
            ok = ~np.isnan(mat[:, j]) & ~np.isnan(mat[:, k])
            t.add(m, e, protocols[j], protocols[k], int(ok.sum()), _pearson(mat[ok, j], mat[ok, k]))
    t.notes.append("Each item of each dataset is one point (the datasets' items pooled, not the mean of per-dataset "
                   "r); NaN where fewer than three items have both confidences or one is constant.")
    return t


def accuracy_table(rd: RunData, name: str, c, t: Table, prompt: str) -> Table:
    """002 Fig 6: accuracy per model, dataset and evaluator under the prompt whose answer the
    comparison scores (its first listed variant), from metrics/cells.csv; with ``protocols=`` the
    mean over the protocols, which all score the same answer."""
    a = Table(f"{name}_accuracy", f"Accuracy per model and dataset under prompt {prompt} ({name}; study 002 Fig 6)",
              ["model", "dataset", "evaluator", "prompt", "accuracy"])
    cells = rd.cells
    if cells is None or cells.empty or "accuracy" not in cells.columns:
        a.notes.append(not_computable("metrics/cells.csv has no accuracy column"))
        return a
    cells = cells[(cells["audit"] == c.audit) & (cells.variant == prompt)]
    for m, d, e in dict.fromkeys((r["model"], r["dataset"], r["evaluator"]) for r in t.records()):
        sel = cells[(cells.model == m) & (cells.dataset == d) & (cells.evaluator == e)]
        a.add(m, d, e, prompt, float(pd.to_numeric(sel["accuracy"], errors="coerce").mean()))
    a.notes.append("The accuracy of the answers the comparison scores (greedy, under its first prompt); with several "
                   "protocols per cell, their mean (they score the same answer).")
    return a


def _model_facts(rd: RunData, t: Table) -> dict[str, tuple[float | None, str | None]]:
    """model -> (declared or catalogue size, family): how 002 Figs 7-9 group the models."""
    return {m: (model_size(rd, m)[0], model_family(rd, m)) for m in dict.fromkeys(r["model"] for r in t.records())}
