"""Document selection for arc_tokconf_lmeval.yaml: auditlang's sampling rule on the same file.

auditlang draws ``random.Random(seed).sample(range(len(rows)), n)`` (study 000, appendix A.2;
auditlang/prompts/sampling.py) and keeps that order; lm-eval gets the same rows in the same order.
"""

from __future__ import annotations

import random
from typing import Any

SAMPLE = 200  # must equal `sample=` of the spec's dataset
SEED = 42  # must equal `seed=` of the spec's dataset


def process_docs(dataset: Any) -> Any:
    """The ``SAMPLE`` rows auditlang audits, in auditlang's order (a ``datasets.Dataset``)."""
    n = len(dataset)
    if n < SAMPLE:
        raise ValueError(f"arc_tokconf_lmeval: the data file has {n} rows, fewer than the {SAMPLE} to sample")
    return dataset.select(random.Random(SEED).sample(range(n), SAMPLE))
