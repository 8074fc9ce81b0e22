"""Metrics declare how the methods text names them and what they measure (issue 34): the methods
sentence renders ``words`` from metrics/registry.py, and a plugin metric that declares them is
described by its own words and counted a calibration metric by its own ``family``, never by its name."""

from __future__ import annotations

import pytest

from auditlang.core.params import Obj
from auditlang.core.registry import REGISTRY
from auditlang.metrics.registry import METRICS, register
from auditlang.report.comparisons.common import is_calibration
from auditlang.report.methods import metric_prose
from auditlang.resolve.spec import MetricRef


@pytest.mark.parametrize("ref,text", [
    (MetricRef("ece"), "expected calibration error (ECE) with 10 equal-width bins"),
    (MetricRef("ece", (("bins", 15), ("binning", "equal_mass"))), "expected calibration error (ECE) with 15 equal-mass bins"),
    (MetricRef("mce", (("bins", 5),)), "maximum calibration error with 5 equal-width bins"),
    (MetricRef("selective_accuracy", (("coverage", 0.8),)), "selective accuracy at 80% coverage"),
    (MetricRef("smooth_ece", (("sigma", 0.1),)), "smooth ECE with bandwidth 0.1"),
    (MetricRef("smooth_ece"), "smooth ECE"),
    (MetricRef("nll", (("eps", 1e-4),)), "negative log-likelihood of correctness (probabilities clipped at 0.0001)"),
    (MetricRef("brier", (("missing", "drop"),)), "Brier score"),
    (MetricRef("vpr"), "verbal parse rate"),
    (MetricRef("ece", (("closed", "right"),)), "expected calibration error (ECE) with 10 equal-width bins (closed right)"),
])
def test_built_in_metric_words(ref: MetricRef, text: str) -> None:
    assert metric_prose(ref) == text


def test_calibration_family_is_declared_not_named() -> None:
    assert sorted(n for n in METRICS if is_calibration(n)) == ["binfree_ece", "ece", "kde_ece", "ks_ce", "mce", "smooth_ece"]
    assert not is_calibration("brier") and not is_calibration("no_such_metric")


class _Bins(Obj):
    bins: int = 10


def test_a_plugin_metric_is_described_by_its_own_declarations() -> None:
    def words(p: dict) -> str:
        return f"a toy calibration error over {p.pop('bins', 10)} bins"

    try:
        register("toy_ce", lambda conf, correct, bins=10: 0.0, _Bins, words=words, family="calibration")
        register("toy_plain", lambda conf, correct, bins=10: 0.0, _Bins)
        assert metric_prose(MetricRef("toy_ce", (("bins", 4),))) == "a toy calibration error over 4 bins"
        assert is_calibration("toy_ce") and not is_calibration("toy_plain")
        # no words declared: the label without parameters, the name with them stated
        assert metric_prose(MetricRef("toy_plain")) == "toy_plain"
        assert metric_prose(MetricRef("toy_plain", (("bins", 3),))) == "toy plain (bins 3)"
    finally:
        for n in ("toy_ce", "toy_plain"):
            REGISTRY.unregister("metric", n)
