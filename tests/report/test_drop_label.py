"""000 Figure 1's bar label (session 20): s000's gemma3 bar read "--300%" (a rise of 300% printed
as a drop of -300% with a second minus); the label is the signed change."""

from __future__ import annotations

from auditlang.report.figures_studies import change_label


def test_drop_rise_and_missing_reference():
    assert change_label(100.0) == "-100%"
    assert change_label(-300.0) == "+300%"
    assert change_label(float("nan")) == "-"
    assert "--" not in change_label(-12.4)
