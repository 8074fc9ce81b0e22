"""The spec-level metric registry: descriptors, parameter validation and registration."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from pydantic import Field

from auditlang.core.params import Obj
from auditlang.metrics import METRICS, register, validate_params
from auditlang.metrics import registry as reg

# the cell metrics over (confidence, correct) or (correct): every one runs on the same two arrays
CORE = [n for n, m in METRICS.items() if m.level == reg.CELL and m.inputs in reg.INPUT_KINDS]


def test_every_core_metric_is_registered_and_runs_with_its_defaults(data500):
    c, y = data500
    for name in CORE:
        spec = METRICS[name]
        params = validate_params(name, {"coverage": 0.5} if name == "selective_accuracy" else {})
        sig = inspect.signature(spec.fn)
        assert set(params) <= set(sig.parameters), name
        value = spec.fn(y, **params) if spec.inputs == "correct" else spec.fn(c, y, **params)
        assert np.isfinite(value), name
        assert spec.doc, name


def test_validate_params_fills_defaults_and_checks_values():
    assert validate_params("ece", {"bins": 15}) == {"bins": 15, "binning": "equal_width", "closed": "left",
                                                   "missing": "error"}
    assert validate_params("selective_accuracy", {"coverage": 1})["coverage"] == 1.0  # int accepted for float
    with pytest.raises(ValueError, match="nll: parameter eps must be <= 0.49"):
        validate_params("nll", {"eps": 1})
    with pytest.raises(ValueError, match="ece: parameter binning must be one of"):
        validate_params("ece", {"binning": "quantile"})
    with pytest.raises(ValueError, match="ece: parameter bins must be of type int"):
        validate_params("ece", {"bins": 10.0})
    with pytest.raises(ValueError, match="ece: parameter bins must be of type int"):
        validate_params("ece", {"bins": True})
    with pytest.raises(ValueError, match="ece: parameter bins must be >= 1"):
        validate_params("ece", {"bins": 0})
    with pytest.raises(ValueError, match=r"ece: unknown parameter\(s\) bin; allowed: bins"):
        validate_params("ece", {"bin": 10})
    with pytest.raises(ValueError, match="selective_accuracy: parameter coverage is required"):
        validate_params("selective_accuracy", {})
    with pytest.raises(ValueError, match="unknown metric 'ecee'; known metrics: .*accuracy"):
        validate_params("ecee", {})


def test_register_adds_and_refuses_duplicates():
    def mean_conf(conf, correct, shift: float = 0.0) -> float:
        """Mean confidence plus shift."""
        return float(np.mean(conf) + shift)

    class Shift(Obj):
        shift: float = Field(0.0, description="added to the mean")

    try:
        spec = register("test_mean_conf", mean_conf, Shift, "conf+correct")
        assert METRICS["test_mean_conf"] == spec and spec.doc == "Mean confidence plus shift."
        assert validate_params("test_mean_conf", {"shift": 2}) == {"shift": 2.0}
        with pytest.raises(ValueError, match="already registered"):
            register("test_mean_conf", mean_conf)
        register("test_mean_conf", mean_conf, replace=True)
        with pytest.raises(ValueError, match="must be an identifier"):
            register("bad name", mean_conf)
    finally:
        reg.REGISTRY.unregister("metric", "test_mean_conf")
