"""Stage-2 requests: follow-ups built from stage-1 outputs, deterministically.

The same function serves execution (which requests to run) and scoring (which results to read),
so both agree on request ids without storing a second plan.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from auditlang.plan.requests import Request, Result
from auditlang.protocols.base import ItemCtx, generated_text, program_for
from auditlang.resolve.spec import Spec
from auditlang.run.evaluators import DEFAULT_EVALUATOR, evaluator_ctor, make_evaluator


class Programs:
    """Per-spec caches of protocol programs and evaluator instances."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._progs: dict[str, Any] = {}
        self._evals: dict[tuple[str, str], Any] = {}

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
    out = progs.evaluator(eid, ctx.task).label(text, ctx.item)
    return out.value if out.ok else None


def item_stage2(progs: Programs, spec: Spec, audit_id: str, pid: str, ctx: ItemCtx,
                r1: dict[str, Result | None]) -> dict[str, Request]:
    """All stage-2 requests of one item in one (unit, protocol): protocol follow-ups and
    evaluator follow-ups (constrained re-prompt, judge). Empty when stage 1 is incomplete."""
    if any(v is None for v in r1.values()):
        return {}
    text = generated_text(r1.get("answer"))
    pred = primary_pred(progs, spec, audit_id, ctx, text)
    reqs = dict(progs.program(pid).stage2(ctx, r1, pred))
    for eid in audit_evaluators(spec, audit_id):
        ctor = evaluator_ctor(spec, eid, ctx.task)
        if ctor == "constrained" and ctx.labels:
            from auditlang.score.constrained import constrained_request

            reqs[f"constrained:{eid}"] = constrained_request(ctx.model.id, ctx.prompt(), text, ctx.labels, seed=ctx.seed)
        elif ctor == "loglik_argmax" and ctx.labels:
            ev = progs.evaluator(eid, ctx.task)
            for role, req in ev.requests(ctx.model.id, ctx.prompt(), ctx.item, seed=ctx.seed).items():
                reqs[f"loglik:{eid}:{role}"] = req
        elif ctor == "llm_judge":
            from auditlang.run.runner import model_config
            from auditlang.score.judge import judge_request

            judge = spec.get(eid).value.judge
            jcfg = model_config(spec, judge)
            reqs[f"judge:{eid}"] = judge_request(judge, str(ctx.item.get("question")), text, str(ctx.item.get("answer")),
                                                 seed=ctx.seed, max_tokens=spec.get(eid).value.max_tokens, chat=jcfg.chat)
    return reqs


def stage2_requests(spec: Spec, plan, journal, fps: dict[str, str], only_model: str | None = None,
                    judges_only: bool = False, progs: Programs | None = None) -> list[Request]:
    """Every stage-2 request whose stage-1 inputs are committed in the journal."""
    progs = progs or Programs(spec)
    out: dict[str, Request] = {}
    for unit in plan.units.values():
        if only_model is not None and not judges_only and unit.model != only_model:
            continue
        fp = fps.get(unit.model)
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
