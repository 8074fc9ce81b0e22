"""First-token confidence from a top-k logprob window, and answer-span readouts.

Study 000 (arXiv 2605.02038), appendix A.3 "Token-confidence definitions" and C.3 "Top-k logprob
coverage"; Study 001 (arXiv 2605.27752), section 3.1 "Token-probability readout" (T1 / T2).

Rules (000, A.3): let l* be the predicted answer label and L the set of *valid* labels observed in
the returned top-k window. Then

    p_raw(l*)  = P(l*)                                   (eq. 1)
    p_norm(l*) = P(l*) / sum_{l in L} P(l)               (eq. 2)

Edge cases, which the paper leaves implicit and which this module fixes as follows:
  * window tokens are matched to labels after stripping surrounding whitespace (" A" -> "A");
    several window tokens that map to the same label have their probabilities summed;
  * l* valid but absent from the window: P(l*) is below every probability in the window, which
    we record as 0.0 for both forms (the normalisation sum runs over the labels that *are* present,
    exactly as eq. 2 states);
  * no valid label present at all: p_norm is undefined -> NaN (p_raw is 0.0);
  * l* missing (no prediction) or not a valid label: both forms NaN.
NaN confidences are meant to be dropped and counted by the caller
(:func:`auditlang.metrics.drop_missing`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


Window = Mapping[str, float]


def _check_labels(metric: str, labels: Sequence[str]) -> list[str]:
    labs = [str(x) for x in labels]
    if not labs:
        raise ValueError(f"{metric}: the valid label set is empty")
    if len(set(labs)) != len(labs):
        raise ValueError(f"{metric}: the valid label set has duplicates: {labs}")
    return labs


def label_probs(window: Window, labels: Sequence[str], *, logprobs: bool = True) -> dict[str, float]:
    """Probabilities of the valid labels present in one top-k window (000, A.3).

    ``window`` maps token strings to log-probabilities (``logprobs=True``) or probabilities.
    Tokens are matched to labels after ``str.strip()``; duplicates (e.g. "A" and " A") are summed.
    Labels absent from the window are absent from the result.
    """
    labs = set(_check_labels("label_probs", labels))
    out: dict[str, float] = {}
    # the few label tokens picked out of the window first (a 200-entry window holds ~10), in order
    for tok, v in [(t, v) for t, v in window.items() if str(t).strip() in labs]:
        key = str(tok).strip()
        p = math.exp(v) if logprobs else float(v)
        if not (0.0 <= p <= 1.0 + 1e-9) or math.isnan(p):
            raise ValueError(f"label_probs: window value for token {tok!r} is not a valid (log-)probability: {v!r}")
        out[key] = out.get(key, 0.0) + min(p, 1.0)
    return out


@dataclass(frozen=True)
class TokenConfidence:
    raw: float            # eq. 1, NaN if undefined
    norm: float           # eq. 2, NaN if undefined
    labels_present: int   # |L|: valid labels seen in the window
    full_coverage: bool   # every valid label was in the window


def token_confidence(window: Window, labels: Sequence[str], predicted: str | None, *,
                     logprobs: bool = True) -> TokenConfidence:
    """Raw and label-set-normalised first-token confidence of ``predicted`` (000, A.3 eqs. 1-2)."""
    labs = _check_labels("token_confidence", labels)
    return confidence_from_probs(label_probs(window, labs, logprobs=logprobs), labs, predicted)


def confidence_from_probs(probs: dict[str, float], labels: Sequence[str], predicted: str | None) -> TokenConfidence:
    """:func:`token_confidence` from the window's :func:`label_probs` already computed (a caller
    that also reports them reads the window once)."""
    labs = _check_labels("token_confidence", labels)
    full = len(probs) == len(labs)
    if predicted is None or str(predicted).strip() not in labs:
        return TokenConfidence(math.nan, math.nan, len(probs), full)
    p_star = probs.get(str(predicted).strip(), 0.0)
    total = sum(probs.values())
    norm = p_star / total if total > 0 else math.nan
    return TokenConfidence(p_star, norm, len(probs), full)


def token_confidences(
    windows: Sequence[Window], labels: Sequence[str], predicted: Sequence[str | None], *, logprobs: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`token_confidence`: arrays (raw, norm) with NaN where undefined."""
    if len(windows) != len(predicted):
        raise ValueError(f"token_confidences: {len(windows)} windows but {len(predicted)} predictions")
    res = [token_confidence(w, labels, p, logprobs=logprobs) for w, p in zip(windows, predicted, strict=False)]
    return np.array([r.raw for r in res], dtype=float), np.array([r.norm for r in res], dtype=float)


@dataclass(frozen=True)
class LabelCoverage:
    example_coverage: float      # fraction of examples whose window held every valid label (000, Table 5)
    full_cell: bool              # all examples covered ("cells with full coverage", 000 Table 5)
    mass_ratio_lower_bound: float  # mean over examples of a lower bound on covered / total label mass
    n: int


def topk_label_coverage(windows: Sequence[Window], labels: Sequence[str], *, logprobs: bool = True) -> LabelCoverage:
    """Top-k window coverage of the valid label set (000, appendix C.3, Table 5).

    ``example_coverage`` = (1/n) sum_i 1[every valid label in window_i]. The paper also quotes a
    "mass-level coverage ratio" without a formula; since a label outside a top-k window has
    probability at most min(window), we report the per-example lower bound
        covered / (covered + n_missing * min(window))
    averaged over examples (1.0 where every label is present; 0.0 where none is).
    """
    labs = _check_labels("topk_label_coverage", labels)
    if len(windows) == 0:
        raise ValueError("topk_label_coverage: no windows given")
    full, ratios = 0, []
    for w in windows:
        probs = label_probs(w, labs, logprobs=logprobs)
        missing = len(labs) - len(probs)
        if missing == 0:
            full += 1
            ratios.append(1.0)
            continue
        covered = sum(probs.values())
        vals = [math.exp(v) if logprobs else float(v) for v in w.values()]
        floor = min(vals) if vals else 0.0
        denom = covered + missing * floor
        ratios.append(covered / denom if denom > 0 else 0.0)
    n = len(windows)
    return LabelCoverage(full / n, full == n, float(np.mean(ratios)), n)


def span_confidence(token_logprobs: Sequence[float], readout: str = "T1") -> float:
    """Answer-level token-probability readout (001, section 3.1).

    T1 = exp((1/L) sum_i log p(a_i | h, a_<i))   (answer-span geometric mean)
    T2 = p(a_1 | h)                              (first answer token)
    """
    lp = np.asarray(token_logprobs, dtype=float)
    if lp.ndim != 1 or lp.size == 0:
        raise ValueError("span_confidence: need a non-empty 1-D sequence of token logprobs")
    if np.isnan(lp).any() or (lp > 1e-9).any():
        raise ValueError("span_confidence: token logprobs must be finite and <= 0")
    if readout == "T1":
        return float(np.exp(lp.mean()))
    if readout == "T2":
        return float(np.exp(lp[0]))
    raise ValueError(f"span_confidence: readout must be 'T1' or 'T2', got {readout!r}")


def span_confidences(spans: Sequence[Sequence[float]], readout: str = "T1") -> np.ndarray:
    """:func:`span_confidence` per answer; an empty span gives NaN (no answer tokens to read)."""
    return np.array([span_confidence(s, readout) if len(s) else math.nan for s in spans], dtype=float)


def label_coverage(windows: Sequence[Window], labels: Sequence[str], logprobs: bool = True) -> float:
    """Example-level top-k label coverage of :func:`topk_label_coverage` (000 appendix C.3, Table 5)."""
    return topk_label_coverage(windows, labels, logprobs=logprobs).example_coverage


__all__ = ["LabelCoverage", "TokenConfidence", "label_coverage", "label_probs", "span_confidence",
           "span_confidences", "token_confidence", "token_confidences", "topk_label_coverage"]
