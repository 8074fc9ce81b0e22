"""`auditc check SPEC`: parse and validate only (no data, no models)."""

from __future__ import annotations

from auditlang.cli.common import EXIT_OK, print_diags
from auditlang.resolve import compile_spec

KINDS = ("dataset", "model", "template", "variant", "protocol", "evaluator", "audit", "compare")


def cmd_check(args) -> int:
    spec = compile_spec(args.spec)
    if spec.warnings:
        print_diags(spec.warnings)
    n = {k: len(spec.of_kind(k)) for k in KINDS}
    n["metric"] = len(spec.metrics)
    what = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in n.items() if v) or "no declarations"
    print(f"{args.spec}: ok ({what})")
    return EXIT_OK
