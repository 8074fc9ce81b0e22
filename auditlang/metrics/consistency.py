"""Consistency of knowledge-probe decisions, and abstention quality (Study 004, arXiv 2505.21701).

Two cases 1 and 2 (same probe on two prompt variants, or two probes on one prompt; section 3)
each accept (A: "the model knows") or reject (R: "knowledge gap, abstain") every question.
Decisions are arrays with 1 = accept, 0 = reject and NaN = no decision (e.g. a probe output that
did not parse); a question without a decision belongs to neither A nor R.

    IoU_acc  = |A1 & A2| / |A1 | A2|          IoU_rej = |R1 & R2| / |R1 | R2|
    IoU_cons = harmonic mean of IoU_acc and IoU_rej
    DecCons  = |(A1 & A2) | (R1 & R2)| / |A1 | A2 | R1 | R2|
    Agr.     = (1/|A1 & A2|) sum_{x in A1 & A2} 1[Answer_1(x) = Answer_2(x)]
    common-accept accuracy (appendix C) = (1/|A1 & A2|) sum_{i in A1 & A2} (Correct_1(i) + Correct_2(i)) / 2

Abstain metrics of Feng et al. (2024b) as reported in 004 section 5.4 and Tables 11-14, for one
case with abstain decisions and the correctness of the model's answers:
    reliable accuracy      = accuracy on answered questions
    effective reliability  = (#answered correct - #answered wrong) / N
    abstain accuracy       = (#answered correct + #abstained wrong) / N
    abstain precision      = #abstained wrong / #abstained
    abstain recall         = #abstained wrong / #wrong
    abstain rate           = #abstained / N
    abstain F1             = harmonic mean of abstain precision and recall
A ratio with an empty denominator returns ``zero_division`` (default 0.0, as scikit-learn's
jaccard/precision/recall/f1 do); pass float('nan') to mark it undefined instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_binary, same_length


def _decisions(metric: str, d, name: str) -> np.ndarray:
    a = np.asarray(d, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{metric}: {name} must be a non-empty 1-D array of 1 (accept) / 0 (reject) / "
                         "NaN (no decision)")
    ok = ~np.isnan(a)
    if not np.isin(a[ok], (0.0, 1.0)).all():
        raise ValueError(f"{metric}: {name} must contain only 1 (accept), 0 (reject) or NaN (no decision)")
    return a


def _pair(metric: str, d1, d2) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a1, a2 = _decisions(metric, d1, "decisions_1"), _decisions(metric, d2, "decisions_2")
    same_length(metric, decisions_1=a1, decisions_2=a2)
    return a1 == 1, a2 == 1, a1 == 0, a2 == 0


def _ratio(num: int, den: int, zero_division: float) -> float:
    return float(num / den) if den else float(zero_division)


def iou_acc(decisions_1, decisions_2, *, zero_division: float = 0.0) -> float:
    """IoU_acc = |A1 & A2| / |A1 | A2| (004 section 3)."""
    A1, A2, _, _ = _pair("iou_acc", decisions_1, decisions_2)
    return _ratio(int((A1 & A2).sum()), int((A1 | A2).sum()), zero_division)


def iou_rej(decisions_1, decisions_2, *, zero_division: float = 0.0) -> float:
    """IoU_rej = |R1 & R2| / |R1 | R2| (004 section 3)."""
    _, _, R1, R2 = _pair("iou_rej", decisions_1, decisions_2)
    return _ratio(int((R1 & R2).sum()), int((R1 | R2).sum()), zero_division)


def _harmonic(a: float, b: float) -> float:
    if np.isnan(a) or np.isnan(b):
        return float("nan")
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def iou_cons(decisions_1, decisions_2, *, zero_division: float = 0.0) -> float:
    """IoU_cons = 2 IoU_acc IoU_rej / (IoU_acc + IoU_rej) (004 section 3); 0 when both are 0."""
    return _harmonic(iou_acc(decisions_1, decisions_2, zero_division=zero_division),
                     iou_rej(decisions_1, decisions_2, zero_division=zero_division))


def decision_consistency(decisions_1, decisions_2, *, zero_division: float = 0.0) -> float:
    """DecCons = |(A1 & A2) | (R1 & R2)| / |A1 | A2 | R1 | R2| (004 section 3)."""
    A1, A2, R1, R2 = _pair("decision_consistency", decisions_1, decisions_2)
    return _ratio(int(((A1 & A2) | (R1 & R2)).sum()), int((A1 | A2 | R1 | R2).sum()), zero_division)


def agreement(decisions_1, decisions_2, answers_1: Sequence[object], answers_2: Sequence[object], *,
              zero_division: float = 0.0) -> float:
    """Agr. = share of commonly accepted questions where the model's two answers are equal (004 section 3)."""
    A1, A2, _, _ = _pair("agreement", decisions_1, decisions_2)
    if not len(answers_1) == len(answers_2) == len(A1):
        raise ValueError(f"agreement: inputs have mismatched lengths (decisions={len(A1)}, "
                         f"answers_1={len(answers_1)}, answers_2={len(answers_2)})")
    both = np.flatnonzero(A1 & A2)
    same = sum(1 for i in both if answers_1[i] == answers_2[i])
    return _ratio(same, both.size, zero_division)


def common_accept_accuracy(decisions_1, decisions_2, correct_1, correct_2, *, zero_division: float = 0.0) -> float:
    """cap-Accuracy = mean over A1 & A2 of (Correct_1 + Correct_2) / 2 (004 appendix C)."""
    m = "common_accept_accuracy"
    A1, A2, _, _ = _pair(m, decisions_1, decisions_2)
    c1, c2 = as_binary(m, correct_1, "correct_1"), as_binary(m, correct_2, "correct_2")
    same_length(m, decisions=A1, correct_1=c1, correct_2=c2)
    both = A1 & A2
    if not both.any():
        return float(zero_division)
    return float(((c1[both] + c2[both]) / 2).mean())


@dataclass(frozen=True)
class ConsistencyReport:
    iou_cons: float
    iou_acc: float
    iou_rej: float
    dec_cons: float
    agreement: float              # NaN when answers were not given
    common_accept_accuracy: float  # NaN when correctness was not given


def consistency_report(decisions_1, decisions_2, *, answers_1=None, answers_2=None, correct_1=None,
                       correct_2=None, zero_division: float = 0.0) -> ConsistencyReport:
    """Every section-3 metric of 004 for one comparison pair (Table 1 row)."""
    zd = zero_division
    agr = (agreement(decisions_1, decisions_2, answers_1, answers_2, zero_division=zd)
           if answers_1 is not None and answers_2 is not None else float("nan"))
    cap = (common_accept_accuracy(decisions_1, decisions_2, correct_1, correct_2, zero_division=zd)
           if correct_1 is not None and correct_2 is not None else float("nan"))
    return ConsistencyReport(
        iou_cons=iou_cons(decisions_1, decisions_2, zero_division=zd),
        iou_acc=iou_acc(decisions_1, decisions_2, zero_division=zd),
        iou_rej=iou_rej(decisions_1, decisions_2, zero_division=zd),
        dec_cons=decision_consistency(decisions_1, decisions_2, zero_division=zd),
        agreement=agr,
        common_accept_accuracy=cap,
    )


@dataclass(frozen=True)
class AbstainMetrics:
    reliable_accuracy: float
    effective_reliability: float
    abstain_accuracy: float
    abstain_precision: float
    abstain_recall: float
    abstain_rate: float
    abstain_f1: float


def abstain_metrics(abstain, correct, *, zero_division: float = 0.0) -> AbstainMetrics:
    """Feng et al. (2024b) abstain metrics used by 004 (section 5.4, Tables 2 and 11-14).

    ``abstain[i]`` = 1 when the probe rejects question i; ``correct[i]`` = 1 when the model's answer
    is correct (a "true knowledge gap" is an incorrect answer).
    """
    m = "abstain_metrics"
    ab = as_binary(m, abstain, "abstain").astype(bool)
    z = as_binary(m, correct).astype(bool)
    same_length(m, abstain=ab, correct=z)
    n = ab.size
    ans_right = int((~ab & z).sum())
    ans_wrong = int((~ab & ~z).sum())
    abs_wrong = int((ab & ~z).sum())
    precision = _ratio(abs_wrong, int(ab.sum()), zero_division)
    recall = _ratio(abs_wrong, int((~z).sum()), zero_division)
    return AbstainMetrics(
        reliable_accuracy=_ratio(ans_right, ans_right + ans_wrong, zero_division),
        effective_reliability=(ans_right - ans_wrong) / n,
        abstain_accuracy=(ans_right + abs_wrong) / n,
        abstain_precision=precision,
        abstain_recall=recall,
        abstain_rate=float(ab.mean()),
        abstain_f1=_harmonic(precision, recall),
    )


def abstain_precision(abstain, correct, *, zero_division: float = 0.0) -> float:
    """#abstained wrong / #abstained (Feng et al. 2024b; 004 Tables 11-14)."""
    return abstain_metrics(abstain, correct, zero_division=zero_division).abstain_precision


def abstain_recall(abstain, correct, *, zero_division: float = 0.0) -> float:
    """#abstained wrong / #wrong (Feng et al. 2024b; 004 Tables 11-14)."""
    return abstain_metrics(abstain, correct, zero_division=zero_division).abstain_recall


def abstain_f1(abstain, correct, *, zero_division: float = 0.0) -> float:
    """Harmonic mean of abstain precision and recall (004 section 5.4)."""
    return abstain_metrics(abstain, correct, zero_division=zero_division).abstain_f1


__all__ = ["AbstainMetrics", "ConsistencyReport", "abstain_f1", "abstain_metrics", "abstain_precision",
           "abstain_recall", "agreement", "common_accept_accuracy", "consistency_report", "decision_consistency",
           "iou_acc", "iou_cons", "iou_rej"]
