"""`auditc status RUN_DIR`: what a run directory holds and what is left to do."""

from __future__ import annotations

from pathlib import Path


def status_cmd(args) -> int:
    from auditlang.run.reporting import load_run
    from auditlang.store.journal import Journal

    run_dir = Path(args.run_dir)
    spec, plan, info = load_run(run_dir)
    fps = info.get("fingerprints", {})
    with Journal(run_dir) as journal:
        print(f"run {run_dir}  spec {info.get('spec')}  plan {info.get('plan_hash')}")
        total_missing = 0
        for mid in plan.models:
            reqs = [r for r in plan.requests if r.model == mid]
            if not reqs:
                continue
            fp = fps.get(mid)
            missing = len(reqs) if fp is None else len(journal.missing(reqs, fp))
            total_missing += missing
            print(f"  {mid}: stage-1 {len(reqs) - missing}/{len(reqs)} committed"
                  + ("" if fp else " (engine never loaded)"))
        c = journal.counts()
        print(f"  journal: {c}")
    print(f"  records: {'yes' if (run_dir / 'records.parquet').exists() else 'no'}; "
          f"report: {'yes' if (run_dir / 'report').exists() else 'no'}")
    print("  complete" if total_missing == 0 else f"  {total_missing} stage-1 requests left: rerun `auditc run` to resume")
    return 0
