"""Synthetic (confidence, correctness) data with fixed seeds for the core-metric tests."""

from __future__ import annotations

import numpy as np
import pytest


def _synth(n: int, seed: int, ties: int | None = None, power: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Confidences in [0, 1] (rounded to ``ties`` decimals when given) and correctness drawn as
    Bernoulli(conf**power), i.e. an overconfident model."""
    rng = np.random.default_rng(seed)
    c = rng.beta(2.0, 1.2, n)
    if ties is not None:
        c = np.round(c, ties)
    y = (rng.uniform(size=n) < c**power).astype(float)
    return c, y


@pytest.fixture
def synth():
    """Factory fixture: ``synth(n, seed, ties=None, power=1.5) -> (conf, correct)``."""
    return _synth


@pytest.fixture
def data500() -> tuple[np.ndarray, np.ndarray]:
    return _synth(500, 0)


@pytest.fixture
def tied500() -> tuple[np.ndarray, np.ndarray]:
    return _synth(500, 1, ties=1)
