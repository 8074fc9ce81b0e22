"""Prompt-perturbation spread and the size-spread correlation (Study 000, arXiv 2605.02038).

  * spread = max_v acc_v - min_v acc_v over a fixed, named variant set (section 3; Table 3). The
    paper's set is the four non-format_change variants: surface_paraphrase, instruction_reorder,
    fewshot_3, implicit_framing (format_change is left out because on ARC-Challenge it reflects an
    evaluator interaction, section 3).
  * size-spread correlation: Spearman rho between parameter count and spread across models, with
    its p-value (section 4.3; appendix E.1, Table 10), computed with scipy.stats.spearmanr.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_binary

SPREAD_VARIANTS: tuple[str, ...] = ("surface_paraphrase", "instruction_reorder", "fewshot_3", "implicit_framing")


def _select(metric: str, values: Mapping[str, object], variants: Sequence[str]) -> list[str]:
    names = list(variants)
    if len(names) < 2:
        raise ValueError(f"{metric}: spread needs at least two variants, got {names}")
    missing = [v for v in names if v not in values]
    if missing:
        raise ValueError(f"{metric}: variant(s) {missing} not found; available: {sorted(values)}")
    return names


def prompt_spread(accuracy: Mapping[str, float], variants: Sequence[str] = SPREAD_VARIANTS) -> float:
    """max - min accuracy over ``variants`` (000 section 3, Table 3)."""
    names = _select("prompt_spread", accuracy, variants)
    acc = np.array([float(accuracy[v]) for v in names])
    if np.isnan(acc).any() or (acc < 0).any() or (acc > 1).any():
        got = dict(zip(names, acc.tolist(), strict=True))
        raise ValueError(f"prompt_spread: accuracies must lie in [0, 1], got {got}")
    return float(acc.max() - acc.min())


def prompt_spread_from_correct(correct: Mapping[str, object], variants: Sequence[str] = SPREAD_VARIANTS) -> float:
    """Spread from per-variant 0/1 correctness arrays over the same items (000 appendix E.2).

    The arrays must be paired (same items, same order) so that an example-level bootstrap can
    resample them jointly.
    """
    names = _select("prompt_spread_from_correct", correct, variants)
    arrays = {v: as_binary("prompt_spread_from_correct", correct[v], f"correct[{v!r}]") for v in names}
    lens = {len(a) for a in arrays.values()}
    if len(lens) > 1:
        counts = {v: len(a) for v, a in arrays.items()}
        raise ValueError(f"prompt_spread_from_correct: variants have different item counts {counts}")
    return prompt_spread({v: float(a.mean()) for v, a in arrays.items()}, names)


def prompt_spread_arrays(*correct) -> float:
    """Spread from paired 0/1 correctness arrays given positionally, one per variant of the set.

    The bootstrap-friendly form of :func:`prompt_spread_from_correct` (000 appendix E.2: resample
    examples per (model, dataset), then max - min over the variant accuracies of the resample).
    """
    if len(correct) < 2:
        raise ValueError(f"prompt_spread: spread needs at least two variants, got {len(correct)}")
    return prompt_spread_from_correct({f"variant_{k}": c for k, c in enumerate(correct)},
                                      [f"variant_{k}" for k in range(len(correct))])


@dataclass(frozen=True)
class SpearmanResult:
    rho: float
    p_value: float
    n: int


def size_spread_correlation(sizes: Sequence[float], spreads: Sequence[float]) -> SpearmanResult:
    """Spearman rho (and two-sided p) between model size and spread (000 section 4.3, Table 10)."""
    x, y = np.asarray(sizes, dtype=float), np.asarray(spreads, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise ValueError("size_spread_correlation: need two 1-D sequences of equal length, "
                         f"got {x.shape} and {y.shape}")
    if x.size < 3:
        raise ValueError(f"size_spread_correlation: need at least 3 models, got {x.size}")
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("size_spread_correlation: sizes and spreads must not contain NaN")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        raise ValueError("size_spread_correlation: sizes or spreads are all equal; the rank correlation is undefined")
    from scipy import stats  # lazy: scipy.stats is slow to import

    res = stats.spearmanr(x, y)
    return SpearmanResult(float(res.statistic), float(res.pvalue), int(x.size))


__all__ = ["SPREAD_VARIANTS", "SpearmanResult", "prompt_spread", "prompt_spread_arrays", "prompt_spread_from_correct",
           "size_spread_correlation"]
