"""Verbal-confidence quantities of Study 000 (arXiv 2605.02038).

  * VPR (sections 3, 4.2; appendix D.1): fraction of responses whose verbal confidence parses.
    A non-parse is passed in as NaN (or None).
  * Signed over-confidence (section 4.2, appendix E.2 "Per-cell signed overconfidence"), on the
    rows where verbal confidence parses:
        overconf_vs_acc   = mean(conf_verbal) - accuracy
        overconf_vs_token = mean(conf_verbal) - mean(conf_token)
  * ECE_gap = ECE_verbal - ECE_token (section 4.2; appendix E.2 "Per-cell ECE_gap"): unparseable
    rows are dropped from ECE_verbal only; ECE_token uses every row of the cell unless
    ``same_rows=True`` (then both use the parsed rows). Equal-width ECE, bins = 10.
  * VPR inclusion threshold 0.80 (appendix D.1): cells with VPR >= 0.80 are included in
    ECE_verbal means; the others are excluded and reported with the reason.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

import numpy as np

from auditlang.metrics._checks import as_binary, as_prob, same_length
from auditlang.metrics.calibration import ece

VPR_THRESHOLD = 0.80


def _verbal(metric: str, verbal) -> np.ndarray:
    """Verbal confidences as floats; None (parse failure) becomes NaN."""
    try:
        a = np.asarray(verbal, dtype=float)  # numpy maps None to NaN
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{metric}: verbal confidence must be numbers in [0, 1] or None/NaN for a non-parse "
                         f"({exc})") from None
    return as_prob(metric, a, "verbal confidence", allow_nan=True)


def verbal_parse_rate(verbal) -> float:
    """VPR = (1/n) sum_i 1[verbal confidence of row i parsed] (000, appendix D.1); NaN/None = no parse."""
    v = _verbal("verbal_parse_rate", verbal)
    return float(np.mean(~np.isnan(v)))


@dataclass(frozen=True)
class Overconfidence:
    vs_accuracy: float     # mean verbal - accuracy, parsed rows
    vs_token: float        # mean verbal - mean token, parsed rows (NaN if no token given)
    n_parsed: int
    n_total: int


def overconfidence(verbal, correct, token=None) -> Overconfidence:
    """Signed verbal over-confidence on the parsed rows (000 section 4.2, appendix E.2)."""
    m = "overconfidence"
    v = _verbal(m, verbal)
    z = as_binary(m, correct)
    same_length(m, verbal=v, correct=z)
    ok = ~np.isnan(v)
    if not ok.any():
        raise ValueError(f"{m}: no verbal confidence parsed in this cell (VPR = 0); "
                         "signed over-confidence is undefined")
    vs_tok = float("nan") if token is None else overconf_vs_token(v, token)
    return Overconfidence(float(v[ok].mean() - z[ok].mean()), vs_tok, int(ok.sum()), int(v.size))


def ece_gap(verbal, token, correct, *, bins: int = 10, same_rows: bool = False) -> float:
    """ECE_gap = ECE(conf_verbal) - ECE(conf_token) (000 section 4.2, Table 2; appendix E.2).

    Unparseable verbal rows (NaN) are dropped from ECE_verbal; ECE_token uses all rows unless
    ``same_rows`` restricts it to the parsed rows too.
    """
    m = "ece_gap"
    v = _verbal(m, verbal)
    t = as_prob(m, token, "token confidence")
    z = as_binary(m, correct)
    same_length(m, verbal=v, token=t, correct=z)
    ok = ~np.isnan(v)
    if not ok.any():
        raise ValueError(f"{m}: no verbal confidence parsed in this cell (VPR = 0); ECE_verbal is undefined")
    rows = ok if same_rows else np.ones_like(ok)
    return float(ece(v[ok], z[ok], bins=bins) - ece(t[rows], z[rows], bins=bins))


@dataclass(frozen=True)
class VprSelection:
    threshold: float
    included: list[Hashable] = field(default_factory=list)
    excluded: list[tuple[Hashable, float, str]] = field(default_factory=list)  # (cell, vpr, reason)


def vpr_filter(cells: Mapping[Hashable, object], threshold: float = VPR_THRESHOLD) -> VprSelection:
    """Apply the VPR >= threshold inclusion rule (000 appendix D.1) to a set of cells.

    ``cells`` maps a cell key to either its VPR (a float) or its verbal-confidence array (VPR is
    then computed). Returns included keys and excluded (key, vpr, reason) triples, in input order.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"vpr_filter: threshold must lie in [0, 1], got {threshold!r}")
    sel = VprSelection(threshold)
    for key, val in cells.items():
        if np.ndim(val) == 0:
            vpr = float(val)  # type: ignore[arg-type]
            if not 0.0 <= vpr <= 1.0:
                raise ValueError(f"vpr_filter: VPR of cell {key!r} must lie in [0, 1], got {vpr!r}")
        else:
            arr = np.asarray(val, dtype=object)
            if arr.size == 0:
                sel.excluded.append((key, float("nan"), "no responses in cell"))
                continue
            vpr = verbal_parse_rate(val)
        if vpr >= threshold:
            sel.included.append(key)
        else:
            sel.excluded.append((key, vpr, f"VPR {vpr:.3f} < {threshold:.2f}"))
    return sel


def overconf_vs_acc(verbal, correct) -> float:
    """mean(conf_verbal) - accuracy on the parsed rows (000 section 4.2, appendix D.1 ``overconf_vs_acc``)."""
    return overconfidence(verbal, correct).vs_accuracy


def overconf_vs_token(verbal, token) -> float:
    """mean(conf_verbal) - mean(conf_token) on the parsed rows (000 section 4.2 ``overconf_vs_token``)."""
    m = "overconf_vs_token"
    v = _verbal(m, verbal)
    t = as_prob(m, token, "token confidence", allow_nan=True)
    same_length(m, verbal=v, token=t)
    ok = ~np.isnan(v)
    if not ok.any():
        raise ValueError(f"{m}: no verbal confidence parsed in this cell (VPR = 0); "
                         "signed over-confidence is undefined")
    if np.isnan(t[ok]).any():
        raise ValueError(f"{m}: token confidence is missing on {int(np.isnan(t[ok]).sum())} parsed row(s)")
    return float(v[ok].mean() - t[ok].mean())


__all__ = ["VPR_THRESHOLD", "Overconfidence", "VprSelection", "ece_gap", "overconf_vs_acc", "overconf_vs_token",
           "overconfidence", "verbal_parse_rate", "vpr_filter"]
