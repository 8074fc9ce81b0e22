"""Who scored whose answer: the comparisons of an audit that use the cross stage, stated from the
spec (auditlang/plan/cross.py derives the same sources) and counted from the records (extras
``supplied``, written by auditlang/score/stage.py; docs/outputs.md).

* ``aligned(..., views=[..., candidate])`` (003 §4.3): each model of a pair scores the other
  model's answer to the same item; source ``model:<other>``.
* ``robustness(..., answer=fixed)`` (002 App. A.3): the answer generated under the first listed
  variant, re-scored under every other listed variant; source ``variant:<first>``.
* ``robustness(..., samples=P, grouping=E)`` (002 §4.2, App. A.1/A.3): K answers sampled by
  self_consistency protocol P, scored by every confidence protocol and grouped by meaning, by
  judge E or by the evaluator's normalised answer (``group_rule`` per sample: ``judge``,
  ``evaluator``, ``evaluator_after_judge_failure``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from auditlang.evaluators.build import groups_samples
from auditlang.plan.cross import samples_key
from auditlang.report import describe as D
from auditlang.report.decoding import decoding_flags, decoding_of
from auditlang.report.rundata import RunData
from auditlang.plan.stage2 import Programs

GROUP_RULES = {"judge": "by the judge", "evaluator": "by the evaluator (no judge reply)",
               "evaluator_after_judge_failure": "by the evaluator after a judge reply that did not parse"}


@dataclass
class CrossUse:
    """One comparison's cross-stage inputs: checklist lines, flags and a one-line disclosure note."""

    compare: str
    lines: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    note: str = ""


def supplied_counts(rd: RunData, aid: str, prefix: str) -> tuple[int, int, Counter]:
    """(scored candidates, those without a confidence, group_rule counts over distinct samples) of
    record extras ``supplied`` whose source starts with ``prefix``."""
    n = no_conf = 0
    rules: Counter = Counter()
    seen: set[tuple] = set()
    df = rd.rows(aid)
    if df.empty or "extras" not in df.columns:
        return 0, 0, rules
    cols = ("model", "dataset", "variant", "evaluator", "item_id")
    for i, *unit in df[list(cols)].itertuples():
        for x in rd.extras(i).get("supplied") or []:
            src = str(x.get("source", ""))
            if not src.startswith(prefix):
                continue
            n += 1
            no_conf += x.get("confidence") is None
            if "group_rule" in x:  # the grouping is per (unit, item, sample), whatever the protocol
                key = (*unit, src, x.get("index"))
                if key not in seen:
                    seen.add(key)
                    rules[str(x["group_rule"])] += 1
    return n, no_conf, rules


def _count_line(rd: RunData, aid: str, prefix: str, what: str) -> str:
    if rd.records.empty:
        return f"records: not computable (no records) for {what}"
    n, no_conf, _ = supplied_counts(rd, aid, prefix)
    if not n:
        return f"records: not computable: no record carries extras 'supplied' with source '{prefix}...' ({what})"
    return f"records: {n} scored {what} (extras 'supplied', source {prefix}...), {no_conf} without a confidence"


def _conditioned(rd: RunData, aid: str) -> list[str]:

    progs = Programs(rd.spec)
    out = []
    for pid in rd.audit(aid).protocols:
        try:
            if progs.program(pid).answer_conditioned():
                out.append(pid)
        except (ValueError, KeyError, TypeError):
            continue
    return out


def cross_uses(rd: RunData, aid: str) -> list[CrossUse]:
    a = rd.audit(aid)
    out: list[CrossUse] = []
    scorers = None
    for cid, o in rd.spec.of_kind("compare").items():
        c = o.value
        if aid not in c.all_audits():
            continue
        if c.CROSS_STAGE == "candidate" and "candidate" in c.views:  # the comparison declares its cross stage
            if scorers is None:
                scorers = _conditioned(rd, aid)
            pairs = [tuple(p) for p in c.pairs] or list(itertools.combinations(a.models, 2))
            u = CrossUse(cid)
            u.lines.append(f"comparison {cid} (aligned, Candidate-Aligned view, 003 §4.3): in each pair "
                           + ", ".join(f"({m1}, {m2})" for m1, m2 in pairs) + " each model scores the other model's "
                           "answer to the same item (same dataset and variant) with the protocols whose confidence "
                           f"reads the answer: {', '.join(scorers) or 'none'}; the other protocols record no confidence")
            u.lines.append(_count_line(rd, aid, "model:", "answers of the other model"))
            u.note = (f"{cid}: CA pools each model's own answer with its pair model's answer, each scored by the model "
                      "itself (cross stage).")
            out.append(u)
        elif c.CROSS_STAGE == "prompts":
            out.append(_robustness(rd, aid, cid, c))
    return out


def _robustness(rd: RunData, aid: str, cid: str, c) -> CrossUse:
    a = rd.audit(aid)
    variants = list(c.variants) or list(a.variants)
    u = CrossUse(cid)
    notes = []
    if getattr(c, "protocols", None):
        u.lines.append(f"comparison {cid} (robustness, P-RB across confidence protocols {', '.join(c.protocols)}): "
                       f"each model's own answer under {variants[0]}, the same answer under every protocol "
                       "(no cross stage)")
        notes.append(f"P-RB over protocols {', '.join(c.protocols)} on the own answer under {variants[0]}")
    elif len(variants) < 2:
        u.lines.append(f"comparison {cid} (robustness): one prompt ({', '.join(variants)}); P-RB is not computed")
    elif c.answer == "fixed":
        u.lines.append(f"comparison {cid} (robustness, P-RB, 002 App. A.3): the answer each model generated under "
                       f"{variants[0]} is re-scored by the same model under {', '.join(variants[1:])} "
                       f"(fixed answer, source variant:{variants[0]})")
        u.lines.append(_count_line(rd, aid, f"variant:{variants[0]}", f"fixed answers from {variants[0]}"))
        notes.append(f"P-RB scores the answer generated under {variants[0]} under every prompt")
    else:
        u.lines.append(f"comparison {cid} (robustness, P-RB, answer=own): each prompt scores its own answer "
                       "(no cross stage)")
        notes.append("P-RB scores each prompt's own answer")
    if "answer" not in D.explicit(rd.spec.get(cid)) and not getattr(c, "protocols", None) and len(variants) >= 2:
        u.flags.append(D.unspecified(rd.spec.get(cid), "answer", "which answer P-RB scores"))
    if c.samples:
        so = rd.spec.get(c.samples)
        dec = decoding_of(so)
        seed = so.value.seed if getattr(so.value, "seed", None) is not None else "the model seed"
        u.lines.append(f"comparison {cid} (A-STB / A-SST, 002 §4.2): K={so.value.k} answers sampled by "
                       f"{c.samples} under {variants[0]} ({dec.text() if dec else 'decoding unknown'}, seed {seed}), "
                       "each scored by every confidence protocol of the audit (source " + samples_key(c.samples, c.grouping) + ")")
        u.flags += decoding_flags(so, "sampled answers'")
        if c.grouping:
            ctor = rd.spec.get(c.grouping).ctor
            how = (f"judge evaluator {c.grouping} ({ctor}: the 002 App. A.1 grouping prompt, one request per item), "
                   "falling back to the evaluator's normalised answer when its reply does not parse into a partition"
                   if groups_samples(rd.spec, c.grouping) else f"evaluator {c.grouping} ({ctor}) is not a judge: the cell evaluator's "
                   "normalised answer")
        else:
            how = "the cell evaluator's normalised answer (no grouping= judge)"
            u.flags.append(f"{D.UNSPECIFIED}: compare '{cid}' does not set grouping; sampled answers are grouped by the "
                           "cell evaluator's normalised answer")
        u.lines.append(f"comparison {cid}: samples grouped by meaning with {how}")
        n, no_conf, rules = supplied_counts(rd, aid, samples_key(c.samples, c.grouping)) if not rd.records.empty else (0, 0, Counter())
        total = sum(rules.values())
        if not n:
            u.lines.append(f"records: not computable: no record carries scored samples (extras 'supplied', source "
                           f"samples:{c.samples})")
            share = ""
        else:
            parts = [f"{rules[r]} of {total} ({100 * rules[r] / total:.1f}%) {GROUP_RULES.get(r, r)}"
                     for r in ("judge", "evaluator_after_judge_failure", "evaluator") if rules.get(r)]
            parts += [f"{k} {v}" for k, v in rules.items() if k not in GROUP_RULES]
            u.lines.append(f"records: {n} scored samples, {no_conf} without a confidence; grouping of the "
                           f"{total} distinct samples: " + ("; ".join(parts) or "no group_rule recorded"))
            judged = rules.get("judge", 0)
            share = f", {judged} of {total} samples grouped by the judge" if c.grouping and total else ""
            if c.grouping and rules.get("evaluator_after_judge_failure"):
                u.flags.append(f"{D.WARNING}: comparison '{cid}': {rules['evaluator_after_judge_failure']} of {total} "
                               "sampled answers were grouped by the evaluator because the judge's grouping reply did "
                               "not parse")
        notes.append(f"A-STB/A-SST over K={so.value.k} samples of {c.samples} under {variants[0]} "
                     f"({dec.text() if dec else ''}), grouped by {c.grouping or 'the evaluator'}{share}")
    u.note = f"{cid}: " + "; ".join(notes) + "." if notes else ""
    return u


__all__ = ["CrossUse", "cross_uses", "supplied_counts"]
