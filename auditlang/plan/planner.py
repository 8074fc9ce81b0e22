"""Spec -> Plan: cross each audit's axes into cells and collect the deduplicated requests.

The planner imports no engine. With the data present it renders every prompt and
deduplicates requests exactly; without it (a hub id on an offline machine, a missing file)
it counts cells and requests from the declared sample sizes and marks the figures estimated.
"""

from __future__ import annotations

import gc
import os
import random
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from auditlang.data.loader import ConfinementError, DataError, DatasetItems, data_root_for, estimated_size, load_dataset
from auditlang.core.diagnostics import DiagnosticBag, Span
from auditlang.core.errors import UsageError
from auditlang.plan.case_items import check_case_items
from auditlang.plan.limit import Limit
from auditlang.plan.model import PLAN_VERSION, Cell, Plan, content_hash
from auditlang.core.registry import REGISTRY
from auditlang.core.requests import Request
from auditlang.resolve.templates import compile_obj
from auditlang.prompts.context import build_context
from auditlang.prompts.fewshot import fewshot_for
from auditlang.prompts.perturb import apply_perturbation
from auditlang.prompts.render import TemplateError
from auditlang.protocols.base import RENDERS, ItemCtx, ModelInfo
from auditlang.protocols.registry import program_for
from auditlang.resolve.models import declared_model, shared_declarations
from auditlang.resolve.spec import Spec
from auditlang.data.loader import ENV_DATA_ROOT
from auditlang.core.diagnostics import did_you_mean
from types import SimpleNamespace
from auditlang.plan.cross import cross_sources
from auditlang.plan.followups import FollowupCounter
from auditlang.core.capabilities import ENGINE_CAPABILITIES, call_shape
from auditlang.resolve.modules import stdlib_root

@contextmanager
def _no_cycle_collection():
    """Python's cyclic garbage collector paused while a plan is built: the plan allocates millions
    of acyclic objects (contexts, requests, ids) that every full collection would walk again,
    40 % of a study-scale plan's CPU; the few cycles left are collected afterwards as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _evaluator_followups(spec: Spec, eid: str, mid: str, ctxs: list, n_items: int) -> list[tuple[str, str, str, int]]:
    """(model, role, kind, count) of the stage-2 requests an evaluator adds to one unit: its own
    model request (registry meta ``followup``: constrained, llm_judge on its judge model), or for
    loglik_argmax one choice_logprobs per item (target=letter) or one continuation per option."""
    ector = spec.get(eid).ctor if eid in spec.objects else None
    if ector == "loglik_argmax":
        if spec.get(eid).value.target == "letter":
            return [(mid, "loglik", "choice_logprobs", n_items)]
        n = sum(len(c.labels or ()) for c in ctxs) if ctxs else 4 * n_items  # estimate: 4 options
        return [(mid, "loglik", "continuation_logprobs", n)]
    f = _followup(ector)
    if f:
        role, kind = f
        target = spec.get(eid).value.judge if ector == "llm_judge" else mid
        return [(target, role, kind, n_items)]
    return []


# Variables supplied by protocols or perturbations rather than by the dataset row.
PROTOCOL_VARS = frozenset({"proposed_answer", "generation", "examples", "labels", "gold_label", "oneshot", "samples",
                           "perturbations"})


REUSED = ("_prompt", "_answer_request")  # ItemCtx.extras another audit of the same unit reuses


class _Reuse:
    """What the released contexts of a unit leave for the next audit of it (a lean plan)."""

    __slots__ = ("values",)

    def __init__(self, ctxs: list[ItemCtx]) -> None:
        self.values = [[c.extras.get(k) for c in ctxs] for k in REUSED]


@dataclass
class Unit:
    """All items of one (audit, model, dataset, variant, split), with stage-1 requests per protocol."""

    audit: str
    model: str
    dataset: str
    variant: str
    split: str
    contexts: list[ItemCtx]
    stage1: dict[str, list[dict[str, Request]]]  # protocol id -> per item {role: request}
    n_released: int | None = None  # a lean plan's unit that kept only its first context: how many it had


def model_info(spec: Spec, mid: str) -> ModelInfo:
    m = spec.get(mid).value
    chat = declared_model(spec, mid)[2]
    seed = spec.seed(m.seed)
    return ModelInfo(mid, chat, m.max_tokens, seed)


def _variant_template(spec: Spec, vid: str, task: str) -> str | None:
    v = spec.get(vid).value
    return getattr(v, task) or v.template


def _dev_indices(ds: DatasetItems, spec: Spec) -> list[int]:
    v = spec.get(ds.decl or ds.dataset_id).value  # a hub dataset's fallback may carve its own dev split
    if not v.dev_sample or v.dev:
        return []
    taken = set(ds.indices)
    rest = [i for i in range(len(ds.items)) if i not in taken]
    n = min(v.dev_sample, len(rest))
    # Disjoint dev carve-out: random.Random(seed + 1).sample over the rows not in the test sample.
    return sorted(random.Random(v.seed + 1).sample(rest, n))


STRICT_CODES = {"W170": "E174", "W171": "E175", "W172": "E176", "W173": "E177"}  # data_warnings = error


def _template_span(e: Exception, default):
    """The template file's own line when the error is in a template file, else ``default``."""
    name, line = getattr(e, "name", None), getattr(e, "line", None)
    if name and line and Path(name).is_absolute() and Path(name).is_file():
        return Span.point(name, line, getattr(e, "col", None) or 1)
    return default


def _settings_span(spec: Spec, param: str):
    objs = list(spec.of_kind("settings").values())
    return objs[0].param_span(param) if objs else None


class Planner:
    def __init__(self, spec: Spec, data_root: str | None = None, load_data: bool = True, limit: int | str | None = None,
                 data_files: dict[str, Path] | None = None, data_meta: dict[str, dict] | None = None,
                 step=None, synthetic: frozenset[str] = frozenset(), no_download: dict[str, str] | None = None,
                 lean: bool = False, sink=None) -> None:
        """``data_files``: dataset id -> the file to read for it, ``data_meta`` its recorded identity
        (a run directory's copies). ``step(text)``: told when each dataset is read and each audit
        planned (progress). ``synthetic``: datasets to stand in for with placeholder items of the
        declared sizes (used only to estimate the counts of a plan whose data is missing).
        ``no_download``: hub dataset id -> why its split is read from the local cache only (its
        Hub host is not allowed and it declares a fallback file).

        ``lean``: a plan for counting (``auditc plan``): the same cells, counts, hash and token
        estimates, but no Request objects are kept (``plan.requests`` is empty; ``request_counts``
        has the counts) and units keep neither per-item requests nor, unless the cross stage reads
        them, item contexts, so memory does not grow with the number of requests. ``sink(request)``
        is called once per unique stage-1 request, in plan order (e.g. to stream them out)."""
        self.spec = spec
        self.no_download = dict(no_download or {})
        self.lean = lean
        self.sink = sink
        self.synthetic = synthetic
        self.step = step or (lambda text: None)
        self.data_files = dict(data_files or {})
        self.data_meta = dict(data_meta or {})
        try:
            self.limit = Limit.parse(limit)  # a count, fraction or range (plan/limit.py)
        except ValueError as e:
            raise UsageError(str(e), hint="limit=10 (the first 10), limit=0.1 or \"10%\" (the first tenth), "
                                          "limit=\"10:20\" (sampled positions 10 to 19)") from None
        self.load_data = load_data
        self.bag = DiagnosticBag()
        try:
            self.root = data_root_for(spec, data_root)
        except ConfinementError as e:
            self.root = spec.entry.parent
            if not self.data_files and load_data:  # a run directory's own copies need no data root
                self.bag.error("E118", str(e), _settings_span(spec, "data_root"), hint=e.hint)
        self.data: dict[str, DatasetItems | None] = {}
        self.notes: list[str] = []
        self.hints: dict[str, str | None] = {}  # dataset id -> the hint of why it could not load
        declared = spec.settings.data_root
        if declared and not data_files:

            via = "--data-root" if data_root else (f"${ENV_DATA_ROOT}" if os.environ.get(ENV_DATA_ROOT) else None)
            if via:
                self.notes.append(f"data root: {self.root} (from {via}) overrides the spec's settings data_root "
                                  f"{declared!r}")
        self.failed: set[str] = set()
        self.failed_protocols: set[str] = set()
        self._render_cache: dict[tuple[str, str, str], list | None] = {}
        self._renders: dict = {}  # protocol template renders shared by every model (ItemCtx.render)
        # a model declared again under another name -> the first name: its requests are that one's
        self._runs_as = shared_declarations(spec, [m for a in spec.of_kind("audit").values() for m in a.value.models
                                                   if m in spec.objects and spec.get(m).kind == "model"])
        for mid, first in self._runs_as.items():
            self.notes.append(f"model {mid} is declared as {first} is: its cells read {first}'s requests, which run once")
        self._ctx_seen: dict[tuple[str, str, str, str], list[ItemCtx]] = {}

    # -------------------------------------------------------------- data
    def dataset(self, dsid: str) -> DatasetItems | None:
        if dsid in self.data:
            return self.data[dsid]
        got: DatasetItems | None = None
        if dsid in self.synthetic:
            got = _synthetic_items(self.spec, dsid)
            if self.limit is not None:
                got.indices = self.limit.cut(got.indices)
            got.dev_indices = _dev_indices(got, self.spec)
            if self.spec.get(dsid).value.dev:
                got.dev_indices = []
                dev = self.dataset(self.spec.get(dsid).value.dev)
                if dev is not None:
                    got.extras_dev = dev  # type: ignore[attr-defined]
        elif self.load_data:
            self.step(f"reading dataset {dsid}")
            try:
                got = load_dataset(self.spec, dsid, self.root, self.data_files.get(dsid), self.data_meta.get(dsid),
                                   self.no_download.get(dsid))
                if got.note:
                    self.notes.append(f"dataset '{dsid}': {got.note}")
                if self.limit is not None:
                    got.n_drawn = len(got.indices)  # before --limit, for the checklist
                    got.indices = self.limit.cut(got.indices)
                dev_ref = self.spec.get(got.decl or dsid).value.dev
                if dev_ref:
                    dev = self.dataset(dev_ref)
                    got.dev_indices = []
                    if dev is not None:
                        got.extras_dev = dev  # type: ignore[attr-defined]
                else:
                    got.dev_indices = _dev_indices(got, self.spec)
            except ConfinementError as e:
                self.bag.error("E118", f"dataset '{dsid}': {e}", self.spec.get(e.decl or dsid).param_span(e.param),
                               hint=e.hint)
                self.failed.add(dsid)
                got = None
            except DataError as e:
                obj = self.spec.get(dsid)
                where = f"{e.file}:{e.line}: " if e.file and e.line else (f"{e.file}: " if e.file else "")
                if e.file is None and ("not found" in str(e) or obj.ctor == "hub"):  # could not read it
                    self.notes.append(f"dataset '{dsid}': {e} — counts are estimates from the declared sample size")
                    self.hints[dsid] = e.hint
                else:
                    self.bag.error("E170", f"dataset '{dsid}': {where}{e}", self.spec.get(e.decl or dsid).span, hint=e.hint)
                    self.failed.add(dsid)
                got = None
        if got is not None:
            strict = self.spec.settings.data_warnings == "error"
            for code, msg in got.warnings:
                span = self.spec.get(got.decl or dsid).span  # the fallback's jsonl(...) when its file was read
                if strict:
                    self.bag.error(STRICT_CODES[code], f"dataset '{dsid}': {msg}", span,
                                   hint="fix the data, or set settings { data_warnings = warn } to run anyway")
                else:
                    self.bag.warning(code, f"dataset '{dsid}': {msg}", span,
                                     hint="settings { data_warnings = error } makes data warnings errors")
        self.data[dsid] = got
        return got

    def _dev_items(self, dsid: str, ds: DatasetItems) -> list[tuple[int, dict]]:
        ext = getattr(ds, "extras_dev", None)
        if ext is not None:
            return [(i, ext.items[i]) for i in ext.indices]
        return [(i, ds.items[i]) for i in ds.dev_indices]

    # -------------------------------------------------------------- items
    def _contexts(self, audit: str, mid: str, dsid: str, vid: str, split: str, ds: DatasetItems) -> list[ItemCtx]:
        """Item contexts of one (model, dataset, variant, split); prompts are rendered once per
        (dataset, variant, split) and shared by every model."""
        rendered = self._rendered(dsid, vid, split, ds)
        if rendered is None:
            return []
        spec = self.spec
        var = spec.get(vid).value
        task = spec.get(dsid).value.task
        minfo = model_info(spec, mid)
        if mid in self._runs_as:  # the same declaration as an earlier model: its requests, run once
            minfo = replace(minfo, id=self._runs_as[mid])
        budget = var.max_tokens or spec.get(mid).value.max_tokens
        extras = {"pool": ds.items, "temperature": var.temperature, "top_p": var.top_p, "sample_top_k": var.sample_top_k,
                  RENDERS: self._renders}
        ctxs = [ItemCtx(model=minfo, dataset=dsid, task=task, split=split, index=idx, item=ctx, variant=vid,
                        user_text=text, system_text=system, answer_max_tokens=budget, seed=minfo.seed,
                        labels=ctx.get("labels"), extras=dict(extras))
                for idx, ctx, text, system in rendered]
        # Another audit over the same (model, dataset, variant, split) asks for the same answer
        # prompts and requests: take the ones built already instead of hashing them again.
        earlier = self._ctx_seen.setdefault((mid, dsid, vid, split), ctxs)
        if earlier is not ctxs:
            for k, values in zip(REUSED, earlier.values if isinstance(earlier, _Reuse) else
                                 [[c.extras.get(k) for c in earlier] for k in REUSED]):
                for new, got in zip(ctxs, values):
                    if got is not None:
                        new.extras[k] = got
        return ctxs

    def _rendered(self, dsid: str, vid: str, split: str, ds: DatasetItems):
        key = (dsid, vid, split)
        if key not in self._render_cache:
            self._render_cache[key] = self._render(dsid, vid, split, ds)
        return self._render_cache[key]

    def _render(self, dsid: str, vid: str, split: str, ds: DatasetItems):
        spec = self.spec
        task = spec.get(dsid).value.task
        var = spec.get(vid).value
        tid = _variant_template(spec, vid, task)
        try:
            tpl = compile_obj(spec, spec.get(tid))
            sys_tpl = compile_obj(spec, spec.get(var.system)) if var.system else None
        except TemplateError as e:
            code = "E118" if "outside the project root" in e.message else "E160"
            self.bag.error(code, f"template of variant '{vid}': {e.message}", _template_span(e, spec.get(tid).span),
                           hint=e.hint)
            return None
        pairs = [(i, ds.items[i]) for i in ds.indices] if split == "test" else self._dev_items(dsid, ds)
        if pairs:
            avail = set(pairs[0][1]) | PROTOCOL_VARS
            missing = sorted(tpl.variables - avail)
            if missing:

                self.bag.error("E161", f"template of variant '{vid}' uses {', '.join(repr(m) for m in missing)}, "
                               f"which dataset '{dsid}' does not provide", spec.get(tid).span,
                               hint=did_you_mean(missing[0], sorted(set(pairs[0][1])), "fields"))
                return None
        pool = ds.items if var.fewshot else []
        out = []
        for idx, raw in pairs:
            item = dict(raw)
            for pid in var.perturb:
                pobj = spec.get(pid)
                pseed = spec.seed(pobj.value.seed)
                # every parameter the perturbation declares goes to its function (a plugin's too)
                opts = {k: v for k, v in pobj.value.values().items() if k != "seed"}
                if pobj.ctor == "one_shot" and opts.get("bank") is None:  # one_shot's default bank: by dataset
                    opts["bank"] = "hellaswag" if "hellaswag" in dsid else "mmlu"
                try:
                    item = apply_perturbation(item, pobj.ctor, pseed, **opts)
                except ValueError as e:
                    self.bag.error("E162", f"perturbation '{pid}' on item {raw.get('id')}: {e}", pobj.span,
                                   hint="check the perturbation's parameters and the item's fields (docs/prompts.md)")
                    return None
            examples = None
            try:
                if var.fewshot:  # ValueError: fewer pool items than fewshot=
                    fs_seed = spec.seed(var.fewshot_seed)
                    examples = fewshot_for(pool, item["id"], var.fewshot, fs_seed)
                ctx = build_context(item, examples=examples)
                text = tpl.render(ctx)
                system = sys_tpl.render(ctx) if sys_tpl else None
            except (TemplateError, ValueError) as e:
                where = f" (template line {e.line})" if getattr(e, "line", None) else ""
                self.bag.error("E163", f"rendering variant '{vid}' for item {item.get('id')} of '{dsid}': "
                               f"{getattr(e, 'message', e)}{where}", _template_span(e, spec.get(tid).span),
                               hint=getattr(e, "hint", None))
                return None
            out.append((idx, ctx, text, system))
        return out

    # -------------------------------------------------------------- plan
    def build(self) -> Plan:
        """Spec + data -> Plan, in the order of ARCHITECTURE.md's plan stage: for every audit
        and dataset, read the data (:meth:`_read_for_plan`); for every unit (model × dataset ×
        variant × split) render the item contexts and, per protocol, collect the deduplicated
        stage-1 requests, the cells and the follow-up counts (:meth:`_plan_unit`); then the cross
        stage, the engine-capability check, the Plan itself, and the counts of data that is
        missing (:meth:`_estimate_missing`)."""
        with _no_cycle_collection():
            return self._build()

    def _build(self) -> Plan:
        self._start_build()
        for aid, aobj in self.spec.of_kind("audit").items():
            a = aobj.value
            self.step(f"planning audit {aid}")
            for dsid in a.datasets:
                ok, ds = self._read_for_plan(dsid)
                if not ok:
                    continue
                self.step(f"planning audit {aid} on dataset {dsid}")  # the read above was a step of its own
                for mid in a.models:
                    for vid in a.variants:
                        for split in self._splits(a):
                            self._plan_unit(aid, a, mid, dsid, vid, split, ds)
        self.step("planning the cross stage")
        self._naive += self._plan_cross(self._units, self._programs, self._unique, self._deferred)
        check_capabilities(self.spec, self._programs, self.bag)
        check_case_items(self.spec, self.data, self.bag, self.limit is not None)
        self.bag.raise_if_errors()
        plan = self._assemble()
        self._estimate_missing(plan)
        plan.token_estimate_followups = _followup_tokens(plan, self._per_model, self._followups.gen)
        plan.tokens_by_model = _tokens_by_model(plan, self._per_model, self._followups.gen)
        plan.units = self._units
        plan.warnings = self.bag.warnings
        plan.sources = {d: ds for d, ds in self.data.items() if ds is not None}
        return plan

    def _start_build(self) -> None:
        """The state one build accumulates: unique requests, their counts, cells, follow-ups."""
        self._cells: list[Cell] = []
        # id -> Request (full plan), or id -> None (lean plan: dedup by id only)
        self._unique: dict[str, Request | None] = {}
        self._kinds: Counter = Counter()  # (model, kind) -> unique stage-1 requests
        self._shapes: Counter = Counter()  # (model, kind, call shape) -> unique stage-1 requests
        self._per_model: dict[str, list[int]] = {}  # model -> [prompt tokens, max generated, count, generated]
        self._tokens = [0, 0]  # prompt tokens, generated tokens (max) of the main loop's requests
        self._keep_ctx = self._cross_targets() if self.lean else None
        # a plan that only counts (lean, nothing streamed): the order requests are first seen in does not matter
        self._counts_only = self.lean and self.sink is None
        self._naive = 0
        self._deferred: Counter = Counter()  # (model, source, role, kind) -> follow-up requests
        self._followups = FollowupCounter()  # follow-ups shared by protocols, audits or stage 1: counted once
        self._estimated = False
        self._units: dict[tuple, Unit] = {}
        self._ds_info: dict[str, dict[str, Any]] = {}
        self._programs: dict = {}
        self._first_windows = self._first_windows_of(self._programs)
        self._est1 = {}  # without data: (unit key, role, kind) -> (model, kind, n)

    def _read_for_plan(self, dsid: str) -> tuple[bool, DatasetItems | None]:
        """Read a dataset and record what the plan says of it (``datasets`` of plan.json):
        (False, None) when it is planned no further (unreadable, or missing with no declared size),
        (True, None) when its counts are estimated from the declared size."""
        spec = self.spec
        ds = self.dataset(dsid)
        dobj = spec.get(dsid)
        if ds is None and dsid in self.failed:
            return False, None
        if ds is None:
            n = estimated_size(dobj)
            if n is None:
                self.bag.error("E171", f"dataset '{dsid}' is not available and declares no sample size",
                               dobj.span, hint="add sample=N (or size=N for hub datasets) so the plan can be estimated")
                return False, None
            self._estimated = True
            self._ds_info[dsid] = {"path": getattr(dobj.value, "path", None), "available": False, "n_sample": n}
            return True, None
        self._ds_info[dsid] = {"path": ds.path, "available": True, "n_items": len(ds.items),
                               "n_sample": len(ds.indices), "seed": spec.get(ds.decl or dsid).value.seed,
                               "indices": ds.indices,
                               "n_dev": len(ds.dev_indices) or len(getattr(getattr(ds, "extras_dev", None), "indices", [])),
                               **ds.meta}
        if ds.file_rows is not None:  # filter_field/filter_in: which rows of the file the items are (issue 39.2)
            v = spec.get(ds.decl or dsid).value
            self._ds_info[dsid].update({"n_source_rows": ds.n_source_rows,
                                        "filter": {"field": v.filter_field, "in": list(v.filter_in or [])},
                                        "file_rows": [ds.file_rows[i] for i in ds.indices]})
        if self.limit is not None:  # `auditc run --limit N`: disclosed by the checklist
            self._ds_info[dsid].update({"limit": self.limit.recorded, "n_drawn": ds.n_drawn})
        return True, ds

    def _splits(self, a) -> list[str]:
        """The splits an audit's units cover: test, and dev when a protocol needs a dev set."""
        for pid in a.protocols:
            if pid not in self._programs:
                self._programs[pid] = program_for(self.spec.get(pid), self.spec)
        return ["test"] + (["dev"] if any(self._programs[p].needs_dev for p in a.protocols) else [])

    def _plan_unit(self, aid: str, a, mid: str, dsid: str, vid: str, split: str, ds: DatasetItems | None) -> None:
        """One unit (audit, model, dataset, variant, split): its item contexts, then per protocol
        its stage-1 requests and cells, then the evaluators' own follow-ups."""
        ctxs = self._contexts(aid, mid, dsid, vid, split, ds) if ds is not None else []
        window = self._first_windows.get((mid, dsid, vid))
        if window:
            for ctx in ctxs:
                ctx.extras["first_window"] = window
        n_items = len(ctxs) if ds is not None else (estimated_size(self.spec.get(dsid)) if split == "test" else 0)
        unit = Unit(aid, mid, dsid, vid, split, ctxs, {})
        self._units[(aid, mid, dsid, vid, split)] = unit
        evaluators = a.evaluators or ["<default>"]
        planned = [pid for pid in a.protocols if split == "test" or self._programs[pid].needs_dev]
        if planned and self._counts_only:  # every protocol of the unit shares its answer requests: count them once
            self._count_answers(ctxs)
        for pid in planned:
            self._plan_protocol(unit, pid, evaluators, n_items, ds)
        fu = self._followups
        for eid in evaluators:
            if not fu.evaluator_new((mid, dsid, vid, split), self.spec.get(eid).params() if eid in self.spec.objects else eid):
                continue  # the same evaluator in another audit of this unit: the same follow-ups
            for target, role, kind, count in _evaluator_followups(self.spec, eid, mid, ctxs, n_items):
                self._deferred[(target, eid, role, kind)] += count
                fu.note_evaluator(target, eid, role, kind, _evaluator_budget(self.spec, eid, kind))
        if self.lean:
            self._release(unit, self._keep_ctx)

    def _plan_protocol(self, unit: Unit, pid: str, evaluators: list[str], n_items: int, ds: DatasetItems | None) -> None:
        """One protocol of a unit: the stage-1 requests of every item (or, without data, their
        count from the declared size), a cell per evaluator (test split), the naive request count
        and the protocol's stage-2 follow-ups."""
        prog = self._programs[pid]
        mid, ctxs = unit.model, unit.contexts
        per_item = self._stage1_requests(pid, prog, ctxs)
        if not self.lean:
            unit.stage1[pid] = per_item
        if ds is None and n_items:
            key = (mid, unit.dataset, unit.variant, unit.split)
            self._est1[(key, "answer")] = (mid, "generate", n_items)
            for role, kind in _stage1_roles(prog).items():
                # protocols asking the same role of one prompt share it (token_norm, token_raw)
                self._est1[(key, role, kind)] = (mid, kind, n_items)
        n1 = len(per_item[0]) if per_item else 1 + _stage1_width(prog)
        roles2 = prog.roles2(ctxs[0]) if ctxs else _roles2_without_data(prog)
        for eid in evaluators:
            extra2 = sum(f[3] for f in _evaluator_followups(self.spec, eid, mid, ctxs, n_items))
            self._naive += n_items * (n1 + len(roles2)) + extra2
            if unit.split == "test":
                self._cells.append(self._cell(unit.audit, mid, unit.dataset, unit.variant, pid, eid, n_items, ds))
        # stage-2 requests are per item and protocol; the evaluator ones per evaluator
        # follow-ups are built from the answer as the audit's first evaluator reads it
        spec = self.spec
        first = spec.get(evaluators[0]).params() if evaluators[0] in spec.objects else evaluators[0]
        ukey = (mid, unit.dataset, unit.variant, unit.split, repr(first))
        for role, kind in self._followups.protocol_roles(ukey, pid, prog, ctxs, roles2, self._unique).items():
            self._deferred[(mid, pid, role, kind)] += n_items

    def _stage1_requests(self, pid: str, prog, ctxs: list[ItemCtx]) -> list[dict[str, Request]]:
        """Per item {role: request} (the answer request and the protocol's own), each request
        counted once by id; a lean plan keeps only the first item's (its width). Stops at the
        first item the protocol cannot use (E163/E164)."""
        if self._counts_only:
            return self._count_stage1(pid, prog, ctxs)
        per_item = []
        unique, lean, count = self._unique, self.lean, self._count_request
        stage1 = prog.stage1
        for ctx in ctxs:
            try:
                reqs = {"answer": ctx.answer_request(), **stage1(ctx)}
            except ValueError as e:  # the item lacks what the protocol reads
                self._item_error(pid, e)
                break
            if not lean or not per_item:
                per_item.append(reqs)
            for role, r in reqs.items():
                if r.id not in unique:
                    count(r, main=True)
                elif not lean and unique[r.id] is not r:  # keep one object per request id
                    reqs[role] = unique[r.id]
        return per_item

    def _count_answers(self, ctxs: list[ItemCtx]) -> None:
        """A counting plan: the answer requests of a unit's items, once per unit."""
        unique, count = self._unique, self._count_request
        for ctx in ctxs:
            r = ctx.answer_request()
            if r.id not in unique:
                count(r, main=True)

    def _count_stage1(self, pid: str, prog, ctxs: list[ItemCtx]) -> list[dict[str, Request]]:
        """:meth:`_stage1_requests` of a counting plan (lean, no sink): the protocol's own requests
        of every item are counted (the answer requests were, by :meth:`_count_answers`); the first
        item's {role: request} is returned (the unit's width)."""
        first: list[dict[str, Request]] = []
        unique, count, stage1 = self._unique, self._count_request, prog.stage1
        for ctx in ctxs:
            try:
                own = stage1(ctx)
            except ValueError as e:  # the item lacks what the protocol reads
                self._item_error(pid, e)
                break
            if not first:
                first.append({"answer": ctx.answer_request(), **own})
            for r in own.values():
                if r.id not in unique:
                    count(r, main=True)
        return first

    def _count_request(self, r: Request, main: bool = False) -> Request | None:
        """Count a stage-1 request once by id (kinds, per-model token sums, the sink) and return
        the one object kept for its id (``r`` itself in a lean plan). ``main``: a request of the
        main loop, whose tokens also go into the plan's ``token_estimate``."""
        rid = r.id
        if rid in self._unique:
            return r if self.lean else self._unique[rid]
        self._unique[rid] = None if self.lean else r
        pt, gt = _estimate_tokens(r)
        if main:
            self._tokens[0] += pt
            self._tokens[1] += gt
        self._kinds[(r.model, r.kind)] += 1
        self._shapes[(r.model, r.kind, call_shape(r.kind, r.p))] += 1
        acc = self._per_model.get(r.model)
        if acc is None:
            acc = self._per_model[r.model] = [0, 0, 0, 0]
        acc[0] += pt
        acc[1] = max(acc[1], gt)
        acc[2] += 1
        acc[3] += gt
        if self.sink is not None:
            self.sink(r)
        return r

    def _assemble(self) -> Plan:
        """The Plan of what the build collected (its hash covers cells, counts and requests)."""
        spec = self.spec
        models = {mid: {"engine": _engine_of(spec, mid), "path": _path_of(spec, mid), "chat": model_info(spec, mid).chat}
                  for mid in spec.of_kind("model")}
        for mid, first in self._runs_as.items():
            models[mid]["shares_requests_of"] = first
        deferred = [{"model": m, "source": s, "role": r, "kind": k, "count": c}
                    for (m, s, r, k), c in sorted(self._deferred.items())]
        return Plan(
            version=PLAN_VERSION, spec_path=str(spec.entry), spec_hash=_spec_hash(spec), seed=spec.settings.seed,
            cells=self._cells, requests=[] if self.lean else list(self._unique.values()), deferred=deferred,
            naive_request_count=self._naive, datasets=self._ds_info, estimated=self._estimated, notes=self.notes,
            token_estimate={"prompt_tokens": self._tokens[0], "generated_tokens_max": self._tokens[1]}, models=models,
            request_counts=dict(self._kinds), lean=self.lean, call_shapes=dict(self._shapes),
        )

    def _estimate_missing(self, plan: Plan) -> None:
        """Stage-1 counts of datasets without data (``plan.estimated_stage1``): from the declared
        sizes, or, when the spec's templates render them, from a second plan on placeholder items
        so that request sharing between cells is counted as the real run would."""
        spec = self.spec
        by_kind: Counter = Counter()
        for m, k, n in self._est1.values():
            by_kind[(m, k)] += n
        missing = frozenset(d for d, i in self._ds_info.items() if not i.get("available")) | frozenset(
            d for d in self.data if self.data[d] is None and d not in self.failed)
        missing |= frozenset(spec.get(d).value.dev for d in missing
                             if getattr(spec.get(d).value, "dev", None) and self.data.get(spec.get(d).value.dev) is None)
        if self._estimated and missing and not self.synthetic:
            self.step(f"counting requests on placeholder items for {', '.join(sorted(missing))} (no data)")
            exact = self._estimate_with_placeholders(missing)
            if exact is not None:
                by_kind, plan.deferred = exact
                plan.notes.append(PLACEHOLDER_NOTE)
        plan.estimated_stage1 = [{"model": m, "kind": k, "count": c} for (m, k), c in sorted(by_kind.items()) if c]

    def _first_windows_of(self, programs: dict) -> dict[tuple[str, str, str], int]:
        """(model, dataset, variant) -> the widest first-position window any audit's protocol
        reads from the greedy answer generation (``Program.first_window``): the answer request
        of those prompts carries it, so the one-token window calls fold into it (one engine pass
        per prompt, the same request in every audit)."""
        out: dict[tuple[str, str, str], int] = {}
        for aobj in self.spec.of_kind("audit").values():
            a = aobj.value
            for pid in a.protocols:
                if pid not in programs:
                    programs[pid] = program_for(self.spec.get(pid), self.spec)
            k = max((programs[pid].first_window() for pid in a.protocols), default=0)
            if k:
                for mid in a.models:
                    for dsid in a.datasets:
                        for vid in a.variants:
                            out[(mid, dsid, vid)] = max(out.get((mid, dsid, vid), 0), k)
        return out

    def _estimate_with_placeholders(self, missing: frozenset[str]):
        """Plan again with placeholder items for the ``missing`` datasets, so request sharing
        between cells is counted as the real run would: ((model, kind) -> estimated stage-1
        count beyond this plan's exact requests, deferred list), or None when the spec's
        templates need fields the placeholders lack (the role-count estimate stands)."""
        try:
            read = {d: ds for d, ds in self.data.items() if ds is not None and not ds.path.startswith("hub:")}
            planner = Planner(self.spec, None, load_data=True, limit=self.limit, synthetic=missing, lean=True,
                              data_files={d: Path(ds.path) for d, ds in read.items()},
                              data_meta={d: ds.meta for d, ds in read.items()})
            synth = planner.build()
            self._followups.gen.update(planner._followups.gen)
        except Exception:  # noqa: BLE001 - placeholders cannot render: keep the simpler estimate
            return None
        extra = Counter(synth.request_counts)
        extra.subtract(self._kinds)
        return extra, synth.deferred

    def _cross_targets(self) -> tuple[set, set]:
        """Units whose item contexts the cross stage reads: (units whose sampled answers it plans,
        needing every context; units it only counts, needing the first context and the number).
        Supersets: every unit the spec's audits could have, whatever data loads."""
        keys = set()
        for aid, aobj in self.spec.of_kind("audit").items():
            a = aobj.value
            keys.update((aid, m, d, v, "test") for m in a.models for d in a.datasets for v in a.variants)
        every, first = set(), set()
        for target, sources in cross_sources(self.spec, SimpleNamespace(units=keys)).items():
            (every if any(src.samples for src in sources) else first).add(target)
        return every, first

    def _release(self, unit: "Unit", keep_ctx: tuple[set, set]) -> None:
        """Lean plan: drop what a finished unit holds unless the cross stage reads its contexts;
        the answer prompts and requests other audits reuse stay (ItemCtx.extras, compactly)."""
        key = (unit.model, unit.dataset, unit.variant, unit.split)
        seen = self._ctx_seen.get(key)
        if seen is unit.contexts:
            self._ctx_seen[key] = _Reuse(unit.contexts)
        ukey = (unit.audit, unit.model, unit.dataset, unit.variant, unit.split)
        if ukey not in keep_ctx[0]:
            unit.n_released = len(unit.contexts)
            unit.contexts = unit.contexts[:1] if ukey in keep_ctx[1] else []

    def _plan_cross(self, units: dict, programs: dict, unique: dict[str, Request], deferred: Counter) -> int:
        """The cross stage (auditlang/plan/cross.py): sampled answers of ``robustness(samples=P)``
        are stage-1 requests of their unit; the candidate-scoring follow-ups are counted in
        ``deferred`` (source ``cross:<protocol>``). Returns the naive requests added."""

        spec = self.spec
        added = 0
        for target, sources in cross_sources(spec, SimpleNamespace(units=units)).items():
            unit = units[target]
            ctxs = unit.contexts
            no_data = self.data.get(unit.dataset) is None
            n_ctx = len(ctxs) if unit.n_released is None else unit.n_released
            n = (estimated_size(spec.get(unit.dataset)) or 0) if no_data and unit.split == "test" else n_ctx
            for src in sources:
                width = 1
                if src.protocol is not None:  # wrong_from: one supplied-answer request per item
                    if ctxs:
                        self._followups.note_candidates(unit.model, f"cross:{src.protocol}", programs[src.protocol], ctxs[0],
                                                        supplied=True)
                    for role, kind in programs[src.protocol].cross_roles().items():
                        deferred[(unit.model, f"cross:{src.protocol}", role, kind)] += n
                        added += n
                    continue
                if src.samples:
                    prog = programs.get(src.samples) or program_for(spec.get(src.samples), spec)
                    programs.setdefault(src.samples, prog)
                    width = prog.sample_count()
                    for ctx in ctxs:
                        for r in prog.stage1(ctx).values():
                            added += 1
                            self._count_request(r)
                    if no_data and n:  # without data: the sampled answers, from the declared size
                        for role, kind in _stage1_roles(prog).items():
                            self._est1[(target[1:], f"samples:{src.samples}", role, kind)] = (unit.model, kind, n)
                            added += n
                    if src.grouping and spec.get(src.grouping).ctor == "llm_judge":
                        deferred[(spec.get(src.grouping).value.judge, f"cross:{src.grouping}", "grouping", "generate")] += n
                pids = spec.get(target[0]).value.protocols
                for pid in pids:
                    prog = programs[pid]
                    if not prog.answer_conditioned() or not n:
                        continue
                    base = getattr(prog, "base", None)
                    if base is not None and base.obj.id in pids:
                        continue  # platt over a protocol of the audit: the same requests
                    roles = prog.roles2(ctxs[0]) if ctxs else _roles2_without_data(prog)
                    if src.key.startswith("variant:") and ctxs:  # the source's own follow-up: counted there
                        dup = self._followups.duplicated_roles(prog, ctxs[0], self._first_context(src.unit))
                        roles = {r: k for r, k in roles.items() if r not in dup}
                    if ctxs:
                        self._followups.note_candidates(unit.model, f"cross:{pid}", prog, ctxs[0])
                    for role, kind in roles.items():
                        deferred[(unit.model, f"cross:{pid}", role, kind)] += n * width
                        added += n * width
        return added

    def _first_context(self, key: tuple) -> ItemCtx | None:
        """The first item's context of unit ``key`` (audit, model, dataset, variant, split), or None."""
        cache = self.__dict__.setdefault("_first_ctx", {})
        if key not in cache:
            aid, mid, dsid, vid, split = key
            ds = self.data.get(dsid)
            ctxs = self._contexts(aid, mid, dsid, vid, split, ds) if ds is not None else []
            cache[key] = ctxs[0] if ctxs else None
        return cache[key]

    def _item_error(self, pid: str, err: ValueError) -> None:
        """E164: a data item the protocol cannot use (no gold answer, no choices), once per protocol."""
        if pid in self.failed_protocols:
            return
        self.failed_protocols.add(pid)
        if isinstance(err, TemplateError):  # a protocol template that does not render for this item
            self.bag.error("E163", f"rendering protocol '{pid}': {err.message}", self.spec.get(pid).span,
                           hint=err.hint or "the protocol's templates may use the item's fields and the protocol's "
                                            "variables (docs/prompts.md)")
            return
        self.bag.error("E164", str(err), self.spec.get(pid).span,
                       hint="fix the data, or use a protocol setting that does not need it (docs/protocols.md)")

    def _cell(self, aid, mid, dsid, vid, pid, eid, n_items, ds) -> Cell:
        spec = self.spec
        objs = [spec.get(x).params() if x in spec.objects else x for x in (mid, dsid, vid, pid, eid)]
        h = content_hash(objs, ds.indices if ds is not None else None)
        if ds is not None and getattr(spec.get(dsid).value, "fallback", None):  # which source was read
            h = content_hash(h, ds.meta.get("source"), ds.meta.get("content_sha256") or ds.meta.get("sha256"))
        cid = f"{aid}/{mid}/{dsid}/{vid}/{pid}/{eid}"
        return Cell(cid, aid, mid, dsid, vid, pid, eid, h, n_items, 0, ds is None)


def check_capabilities(spec: Spec, programs: dict | None = None, bag: DiagnosticBag | None = None) -> DiagnosticBag:
    """E172: a model whose engine cannot serve a request kind one of its cells needs (e.g.
    continuation_logprobs on an OpenAI chat endpoint). Needs no data: the kinds come from each
    protocol program's roles, so `auditc check` reports it too. ``programs``: protocol id ->
    program, built here when missing."""

    bag = bag if bag is not None else DiagnosticBag()
    programs = programs if programs is not None else {}
    bad: dict[tuple[str, str], list[str]] = {}
    for aid, aobj in spec.of_kind("audit").items():
        a = aobj.value
        for mid in a.models:
            engine = _engine_of(spec, mid)
            caps = ENGINE_CAPABILITIES.get(engine)
            if caps is None:
                continue
            if engine == "openai" and getattr(spec.get(mid).value, "server", "generic") == "vllm":
                caps = set(caps) | {"continuation_logprobs", "constrained_choice"}
            for pid in a.protocols:
                if pid not in programs:
                    programs[pid] = program_for(spec.get(pid), spec)
                prog = programs[pid]
                # roles2 reads no item today; None stands for "any item" (the kinds are static)
                kinds = {"generate"} | set(prog.stage1_roles().values()) | set(prog.roles2(None).values())
                if getattr(spec.get(pid).value, "wrong_from", None):  # supplied wrong answers (cross stage)
                    kinds |= set(getattr(prog, "cross_roles", dict)().values())
                for eid in a.evaluators or ["<default>"]:
                    missing = set(kinds) | {k for m, _, k, _ in _evaluator_followups(spec, eid, mid, [], 0) if m == mid}
                    for k in sorted(missing - set(caps)):
                        for dsid in a.datasets:
                            for vid in a.variants:
                                bad.setdefault((mid, k), []).append(f"{aid}/{mid}/{dsid}/{vid}/{pid}/{eid}")
    for (mid, kind), cell_ids in sorted(bad.items()):
        shown = ", ".join(cell_ids[:3]) + (f" and {len(cell_ids) - 3} more" if len(cell_ids) > 3 else "")
        bag.error("E172", f"model '{mid}' uses the {_engine_of(spec, mid)} engine, which cannot serve "
                  f"{kind} requests needed by cell(s) {shown}", spec.get(mid).span,
                  hint="use the hf or vllm engine for this model, or drop the protocol/evaluator that needs it")
    return bag


def _followup(ector: str | None) -> tuple[str, str] | None:
    """(role, kind) of an evaluator's own model request (constrained, llm_judge), else None."""
    return REGISTRY.get("evaluator", ector).meta.get("followup") if ector else None


def _spec_hash(spec: Spec) -> str:
    """Hash of the spec and every file it imports, keyed by paths relative to the project root."""

    keyed = {}
    for f, h in spec.files.items():
        p = Path(f)
        for base, prefix in ((stdlib_root().resolve(), "stdlib/"), (spec.root, "")):
            try:
                keyed[prefix + p.resolve().relative_to(base).as_posix()] = h
                break
            except ValueError:
                continue
        else:
            keyed[p.name] = h
    return content_hash(keyed)


PLACEHOLDER_NOTE = ("counts for datasets without data come from placeholder items of the declared sizes "
                    "(exact unless the prompts of different items coincide); tokens are not estimated")


def _synthetic_items(spec: Spec, dsid: str) -> DatasetItems:
    """Placeholder items of a dataset's declared size (sample + dev_sample + spare rows for
    few-shot pools), each with its own question, choices and answer."""
    v = spec.get(dsid).value
    n = estimated_size(spec.get(dsid)) or 0
    total = n + (v.dev_sample or 0) + 64
    mc = getattr(v, "task", "multiple_choice") != "open_qa"
    width = len(v.labels) if getattr(v, "labels", None) else 4
    items = []
    for i in range(total):
        choices = [f"choice {j} of item {i}" for j in range(width)] if mc else None
        items.append({"id": f"{dsid}_placeholder_{i}", "question": f"placeholder question {i} of {dsid}",
                      "choices": choices, "answer": choices[0] if mc else f"answer {i}",
                      "answer_index": 0 if mc else None, "aliases": None})
    return DatasetItems(dsid, f"placeholder:{dsid}", items, list(range(n)))


def _roles2_without_data(prog) -> dict[str, str]:
    """Follow-up roles when no item is at hand (most protocols' roles do not depend on it)."""
    try:
        return dict(prog.roles2(None))
    except Exception:  # noqa: BLE001 - a protocol whose roles need an item: not estimated
        return {}


def _stage1_roles(prog) -> dict[str, str]:
    try:
        return dict(prog.stage1_roles())
    except AttributeError:
        return {}


def _followup_tokens(plan: Plan, per_model: dict[str, list[int]], budgets: dict | None = None) -> dict[str, int]:
    """Rough token estimate of the follow-up requests (built at run time from stage-1 outputs):
    each re-sends about its model's mean stage-1 prompt plus that model's answer budget
    (``per_model``: model -> [stage-1 prompt tokens, largest generation budget, requests]) and
    generates at most its own budget (``budgets``: (model, source, role, kind) -> tokens, from
    the follow-up built for a placeholder answer; else the model's largest stage-1 budget)."""
    prompt = gen = 0
    budgets = budgets or {}
    for d in plan.deferred:
        acc = per_model.get(d["model"])
        if not acc or not acc[2]:
            continue
        prompt += d["count"] * (acc[0] // acc[2] + acc[1])
        gen += d["count"] * budgets.get((d["model"], d["source"], d["role"], d["kind"]), acc[1])
    return {"prompt_tokens": prompt, "generated_tokens_max": gen} if prompt else {}


def _tokens_by_model(plan: Plan, per_model: dict[str, list[int]], budgets: dict | None = None) -> dict[str, dict[str, int]]:
    """Per model, the token estimate ``auditc plan``'s GPU time is computed from (plan/gputime.py):
    stage-1 prompt tokens (chars/4) and generated tokens at most, and the follow-ups' as
    :func:`_followup_tokens` counts them, with the requests of each."""
    out = {m: {"prompt_tokens": acc[0], "generated_tokens_max": acc[3], "requests": acc[2],
               "followup_prompt_tokens": 0, "followup_generated_max": 0, "followup_requests": 0}
           for m, acc in per_model.items()}
    budgets = budgets or {}
    for d in plan.deferred:
        acc, row = per_model.get(d["model"]), out.get(d["model"])
        if not acc or not acc[2] or row is None:
            continue
        row["followup_prompt_tokens"] += d["count"] * (acc[0] // acc[2] + acc[1])
        row["followup_generated_max"] += d["count"] * budgets.get((d["model"], d["source"], d["role"], d["kind"]), acc[1])
        row["followup_requests"] += d["count"]
    return out


def _evaluator_budget(spec: Spec, eid: str, kind: str) -> int:
    """Tokens one evaluator follow-up may generate: the judge's ``max_tokens``, one for a choice."""
    if kind == "generate":
        return int(getattr(spec.get(eid).value, "max_tokens", 0) or 0)
    return 1 if kind in ("choice_logprobs", "constrained_choice") else 0


def _stage1_width(prog) -> int:
    try:
        return len(prog.stage1_roles())
    except AttributeError:
        return 0


def _estimate_tokens(r: Request) -> tuple[int, int]:
    """Cheap estimate: characters / 4 for the prompt; the budget for generation."""
    p = r.prompt
    chars = len(p.text) if p.text is not None else sum(len(m.content) for m in p.messages or ())
    return chars // 4 + 1, _generated_budget(r.kind, r.params)


_BUDGETS: dict[int, tuple[Any, int]] = {}  # id(params) -> (params, budget): requests of one maker share params


def _generated_budget(kind: str, params: tuple) -> int:
    """Tokens a request may generate: max_tokens x n for generate, 1 for a label readout."""
    if kind != "generate":
        return 1 if kind in ("choice_logprobs", "constrained_choice") else 0
    hit = _BUDGETS.get(id(params))
    if hit is not None and hit[0] is params:
        return hit[1]
    d = dict(params)
    gen = int(d.get("max_tokens", 0) or 0) * int(d.get("n", 1) or 1)
    if len(_BUDGETS) > 10_000:
        _BUDGETS.clear()
    _BUDGETS[id(params)] = (params, gen)
    return gen


def _engine_of(spec: Spec, mid: str) -> str:
    return declared_model(spec, mid)[0]


def _path_of(spec: Spec, mid: str) -> str:
    return declared_model(spec, mid)[1]


def build_plan(spec: Spec, data_root: str | None = None, load_data: bool = True, limit: int | str | None = None,
               step=None, no_download: dict[str, str] | None = None, lean: bool = False, sink=None) -> Plan:
    """Compile a resolved spec into a plan. Raises CompileError with plan-time diagnostics.
    ``no_download``: see :class:`Planner`; ``lean`` / ``sink``: see :class:`Planner` (a plan to
    count and print, not to run)."""
    return Planner(spec, data_root, load_data, limit=limit, step=step, no_download=no_download,
                   lean=lean, sink=sink).build()
