"""Semantic checks on a resolved spec that span several objects (task/evaluator fit, audits)."""

from __future__ import annotations

import os
from pathlib import Path

from auditlang.core.confine import inside, local_model_path, model_outside_hint, model_roots, outside_hint
from auditlang.core.diagnostics import DiagnosticBag, Span, did_you_mean
from auditlang.core.registry import REGISTRY
from auditlang.prompts.render import TemplateError
from auditlang.resolve import schema as S
from auditlang.resolve.models import model_attribute
from auditlang.resolve.protocol_checks import check_protocols
from auditlang.resolve.bootstrap_units import check_units
from auditlang.resolve.grid_rows import check_grid_rows
from auditlang.resolve.spec import Spec
from auditlang.resolve.templates import compile_obj



def check_spec(spec: Spec, bag: DiagnosticBag, confine_models: bool = True) -> None:
    check_templates(spec, bag)
    if confine_models:
        check_model_paths(spec, bag)
    check_protocols(spec, bag)
    for ds in spec.of_kind("dataset").values():
        v = ds.value
        if (v.filter_field is None) != (v.filter_in is None):
            given, other = ("filter_field", "filter_in") if v.filter_in is None else ("filter_in", "filter_field")
            bag.error("E159", f"dataset '{ds.id}': {given}= without {other}= (rows are kept whose filter_field "
                      "value is in filter_in)", ds.param_span(given), hint=f"add {other}=..., or drop {given}=")
    for ev in spec.of_kind("evaluator").values():
        if ev.ctor == "loglik_argmax" and ev.value.target == "letter" and ev.value.normalise != "none":
            bag.error("E159", f"evaluator '{ev.id}': normalise={ev.value.normalise} divides an option text's "
                      "log-likelihood by its length, but target=letter scores one label token",
                      ev.param_span("normalise"), hint="add target=option (lm-eval acc_norm: normalise=chars), "
                      "or drop normalise")
    for po in spec.of_kind("protocol").values():
        if po.ctor == "token_prob" and po.value.readout != "first_token" and po.value.label_form != "auto":
            bag.error("E159", f"protocol '{po.id}': label_form={po.value.label_form} chooses the label token of "
                      f"readout=first_token, but readout={po.value.readout} scores the answer text",
                      po.param_span("label_form"), hint="drop label_form, or use readout=first_token")
    check_units(spec, bag)
    settings = spec.of_kind("settings")
    if len(settings) > 1:
        second = sorted(settings.values(), key=lambda o: (o.span.file, o.span.line))[1]
        bag.error("E150", "settings declared more than once", second.span, hint="merge them into one `settings` block")
    for ds in spec.of_kind("dataset").values():
        _check_sample_per(ds, bag)
        if ds.value.gold is None and (ds.value.choices is None or ds.value.gold_index is None):
            why = "choices=none as well" if ds.value.choices is None else "gold_index=none as well"
            bag.error("E159", f"dataset '{ds.id}': gold=none takes the gold from the options by gold_index=, but {why}",
                      ds.param_span("gold"), hint="name the field holding the gold answer text, e.g. gold=\"answer\"")
    for audit in spec.of_kind("audit").values():
        a = audit.value
        for fld in ("models", "datasets", "variants", "protocols"):
            if not getattr(a, fld):
                bag.error("E151", f"audit '{audit.id}' has no {fld}", audit.param_span(fld) if fld in dict(audit.param_spans) else audit.span,
                          hint=f"add `{fld} = [...]` to the audit block")
        tasks = {spec.get(d).value.task for d in a.datasets if d in spec.objects}
        for v in a.variants:
            if v not in spec.objects:
                continue
            var = spec.get(v).value
            for t in tasks:
                if getattr(var, t) is None and var.template is None:
                    bag.error("E152", f"variant '{v}' has no template for task type {t} (used by audit '{audit.id}')",
                              spec.get(v).span, hint=f"add `{t}=...` or `template=...` to the variant")
        for e in a.evaluators:
            if e not in spec.objects:
                continue
            ctor = spec.get(e).ctor
            if REGISTRY.get("evaluator", ctor).meta.get("reads") == "labels" and "open_qa" in tasks:
                text = [x.name for x in REGISTRY.entries("evaluator") if x.meta.get("reads") == "text"]
                bag.error("E153", f"evaluator '{e}' ({ctor}) reads option labels but audit '{audit.id}' has an open-QA dataset",
                          audit.param_span("evaluators"), hint=f"use {', '.join(text[:-1])} or {text[-1]} for open QA")
        for p in a.protocols:
            if p not in spec.objects:
                continue
            po = spec.get(p)
            if po.ctor == "token_prob" and po.value.readout == "first_token" and "open_qa" in tasks:
                if po.value.normalise == "label_set":
                    bag.error("E154", f"protocol '{p}' normalises over a label set, but audit '{audit.id}' has an "
                              "open-QA dataset", po.span,
                              hint="use readout=T1 or T2 (answer span) for open QA, or normalise=raw")
                elif po.value.window == "full":
                    bag.error("E154", f"protocol '{p}': window=full scores the option labels, but audit '{audit.id}' "
                              "has an open-QA dataset", po.param_span("window"),
                              hint="use readout=T1 or T2 (answer span) for open QA, or window=top_k")
            if po.ctor in ("nota",) and tasks - {"multiple_choice"}:
                bag.error("E155", f"protocol '{p}' (nota) needs multiple-choice datasets", po.span,
                          hint="use nota only in audits whose datasets are task=multiple_choice")
            wrong_from = getattr(po.value, "wrong_from", None) or []
            if wrong_from and po.value.provenance != "plausible_wrong":
                bag.error("E158", f"protocol '{p}': wrong_from= supplies plausible-wrong answers, but provenance is "
                          f"{po.value.provenance}", po.param_span("wrong_from"), hint="add provenance=plausible_wrong")
            for w in wrong_from:
                if w in spec.objects and w not in a.models:
                    bag.error("E158", f"protocol '{p}' takes wrong answers from model '{w}', which audit '{audit.id}' "
                              "does not run", audit.param_span("protocols"),
                              hint=f"add {w} to the audit's models (its answers to the same items are needed)")
    for comp in spec.of_kind("compare").values():
        if comp.ctor == "grid_rows":
            check_grid_rows(spec, comp, bag)
        audit_id = comp.value.audit
        if audit_id not in spec.objects:
            continue
        a = spec.get(audit_id).value
        ref_id = getattr(comp.value, "reference_audit", None)
        ref = spec.get(ref_id).value if ref_id in spec.objects and spec.get(ref_id).kind == "audit" else a
        for fld, pool in (("variants", a.variants), ("probes", a.protocols), ("configs", a.protocols),
                          ("protocols", a.protocols), ("datasets", a.datasets), ("reference_variants", ref.variants),
                          ("models", a.models)):
            for x in getattr(comp.value, fld, []) or []:
                if x not in pool:
                    what = "protocols" if fld in ("probes", "configs", "protocols") else fld.replace("reference_", "")
                    where = ref_id if fld == "reference_variants" and ref is not a else audit_id
                    bag.error("E156", f"compare '{comp.id}': '{x}' is not in audit '{where}' {what}",
                              comp.param_span(fld), hint=f"audit '{where}' has: {', '.join(pool)}")
        if comp.ctor == "evaluator_repair":
            _check_repair_reference(comp, a, audit_id, bag, ref, ref_id if ref is not a else audit_id)
        for fld in ("verbal", "token", "raw", "norm", "own", "gold", "plausible", "off_type", "readout"):
            x = getattr(comp.value, fld, None)
            if x and x not in a.protocols:
                bag.error("E156", f"compare '{comp.id}': protocol '{x}' is not in audit '{audit_id}'", comp.param_span(fld),
                          hint=f"audit '{audit_id}' has: {', '.join(a.protocols)}")
        if comp.ctor == "robustness":
            _check_robustness(spec, comp, a, bag)
        if comp.ctor == "aligned":
            _check_aligned(spec, comp, bag)
        if comp.ctor == "case_study":
            _check_case_study(spec, comp, bag)
        if comp.ctor == "contrast":
            _check_contrast(comp, a, audit_id, bag)
        if getattr(comp.value, "group_by", None):
            _check_group_by(spec, comp, a, audit_id, bag)


def _check_aligned(spec, comp, bag: DiagnosticBag) -> None:
    """E156: a pair of two models that every pooled audit runs; knowledge / reasoning datasets of those audits."""
    c = comp.value
    audits = [(aid, spec.get(aid).value) for aid in c.all_audits()
              if aid in spec.objects and spec.get(aid).kind == "audit"]
    for pair in c.pairs:
        if len(pair) != 2 or pair[0] == pair[1]:
            bag.error("E156", f"compare '{comp.id}': a pair names two different models, got [{', '.join(pair)}]",
                      comp.param_span("pairs"), hint="write pairs=[[model_1, model_2], ...]")
            continue
        for aid, a in audits:
            for m in pair:
                if m not in a.models:
                    bag.error("E156", f"compare '{comp.id}': pair model '{m}' is not in audit '{aid}' models",
                              comp.param_span("pairs"), hint=f"audit '{aid}' has: {', '.join(a.models)}")
    pooled = [d for _, a in audits for d in a.datasets]
    for fld in ("knowledge", "reasoning"):
        for d in getattr(c, fld):
            if d not in pooled:
                bag.error("E156", f"compare '{comp.id}': {fld} dataset '{d}' is in none of the pooled audits "
                          f"({', '.join(aid for aid, _ in audits)})", comp.param_span(fld),
                          hint=f"their datasets: {', '.join(dict.fromkeys(pooled))}")
    both = set(c.knowledge) & set(c.reasoning)
    if both:
        bag.error("E156", f"compare '{comp.id}': dataset(s) {', '.join(sorted(both))} both knowledge and reasoning",
                  comp.param_span("reasoning"), hint="003 §5.1 puts each dataset in one category")


def _check_sample_per(ds, bag: DiagnosticBag) -> None:
    """``sample_per=[...]``: one positive count per ``filter_in`` value; ``sample`` is their sum."""
    v = ds.value
    if v.sample_per is None:
        return
    where = ds.param_span("sample_per")
    if not v.filter_field or v.filter_in is None:
        bag.error("E123", f"dataset '{ds.id}': sample_per= gives one sample size per filter_in value, but the dataset "
                  "has no filter_field / filter_in", where, hint='add filter_field="subject", filter_in=[...]')
        return
    if len(v.sample_per) != len(v.filter_in):
        bag.error("E123", f"dataset '{ds.id}': sample_per= has {len(v.sample_per)} sizes for {len(v.filter_in)} "
                  "filter_in values", where, hint="give one sample size per filter_in value, in the same order")
    if any(n < 1 for n in v.sample_per):
        bag.error("E123", f"dataset '{ds.id}': every sample_per= size must be at least 1", where)
    elif sum(v.sample_per) > S.MAX_ITEMS:
        bag.error("E123", f"dataset '{ds.id}': sample_per= sums to more than {S.MAX_ITEMS:,} items", where,
                  hint=S.VALUE_HINTS["sample"])
    if v.sample is not None and v.sample != sum(v.sample_per):
        bag.error("E123", f"dataset '{ds.id}': sample={v.sample} but sample_per= sums to {sum(v.sample_per)}",
                  ds.param_span("sample"), hint=f"drop sample= or set it to {sum(v.sample_per)}")


def _check_repair_reference(comp, audit, audit_id: str, bag: DiagnosticBag, ref=None, ref_id: str = "") -> None:
    """evaluator_repair: exactly one of reference_variant= / reference_variants=, variants of the
    reference audit (``ref``: ``reference_audit=``, default the compare's audit), which must score
    the same generations with the base evaluator (the audit's first protocol)."""
    c = comp.value
    ref, ref_id = (ref, ref_id) if ref is not None else (audit, audit_id)
    if ref is not audit:
        span = comp.param_span("reference_audit")
        if audit.protocols and audit.protocols[0] not in ref.protocols:
            bag.error("E156", f"compare '{comp.id}': reference audit '{ref_id}' lacks protocol '{audit.protocols[0]}' "
                      f"(audit '{audit_id}''s first, whose generations the repair reads)", span,
                      hint=f"audit '{ref_id}' has: {', '.join(ref.protocols)}")
        if c.base not in (ref.evaluators or []):
            bag.error("E156", f"compare '{comp.id}': reference audit '{ref_id}' does not score with the base evaluator "
                      f"'{c.base}'", span, hint=f"add {c.base} to audit '{ref_id}''s evaluators")
    if bool(c.reference_variant) == bool(c.reference_variants):
        bag.error("E159", f"compare '{comp.id}': give either reference_variant= (one variant) or reference_variants= "
                  f"(the mean over several), {'not both' if c.reference_variant else 'one is required'}",
                  comp.param_span("reference_variants" if c.reference_variants else "reference_variant") or comp.span,
                  hint="study 000 Table 1 uses the mean of the four non-format_change variants: reference_variants=[...]")
    for fld, pool, where in (("reference_variant", ref, ref_id), ("variant", audit, audit_id)):
        x = getattr(c, fld, None)
        if x and x not in pool.variants:
            bag.error("E156", f"compare '{comp.id}': '{x}' is not in audit '{where}' variants", comp.param_span(fld),
                      hint=f"audit '{where}' has: {', '.join(pool.variants)}")
    if c.variant in c.references():
        bag.error("E159", f"compare '{comp.id}': the repaired variant '{c.variant}' is also a reference variant",
                  comp.param_span("reference_variants" if c.reference_variants else "reference_variant"),
                  hint="the reference is the base evaluator's accuracy on the other variants")


def _check_contrast(comp, audit, audit_id: str, bag: DiagnosticBag) -> None:
    """E157: a contrast names exactly one axis, with two or more distinct names (evaluators the audit lists)."""
    c = comp.value
    given = [f for f in c.AXES if getattr(c, f)]
    if len(given) != 1:
        bag.error("E157", f"compare '{comp.id}': contrast() takes exactly one axis of {', '.join(c.AXES)}"
                  + (f", got {len(given)} ({', '.join(given)})" if given else ", got none"),
                  comp.param_span(given[1]) if len(given) > 1 else comp.span,
                  hint="e.g. contrast(AUDIT, models=[m1, m2]): the delta is m1 - m2 on the items both cells scored")
        return
    fld = given[0]
    names = getattr(c, fld)
    if len(set(names)) < 2:
        bag.error("E157", f"compare '{comp.id}': {fld}= names {len(set(names))} distinct {fld[:-1]}; a contrast "
                  "needs two", comp.param_span(fld), hint=f"write {fld}=[a, b] (the delta is a - b)")
    if fld == "evaluators":
        pool = list(audit.evaluators)
        for x in names:
            if x not in pool:
                bag.error("E156", f"compare '{comp.id}': '{x}' is not in audit '{audit_id}' evaluators",
                          comp.param_span(fld), hint=f"audit '{audit_id}' has: {', '.join(pool)}" if pool else
                          f"audit '{audit_id}' declares no evaluators (the default one only): list them in the audit")


def _check_group_by(spec: Spec, comp, audit, audit_id: str, bag: DiagnosticBag) -> None:
    """E157: ``group_by=[...]`` names each attribute once, and every model of the audit declares it
    (an undeclared one would form an "unspecified" group the study never reports)."""
    keys = list(comp.value.group_by)
    span = comp.param_span("group_by")
    for k in sorted({k for k in keys if keys.count(k) > 1}):
        bag.error("E157", f"compare '{comp.id}': group_by= names '{k}' twice", span, hint="name each attribute once")
    for k in dict.fromkeys(keys):
        if k == "model":
            continue
        missing = [m for m in audit.models if m in spec.objects and model_attribute(spec, m, k) is None]
        if missing:
            example = {"instruct": "instruct=true", "family": 'family="llama"', "size": "size=8.0",
                       "size_class": 'size_class="7-8B"'}[k]
            bag.error("E157", f"compare '{comp.id}': group_by={k}, but model{'s' if len(missing) > 1 else ''} "
                      f"{', '.join(repr(m) for m in missing)} of audit '{audit_id}' declare{'' if len(missing) > 1 else 's'} "
                      f"no {k}", span, hint=f"declare it on the model, e.g. {example}")


def _check_robustness(spec: Spec, comp, audit, bag: DiagnosticBag) -> None:
    """Study 002's answer samples must come from a self_consistency protocol (K sampled answers),
    and the answers it scores need a confidence protocol that reads the answer."""
    c = comp.value
    if c.samples and c.samples in spec.objects and spec.get(c.samples).ctor != "self_consistency":
        bag.error("E157", f"compare '{comp.id}': samples='{c.samples}' is a {spec.get(c.samples).ctor} protocol; "
                  "A-STB / A-SST need K sampled answers per item", comp.param_span("samples"),
                  hint="name a self_consistency(k=..., temperature=...) protocol, e.g. stdlib:s002 samples10")
    if c.grouping and c.grouping in spec.objects and not c.samples:
        bag.error("E157", f"compare '{comp.id}': grouping= groups sampled answers, but samples= is not given",
                  comp.param_span("grouping"), hint="add samples=<a self_consistency protocol>")
    if c.protocols:
        # 002 §5: VC's P-RB varies the confidence prompt with the answer prompt fixed (one variant)
        variants = list(c.variants) or list(audit.variants)
        if len(variants) > 1:
            where = comp.param_span("variants") if c.variants else comp.param_span("protocols")
            bag.error("E157", f"compare '{comp.id}': protocols= makes the confidence protocols the prompts of P-RB, "
                      f"which needs one fixed answer prompt, but it spans {len(variants)} variants "
                      f"({', '.join(variants)})", where,
                      hint="name one variant (variants=[...] with one entry), or drop protocols= to vary the prompts")
        if len(c.protocols) < 2:
            bag.error("E157", f"compare '{comp.id}': protocols= names {len(c.protocols)} protocol; P-RB needs at "
                      "least two prompts", comp.param_span("protocols"), hint="list two or more confidence protocols")
    for cid in c.pool:
        other = spec.objects.get(cid)
        if other is None or other.kind != "compare" or other.ctor != comp.ctor or cid == comp.id:
            bag.error("E157", f"compare '{comp.id}': pool= names '{cid}', which is not another robustness comparison",
                      comp.param_span("pool"), hint="list the ids of other robustness(...) comparisons, e.g. pool=[\"robustness_vc\"]")
    rows = 1 if c.protocols else len(audit.protocols)
    if c.methods and len(c.methods) != rows:
        bag.error("E157", f"compare '{comp.id}': methods= names {len(c.methods)} method(s) for {rows} row protocol(s)",
                  comp.param_span("methods"),
                  hint="one name per protocol of the audit, in order" if not c.protocols else
                  "one name for the protocols= row (e.g. methods=[\"VC\"])")



def _check_case_study(spec: Spec, comp, bag: DiagnosticBag) -> None:
    """E157: sources are robustness comparisons (with samples= for by=samples); E156: each case is
    [model, dataset, item] of a model and dataset some source's audit runs; methods= names their rows."""
    c = comp.value
    srcs = []
    for cid in c.sources:
        other = spec.objects.get(cid)
        if other is None or other.kind != "compare" or other.ctor != "robustness":
            bag.error("E157", f"compare '{comp.id}': sources= names '{cid}', which is not a robustness comparison",
                      comp.param_span("sources"), hint="list the ids of robustness(...) comparisons, e.g. "
                      "sources=[robustness_answer, robustness_vc]")
        elif c.by == "samples" and not other.value.samples:
            bag.error("E157", f"compare '{comp.id}': by=samples reads sampled answers, but source '{cid}' has no "
                      "samples=", comp.param_span("sources"), hint="name robustness comparisons with samples=<protocol>")
        else:
            srcs.append(other.value)
    audits = [spec.get(s.audit).value for s in srcs if s.audit in spec.objects]
    for case in c.cases:
        if len(case) != 3:
            bag.error("E156", f"compare '{comp.id}': a case is [model, dataset, item], got [{', '.join(case)}]",
                      comp.param_span("cases"), hint='write cases=[["model", "dataset", "first"], ...]')
            continue
        if audits and not any(case[0] in a.models and case[1] in a.datasets for a in audits):
            models = ", ".join(dict.fromkeys(m for a in audits for m in a.models))
            datasets = ", ".join(dict.fromkeys(d for a in audits for d in a.datasets))
            bag.error("E156", f"compare '{comp.id}': no source's audit runs model '{case[0]}' on dataset '{case[1]}'",
                      comp.param_span("cases"), hint=f"the sources' audits run models {models} on datasets {datasets}")
    named = {m for s in srcs for m in s.methods}
    for m in c.methods if len(srcs) == len(c.sources) else []:  # a wrong source's methods are unknown: no cascade
        if named and m not in named:
            bag.error("E157", f"compare '{comp.id}': method '{m}' is named by no source's methods=",
                      comp.param_span("methods"), hint=did_you_mean(m, named, "methods"))


def check_model_paths(spec: Spec, bag: DiagnosticBag) -> None:
    """A local ``hf(PATH)``/``vllm(PATH)`` checkpoint (the engines and ``auditc show`` read its
    config, tokenizer and chat template) must resolve inside the project root or a model root the
    user allows (core/confine.py; E118, docs/security.md). A ``--swap-model`` expression is the
    user's own, typed outside the spec, and is not confined."""
    roots: list[Path] | None = None
    for o in spec.of_kind("model").values():
        if o.ctor not in ("hf", "vllm") or not isinstance(getattr(o.value, "path", None), str):
            continue
        span = o.param_span("path")
        if span is not None and str(span.file).startswith("--swap-model"):
            continue
        local = local_model_path(o.value.path)
        if local is None:
            continue
        roots = roots if roots is not None else model_roots(spec.root)
        if inside(local, roots) is None:
            bag.error("E118", f"model '{o.id}': local checkpoint '{o.value.path}' resolves to "
                      f"{os.path.realpath(local)}, outside the project root {spec.root} and the model roots",
                      span, hint=model_outside_hint(roots))


def check_templates(spec: Spec, bag: DiagnosticBag) -> None:
    """Every template object compiles (Jinja syntax, a readable UTF-8 file, text or file= but not
    both); a template file must resolve inside the project root (E118, docs/security.md)."""
    for t in spec.of_kind("template").values():
        file = t.value.file
        if isinstance(file, str) and not file.startswith("stdlib:"):
            path = spec.entry.parent / file  # as resolve/templates.py reads it
            if inside(path, [spec.root]) is None:
                bag.error("E118", f"template file '{file}' resolves to {os.path.realpath(path)}, outside the project "
                          f"root {spec.root}", t.param_span("file"), hint=outside_hint([spec.root]))
                continue
        try:
            compile_obj(spec, t)
        except TemplateError as e:
            where = f", line {e.line}" + (f", col {e.col}" if e.col is not None else "") if e.line is not None else ""
            span = Span.point(e.name, e.line, e.col or 1) if e.line and Path(e.name).is_file() else t.span
            bag.error("E160", f"template '{t.id}'{where}: {e.message}", span,
                      hint=e.hint or "templates are Jinja2 (docs/prompts.md): close every {{ ... }} and {% ... %}")
