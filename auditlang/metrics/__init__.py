"""Metrics over per-example confidences and correctness: pure numpy functions, no model code.

Core metrics (calibration, discrimination, selective prediction, bootstrap, correlation) are
exported here; the study-specific modules (token, verbal, protocol, ...) add their public names. See docs/metrics.md.
Names are imported on first access (PEP 562), so importing ``auditlang.metrics.registry`` (the
metric declarations ``auditc check`` reads) loads no numpy.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

_CORE: dict[str, str] = {
    "drop_missing": "_inputs",
    **dict.fromkeys(("CI", "bootstrap_ci", "bootstrap_many", "macro_bootstrap", "paired_bootstrap_diff",
                     "register_batch", "resample_indices"), "bootstrap"),
    **dict.fromkeys(("ReliabilityBins", "accuracy", "binfree_ece", "brier", "ece", "ks_ce", "mce", "nll",
                     "reliability_bins"), "calibration"),
    **dict.fromkeys(("Correlation", "pearson", "spearman"), "correlation"),
    "auroc": "discrimination",
    **dict.fromkeys(("kde_ece", "smooth_ece"), "kernel_ece"),
    **dict.fromkeys(("METRICS", "MetricSpec", "register", "validate_params"), "registry"),
    **dict.fromkeys(("aurc", "risk_coverage_curve", "selective_accuracy"), "selective"),
}
_STUDY = ("aligned", "consistency", "platt", "protocol", "robustness", "spread", "thresholds", "token", "verbal")


def _module(name: str) -> Any:
    return importlib.import_module(f"auditlang.metrics.{name}")  # lazy: a metric module on first access (PEP 562)


def _all() -> list[str]:
    """The core names, then each study module's public names (its ``__all__``)."""
    out = sorted(_CORE)
    for mod in _STUDY:
        out += [n for n in _module(mod).__all__ if n not in out]
    return out


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return _all()
    if name in _CORE:
        return getattr(_module(_CORE[name]), name)
    if name.startswith("_") or (Path(__file__).parent / f"{name}.py").exists():
        raise AttributeError(name)  # a submodule: the import system loads it
    for mod in _STUDY:
        m = _module(mod)
        if name in m.__all__:
            return getattr(m, name)
    raise AttributeError(f"module 'auditlang.metrics' has no attribute {name!r}")


def __dir__() -> list[str]:
    return _all()
