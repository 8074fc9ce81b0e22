"""Item sampling with study 000's rule (paper 000, appendix A.2).

"For each (model, dataset, variant) cell we draw 500 examples from the validation split using
random.Random(42).sample(range(len(split)), 500). The sampled index list is built once per
dataset and reused across models, variants, and elicitation phrasings."
"""

from __future__ import annotations

import random


def sample_indices(n_items: int, n: int, seed: int) -> list[int]:
    """``random.Random(seed).sample(range(n_items), n)``, in the order ``sample`` returns.

    When ``n >= n_items`` every index is returned in dataset order (``list(range(n_items))``):
    no sampling happens, so the seed plays no role.
    """
    for label, value in (("n_items", n_items), ("n", n), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"sample_indices: {label} must be an int, got {value!r}")
    if n_items < 0 or n < 0:
        raise ValueError(f"sample_indices: n_items and n must be >= 0, got n_items={n_items}, n={n}")
    if n >= n_items:
        return list(range(n_items))
    return random.Random(seed).sample(range(n_items), n)
