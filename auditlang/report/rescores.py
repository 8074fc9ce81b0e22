"""The run's rescores (``auditc rescore``) as report tables: one per ``RUN_DIR/rescore/<LABEL>/``,
read from its ``cells.csv`` and ``rescore.json`` (the expression and the evaluator it compiled to)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from auditlang.report.tables import Table
from auditlang.store.rundir import CELLS_CSV, RESCORE_DIR, RESCORE_META
KEYS = ("model", "dataset", "variant", "protocol", "evaluator")


def _value(v):
    if isinstance(v, float) and math.isnan(v):
        return math.nan
    return v.item() if hasattr(v, "item") else v


def rescore_tables(run_dir: Path) -> list[Table]:
    """One table per rescore folder that holds per-cell metrics, in name order."""
    root = Path(run_dir) / RESCORE_DIR
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(p for p in root.iterdir() if (p / Path(CELLS_CSV).name).is_file()):
        df = pd.read_csv(folder / Path(CELLS_CSV).name)
        try:
            meta = json.loads((folder / RESCORE_META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        label = folder.name
        expr = meta.get("expression", label)
        metrics = [c for c in df.columns if f"{c} lo" in df.columns and f"{c} hi" in df.columns]
        cols = [k for k in KEYS if k in df.columns] + [c for c in ("n", "n_error") if c in df.columns]
        t = Table(f"rescore_{label}", f"Re-scored under evaluator {label}" + (f" = {expr}" if expr != label else "")
                  + " (auditc rescore, no model call)", cols + [x for m in metrics for x in (m, f"{m} lo", f"{m} hi")])
        for r in df.to_dict("records"):
            t.add(*(_value(r[c]) for c in t.columns))
        t.legend = True
        t.notes.append(f"records: {RESCORE_DIR}/{label}/records.parquet; the run's own cells against these: "
                       f"`auditc diff RUN_DIR RUN_DIR/{RESCORE_DIR}/{label} --match evaluator`")
        out.append(t)
    return out
