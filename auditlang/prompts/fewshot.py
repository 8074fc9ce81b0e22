"""Few-shot examples for study 000's ``fewshot_k`` variant (paper 000, appendix B.1).

The paper says only "fewshot_3 (three in-context examples injected)" with "random seed 42
throughout"; it does not say from which pool or how the examples are drawn. We draw, for each
target item, ``k`` examples without replacement from a pool (a list of items in dataset order)
with the target excluded by id, using ``random.Random(seed_for(base_seed, target_id,
"fewshot")).sample``. The draw therefore depends only on (pool, target id, k, base seed), never
on which other items are in the plan or their order.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from auditlang.prompts.seeds import seed_for

FEWSHOT_SEED_NAME = "fewshot"


def draw_fewshot(pool: Sequence[dict[str, Any]], target_id: str, k: int, seed: int) -> list[dict[str, Any]]:
    """``k`` items of ``pool`` (target excluded) drawn with ``random.Random(seed).sample``."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ValueError(f"few-shot k must be a non-negative int, got {k!r}")
    candidates = [ex for ex in pool if str(ex.get("id")) != str(target_id)]
    if k > len(candidates):
        raise ValueError(f"few-shot k={k} but the pool has only {len(candidates)} items besides "
                         f"target {target_id!r}; use a larger pool or a smaller k")
    return random.Random(seed).sample(candidates, k)


def fewshot_for(pool: Sequence[dict[str, Any]], target_id: str, k: int, base_seed: int) -> list[dict[str, Any]]:
    """:func:`draw_fewshot` with the per-item seed ``seed_for(base_seed, target_id, "fewshot")``."""
    return draw_fewshot(pool, target_id, k, seed_for(base_seed, str(target_id), FEWSHOT_SEED_NAME))
