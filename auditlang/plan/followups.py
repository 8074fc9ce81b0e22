"""Counting follow-up (stage-2) requests at plan time as the run will execute them.

Follow-ups are built at run time from the model's answers, so the plan counts them per item.
Two protocols whose follow-up is the same request (study 001's T1 and T2 readouts score the same
answer tokens with one ``continuation_logprobs`` call; two audits over the same model, dataset and
variant, reading the answer with the same first evaluator, ask the same verbal follow-up) run it once, and a follow-up equal to a stage-1 request
runs at stage 1: :class:`FollowupCounter` builds each protocol's follow-ups for one item with a
placeholder answer (its gold answer) and counts a role only when its request is new for that
(model, dataset, variant, split). It also records each follow-up's own generation budget, for the
plan's "generated <=" bound.
"""

from __future__ import annotations

from typing import Any

from auditlang.core.requests import Request
from auditlang.protocols.base import ItemCtx, supplied_result


def _gen_budget(r: Request) -> int:
    """Tokens a request may generate: ``max_tokens * n`` for ``generate``, one for a choice, else 0."""
    if r.kind == "generate":
        d = dict(r.params)
        return int(d.get("max_tokens", 0) or 0) * int(d.get("n", 1) or 1)
    return 1 if r.kind in ("choice_logprobs", "constrained_choice") else 0


def placeholder_followups(prog: Any, ctx: ItemCtx) -> dict[str, Request] | None:
    """``prog``'s stage-2 requests of ``ctx`` had the model answered the gold answer (``"A"`` where
    the item has none); None when the program cannot build them from a stand-in."""
    text = ctx.gold_answer() or "A"
    results = {"answer": supplied_result(text)}
    try:
        for role in prog.stage1_roles():
            results.setdefault(role, supplied_result(text))
        return dict(prog.stage2(ctx, results, text))
    except Exception:  # noqa: BLE001 - a program that needs real stage-1 results: counted per protocol
        return None


class FollowupCounter:
    """Per plan: which follow-ups are new, and each counted follow-up's generation budget."""

    def __init__(self) -> None:
        # (model, dataset, variant, split, first evaluator) -> follow-up ids counted
        self._seen: dict[tuple, set[str]] = {}
        self._evaluators: set[tuple] = set()
        # (model, source, role, kind) of plan.deferred -> tokens one such request may generate
        self.gen: dict[tuple[str, str, str, str], int] = {}

    def protocol_roles(self, key: tuple, pid: str, prog: Any, ctxs: list[ItemCtx], roles2: dict[str, str],
                       stage1: Any) -> dict[str, str]:
        """The roles of ``roles2`` to count for protocol ``pid`` on unit ``key``: all of them when
        no context or placeholder is available, else those whose placeholder request neither
        another protocol of the unit counted nor is a stage-1 request (``stage1``: its ids)."""
        if not ctxs or not roles2:
            return roles2
        built = placeholder_followups(prog, ctxs[0])
        if built is None:
            return roles2
        seen = self._seen.setdefault(key, set())
        out = {}
        for role, kind in roles2.items():
            r = built.get(role)
            if r is not None:
                if r.id in seen or r.id in stage1:
                    continue
                seen.add(r.id)
                self.gen[(key[0], pid, role, kind)] = max(self.gen.get((key[0], pid, role, kind), 0), _gen_budget(r))
            out[role] = kind
        return out

    def duplicated_roles(self, prog: Any, target: ItemCtx, source: ItemCtx | None) -> set[str]:
        """Roles whose cross-stage request (``target`` scoring an answer of ``source``, the same
        model and item under another variant) is the source's own follow-up: a follow-up that does
        not read the variant's prompt (study 002's P(True) of the fixed a1 answer under a3 is a1's
        own P(True)). Built for the placeholder answer on both sides."""
        if source is None:
            return set()
        own = placeholder_followups(prog, source)
        if not own:
            return set()
        text = target.gold_answer() or "A"
        try:
            cand = prog.candidate_requests(target, {}, text, text)
        except Exception:  # noqa: BLE001 - counted as before
            return set()
        return {role for role, r in cand.items() if role in own and own[role].id == r.id}

    def note_candidates(self, model: str, source: str, prog: Any, target: ItemCtx, supplied: bool = False) -> None:
        """Record the generation budget of a cross-stage follow-up (``prog`` scoring another
        unit's answer on ``target``; ``supplied``: a ``wrong_from`` supplied answer), built for
        the placeholder answer."""
        text = target.gold_answer() or "A"
        try:
            cand = prog.supplied_requests(target, text) if supplied else prog.candidate_requests(target, {}, text, text)
        except Exception:  # noqa: BLE001 - the model's largest budget stands in
            return
        for role, r in cand.items():
            k = (model, source, role, r.kind)
            self.gen[k] = max(self.gen.get(k, 0), _gen_budget(r))

    def evaluator_new(self, key: tuple, evaluator: Any) -> bool:
        """True the first time an evaluator (its parameters) adds follow-ups to unit ``key``: the
        same evaluator in another audit of the same (model, dataset, variant, split) asks the same."""
        k = (key, repr(evaluator))
        if k in self._evaluators:
            return False
        self._evaluators.add(k)
        return True

    def note_evaluator(self, target: str, eid: str, role: str, kind: str, budget: int) -> None:
        self.gen[(target, eid, role, kind)] = max(self.gen.get((target, eid, role, kind), 0), budget)
