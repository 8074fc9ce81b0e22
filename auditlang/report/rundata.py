"""Everything the report reads from a run directory, loaded once.

``records.parquet`` (per-example results), ``metrics/cells.csv`` (per-cell metrics with bootstrap
intervals; recomputed from the records when absent), ``run.json`` (fingerprint hash per model),
``journal.sqlite`` (engine fingerprints) and ``plan.json``. Missing files are recorded in
``missing`` so every consumer can say "not computable: <reason>" instead of inventing numbers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from auditlang.plan.model import Plan
from auditlang.resolve.spec import Spec

RECORDS = "records.parquet"
CELLS_CSV = Path("metrics") / "cells.csv"
RUN_FILE = "run.json"
JOURNAL = "journal.sqlite"
PLAN_FILE = "plan.json"
DEFAULT_EVALUATOR = "<default>"


@dataclass
class RunData:
    spec: Spec
    plan: Plan
    run_dir: Path
    records: pd.DataFrame
    cells: pd.DataFrame
    run_info: dict[str, Any] = field(default_factory=dict)
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)  # model id -> fingerprint dict
    fingerprint_hashes: dict[str, str] = field(default_factory=dict)  # model id -> fp hash
    plan_json: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # run files that were not found
    _extras: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------ selection
    def rows(self, audit: str, *, model: str | None = None, dataset: str | None = None, variant: str | None = None,
             protocol: str | None = None, evaluator: str | None = None) -> pd.DataFrame:
        """Records of one audit, filtered on any of the cell axes."""
        df = self.records
        if df.empty:
            return df
        mask = df["audit"] == audit
        for col, val in (("model", model), ("dataset", dataset), ("variant", variant), ("protocol", protocol),
                         ("evaluator", evaluator)):
            if val is not None:
                mask &= df[col] == val
        return df[mask]

    def extras(self, row_index: int) -> dict[str, Any]:
        """Decoded ``extras`` JSON of one record (by DataFrame index), cached."""
        got = self._extras.get(row_index)
        if got is None:
            try:
                got = json.loads(self.records.at[row_index, "extras"] or "{}")
            except (TypeError, ValueError):
                got = {}
            self._extras[row_index] = got
        return got

    def audit_ids(self) -> list[str]:
        return list(self.spec.of_kind("audit"))

    def audit(self, aid: str):
        return self.spec.get(aid).value

    def evaluators(self, aid: str) -> list[str]:
        return list(self.audit(aid).evaluators) or [DEFAULT_EVALUATOR]

    def vpr_threshold(self, aid: str) -> float:
        """audit.vpr_threshold, else settings.vpr_threshold (000 appendix D.1: 0.80)."""
        t = self.audit(aid).vpr_threshold
        return float(t) if t is not None else float(self.spec.settings.vpr_threshold)

    def task(self, dsid: str) -> str:
        return self.spec.get(dsid).value.task

    def protocol_ctor(self, pid: str) -> str:
        return self.spec.get(pid).ctor if pid in self.spec.objects else ""


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def load_run(spec: Spec, plan: Plan, run_dir: Path) -> RunData:
    """Load every run artefact the report uses; absent ones are listed in ``RunData.missing``."""
    from auditlang.store.records import read_records

    run_dir = Path(run_dir)
    missing: list[str] = []
    rec_path = run_dir / RECORDS
    if rec_path.exists():
        records = read_records(rec_path)
    else:
        missing.append(RECORDS)
        records = pd.DataFrame(columns=["cell_id", "model", "dataset", "variant", "protocol", "evaluator", "item_id",
                                        "item_index", "gold", "pred", "parsed", "parse_rule", "correct", "confidence",
                                        "confidence_parsed", "confidence_kind", "extras", "request_ids", "generation"])
    records = records.reset_index(drop=True)
    records["audit"] = records["cell_id"].astype(str).str.split("/").str[0]
    cells_path = run_dir / CELLS_CSV
    if cells_path.exists():
        cells = pd.read_csv(cells_path)
    elif not records.empty:
        from auditlang.run.cellmetrics import cell_table

        missing.append(str(CELLS_CSV))
        cells = cell_table(spec, plan, records.drop(columns=["audit"]))
    else:
        missing.append(str(CELLS_CSV))
        cells = pd.DataFrame()
    run_info = _read_json(run_dir / RUN_FILE)
    if not run_info:
        missing.append(RUN_FILE)
    plan_json = _read_json(run_dir / PLAN_FILE)
    if not plan_json:
        missing.append(PLAN_FILE)
    fps: dict[str, dict[str, Any]] = {}
    hashes: dict[str, str] = dict(run_info.get("fingerprints", {}))
    if (run_dir / JOURNAL).exists():
        from auditlang.store.journal import Journal

        with Journal(run_dir) as j:
            recs = j.fingerprints()
        by_hash = {h: r for h, r in recs.items()}
        for h, r in recs.items():
            if r.model not in hashes:
                hashes[r.model] = h
        for mid, h in hashes.items():
            if h in by_hash:
                fps[mid] = dict(by_hash[h].fingerprint)
    else:
        missing.append(JOURNAL)
    return RunData(spec, plan, run_dir, records, cells, run_info, fps, hashes, plan_json, missing)


def finite(a: Any) -> np.ndarray:
    """Float array of ``a`` (NaN kept)."""
    return np.asarray(a, dtype=float)


def is_nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
