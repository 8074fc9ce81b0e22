"""000 Figure 1's bar label (session 20): s000's gemma3 bar read "--300%" (a rise of 300% printed
as a drop of -300% with a second minus); the label is the signed change."""

from __future__ import annotations

from auditlang.report.figures_studies import change_interval, change_label


def test_drop_rise_and_missing_reference():
    assert change_label(100.0) == "-100%"
    assert change_label(-300.0) == "+300%"
    assert change_label(float("nan")) == "-"
    assert "--" not in change_label(-12.4)


def test_interval_is_of_the_change_with_the_label_s_sign():
    """s000 (session 20) printed "+300%" over the drop's interval "[-0.75, 0.00]": the interval under a
    change label is the change's (variant - reference = -drop)."""
    assert change_interval(-0.75, 0.0) == "\n[+0.00, +0.75]"
    assert change_interval(0.10, 0.30) == "\n[-0.30, -0.10]"
    assert "-0.00" not in change_interval(0.0, 0.25)
    assert change_interval(float("nan"), float("nan")) == ""
