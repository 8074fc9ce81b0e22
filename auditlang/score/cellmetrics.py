"""Per-cell metrics with percentile-bootstrap intervals, from the records table.

Only answered rows count: a row whose request failed in the engine (records ``status`` other
than ``ok``) is missing from every number of its cell and counted in ``n_error``; ``n`` is the
answered rows. Rows whose confidence is missing (unparsed verbal output, a label outside the
window, ...) are excluded from confidence metrics and counted (``n_conf_missing``); accuracy uses
every answered row with known correctness. VPR (verbal parse rate) and the answer parse rate are
reported per cell, over answered rows, with ``scale_mismatch_rate`` (replies whose number fits
another scale better, not read: evaluators/verbal.py); these two only where the cell's protocol reads a stated number
(its program's ``verbal_parse``), NaN elsewhere (empty in cells.csv). The audit's metrics are all
cell-level (the resolver rejects others, E134).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from auditlang.core.workers import fork_map, stage_workers
from auditlang.evaluators.verbal import SCALE_MISMATCH
from auditlang.metrics.bootstrap import bootstrap_ci, paired_cells_bootstrap
from auditlang.metrics.registry import CELL, METRICS, validate_params
from auditlang.plan.model import Plan
from auditlang.protocols.registry import PROGRAMS
from auditlang.resolve.bootstrap_units import audit_unit
from auditlang.resolve.spec import MetricRef, Spec
from auditlang.store.records import answered, read_records
from auditlang.store.rundir import CELLS_CSV, RECORDS

DEFAULT_METRICS = (MetricRef("accuracy"), MetricRef("ece", (("bins", 10), ("binning", "equal_width"))),
                   MetricRef("brier"), MetricRef("auroc"))


def audit_metrics(spec: Spec, audit_id: str) -> list[MetricRef]:
    ids = spec.get(audit_id).value.metrics
    return [spec.metrics[m] for m in ids] if ids else list(DEFAULT_METRICS)


def audit_bootstrap(spec: Spec, audit_id: str) -> tuple[int, int, float]:
    b = spec.get(audit_id).value.bootstrap
    if b and b in spec.objects:
        v = spec.get(b).value
        return v.resamples, v.seed, v.level
    return 1000, 42, 0.95


def _paired_groups(spec: Spec, records: pd.DataFrame) -> dict[str, tuple[str, pd.Index]]:
    """cell_id -> (group key, the group's item order) for audits with ``bootstrap(unit=paired)``:
    the cells of one (audit, model, dataset) are resampled on the same items."""
    out: dict[str, tuple[str, pd.Index]] = {}
    cells = records.drop_duplicates("cell_id")[["cell_id", "model", "dataset"]].copy()
    cells["aid"] = cells["cell_id"].str.split("/").str[0]
    for (aid, mid, dsid), g in cells.groupby(["aid", "model", "dataset"], sort=False):
        if aid not in spec.objects or audit_unit(spec, aid) != "paired":
            continue
        rows = records[records["cell_id"].isin(g["cell_id"])]
        items = pd.Index(rows.drop_duplicates("item_id").sort_values(["item_index", "item_id"])["item_id"])
        for cid in g["cell_id"]:
            out[cid] = (f"{aid}/{mid}/{dsid}", items)
    return out


def _aligned(df: pd.DataFrame, items: pd.Index, arrays: str) -> tuple[np.ndarray, ...]:
    """The cell's (conf, correct) or (correct,) on ``items`` (NaN where the cell has no usable value)."""
    d = df.drop_duplicates("item_id").set_index("item_id").reindex(items)
    correct = d["correct"].to_numpy(dtype=float)
    if arrays == "correct":
        return (correct,)
    return (d["confidence"].to_numpy(dtype=float), correct)


def parses_verbal(spec: Spec, pid: str) -> bool:
    """Whether protocol ``pid`` reads its confidence from a stated number (VPR applies to its cells)."""
    obj = spec.objects.get(pid)
    cls = PROGRAMS.get(obj.ctor) if obj is not None else None
    return bool(getattr(cls, "verbal_parse", False))


def _mismatch_rate(df: pd.DataFrame) -> float:
    """Share of the cell's answered rows whose stated number was on another scale (parser rule
    ``scale_mismatch``: not read, counted as a non-parse; evaluators/verbal.py)."""
    return float(df["extras"].astype(str).str.contains(_MISMATCH, regex=True).mean())


_MISMATCH = r'"rule": ?"' + SCALE_MISMATCH + '"'


def _safe(fn, *a, **k) -> float:
    try:
        v = fn(*a, **k)
        return float(v)
    except (ValueError, ZeroDivisionError, FloatingPointError):
        return math.nan


# cells' bootstrap intervals computed in forked workers on hosts with cores to spare (the same
# numbers: each cell's resampling is seeded on its own); core/workers.py says when ("cell_metrics")
_CT: dict[str, Any] = {}


def cell_table(spec: Spec, plan: Plan, records: pd.DataFrame, bootstrap: bool = True) -> pd.DataFrame:
    cell_meta = {c.id: c for c in plan.cells}
    paired = _paired_groups(spec, records) if bootstrap and len(records) else {}
    groups = list(records.groupby("cell_id", sort=False))
    workers = stage_workers("cell_metrics", len(groups), rows=len(records), enough_work=bootstrap)
    if workers <= 1:
        return pd.DataFrame(_cell_rows(spec, cell_meta, paired, groups, bootstrap))
    step = max(1, math.ceil(len(groups) / (6 * workers)))  # ~6 shares per worker, the heaviest handed out first
    shares = [(a, min(a + step, len(groups))) for a in range(0, len(groups), step)]
    rows = [sum(len(g[1]) for g in groups[a:b]) for a, b in shares]
    _CT["args"] = (spec, cell_meta, paired, groups, bootstrap)
    try:
        parts = fork_map(_cell_rows_share, shares, workers, weights=rows)
    finally:
        _CT.clear()
    return pd.DataFrame([row for part in parts for row in part])


def _cell_rows_share(share: tuple[int, int]) -> list[dict[str, Any]]:
    spec, cell_meta, paired, groups, bootstrap = _CT["args"]
    return _cell_rows(spec, cell_meta, paired, groups[share[0]:share[1]], bootstrap)


def _cell_rows(spec: Spec, cell_meta: dict, paired: dict, groups: list, bootstrap: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for cell_id, df_all in groups:
        df = answered(df_all)
        n_error = int(len(df_all) - len(df))
        if df.empty:
            df = df_all.iloc[0:0]
        c = cell_meta.get(cell_id)
        audit = c.audit if c else cell_id.split("/")[0]
        B, seed, level = audit_bootstrap(spec, audit) if audit in spec.objects else (1000, 42, 0.95)
        correct_all = df["correct"].to_numpy(dtype=float)
        known = ~np.isnan(correct_all)
        conf = df["confidence"].to_numpy(dtype=float)
        ok = known & ~np.isnan(conf)
        verbal = parses_verbal(spec, str(df_all["protocol"].iat[0]))
        row: dict[str, Any] = {
            "cell_id": cell_id, "audit": audit, "model": df_all["model"].iat[0], "dataset": df_all["dataset"].iat[0],
            "variant": df_all["variant"].iat[0], "protocol": df_all["protocol"].iat[0],
            "evaluator": df_all["evaluator"].iat[0], "confidence_kind": df["confidence_kind"].iat[0] if len(df) else "",
            "n": int(len(df)), "n_error": n_error, "n_correct_known": int(known.sum()),
            "n_conf": int(ok.sum()), "n_conf_missing": int((known & np.isnan(conf)).sum()),
            "answer_parse_rate": float(df["parsed"].mean()) if len(df) else math.nan,
            "vpr": float(df["confidence_parsed"].mean()) if len(df) and verbal else math.nan,
            "scale_mismatch_rate": _mismatch_rate(df) if len(df) and verbal else math.nan,
            "mean_confidence": float(np.nanmean(conf)) if ok.any() else math.nan,
        }
        for m in (audit_metrics(spec, audit) if audit in spec.objects else DEFAULT_METRICS):
            spec_m = METRICS.get(m.name)
            if spec_m is None:
                continue
            kwargs = validate_params(m.name, dict(m.params))
            if spec_m.inputs == "correct":
                arrays = (correct_all[known],)
            elif spec_m.inputs == "verbal":  # vpr(): the cell's parse rate, n/a where nothing is parsed
                row[m.label] = row["vpr"]
                parsed = df["confidence_parsed"].to_numpy(dtype=float)
                if bootstrap and verbal and parsed.size > 1:
                    # 000 App. E.2 "Per-cell VPR": the binary parseable indicators resampled within the cell,
                    # statistic mean(parseable)
                    ci = bootstrap_ci("accuracy", parsed, B=B, seed=seed, level=level)
                    row[f"{m.label} lo"], row[f"{m.label} hi"] = float(ci.low), float(ci.high)
                continue
            elif spec_m.level == CELL:  # conf+correct, or a plugin's cell metric fn(conf, correct)
                arrays = (conf[ok], correct_all[ok])
            else:  # only cell-level metrics reach an audit (resolver E134)
                raise ValueError(f"metric {m.name!r} is computed per {spec_m.level}, not per cell")
            if arrays[0].size == 0:
                row[m.label] = math.nan
                continue
            point = _safe(spec_m.fn, *arrays, **kwargs)
            row[m.label] = point
            if bootstrap and cell_id in paired and not math.isnan(point):
                # unit=paired: the items of (audit, model, dataset) resampled once for all its cells
                items = paired[cell_id][1]
                try:
                    ci = paired_cells_bootstrap({cell_id: _aligned(df, items, spec_m.inputs)}, m.name, B=B, seed=seed,
                                                level=level, **kwargs)[cell_id]
                    row[f"{m.label} lo"], row[f"{m.label} hi"] = float(ci.low), float(ci.high)
                except (ValueError, FloatingPointError):
                    row[f"{m.label} lo"] = row[f"{m.label} hi"] = math.nan
            elif bootstrap and arrays[0].size > 1 and not math.isnan(point):
                try:
                    ci = bootstrap_ci(m.name, *arrays, B=B, seed=seed, level=level, **kwargs)
                    row[f"{m.label} lo"], row[f"{m.label} hi"] = float(ci.low), float(ci.high)
                except (ValueError, FloatingPointError):
                    row[f"{m.label} lo"] = row[f"{m.label} hi"] = math.nan
        rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def to_markdown(df: pd.DataFrame, cols: list[str] | None = None) -> str:
    cols = cols or [c for c in df.columns if not c.endswith((" lo", " hi"))]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            s = _fmt(v)
            if f"{c} lo" in df.columns and isinstance(v, float) and not math.isnan(v):
                lo, hi = r[f"{c} lo"], r[f"{c} hi"]
                if not (math.isnan(lo) or math.isnan(hi)):
                    s += f" [{lo:.3f}, {hi:.3f}]"
            cells.append(s)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def write_cell_metrics(spec: Spec, plan: Plan, run_dir: Path, records) -> pd.DataFrame:

    df = read_records(run_dir / RECORDS)
    table = cell_table(spec, plan, df)
    cells = run_dir / CELLS_CSV
    cells.parent.mkdir(exist_ok=True)
    table.to_csv(cells, index=False)
    cells.with_suffix(".md").write_text(to_markdown(table), encoding="utf-8")
    cells.with_suffix(".json").write_text(json.dumps(json.loads(table.to_json(orient="records")), indent=1), encoding="utf-8")
    return table
