"""``\\boxed{}`` answers of study 003 (arXiv 2606.30814), appendix C-D.

Table 5 (vanilla-verb template): the model answers ``Confidence: \\boxed{...}`` with a score
from 0 to 100; D.3: "we extract the numeric value inside \\boxed{} and normalize it to [0, 1] by
dividing by 100". Table 3 template I (multiple choice): the final answer is ``\\boxed{A}`` and
correctness is exact match of the extracted option letter (D.2).

The paper does not say which ``\\boxed{}`` counts when there are several; auditlang takes the
last one (the template itself contains ``\\boxed{Your confidence score from 0-100.}``, which a
model may echo before answering) and does not fall back to earlier ones. Braces inside a box
nest (``\\boxed{\\text{C}}``); the box is the one whose ``{`` opens last among the boxes whose
braces close.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from auditlang.evaluators.base import Evaluator, VerbalParser
from auditlang.evaluators.letters import item_labels, letter_correct
from auditlang.evaluators.outcome import NOT_TEXT, ParseOutcome, coerce_text, failure
from auditlang.resolve.schema import Obj

_BOXED_OPEN = re.compile(r"\\boxed[ \t]{0,3}\{")
_BRACE = re.compile(r"[{}]")
_SCORE = re.compile(r"\s*([0-9]{1,6}(?:\.[0-9]{1,6})?)\s*(?:\\?%)?\s*")
# LaTeX text/font wrappers stripped around a boxed letter: \text{C}, \textbf{C}, \mathrm{C}, \mathbf{C}
_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf)[ \t]{0,3}\{([^{}]*)\}")
_LETTER_CONTENT = re.compile(r"[\s(]*([A-Za-z])[\s).]*")


@dataclass(frozen=True)
class Box:
    """The content of one ``\\boxed{...}``: ``text`` and its ``start``/``end`` offsets in the input."""

    text: str
    start: int
    end: int


def last_boxed(s: str) -> Box | None:
    """The last ``\\boxed{...}`` whose braces close; nested braces allowed (one linear pass).

    Braces are matched with a stack, so an unclosed ``{`` elsewhere does not hide a later box.
    """
    closes: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(s):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            closes[stack.pop()] = m.start()
    last = None
    for m in _BOXED_OPEN.finditer(s):
        o = m.end() - 1
        if o in closes:
            last = Box(s[o + 1 : closes[o]], o + 1, closes[o])
    return last


def strip_wrappers(content: str) -> str:
    """Remove ``\\text{}``-style wrappers (any depth): ``\\text{\\textbf{C}}`` -> ``C``."""
    while True:
        out = _WRAPPER.sub(lambda m: m.group(1), content)
        if out == content:
            return out
        content = out


class Boxed0100Parser(VerbalParser):
    """``boxed_0_100``: study 003 table 5 / D.3."""

    name = "boxed_0_100"
    source = "study 003 (arXiv 2606.30814), table 5 and appendix D.3"

    def describe(self) -> str:
        return (
            "Boxed 0-100 confidence (study 003, table 5 / D.3): the content of the last \\boxed{...} must be one number "
            "in [0, 100] (optionally followed by %), divided by 100; any other content, or no \\boxed{}, is a non-parse."
        )

    def parse(self, text: str) -> ParseOutcome:
        s = coerce_text(text)
        if s is None:
            return failure(NOT_TEXT)
        m = last_boxed(s)
        if m is None:
            return failure("no_boxed")
        c = _SCORE.fullmatch(m.text)
        if c is None:
            return failure("bad_content")
        x = float(c.group(1))
        if not 0.0 <= x <= 100.0:
            return failure("out_of_range")
        return ParseOutcome(x / 100.0, True, "boxed", (m.start + c.start(1), m.start + c.end(1)))


class BoxedLetterEvaluator(Evaluator):
    """``boxed_letter``: study 003 table 3 template I + D.2 exact letter match."""

    PROSE = "the letter in \\boxed{}"  # the rule in a few words (report/methods.py)

    name = "boxed_letter"
    source = "study 003 (arXiv 2606.30814), table 3 template I and appendix D.2"

    class Params(Obj):
        DOC: ClassVar[str] = "Study 003: the letter inside the last \\boxed{...} of the answer."
        OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("case_sensitive",)
        case_sensitive: bool = Field(True, description="true: upper-case letters only; false: a lower-case letter is read upper-cased")

    def describe(self) -> str:
        return (
            "Boxed letter (study 003, table 3 template I / D.2): the content of the last \\boxed{...} (nested braces "
            "allowed), stripped of spaces, parentheses, a trailing period and \\text{}/\\textbf{}/\\mathrm{}/\\mathbf{} "
            "wrappers, must be one valid choice letter; correct iff it equals the gold letter."
        )

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        labels = item_labels(item, self.name)
        s = coerce_text(text)
        if s is None:
            return failure(NOT_TEXT)
        m = last_boxed(s)
        if m is None:
            return failure("no_boxed")
        c = _LETTER_CONTENT.fullmatch(strip_wrappers(m.text)) if len(m.text) <= 200 else None
        if c is None:
            return failure("bad_content", m.text)
        v = c.group(1) if self.params["case_sensitive"] else c.group(1).upper()
        if v not in labels:
            return failure("not_a_label", v)
        start = m.start + m.text.rfind(c.group(1))
        return ParseOutcome(v, True, "boxed", (start, start + 1))

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        return letter_correct(pred, item)
