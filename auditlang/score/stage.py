"""Scoring: stored results -> one ExampleRecord per cell x item, with no model loaded.

For each cell the evaluator labels the answer generation (or reads the constrained / judge
follow-up), the protocol program reads its confidence, and programs that fit on the dev split
(thresholds, Platt, probes) are fitted on the dev items of the same (model, dataset, variant).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from auditlang.plan.model import Plan
from auditlang.core.workers import fork_map, stage_workers
from auditlang.core.requests import Result
from auditlang.protocols.base import OWN_GENERATION, generated_text
from auditlang.resolve.spec import Spec
from auditlang.plan.stage2 import EVALUATOR_ROLES, Programs, label_answer
from auditlang.store.journal import Journal
from auditlang.store.integrity import OUTPUTS, record
from auditlang.store.records import ExampleRecord, write_records
from auditlang.plan.from_journal import FromJournal
from auditlang.evaluators.build import make_evaluator
from auditlang.plan.crossdata import group_labels, role_of
from auditlang.evaluators.string_match import normalize_answer
from auditlang.score.cellmetrics import write_cell_metrics
from auditlang.store.rundir import RECORDS

FIT_ERROR = "__fit_error__"


def _gold(ctx) -> str:
    if ctx.labels and ctx.item.get("gold_label"):
        return str(ctx.item["gold_label"])
    return str(ctx.item.get("answer"))


def _cells_by_unit(plan: Plan) -> dict[tuple, list]:
    """(audit, model, dataset, variant) -> its cells, in plan order (the records' order)."""
    cells_by_unit: dict[tuple, list] = {}
    for c in plan.cells:
        cells_by_unit.setdefault((c.audit, c.model, c.dataset, c.variant), []).append(c)
    return cells_by_unit


def score_cells(spec: Spec, plan: Plan, journal: Journal, fps: dict[str, str],
                evaluator_override: list[tuple[str, str]] | None = None,
                only_units: list[tuple] | None = None) -> list[ExampleRecord]:
    """Every cell's records. ``evaluator_override``: [(label, ctor)] to re-score under other evaluators.
    ``only_units``: score only these (audit, model, dataset, variant) keys (a worker's share, see
    :func:`score_parallel`); records come in plan order either way."""

    followups = FromJournal(spec, plan, journal, fps)  # follow-ups and cross candidates, rebuilt from the journal
    progs = followups.progs
    cross = followups.cross_data()
    records: list[ExampleRecord] = []
    cells_by_unit = _cells_by_unit(plan)
    if only_units is not None:
        keep = set(only_units)
        cells_by_unit = {k: v for k, v in cells_by_unit.items() if k in keep}
    for (aid, mid, dsid, vid), cells in cells_by_unit.items():
        fp = fps.get(plan.runs_as(mid))  # a model declared twice reads the first one's results
        unit = plan.units.get((aid, mid, dsid, vid, "test"))
        if fp is None or unit is None:
            continue
        dev_unit = plan.units.get((aid, mid, dsid, vid, "dev"))
        for pid in sorted({c.protocol for c in cells}):
            prog = progs.program(pid)
            rows = _protocol_rows(followups, aid, pid, unit, journal, fp, fps)
            if getattr(prog, "cross_supplied", lambda: False)():
                rows = _with_wrong_from(cross, journal, fp, (aid, mid, dsid, vid, "test"), pid, rows)
            fitted = None
            if getattr(prog, "needs_dev", False) and dev_unit is not None and pid in dev_unit.stage1:
                dev_rows = _protocol_rows(followups, aid, pid, dev_unit, journal, fp, fps)
                first_eid = cells[0].evaluator
                fit_input = []
                for ctx, r1, r2 in dev_rows:
                    if row_status(first_eid, r1, r2)[0] != "ok":
                        continue  # a failed request is missing from the fit too, never an incorrect answer
                    text = generated_text(r1.get("answer"))
                    pred, parsed, rule, corr = label_answer(progs, spec, first_eid, ctx, text, r2)
                    ro = _read(progs, prog, first_eid, ctx, {**r1, **r2}, pred, text)
                    fit_input.append({"confidence": ro.confidence, "correct": corr, "extras": ro.extras, "abstain": ro.abstain})
                try:
                    fitted = prog.fit(fit_input)
                except ValueError as e:
                    # e.g. a dev split with only one outcome: nothing can be fitted; the cell's
                    # confidences are then missing (counted), never silently unfitted.
                    fitted = {FIT_ERROR: str(e)}
            target = (aid, mid, dsid, vid, "test")
            cand_results = _cross_results(cross, journal, fp, target, pid, rows) if cross.sources.get(target) else {}
            evals = [(c.evaluator, None) for c in cells if c.protocol == pid]
            if evaluator_override:
                evals = evaluator_override
            for eid, ctor_override in evals:
                cell_id = f"{aid}/{mid}/{dsid}/{vid}/{pid}/{eid}"
                for ctx, r1, r2 in rows:
                    text = generated_text(r1.get("answer"))
                    status, error, role = row_status(eid, r1, r2)
                    if status != "ok":
                        records.append(_failed_record(cell_id, mid, dsid, vid, pid, eid, ctx, text, {**r1, **r2},
                                                      status, error, role))
                        continue
                    if ctor_override:

                        key = (eid, ctx.task)
                        if key not in progs._evals:
                            progs._evals[key] = make_evaluator(spec, eid, ctx.task, ctor=ctor_override, params={})
                        pred, parsed, rule, corr = _label_plain(progs, eid, ctx, text)
                    else:
                        pred, parsed, rule, corr = label_answer(progs, spec, eid, ctx, text, r2)
                    all_res = {**r1, **r2}
                    if any(v is None for v in r1.values()):
                        ro_conf, ro_parsed, kind, extras, abstain = math.nan, False, "missing", {"missing": True}, None
                    else:
                        ro = _read(progs, prog, eid, ctx, all_res, pred, text)
                        if fitted is not None and FIT_ERROR in fitted:
                            ro.extras["fit_error"] = fitted[FIT_ERROR]
                            ro.confidence, ro.parsed, ro.abstain = math.nan, False, None
                        elif fitted is not None:
                            ro = prog.apply(fitted, ro)
                        ro_conf, ro_parsed, kind, extras, abstain = ro.confidence, ro.parsed, ro.kind, dict(ro.extras), ro.abstain
                    if abstain is not None:
                        extras["abstain"] = bool(abstain)
                    if ctx.index in cand_results:
                        extras["supplied"] = _score_candidates(followups, cross, journal, target, aid, pid, eid, ctx, r1,
                                                               cand_results[ctx.index], fitted)
                    conf = float(ro_conf) if ro_conf is not None else math.nan
                    if not math.isnan(conf):
                        conf = min(1.0, max(0.0, conf))
                    records.append(ExampleRecord(
                        cell_id=cell_id, model=mid, dataset=dsid, variant=vid, protocol=pid, evaluator=eid,
                        item_id=str(ctx.item.get("id")), item_index=int(ctx.index), gold=_gold(ctx),
                        pred=None if pred is None else str(pred), parsed=bool(parsed), parse_rule=str(rule or ""),
                        correct=corr, confidence=conf, confidence_parsed=bool(ro_parsed) and not math.isnan(conf),
                        confidence_kind=str(kind or ""), extras=json.dumps(_jsonable(extras)),
                        request_ids=json.dumps({k: v.request_id for k, v in all_res.items() if v is not None}),
                        generation=text,
                    ))
    return records


def _with_wrong_from(cross, journal: Journal, fp: str, target: tuple, pid: str, rows):
    """Rows of a ``wrong_from`` protocol with its cross-stage result added to stage 1 (the
    program's request is built from another model's answer, see run/cross.py). When that other
    answer failed in its engine, a failed stand-in (role ``wrong_from_source``) marks the row."""
    reqs = [cross.wrong_from_requests(target, pid, ctx) for ctx, _, _ in rows]
    got = journal.get_many([r.id for rs in reqs for r in rs.values()], fp)
    out = []
    for (ctx, r1, r2), rs in zip(rows, reqs):
        extra: dict[str, Result | None] = {role: got.get(r.id) for role, r in rs.items()}
        failed = cross.wrong_from_failure(target, pid, ctx)
        if failed is not None:
            extra["wrong_from_source"] = failed
        out.append((ctx, {**r1, **extra}, r2))
    return out


def row_status(eid: str, r1: dict[str, Result | None], r2: dict[str, Result | None]) -> tuple[str, str, str]:
    """(status, error, failed role) of one cell's record of one item (records ``STATUSES``): "error" when a
    request the cell reads failed in the engine (its stage-1 requests, its protocol's follow-ups,
    its own evaluator's follow-ups), "missing" when one has no stored result, else ("ok", "", "")."""
    mine = (f"constrained:{eid}", f"judge:{eid}")
    reads = [(role, res) for role, res in r1.items()]
    reads += [(role, res) for role, res in r2.items() if not role.startswith(EVALUATOR_ROLES) or role in mine
              or role.startswith(f"loglik:{eid}:")]
    for role, res in reads:
        if res is not None and res.error is not None:
            return "error", f"{role}: {res.error}", role
    for role, res in reads:
        if res is None:
            return "missing", f"{role}: no stored result (rerun `auditc run` to execute it)", role
    return "ok", "", ""


def _failed_record(cell_id: str, mid: str, dsid: str, vid: str, pid: str, eid: str, ctx, text: str,
                   results: dict[str, Result | None], status: str, error: str, role: str) -> ExampleRecord:
    """The record of an item that is missing for the cell: no prediction, no correctness, no
    confidence (never scored as an incorrect answer); ``error`` says which request failed."""
    return ExampleRecord(
        cell_id=cell_id, model=mid, dataset=dsid, variant=vid, protocol=pid, evaluator=eid,
        item_id=str(ctx.item.get("id")), item_index=int(ctx.index), gold=_gold(ctx),
        extras=json.dumps({"missing": True, "failed_role": role}), generation=text, status=status, error=error,
        request_ids=json.dumps({k: v.request_id for k, v in results.items() if v is not None}),
    )


def _cross_results(cross, journal: Journal, fp: str, target: tuple, pid: str, rows) -> dict[int, dict[str, Result | None]]:
    """Item index -> role -> stored result of the cross-stage requests of one (unit, protocol)."""
    reqs = {ctx.index: cross.requests(target, pid, ctx) for ctx, _, _ in rows if cross.candidates(target).get(ctx.index)}
    got = journal.get_many([r.id for rs in reqs.values() for r in rs.values()], fp)
    return {i: {role: got.get(r.id) for role, r in rs.items()} for i, rs in reqs.items()}


def _score_candidates(followups: FromJournal, cross, journal: Journal, target: tuple, aid: str, pid: str, eid: str,
                      ctx, r1: dict[str, Result | None], results: dict[str, Result | None], fitted) -> list[dict[str, Any]]:
    """Record extras ``supplied``: every candidate answer of this item scored by this cell's
    protocol (confidence) and labelled by its evaluator (correctness), see run/cross.py."""
    progs, spec = followups.progs, followups.spec

    prog = progs.program(pid)
    cands = cross.candidates(target).get(ctx.index, [])
    out: list[dict[str, Any]] = []
    for cand in cands:
        prefix = role_of(cand, "")
        mine = {k[len(prefix):]: v for k, v in results.items() if k.startswith(prefix)}
        if not prog.answer_conditioned():
            conf, parsed, reason = math.nan, False, "the protocol's confidence does not read the answer"
        elif any(v is not None and v.error is not None for v in [*mine.values(), *r1.values()]):
            failed = next(v for v in [*mine.values(), *r1.values()] if v is not None and v.error is not None)
            conf, parsed, reason = math.nan, False, f"request error: {failed.error}"  # missing, never wrong
        elif any(v is None for v in mine.values()) or any(v is None for v in r1.values()):
            conf, parsed, reason = math.nan, False, "missing"
        else:
            own = cand.extras.get("sample")  # the unit's own sampled generation, with its token logprobs
            gen = {OWN_GENERATION: Result(request_id=cand.request_id, kind="generate", samples=[own])} if own else {}
            ro = _read(progs, prog, eid, ctx, {**r1, **mine, **gen}, cand.pred, cand.text, candidate=True)
            if fitted is not None and FIT_ERROR in fitted:
                ro.confidence, ro.parsed = math.nan, False
            elif fitted is not None:
                ro = prog.apply(fitted, ro)
            conf, parsed, reason = ro.confidence, ro.parsed, ro.extras.get("reason")
        src_r2 = followups.source(aid, cand)
        pred, ok, rule, corr = label_answer(progs, spec, eid, cand.ctx, cand.text, src_r2)
        entry = {"source": cand.source, "index": cand.index, "pred": None if pred is None else str(pred), "parsed": ok,
                 "confidence": None if conf is None or math.isnan(conf) else min(1.0, max(0.0, float(conf))),
                 "confidence_parsed": bool(parsed), "correct": corr, "request_id": cand.request_id}
        if reason:
            entry["reason"] = reason
        out.append(entry)
    by_source: dict[str, list[int]] = {}
    for i, cand in enumerate(cands):
        if cand.source.startswith("samples:"):
            by_source.setdefault(cand.source, []).append(i)
    for key, idx in by_source.items():
        greq = cross.grouping_requests(target, ctx).get(key)
        reply = None
        if greq is not None:
            gfp = _fp_for(journal, greq.model, cross.fps)
            reply = journal.get(greq.id, gfp) if gfp else None
        labels, rule = group_labels([cands[i] for i in idx], reply, lambda c: _same_key(c))
        for i, lab in zip(idx, labels):
            out[i]["group"], out[i]["group_rule"] = lab, rule
    return out


def _same_key(cand) -> str:

    if cand.pred is None:
        return "unparsed:" + normalize_answer(cand.text)
    return normalize_answer(str(cand.pred)) if isinstance(cand.pred, str) else str(cand.pred)


def _read(progs: Programs, prog, eid: str, ctx, results, pred, text: str, candidate: bool = False):
    """``prog.read``; programs that compare answers (self-consistency) get the cell evaluator's extraction."""
    if getattr(prog, "accepts_extract", False):
        ev = progs.evaluator(eid, ctx.task) if (eid, ctx.task) not in progs._evals else progs._evals[(eid, ctx.task)]

        def extract(t: str):
            o = ev.label(t, ctx.item)
            return o.value if o.ok else None

        read = prog.read_candidate if candidate else prog.read
        return read(ctx, results, pred, text, extract=extract)
    return (prog.read_candidate if candidate else prog.read)(ctx, results, pred, text)


def _label_plain(progs: Programs, eid: str, ctx, text: str):
    ev = progs._evals[(eid, ctx.task)]
    out = ev.label(text, ctx.item)
    pred = out.value if out.ok else None
    if pred is None:
        return None, False, out.rule, 0.0
    corr = ev.correct(pred, ctx.item)
    return pred, True, out.rule, (math.nan if corr is None else float(bool(corr)))


def _protocol_rows(followups: FromJournal, aid: str, pid: str, unit, journal: Journal, fp: str,
                   fps: dict[str, str] | None = None):
    per_item = unit.stage1.get(pid, [])
    ids = [r.id for reqs in per_item for r in reqs.values()]
    got = journal.get_many(ids, fp)
    staged = []
    wanted: dict[str, list[str]] = {}  # fingerprint -> follow-up ids, read in one query each
    for ctx, reqs in zip(unit.contexts, per_item):
        r1 = {role: got.get(r.id) for role, r in reqs.items()}
        r2_fps = {}
        for role, req in (followups.item(aid, pid, ctx, r1) or {}).items():
            rfp = fp if req.model == unit.model else _fp_for(journal, req.model, fps)
            r2_fps[role] = (req.id, rfp)
            if rfp:
                wanted.setdefault(rfp, []).append(req.id)
        staged.append((ctx, r1, r2_fps))
    found = {rfp: journal.get_many(ids, rfp) for rfp, ids in wanted.items()}
    return [(ctx, r1, {role: found[rfp].get(rid) if rfp else None for role, (rid, rfp) in r2_fps.items()})
            for ctx, r1, r2_fps in staged]


def _fp_for(journal: Journal, model: str, fps: dict[str, str] | None = None) -> str | None:
    """The run's fingerprint of ``model`` (``fps``), else its most recently registered one (after
    an engine upgrade a run folder holds several; the newest is the one the last run used)."""
    if fps and fps.get(model):
        return fps[model]
    found = None
    for fp, rec in journal.fingerprints().items():  # ordered by registration time
        if getattr(rec, "model", None) == model:
            found = fp
    return found


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if hasattr(x, "item") and callable(x.item):
        try:
            return x.item()
        except (TypeError, ValueError):
            return str(x)
    return x


# Scoring in worker processes (forked, so they share the spec and plan without pickling them):
# when core/workers.py's rule for the "score" stage says so (Linux, enough cores and records, no
# other Python thread alive). $AUDITLANG_SCORE_WORKERS=N sets the number of workers (0 or 1: never).
# Records are identical to scoring in this process: each worker scores a contiguous run of units,
# concatenated in order.
_WORK: dict[str, Any] = {}


def score_workers(plan: Plan, n_units: int) -> int:
    """How many worker processes :func:`score_and_write` uses (1: score in this process)."""
    rows = sum(len(u.contexts) * len(u.stage1) for u in plan.units.values())
    return stage_workers("score", n_units, rows=rows)


def _score_share(units: list[tuple]) -> list[ExampleRecord]:
    spec, plan, run_dir, fps = _WORK["args"]
    with Journal(run_dir) as journal, journal.cached_reads():
        return score_cells(spec, plan, journal, fps, only_units=units)


def _weights(plan: Plan, keys: list[tuple]) -> list[int]:
    """Each unit key's rows (contexts x stage-1 requests; at least 1)."""
    out = []
    for (aid, mid, dsid, vid) in keys:
        u = plan.units.get((aid, mid, dsid, vid, "test"))
        out.append(max(1, len(u.contexts) * len(u.stage1)) if u is not None else 1)
    return out


def _shares(plan: Plan, keys: list[tuple], n: int) -> tuple[list[list[tuple]], list[int]]:
    """``keys`` (plan order) cut into contiguous runs of about equal rows, ~6 per worker (a run
    never splits a unit: most study designs get one unit per share), and each share's rows."""
    weight = _weights(plan, keys)
    target = sum(weight) / (6 * n)
    out: list[list[tuple]] = [[]]
    rows: list[int] = [0]
    for k, w in zip(keys, weight, strict=True):
        if rows[-1] >= target and out[-1]:
            out.append([])
            rows.append(0)
        out[-1].append(k)
        rows[-1] += w
    return out, rows


def score_parallel(spec: Spec, plan: Plan, run_dir: Path, fps: dict[str, str], workers: int) -> list[ExampleRecord]:
    """:func:`score_cells` over ``workers`` forked processes (the heaviest shares first), records
    in plan order."""
    keys = list(_cells_by_unit(plan))
    _WORK["args"] = (spec, plan, run_dir, fps)
    try:
        shares, rows = _shares(plan, keys, workers)
        parts = fork_map(_score_share, shares, workers, weights=rows)
    finally:
        _WORK.clear()
    return [r for part in parts for r in part]


def score_and_write(spec: Spec, plan: Plan, run_dir: Path, fps: dict[str, str]) -> list[ExampleRecord]:

    workers = score_workers(plan, len(_cells_by_unit(plan)))
    if workers > 1:
        records = score_parallel(spec, plan, run_dir, fps, workers)
    else:
        with Journal(run_dir) as journal, journal.cached_reads():
            records = score_cells(spec, plan, journal, fps)
    write_records(run_dir / RECORDS, records)
    write_cell_metrics(spec, plan, run_dir, records)
    record(run_dir, OUTPUTS, journal=True)  # what later commands check (store/integrity.py)
    return records
