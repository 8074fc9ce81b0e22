"""Study 002's case studies (Tables 2, 3, 9, 10): one item's confidences, per CE method, from the
records of robustness comparisons -- no model is called.

``by=prompts`` (Table 9 ``NAME``; Table 2 ``NAME_summary``): each method's confidence in the item's
answer under each perturbed prompt t_1 .. t_M (the answer prompts of an answer-prompt robustness
comparison, re-scored as it scores them, or the confidence prompts of a ``protocols=`` one, VC) and
the item's P-RB (1 - population Std over its prompts, 002 eq. 3); the summary gives max, min, mean
and P-RB per method with the cases side by side. ``by=samples`` (Table 10 ``NAME``; Table 3
``NAME_summary``): each method's confidence in each of the K sampled answers y_1 .. y_K with the
item's A-STB and A-SST (002 eqs. 4-7, its semantic groups); the summary has one column per distinct
sampled answer (the mean confidence of its samples), marked [Y^max] / [Y^min].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from auditlang.metrics.robustness import answer_sensitivity, answer_stability, extreme_groups, prompt_robustness
from auditlang.plan.cross import samples_key
from auditlang.report.comparisons.common import Comparison
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table


@dataclass
class Row:
    """One method's values for one case: per prompt (or sample) confidences, in order."""

    method: str
    source: str
    values: list[float]
    groups: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)


@dataclass
class Case:
    model: str
    dataset: str
    rule: str  # the declared item (an id or "first")
    item: str = ""
    question: str = ""
    answer: str = ""
    correct: float = math.nan
    gold: str = ""
    rows: list[Row] = field(default_factory=list)


def _evaluator(rd: RunData, c) -> str:
    if c.evaluator:
        return c.evaluator
    return rd.evaluators(rd.spec.get(c.sources[0]).value.audit)[0]


def _first_item(rd: RunData, src, model: str, dataset: str, ev: str) -> str | None:
    a = rd.audit(src.audit)
    v = (list(src.variants) or list(a.variants))[0]
    df = rd.rows(src.audit, model=model, dataset=dataset, variant=v, evaluator=ev)
    return None if df.empty else str(df.sort_values("item_index")["item_id"].iloc[0])


def _record(rd: RunData, aid: str, item: str, **sel):
    """(row index, record) of ``item`` in one cell, or None."""
    df = rd.rows(aid, **sel)
    df = df[df["item_id"] == item]
    return None if df.empty else (df.index[0], df.iloc[0])


def _conf(rec) -> float:
    return math.nan if rec is None else float(rec[1]["confidence"])


def _supplied(rd: RunData, rec, key: str) -> list[dict]:
    if rec is None:
        return []
    got = [x for x in rd.extras(rec[0]).get("supplied") or [] if x.get("source") == key]
    return sorted(got, key=lambda x: int(x.get("index", 0)))


def _prompt_rows(rd: RunData, src, cid: str, m: str, d: str, ev: str, item: str) -> list[Row]:
    """The methods of one robustness comparison: each one's confidence under every prompt."""
    a = rd.audit(src.audit)
    variants = list(src.variants) or list(a.variants)
    if src.protocols:  # the confidence prompts of one answer prompt (002 §5: VC)
        vals = [_conf(_record(rd, src.audit, item, model=m, dataset=d, variant=variants[0], protocol=p, evaluator=ev))
                for p in src.protocols]
        return [Row(src.methods[0] if src.methods else "protocols", cid, vals)]
    out = []
    for k, p in enumerate(a.protocols):
        recs = [_record(rd, src.audit, item, model=m, dataset=d, variant=v, protocol=p, evaluator=ev) for v in variants]
        if src.answer == "fixed":  # the first prompt's answer re-scored under every prompt (cross stage)
            key = f"variant:{variants[0]}"
            vals = [_conf(recs[0])] + [_fixed_conf(rd, r, key) for r in recs[1:]]
        else:
            vals = [_conf(r) for r in recs]
        out.append(Row(src.methods[k] if src.methods else p, cid, vals))
    return out


def _fixed_conf(rd: RunData, rec, key: str) -> float:
    got = _supplied(rd, rec, key)
    return math.nan if not got or got[0].get("confidence") is None else float(got[0]["confidence"])


def _sample_rows(rd: RunData, src, cid: str, m: str, d: str, ev: str, item: str) -> list[Row]:
    """The methods of one robustness comparison: each one's confidence in every sampled answer (a
    ``protocols=`` comparison's first protocol scores them)."""
    if not src.samples:
        return []
    a = rd.audit(src.audit)
    v = (list(src.variants) or list(a.variants))[0]
    key = samples_key(src.samples, src.grouping)
    pairs = [(src.methods[0] if src.methods else src.protocols[0], src.protocols[0])] if src.protocols else \
        [(src.methods[k] if src.methods else p, p) for k, p in enumerate(a.protocols)]
    out = []
    for method, p in pairs:
        got = _supplied(rd, _record(rd, src.audit, item, model=m, dataset=d, variant=v, protocol=p, evaluator=ev), key)
        if got:
            out.append(Row(method, cid, [math.nan if x.get("confidence") is None else float(x["confidence"]) for x in got],
                           [str(x.get("group")) for x in got], ["" if x.get("pred") is None else str(x["pred"]) for x in got]))
    return out


def _question(rd: RunData, dataset: str, item: str) -> str:
    ds = getattr(rd.plan, "sources", {}).get(dataset)
    for it in ds.items if ds is not None else []:
        if str(it.get("id")) == item:
            return str(it.get("question") or "")
    return ""


def _case(rd: RunData, c, spec: list[str], ev: str) -> Case:
    m, d, rule = spec
    srcs = [(cid, rd.spec.get(cid).value) for cid in c.sources]
    srcs = [(cid, s) for cid, s in srcs if m in rd.audit(s.audit).models and d in rd.audit(s.audit).datasets]
    case = Case(m, d, rule)
    if not srcs:
        raise ValueError(f"case [{m}, {d}, {rule}]: no source comparison's audit runs model {m} on dataset {d}")
    known = sorted({str(i) for _, s in srcs for i in rd.rows(s.audit, model=m, dataset=d)["item_id"]})
    case.item = (_first_item(rd, srcs[0][1], m, d, ev) or "") if rule == "first" else rule
    if case.item not in known:
        shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
        raise ValueError(f"case [{m}, {d}, {rule}]: item '{rule}' is not among the {len(known)} items of {m} / {d} in "
                         f"the records (hint: name one of {shown or 'none'}, or write \"first\")")
    cid0, s0 = srcs[0]
    a0 = rd.audit(s0.audit)
    v0 = (list(s0.variants) or list(a0.variants))[0]
    rec = _record(rd, s0.audit, case.item, model=m, dataset=d, variant=v0, evaluator=ev)
    if rec is not None:
        case.answer = "" if rec[1]["pred"] is None else str(rec[1]["pred"])
        case.correct, case.gold = float(rec[1]["correct"]), str(rec[1]["gold"] or "")
    case.question = _question(rd, d, case.item)
    build = _prompt_rows if c.by == "prompts" else _sample_rows
    rows: dict[str, Row] = {}
    for cid, s in srcs:  # the first source that has a method gives its row
        for r in build(rd, s, cid, m, d, ev, case.item):
            rows.setdefault(r.method, r)
    order = list(c.methods) or list(rows)
    case.rows = [rows[x] for x in order if x in rows]
    return case


def _fin(vals: list[float]) -> np.ndarray:
    arr = np.asarray(vals, dtype=float)
    return arr[~np.isnan(arr)]


def _prb(vals: list[float]) -> float:
    ok = _fin(vals)
    return math.nan if ok.size < 2 else prompt_robustness(ok[None, :]).value


def _stb_sst(r: Row) -> tuple[float, float]:
    keep = [k for k, x in enumerate(r.values) if not math.isnan(x)]
    conf, groups = [[r.values[k] for k in keep]], [[r.groups[k] for k in keep]]
    out = []
    for fn in (answer_stability, answer_sensitivity):
        try:
            out.append(fn(conf, groups).value)
        except ValueError:  # the item does not qualify (002 eqs. 4-7)
            out.append(math.nan)
    return out[0], out[1]


def _corr(case: Case) -> int | None:
    """Corr. as 002 prints it: 1 or 0 (None: unknown)."""
    return None if math.isnan(case.correct) else int(case.correct)


EMPTY = "(empty answer)"


def _shown(text: str) -> str:
    """An answer as a table cell or column name prints it: an empty one says so, not a blank."""
    return text if text.strip() else EMPTY


def _header(k: int, case: Case, by: str) -> str:
    corr = "-" if math.isnan(case.correct) else f"{case.correct:.0f}"
    item = f"item '{case.item}'" + (" (item=first: the first item of the dataset's sample in the records)"
                                    if case.rule == "first" else "")
    head = f"Case {k}: model {case.model}, dataset {case.dataset}, {item}: {case.question or '(question text not in the plan)'}"
    return head + (f" y: {_shown(case.answer)}. Corr.: {corr}" if by == "prompts" else f" y*: {case.gold}")


def _prompts_tables(name: str, cases: list[Case]) -> tuple[Table, Table]:
    """002 Table 9 (a row per case and method, t_1 .. t_M and P-RB) and Table 2 (max, min, mean and
    P-RB per method, the cases side by side)."""
    width = max((len(r.values) for cs in cases for r in cs.rows), default=0)
    t = Table(name, f"Case study of prompt robustness: each method's confidence under each of the {width} perturbed "
              f"prompts for one question and response ({name}; study 002 Table 9)",
              ["model", "dataset", "item", "question", "y", "Corr.", "CE", *[f"t_{k + 1}" for k in range(width)], "P-RB"])
    labels = [f"{cs.model} / {cs.dataset}" for cs in cases]
    s = Table(f"{name}_summary", f"Case study of prompt robustness: confidence statistics of each method over the "
              f"perturbed prompts ({name}; study 002 Table 2)",
              ["CE", *[f"{lab} {x}" for lab in labels for x in ("max", "min", "mean", "P-RB")]])
    per: dict[str, list] = {}
    for k, cs in enumerate(cases):
        for r in cs.rows:
            vals = r.values + [math.nan] * (width - len(r.values))
            t.add(cs.model, cs.dataset, cs.item, cs.question, _shown(cs.answer), _corr(cs), r.method, *vals,
                  _prb(r.values))
            ok = _fin(r.values)
            stats = [float(ok.max()), float(ok.min()), float(ok.mean())] if ok.size else [math.nan] * 3
            per.setdefault(r.method, [math.nan] * (4 * len(cases)))[4 * k: 4 * k + 4] = [*stats, _prb(r.values)]
    for method, vals in per.items():
        s.add(method, *vals)
    return _finish(t, s, "t_k: the k-th prompt of the row's source comparison (its variants, the answer-elicitation prompts; "
                   "for a protocols= comparison such as VC its confidence-elicitation prompts); a dash where a method "
                   "has fewer prompts or no confidence. P-RB: 1 - the population Std of the item's confidences over "
                   "its prompts (002 eq. 3, one item).",
                   "max, min, mean over the prompts whose confidence is known; P-RB as in Table 9.")


def _samples_tables(name: str, cases: list[Case]) -> tuple[Table, Table]:
    """002 Table 10 (the K sampled answers, each method's confidence in each, A-STB and A-SST) and
    Table 3 (one column per distinct answer, the cases side by side)."""
    width = max((len(r.values) for cs in cases for r in cs.rows), default=0)
    t = Table(name, f"Case study of answer stability and sensitivity: each method's confidence in the {width} sampled "
              f"answers to one question under one prompt ({name}; study 002 Table 10)",
              ["model", "dataset", "item", "question", "y*", "CE", *[f"y_{k + 1}" for k in range(width)], "A-STB",
               "A-SST"])
    cols, rows = ["CE"], {}
    for cs in cases:
        lab = f"{cs.model} / {cs.dataset}"
        first = cs.rows[0] if cs.rows else Row("", "", [])
        pad = [None] * (width - len(first.answers))
        t.add(cs.model, cs.dataset, cs.item, cs.question, cs.gold, "answer", *map(_shown, first.answers), *pad, None,
              None)
        texts = list(dict.fromkeys(first.answers))
        ymax, ymin = extreme_groups(first.groups) if first.groups else ([], None)
        mark = {first.answers[i]: " [Y^max]" for i in ymax}
        mark.update({first.answers[i]: " [Y^min]" for i in ymin or [] if first.answers[i] not in mark})
        names = [f"{lab}: {_shown(x)}{mark.get(x, '')}" for x in texts]
        cols += [*names, f"{lab} A-STB", f"{lab} A-SST"]
        for r in cs.rows:
            stb, sst = _stb_sst(r)
            t.add(cs.model, cs.dataset, cs.item, cs.question, cs.gold, r.method, *r.values,
                  *[math.nan] * (width - len(r.values)), stb, sst)
            by_text = {x: _fin([v for v, a in zip(r.values, r.answers) if a == x]) for x in texts}
            rows.setdefault(r.method, {}).update(
                {n: (float(by_text[x].mean()) if by_text[x].size else math.nan) for n, x in zip(names, texts)})
            rows[r.method].update({f"{lab} A-STB": stb, f"{lab} A-SST": sst})
    s = Table(f"{name}_summary", f"Case study of answer stability and sensitivity: each method's confidence per distinct "
              f"sampled answer ({name}; study 002 Table 3)", cols)
    for method, vals in rows.items():
        s.add(method, *[vals.get(col, math.nan) for col in cols[1:]])
    return _finish(t, s, "Row 'answer': the sampled answers as the evaluator reads them; y_k: each method's confidence in the "
                   "k-th; A-STB = 1 - Std over the answers of Y^max (002 eq. 4), A-SST = |Delta(Y^max, Y^min) - "
                   "Delta(Y^max, Y^max)| (eqs. 5-7), over the item's semantic groups; a dash where the item does not "
                   "qualify (Y^max holds one answer; one group only) or a sample has no confidence; "
                   f"{EMPTY}: a sample whose evaluated text is empty.",
                   answers_note("column"))


def answers_note(unit: str) -> str:
    """Table 3's note; ``unit`` is how its form sets the distinct answers: "column" (Markdown, CSV,
    HTML, as 002 prints it) or "row" (the transposed LaTeX form)."""
    return (f"One {unit} per distinct sampled answer text, in order of first appearance, holding the mean "
            "confidence of its samples; [Y^max] marks the answers of the largest semantic group (002's italic), "
            "[Y^min] those of the smallest other group (002's underline); A-STB and A-SST as in Table 10.")


def _finish(t: Table, s: Table, t_note: str, s_note: str) -> tuple[Table, Table]:
    """The per-case table and its summary as both kinds print them: two digits, one note each."""
    for tab, note in ((t, t_note), (s, s_note)):
        tab.digits = 2
        tab.notes.append(note)
    return t, s


def case_study(rd: RunData, name: str, c) -> Comparison:
    ev = _evaluator(rd, c)
    cases = [_case(rd, c, list(spec), ev) for spec in c.cases]
    out = Comparison(name, "case_study", c.audit, shape="case_study")
    t, s = (_prompts_tables if c.by == "prompts" else _samples_tables)(name, cases)
    for k, cs in enumerate(cases, 1):
        t.notes.insert(k - 1, _header(k, cs, c.by))
        srcs = ", ".join(dict.fromkeys(f"{r.method} from {r.source}" for r in cs.rows))
        t.notes.append(f"Case {k} rows: {srcs or 'none (no source comparison has records for it)'}; evaluator {ev}.")
    s.notes = [n for n in t.notes if n.startswith("Case ")] + s.notes
    out.tables += [t, s]
    out.summary.append(f"case study by {c.by}: {len(cases)} case(s) ({', '.join(f'{x.model} / {x.dataset} / {x.item}' for x in cases)})")
    return out
