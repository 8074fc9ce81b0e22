"""The one owner of rebuilding run-time requests from the journal.

Follow-ups (stage 2: verbal confidence after the model's own answer, constrained re-prompts,
teacher forcing, ...), judge requests and cross-stage requests are not in the plan: they are
built from stored stage-1 outputs (``stage2.py``, ``crossdata.py``). Three consumers need them
and all go through :class:`FromJournal`:

* ``execute/runner.py`` runs what the journal lacks, model by model;
* ``api.missing_requests`` counts what a run did not execute (``auditc report --spec``);
* ``score/stage.py`` reads each item's follow-up results back (:meth:`FromJournal.item`,
  :meth:`FromJournal.source`, :meth:`FromJournal.cross_data`).

Every call reads the journal as it is now (a run commits between calls), so nothing is cached
across calls except the spec's protocol programs and evaluators (:class:`~stage2.Programs`),
which depend only on the spec.
"""

from __future__ import annotations


from auditlang.core.requests import Request, Result
from auditlang.plan.crossdata import CrossData, cross_requests, source_followups
from auditlang.plan.model import Plan
from auditlang.plan.stage2 import Programs, Stage2Stream, item_stage2, stage2_requests
from auditlang.resolve.spec import Spec


class FromJournal:
    """Requests of ``plan`` rebuilt from ``journal`` under the engine fingerprints ``fps``
    (model id -> fingerprint hash; the runner updates the same dict as models load)."""

    def __init__(self, spec: Spec, plan: Plan, journal, fps: dict[str, str], progs: Programs | None = None) -> None:
        self.spec, self.plan, self.journal, self.fps = spec, plan, journal, fps
        self.progs = progs or Programs(spec)

    def stage1(self, model: str) -> list[Request]:
        """The plan's stage-1 requests of ``model`` (known at plan time)."""
        return [r for r in self.plan.requests if r.model == model]

    def stage2(self, model: str | None = None) -> list[Request]:
        """Follow-ups whose stage-1 inputs are committed (judge requests excluded); ``model``:
        only that model's own follow-ups."""
        reqs = stage2_requests(self.spec, self.plan, self.journal, self.fps, only_model=model, progs=self.progs)
        return reqs if model is None else [r for r in reqs if r.model == model]

    def stage2_stream(self, model: str) -> Stage2Stream:
        """``model``'s follow-ups built as its stage-1 results arrive (``.add(results)``): after
        every stage-1 result of the model went through it, it has built what :meth:`stage2`
        builds from the journal."""
        return Stage2Stream(self.spec, self.plan, model, self.progs)

    def judges(self) -> list[Request]:
        """Requests for judge models (llm_judge evaluators) whose answers are committed."""
        return stage2_requests(self.spec, self.plan, self.journal, self.fps, judges_only=True, progs=self.progs)

    def cross(self, model: str | None = None) -> list[Request]:
        """Cross-stage requests whose inputs are committed; ``model``: only those built from
        ``model``'s units and sent to it."""
        reqs = cross_requests(self.spec, self.plan, self.journal, self.fps, self.progs, only_model=model)
        return reqs if model is None else [r for r in reqs if r.model == model]

    def needed(self, model: str, cross: bool = True) -> list[Request]:
        """Everything ``model``'s first load runs: stage 1, its follow-ups and (``cross``) the
        cross requests whose answers already exist."""
        return self.stage1(model) + self.stage2(model) + (self.cross(model) if cross else [])

    def everything(self) -> list[Request]:
        """Every request the run needs as far as the journal allows: stage 1, follow-ups, judge
        requests and the cross stage (duplicates across stages are kept)."""
        return list(self.plan.requests) + self.stage2() + self.judges() + self.cross()

    def item(self, audit_id: str, pid: str, ctx, r1) -> dict[str, Request]:
        """Role -> follow-up request of one item under protocol ``pid``, from its stage-1 results."""
        return item_stage2(self.progs, self.spec, audit_id, pid, ctx, r1)

    def source(self, audit_id: str, cand) -> dict[str, Result | None]:
        """Role -> stored result of the follow-ups of a cross-stage candidate's source answer."""
        return source_followups(self.progs, self.spec, self.journal, self.fps, audit_id, cand)

    def cross_data(self) -> CrossData:
        """The cross stage's candidates as the journal holds them now (scoring reads them)."""
        return CrossData(self.spec, self.plan, self.journal, self.fps, self.progs)


__all__ = ["FromJournal"]
