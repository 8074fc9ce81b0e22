"""Study 001 supplied-answer analysis (§3.3, App. H, Tables 6 and 13-15).

Per (model, dataset, evaluator) of one audit, on the verbalized confidences of four protocols
that differ only in the answer in the ``Guess:`` slot -- the model's own answer (``own``), the
gold answer (``gold``), another model's wrong answer (``plausible``) and an off-type wrong
answer (``off_type``) -- paired by item over the rows whose confidence parsed:

* mean confidence under gold, plausible wrong and off-type (Table 15's first three columns);
* gold - plaus.: conf(gold) - conf(plausible) over every item (Table 14 row 1);
* self - gold, diff. strings: conf(own) - conf(gold) over the items the model answered correctly
  with a string that differs from the gold after normalisation (Table 14 row 2; Table 15's
  "diff. pref.");
* self - gold, exact match: the same over correct answers equal to the gold string (row 3);
* gold - self, initially wrong: conf(gold) - conf(own) over the items the model got wrong (row 4).

Correctness is the evaluator's label of the model's own answer (the shared answer generation);
strings are compared after study 001's normalisation (``normalize_answer``). Each contrast has a
percentile bootstrap interval over its items (the audit's bootstrap settings); the pooled rows
pool every cell's items (Table 14: "Pooled"), the macro row averages the per-dataset means.
"""

from __future__ import annotations

import json
import math

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci
from auditlang.report.comparisons.common import CellGroup, Comparison, bootstrap_settings, by_item, cell_groups
from auditlang.report.comparisons.provenance_tables import (CONTRASTS, ItemValues, by_cell_table, by_dataset_table,
                                                            summary_table)
from auditlang.report.rundata import RunData
from auditlang.report.tables import Table, not_computable
from auditlang.resolve.models import group_label
from auditlang.evaluators.string_match import normalize_answer



def _conf(df):
    """The rows of one supplied-answer cell (pooled over the variants) whose confidence parsed, one per
    item; None when the cell has no records or the comparison names no such protocol."""
    if df is None:
        return None
    df = by_item(df)
    if df.empty:
        return None
    return df[df["confidence_parsed"].astype(bool)]


def _mean(x: list[float]) -> float:
    return float(np.mean(x)) if x else math.nan


def _supplied_gold(gold, i) -> str:
    """The gold string the supplied-gold prompt showed for item ``i`` (its record's ``supplied``), else
    the record's gold: for an item with choices the record's gold is the letter, not the answer text."""
    try:
        got = json.loads(gold.at[i, "extras"] or "{}").get("supplied") if "extras" in gold.columns else None
    except (TypeError, ValueError):
        got = None
    return str(got if isinstance(got, str) else gold.at[i, "gold"] or "")


def item_values(own, gold, plaus, off) -> ItemValues:
    """One cell's per-item confidences (self split by correctness) and paired differences."""
    v = ItemValues()
    out = v.values
    for key, df in (("gold", gold), ("plaus.", plaus), ("off-type", off)):
        if df is not None:
            out[key].extend(float(x) for x in df["confidence"])
    for z, x in zip(own["correct"], own["confidence"]):
        if z is not None and not (isinstance(z, float) and math.isnan(z)):
            out["self correct" if z else "self wrong"].append(float(x))
    if plaus is not None:
        for i in gold.index.intersection(plaus.index):
            out["gold - plaus."].append(float(gold.at[i, "confidence"]) - float(plaus.at[i, "confidence"]))
    for i in own.index.intersection(gold.index):
        z = own.at[i, "correct"]
        if z is None or (isinstance(z, float) and math.isnan(z)):
            continue
        c_own, c_gold = float(own.at[i, "confidence"]), float(gold.at[i, "confidence"])
        if z:
            same = normalize_answer(str(own.at[i, "pred"] or "")) == normalize_answer(_supplied_gold(gold, i))
            out["self - gold, exact match" if same else "self - gold, diff. strings"].append(c_own - c_gold)
        else:
            out["gold - self, initially wrong"].append(c_gold - c_own)
    return v


def provenance(rd: RunData, name: str, c) -> Comparison:
    a = rd.audit(c.audit)
    B, seed, level = bootstrap_settings(rd, c.audit)
    out = Comparison(name, "provenance", c.audit, shape="provenance")
    t = Table(name, f"Supplied-answer confidence and paired contrasts ({name}; 001 §3.3, App. H)",
              ["model", "dataset", "evaluator", "n", "self", "gold", "plaus.", "off-type", *CONTRASTS])
    gb = list(getattr(c, "group_by", []) or [])
    pooled: dict[tuple[str, ...], list[float]] = {}
    per_ds: dict[tuple[str, str, str], list[float]] = {}
    cells: list[tuple[tuple[str, ...], ItemValues]] = []
    sides = [x for x in (c.own, c.gold, c.plausible, c.off_type) if x]
    for g in cell_groups(rd, c.audit, by=("model", "dataset", "evaluator"), over={"protocol": sides}):
        grp = (group_label(rd.spec, g.key[0], gb),) if gb else ()
        v = _provenance_row(t, c, g, grp, pooled, per_ds)
        if v is not None:
            cells.append(((*grp, *g.key), v))
    t.notes.append("Means over the rows whose verbal confidence parsed; contrasts paired by item (see the "
                   "comparison's definitions in docs/report.md). Correctness: the evaluator's label of the model's "
                   "own answer; strings compared after study 001's normalisation.")
    out.tables.append(t)
    s = Table(f"{name}_pooled", f"Paired contrasts pooled over cells, with {int(100 * level)}% bootstrap intervals "
              f"({name}; 001 Tables 14, 15 'Pooled')", [*(["group"] if gb else []), "contrast", "evaluator", "n", "mean",
                                                        "lo", "hi"])
    for key, vals in pooled.items():
        if len(vals) < 2:
            s.add(*key, len(vals), _mean(vals), math.nan, math.nan)
            s.notes.append(not_computable(f"{' / '.join(key)}: fewer than two paired items, no interval"))
            continue
        ci = bootstrap_ci(np.mean, np.asarray(vals, dtype=float), B=B, seed=seed, level=level)
        s.add(*key, len(vals), float(np.mean(vals)), ci.low, ci.high)
    s.notes.append(f"Percentile bootstrap over the pooled items, B={B}, seed={seed}."
                   + (f" Pooled per group of models ({', '.join(gb)}; group_by=): "
                      + "; ".join(f"{g}: {', '.join(m for m in a.models if group_label(rd.spec, m, gb) == g)}"
                                  for g in dict.fromkeys(group_label(rd.spec, m, gb) for m in a.models)) + "."
                      if gb else " Pooled over every model of the audit."))
    out.tables.append(s)
    macro = _macro_table(rd, name, c, per_ds)
    out.tables.append(macro)
    out.tables += _paper_tables(rd, name, c, cells, bool(gb))
    out.summary += [f"{r['contrast']} ({r['evaluator']}{', ' + r['group'] if gb else ''}): {r['mean']:+.3f} over "
                    f"{r['n']} items" for r in s.records() if not math.isnan(r["mean"])]
    return out


def _provenance_row(t: Table, c, g: CellGroup, grp: tuple[str, ...], pooled: dict, per_ds: dict) -> ItemValues | None:
    """One (model, dataset, evaluator)'s mean confidences and contrasts; its per-item differences
    pooled (per group and evaluator) and its means kept for the macro table. Returns its per-item
    values (None: the cell has no own or gold records)."""
    m, d, e = g.key
    own, gold = _conf(g.rows.get(c.own)), _conf(g.rows.get(c.gold))
    plaus, off = _conf(g.rows.get(c.plausible)), _conf(g.rows.get(c.off_type))
    if own is None or gold is None:
        t.nc(f"no records of protocol '{c.own if own is None else c.gold}'", g.where)
        return None
    vals = item_values(own, gold, plaus, off)
    diffs = vals.values
    means = {
        "self": float(own["confidence"].mean()) if len(own) else math.nan,
        "gold": float(gold["confidence"].mean()) if len(gold) else math.nan,
        "plaus.": float(plaus["confidence"].mean()) if plaus is not None and len(plaus) else math.nan,
        "off-type": float(off["confidence"].mean()) if off is not None and len(off) else math.nan,
    }
    for k, v in means.items():
        per_ds.setdefault((m, e, k), []).append(v)
    t.add(m, d, e, len(own), *means.values(), *(_mean(diffs[k]) for k in CONTRASTS))
    for k in CONTRASTS:
        pooled.setdefault((*grp, k, e), []).extend(diffs[k])
    return vals


def _paper_tables(rd: RunData, name: str, c, cells: list[tuple[tuple[str, ...], ItemValues]], gb: bool) -> list[Table]:
    """Tables 6, 13 and 15 in 001's shapes (report/comparisons/provenance_tables.py) from the cells'
    per-item values keyed (group?, model, dataset, evaluator)."""
    evals = rd.evaluators(c.audit)
    several = len(evals) > 1
    k0 = 1 if gb else 0
    summary: dict[str, ItemValues] = {}
    per_ds: dict[tuple[str, ...], dict[str, ItemValues]] = {}
    rows = []
    for key, v in cells:
        grp, (m, d, e) = key[:k0], key[k0:]
        col = " / ".join([*grp, *([e] if several else [])])
        summary.setdefault(col, ItemValues()).extend(v)
        per_ds.setdefault((*grp, *([e] if several else [])), {}).setdefault(d, ItemValues()).extend(v)
        rows.append(((*grp, m, d, *([e] if several else [])), v))
    if gb:  # the groups in the order of their first model
        rows.sort(key=lambda r: list(per_ds).index(tuple(r[0][:1]) + (r[0][3:] if several else ())))
    return [summary_table(name, summary, evals), by_cell_table(name, rows, gb, several),
            by_dataset_table(name, per_ds, gb, several, bootstrap_settings(rd, c.audit))]


def _macro_table(rd: RunData, name: str, c, per_ds: dict) -> Table:
    """001 Table 15 'Macro': per model and evaluator, the mean over the datasets of each mean confidence."""
    macro = Table(f"{name}_macro", f"Macro mean over datasets per model ({name}; 001 Table 15 'Macro')",
                  ["model", "evaluator", "self", "gold", "plaus.", "off-type"])
    for m in rd.audit(c.audit).models:
        for e in rd.evaluators(c.audit):
            vals = [per_ds.get((m, e, k), []) for k in ("self", "gold", "plaus.", "off-type")]
            if any(vals):
                macro.add(m, e, *(float(np.nanmean(v)) if v and not all(math.isnan(x) for x in v) else math.nan
                                  for v in vals))
    return macro
