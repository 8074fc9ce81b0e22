"""protocol.py: study 001 gap g_X, the A-D grid and its shifts (Tables 2, 3, 7)."""

import numpy as np
import pytest

from auditlang.metrics.calibration import binfree_ece, brier
from auditlang.metrics.protocol import GRID, calibration_gap, contrast_summary, grid_summary, sign_flips

# Study 001 appendix A, Table 7: Instruct settings (g_A, g_B, g_C, g_D)
TABLE7_INSTRUCT = {
    ("llama", "mmlu"): (-0.034, 0.366, -0.035, 0.377), ("llama", "sciq"): (0.047, -0.172, 0.059, -0.158),
    ("llama", "triviaqa"): (-0.023, -0.297, 0.016, -0.295), ("llama", "truthfulqa"): (-0.244, 0.147, -0.249, 0.172),
    ("mistral", "mmlu"): (0.054, 0.429, 0.044, 0.448), ("mistral", "sciq"): (0.098, -0.076, 0.095, -0.073),
    ("mistral", "triviaqa"): (0.083, -0.321, 0.071, -0.328), ("mistral", "truthfulqa"): (-0.113, 0.443, -0.123, 0.446),
    ("qwen", "mmlu"): (-0.047, 0.379, -0.046, 0.391), ("qwen", "sciq"): (-0.003, -0.280, 0.003, -0.276),
    ("qwen", "triviaqa"): (0.023, -0.187, 0.023, -0.188), ("qwen", "truthfulqa"): (-0.189, 0.301, -0.194, 0.312),
}


def _grid(table):
    return {k: dict(zip("ABCD", v, strict=False)) for k, v in table.items()}


def test_grid_summary_reproduces_tables_2_and_3():
    s = grid_summary(_grid(TABLE7_INSTRUCT))
    assert round(s.macro["A"], 3) == -0.029  # Table 2 g_A
    assert round(s.macro["C"], 3) == -0.028  # g_C
    assert round(s.macro["D"], 3) == 0.069  # g_D
    assert abs(s.macro["B"] - 0.060) < 0.002  # Table 2 prints the bootstrap mean +0.060
    assert round(s.macro_shifts["A-B"], 3) == -0.090  # conditioning context
    assert round(s.macro_shifts["A-C"], 3) == -0.001  # estimator choice
    assert round(s.macro_shifts["interaction"], 3) == 0.007  # second-order interaction
    assert round(s.mean_abs_shifts["A-B"], 3) == 0.350  # Table 3
    assert round(s.mean_abs_shifts["A-C"], 3) == 0.009
    assert s.flips_ab == 9 and len(s.settings) == 12
    np.testing.assert_allclose(s.shifts["A-B"], [a - b for a, b, _, _ in TABLE7_INSTRUCT.values()])


def test_grid_summary_errors():
    with pytest.raises(ValueError, match="no settings"):
        grid_summary({})
    with pytest.raises(ValueError, match="configuration D"):
        grid_summary({"s": {"A": 0.1, "B": 0.2, "C": 0.1}})
    with pytest.raises(ValueError, match="NaN"):
        grid_summary({"s": {"A": np.nan, "B": 0.2, "C": 0.1, "D": 0.0}})
    assert set(GRID) == {"A", "B", "C", "D"}


def test_sign_flips_ignores_zero():
    assert sign_flips([0.1, -0.2, 0.0, 0.3], [-0.1, -0.1, 0.5, 0.2]) == 1
    with pytest.raises(ValueError, match="mismatched"):
        sign_flips([0.1], [0.1, 0.2])


def test_contrast_summary_hand_computed():
    c = contrast_summary([-0.1, 0.2, 0.05], [0.1, 0.3, -0.05])
    assert c.macro_first == pytest.approx(0.05)
    assert c.macro_second == pytest.approx(0.35 / 3)
    assert c.macro_shift == pytest.approx((-0.2 - 0.1 + 0.1) / 3)
    assert c.mean_abs_shift == pytest.approx(0.4 / 3)
    assert c.flips == 2 and c.n == 3


def test_calibration_gap_drops_unparsed_verbal_rows_only():
    verbal, token, y = [1.0, 1.0, np.nan, 0.0], [0.55] * 4, [1, 0, 1, 0]
    assert calibration_gap(verbal, token, y) == pytest.approx(1 / 3 - 0.05)
    # any estimator works, e.g. Brier in place of ECE (001 appendix L)
    assert calibration_gap(verbal, token, y, estimator=brier) == pytest.approx(
        brier([1.0, 1.0, 0.0], [1, 0, 0]) - brier(token, y))


def test_calibration_gap_with_bin_free_estimator():
    rng = np.random.default_rng(0)
    v, t = rng.uniform(size=300), rng.uniform(size=300)
    y = (rng.uniform(size=300) < t).astype(int)
    g = calibration_gap(v, t, y, estimator=binfree_ece)
    assert g == pytest.approx(binfree_ece(v, y) - binfree_ece(t, y))


def test_calibration_gap_errors():
    with pytest.raises(ValueError, match="no parseable"):
        calibration_gap([np.nan, np.nan], [0.5, 0.5], [1, 0])
    with pytest.raises(ValueError, match="token confidence"):
        calibration_gap([0.5, 0.5], [0.5, np.nan], [1, 0])
