"""Metrics over per-example confidences and correctness: pure numpy functions, no model code.

Core metrics (calibration, discrimination, selective prediction, bootstrap, correlation) are
exported here; the study-specific modules (token, verbal, protocol, ...) add their public names. See docs/metrics.md.
"""

from __future__ import annotations

from auditlang.metrics import aligned, consistency, platt, protocol, robustness, spread, thresholds, token, verbal
from auditlang.metrics._inputs import drop_missing
from auditlang.metrics.bootstrap import (
    CI,
    bootstrap_ci,
    bootstrap_many,
    macro_bootstrap,
    paired_bootstrap_diff,
    register_batch,
    resample_indices,
)
from auditlang.metrics.calibration import (
    ReliabilityBins,
    accuracy,
    binfree_ece,
    brier,
    ece,
    ks_ce,
    mce,
    nll,
    reliability_bins,
)
from auditlang.metrics.correlation import Correlation, pearson, spearman
from auditlang.metrics.discrimination import auroc
from auditlang.metrics.kernel_ece import kde_ece, smooth_ece
from auditlang.metrics.registry import METRICS, MetricSpec, ParamSpec, register, validate_params
from auditlang.metrics.selective import aurc, risk_coverage_curve, selective_accuracy

__all__ = [
    "CI", "Correlation", "METRICS", "MetricSpec", "ParamSpec", "ReliabilityBins",
    "accuracy", "aurc", "auroc", "binfree_ece", "bootstrap_ci", "bootstrap_many", "brier", "drop_missing",
    "ece", "kde_ece", "ks_ce", "macro_bootstrap", "mce", "nll", "paired_bootstrap_diff", "pearson",
    "register", "register_batch", "reliability_bins", "resample_indices", "risk_coverage_curve",
    "selective_accuracy", "smooth_ece", "spearman", "validate_params",
]


def _export_study_modules() -> None:
    """Each study module's public names (its ``__all__``) as names of this package."""
    for mod in (aligned, consistency, platt, protocol, robustness, spread, thresholds, token, verbal):
        for n in mod.__all__:
            globals()[n] = getattr(mod, n)
            if n not in __all__:
                __all__.append(n)


_export_study_modules()
