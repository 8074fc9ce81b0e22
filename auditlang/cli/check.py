"""`auditc check SPEC`: parse and validate, without data or models.

Everything `auditc plan` can find without the data is found here: the resolver's diagnostics
and the planner's static checks (engine capabilities, E172)."""

from __future__ import annotations

from dataclasses import dataclass

from auditlang.cli.common import EXIT_OK, parse_model_args, print_diags, print_overrides
from auditlang.core.diagnostics import CompileError
from auditlang.plan.planner import check_capabilities
from auditlang.resolve import compile_spec

KINDS = ("dataset", "model", "template", "variant", "protocol", "evaluator", "audit", "compare")


@dataclass
class Checked:
    """A spec that passed `auditc check`: the spec, its warnings and its declarations by kind
    (``auditlang.check`` returns it)."""

    spec: object
    warnings: list
    counts: dict[str, int]
    hub_fallbacks: int = 0  # hub datasets declaring a fallback file

    def summary(self) -> str:
        return ", ".join(f"{v} {k}{'s' if v != 1 else ''}" + (f" ({self.hub_fallbacks} from the Hub with a fallback file)"
                                                               if k == "dataset" and self.hub_fallbacks else "")
                         for k, v in self.counts.items() if v) or "no declarations"


def check_spec(spec) -> Checked:
    """What `auditc check` adds to the resolver (the planner's static checks; CompileError on
    errors), and the declarations counted."""
    bag = check_capabilities(spec)
    if bag.errors:
        raise CompileError(bag)
    fallbacks = {o.value.fallback for o in spec.of_kind("dataset").values() if getattr(o.value, "fallback", None)}
    n = {k: len([i for i in spec.of_kind(k) if i not in fallbacks]) for k in KINDS}
    n["metric"] = len(spec.metrics)
    return Checked(spec, list(spec.warnings or []), n, len(fallbacks))


def cmd_check(args) -> int:
    checked = check_spec(compile_spec(args.spec, model_args=parse_model_args(args)))
    if checked.warnings:
        print_diags(checked.warnings)
    print_overrides(checked.spec)
    print(f"{args.spec}: ok ({checked.summary()})")
    return EXIT_OK
