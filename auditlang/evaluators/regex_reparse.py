"""Repair path 1 of study 000: regex re-parse of a (chain-of-thought) generation.

Study 000 (arXiv 2605.02038), appendix C.1 "Repair Path 1 - regex re-parse": answer-marker
patterns are searched in the order "Final answer: X", "the correct answer is X", "Answer: X",
"and similar surface forms"; if none matches, the final 150 characters are reverse-scanned for
a standalone choice letter; if neither rule fires, the first-character rule (A.3) applies.

The paper does not list its "similar surface forms" nor say which occurrence of a marker wins.
auditlang adds the forms in ``MARKERS`` after the paper's three (tagged ``added``) and takes the
last valid occurrence by default (``occurrence="last"``: a chain of thought states its final
answer last); both are disclosed through ``params`` and ``describe()``.

Letter case is the explicit ``case_sensitive`` option. The paper's valid choice letters are
"A-D ... A-J" (A.3), upper case, so the default (and the stdlib) reads only upper-case letters:
``Answer: c`` matches no marker and falls through to the first-character rule, which reads the
"A" of "Answer". ``case_sensitive=False`` lets a marker take a lower-case letter (``Answer: c``
-> C) and the fallback accept one, at the cost of reading the article in "the answer is a
tree" as A. The tail scan stays upper-case either way (a standalone "a" is a word).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.letters import extract_pred_letter, item_labels, letter_correct
from auditlang.evaluators.outcome import NOT_TEXT, ParseOutcome, coerce_text, failure
from auditlang.resolve.schema import Obj

# Between a marker and the letter: whitespace, markdown emphasis, quotes, opening brackets,
# optionally the word "option"/"choice"/"letter". All quantifiers are bounded (linear time).
_GAP = r"[\s*_`'\"(\[{]{0,10}"
_OPT = rf"(?:(?:option|choice|letter)\s{{1,4}}{_GAP})?"
_COLON = r"[\s*_]{0,4}[:：][\s*_]{0,4}"
# The letter: one upper-case ASCII letter that is not part of a word (case-sensitive even
# though markers are matched case-insensitively), e.g. "B", "(B)", "**B**", "B." but not "But".
_LETTER = r"(?-i:(?P<letter>[A-Z]))(?![A-Za-z0-9'’])"
_LETTER_ANY_CASE = r"(?-i:(?P<letter>[A-Za-z]))(?![A-Za-z0-9'’])"
_START = r"(?<![A-Za-z])"

# (rule name, origin, marker regex) in search order.
MARKERS: tuple[tuple[str, str, str], ...] = (
    ("final_answer", "paper", rf"{_START}final\s{{1,4}}answer(?:[\s*_]{{1,4}}is\b)?{_COLON}"),
    ("correct_answer_is", "paper", rf"{_START}the\s{{1,4}}correct\s{{1,4}}answer\s{{1,4}}is\b[\s*_:：]{{0,6}}"),
    ("answer_colon", "paper", rf"{_START}answer{_COLON}"),
    ("final_answer_is", "added", rf"{_START}final\s{{1,4}}answer\s{{1,4}}is\b[\s*_:：]{{0,6}}"),
    ("answer_is", "added", rf"{_START}answer\s{{1,4}}is\b[\s*_:：]{{0,6}}"),
    ("correct_option_is", "added", rf"{_START}(?:correct|right|best)\s{{1,4}}(?:option|choice)\s{{1,4}}is\b[\s*_:：]{{0,6}}"),
)
# One pass over the text: the alternatives are in search order, so at any position the
# higher-priority marker is tried first. A match ends at its letter, and any other marker that
# overlaps it starts inside it and reads the same letter with a lower priority, so one pass gives
# the same per-marker matches that matter as one search per marker.
_MARKER_FIRST_LETTERS = "abcfrt"  # every marker starts with one of these (fast rejection of other positions)
_MARKERS_RX = f"(?=[{_MARKER_FIRST_LETTERS}])(?:" + "|".join(f"(?P<m_{name}>{rx})" for name, _, rx in MARKERS) + ")"
_COMBINED = re.compile(_MARKERS_RX + _GAP + _OPT + _LETTER, re.IGNORECASE)
_COMBINED_ANY_CASE = re.compile(_MARKERS_RX + _GAP + _OPT + _LETTER_ANY_CASE, re.IGNORECASE)
_MARKER_NAMES = tuple(name for name, _, _ in MARKERS)
_STANDALONE_LETTER = re.compile(r"(?<![A-Za-z0-9'’])([A-Z])(?![A-Za-z0-9'’])")

MARKER_FORMS = {
    "final_answer": "Final answer: X",
    "correct_answer_is": "the correct answer is X",
    "answer_colon": "Answer: X",
    "final_answer_is": "final answer is X",
    "answer_is": "answer is X",
    "correct_option_is": "correct/right/best option/choice is X",
}


def regex_reparse(
    text: object, labels: Sequence[str], window: int = 150, occurrence: str = "last", case_sensitive: bool = True
) -> ParseOutcome:
    """Study 000 C.1 path 1. ``rule`` is ``marker:<name>`` (a marker matched),
    ``tail_scan`` (standalone letter in the last ``window`` characters; the last one wins), or
    ``fallback:<first-char rule>``. A marker or tail letter counts only if it is a valid label.
    ``case_sensitive=False``: a marker's letter and the fallback's may be lower case (returned
    upper-cased); the tail scan reads upper-case letters only."""
    s = coerce_text(text)
    if s is None:
        return failure(NOT_TEXT)
    valid = frozenset(labels)
    chosen: dict[str, re.Match[str]] = {}
    pattern = _COMBINED if case_sensitive else _COMBINED_ANY_CASE
    for m in pattern.finditer(s):
        if (m.group("letter") if case_sensitive else m.group("letter").upper()) not in valid:
            continue
        name = next(n for n in _MARKER_NAMES if m.group(f"m_{n}") is not None)
        if occurrence == "last" or name not in chosen:
            chosen[name] = m
    for name in _MARKER_NAMES:
        if name in chosen:
            m = chosen[name]
            return ParseOutcome(m.group("letter").upper(), True, f"marker:{name}", m.span("letter"))
    offset = max(0, len(s) - window)
    last: re.Match[str] | None = None
    for m in _STANDALONE_LETTER.finditer(s, offset):
        if m.group(1) in valid:
            last = m
    if last is not None:
        return ParseOutcome(last.group(1), True, "tail_scan", last.span(1))
    fb = extract_pred_letter(s, labels, case_sensitive)
    return ParseOutcome(fb.value, fb.ok, f"fallback:{fb.rule}", fb.span)


class RegexReparseEvaluator(Evaluator):
    """``regex_reparse``: study 000 appendix C.1 repair path 1."""

    PROSE = "a regular-expression re-parse of the answer for a label"  # the rule in a few words (report/methods.py)

    name = "regex_reparse"
    source = "study 000 (arXiv 2605.02038), appendix C.1 'Repair Path 1 - regex re-parse'"

    class Params(Obj):
        DOC: ClassVar[str] = "Study 000 C.1 regex re-parse: marker order, reverse scan of the tail, first-char fallback."
        tail: int = Field(150, ge=1, description="characters at the end reverse-scanned for a standalone letter")
        occurrence: Literal["last", "first"] = Field("last", description="which match of a marker wins")
        case_sensitive: bool = Field(True, description="true: upper-case letters only (the paper's A-D/A-J); false: "
                                                       "markers and the fallback also read lower case")

    def describe(self) -> str:
        p = self.params
        paper = ", ".join(f'"{MARKER_FORMS[n]}"' for n, o, _ in MARKERS if o == "paper")
        added = ", ".join(f'"{MARKER_FORMS[n]}"' for n, o, _ in MARKERS if o == "added")
        return (
            f"Regex re-parse (study 000, C.1): answer markers are tried in the order {paper}, then {added} "
            f"(markers case-insensitive; X a valid choice letter, "
            f"{'upper case only' if p['case_sensitive'] else 'either case, read as upper case'}; "
            f"the {p['occurrence']} occurrence wins); "
            f"if none matches, the last standalone upper-case valid letter in the final {p['tail']} characters; "
            f"otherwise the first-character rule of A.3{'' if p['case_sensitive'] else ' accepting lower case'}."
        )

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        p = self.params
        return regex_reparse(text, item_labels(item, self.name), p["tail"], p["occurrence"], p["case_sensitive"])

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        return letter_correct(pred, item)
