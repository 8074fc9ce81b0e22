"""Checks of a resolved spec that need no data but the later stages' code, so they live here
and not in the resolver: every template object compiles (E160) and every model's engine serves
the request kinds its cells need (E172). `auditc check` runs them after the resolver, the
planner before (templates) and after (capabilities) it builds the cells."""

from __future__ import annotations

from auditlang.core.capabilities import ENGINE_CAPABILITIES
from auditlang.core.diagnostics import DiagnosticBag
from auditlang.prompts.render import TemplateError
from auditlang.prompts.templates import compile_obj
from auditlang.protocols.registry import program_for
from auditlang.resolve.spec import Spec


def static_checks(spec: Spec) -> DiagnosticBag:
    """Every data-free check of this module, in one bag (templates first: programs compile them)."""
    bag = check_templates(spec)
    if not bag.errors:
        check_capabilities(spec, bag=bag)
    return bag


def check_templates(spec: Spec, bag: DiagnosticBag | None = None) -> DiagnosticBag:
    """E160: every template object compiles (Jinja syntax, a readable file, text or file= but not both)."""
    bag = bag if bag is not None else DiagnosticBag()
    for t in spec.of_kind("template").values():
        try:
            compile_obj(spec, t)
        except TemplateError as e:
            where = f", line {e.line}" + (f", col {e.col}" if e.col is not None else "") if e.line is not None else ""
            bag.error("E160", f"template '{t.id}'{where}: {e.message}", t.span,
                      hint=e.hint or "templates are Jinja2 (docs/prompts.md): close every {{ ... }} and {% ... %}")
    return bag


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
                for eid in a.evaluators or ["<default>"]:
                    missing = set(kinds)
                    if eid in spec.objects and spec.get(eid).ctor == "constrained":
                        missing.add("constrained_choice")
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




def _engine_of(spec: Spec, mid: str) -> str:
    o = spec.get(mid)
    return o.value.engine if o.ctor == "embedded" else o.ctor
