"""Stage-2 requests: follow-ups built from stage-1 outputs, deterministically.

The same function serves execution (which requests to run) and scoring (which results to read),
so both agree on request ids without storing a second plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from auditlang.core.requests import Request, Result
from auditlang.protocols.base import ItemCtx, generated_text, lead_space
from auditlang.protocols.registry import program_for
from auditlang.resolve.spec import Spec
from auditlang.evaluators.build import DEFAULT_EVALUATOR, evaluator_ctor, make_evaluator
from auditlang.evaluators.constrained import constrained_request
from auditlang.resolve.models import model_config
from auditlang.evaluators.judge import judge_request
from auditlang.evaluators.judge import parse_judge_reply


class Programs:
    """Per-spec caches of protocol programs and evaluator instances."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._progs: dict[str, Any] = {}
        self._evals: dict[tuple[str, str], Any] = {}
        # (eid, task, text, id(item)) -> (item, label output): an answer is labelled once per
        # evaluator, not once per protocol and consumer (stage-2 building, scoring). The item is
        # kept in the value and checked by identity, so a reused id() never serves another item.
        self._labels: dict[tuple[str, str, str, int], tuple[Any, Any]] = {}

    def label(self, eid: str, task: str, text: str, item: Any):
        """``evaluator(eid, task).label(text, item)``, memoised (evaluator labels are pure)."""
        key = (eid, task, text, id(item))
        hit = self._labels.get(key)
        if hit is not None and hit[0] is item:
            return hit[1]
        out = self.evaluator(eid, task).label(text, item)
        if len(self._labels) > 200_000:
            self._labels.clear()
        self._labels[key] = (item, out)
        return out

    def program(self, pid: str):
        if pid not in self._progs:
            self._progs[pid] = program_for(self.spec.get(pid), self.spec)
        return self._progs[pid]

    def evaluator(self, eid: str, task: str):
        key = (eid, task)
        if key not in self._evals:
            self._evals[key] = make_evaluator(self.spec, eid, task)
        return self._evals[key]


def audit_evaluators(spec: Spec, audit_id: str) -> list[str]:
    return list(spec.get(audit_id).value.evaluators) or [DEFAULT_EVALUATOR]


def primary_pred(progs: Programs, spec: Spec, audit_id: str, ctx: ItemCtx, text: str) -> Any:
    """The answer stage-2 prompts are built from: the audit's first evaluator's label."""
    eid = audit_evaluators(spec, audit_id)[0]
    out = progs.label(eid, ctx.task, text, ctx.item)
    return out.value if out.ok else None


def item_stage2(progs: Programs, spec: Spec, audit_id: str, pid: str, ctx: ItemCtx,
                r1: dict[str, Result | None]) -> dict[str, Request]:
    """All stage-2 requests of one item in one (unit, protocol): protocol follow-ups and
    evaluator follow-ups (constrained re-prompt, judge). Empty when stage 1 is incomplete or a
    stage-1 request failed: a follow-up is never built from the empty answer of a failed request
    (the item is missing for the unit's cells until a rerun retries it)."""
    if any(v is None or v.error is not None for v in r1.values()):
        return {}
    text = generated_text(r1.get("answer"))
    pred = primary_pred(progs, spec, audit_id, ctx, text)
    reqs = dict(progs.program(pid).stage2(ctx, r1, pred))
    for eid in audit_evaluators(spec, audit_id):
        ctor = evaluator_ctor(spec, eid, ctx.task)
        if ctor == "constrained" and ctx.labels:

            reqs[f"constrained:{eid}"] = constrained_request(ctx.model.id, ctx.prompt(), text, ctx.labels, seed=ctx.seed)
        elif ctor == "loglik_argmax" and ctx.labels:
            ev = progs.evaluator(eid, ctx.task)
            prompt = ctx.prompt()
            for role, req in ev.requests(ctx.model.id, prompt, ctx.item, seed=ctx.seed, auto_sep=lead_space(prompt)).items():
                reqs[f"loglik:{eid}:{role}"] = req
        elif ctor == "llm_judge":

            judge = spec.get(eid).value.judge
            jcfg = model_config(spec, judge)
            reqs[f"judge:{eid}"] = judge_request(judge, str(ctx.item.get("question")), text, str(ctx.item.get("answer")),
                                                 seed=ctx.seed, max_tokens=spec.get(eid).value.max_tokens, chat=jcfg.chat)
    return reqs


def stage2_requests(spec: Spec, plan, journal, fps: dict[str, str], only_model: str | None = None,
                    judges_only: bool = False, progs: Programs | None = None) -> list[Request]:
    """Every stage-2 request whose stage-1 inputs are committed in the journal."""
    progs = progs or Programs(spec)
    if judges_only and not _has_judges(spec, plan):
        return []  # no llm_judge evaluator: nothing to build (and no stored answer to read)
    with journal.cached_reads():  # an answer is read once for all protocols of its unit
        return _stage2_requests(spec, plan, journal, fps, only_model, judges_only, progs)


def _has_judges(spec: Spec, plan) -> bool:
    """Whether any audit of the plan's units has an ``llm_judge`` evaluator (the only source of
    judge requests in :func:`item_stage2`)."""
    audits = {unit.audit for unit in plan.units.values()}
    for aid in audits:
        for eid in audit_evaluators(spec, aid):
            if eid != DEFAULT_EVALUATOR and spec.get(eid).ctor == "llm_judge":
                return True
    return False


def _stage2_requests(spec: Spec, plan, journal, fps: dict[str, str], only_model: str | None,
                     judges_only: bool, progs: Programs) -> list[Request]:
    out: dict[str, Request] = {}
    for unit in plan.units.values():
        if only_model is not None and not judges_only and plan.runs_as(unit.model) != only_model:
            continue
        fp = fps.get(plan.runs_as(unit.model))
        if fp is None:
            continue
        for pid, per_item in unit.stage1.items():
            ids = [r.id for reqs in per_item for r in reqs.values()]
            got = journal.get_many(ids, fp)
            for ctx, reqs in zip(unit.contexts, per_item):
                r1 = {role: got.get(r.id) for role, r in reqs.items()}
                for role, req in item_stage2(progs, spec, unit.audit, pid, ctx, r1).items():
                    is_judge = role.startswith("judge:")
                    if judges_only != is_judge:
                        continue
                    out[req.id] = req
    return list(out.values())


@dataclass(slots=True)
class _Waiting:
    """One (unit, protocol, item) of :class:`Stage2Stream` whose stage-1 results are coming in."""

    audit: str
    pid: str
    ctx: ItemCtx
    roles: int  # its stage-1 roles
    got: dict[str, Result] = field(default_factory=dict)


class Stage2Stream:
    """A model's stage-2 follow-ups built item by item as its stage-1 results arrive (in any
    order), so a streaming engine runs them beside the rest of stage 1. Each (unit, protocol,
    item) is built once all its stage-1 results are in, by :func:`item_stage2`: given every
    result that :func:`stage2_requests` would read from the journal, it builds the same requests.
    Judge requests (another model's) are left to the judge phase, as ``FromJournal.stage2``
    leaves them."""

    def __init__(self, spec: Spec, plan, model: str, progs: Programs) -> None:
        self.spec, self.progs, self.model = spec, progs, model
        # stage-1 request id -> the items waiting for it, with its role there
        self._waiting: dict[str, list[tuple[_Waiting, str]]] = {}
        self._built: set[str] = set()  # follow-up ids handed out (a model declared twice builds each once)
        for unit in plan.units.values():
            if plan.runs_as(unit.model) != model:
                continue
            for pid, per_item in unit.stage1.items():
                for ctx, reqs in zip(unit.contexts, per_item):
                    item = _Waiting(unit.audit, pid, ctx, len(reqs))
                    for role, r in reqs.items():
                        self._waiting.setdefault(r.id, []).append((item, role))

    def add(self, results: list[Result]) -> list[Request]:
        """The follow-ups whose stage-1 inputs are complete with ``results`` (each once)."""
        out: list[Request] = []
        for res in results:
            for item, role in self._waiting.pop(res.request_id, ()):
                item.got[role] = res
                if len(item.got) == item.roles:
                    for r2role, req in item_stage2(self.progs, self.spec, item.audit, item.pid, item.ctx, item.got).items():
                        if req.model == self.model and not r2role.startswith("judge:") and req.id not in self._built:
                            self._built.add(req.id)
                            out.append(req)
                    item.got = {}  # built: drop the results
        return out


REQUEST_ERROR = "request_error"  # parse_rule of an answer whose evaluator follow-up failed in the engine
EVALUATOR_ROLES = ("constrained:", "loglik:", "judge:")  # role prefixes of evaluator follow-ups


def followup_failure(r2: dict[str, Result | None], eid: str) -> str | None:
    """``role: message`` of the first failed evaluator follow-up of evaluator ``eid`` in ``r2``."""
    mine = (f"constrained:{eid}", f"judge:{eid}")
    for role, res in r2.items():
        if res is not None and res.error is not None and (role in mine or role.startswith(f"loglik:{eid}:")):
            return f"{role}: {res.error}"
    return None


def label_answer(progs: Programs, spec: Spec, eid: str, ctx, text: str, r2: dict[str, Result | None]):
    """(pred, parsed, rule, correct) of an answer text under one evaluator (for one item)."""
    ctor = evaluator_ctor(spec, eid, ctx.task)
    ev = progs.evaluator(eid, ctx.task)
    failed = followup_failure(r2, eid)
    if failed is not None:  # a failed request is missing, never a wrong answer
        return None, False, REQUEST_ERROR, math.nan
    if ctor == "constrained":
        res = r2.get(f"constrained:{eid}")
        if res is None or res.choice is None:
            return None, False, "constrained_missing", 0.0
        pred = res.choice.strip()
        ok = bool(ctx.labels) and pred in ctx.labels
        corr = ev.correct(pred, ctx.item) if ok else False
        return pred, ok, "constrained", float(bool(corr))
    if ctor == "loglik_argmax":
        if not ctx.labels:
            return None, False, "loglik_needs_choices", 0.0
        prefix = f"loglik:{eid}:"
        out = ev.label_results({k[len(prefix):]: v for k, v in r2.items() if k.startswith(prefix)}, ctx.item)
        if not out.ok:
            return None, False, out.rule, 0.0
        corr = ev.correct(out.value, ctx.item)
        return out.value, True, out.rule, (math.nan if corr is None else float(bool(corr)))
    if ctor == "llm_judge":

        res = r2.get(f"judge:{eid}")
        if res is None:
            return text, bool(text), "judge_missing", math.nan
        verdict = parse_judge_reply(res)
        return text, bool(text), f"judge_{verdict.rule}", (float(bool(verdict.value)) if verdict.ok else math.nan)
    out = progs.label(eid, ctx.task, text, ctx.item)
    pred = out.value if out.ok else None
    if pred is None:
        return None, False, out.rule, 0.0  # unparsed answers are scored wrong (study 000 A.3)
    corr = ev.correct(pred, ctx.item)
    return pred, True, out.rule, (math.nan if corr is None else float(bool(corr)))
