"""`auditc rescore RUN_DIR --evaluator NAME`: re-score stored generations, no model loaded.

Each evaluator gets its own folder ``RUN_DIR/rescore/<evaluator>/`` (records and per-cell metrics).
"""

from __future__ import annotations

from pathlib import Path

from auditlang.api import load_run
from auditlang.cli.common import EXIT_OK
from auditlang.core.diagnostics import did_you_mean
from auditlang.core.errors import UserError
from auditlang.core.registry import REGISTRY
from auditlang.evaluators.registry import offline_evaluators
from auditlang.score.cellmetrics import cell_table, to_markdown
from auditlang.score.stage import score_cells
from auditlang.store.journal import Journal
from auditlang.store.records import read_records, write_records
from auditlang.store.rundir import CELLS_CSV, RECORDS, RESCORE_DIR


def cmd_rescore(args) -> int:
    rescore_run(Path(args.run_dir), list(args.evaluator),
                echo=lambda name, n, out: print(f"re-scored {n} examples under {name} -> {out}"))
    return EXIT_OK


def rescore_run(run_dir: Path, evaluators: list[str], echo=None) -> dict:
    """Re-score ``run_dir``'s stored generations under each evaluator into
    ``RUN_DIR/rescore/<evaluator>/``; returns evaluator -> its per-cell table (a DataFrame;
    ``auditlang.rescore``). ``echo(name, n_examples, folder)`` after each."""
    offline = offline_evaluators()  # every registered evaluator that needs no model call, plugins' included
    tables = {}
    for name in evaluators:
        if name not in offline:
            known = REGISTRY.find("evaluator", name) is not None
            raise UserError(f"cannot re-score offline with evaluator '{name}'"
                            + (": it sends requests to a model" if known else ": no such evaluator"),
                            hint=(None if known else did_you_mean(name, offline, "offline evaluators")) or
                            f"{name} needs a model: add it to the spec and run again; offline: {', '.join(offline)}")
    run = load_run(Path(run_dir))
    with run.stdlib(), Journal(run.run_dir) as journal, journal.cached_reads():
        for name in dict.fromkeys(evaluators):
            try:
                records = score_cells(run.spec, run.plan, journal, run.fingerprints, evaluator_override=[(name, name)])
            except ValueError as e:  # an evaluator whose parameters have no defaults (e.g. a plugin's)
                raise UserError(f"cannot re-score with evaluator '{name}' without parameters: {e}",
                                hint="declare it with its parameters in the spec (evaluator x = "
                                     f"{name}(...)) and adopt it with `auditc report RUN_DIR --spec NEW`") from None
            out = run.run_dir / RESCORE_DIR / name
            out.mkdir(parents=True, exist_ok=True)
            write_records(out / RECORDS, records)
            table = cell_table(run.spec, run.plan, read_records(out / RECORDS))
            cells = out / Path(CELLS_CSV).name
            table.to_csv(cells, index=False)
            cells.with_suffix(".md").write_text(to_markdown(table), encoding="utf-8")
            tables[name] = table
            if echo is not None:
                echo(name, len(records), out)
    return tables
