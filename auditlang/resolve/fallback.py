"""``hub(..., fallback=jsonl(PATH, ...))``: the local file a Hub dataset is read from when its
split is not available offline.

The fallback is written inline and is a dataset of its own (id ``<hub id>.fallback``). Its file
and its field mapping (the local schema may differ from the Hub's; unset fields take the flat
defaults ``question``, ``choices``, ``answer``, ...) are its own. Every other parameter it does not
set is the Hub dataset's -- ``sample``, ``seed``, ``sample_per``, ``filter_field``/``filter_in``,
and the dev split (``dev``/``dev_sample``, taken as a pair) -- so both sources are drawn by the
same rule unless the fallback says otherwise (a local copy may be a subset, name a column or its
values differently, or lack the split the Hub's dev items come from). The task is always the
Hub dataset's.
"""

from __future__ import annotations

from typing import Any

from auditlang.core.diagnostics import DiagnosticBag, Span
from auditlang.syntax import ast as A

FILE_CTORS = ("jsonl", "csv")
INHERITED = ("task",)  # always the Hub dataset's
DEFAULTED = ("sample", "seed", "sample_per", "filter_field", "filter_in")  # the Hub dataset's unless the fallback sets its own
DEV = ("dev", "dev_sample")  # the Hub dataset's unless the fallback sets either
EXAMPLE = 'fallback=jsonl("arc_challenge.jsonl")'


def fallback_id(hub_id: str) -> str:
    return f"{hub_id}.fallback"


def fallback_base(expr: A.Expr, raw: dict[str, Any], spans: dict[str, Span], bag: DiagnosticBag
                  ) -> tuple[str, dict[str, Any], dict[str, Span]] | None:
    """(constructor, inherited parameters, their spans) for the fallback ``expr`` of a hub dataset
    whose own parameters are ``raw``; None (E124 reported) when ``expr`` is not an inline file
    dataset or sets a parameter that is the Hub dataset's."""
    if not (isinstance(expr, A.Call) and expr.func.dotted in FILE_CTORS):
        got = expr.func.dotted + "(...)" if isinstance(expr, A.Call) else "a name" if isinstance(expr, A.Ref) else "a value"
        bag.error("E124", f"fallback= takes a local file written inline, jsonl(PATH, ...) or csv(PATH, ...); got {got}",
                  expr.span, hint=f"e.g. {EXAMPLE}: the file under the data root that is read when the Hub split is "
                                  "not available offline, with its own field mapping")
        return None
    ok = True
    for k in expr.kwargs:
        if k.name in INHERITED:
            bag.error("E124", f"'{k.name}' of a fallback comes from its hub dataset", k.span,
                      hint=f"set {k.name}= on hub(...): both sources hold the same task")
            ok = False
    if not ok:
        return None
    keys = INHERITED + DEFAULTED + (() if any(k.name in DEV for k in expr.kwargs) else DEV)
    return expr.func.dotted, {k: raw[k] for k in keys if k in raw}, {k: spans[k] for k in keys if k in spans}
