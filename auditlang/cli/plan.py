"""`auditc plan SPEC`: every cell and deduplicated request, without touching a model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from auditlang.cli.common import EXIT_OK, StepLog, parse_swaps, print_diags


def cmd_plan(args) -> int:
    from auditlang.plan.planner import build_plan  # lazy: keeps start-up of the light commands (check, plan, status) fast
    from auditlang.plan.summary import print_summary  # lazy: keeps start-up of the light commands (check, plan, status) fast
    from auditlang.resolve import compile_spec  # lazy: keeps start-up of the light commands (check, plan, status) fast

    swaps = parse_swaps(args.swap_model)
    spec = compile_spec(args.spec, swaps=swaps)
    step = StepLog()
    # Only the JSON with every request needs the Request objects; the summary and the counts come
    # from a lean plan, whose memory does not grow with the number of requests.
    lean = args.format != "json" or args.no_requests
    plan = build_plan(spec, data_root=args.data_root, load_data=not args.no_data, limit=args.limit, step=step, lean=lean)
    step(None)
    if plan.warnings:
        print_diags(plan.warnings)
    from auditlang.execute.access import access_record, load_allowances, run_access  # lazy: as the planner above

    allow = load_allowances(args.allow_host, args.allow_secret)
    access = access_record(run_access(spec), allow)
    if args.format == "json":
        body = plan.to_dict(include_requests=not args.no_requests)
        body["access"] = access  # not part of the plan hash: who may be contacted is the user's choice
        text = json.dumps(body, indent=None if args.compact else 1, ensure_ascii=False)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
        return EXIT_OK
    print_summary(spec, plan, show_cells=args.cells)
    print_access(access)
    return EXIT_OK


def print_access(access: list[dict]) -> None:
    """Every host a run would contact and every secret it would read, and whether it may."""
    if not access:
        print("network: none (no model calls a server, no dataset is downloaded); secrets: none")
        return
    print("network and secrets (docs/security.md):")
    for a in access:
        host = a["host_allowed_by"] or "NOT ALLOWED: auditc run needs --allow-host " + (a["host"] or "HOST")
        print(f"  {a.get('kind', 'model')} {a['model']}: {a['url']} (host {a['host']}, from {a['url_from']}): {host}")
        if a["secret"]:
            sec = a["secret_allowed_by"] or f"NOT ALLOWED: auditc run needs --allow-secret {a['secret']}"
            print(f"    reads ${a['secret']} as its API key: {sec}")
