"""Few-shot draws and study 000's item sampling."""

from __future__ import annotations

import random
from typing import Any

import pytest

from auditlang.prompts import draw_fewshot, fewshot_for, sample_indices, seed_for


def test_sample_indices_is_random_sample_exactly() -> None:
    assert sample_indices(1172, 500, 42) == random.Random(42).sample(range(1172), 500)
    assert sample_indices(2000, 500, 42) == random.Random(42).sample(range(2000), 500)
    assert sample_indices(10, 3, 7) == random.Random(7).sample(range(10), 3)


def test_sample_indices_takes_everything_in_order_when_n_is_large() -> None:
    assert sample_indices(5, 5, 42) == [0, 1, 2, 3, 4]
    assert sample_indices(5, 500, 42) == [0, 1, 2, 3, 4]
    assert sample_indices(0, 3, 42) == []


def test_sample_indices_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="n must be >= 0"):
        sample_indices(10, -1, 42)
    with pytest.raises(ValueError, match="must be an int"):
        sample_indices(10, 2.5, 42)  # type: ignore[arg-type]


def test_fewshot_excludes_the_target_and_is_seeded(arc_items: list[dict[str, Any]]) -> None:
    pool = arc_items[:20]
    target = pool[5]
    for seed in range(30):
        ex = draw_fewshot(pool, target["id"], 3, seed)
        assert len(ex) == 3 and target not in ex and len({e["id"] for e in ex}) == 3
    rest = [x for x in pool if x["id"] != target["id"]]
    assert draw_fewshot(pool, target["id"], 3, 9) == random.Random(9).sample(rest, 3)
    assert fewshot_for(pool, target["id"], 3, 42) == draw_fewshot(pool, target["id"], 3, seed_for(42, target["id"], "fewshot"))


def test_fewshot_pool_too_small(arc_items: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match="only 2 items besides"):
        draw_fewshot(arc_items[:3], arc_items[0]["id"], 3, 0)
