"""``auditc diff``'s pure function (auditlang/score/rundiff.py) against an independent paired
bootstrap written out here, and hand-computed edge cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from auditlang.score.rundiff import DiffMetric, diff_runs, paired_cell_diff, significance

ACC, BRIER = DiffMetric("accuracy", "accuracy"), DiffMetric("brier", "brier")
AUROC = DiffMetric("auroc", "auroc")


def records(cell: str, correct, conf, ids=None) -> pd.DataFrame:
    n = len(correct)
    ids = ids if ids is not None else [f"q{i}" for i in range(n)]
    return pd.DataFrame({"cell_id": cell, "item_id": ids, "item_index": [int(i[1:]) for i in ids],
                         "correct": np.asarray(correct, dtype=float), "confidence": np.asarray(conf, dtype=float)})


def independent(stat, a_cols, b_cols, B, seed, level):
    """Paired percentile bootstrap by hand: one index draw per replicate for both sides."""
    n = len(a_cols[0])
    idx = np.random.default_rng(seed).integers(0, n, size=(B, n))
    reps = []
    for row in idx:
        try:
            reps.append(stat(*(c[row] for c in b_cols)) - stat(*(c[row] for c in a_cols)))
        except ZeroDivisionError:
            reps.append(math.nan)
    reps = np.array(reps)
    reps = reps[~np.isnan(reps)]
    alpha = (1 - level) / 2
    return stat(*b_cols) - stat(*a_cols), np.quantile(reps, alpha), np.quantile(reps, 1 - alpha)


def acc(correct):
    return sum(correct) / len(correct)


def brier(conf, correct):
    return sum((p - y) ** 2 for p, y in zip(conf, correct)) / len(conf)


def auroc(conf, correct):  # Mann-Whitney with ties counted 1/2
    pos = [p for p, y in zip(conf, correct) if y == 1]
    neg = [p for p, y in zip(conf, correct) if y == 0]
    if not pos or not neg:
        raise ZeroDivisionError
    return sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))


@pytest.fixture
def synthetic():
    rng = np.random.default_rng(0)
    n = 80
    y_a = (rng.random(n) < 0.55).astype(float)
    y_b = np.where(rng.random(n) < 0.8, y_a, 1 - y_a)  # correlated with A: pairing matters
    c_a = np.round(rng.random(n), 1)  # rounded: many ties
    c_b = np.clip(np.round(c_a + rng.normal(0, 0.2, n), 1), 0, 1)
    return y_a, y_b, c_a, c_b


@pytest.mark.parametrize("metric,stat,cols", [(ACC, acc, "y"), (BRIER, brier, "cy"), (AUROC, auroc, "cy")])
def test_matches_an_independent_paired_bootstrap(synthetic, metric, stat, cols) -> None:
    y_a, y_b, c_a, c_b = synthetic
    a, b = records("c", y_a, c_a), records("c", y_b, c_b)
    row = paired_cell_diff("c", a, b, metric, B=400, seed=7, level=0.9)
    pick = (lambda c, y: (y,)) if cols == "y" else (lambda c, y: (c, y))
    point, lo, hi = independent(stat, pick(c_a, y_a), pick(c_b, y_b), 400, 7, 0.9)
    assert row.n_paired == 80 and (row.B, row.seed, row.level) == (400, 7, 0.9)
    assert row.diff == pytest.approx(point) and row.b - row.a == pytest.approx(point)
    assert (row.low, row.high) == (pytest.approx(lo), pytest.approx(hi))
    assert row.significant == (lo > 0 or hi < 0)


def test_pairing_uses_items_both_runs_scored_in_a_order(synthetic) -> None:
    y_a, y_b, c_a, c_b = synthetic
    a = records("c", y_a, c_a)
    b = records("c", y_b, c_b).iloc[::-1]  # B stored in another order
    b.loc[b.index[:5], "confidence"] = np.nan  # B: 5 unparsed confidences (items q79..q75)
    a.loc[a.index[:3], "correct"] = np.nan  # A: 3 items of unknown correctness (q0..q2)
    row = paired_cell_diff("c", a, b, BRIER, B=300, seed=1)
    keep = np.r_[3:75]
    point, lo, hi = independent(brier, (c_a[keep], y_a[keep]), (c_b[keep], y_b[keep]), 300, 1, 0.95)
    assert (row.n_a, row.n_b, row.n_paired) == (77, 75, 72)
    assert (row.diff, row.low, row.high) == (pytest.approx(point), pytest.approx(lo), pytest.approx(hi))
    acc_row = paired_cell_diff("c", a, b, ACC, B=300, seed=1)  # accuracy needs no confidence: 77 paired
    assert acc_row.n_paired == 77


def test_hand_computed_edge_cases() -> None:
    # all correct in both runs: difference 0, interval [0, 0], not significant
    row = paired_cell_diff("c", records("c", [1, 1, 1], [0.9] * 3), records("c", [1, 1, 1], [0.9] * 3), ACC)
    assert (row.diff, row.low, row.high, row.significant) == (0.0, 0.0, 0.0, False)
    assert "includes 0" in significance(row)
    # B right everywhere A is wrong: every replicate is +1
    row = paired_cell_diff("c", records("c", [0, 0, 0, 0], [0.5] * 4), records("c", [1, 1, 1, 1], [0.5] * 4), ACC)
    assert (row.diff, row.low, row.high, row.significant) == (1.0, 1.0, 1.0, True)
    assert significance(row).startswith("B higher")
    # Brier by hand: A = mean((0.8-1)^2, (0.4-0)^2) = 0.1, B = mean((1-1)^2, (0-0)^2) = 0
    row = paired_cell_diff("c", records("c", [1, 0], [0.8, 0.4]), records("c", [1, 0], [1.0, 0.0]), BRIER)
    assert (row.a, row.b, row.diff) == (pytest.approx(0.1), 0.0, pytest.approx(-0.1))
    # NaN confidences everywhere in A: nothing to pair, said so
    row = paired_cell_diff("c", records("c", [1, 0], [math.nan] * 2), records("c", [1, 0], [0.5] * 2), BRIER)
    assert row.n_paired == 0 and math.isnan(row.diff) and row.significant is None and "in A" in row.note
    # AUROC on one class: undefined, no interval
    row = paired_cell_diff("c", records("c", [1, 1], [0.2, 0.9]), records("c", [1, 1], [0.3, 0.4]), AUROC)
    assert row.significant is None and math.isnan(row.low)


def test_cells_matched_by_id_and_unmatched_reported() -> None:
    a = pd.concat([records("x", [1, 0], [0.5, 0.5]), records("only_a", [1], [0.5])])
    b = pd.concat([records("only_b", [1], [0.5]), records("x", [1, 1], [0.5, 0.5])])
    res = diff_runs(a, b, {"x": [ACC]}, {"x": (50, 3, 0.95)})
    assert res.only_a == ["only_a"] and res.only_b == ["only_b"]
    assert [(r.cell_id, r.metric, r.diff, r.B, r.seed) for r in res.rows] == [("x", "accuracy", 0.5, 50, 3)]


def _recs(cells: list[str]) -> pd.DataFrame:
    rows = [{"cell_id": c, "item_id": f"i{k}", "item_index": k, "confidence": 0.5, "correct": float(k % 2)}
            for c in cells for k in range(4)]
    return pd.DataFrame(rows)


def test_match_cells_by_axis_and_by_name() -> None:
    from auditlang.score.rundiff import match_cells

    a = _recs(["s/smol/d/v/p/e", "s/smol/d/v/p/f"])
    b = _recs(["s/gemma/d/v/p/e", "s/gemma/d/v/p/f", "s/gemma/d2/v/p/e"])
    m = match_cells(a, b, ["model"])
    assert m.pairs == [("s/smol/d/v/p/e", "s/gemma/d/v/p/e"), ("s/smol/d/v/p/f", "s/gemma/d/v/p/f")]
    assert set(m.records_b["cell_id"]) == {"s/smol/d/v/p/e", "s/smol/d/v/p/f", "s/gemma/d2/v/p/e"}  # the last: only in B
    assert m.original_b["s/smol/d/v/p/e"] == "s/gemma/d/v/p/e"
    # a mapping inside one run: only the cells naming the two names take part
    one = _recs(["s/smol/d/v/p/e", "s/gemma/d/v/p/e", "s/other/d/v/p/e"])
    m = match_cells(one, one, ["smol=gemma"])
    assert m.pairs == [("s/smol/d/v/p/e", "s/gemma/d/v/p/e")] and set(m.records_a["cell_id"]) == {"s/smol/d/v/p/e"}
    with pytest.raises(ValueError, match="cannot be paired one to one"):
        match_cells(one, one, ["model"])  # three models on each side differ only by the model
    with pytest.raises(ValueError, match="expected a cell axis"):
        match_cells(a, b, ["modle"])
