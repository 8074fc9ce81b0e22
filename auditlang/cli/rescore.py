"""`auditc rescore RUN_DIR --evaluator [LABEL=]EXPR`: re-score stored generations, no model loaded.

EXPR is any evaluator the spec language accepts: a name of the run's spec (its own evaluators,
those of the stdlib modules it imports), a registered constructor (``exact_match``) or a call with
parameters (``regex_reparse(tail=50)``), compiled by the resolver as ``evaluator LABEL = EXPR``
in the run's stored spec. Each gets its own folder ``RUN_DIR/rescore/<LABEL>/`` (records and
per-cell metrics; cell ids name LABEL as their evaluator), which ``auditc report`` lists and
``auditc diff`` takes as RUN_A or RUN_B.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from auditlang.api import load_run
from auditlang.cli.common import EXIT_OK, say
from auditlang.core.errors import UsageError, UserError
from auditlang.core.diagnostics import did_you_mean
from auditlang.evaluators.registry import EVALUATORS, offline_evaluators
from auditlang.resolve.overrides import from_records
from auditlang.resolve.resolver import compile_spec
from auditlang.score.cellmetrics import cell_table, to_markdown
from auditlang.score.stage import score_cells
from auditlang.store.journal import Journal
from auditlang.store.records import read_records, write_records
from auditlang.store.rundir import CELLS_CSV, RECORDS, RESCORE_DIR, RESCORE_META

LABELLED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.+)$", re.S)
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def parse_arg(arg: str, spec_evaluators: set[str]) -> tuple[str, str | None]:
    """(label, expression to declare, or None for an evaluator the spec already names)."""
    m = LABELLED.match(arg)
    if m:
        return m.group(1), m.group(2).strip()
    expr = arg.strip()
    if not expr:
        raise UsageError("--evaluator: empty expression", hint="e.g. --evaluator exact_match or "
                                                             "--evaluator 'strict=regex_reparse(tail=50)'")
    if expr in spec_evaluators:
        return expr, None
    if NAME.match(expr):
        if expr not in EVALUATORS:  # neither the spec's nor a constructor: say what is
            raise UserError(f"--evaluator {expr}: no such evaluator in the run's spec nor a registered one",
                            hint=did_you_mean(expr, sorted(spec_evaluators) + offline_evaluators(), "evaluators")
                            or "a name of the spec (its evaluators, or ns.name of a stdlib module it imports), a "
                               "registered evaluator, or a call such as regex_reparse(tail=50)")
        if expr not in offline_evaluators():
            raise UserError(f"cannot re-score offline with evaluator '{expr}': it sends requests to a model",
                            hint=f"{expr} needs a model: add it to an audit of the spec and run again; offline "
                                 f"evaluators: {', '.join(offline_evaluators())}")
        return expr, expr
    head = re.match(r"[A-Za-z_][A-Za-z0-9_.]*", expr)
    digest = hashlib.sha256(expr.encode()).hexdigest()[:8]
    return f"{(head.group(0) if head else 'evaluator').replace('.', '_')}_{digest}", expr


def cmd_rescore(args) -> int:
    rescore_run(Path(args.run_dir), list(args.evaluator),
                echo=lambda label, expr, n, out: say(f"re-scored {n} examples under {label}"
                                                     + (f" = {expr}" if expr not in (None, label) else "")
                                                     + f" -> {out}"))
    return EXIT_OK


def rescore_run(run_dir: Path, evaluators: list[str], echo=None) -> dict:
    """Re-score ``run_dir``'s stored generations under each ``[LABEL=]EXPR`` into
    ``RUN_DIR/rescore/<LABEL>/``; returns LABEL -> its per-cell table (a DataFrame;
    ``auditlang.rescore``). ``echo(label, expression, n_examples, folder)`` after each."""
    run = load_run(Path(run_dir))
    spec_evals = set(run.spec.of_kind("evaluator"))
    wanted: dict[str, str | None] = {}
    for arg in evaluators:
        label, expr = parse_arg(arg, spec_evals)
        if label in wanted and wanted[label] != expr:
            raise UsageError(f"--evaluator {arg}: the label '{label}' is given twice", hint="give each LABEL=EXPR once")
        wanted[label] = expr
    offline = offline_evaluators()  # every registered evaluator that needs no model call, plugins' included
    tables = {}
    with run.stdlib(), Journal(run.run_dir) as journal, journal.cached_reads():
        extra = {k: v for k, v in wanted.items() if v is not None}
        spec = (compile_spec(run.run_dir / run.info["spec_entry"], swaps=run.info.get("model_swaps") or None,
                             evaluators=extra, confine_models=False,
                             model_args=from_records(run.info.get("model_args"))) if extra else run.spec)
        for label in wanted:
            obj = spec.get(label)
            if obj.ctor not in offline:
                raise UserError(f"cannot re-score offline with evaluator '{label}' ({obj.ctor}): it sends requests to "
                                "a model", hint=f"{obj.ctor} needs a model: add it to an audit of the spec and run again; "
                                                f"offline evaluators: {', '.join(offline)}")
        for label, expr in wanted.items():
            records = score_cells(spec, run.plan, journal, run.fingerprints, evaluator_override=[(label, None)])
            out = run.run_dir / RESCORE_DIR / label
            out.mkdir(parents=True, exist_ok=True)
            write_records(out / RECORDS, records)
            table = cell_table(spec, run.plan, read_records(out / RECORDS))
            cells = out / Path(CELLS_CSV).name
            table.to_csv(cells, index=False)
            cells.with_suffix(".md").write_text(to_markdown(table), encoding="utf-8")
            obj = spec.get(label)
            (out / RESCORE_META).write_text(json.dumps({
                "label": label, "expression": expr if expr is not None else label, "evaluator": obj.ctor,
                "params": {k: v for k, v in obj.value.values().items()}}, indent=1, default=str) + "\n",
                encoding="utf-8")
            tables[label] = table
            if echo is not None:
                echo(label, expr, len(records), out)
    return tables
