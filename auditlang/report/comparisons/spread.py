"""Study 000 prompt-perturbation spread and its correlation with model size.

spread = max - min of a metric (default accuracy) over a named variant set, per (model, dataset)
(000 section 3, Table 3), with the example-level paired percentile bootstrap of appendix E.2
(items resampled jointly across variants, max - min recomputed on every resample). The size
correlation is Spearman's rho (or Pearson) across models per dataset (000 section 4.3, Table 10).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from auditlang.metrics.bootstrap import bootstrap_ci
from auditlang.metrics.correlation import pearson, spearman
from auditlang.report.comparisons.common import (
    ACCURACY,
    Comparison,
    MetricChoice,
    bootstrap_settings,
    by_item,
    cell_groups,
    known,
    metric_choice,
    model_family,
    model_size,
)
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable


def _spread_row(key: tuple[str, ...], frames: dict[str, pd.DataFrame], items: list, variants: list[str],
                metric: MetricChoice, need_conf: bool, boot: tuple[int, int, float]) -> dict[str, Any]:
    """One (model, dataset, evaluator, protocol)'s per-variant values on the shared items, spread and its CI."""
    model, dataset, ev, p = key
    B, seed, level = boot
    arrs: list[np.ndarray] = []
    vals: dict[str, float] = {}
    for v in variants:
        f = frames[v].loc[items]
        z = f["correct"].to_numpy(dtype=float)
        c = f["confidence"].to_numpy(dtype=float)
        arrs += [z] if not need_conf else [c, z]
        vals[v] = metric(c if need_conf else None, z)
    fn = _spread_fn(metric, len(variants))
    ci = bootstrap_ci(fn, *arrs, B=B, seed=seed, level=level) if len(items) > 1 else None
    point = fn(*arrs)
    return {"model": model, "dataset": dataset, "evaluator": ev, "protocol": p, "n_items": len(items),
            "values": vals, "spread": point,
            "lo": float(ci.low) if ci else float("nan"), "hi": float(ci.high) if ci else float("nan"),
            "max_variant": max(vals, key=vals.get), "min_variant": min(vals, key=vals.get)}


def _paired(cells: dict[str, pd.DataFrame], variants: list[str],
            need_conf: bool) -> tuple[dict[str, pd.DataFrame], list[str], str | None]:
    """Each variant's scored records by item and the items every variant scored; else why not."""
    frames: dict[str, pd.DataFrame] = {}
    for v in variants:
        df = known(cells[v], need_conf)
        if df.empty:
            return {}, [], f"no scored records for variant '{v}'"
        frames[v] = by_item(df)
    common = set.intersection(*(set(f.index) for f in frames.values()))
    items = [i for i in frames[variants[0]].index if i in common]
    if not items:
        return {}, [], "the variants share no scored item"
    return frames, items, None


def _spread_fn(metric: MetricChoice, n_variants: int):
    def spread(*arrs: np.ndarray) -> float:
        vals = []
        for k in range(n_variants):
            if metric.inputs == "correct":
                vals.append(metric(None, arrs[k]))
            else:
                vals.append(metric(arrs[2 * k], arrs[2 * k + 1]))
        return float(max(vals) - min(vals))
    return spread


def spread_rows(rd: RunData, aid: str, variants: list[str], metric: MetricChoice) -> tuple[list[dict[str, Any]], list[str]]:
    """One dict per (model, dataset, evaluator[, protocol]) with per-variant values, spread and its CI."""
    a = rd.audit(aid)
    B, seed, level = bootstrap_settings(rd, aid)
    need_conf = metric.inputs != "correct"
    # accuracy comes from the answer generation, which every protocol of a cell shares: one protocol suffices
    protocols = list(a.protocols) if need_conf else list(a.protocols[:1])
    rows, notes = [], []
    for g in cell_groups(rd, aid, by=("model", "dataset", "evaluator", "protocol"), over={"variant": variants},
                         levels={"protocol": protocols}):
        where = " / ".join(g.key if need_conf else g.key[:3])
        frames, items, why = _paired(g.rows, variants, need_conf)
        if why:
            notes.append(not_computable(f"spread for {where}: {why}"))
            continue
        rows.append(_spread_row(g.key, frames, items, variants, metric, need_conf, (B, seed, level)))
    return rows, notes


def _variants(rd: RunData, c) -> list[str]:
    return list(c.variants) or list(rd.audit(c.audit).variants)


def spread(rd: RunData, name: str, c) -> Comparison:
    variants = _variants(rd, c)
    metric = metric_choice(rd, c.metric, ACCURACY)
    out = Comparison(name, "spread", c.audit, shape="spread")
    t = Table(f"{name}", f"Prompt-perturbation spread ({name}): max - min {metric.label} over {', '.join(variants)}",
              ["model", "dataset", "evaluator", "protocol", "n_items", *variants, "spread", "spread lo", "spread hi",
               "max variant", "min variant"])
    if len(variants) < 2:
        t.notes.append(not_computable(f"spread needs at least two variants, the comparison names {variants}"))
        out.tables.append(t)
        return out
    rows, notes = spread_rows(rd, c.audit, variants, metric)
    for r in rows:
        t.add(r["model"], r["dataset"], r["evaluator"], r["protocol"], r["n_items"], *[r["values"][v] for v in variants],
              r["spread"], r["lo"], r["hi"], r["max_variant"], r["min_variant"])
    B, seed, level = bootstrap_settings(rd, c.audit)
    t.notes.append(f"{int(level * 100)}% percentile bootstrap over paired items (B={B}, seed={seed}); items scored "
                   "under every variant only (study 000 appendix E.2).")
    if metric.inputs == "correct":
        t.notes.append(f"Accuracy is read from protocol '{rd.audit(c.audit).protocols[0]}' (every protocol of a cell "
                       "shares the answer generation).")
    t.notes += notes
    extremes = c.extremes
    out.tables += [t, by_model_table(rd, name, rows, extremes)]
    out.data = {"variants": variants, "rows": rows, "metric": metric.label, "extremes": extremes}
    out.summary.append(f"{len(rows)} spreads; largest {max((r['spread'] for r in rows), default=float('nan')):.3f}"
                       if rows else "no spread computable")
    return out


def by_model_table(rd: RunData, name: str, rows: list[dict[str, Any]], extremes: int) -> Table:
    """000 Table 3: a row per model (ascending declared size, ties in the audit's order) with its size and
    family, a column per dataset holding the spread; with ``extremes`` = k the k lowest and k highest
    values of each column (at the three decimals shown, ties at the cut all marked) in bold."""
    extra = [k for k in ("evaluator", "protocol") if len({r[k] for r in rows}) > 1]
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    t = Table(f"{name}_by_model", f"Prompt-perturbation spread per model and dataset ({name}; 000 Table 3)",
              ["model", "size (B)", "family", *extra, *datasets])
    keys = list(dict.fromkeys((r["model"], *(r[k] for k in extra)) for r in rows))
    order = {m: i for i, m in enumerate(dict.fromkeys(r["model"] for r in rows))}
    size = {m: model_size(rd, m)[0] for m in order}
    keys.sort(key=lambda k: (size[k[0]] is None, size[k[0]] or 0.0, order[k[0]]))
    val = {(r["model"], *(r[k] for k in extra), r["dataset"]): r["spread"] for r in rows}
    for k in keys:
        t.add(k[0], size[k[0]], model_family(rd, k[0]), *k[1:], *(val.get((*k, d), float("nan")) for d in datasets))
    if extremes:
        for d in datasets:
            _mark_extremes(t, d, extremes)
        t.notes.append(f"Bold: the {extremes} lowest and the {extremes} highest spreads of each column, compared at "
                       "the three decimals shown; ties at the cut are all marked (000 Table 3).")
    t.notes.append("Rows by ascending declared size (the model's size=, else the embedded catalogue's); the paired "
                   f"bootstrap interval of each spread is in the table '{name}'.")
    return t


def _mark_extremes(t: Table, col: str, k: int) -> None:
    """Mark (bold) the rows of ``col`` whose shown value is among its ``k`` lowest or ``k`` highest;
    none when the column holds fewer than two distinct values."""
    j = t.columns.index(col)
    shown = {i: round(float(r[j]), t.digits) for i, r in enumerate(t.rows) if not np.isnan(float(r[j]))}
    ordered = sorted(shown.values())
    if len(set(ordered)) < 2:
        return
    lo, hi = ordered[min(k, len(ordered)) - 1], ordered[-min(k, len(ordered))]
    t.marks.update({(i, col): "extreme" for i, v in shown.items() if v <= lo or v >= hi})


def size_spread(rd: RunData, name: str, c) -> Comparison:
    base = spread(rd, name + "_spreads", c)
    out = Comparison(name, "size_spread", c.audit, shape="size_spread", tables=list(base.tables), data=dict(base.data))
    method = c.method
    t = Table(name, f"Model size vs spread ({name}, {method} correlation per dataset)",
              ["dataset", "evaluator", "protocol", "method", "n_models", "r", "p_value", "sizes (B)", "spreads"])
    rows = base.data.get("rows", [])
    sizes: dict[str, float | None] = {}
    for m in rd.audit(c.audit).models:
        size, source = model_size(rd, m)
        sizes[m] = size
        if source == "embedded catalogue":
            t.notes.append(f"size of '{m}' ({size} B) is taken from the embedded-model catalogue (the spec gives none)")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["evaluator"], r["protocol"]), []).append(r)
    points = []
    for (ds, ev, p), rs in groups.items():
        lacking = [r["model"] for r in rs if sizes.get(r["model"]) is None]
        if lacking:
            t.notes.append(not_computable(f"{ds} / {ev}: model(s) {', '.join(lacking)} declare no size (add size=...)"))
            continue
        x = [float(sizes[r["model"]]) for r in rs]
        y = [r["spread"] for r in rs]
        corr = (spearman if method == "spearman" else pearson)(x, y)
        if np.isnan(corr.r):
            why = "fewer than 3 models" if len(x) < 3 else "sizes or spreads are all equal"
            t.notes.append(not_computable(f"{method} correlation for {ds} / {ev}: {why} (n={len(x)})"))
        t.add(ds, ev, p, method, len(x), corr.r, corr.p, ", ".join(f"{r['model']}={s:g}" for r, s in zip(rs, x)),
              ", ".join(f"{v:.3f}" for v in y))
        points += [(ds, r["model"], s, r["spread"], ev, p) for r, s in zip(rs, x)]
    out.tables.append(t)
    out.data["size_points"] = points
    out.summary.append(f"{len(t.rows)} correlation(s)")
    return out
