"""`auditc plan SPEC`: every cell and deduplicated request, without touching a model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from auditlang.cli.common import EXIT_OK, StepLog, parse_swaps


def cmd_plan(args) -> int:
    from auditlang.plan.planner import build_plan
    from auditlang.plan.summary import print_summary
    from auditlang.resolve import compile_spec

    swaps = parse_swaps(args.swap_model)
    spec = compile_spec(args.spec, swaps=swaps)
    step = StepLog()
    plan = build_plan(spec, data_root=args.data_root, load_data=not args.no_data, limit=args.limit, step=step)
    step(None)
    if args.format == "json":
        text = json.dumps(plan.to_dict(include_requests=not args.no_requests), indent=None if args.compact else 1, ensure_ascii=False)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
        return EXIT_OK
    print_summary(spec, plan, show_cells=args.cells)
    return EXIT_OK
