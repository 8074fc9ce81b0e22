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
    # A lean plan (its memory does not grow with the number of requests); the JSON with every
    # request has them spooled to temporary files as they are found (auditlang/plan/jsonout.py).
    spool = None
    if args.format == "json" and not args.no_requests:
        from auditlang.plan.jsonout import RequestSpool  # lazy: as the planner above

        spool = RequestSpool()
    plan = build_plan(spec, data_root=args.data_root, load_data=not args.no_data, limit=args.limit, step=step,
                      lean=True, sink=spool)
    step(None)
    if plan.warnings:
        print_diags(plan.warnings)
    from auditlang.execute.access import access_record, load_allowances, run_access  # lazy: as the planner above

    allow = load_allowances(args.allow_host, args.allow_secret)
    access = access_record(run_access(spec), allow)
    if args.format == "json":
        # "access" is not part of the plan hash: who may be contacted is the user's choice
        indent = None if args.compact else 1
        if spool is not None:
            from auditlang.plan.jsonout import write_plan_json  # lazy: as the planner above

            try:
                if args.output:
                    with open(args.output, "w", encoding="utf-8") as fh:
                        write_plan_json(plan, spool, fh, indent, {"access": access})
                else:
                    write_plan_json(plan, spool, sys.stdout, indent, {"access": access})
                    sys.stdout.write("\n")
            finally:
                spool.close()
            return EXIT_OK
        body = plan.to_dict(include_requests=False)
        body["access"] = access
        text = json.dumps(body, indent=indent, ensure_ascii=False)
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
