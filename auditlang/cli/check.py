"""`auditc check SPEC`: parse and validate, without data or models.

Everything `auditc plan` can find without the data is found here: the resolver's diagnostics
and the planner's static checks (engine capabilities, E172)."""

from __future__ import annotations

from auditlang.cli.common import EXIT_OK, parse_model_args, print_diags, print_overrides
from auditlang.core.diagnostics import CompileError
from auditlang.plan.planner import check_capabilities
from auditlang.resolve import compile_spec

KINDS = ("dataset", "model", "template", "variant", "protocol", "evaluator", "audit", "compare")


def cmd_check(args) -> int:
    spec = compile_spec(args.spec, model_args=parse_model_args(args))
    bag = check_capabilities(spec)
    if bag.errors:
        raise CompileError(bag)
    if spec.warnings:
        print_diags(spec.warnings)
    fallbacks = {o.value.fallback for o in spec.of_kind("dataset").values() if getattr(o.value, "fallback", None)}
    n = {k: len([i for i in spec.of_kind(k) if i not in fallbacks]) for k in KINDS}
    n["metric"] = len(spec.metrics)
    what = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" + (f" ({len(fallbacks)} from the Hub with a fallback file)"
                                                          if k == "dataset" and fallbacks else "")
                     for k, v in n.items() if v) or "no declarations"
    print_overrides(spec)
    print(f"{args.spec}: ok ({what})")
    return EXIT_OK
