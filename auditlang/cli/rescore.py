"""`auditc rescore RUN_DIR --evaluator NAME`: re-score stored generations, no model loaded.

Each evaluator gets its own folder ``RUN_DIR/rescore/<evaluator>/`` (records and per-cell metrics).
"""

from __future__ import annotations

from pathlib import Path

from auditlang.api import load_run
from auditlang.cli.common import EXIT_OK
from auditlang.core.diagnostics import did_you_mean
from auditlang.core.errors import UserError
from auditlang.evaluators.registry import offline_evaluators
from auditlang.score.cellmetrics import cell_table, to_markdown
from auditlang.score.stage import score_cells
from auditlang.store.journal import Journal
from auditlang.store.records import read_records, write_records
from auditlang.store.rundir import CELLS_CSV, RECORDS, RESCORE_DIR


def cmd_rescore(args) -> int:
    offline = offline_evaluators()  # every registered evaluator that needs no model call, plugins' included
    for name in args.evaluator:
        if name not in offline:
            raise UserError(f"cannot re-score offline with evaluator '{name}'",
                            hint=did_you_mean(name, offline, "offline evaluators") or
                            "evaluators that need a model call (constrained, loglik_argmax, llm_judge) are run by "
                            "adding them to the spec and running it again")
    run = load_run(Path(args.run_dir))
    with run.stdlib(), Journal(run.run_dir) as journal, journal.cached_reads():
        for name in dict.fromkeys(args.evaluator):
            records = score_cells(run.spec, run.plan, journal, run.fingerprints, evaluator_override=[(name, name)])
            out = run.run_dir / RESCORE_DIR / name
            out.mkdir(parents=True, exist_ok=True)
            write_records(out / RECORDS, records)
            table = cell_table(run.spec, run.plan, read_records(out / RECORDS))
            cells = out / Path(CELLS_CSV).name
            table.to_csv(cells, index=False)
            cells.with_suffix(".md").write_text(to_markdown(table), encoding="utf-8")
            print(f"re-scored {len(records)} examples under {name} -> {out}")
    return EXIT_OK
