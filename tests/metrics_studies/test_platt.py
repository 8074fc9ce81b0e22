"""platt.py: study 002 Platt scaling (MSE fit on the sequence probability) and its variants."""

import numpy as np
import pytest
from scipy.optimize import curve_fit
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from auditlang.metrics.calibration import brier
from auditlang.metrics.platt import fit_platt, platt_scale


@pytest.fixture(scope="module")
def split():
    rng = np.random.default_rng(0)
    c = rng.uniform(size=600)
    z = (rng.uniform(size=600) < 0.2 + 0.6 * c).astype(int)  # miscalibrated
    return c[:400], z[:400], c[400:], z[400:]


@pytest.mark.parametrize("feature", ["prob", "logit"])
def test_log_loss_matches_sklearn_logistic_regression(split, feature):
    c, z, _, _ = split
    ps = fit_platt(c, z, feature=feature, loss="log")
    x = c if feature == "prob" else np.log(c / (1 - c))
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(x[:, None], z)
    assert ps.a == pytest.approx(lr.coef_[0, 0], abs=1e-4)
    assert ps.b == pytest.approx(lr.intercept_[0], abs=1e-4)
    assert ps.converged


def test_mse_fit_matches_least_squares(split):
    c, z, _, _ = split
    ps = fit_platt(c, z)  # paper default: feature="prob", loss="mse"
    (a, b), _ = curve_fit(lambda x, a, b: expit(a * x + b), c, z, p0=[1.0, 0.0])
    assert (ps.a, ps.b) == (pytest.approx(a, abs=1e-4), pytest.approx(b, abs=1e-4))
    assert (ps.feature, ps.loss, ps.n_train) == ("prob", "mse", 400)


def test_fit_on_one_split_apply_on_another(split):
    c, z, ct, zt = split
    scaled = platt_scale(c, z, ct)
    assert brier(scaled, zt) < brier(ct, zt)
    np.testing.assert_array_equal(scaled, fit_platt(c, z).apply(ct))  # deterministic
    assert np.isnan(fit_platt(c, z).apply([0.5, np.nan])[1])


def test_hand_checkable_constant_solution():
    # feature constant 0.5 for everyone: only sigmoid(a*0.5+b) = accuracy is identified
    ps = fit_platt([0.5, 0.5, 0.5, 0.5], [1, 1, 1, 0], loss="log")
    assert expit(ps.a * 0.5 + ps.b) == pytest.approx(0.75, abs=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="both outcomes"):
        fit_platt([0.2, 0.9], [1, 1])
    with pytest.raises(ValueError, match="feature"):
        fit_platt([0.2, 0.9], [1, 0], feature="odds")
    with pytest.raises(ValueError, match="loss"):
        fit_platt([0.2, 0.9], [1, 0], loss="hinge")
    with pytest.raises(ValueError, match="NaN"):
        fit_platt([0.2, np.nan], [1, 0])
