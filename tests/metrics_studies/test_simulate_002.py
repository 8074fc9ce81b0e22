"""benchmarks/simulate_002.py runs and reproduces the exactly-determined cells of 002 Table 1."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "simulate_002.py"


@pytest.fixture(scope="module")
def results():
    spec = importlib.util.spec_from_file_location("simulate_002", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.simulate(n=3000, m=10, seed=0), mod.simulate(n=3000, m=10, seed=0)


def test_seeded_and_deterministic(results):
    first, second = results
    assert first == second


def test_exact_cells(results):
    res, _ = results
    assert res["oracle"] == pytest.approx((0.0, 0.0, 1.0, 1.0, 1.0))
    assert res["prior"][1:] == pytest.approx((0.25, 0.5, 1.0, 0.0))
    assert res["prior"][0] < 0.02  # |0.5 - sample accuracy|
    ece, brier, auroc, stb, sst = res["constant"]
    assert (stb, sst) == (1.0, 0.0)
    assert brier == pytest.approx(1 / 6, abs=0.01)  # E[d(1-d)] = 1/6
    assert auroc == pytest.approx(5 / 6, abs=0.02)
    assert ece < 0.03


def test_random_estimator_scores(results):
    ece, brier, auroc, stb, sst = results[0]["random"]
    assert ece == pytest.approx(1 / 3, abs=0.02) and brier == pytest.approx(1 / 3, abs=0.02)
    assert auroc == pytest.approx(2 / 3, abs=0.02)
    assert 0.6 < stb < 0.75 and 0.08 < sst < 0.2  # paper: 0.72 / 0.18, see the script's header
