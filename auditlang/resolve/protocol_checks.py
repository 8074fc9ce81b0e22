"""Parameter combinations of one protocol that cannot be planned (E159).

Each parameter of a protocol constructor is valid on its own (the pydantic model checks that);
these rules reject combinations, so that ``auditc check`` finds every protocol error that
``auditc plan`` would. The protocol programs (auditlang/protocols/) assert the same rules as
internal invariants.
"""

from __future__ import annotations

from collections.abc import Callable

from auditlang.core.diagnostics import DiagnosticBag, Span
from auditlang.core.registry import REGISTRY
from auditlang.resolve.spec import Resolved, Spec

CODE = "E159"


def check_protocols(spec: Spec, bag: DiagnosticBag) -> None:
    for po in spec.of_kind("protocol").values():
        rule = RULES.get(po.ctor)
        if rule is not None:
            rule(spec, po, bag)


def _given(po: Resolved, *names: str) -> Span:
    """The span of the first of ``names`` the spec wrote, else the object's."""
    spans = dict(po.param_spans)
    return next((spans[n] for n in names if n in spans), po.span)


def _token_prob(spec: Spec, po: Resolved, bag: DiagnosticBag) -> None:
    p = po.value
    if p.readout == "first_token":
        if p.scored != "generated" or p.context != "bare":
            bad = [f"{k}={getattr(p, k)}" for k, ok in (("scored", "generated"), ("context", "bare"))
                   if getattr(p, k) != ok]
            verb = "need" if len(bad) > 1 else "needs"
            bag.error(CODE, f"protocol '{po.id}': {' and '.join(bad)} {verb} teacher forcing (readout=T1 or T2); "
                      "readout=first_token reads the first generated token of the variant prompt",
                      _given(po, "scored", "context", "readout"),
                      hint="add readout=T1 (or T2), or drop " + " and ".join(b.split("=")[0] + "=" for b in bad))
    elif p.context == "bare" and (p.prefix or p.prefill):
        bag.error(CODE, f"protocol '{po.id}': prefix= and prefill= are read only with context=verbal_prefix",
                  _given(po, "prefix", "prefill"), hint="add context=verbal_prefix, or drop prefix=/prefill=")
    if getattr(p, "source", None) == "generation" and (p.readout == "first_token" or p.scored != "generated"
                                                        or p.context != "bare"):
        bag.error(CODE, f"protocol '{po.id}': source=generation reads the answer generation's own token logprobs, "
                  "so it needs readout=T1 or T2, scored=generated and context=bare",
                  _given(po, "source", "readout", "scored", "context"),
                  hint="drop source=generation to score the answer by teacher forcing, or set readout=T1")


def _verbalized(spec: Spec, po: Resolved, bag: DiagnosticBag) -> None:
    p = po.value
    if p.mode == "joint":
        if p.provenance != "self" or p.prefill:
            what = f"provenance={p.provenance}" if p.provenance != "self" else "prefill="
            bag.error(CODE, f"protocol '{po.id}': mode=joint reads the model's own Guess/Probability (study 001 "
                      f"self condition), so {what} cannot apply", _given(po, "provenance", "prefill", "mode"),
                      hint="supplied answers use mode=followup with prefill=... (study 001 section 3.3)")
    elif not p.phrasing and not p.prefill:
        bag.error(CODE, f"protocol '{po.id}': mode=followup needs phrasing= (the elicitation template)", po.span,
                  hint="add phrasing=..., e.g. phrasing=stdlib:s000/confidence/decimal_01, or use mode=joint")


def _p_true(spec: Spec, po: Resolved, bag: DiagnosticBag) -> None:
    p = po.value
    if not p.template:
        bag.error(CODE, f"protocol '{po.id}': p_true needs template= (the verification prompt)", po.span,
                  hint="e.g. template=stdlib:s003/confidence/binary_verification or stdlib:s002/p_true")
    if len(p.labels) < 2 or len(set(p.labels)) != len(p.labels):
        bag.error(CODE, f"protocol '{po.id}': labels={list(p.labels)} must be at least two distinct strings",
                  _given(po, "labels"), hint='the true label first, e.g. labels=["A", "B"]')


def _platt(spec: Spec, po: Resolved, bag: DiagnosticBag) -> None:
    base = spec.objects.get(po.value.base)
    if base is None:
        return  # an unknown name is reported by the resolver
    entry = REGISTRY.find("protocol", base.ctor)
    if base.ctor == "platt":
        bag.error(CODE, f"protocol '{po.id}': platt over another platt protocol ('{base.id}') is not allowed",
                  _given(po, "base"), hint=f"scale the protocol '{base.id}' scales, not '{base.id}' itself")
    elif entry is not None and entry.meta.get("fitted"):
        bag.error(CODE, f"protocol '{po.id}': base protocol '{base.id}' ({base.ctor}) is itself fitted on the dev "
                  "split; Platt scaling needs a protocol with a raw confidence", _given(po, "base"),
                  hint="name a token_prob, verbalized, p_true or self_consistency protocol")


RULES: dict[str, Callable[[Spec, Resolved, DiagnosticBag], None]] = {
    "token_prob": _token_prob, "verbalized": _verbalized, "p_true": _p_true, "platt": _platt,
}
