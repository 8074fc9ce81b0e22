"""`auditc rescore RUN_DIR --evaluator NAME`: re-score stored generations, no model loaded.

Each evaluator gets its own folder ``RUN_DIR/rescore/<evaluator>/`` (records and per-cell metrics).
"""

from __future__ import annotations

from pathlib import Path

from auditlang.api import load_run
from auditlang.cli.common import EXIT_OK
from auditlang.core.diagnostics import did_you_mean
from auditlang.core.errors import UserError
from auditlang.score.cellmetrics import cell_table, to_markdown
from auditlang.score.stage import score_cells
from auditlang.store.journal import Journal
from auditlang.store.records import read_records, write_records

RESCORABLE = ("first_char", "regex_reparse", "exact_match", "lenient_match", "alias_match")


def cmd_rescore(args) -> int:
    for name in args.evaluator:
        if name not in RESCORABLE:
            raise UserError(f"cannot re-score offline with evaluator '{name}'",
                            hint=did_you_mean(name, RESCORABLE, "offline evaluators") or
                            "constrained, loglik_argmax and llm_judge need a model; add them to the spec and run again")
    run = load_run(Path(args.run_dir))
    with run.stdlib(), Journal(run.run_dir) as journal, journal.cached_reads():
        for name in dict.fromkeys(args.evaluator):
            records = score_cells(run.spec, run.plan, journal, run.fingerprints, evaluator_override=[(name, name)])
            out = run.run_dir / "rescore" / name
            out.mkdir(parents=True, exist_ok=True)
            write_records(out / "records.parquet", records)
            table = cell_table(run.spec, run.plan, read_records(out / "records.parquet"))
            table.to_csv(out / "cells.csv", index=False)
            (out / "cells.md").write_text(to_markdown(table), encoding="utf-8")
            print(f"re-scored {len(records)} examples under {name} -> {out}")
    return EXIT_OK
