"""Every built-in comparison declares what its intervals resample, or that it has none
(resolve/bootstrap_units.py): the methods paragraph states that fact, and keeps "declares no
resampling unit" for a plugin comparison that declares nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from auditlang.core.registry import REGISTRY
from auditlang.resolve.bootstrap_units import AUTO_RESAMPLES, NO_INTERVALS, comparison_resamples


@pytest.mark.parametrize("ctor", [e.name for e in REGISTRY.entries("comparison") if "plugin" not in e.meta])
def test_every_built_in_comparison_declares_its_intervals(ctor: str) -> None:
    assert (ctor in AUTO_RESAMPLES) != (ctor in NO_INTERVALS), ctor
    assert comparison_resamples(ctor, "auto") != "", ctor


def test_the_declared_facts_of_the_comparisons_that_were_missing() -> None:
    # context_shift and parse_matched tables have no lo/hi columns; contrast is auditc diff's paired bootstrap
    assert comparison_resamples("context_shift", "auto") is None
    assert comparison_resamples("parse_matched", "auto") is None
    assert "paired bootstrap of auditc diff" in comparison_resamples("contrast", "auto")
    # a VPR matrix has its cells' intervals, or none with intervals=false (000 Table 7)
    assert "items of each cell" in comparison_resamples("vpr_matrix", "auto", SimpleNamespace(intervals=True))
    assert comparison_resamples("vpr_matrix", "auto", SimpleNamespace(intervals=False)) is None
    assert comparison_resamples("a_plugins_own", "auto") == ""
