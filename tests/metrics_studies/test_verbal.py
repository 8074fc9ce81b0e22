"""verbal.py: study 000 VPR, signed over-confidence, ECE_gap and the 0.80 inclusion rule."""

import math

import numpy as np
import pytest

from auditlang.metrics.calibration import ece
from auditlang.metrics.verbal import ece_gap, overconfidence, verbal_parse_rate, vpr_filter


def test_vpr_counts_none_and_nan_as_non_parse():
    assert verbal_parse_rate([0.9, None, 0.5, float("nan")]) == 0.5
    assert verbal_parse_rate([None, None]) == 0.0
    assert verbal_parse_rate([1.0]) == 1.0


def test_signed_overconfidence_on_parsed_rows():
    oc = overconfidence([0.9, 0.8, None, 1.0], [1, 0, 1, 0], token=[0.6, 0.5, 0.9, 0.7])
    assert oc.vs_accuracy == pytest.approx(0.9 - 1 / 3)
    assert oc.vs_token == pytest.approx(0.9 - 0.6)
    assert (oc.n_parsed, oc.n_total) == (3, 4)
    assert math.isnan(overconfidence([0.5], [1]).vs_token)


def test_overconfidence_errors():
    with pytest.raises(ValueError, match="VPR = 0"):
        overconfidence([None, None], [1, 0])
    with pytest.raises(ValueError, match="token confidence is missing"):
        overconfidence([0.5, 0.5], [1, 0], token=[np.nan, 0.2])
    with pytest.raises(ValueError, match="mismatched"):
        overconfidence([0.5], [1, 0])


def test_ece_gap_hand_computed():
    verbal, token, correct = [1.0, 1.0, None, 0.0], [0.55] * 4, [1, 0, 1, 0]
    # ECE_verbal on rows 0,1,3: bin [0.9,1]: conf 1, acc 0.5, weight 2/3 -> 1/3; bin [0,0.1): 0
    # ECE_token on all rows: conf 0.55, acc 0.5 -> 0.05
    assert ece_gap(verbal, token, correct) == pytest.approx(1 / 3 - 0.05)
    # same rows: token acc 1/3 -> |0.55 - 1/3|
    assert ece_gap(verbal, token, correct, same_rows=True) == pytest.approx(1 / 3 - (0.55 - 1 / 3))


def test_ece_gap_matches_core_ece_when_everything_parses():
    rng = np.random.default_rng(3)
    v, t = rng.uniform(size=200), rng.uniform(size=200)
    z = (rng.uniform(size=200) < 0.6).astype(int)
    assert ece_gap(v, t, z, bins=15) == pytest.approx(ece(v, z, bins=15) - ece(t, z, bins=15))


@pytest.mark.parametrize("verbal,match", [
    ([1.2, 0.5], r"\[0, 1\]"), (["high", 0.5], "verbal confidence"), ([None, None], "VPR = 0"),
])
def test_ece_gap_bad_input(verbal, match):
    with pytest.raises(ValueError, match=match):
        ece_gap(verbal, [0.5, 0.5], [1, 0])


# Study 000 appendix D.2, Table 7: Mistral-7B-Instruct VPR (decimal_01); x = below 0.80
MISTRAL_VPR = {
    ("sst2", "surface_paraphrase"): 0.002, ("sst2", "instruction_reorder"): 0.942, ("sst2", "fewshot_3"): 0.940,
    ("sst2", "implicit_framing"): 0.988, ("mnli", "surface_paraphrase"): 0.046, ("mnli", "instruction_reorder"): 0.346,
    ("mnli", "fewshot_3"): 0.948, ("mnli", "implicit_framing"): 1.000, ("agnews", "surface_paraphrase"): 0.006,
    ("agnews", "instruction_reorder"): 0.366, ("agnews", "fewshot_3"): 0.866, ("agnews", "implicit_framing"): 0.994,
    ("arc", "surface_paraphrase"): 0.206, ("arc", "instruction_reorder"): 1.000, ("arc", "fewshot_3"): 0.954,
    ("arc", "implicit_framing"): 1.000, ("mmlupro", "surface_paraphrase"): 0.424,
    ("mmlupro", "instruction_reorder"): 0.996, ("mmlupro", "fewshot_3"): 0.286, ("mmlupro", "implicit_framing"): 0.952,
}


def test_vpr_filter_reproduces_mistral_matrix():
    sel = vpr_filter(MISTRAL_VPR)
    excluded = {k for k, _, _ in sel.excluded}
    datasets = ("sst2", "mnli", "agnews", "arc", "mmlupro")
    assert {k for k in excluded if k[1] == "surface_paraphrase"} == {(d, "surface_paraphrase") for d in datasets}
    assert len(excluded) == 8  # the eight x marks of Table 7
    # "clears the threshold in 12 of 15 cells" on the other three variants (000 section 4.2)
    assert sum(1 for k in sel.included if k[1] != "surface_paraphrase") == 12


def test_vpr_filter_boundary_arrays_and_reasons():
    sel = vpr_filter({"a": 0.80, "b": 0.799, "c": [0.5, None, None, None, None], "d": []})
    assert sel.included == ["a"]
    reasons = {k: (v, r) for k, v, r in sel.excluded}
    assert reasons["b"][1] == "VPR 0.799 < 0.80"
    assert reasons["c"][0] == pytest.approx(0.2)
    assert reasons["d"][1] == "no responses in cell"
    with pytest.raises(ValueError, match="threshold"):
        vpr_filter({"a": 0.9}, threshold=1.5)
    with pytest.raises(ValueError, match="VPR of cell"):
        vpr_filter({"a": 1.2})
