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

    from auditlang.execute.access import access_record, load_allowances, offline_hubs, run_access  # lazy: keeps start-up of the light commands fast

    swaps = parse_swaps(args.swap_model)
    spec = compile_spec(args.spec, swaps=swaps)
    allow = load_allowances(args.allow_host, args.allow_secret)
    accesses = run_access(spec)
    offline = offline_hubs(spec, accesses, allow)  # as `auditc run` reads them: the local cache, else the fallback
    step = StepLog()
    plan = build_plan(spec, data_root=args.data_root, load_data=not args.no_data, limit=args.limit, step=step,
                      no_download=offline)
    step(None)
    if plan.warnings:
        print_diags(plan.warnings)
    access = access_record(accesses, allow)
    for a in access:
        if a["model"] in offline and a.get("kind") == "dataset":
            a["not_downloaded"] = offline[a["model"]] + "; the local cache is read, else the fallback file"
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
        host = a["host_allowed_by"] or ("not allowed: auditc run reads the local cache, else the fallback file "
                                        f"(--allow-host {a['host']} downloads it)" if a.get("not_downloaded") else
                                        "NOT ALLOWED: auditc run needs --allow-host " + (a["host"] or "HOST"))
        print(f"  {a.get('kind', 'model')} {a['model']}: {a['url']} (host {a['host']}, from {a['url_from']}): {host}")
        if a["secret"]:
            sec = a["secret_allowed_by"] or f"NOT ALLOWED: auditc run needs --allow-secret {a['secret']}"
            print(f"    reads ${a['secret']} as its API key: {sec}")
