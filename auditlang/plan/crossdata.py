"""Cross stage: the confidence a unit gives to answers it did not generate itself.

Three comparisons need answers from another unit before their confidences can be requested, so
the runner executes this stage after every audited model's stages 1 and 2:

* ``aligned(..., views=[..., candidate])`` -- study 003 Candidate-Aligned (section 4.3): each
  model of a pair scores the other model's answer to the same item (same dataset and variant).
  Source key ``model:<other model>``.
* ``robustness(..., answer=fixed)`` -- study 002 P-RB (App. A.3, "the same answer under
  different prompt formulations"): the answer generated under the first listed variant is
  re-scored under every other listed variant by the same model. Source key ``variant:<first>``.
* ``robustness(..., samples=P)`` -- study 002 A-STB / A-SST (section 4.2, App. A.3): each of the
  K answers sampled by self_consistency protocol ``P`` under the first listed variant is scored by
  every confidence protocol of the audit. Source key ``samples:<P>``; the samples are grouped by
  meaning (by the ``grouping=`` judge, else by the cell evaluator's normalised answer).

Every confidence protocol whose confidence reads the answer (``Program.answer_conditioned``)
scores a candidate with the requests it would build for its own answer
(``Program.candidate_requests``); self-consistency compares its own samples with the candidate
and needs no request. The same functions build the requests for execution and find their
results for scoring, so both agree on request ids without storing anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from auditlang.plan.cross import Source, UnitKey, cross_sources
from auditlang.plan.model import Plan
from auditlang.core.requests import Request, Result
from auditlang.protocols.base import ItemCtx
from auditlang.resolve.spec import Spec
from auditlang.plan.stage2 import primary_pred
from auditlang.protocols.verbal import off_type_answer
from auditlang.plan.stage2 import audit_evaluators, label_answer
from auditlang.protocols.base import supplied_result
from auditlang.evaluators.build import evaluator_ctor, groups_samples
from auditlang.plan.stage2 import item_stage2
from auditlang.resolve.models import model_config
from auditlang.evaluators.judge import grouping_request
from auditlang.plan.stage2 import Programs
from auditlang.evaluators.judge import parse_grouping_reply

@dataclass
class Candidate:
    """One supplied answer for one item of a target unit."""

    source: str
    index: int  # sample index; 0 for a single answer
    text: str  # the answer text shown to the model (the full generation)
    pred: Any  # the audit's first evaluator's answer, as for the model's own answer
    ctx: ItemCtx  # the source item's context (for the candidate's correctness)
    request_id: str  # the generation that produced it
    extras: dict[str, Any] = field(default_factory=dict)


class CrossData:
    """Candidates of every target unit, read from the journal (answers must be committed)."""

    def __init__(self, spec: Spec, plan: Plan, journal, fps: dict[str, str], progs) -> None:
        self.spec, self.plan, self.journal, self.fps, self.progs = spec, plan, journal, fps, progs
        self.sources = cross_sources(spec, plan)
        self._cands: dict[UnitKey, dict[int, list[Candidate]]] = {}
        self._pending: dict[UnitKey, set[int]] = {}  # source unit -> items whose answer is not committed

    def candidates(self, target: UnitKey) -> dict[int, list[Candidate]]:
        """Item index -> candidates (empty when the unit has no sources or answers are missing)."""
        if target not in self._cands:
            got: dict[int, list[Candidate]] = {}
            for src in self.sources.get(target, []):
                if src.protocol is not None:
                    continue  # wrong_from sources: see wrong_from_choice
                for idx, cands in self._from_source(target, src).items():
                    got.setdefault(idx, []).extend(cands)
            self._cands[target] = got
        return self._cands[target]

    def _from_source(self, target: UnitKey, src: Source) -> dict[int, list[Candidate]]:
        key = (src.unit, src.samples)
        cache = self.__dict__.setdefault("_answers", {})
        if key not in cache:
            cache[key] = self._read_source(target[0], src)
        # cached per unit; labelled with this source's key (one unit can be several sources)
        return {i: [dataclasses.replace(c, source=src.key) for c in cands] for i, cands in cache[key].items()}

    def _read_source(self, aid: str, src: Source) -> dict[int, list[Candidate]]:

        unit = self.plan.units[src.unit]
        fp = self.fps.get(self.plan.runs_as(unit.model))
        pending = self.__dict__.setdefault("_pending", {})
        if fp is None or not unit.stage1:
            pending[src.unit] = {ctx.index for ctx in unit.contexts}
            return {}
        first_pid = next(iter(unit.stage1))
        if src.samples:
            prog = self.progs.program(src.samples)
            reqs = [prog.stage1(ctx)["samples"] for ctx in unit.contexts]
        else:
            reqs = [per_item["answer"] for per_item in unit.stage1[first_pid]]
        got = self.journal.get_many([r.id for r in reqs], fp)
        out: dict[int, list[Candidate]] = {}
        pending[src.unit] = {ctx.index for ctx, req in zip(unit.contexts, reqs) if req.id not in got}
        failed = self.__dict__.setdefault("_failed", {}).setdefault(src.unit, {})
        for ctx, req in zip(unit.contexts, reqs):
            res = got.get(req.id)
            if res is not None and res.error is not None:
                failed[ctx.index] = (req.id, res.error)  # never a candidate: missing, not an empty answer
            if res is None or res.error is not None or not res.samples:
                continue
            samples = res.samples if src.samples else res.samples[:1]
            cands = []
            for j, s in enumerate(samples):
                text = s.text or ""
                # a unit's own samples keep their token logprobs (token_prob(source=generation) reads them)
                own = {"sample": s} if src.samples else {}
                cands.append(Candidate(src.key, j, text, primary_pred(self.progs, self.spec, aid, ctx, text), ctx, req.id,
                                       own))
            out[ctx.index] = cands
        return out

    def requests(self, target: UnitKey, pid: str, ctx: ItemCtx) -> dict[str, Request]:
        """Role -> request for every candidate of one item under one protocol."""
        prog = self.progs.program(pid)
        if not prog.answer_conditioned():
            return {}
        out: dict[str, Request] = {}
        for cand in self.candidates(target).get(ctx.index, []):
            for role, req in prog.candidate_requests(ctx, {}, cand.text, cand.pred).items():
                out[role_of(cand, role)] = req
        return out

    def grouping_requests(self, target: UnitKey, ctx: ItemCtx) -> dict[str, Request]:
        """Judge requests grouping an item's sampled answers (002 App. A.1), by source key."""
        out: dict[str, Request] = {}
        for src in self.sources.get(target, []):
            if not src.samples or not src.grouping or not groups_samples(self.spec, src.grouping):
                continue
            cands = [c for c in self.candidates(target).get(ctx.index, []) if c.source == src.key]
            if len(cands) < 2:
                continue
            out[src.key] = grouping_request_for(self.spec, src.grouping, ctx, [c.text for c in cands])
        return out

    def wrong_from_choice(self, target: UnitKey, pid: str, ctx: ItemCtx) -> tuple[str, str, str | None]:
        """(answer, provenance used, source model) for a ``wrong_from`` protocol (001 §3.3): the
        first listed other model whose answer to this item is wrong under the audit's first
        evaluator (its extracted answer, else its text), else an off-type answer. Also stored in
        ``ctx.extras`` for the program's ``supplied``/``read``."""

        prog = self.progs.program(pid)
        aid = target[0]
        eid = audit_evaluators(self.spec, aid)[0]
        choice: tuple[str, str, str | None] | None = None
        for src in self.sources.get(target, []):
            if src.protocol != pid:
                continue
            for unit_key in src.wrong_from:
                got = self._from_source(target, Source("model", unit_key)).get(ctx.index)
                if ctx.index in self._pending.get(unit_key, ()):
                    # that model has not answered yet: choosing now could pick the fallback too early
                    choice = ("", "pending", None)
                    break
                if ctx.index in self.__dict__.get("_failed", {}).get(unit_key, {}):
                    # that model's answer failed in its engine: no choice until a rerun retries it
                    choice = ("", "error", unit_key[1])
                    break
                if not got:
                    continue
                cand = got[0]
                pred, ok, _, corr = label_answer(self.progs, self.spec, eid, cand.ctx, cand.text,
                                                 source_followups(self.progs, self.spec, self.journal, self.fps, aid, cand))
                shown = pred if ok and isinstance(pred, str) and pred.strip() else cand.text
                if corr == 0.0 and shown.strip():
                    choice = (shown.strip(), "plausible_wrong", unit_key[1])
                    break
        if choice is None:
            choice = (off_type_answer(ctx, prog._pool(ctx)), "off_type", None)
        ctx.extras[prog.wrong_from_key()] = choice
        return choice

    def wrong_from_requests(self, target: UnitKey, pid: str, ctx: ItemCtx) -> dict[str, Request]:
        """The supplied-answer request of a ``wrong_from`` protocol for one item."""
        prog = self.progs.program(pid)
        answer, used, _ = self.wrong_from_choice(target, pid, ctx)
        return {} if used in ("pending", "error") else prog.supplied_requests(ctx, answer)

    def wrong_from_failure(self, target: UnitKey, pid: str, ctx: ItemCtx) -> Result | None:
        """A failed stand-in result when the other model's answer this ``wrong_from`` protocol
        would draw on failed in its engine (the item is then missing for the cell), else None."""
        _, used, model = self.wrong_from_choice(target, pid, ctx)
        if used != "error":
            return None
        for unit_key, failed in self.__dict__.get("_failed", {}).items():
            if unit_key[1] == model and ctx.index in failed:
                rid, message = failed[ctx.index]
                return Result(request_id=rid, kind="generate", error=f"the answer of model {model} failed: {message}")
        return None

    def all_requests(self, only_model: str | None = None) -> Iterator[Request]:
        """Every cross request (targets' models) and grouping request (judge models);
        ``only_model``: just the targets that model scores (their grouping requests included)."""
        for target, sources in self.sources.items():
            if only_model is not None and target[1] != only_model:
                continue
            unit = self.plan.units[target]
            aid = target[0]
            pids = list(self.spec.get(aid).value.protocols)
            wf = [s.protocol for s in sources if s.protocol is not None]
            for ctx in unit.contexts:
                for pid in pids:
                    yield from self.requests(target, pid, ctx).values()
                for pid in wf:
                    yield from self.wrong_from_requests(target, pid, ctx).values()
                yield from self.grouping_requests(target, ctx).values()


def source_followups(progs, spec: Spec, journal, fps: dict[str, str], aid: str, cand: Candidate) -> dict[str, Result | None]:
    """The evaluator follow-ups (constrained re-prompt, judge verdict) the candidate's own model
    has for this answer, read from the journal (absent for sampled answers)."""

    a = spec.get(aid).value
    if not any(evaluator_ctor(spec, e, cand.ctx.task) in ("constrained", "llm_judge") for e in a.evaluators):
        return {}
    out: dict[str, Result | None] = {}
    for role, req in item_stage2(progs, spec, aid, a.protocols[0], cand.ctx, {"answer": supplied_result(cand.text)}).items():
        if role.startswith(("constrained:", "judge:")):
            fp = fps.get(req.model)
            out[role] = journal.get(req.id, fp) if fp else None
    return out


def role_of(cand: Candidate, role: str) -> str:
    return f"cross:{cand.source}#{cand.index}:{role}"


def grouping_request_for(spec: Spec, eid: str, ctx: ItemCtx, texts: list[str]) -> Request:

    judge = spec.get(eid).value.judge
    return grouping_request(judge, str(ctx.item.get("question")), texts, seed=ctx.seed,
                            chat=model_config(spec, judge).chat)


def cross_requests(spec: Spec, plan: Plan, journal, fps: dict[str, str], progs=None,
                   only_model: str | None = None) -> list[Request]:
    """Unique cross-stage requests whose inputs the journal holds (all models, judges included;
    ``only_model``: only the units of that model, so a model's first load builds just its own)."""

    data = CrossData(spec, plan, journal, fps, progs or Programs(spec))
    out: dict[str, Request] = {}
    for r in data.all_requests(only_model):
        out.setdefault(r.id, r)
    return list(out.values())


def group_labels(cands: list[Candidate], reply: Result | None, same_key) -> tuple[list[str], str]:
    """A group label per sampled candidate: the judge's groups when its reply parses into a
    partition, else the evaluator's normalised answer (``same_key``). Returns (labels, rule)."""
    if reply is not None:

        out = parse_grouping_reply(reply, len(cands))
        if out.ok:
            labels = [""] * len(cands)
            for g, members in enumerate(out.value):
                for i in members:
                    labels[i] = f"g{g}"
            return labels, "judge"
    return [same_key(c) for c in cands], "evaluator" if reply is None else "evaluator_after_judge_failure"


__all__ = ["Candidate", "CrossData", "Source", "cross_requests", "cross_sources", "group_labels", "role_of",
           "source_followups"]
