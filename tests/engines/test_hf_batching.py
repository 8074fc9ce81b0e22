"""The hf engine's batch cutting (HFEngine._chunks): padding-minimal contiguous batches.

Checked against brute force over every contiguous partition of small inputs, plus hand cases.
No model is loaded: _chunks needs only the batch size, the per-pass cost and the logits budget.
"""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from auditlang.engines.hf import HFEngine, _Row  # noqa: E402


def engine(batch_size: int, cost: int, vocab: int = 10, budget: int = 1 << 28) -> HFEngine:
    e = object.__new__(HFEngine)
    e.config = SimpleNamespace(batch_size=batch_size)
    e._batch_cost, e._vocab, e._budget = cost, vocab, budget
    return e


def rows(lengths: list[int]) -> list[_Row]:
    return [_Row(i, [1] * n) for i, n in enumerate(lengths)]


def cost_of(batches: list[list[_Row]], c: int, steps=lambda r: 0) -> int:
    return sum(len(b) * max(len(r.prompt) for r in b) + c * (1 + max(steps(r) for r in b)) for b in batches)


def brute_force(order: list[_Row], cap: int, c: int, steps=lambda r: 0) -> int:
    n, best = len(order), None
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            bounds = [0, *cuts, n]
            parts = [order[a:b] for a, b in zip(bounds, bounds[1:])]
            if any(len(p) > cap for p in parts):
                continue
            v = cost_of(parts, c, steps)
            best = v if best is None else min(best, v)
    return best


def test_hand_case_cuts_where_lengths_jump() -> None:
    e = engine(batch_size=4, cost=64)
    out = list(e._chunks(rows([10, 100, 10, 10]), lambda r: 1))
    # one batch: 4 x 100 + 64 = 464; [10, 10, 10] + [100]: 30 + 64 + 100 + 64 = 258
    assert [[len(r.prompt) for r in b] for b in out] == [[10, 10, 10], [100]]


def test_large_pass_cost_keeps_batches_full() -> None:
    e = engine(batch_size=4, cost=4096)
    out = list(e._chunks(rows([10, 100, 10, 10, 12, 13, 50, 9, 11]), lambda r: 1))
    assert len(out) == 3  # the fewest passes (9 rows, 4 per batch); among those the least padding:
    assert [[len(r.prompt) for r in b] for b in out] == [[9, 10, 10, 10], [11, 12, 13], [50, 100]]
    assert [len(r.prompt) for b in out for r in b] == sorted([10, 100, 10, 10, 12, 13, 50, 9, 11])


@pytest.mark.parametrize("seed", range(25))
def test_optimal_against_brute_force(seed: int) -> None:
    rnd = random.Random(seed)
    n, cap, c = rnd.randint(1, 9), rnd.randint(1, 5), rnd.choice([0, 8, 64, 500])
    lengths = [rnd.randint(1, 120) for _ in range(n)]
    steps = {i: rnd.choice([0, 0, 3, 15]) for i in range(n)}
    e = engine(batch_size=cap, cost=c)
    out = list(e._chunks(rows(lengths), lambda r: 1, steps_of=lambda r: steps[r.owner]))
    flat = [r for b in out for r in b]
    assert sorted(r.owner for r in flat) == list(range(n))  # every row once
    assert [len(r.prompt) for r in flat] == sorted(lengths)  # contiguous in length order
    assert all(1 <= len(b) <= cap for b in out)
    order = sorted(rows(lengths), key=lambda r: (len(r.prompt), r.owner))
    assert cost_of(out, c, lambda r: steps[r.owner]) == brute_force(order, cap, c, lambda r: steps[r.owner])


def test_logits_budget_limits_rows_but_never_below_one() -> None:
    # keep 5 positions x vocab 10 = 50 values per row; budget 120 allows 2 rows per batch
    e = engine(batch_size=8, cost=10_000, vocab=10, budget=120)
    out = list(e._chunks(rows([5] * 5), lambda r: 5))
    assert sorted(len(b) for b in out) == [1, 2, 2]
    e = engine(batch_size=8, cost=10_000, vocab=10, budget=1)  # even one row exceeds: batches of one
    assert [len(b) for b in e._chunks(rows([5] * 3), lambda r: 5)] == [1, 1, 1]


def test_empty() -> None:
    assert list(engine(4, 64)._chunks([], lambda r: 1)) == []


def test_auto_batch_rows_is_on_a_coarse_grid() -> None:
    """batch_size=auto rounds down to powers of two and 1.5x them, so two probes whose free memory
    differs a little (a model run after another in one process vs alone on a Ray worker's GPU
    picked different batches on two H100s, 2026-11-26) pick the same batch and give the same float32 rounding."""
    from auditlang.engines.hf import AUTO_BATCH_GRID, auto_batch_rows

    per_row = 100.0
    assert auto_batch_rows(432 * per_row / 0.8, per_row) == 384
    assert auto_batch_rows(424 * per_row / 0.8, per_row) == 384  # a few % less free memory: same batch
    assert auto_batch_rows(1e12, per_row) == 1024  # capped
    assert auto_batch_rows(0, per_row) == 1  # nothing fits: one row (the forward then reports the OOM)
    assert auto_batch_rows(13 * per_row / 0.8, per_row) == 12
    assert all(b < a <= 2 * b for a, b in zip(AUTO_BATCH_GRID[1:], AUTO_BATCH_GRID))
    assert all(a <= 1.5 * b for a, b in zip(AUTO_BATCH_GRID[4:], AUTO_BATCH_GRID[3:]))  # from 8 on, steps of at most 1.5x
