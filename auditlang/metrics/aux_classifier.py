"""An auxiliary calibration classifier trained with focal loss (study 002 "Calib1").

002 §5: "Calib-1-Focal (Calib1) trains an auxiliary calibration classifier (Ulmer et al., 2024;
Xia et al., 2025a) with focal loss (Mukhoti et al., 2020), which uses the LLM input and responses
as inputs and correctness of the responses as targets." 002 names neither the classifier nor its
text representation. auditlang's choice, disclosed wherever it is used: a logistic classifier on
hashed word uni- and bigram counts of ``question [SEP] answer`` (log(1 + count), L2-normalised
rows), trained on the dev split by minimising the mean focal loss

    FL(p, y) = -(1 - p_t)^gamma log p_t,   p_t = p if y = 1 else 1 - p,   p = sigmoid(w·x + b)

plus ``l2/2 · |w|²`` with L-BFGS (deterministic: no random initialisation). ``gamma = 0`` is the
log loss of ordinary logistic regression.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def text_features(texts: list[str], dims: int) -> np.ndarray:
    """Hashed uni- and bigram log-counts, rows L2-normalised (empty text: a zero row)."""
    x = np.zeros((len(texts), dims))
    for i, t in enumerate(texts):
        words = _WORD.findall(t.lower())
        grams = words + [a + " " + b for a, b in zip(words, words[1:])]
        for g in grams:
            h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
            x[i, h % dims] += 1.0
    x = np.log1p(x)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def focal_loss(p: np.ndarray, y: np.ndarray, gamma: float) -> float:
    """Mean focal loss of probabilities ``p`` for 0/1 targets ``y`` (Mukhoti et al. 2020)."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    pt = np.where(y == 1, p, 1 - p)
    return float(np.mean(-((1 - pt) ** gamma) * np.log(pt)))


def _objective(theta: np.ndarray, x: np.ndarray, y: np.ndarray, gamma: float, l2: float) -> tuple[float, np.ndarray]:
    w, b = theta[:-1], theta[-1]
    z = x @ w + b
    p = 1.0 / (1.0 + np.exp(-z))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    pt = np.where(y == 1, p, 1 - p)
    s = np.where(y == 1, 1.0, -1.0)  # d pt / d p
    # d/dpt of -(1-pt)^g log pt = g (1-pt)^(g-1) log pt - (1-pt)^g / pt
    term1 = gamma * np.power(1 - pt, gamma - 1) * np.log(pt) if gamma > 0 else 0.0
    dl_dpt = term1 - (1 - pt) ** gamma / pt
    dl_dz = dl_dpt * s * p * (1 - p) / len(y)
    loss = float(np.mean(-((1 - pt) ** gamma) * np.log(pt))) + 0.5 * l2 * float(w @ w)
    grad = np.concatenate([x.T @ dl_dz + l2 * w, [dl_dz.sum()]])
    return loss, grad


@dataclass(frozen=True)
class AuxClassifier:
    weights: np.ndarray
    bias: float
    dims: int
    gamma: float
    n_train: int
    converged: bool

    def predict(self, texts: list[str]) -> np.ndarray:
        z = text_features(texts, self.dims) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))


def fit_aux_classifier(texts: list[str], correct, *, dims: int = 4096, gamma: float = 2.0,
                       l2: float = 1e-3) -> AuxClassifier:
    """Fit the classifier on (text, correctness) pairs; both outcomes must occur."""
    y = np.asarray(correct, dtype=float)
    if len(texts) != len(y) or not len(y):
        raise ValueError(f"fit_aux_classifier: {len(texts)} texts for {len(y)} labels")
    if y.min() == y.max():
        raise ValueError("fit_aux_classifier: the training split has only "
                         f"{'correct' if y[0] == 1 else 'incorrect'} answers; the classifier needs both outcomes")
    x = text_features(texts, dims)
    acc = float(y.mean())
    theta0 = np.zeros(dims + 1)
    theta0[-1] = np.log(acc) - np.log1p(-acc)
    from scipy import optimize  # lazy: scipy loads only when a classifier is fitted

    res = optimize.minimize(_objective, theta0, args=(x, y, gamma, l2), jac=True, method="L-BFGS-B",
                            options={"maxiter": 2000})
    return AuxClassifier(res.x[:-1].copy(), float(res.x[-1]), dims, gamma, len(y), bool(res.success))


__all__ = ["AuxClassifier", "fit_aux_classifier", "focal_loss", "text_features"]
