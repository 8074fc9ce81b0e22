"""`auditc report RUN_DIR [--spec NEW]`: rebuild the report from stored results (no model loaded).

Without ``--spec`` the run is reported exactly as it was run (its stored spec, stdlib and data).
With ``--spec NEW`` the new spec is re-planned on the run's data; if it needs nothing the run
did not execute (new compare/report/metric statements only), it becomes the run's spec and the
records, metrics and report are rebuilt; otherwise the changed cells are listed (exit 1).
"""

from __future__ import annotations

from pathlib import Path

from auditlang.api import adopt_spec, load_run, write_report
from auditlang.cli.common import EXIT_OK
from auditlang.score.stage import score_and_write
from auditlang.store.rundir import RECORDS


def cmd_report(args) -> int:
    run = load_run(Path(args.run_dir))
    rescore = not (run.run_dir / RECORDS).exists()
    if getattr(args, "spec", None):
        run = adopt_spec(run, args.spec)
        rescore = True
        print(f"{args.spec}: every cell and request it needs is in this run; it is now the run's spec")
    with run.stdlib():
        if rescore:
            score_and_write(run.spec, run.plan, run.run_dir, run.fingerprints)
        out = write_report(run.spec, run.plan, run.run_dir)
    print(f"report written: {out}")
    return EXIT_OK
