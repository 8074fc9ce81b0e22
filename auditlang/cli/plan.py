"""`auditc plan SPEC`: every cell and deduplicated request, without touching a model."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from auditlang.cli.common import EXIT_OK


class StepLog:
    """Planning progress on stderr: a step that took longer than ``threshold`` seconds gets a
    line when it ends (reading a large dataset, rendering an audit's prompts)."""

    def __init__(self, threshold: float = 1.0, stream=None) -> None:
        self.threshold, self.stream = threshold, stream or sys.stderr
        self.current: str | None = None
        self.t0 = self.start = time.perf_counter()

    def __call__(self, text: str | None) -> None:
        now = time.perf_counter()
        if self.current is not None and now - self.t0 > self.threshold:
            print(f"plan: {self.current} ({now - self.t0:.1f}s)", file=self.stream, flush=True)
        self.current, self.t0 = text, now


def cmd_plan(args) -> int:
    from auditlang.cli.run import parse_swaps
    from auditlang.plan.planner import build_plan
    from auditlang.plan.summary import print_summary
    from auditlang.resolve import compile_spec

    swaps = parse_swaps(args.swap_model)
    spec = compile_spec(args.spec, swaps)
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
