"""Linguistic verbal-confidence parsers of study 002 (Xia et al., arXiv 2601.08064).

Appendix A.2: following Tian et al. (2023), the expressions ["Almost No Chance", "Highly
Unlikely", "Chances are Slight", "Little Chance", "Unlikely", "Probably Not", "About Even",
"Better than Even", "Likely", "Probably", "Very Good Chance", "Highly Likely", "Almost Certain"]
map to [0.02, 0.05, 0.1, 0.1, 0.2, 0.25, 0.5, 0.6, 0.7, 0.7, 0.8, 0.9, 0.95]. Table 5: prompt
"L." asks for one expression; "L. MC" for one of the options a: 'Almost No Chance' ...
m: 'Almost Certain'. The paper gives no parse rule; auditlang's rules are stated on each parser.
"""

from __future__ import annotations

import re

from auditlang.evaluators.base import VerbalParser
from auditlang.evaluators.outcome import EMPTY, NOT_TEXT, ParseOutcome, coerce_text, failure

LINGUISTIC_MAP: dict[str, float] = {
    "Almost No Chance": 0.02,
    "Highly Unlikely": 0.05,
    "Chances are Slight": 0.1,
    "Little Chance": 0.1,
    "Unlikely": 0.2,
    "Probably Not": 0.25,
    "About Even": 0.5,
    "Better than Even": 0.6,
    "Likely": 0.7,
    "Probably": 0.7,
    "Very Good Chance": 0.8,
    "Highly Likely": 0.9,
    "Almost Certain": 0.95,
}
# Table 5 "L. MC": options a..m in the order of the list above.
LINGUISTIC_OPTIONS: dict[str, str] = dict(zip("abcdefghijklm", LINGUISTIC_MAP, strict=True))

# Longest expression first, so "Highly Unlikely" wins over "Unlikely" and "Probably Not" over
# "Probably" at the same position; whole words only; any case; 1-3 spaces/newlines between words.
# One capturing group per expression: ``m.lastindex`` names the expression.
_BY_LENGTH = tuple(sorted(LINGUISTIC_MAP, key=len, reverse=True))
_FIRST_LETTERS = "".join(sorted({e[0].lower() for e in LINGUISTIC_MAP}))
_EXPR = re.compile(
    rf"(?=[{_FIRST_LETTERS}])(?<![\w])(?:"
    + "|".join("(" + r"[ \t\n]{1,3}".join(map(re.escape, e.split())) + ")" for e in _BY_LENGTH)
    + r")(?![\w])",
    re.IGNORECASE,
)
_LEAD = re.compile(r"[\s*_`'\"(\[{>#-]{0,20}(?:option[ \t]{1,3})?", re.IGNORECASE)
_OPTION = re.compile(r"([a-mA-M])[ \t]{0,3}(?=[:).\]*_'\"]|\Z|\n)")


def find_expressions(s: str) -> tuple[list[str], tuple[int, int] | None]:
    """Distinct expressions in text order (stops at the second) and the first one's span."""
    found: list[str] = []
    span = None
    for m in _EXPR.finditer(s):
        e = _BY_LENGTH[m.lastindex - 1]
        if e not in found:
            found.append(e)
            span = span or m.span()
            if len(found) > 1:
                break
    return found, span


class LinguisticParser(VerbalParser):
    """``linguistic``: study 002 table 5 "L." + A.2 map."""

    name = "linguistic"
    source = "study 002 (arXiv 2601.08064), table 5 'L.' and appendix A.2"

    def describe(self) -> str:
        return (
            "Linguistic confidence (study 002, table 5 'L.', map of A.2): the text must contain exactly one distinct "
            "expression of the A.2 list (whole words, any case, longest expression first, repeats allowed), "
            "mapped to its number; no expression or two different ones is a non-parse."
        )

    def parse(self, text: str) -> ParseOutcome:
        s = coerce_text(text)
        if s is None:
            return failure(NOT_TEXT)
        if not s.strip():
            return failure(EMPTY)
        found, span = find_expressions(s)
        if not found:
            return failure("no_expression")
        if len(found) > 1:
            return failure("multi_valued")
        return ParseOutcome(LINGUISTIC_MAP[found[0]], True, "expression", span)


class LinguisticMCParser(VerbalParser):
    """``linguistic_mc``: study 002 table 5 "L. MC" (options a-m) + A.2 map."""

    name = "linguistic_mc"
    source = "study 002 (arXiv 2601.08064), table 5 'L. MC' and appendix A.2"

    def describe(self) -> str:
        return (
            "Linguistic multiple-choice confidence (study 002, table 5 'L. MC', map of A.2): after leading whitespace, "
            "quotes, brackets and markdown (and an optional word 'option'), an option letter a-m (any case) followed "
            "by ':', ')', '.', ']', a quote, markdown emphasis or the end of a line selects that option's expression, unless the text names a "
            "different expression; without such a letter, exactly one distinct expression of the list counts."
        )

    def parse(self, text: str) -> ParseOutcome:
        s = coerce_text(text)
        if s is None:
            return failure(NOT_TEXT)
        if not s.strip():
            return failure(EMPTY)
        lead = _LEAD.match(s)
        opt = _OPTION.match(s, lead.end()) if lead else None
        found, span = find_expressions(s)
        if opt is not None:
            e = LINGUISTIC_OPTIONS[opt.group(1).lower()]
            if any(f != e for f in found):
                return failure("conflict")
            return ParseOutcome(LINGUISTIC_MAP[e], True, "option", opt.span(1))
        if not found:
            return failure("no_option")
        if len(found) > 1:
            return failure("multi_valued")
        return ParseOutcome(LINGUISTIC_MAP[found[0]], True, "expression", span)
