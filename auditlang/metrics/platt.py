"""Platt scaling fitted on one split and applied to another (Study 002, section 5 "PS").

002 section 5: Platt scaling "applies two scalars, which are obtained by minimizing the
mean-squared error between model confidences and answer correctness, to scale the sequence
probability". With the sequence probability p as the feature:

    PS(p) = sigmoid(a * p + b),   (a, b) = argmin (1/n) sum_i (sigmoid(a p_i + b) - z_i)^2

That is the default here (``feature="prob"``, ``loss="mse"``). ``loss="log"`` gives the classical
Platt (1999) / logistic-regression fit (mean negative log-likelihood, no target smoothing, no
regularisation), and ``feature="logit"`` uses logit(p) (p clipped to [1e-6, 1 - 1e-6]) as input,
so ``feature="logit", loss="log"`` is temperature-plus-bias scaling of the log-odds.

The fit is deterministic: L-BFGS-B from a fixed start (a = 0, b = logit of the training accuracy,
the best constant predictor under both losses) with analytic gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_binary, as_prob, same_length

FEATURES = ("prob", "logit")
LOSSES = ("mse", "log")
_EPS = 1e-6


def _feature(conf: np.ndarray, feature: str) -> np.ndarray:
    if feature == "prob":
        return conf
    c = np.clip(conf, _EPS, 1 - _EPS)
    return np.log(c) - np.log1p(-c)


@dataclass(frozen=True)
class PlattScaler:
    a: float
    b: float
    feature: str
    loss: str
    n_train: int
    converged: bool

    def apply(self, confidence) -> np.ndarray:
        """sigmoid(a * x + b) for x = feature(confidence); NaN confidences stay NaN."""
        c = as_prob("platt.apply", confidence, allow_nan=True)
        out = np.full(c.shape, np.nan)
        ok = ~np.isnan(c)
        from scipy import special  # lazy: scipy is slow to import

        out[ok] = special.expit(self.a * _feature(c[ok], self.feature) + self.b)
        return out


def _objective(params: np.ndarray, x: np.ndarray, z: np.ndarray, loss: str) -> tuple[float, np.ndarray]:
    a, b = params
    s = a * x + b
    from scipy import special  # lazy: scipy costs ~0.3 s at start-up; only these estimators need it

    p = special.expit(s)
    n = x.size
    if loss == "mse":
        r = p - z
        value = float(np.mean(r * r))
        ds = 2.0 * r * p * (1.0 - p) / n
    else:
        value = float(np.mean(np.logaddexp(0.0, s) - z * s))
        ds = (p - z) / n
    return value, np.array([np.sum(ds * x), np.sum(ds)])


def fit_platt(confidence, correct, *, feature: str = "prob", loss: str = "mse") -> PlattScaler:
    """Fit Platt scaling on a training split (002 section 5; defaults follow the paper)."""
    m = "fit_platt"
    if feature not in FEATURES:
        raise ValueError(f"{m}: feature must be one of {FEATURES}, got {feature!r}")
    if loss not in LOSSES:
        raise ValueError(f"{m}: loss must be one of {LOSSES}, got {loss!r}")
    c = as_prob(m, confidence)
    z = as_binary(m, correct)
    same_length(m, confidence=c, correct=z)
    if z.min() == z.max():
        raise ValueError(f"{m}: the training split has only {'correct' if z[0] == 1 else 'incorrect'} answers; "
                         "Platt scaling needs both outcomes")
    x = _feature(c, feature)
    acc = float(z.mean())
    start = np.array([0.0, float(np.log(acc) - np.log1p(-acc))])
    from scipy import optimize  # lazy: scipy costs ~0.3 s at start-up; only these estimators need it

    res = optimize.minimize(_objective, start, args=(x, z, loss), jac=True, method="L-BFGS-B",
                            options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-10})
    return PlattScaler(float(res.x[0]), float(res.x[1]), feature, loss, int(c.size), bool(res.success))


def platt_scale(train_confidence, train_correct, test_confidence, *, feature: str = "prob",
                loss: str = "mse") -> np.ndarray:
    """Fit on the training split, return scaled test confidences."""
    return fit_platt(train_confidence, train_correct, feature=feature, loss=loss).apply(test_confidence)


__all__ = ["FEATURES", "LOSSES", "PlattScaler", "fit_platt", "platt_scale"]
