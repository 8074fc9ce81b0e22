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
from auditlang.store.records import read_records
from auditlang.score.cellmetrics import cell_table
from auditlang.store.journal import Journal
from auditlang.store.rundir import CELLS_CSV, JOURNAL, PLAN_FILE, RECORDS, RUN_FILE

DEFAULT_EVALUATOR = "<default>"
AXES = ("audit", "model", "dataset", "variant", "protocol", "evaluator")


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
    # records whose request failed (status other than ok): cell_id, item_id, status, error. They are
    # not in ``records`` (every comparison and figure reads answered items only) and are stated per cell
    failed: pd.DataFrame = field(default_factory=pd.DataFrame)
    _extras: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    # compare id -> its computed outcome (report/comparisons compute_one): a comparison that reads
    # others (grid_rows) reads these, never a second computation
    computed: dict[str, Any] = field(default_factory=dict, repr=False)
    _extras_raw: dict[int, Any] | None = field(default=None, repr=False)  # index -> extras JSON (one column read)
    _index: dict[tuple, pd.DataFrame] | None = field(default=None, repr=False)

    # ------------------------------------------------------------ selection
    def rows(self, audit: str, *, model: str | None = None, dataset: str | None = None, variant: str | None = None,
             protocol: str | None = None, evaluator: str | None = None) -> pd.DataFrame:
        """Records of one audit, filtered on any of the cell axes (original row index kept)."""
        if self.records.empty:
            return self.records
        if self._index is None:
            self._index = {k: g for k, g in self.records.groupby(list(AXES), sort=False)}
        want = (audit, model, dataset, variant, protocol, evaluator)
        if None not in want:
            got = self._index.get(want)
            return got if got is not None else self.records.iloc[0:0]
        parts = [g for key, g in self._index.items() if all(w is None or w == k for w, k in zip(want, key))]
        if not parts:
            return self.records.iloc[0:0]
        return pd.concat(parts).sort_index()

    def extras(self, row_index: int) -> dict[str, Any]:
        """Decoded ``extras`` JSON of one record (by DataFrame index), cached."""
        got = self._extras.get(row_index)
        if got is None:
            raw = self._extras_raw
            if raw is None or not self._extras:  # the column read once (again after _extras is cleared):
                # DataFrame.at per row was most of this method's time
                raw = self._extras_raw = dict(zip(self.records.index.tolist(), self.records["extras"].tolist()))
            try:
                got = json.loads(raw[row_index] or "{}")
            except (TypeError, ValueError):
                got = {}
            self._extras[row_index] = got
        return got

    def errors_by_cell(self, audit: str | None = None) -> dict[str, tuple[int, int, str]]:
        """cell_id -> (n_error, n answered, first error message) for every cell with a missing
        item, in cell order (of ``audit`` when given)."""
        if self.failed.empty:
            return {}
        answered = self.records.groupby("cell_id", sort=False).size() if not self.records.empty else {}
        out: dict[str, tuple[int, int, str]] = {}
        for cid, g in self.failed.groupby("cell_id", sort=False):
            if audit is None or str(cid).split("/")[0] == audit:
                out[str(cid)] = (len(g), int(answered.get(cid, 0)), str(g["error"].iat[0]))
        order = {c.id: i for i, c in enumerate(self.plan.cells)}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    def audit_ids(self) -> list[str]:
        return list(self.spec.of_kind("audit"))

    def audit(self, aid: str):
        return self.spec.get(aid).value

    def evaluators(self, aid: str) -> list[str]:
        return list(self.audit(aid).evaluators) or [DEFAULT_EVALUATOR]

    def vpr_threshold(self, aid: str) -> float:
        """audit.vpr_threshold, else settings.vpr_threshold when the spec sets it (000 appendix D.1:
        0.80); 0.0 (no cell excluded) when neither does: the VPR >= 0.80 inclusion rule is study
        000's, and a study without it (001) must not inherit it."""
        t = self.audit(aid).vpr_threshold
        if t is not None:
            return float(t)
        return float(self.spec.settings.vpr_threshold) if self.vpr_declared(aid) else 0.0

    def vpr_source(self, aid: str) -> str:
        """Where the audit's VPR threshold comes from: the spec line that sets it (a user's value),
        with study 000 appendix D.1 named only when the value is that study's 0.80."""
        o = self.spec.get(aid)
        if o.value.vpr_threshold is not None:
            where = o.param_span("vpr_threshold")
            what = "audit vpr_threshold"
        else:
            s = next((x for x in self.spec.of_kind("settings").values()
                      if "vpr_threshold" in {n for n, _ in x.param_spans}), None)
            if s is None:
                return "not set in the spec"
            where, what = s.param_span("vpr_threshold"), "settings vpr_threshold"
        value = self.vpr_threshold(aid)
        return (f"{what}, set in the spec at {Path(where.file).name}:{where.line}"
                + ("; 0.80 is study 000's value (appendix D.1)" if abs(value - 0.8) < 1e-12 else ""))

    def vpr_declared(self, aid: str) -> bool:
        """Whether the audit or the settings set vpr_threshold."""
        if self.audit(aid).vpr_threshold is not None:
            return True
        settings = self.spec.of_kind("settings")
        return bool(settings) and any("vpr_threshold" in {n for n, _ in o.param_spans} for o in settings.values())

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

    run_dir = Path(run_dir)
    missing: list[str] = []
    rec_path = run_dir / RECORDS
    if rec_path.exists():
        records = read_records(rec_path)
    else:
        missing.append(RECORDS)
        records = pd.DataFrame(columns=["cell_id", "model", "dataset", "variant", "protocol", "evaluator", "item_id",
                                        "item_index", "gold", "pred", "parsed", "parse_rule", "correct", "confidence",
                                        "confidence_parsed", "confidence_kind", "extras", "request_ids", "generation",
                                        "status", "error"])
    records = _slim(records.reset_index(drop=True))
    ok = (records["status"] == "ok").to_numpy(dtype=bool)
    failed = records.loc[~ok, ["cell_id", "item_id", "status", "error"]].reset_index(drop=True)
    cells_path = run_dir / CELLS_CSV
    if cells_path.exists():
        cells = pd.read_csv(cells_path)
    elif not records.empty:

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
    for mid in plan.models:  # a model declared twice ran as the first one (plan.runs_as)
        if mid not in hashes and plan.runs_as(mid) in hashes:
            hashes[mid] = hashes[plan.runs_as(mid)]
    if (run_dir / JOURNAL).exists():

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
    records = records[ok]  # answered items only (the failed ones are stated per cell from ``failed``)
    return RunData(spec, plan, run_dir, records, cells, run_info, fps, hashes, plan_json, missing, failed)


WORK_COLUMNS = ("cell_id", "model", "dataset", "variant", "protocol", "evaluator", "item_id", "item_index", "gold",
                "pred", "parsed", "parse_rule", "correct", "confidence", "confidence_parsed", "confidence_kind", "extras",
                "status", "error")


def _slim(records: pd.DataFrame) -> pd.DataFrame:
    """The working frame: numpy-backed columns (fast row selection), without raw generations."""
    out = pd.DataFrame(index=records.index)
    for c in WORK_COLUMNS:
        col = records[c]
        if c in ("correct", "confidence"):
            out[c] = col.to_numpy(dtype=float)
        elif c in ("parsed", "confidence_parsed"):
            out[c] = col.to_numpy(dtype=bool)
        elif c == "item_index":
            out[c] = col.to_numpy(dtype=np.int64)
        else:
            out[c] = np.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                               for v in col.tolist()], dtype=object)
    out["audit"] = np.array([str(c).split("/")[0] for c in out["cell_id"]], dtype=object)
    return out
