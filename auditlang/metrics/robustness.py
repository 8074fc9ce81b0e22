"""Robustness, stability and sensitivity of a confidence estimator (Study 002, section 4).

P-RB (section 4.1, eq. 3): for N items each scored under M semantically equivalent prompts,
    sigma_r = 1 - (1/N) sum_i Std({f(y_i, x_i, t_j)}_{j=1..M})
A-STB (section 4.2, eq. 4): for each item, the answers are partitioned into semantic groups; the
largest group Y^max gives
    sigma_s = 1 - (1/N) sum_i Std({c(y) : y in Y_i^max})
A-SST (section 4.2, eqs. 5-7), with the smallest group Y^min:
    lambda = (1/N) sum_i | Delta(Y_i^max, Y_i^min) - Delta(Y_i^max, Y_i^max) |
    Delta(Y, Y') = (1/(|Y||Y'|)) sum_{y in Y} sum_{y' in Y'} |c(y) - c(y')|
(Delta(Y^max, Y^max) includes the zero self-pairs, as eq. 7 is written.) Appendix A.8 (Table 8)
also reports the variant with Y^{!=max} (all answers outside Y^max) in place of Y^min:
``contrast="not_max"``.

Conventions (checked against the paper's worked cases, Tables 9-10):
  * Std is the population standard deviation (ddof = 0);
  * N counts the items that qualify (Figure 3 caption): A-STB needs |Y^max| > 1, A-SST needs at
    least two groups; P-RB needs at least two finite confidences (NaN = missing, e.g. a verbal
    confidence that did not parse). Non-qualifying items are reported in ``n_excluded``;
  * ties: Y^max is the first of the largest groups in order of first appearance; Y^min is the first
    of the smallest remaining groups in order of first appearance.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from auditlang.metrics._checks import as_prob


@dataclass(frozen=True)
class ItemAverage:
    value: float
    n_items: int      # items that qualified
    n_excluded: int   # items that did not
    coverage: float   # n_items / (n_items + n_excluded)


def _result(metric: str, per_item: list[float], excluded: int, why: str) -> ItemAverage:
    if not per_item:
        raise ValueError(f"{metric}: no item qualifies ({why})")
    n = len(per_item)
    return ItemAverage(float(np.mean(per_item)), n, excluded, n / (n + excluded))


def prompt_robustness(confidence) -> ItemAverage:
    """P-RB = 1 - mean_i Std_j(c_ij) over an (items x prompts) array (002 eq. 3).

    NaN entries are missing confidences and are ignored within an item; an item with fewer than
    two finite values is excluded and counted.
    """
    c = np.asarray(confidence, dtype=float)
    if c.ndim != 2 or c.shape[0] == 0 or c.shape[1] < 2:
        raise ValueError("prompt_robustness: need an (items x prompts) array with at least 2 prompts, "
                         f"got shape {c.shape}")
    as_prob("prompt_robustness", c.ravel(), allow_nan=True)
    stds, excluded = [], 0
    for row in c:
        ok = row[~np.isnan(row)]
        if ok.size < 2:
            excluded += 1
        else:
            stds.append(float(ok.std()))
    res = _result("prompt_robustness", stds, excluded, "every item has fewer than two finite confidences")
    return ItemAverage(1.0 - res.value, res.n_items, res.n_excluded, res.coverage)


def answer_groups(groups: Sequence[Hashable]) -> list[list[int]]:
    """Positions of each semantic group, groups ordered by first appearance."""
    order: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        order.setdefault(g, []).append(i)
    return list(order.values())


def extreme_groups(groups: Sequence[Hashable]) -> tuple[list[int], list[int] | None]:
    """(Y^max, Y^min) as index lists, with the tie rules of this module; Y^min is None for one group."""
    parts = answer_groups(groups)
    if not parts:
        raise ValueError("extreme_groups: an item has no answers")
    big = max(range(len(parts)), key=lambda k: (len(parts[k]), -k))
    rest = [k for k in range(len(parts)) if k != big]
    if not rest:
        return parts[big], None
    small = min(rest, key=lambda k: (len(parts[k]), k))
    return parts[big], parts[small]


def _items(metric: str, confidences: Sequence[Sequence[float]], groups: Sequence[Sequence[Hashable]]):
    if len(confidences) != len(groups):
        raise ValueError(f"{metric}: {len(confidences)} items of confidences but {len(groups)} items of groups")
    if len(confidences) == 0:
        raise ValueError(f"{metric}: no items")
    for i, (c, g) in enumerate(zip(confidences, groups, strict=False)):
        arr = np.asarray(c, dtype=float)
        if arr.ndim != 1 or arr.size != len(g):
            raise ValueError(f"{metric}: item {i} has {arr.size} confidences but {len(g)} group labels")
        if arr.size == 0:
            raise ValueError(f"{metric}: item {i} has no answers")
        as_prob(metric, arr, f"confidences of item {i}")
        yield arr, list(g)


def answer_stability(confidences: Sequence[Sequence[float]], groups: Sequence[Sequence[Hashable]]) -> ItemAverage:
    """A-STB = 1 - mean_i Std(c over Y_i^max) over items with |Y^max| > 1 (002 eq. 4).

    ``confidences[i][k]`` is the confidence of the k-th sampled answer to item i and
    ``groups[i][k]`` its semantic-group label (any hashable; equal labels = equivalent answers).
    """
    stds, excluded = [], 0
    for c, g in _items("answer_stability", confidences, groups):
        ymax, _ = extreme_groups(g)
        if len(ymax) < 2:
            excluded += 1
        else:
            stds.append(float(c[ymax].std()))
    res = _result("answer_stability", stds, excluded, "no item has more than one answer in its largest group")
    return ItemAverage(1.0 - res.value, res.n_items, res.n_excluded, res.coverage)


def _delta(a: np.ndarray, b: np.ndarray) -> float:
    """Delta(Y, Y') = mean over all pairs |c(y) - c(y')| (002 eq. 7)."""
    return float(np.abs(a[:, None] - b[None, :]).mean())


def answer_sensitivity(
    confidences: Sequence[Sequence[float]], groups: Sequence[Sequence[Hashable]], *, contrast: str = "min"
) -> ItemAverage:
    """A-SST lambda = mean_i |Delta(Y^max, Y^min) - Delta(Y^max, Y^max)| (002 eqs. 5-7).

    ``contrast="not_max"`` compares Y^max with every answer outside it (002 appendix A.8, Table 8).
    Items with a single semantic group are excluded and counted.
    """
    if contrast not in ("min", "not_max"):
        raise ValueError(f"answer_sensitivity: contrast must be 'min' or 'not_max', got {contrast!r}")
    vals, excluded = [], 0
    for c, g in _items("answer_sensitivity", confidences, groups):
        ymax, ymin = extreme_groups(g)
        if ymin is None:
            excluded += 1
            continue
        other = ymin if contrast == "min" else [k for k in range(len(g)) if k not in set(ymax)]
        cm = c[ymax]
        vals.append(abs(_delta(cm, c[other]) - _delta(cm, cm)))
    return _result("answer_sensitivity", vals, excluded, "no item has two or more semantic groups")


def p_rb(confidence) -> float:
    """P-RB value of :func:`prompt_robustness` (002 eq. 3)."""
    return prompt_robustness(confidence).value


def a_stb(confidences: Sequence[Sequence[float]], groups: Sequence[Sequence[Hashable]]) -> float:
    """A-STB value of :func:`answer_stability` (002 eq. 4)."""
    return answer_stability(confidences, groups).value


def a_sst(confidences: Sequence[Sequence[float]], groups: Sequence[Sequence[Hashable]], contrast: str = "min") -> float:
    """A-SST value of :func:`answer_sensitivity` (002 eqs. 5-7)."""
    return answer_sensitivity(confidences, groups, contrast=contrast).value


__all__ = ["ItemAverage", "a_sst", "a_stb", "answer_groups", "answer_sensitivity", "answer_stability",
           "extreme_groups", "p_rb", "prompt_robustness"]
