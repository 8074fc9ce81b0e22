"""`auditc check SPEC`: parse and validate only`."""

from __future__ import annotations

from auditlang.cli.common import EXIT_OK, print_diags


def cmd_check(args) -> int:
    from auditlang.resolve import compile_spec

    spec = compile_spec(args.spec)
    if spec.warnings:
        print_diags(spec.warnings)
    n = {k: len(spec.of_kind(k)) for k in ("dataset", "model", "variant", "protocol", "evaluator", "audit", "compare")}
    print(f"{args.spec}: ok (" + ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in n.items() if v) + ")")
    return EXIT_OK
