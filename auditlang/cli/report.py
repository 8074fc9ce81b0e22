"""`auditc report RUN_DIR [--spec NEW]`: rebuild the report from stored results (no model loaded).

Without ``--spec`` the run is reported exactly as it was run (its stored spec, stdlib and data).
With ``--spec NEW`` the new spec is re-planned on the run's data; if it needs nothing the run
did not execute (new compare/report/metric statements only), it becomes the run's spec and the
records, metrics and report are rebuilt; otherwise the changed cells are listed (exit 1).
Records or metrics that no longer match the hashes the scoring stage recorded (an edited
``metrics/cells.csv``, a damaged ``records.parquet``) are rebuilt first, with a note
(store/integrity.py); a damaged journal, plan or data copy is an error naming the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from auditlang.api import adopt_spec, load_run, write_report
from auditlang.cli.common import EXIT_OK, say
from auditlang.score.cellmetrics import write_cell_metrics
from auditlang.score.stage import score_and_write
from auditlang.store.integrity import ARTIFACTS, METRICS_FILES, record, stale_outputs
from auditlang.store.rundir import RECORDS


def cmd_report(args) -> int:
    out = report_run(Path(args.run_dir), getattr(args, "spec", None), echo=say,
                     note=lambda msg: say(msg, file=sys.stderr))
    say(f"report written: {out}")
    return EXIT_OK


def report_run(run_dir: Path, spec: str | Path | None = None, echo=None, note=None) -> Path:
    """(Re)write ``run_dir``'s report from stored results (outputs that no longer match their
    recorded hashes rebuilt first; ``spec``: adopt an edited spec first, `auditc report --spec`);
    returns the report folder (``auditlang.report``). ``echo``/``note``: lines for stdout/stderr."""
    echo, note = echo or (lambda msg: None), note or (lambda msg: None)
    run = load_run(Path(run_dir))
    rescore = not (run.run_dir / RECORDS).exists()
    remetric = False
    bad_records, bad_metrics = stale_outputs(run.run_dir, run.info)
    if bad_records:
        rescore = True
        note(f"note: {_files(run, bad_records)}; rebuilt from journal.sqlite")
    elif bad_metrics:
        remetric = True
        note(f"note: {_files(run, bad_metrics)}; recomputed from records.parquet")
    if spec:
        run = adopt_spec(run, spec)
        rescore = True
        echo(f"{spec}: every cell and request it needs is in this run; it is now the run's spec")
    with run.stdlib():
        if rescore:
            score_and_write(run.spec, run.plan, run.run_dir, run.fingerprints)
        elif remetric:
            write_cell_metrics(run.spec, run.plan, run.run_dir, None)
            record(run.run_dir, METRICS_FILES)
        return write_report(run.spec, run.plan, run.run_dir)


def _files(run, names: list[str]) -> str:
    """What is wrong with the derived files ``names``: no longer matching, or no hash recorded."""
    arts = run.info.get(ARTIFACTS) or {}
    changed = [n for n in names if isinstance(arts.get(n), dict)]
    unhashed = [n for n in names if n not in changed]
    parts = []
    if changed:
        parts.append(f"{', '.join(changed)} no longer match{'es' if len(changed) == 1 else ''} the hash recorded "
                     "when the run scored (edited or damaged)")
    if unhashed:
        parts.append(f"{', '.join(unhashed)} ha{'s' if len(unhashed) == 1 else 've'} no hash recorded in run.json "
                     "(cannot be checked)")
    return "; ".join(parts)
