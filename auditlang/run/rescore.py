"""`auditc rescore RUN_DIR --evaluator NAME`: re-score stored generations, no model loaded."""

from __future__ import annotations

from pathlib import Path

from auditlang.errors import UserError

RESCORABLE = ("first_char", "regex_reparse", "exact_match", "lenient_match", "alias_match")


def rescore(args) -> int:
    from auditlang.diagnostics import did_you_mean
    from auditlang.metrics.registry import METRICS  # noqa: F401  (registers metrics)
    from auditlang.run.cellmetrics import cell_table, to_markdown
    from auditlang.run.reporting import load_run
    from auditlang.run.scoring import score_cells
    from auditlang.store.journal import Journal
    from auditlang.store.records import read_records, write_records

    run_dir = Path(args.run_dir)
    for name in args.evaluator:
        if name not in RESCORABLE:
            raise UserError(f"cannot re-score offline with evaluator '{name}'",
                            hint=did_you_mean(name, RESCORABLE, "offline evaluators") or
                            "constrained, loglik_argmax and llm_judge need a model; add them to the spec and run again")
    spec, plan, info = load_run(run_dir)
    fps = info.get("fingerprints", {})
    with Journal(run_dir) as journal:
        records = score_cells(spec, plan, journal, fps, evaluator_override=[(n, n) for n in args.evaluator])
    out = run_dir / "rescore" / "_".join(args.evaluator)
    out.mkdir(parents=True, exist_ok=True)
    write_records(out / "records.parquet", records)
    table = cell_table(spec, plan, read_records(out / "records.parquet"))
    table.to_csv(out / "cells.csv", index=False)
    (out / "cells.md").write_text(to_markdown(table), encoding="utf-8")
    print(f"re-scored {len(records)} examples under {', '.join(args.evaluator)} -> {out}")
    return 0
