"""Study 001 App. B (Table 8): the context-shift diagnostics between the bare query and the
verbalized-prefixed context. Of 001's three layers only L3 is computed: the format-aware behavioural
generation-change rate, per (model, dataset) the share of items whose ``Guess:`` in the joint
verbalized call (record extras ``guess`` of a ``mode=joint`` verbal protocol) differs, after study
001's normalisation, from the bare-query answer the evaluator extracted; items whose verbalized
generation has no ``Guess:`` line are left out of the rate and counted (format-aware). The first
``items=`` items of each cell (by item index; 001: n = 200). Rows as 001's: per model family (the
model's ``family``, else its name) and variant (Instruct / base) the mean +- std over the datasets,
then an aggregate row per variant over every (model, dataset) cell. L1 (first-step next-token KL)
and L2 (1 - CKA of final-layer hidden states) need next-token distributions and hidden states of
two contexts, which no request kind returns for a pair of prompts: their columns say so (n/a).
"""

from __future__ import annotations

import json
import math

import numpy as np

from auditlang.evaluators.string_match import normalize_answer
from auditlang.report.comparisons.common import Comparison, cell_groups
from auditlang.report.rundata import RunData
from auditlang.report.tables import NA, Table
from auditlang.resolve.models import group_label, model_attribute


def change_rate(rows, items: int | None) -> tuple[float, int, int]:
    """(rate, items with a Guess:, items without) of one cell's records."""
    df = rows.drop_duplicates("item_id").sort_values(["item_index", "item_id"])
    if items:
        df = df.head(items)
    changed = read = missing = 0
    for pred, extras in zip(df["pred"], df["extras"]):
        try:
            guess = json.loads(extras or "{}").get("guess")
        except (TypeError, ValueError):
            guess = None
        if not isinstance(guess, str) or not normalize_answer(guess):
            missing += 1
            continue
        read += 1
        changed += int(normalize_answer(guess) != normalize_answer(str(pred or "")))
    return (changed / read if read else math.nan), read, missing


def _mean_std(xs: list[float]) -> str | float:
    ok = [x for x in xs if not math.isnan(x)]
    if not ok:
        return math.nan
    sd = float(np.std(ok, ddof=1)) if len(ok) > 1 else math.nan
    return f"{np.mean(ok):.2f} ± {sd:.2f}" if not math.isnan(sd) else f"{np.mean(ok):.2f}"


def context_shift(rd: RunData, name: str, c) -> Comparison:
    ev = (list(c.evaluators) or rd.evaluators(c.audit))[0]
    out = Comparison(name, "context_shift", c.audit, shape="context_shift")
    per_cell = Table(f"{name}_by_cell", f"Answer-change rate bare vs verbalized-prefixed context per cell ({name}; "
                     "001 App. B)", ["model", "dataset", "L3 behav.", "n read", "n no Guess"])
    fam: dict[tuple[str, str], list[float]] = {}
    agg: dict[str, list[float]] = {}
    for g in cell_groups(rd, c.audit, by=("model", "dataset"), over={"protocol": (c.verbal,)},
                         fixed={"evaluator": ev}):
        m, d = g.key
        rows = g.rows[c.verbal]
        if rows.empty:
            per_cell.nc(f"no records of protocol '{c.verbal}'", g.where)
            continue
        rate, read, missing = change_rate(rows, c.items)
        per_cell.add(m, d, rate, read, missing)
        family = model_attribute(rd.spec, m, "family") or m
        variant = group_label(rd.spec, m, ["instruct"])
        fam.setdefault((str(family), variant), []).append(rate)
        agg.setdefault(variant, []).append(rate)
    t = Table(name, f"Context-shift quantification, mean ± std across datasets ({name}; 001 Table 8)",
              ["model pair", "variant", "L1 KL", "L2 (1-CKA)", "L3 behav."])
    for (family, variant), rates in fam.items():
        t.add(family, variant, NA, NA, _mean_std(rates))
    for variant, rates in agg.items():
        t.add(f"Aggregate {variant} (n={len(rates)})", variant, NA, NA, _mean_std(rates))
    t.notes.append(f"L3: the share of items whose Guess: in {c.verbal}'s joint call differs (normalised) from the "
                   f"bare-query answer ({ev}'s extraction), over the items with a Guess: line"
                   + (f", the first {c.items} per cell" if c.items else "") + "; std: sample std (ddof=1) over the "
                   "datasets (aggregate: over the cells). L1 and L2 are not computed: they need next-token "
                   "distributions and hidden states under two contexts, which no request kind returns (n/a).")
    out.tables += [t, per_cell]
    out.summary.append("; ".join(f"L3 {v}: {_mean_std(r)}" for v, r in agg.items()))
    return out
