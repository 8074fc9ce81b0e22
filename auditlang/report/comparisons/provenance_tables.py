"""Study 001's supplied-answer tables in the paper's shapes, from the per-item values that
``provenance`` collects (``ItemValues``, one per cell, pooled per group of models):

* ``<compare>_summary`` (Table 6): the pooled quantities, one column per group -- self correct /
  self wrong / supplied gold / plausible wrong / off-type means, the marginal gold - plaus. wrong
  difference (difference of the two pooled means), the four paired contrasts and the share of
  correct answers whose string differs from the supplied gold;
* ``<compare>_by_cell`` (Table 13): per (model, dataset) Y_cor, Y_wr, gold, plaus., off-type and the
  two discriminations, self = Y_cor - Y_wr and suppl. = the paired Y_gold - Y_plaus.;
* ``<compare>_by_dataset`` (Table 15): per group, per dataset the gold / plaus. / off-type means and
  "diff. pref." (the paired self - gold contrast on correct answers with a different string), a
  Macro row (the mean over the datasets of the three means) and a Pooled row (diff. pref. over
  every item of the group, with its percentile bootstrap interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from auditlang.metrics.bootstrap import bootstrap_ci
from auditlang.report.tables import NA, Table, fixed

MEANS = ("self correct", "self wrong", "gold", "plaus.", "off-type")
CONTRASTS = ("gold - plaus.", "self - gold, diff. strings", "self - gold, exact match", "gold - self, initially wrong")
SUMMARY_ROWS = ("self correct mean", "self wrong mean", "supplied gold mean", "supplied plaus. wrong mean",
                "supplied off-type mean", "marginal gold - plaus. wrong", "paired gold - plaus. wrong",
                "self - gold, diff. strings", "self - gold, exact match", "gold - self, initially wrong",
                "correct diff.-string share")


@dataclass
class ItemValues:
    """The per-item confidences (``MEANS``: parsed rows of each condition; self split by the
    evaluator's label) and paired differences (``CONTRASTS``) of one cell or of cells pooled."""

    values: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in (*MEANS, *CONTRASTS)})

    def extend(self, other: ItemValues) -> None:
        for k, v in other.values.items():
            self.values[k].extend(v)

    def mean(self, key: str) -> float:
        v = self.values[key]
        return float(np.mean(v)) if v else math.nan

    def diff_share(self) -> float:
        """Of the correct answers paired with a parsed gold confidence, the share whose string
        differs from the supplied gold (Table 6's "correct diff.-string share")."""
        d, e = len(self.values["self - gold, diff. strings"]), len(self.values["self - gold, exact match"])
        return d / (d + e) if d + e else math.nan


def _summary_values(v: ItemValues) -> list[float | str]:
    means = [v.mean(k) for k in MEANS]
    share = v.diff_share()  # in percent, as 001 prints it
    return [*means, means[2] - means[3], *(v.mean(k) for k in CONTRASTS), share if math.isnan(share)
            else f"{100 * share:.1f}%"]


def summary_table(name: str, groups: dict[str, ItemValues], evaluators: list[str]) -> Table:
    """Table 6: quantity rows, one value column per group (and evaluator, when several)."""
    cols = list(groups)
    t = Table(f"{name}_summary", f"Verbalized confidence by Guess:-slot fill, pooled ({name}; 001 Table 6)",
              ["quantity", *(cols if cols != [""] else ["value"])])
    vals = {g: _summary_values(v) for g, v in groups.items()}
    for i, q in enumerate(SUMMARY_ROWS):
        t.add(q, *(vals[g][i] for g in cols))
    ns = ", ".join(f"{g + ': ' if g else ''}n = {len(v.values['gold'])} supplied-gold items" for g, v in groups.items())
    t.notes.append(f"Means pooled over the items of every cell ({ns}); 'marginal' is the difference of the pooled "
                   "gold and plausible-wrong means, 'paired' rows average per-item differences (intervals in "
                   f"{name}_pooled); the share is of the correct answers paired with a supplied-gold confidence."
                   + (f" Evaluator {evaluators[0]}." if len(evaluators) == 1 else ""))
    return t


def by_cell_table(name: str, cells: list[tuple[tuple[str, ...], ItemValues]], gb: bool, evals: bool) -> Table:
    """Table 13: per (group,) model, dataset (, evaluator) the self means split by correctness, the
    supplied means and the two discriminations."""
    key_cols = [*(["group"] if gb else []), "model", "dataset", *(["evaluator"] if evals else [])]
    t = Table(f"{name}_by_cell", f"Per-cell mean verbalized confidence by Guess:-slot fill ({name}; 001 Table 13)",
              [*key_cols, "Y_cor", "Y_wr", "gold", "plaus.", "off-type", "self", "suppl."])
    for key, v in cells:
        y_cor, y_wr = v.mean("self correct"), v.mean("self wrong")
        t.add(*key, y_cor, y_wr, v.mean("gold"), v.mean("plaus."), v.mean("off-type"), y_cor - y_wr,
              v.mean("gold - plaus."))
    t.notes.append("self = Y_cor - Y_wr (the model's own answer, split by the evaluator's label); suppl. = the "
                   "paired Y_gold - Y_plaus. over the items with both confidences parsed.")
    return t


def by_dataset_table(name: str, groups: dict[tuple[str, ...], dict[str, ItemValues]], gb: bool, evals: bool,
                     boot: tuple[int, int, float]) -> Table:
    """Table 15: per group (and evaluator) the dataset rows, Macro and Pooled."""
    B, seed, level = boot
    key_cols = [*(["group"] if gb else []), *(["evaluator"] if evals else [])]
    t = Table(f"{name}_by_dataset", f"Supplied-answer means per dataset, Macro and Pooled ({name}; 001 Table 15)",
              [*key_cols, "dataset", "gold", "plaus.", "off-type", "diff. pref."])
    for key, per_ds in groups.items():
        rows = [(d, v.mean("gold"), v.mean("plaus."), v.mean("off-type")) for d, v in per_ds.items()]
        for (d, *means), v in zip(rows, per_ds.values()):
            t.add(*key, d, *means, v.mean("self - gold, diff. strings"))
        t.add(*key, "Macro", *(_nanmean([r[i] for r in rows]) for i in (1, 2, 3)), NA)
        pooled = ItemValues()
        for v in per_ds.values():
            pooled.extend(v)
        t.add(*key, "Pooled", NA, NA, NA, _with_interval(pooled.values["self - gold, diff. strings"], B, seed, level))
    t.notes.append("diff. pref.: the paired self - gold contrast on correct answers whose string differs from the "
                   f"supplied gold; Macro: the mean over the datasets; Pooled: over every item, with its "
                   f"{int(100 * level)}% percentile bootstrap interval (B={B}, seed={seed}).")
    return t


def _nanmean(xs: list[float]) -> float:
    ok = [x for x in xs if not math.isnan(x)]
    return float(np.mean(ok)) if ok else math.nan


def _with_interval(vals: list[float], B: int, seed: int, level: float) -> str | float:
    """``mean [lo, hi]`` as 001 prints it (signed), or the mean alone under two items."""
    if not vals:
        return math.nan
    m = float(np.mean(vals))
    if len(vals) < 2:
        return m
    ci = bootstrap_ci(np.mean, np.asarray(vals, dtype=float), B=B, seed=seed, level=level)
    return f"{_signed(m)} [{_signed(ci.low)}, {_signed(ci.high)}]"


def _signed(x: float) -> str:
    s = fixed(x)
    return s if s.startswith("-") or float(s) == 0 else "+" + s
