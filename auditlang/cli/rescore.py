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
from auditlang.score.cellmetrics import cell_table, to_markdown
from auditlang.score.stage import score_cells
from auditlang.store.journal import Journal
from auditlang.store.records import read_records, write_records


def rescorable() -> list[str]:
    """Evaluators that label stored answer text with no model request of their own: every
    registered evaluator (built-ins and installed plugins) without a ``followup`` or
    ``needs_model`` entry in the registry (docs/registry.md)."""
    return sorted(e.name for e in REGISTRY.entries("evaluator")
                  if not e.meta.get("followup") and not e.meta.get("needs_model"))


def cmd_rescore(args) -> int:
    offline = rescorable()
    for name in args.evaluator:
        if name not in offline:
            known = REGISTRY.find("evaluator", name) is not None
            raise UserError(f"cannot re-score offline with evaluator '{name}'"
                            + (": it sends requests to a model" if known else ": no such evaluator"),
                            hint=(None if known else did_you_mean(name, offline, "offline evaluators")) or
                            f"{name} needs a model: add it to the spec and run again; offline: {', '.join(offline)}")
    run = load_run(Path(args.run_dir))
    with run.stdlib(), Journal(run.run_dir) as journal, journal.cached_reads():
        for name in dict.fromkeys(args.evaluator):
            try:
                records = score_cells(run.spec, run.plan, journal, run.fingerprints, evaluator_override=[(name, name)])
            except ValueError as e:  # an evaluator whose parameters have no defaults (e.g. a plugin's)
                raise UserError(f"cannot re-score with evaluator '{name}' without parameters: {e}",
                                hint="declare it with its parameters in the spec (evaluator x = "
                                     f"{name}(...)) and adopt it with `auditc report RUN_DIR --spec NEW`") from None
            out = run.run_dir / "rescore" / name
            out.mkdir(parents=True, exist_ok=True)
            write_records(out / "records.parquet", records)
            table = cell_table(run.spec, run.plan, read_records(out / "records.parquet"))
            table.to_csv(out / "cells.csv", index=False)
            (out / "cells.md").write_text(to_markdown(table), encoding="utf-8")
            print(f"re-scored {len(records)} examples under {name} -> {out}")
    return EXIT_OK
