"""robustness.py: study 002 P-RB, A-STB, A-SST checked against the paper's worked cases (Tables 9-10)."""

import numpy as np
import pytest

from auditlang.metrics.robustness import (
    answer_groups,
    answer_sensitivity,
    answer_stability,
    extreme_groups,
    prompt_robustness,
)

# Study 002 appendix, Table 9: confidences for one (question, answer) under 10 (VC: 7) prompts
TABLE9 = [  # (confidences, printed P-RB)
    ([0.92, 0.98, 0.99, 0.80, 0.99, 0.98, 0.94, 0.97, 1.00, 1.00], 0.94),  # GPT-4o Prob.
    ([0.66, 0.67, 0.68, 0.64, 0.68, 0.68, 0.67, 0.67, 0.68, 0.68], 0.99),  # GPT-4o PS
    ([0.90, 0.90, 0.70, 0.70, 0.70, 0.05, 0.95], 0.72),  # GPT-4o VC
    ([1.00, 1.00, 1.00, 1.00, 0.38, 1.00, 0.68, 1.00, 1.00, 0.99], 0.80),  # GPT-4o P(True)
    ([0.32, 0.30, 0.30, 0.29, 0.30, 0.30, 0.29, 0.28, 0.29, 0.29], 0.99),  # GPT-4o Calib1
    ([0.64, 0.65, 0.63, 0.68, 0.62, 0.62, 0.69, 0.69, 0.69, 0.62], 0.97),  # Mistral PS
    ([1.00, 1.00, 1.00, 1.00, 1.00, 0.90, 0.80], 0.93),  # Mistral VC
    ([0.01, 0.01, 0.01, 0.01, 0.09, 0.01, 0.01, 0.01, 0.01, 0.50], 0.85),  # Mistral P(True)
]
# (Mistral Prob. prints 0.94, but its printed confidences give 0.964 under any std convention,
# so that row is left out.)


@pytest.mark.parametrize("conf,printed", TABLE9)
def test_prompt_robustness_matches_table_9(conf, printed):
    assert round(prompt_robustness([conf]).value, 2) == printed


def test_population_std_is_used():
    # GPT-4o VC: population std gives 0.716 (printed 0.72); sample std would give 0.693
    assert prompt_robustness([TABLE9[2][0]]).value == pytest.approx(1 - np.std(TABLE9[2][0]))


def test_prompt_robustness_nan_and_exclusions():
    conf = [[0.2, 0.4, np.nan], [0.5, np.nan, np.nan], [0.1, 0.1, 0.1]]
    res = prompt_robustness(conf)
    assert res.value == pytest.approx(1 - (0.1 + 0.0) / 2)
    assert (res.n_items, res.n_excluded, res.coverage) == (2, 1, pytest.approx(2 / 3))
    with pytest.raises(ValueError, match="no item qualifies"):
        prompt_robustness([[0.5, np.nan]])
    with pytest.raises(ValueError, match="at least 2 prompts"):
        prompt_robustness([0.1, 0.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        prompt_robustness([[0.1, 1.2]])


# Study 002 Table 10: ten sampled answers; groups from the answer row, (A-STB, A-SST) printed
OVARY = ["ovary"] * 8 + ["tube", "tube"]  # Ovary./Ovary/The ovary. vs Fallopian tube.
AMEN = ["rnb"] * 5 + ["gospel", "gospel", "drama", "rap rock", "reggae"]
TABLE10 = [
    (OVARY, [0.58, 0.85, 0.79, 0.61, 0.78, 0.78, 0.44, 0.61, 0.75, 0.75], 0.87, 0.02),  # GPT-4o Prob.
    (OVARY, [0.65, 0.71, 0.70, 0.66, 0.70, 0.70, 0.62, 0.66, 0.69, 0.69], 0.97, 0.01),  # PS
    (OVARY, [0.90] * 9 + [1.00], 1.00, 0.05),  # VC
    (OVARY, [1.0] * 8 + [0.0, 0.0], 1.00, 1.00),  # P(True)
    (OVARY, [0.86, 0.93, 0.93, 0.86, 0.93, 0.93, 0.80, 0.86, 0.88, 0.88], 0.95, 0.01),  # Calib1
    (AMEN, [0.67, 0.67, 0.68, 0.67, 0.67, 0.56, 0.56, 0.43, 0.72, 0.57], 1.00, 0.24),  # Mistral Prob.
    (AMEN, [0.63] * 5 + [0.61, 0.61, 0.57, 0.64, 0.61], 1.00, 0.06),  # PS
    (AMEN, [0.95] * 8 + [0.85, 0.95], 1.00, 0.00),  # VC
    (AMEN, [0.03] * 5 + [0.10, 0.10, 0.75, 0.11, 0.05], 1.00, 0.72),  # P(True)
    (AMEN, [0.10] * 5 + [0.53, 0.53, 0.30, 0.13, 0.42], 1.00, 0.20),  # Calib1
]


@pytest.mark.parametrize("groups,conf,stb,sst", TABLE10)
def test_stability_and_sensitivity_match_table_10(groups, conf, stb, sst):
    assert round(answer_stability([conf], [groups]).value, 2) == stb
    assert round(answer_sensitivity([conf], [groups]).value, 2) == sst


def test_delta_includes_self_pairs_hand_computed():
    # Y^max = {0.2, 0.6}, Y^min = {0.9}: Delta(max,min) = (0.7+0.3)/2 = 0.5;
    # Delta(max,max) = (0+0.4+0.4+0)/4 = 0.2 -> lambda = 0.3
    assert answer_sensitivity([[0.2, 0.6, 0.9]], [["a", "a", "b"]]).value == pytest.approx(0.3)
    assert answer_stability([[0.2, 0.6, 0.9]], [["a", "a", "b"]]).value == pytest.approx(0.8)


def test_tie_rules_and_groups():
    assert answer_groups(["x", "y", "x", "z"]) == [[0, 2], [1], [3]]
    # two groups of size 2: the first to appear is Y^max
    assert extreme_groups(["b", "a", "a", "b"]) == ([0, 3], [1, 2])
    # smallest: first-appearing among the size-1 groups
    assert extreme_groups(["r", "r", "g", "d", "e"]) == ([0, 1], [2])
    assert extreme_groups(["a", "a"]) == ([0, 1], None)
    with pytest.raises(ValueError, match="no answers"):
        extreme_groups([])


def test_not_max_contrast_of_appendix_a8():
    conf, groups = [0.2, 0.6, 0.9, 0.0], ["a", "a", "b", "c"]
    # Y^max = {0.2, 0.6}; Y^{!=max} = {0.9, 0.0}: Delta = (0.7+0.2+0.3+0.6)/4 = 0.45; minus 0.2
    assert answer_sensitivity([conf], [groups], contrast="not_max").value == pytest.approx(0.25)
    # Y^min = {0.9} (first of the size-1 groups): 0.5 - 0.2
    assert answer_sensitivity([conf], [groups]).value == pytest.approx(0.3)
    with pytest.raises(ValueError, match="contrast"):
        answer_sensitivity([conf], [groups], contrast="all")


def test_items_that_do_not_qualify_are_counted():
    confs = [[0.5, 0.7], [0.1, 0.3, 0.2], [0.4]]
    groups = [["a", "b"], ["a", "a", "a"], ["a"]]
    stb = answer_stability(confs, groups)  # only item 2 has |Y^max| > 1
    assert (stb.n_items, stb.n_excluded) == (1, 2)
    assert stb.value == pytest.approx(1 - np.std([0.1, 0.3, 0.2]))
    sst = answer_sensitivity(confs, groups)  # only item 1 has two groups: |0.2 - 0| = 0.2
    assert (sst.n_items, sst.n_excluded, sst.value) == (1, 2, pytest.approx(0.2))
    with pytest.raises(ValueError, match="no item qualifies"):
        answer_sensitivity([[0.1, 0.2]], [["a", "a"]])


def test_input_errors():
    with pytest.raises(ValueError, match="group labels"):
        answer_stability([[0.1, 0.2]], [["a"]])
    with pytest.raises(ValueError, match="2 items of groups"):
        answer_stability([[0.1]], [["a"], ["b"]])
    with pytest.raises(ValueError, match="no items"):
        answer_stability([], [])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        answer_stability([[0.1, -0.2]], [["a", "a"]])
