"""spread.py: study 000 prompt-perturbation spread and size-spread Spearman (Tables 3 and 10)."""

import numpy as np
import pytest
from scipy import stats

from auditlang.metrics.spread import (
    SPREAD_VARIANTS,
    prompt_spread,
    prompt_spread_from_correct,
    size_spread_correlation,
)

ACC = {"surface_paraphrase": 0.8, "instruction_reorder": 0.7, "fewshot_3": 0.75, "implicit_framing": 0.9,
       "format_change": 0.1}


def test_default_set_excludes_format_change():
    assert "format_change" not in SPREAD_VARIANTS
    assert prompt_spread(ACC) == pytest.approx(0.2)
    assert prompt_spread(ACC, list(ACC)) == pytest.approx(0.8)


def test_spread_errors():
    with pytest.raises(ValueError, match="fewshot_3"):
        prompt_spread({"surface_paraphrase": 0.5, "instruction_reorder": 0.5, "implicit_framing": 0.5})
    with pytest.raises(ValueError, match="at least two"):
        prompt_spread(ACC, ["fewshot_3"])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        prompt_spread({"a": 1.5, "b": 0.5}, ["a", "b"])


def test_spread_from_paired_correctness():
    correct = {"a": [1, 1, 0, 0], "b": [1, 1, 1, 0], "c": [0, 0, 0, 1]}
    assert prompt_spread_from_correct(correct, ["a", "b", "c"]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="different item counts"):
        prompt_spread_from_correct({"a": [1, 0], "b": [1]}, ["a", "b"])
    with pytest.raises(ValueError, match="0/1"):
        prompt_spread_from_correct({"a": [1, 2], "b": [1, 0]}, ["a", "b"])


# Study 000 Table 3 (sizes in B, spreads per dataset) and Table 10 (rho, p)
SIZES = [1.0, 1.0, 1.7, 3.1, 3.2, 3.8, 4.0, 7.0, 7.2, 7.6]
TABLE3 = {
    "sst2": ([0.202, 0.296, 0.398, 0.028, 0.270, 0.084, 0.456, 0.916, 0.500, 0.096], 0.261, 0.466),
    "mnli": ([0.110, 0.160, 0.008, 0.402, 0.110, 0.030, 0.254, 0.538, 0.254, 0.218], 0.474, 0.166),
    "agnews": ([0.414, 0.464, 0.456, 0.610, 0.536, 0.374, 0.494, 0.754, 0.374, 0.236], -0.244, 0.497),
    "arc": ([0.098, 0.176, 0.056, 0.054, 0.098, 0.046, 0.370, 0.568, 0.104, 0.048], 0.015, 0.967),
    "mmlupro": ([0.036, 0.144, 0.110, 0.084, 0.064, 0.106, 0.156, 0.260, 0.014, 0.188], 0.304, 0.393),
}


@pytest.mark.parametrize("dataset", list(TABLE3))
def test_size_spread_correlation_reproduces_table_10(dataset):
    spreads, rho, p = TABLE3[dataset]
    res = size_spread_correlation(SIZES, spreads)
    assert (round(res.rho, 3), round(res.p_value, 3), res.n) == (rho, p, 10)


def test_spearman_ties_match_pearson_on_ranks():
    x, y = [1, 1, 2, 3, 5], [0.3, 0.1, 0.1, 0.4, 0.2]
    expected = stats.pearsonr(stats.rankdata(x), stats.rankdata(y)).statistic
    assert size_spread_correlation(x, y).rho == pytest.approx(expected)


@pytest.mark.parametrize("x,y,match", [
    ([1, 2], [0.1, 0.2], "at least 3"), ([1, 2, 3], [0.1, 0.1, 0.1], "undefined"),
    ([1, 2, np.nan], [0.1, 0.2, 0.3], "NaN"), ([1, 2, 3], [0.1, 0.2], "equal length"),
])
def test_correlation_errors(x, y, match):
    with pytest.raises(ValueError, match=match):
        size_spread_correlation(x, y)
