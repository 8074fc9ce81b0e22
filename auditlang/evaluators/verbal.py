"""Numeric verbal-confidence parsers.

Study 000 (arXiv 2605.02038), appendix A.3 "Verbal-confidence parser": explicit percentages
(``75%``, ``75 percent``), decimal forms (``0.75``, ``.75``) and phrase forms (``X out of 100``)
are accepted, in that order of precedence. Strict parses only: the first well-formed value in
[0, 1] for ``decimal_01``, or in [0%, 100%] for ``percent_0_100``; partial or multi-valued outputs
do not parse; values are clipped to [0, 1]; a failure returns None and counts as a non-parse for
VPR. Elicitation strings (B.2): decimal_01 "... as a decimal probability between 0.0 and 1.0.
Reply with only the number, e.g. 0.8."; percent_0_100 "... a single percentage between 0% and
100% (e.g., 75%)."

auditlang's reading, applied identically by every parser here:

* A *number* is ASCII digits with an optional fraction (``7``, ``0.75``, ``.75``), not glued to a
  letter, digit, underscore or another decimal point (``GPT4``, ``1st``, ``0.8.5`` are not numbers);
  more than 15 characters is never well-formed. A ``-``/``−`` directly before it makes it negative.
* Forms: *percentage* = number + optional space + ``%`` / ``percent`` / ``per cent``;
  *phrase* = number + ``out of`` + N (and ``X/10``, ``X/100`` for the 0-10 scale); *bare* = any other number.
* The phrasing sets the scale of a bare number: decimal_01 reads it on [0, 1]; percent_0_100
  and integer_0_100 on [0, 100] (divided by 100); scale_0_10 on [0, 10] (divided by 10). A
  percentage is always x/100 with x in [0, 100]; a phrase is X/N with N in the parser's
  denominators and X in [0, N]. Anything else is not well-formed (e.g. ``85`` for decimal_01).
* Partial: an integer followed by a dangling ``.``, ``out of`` or ``/`` at the very end of the
  text (``0.``, ``75 out of``) is cut off and never well-formed; ``0.9.`` is complete.
* Multi-valued: two numbers joined by ``-``, ``–``, ``—``, ``~``, ``/``, ``to``, ``or`` or ``and``
  (``70-80%``, ``0.7 or 0.8``, ``between 0.6 and 0.8``) are never well-formed.
* Scale mismatch (issue 34 item 4; study 000 A.3 accepts only values in the phrasing's range and
  says nothing of replies on another scale, so none is guessed): a bare number that fits another
  scale better is not read. Under decimal_01 (and scale_0_10) that is a bare number above the
  scale but within [0, 100] (``85``: a percentage without its sign); under percent_0_100 and
  integer_0_100 a bare number written with a decimal point and at most 1 (``0.01``, ``0.8``, ``1.0``:
  a decimal probability, not 0.8 %). When nothing else parses the reason is ``scale_mismatch``,
  reported per cell (``scale_mismatch_rate`` in metrics/cells.csv).
* The value is the first well-formed percentage; else the first well-formed bare number; else
  the first well-formed phrase. ``rule`` is the form (``percent``/``bare``/``phrase``) or the
  failure reason (``empty``, ``no_number``, ``multi_valued``, ``partial``, ``scale_mismatch``, ``not_well_formed``,
  ``too_many_numbers`` after ``MAX_NUMBERS`` numeric mentions without a decision).

Every regex is anchored by a look-behind or uses bounded/possessive quantifiers, so parsing is
linear in the text length (megabytes of digits, spaces or repeated text are safe).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import ClassVar

from auditlang.evaluators.base import VerbalParser
from auditlang.evaluators.outcome import EMPTY, NOT_TEXT, ParseOutcome, coerce_text, failure

_NUM = re.compile(r"(?<![\w.])(?:[0-9]++(?:\.[0-9]++)?+|\.[0-9]++)(?!\w|\.[0-9])")
_PCT = re.compile(r"[ \t\u00a0]{0,3}(?:%|％|per[ \t]?cent(?![A-Za-z]))", re.IGNORECASE)
_DENOM = r"([0-9]{1,6}(?:\.[0-9]{1,6})?)(?!\w|\.[0-9])"
_OUT_OF = re.compile(r"[ \t\u00a0]{1,3}out[ \t]{1,3}of[ \t]{1,3}" + _DENOM, re.IGNORECASE)
_SLASH = re.compile(r"[ \t]{0,2}/[ \t]{0,2}(10|100)(?!\w|\.[0-9])")  # X/10, X/100 only
# A number cut off at the end of the text: "0." or "75 out of" with nothing after.
_PARTIAL = re.compile(r"(?:\.|[ \t\u00a0]{1,3}out(?:[ \t]{1,3}of)?|[ \t]{0,2}/)[ \t\r\n]{0,8}\Z", re.IGNORECASE)
_RANGE_GAP = re.compile(r"\s{0,3}(?:[-–—~/]|to|or|and)\s{0,3}", re.IGNORECASE)
_MAX_NUM_CHARS = 15
# A percentage candidate (same number and suffix rules as _NUM + _PCT), for the fast scan.
_PCT_NUM = re.compile(_NUM.pattern + _PCT.pattern, re.IGNORECASE)
SCALE_MISMATCH = "scale_mismatch"  # the failure reason of a bare number on another scale
MAX_NUMBERS = 1_000  # numeric mentions examined before giving up ("too_many_numbers")
_WINDOW = 64  # context re-tokenised around a later percentage (> longest token + connector)


class NumToken:
    """One numeric mention: its form, span and reading."""

    __slots__ = ("kind", "start", "end", "x", "denom", "has_point", "minus", "negative", "multi")

    def __init__(self, kind: str, start: int, end: int, x: Decimal | None, denom: Decimal | None, has_point: bool, minus: bool) -> None:
        self.kind, self.start, self.end, self.x, self.denom = kind, start, end, x, denom
        self.has_point, self.minus = has_point, minus
        self.negative = minus
        self.multi = False

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"NumToken({self.kind}, {self.start}:{self.end}, x={self.x}, denom={self.denom}, multi={self.multi})"


def _raw_tokens(s: str, slash_fraction: bool, pos: int, endpos: int) -> Iterator[NumToken]:
    consumed = 0
    for m in _NUM.finditer(s, pos, endpos):
        if m.start() < consumed:
            continue
        lit = m.group(0)
        x = Decimal(lit) if len(lit) <= _MAX_NUM_CHARS else None
        minus = m.start() > 0 and s[m.start() - 1] in "-−"
        end = m.end()
        if p := _PCT.match(s, end):
            yield NumToken("percent", m.start(), p.end(), x, None, "." in lit, minus)
            continue
        q = _OUT_OF.match(s, end) or (_SLASH.match(s, end) if slash_fraction else None)
        if q:
            consumed = q.end()
            yield NumToken("phrase", m.start(), q.end(), x, Decimal(q.group(1)), "." in lit, minus)
            continue
        if "." not in lit and _PARTIAL.match(s, end):
            yield NumToken("partial", m.start(), end, x, None, False, minus)
            continue
        yield NumToken("bare", m.start(), end, x, None, "." in lit, minus)


def number_tokens(s: str, slash_fraction: bool = False, pos: int = 0, endpos: int | None = None) -> Iterator[NumToken]:
    """Tokens in text order; a token is yielded once its successor is known, so ``multi``
    (joined to a neighbour by a range/alternative connector) is final when it is seen."""
    prev: NumToken | None = None
    for tok in _raw_tokens(s, slash_fraction, pos, len(s) if endpos is None else endpos):
        if prev is not None:
            gap = s[prev.end : tok.start]
            if len(gap) <= 12 and _RANGE_GAP.fullmatch(gap):
                prev.multi = tok.multi = True
                tok.negative = False  # the '-' is a range connector, not a sign
            yield prev
        prev = tok
    if prev is not None:
        yield prev


class NumericVerbalParser(VerbalParser):
    """Study 000 A.3 grammar with a scale (see the module docstring)."""

    bare_max: ClassVar[Decimal]
    bare_integer_only: ClassVar[bool] = False
    denominators: ClassVar[tuple[Decimal, ...]] = (Decimal(100),)
    slash_fraction: ClassVar[bool] = False
    _scale_doc: ClassVar[str]
    _mismatch_doc: ClassVar[str] = "a bare number with a decimal point at most 1 (e.g. 0.01: a decimal probability)"

    def scale_mismatch(self, t: NumToken) -> bool:
        """A bare number that fits another scale better (module docstring): not read, never guessed."""
        if t.kind != "bare" or t.multi or t.negative or t.x is None:
            return False
        if self.bare_max < 100:
            return self.bare_max < t.x <= 100
        return t.has_point and t.x <= 1

    def _value(self, t: NumToken) -> float | None:
        if self.scale_mismatch(t):
            return None
        if t.multi or t.negative or t.x is None or t.kind == "partial":
            return None
        if t.kind == "percent":
            return float(t.x / 100) if 0 <= t.x <= 100 else None
        if t.kind == "phrase":
            if t.denom not in self.denominators or not 0 <= t.x <= t.denom:
                return None
            return float(t.x / t.denom)
        if self.bare_integer_only and t.has_point:
            return None
        return float(t.x / self.bare_max) if 0 <= t.x <= self.bare_max else None

    def parse(self, text: str) -> ParseOutcome:
        s = coerce_text(text)
        if s is None:
            return failure(NOT_TEXT)
        if not s.strip():
            return failure(EMPTY)
        first: dict[str, tuple[float, NumToken]] = {}
        saw_number = saw_multi = saw_partial = saw_mismatch = False
        for count, t in enumerate(number_tokens(s, self.slash_fraction), 1):
            if count > MAX_NUMBERS:
                return failure("too_many_numbers")
            saw_number = True
            saw_multi = saw_multi or t.multi
            saw_partial = saw_partial or t.kind == "partial"
            saw_mismatch = saw_mismatch or self.scale_mismatch(t)
            if t.kind in first:
                continue
            v = self._value(t)
            if v is None:
                continue
            first[t.kind] = (v, t)
            if t.kind == "percent":
                break  # highest precedence, and the first one
            if t.kind == "bare":  # only a later well-formed percentage can still win
                later = self._later_percent(s, t.end)
                if later == "too_many":
                    return failure("too_many_numbers")
                if later is not None:
                    first["percent"] = later
                break
        for kind in ("percent", "bare", "phrase"):
            if kind in first:
                v, t = first[kind]
                return ParseOutcome(min(1.0, max(0.0, v)), True, kind, (t.start, t.end))
        if saw_mismatch:
            return failure(SCALE_MISMATCH)
        if saw_multi:
            return failure("multi_valued")
        if saw_partial:
            return failure("partial")
        return failure("not_well_formed" if saw_number else "no_number")

    def _later_percent(self, s: str, pos: int) -> tuple[float, NumToken] | str | None:
        """First well-formed percentage after ``pos`` (C-speed search, then the token rules
        applied to a small window around each hit)."""
        for count, m in enumerate(_PCT_NUM.finditer(s, pos), 1):
            if count > MAX_NUMBERS:
                return "too_many"
            lo, hi = max(pos, m.start() - _WINDOW), min(len(s), m.end() + _WINDOW)
            for t in number_tokens(s, self.slash_fraction, lo, hi):
                if t.start == m.start():
                    v = self._value(t) if t.kind == "percent" else None
                    if v is not None:
                        return v, t
                    break
        return None

    def describe(self) -> str:
        phrase = " or ".join(f'"X out of {d:g}"' for d in self.denominators)
        if self.slash_fraction:
            phrase += " (also X/N)"
        return (
            f"Verbal confidence, {self.name} (source: {self.source}): the first well-formed explicit percentage "
            f"(x% or x percent, x in [0, 100], read as x/100); else the first bare number {self._scale_doc}; else the "
            f"first phrase {phrase} with 0 <= X <= N, read as X/N; numbers joined as a range or alternative "
            "(e.g. 70-80%, 0.7 or 0.8) and cut-off numbers (e.g. a final '0.') never count; "
            f"{self._mismatch_doc} is a non-parse (scale_mismatch: a number on another scale is never guessed; "
            "auditlang's rule, as the study does not say how such replies are read); "
            "the value is clipped to [0, 1] and anything else is a non-parse."
        )


class Decimal01Parser(NumericVerbalParser):
    name = "decimal_01"
    source = "study 000 A.3 and B.2 (decimal_01); study 002 table 5 P(1), CF(1)"
    bare_max = Decimal(1)
    _scale_doc = "in [0, 1] (0.75, .75, 1), taken as is"
    _mismatch_doc = "a bare number above 1 and at most 100 (e.g. 85: a percentage without its sign)"


class Percent0100Parser(NumericVerbalParser):
    name = "percent_0_100"
    source = "study 000 A.3 and B.2 (percent_0_100); study 002 table 5 P(%)"
    bare_max = Decimal(100)
    _scale_doc = "in [0, 100], read as a percentage (x/100)"


class Integer0100Parser(NumericVerbalParser):
    name = "integer_0_100"
    source = "study 001 appendix I (integer 0-100 elicitation), parsed with the study 000 A.3 grammar"
    bare_max = Decimal(100)
    bare_integer_only = True
    _scale_doc = "that is an integer in [0, 100], read as x/100"


class Scale010Parser(NumericVerbalParser):
    name = "scale_0_10"
    source = "study 002 table 5 P(10), CT(1), parsed with the study 000 A.3 grammar"
    bare_max = Decimal(10)
    denominators = (Decimal(10), Decimal(100))
    slash_fraction = True
    _scale_doc = "in [0, 10], read as x/10"
    _mismatch_doc = "a bare number above 10 and at most 100 (e.g. 85: a percentage without its sign)"
