"""Choice letters and the first-character evaluator of study 000.

Study 000 (Karmakar & Chatterjee, arXiv 2605.02038), appendix A.3 "Answer-letter scoring":
``extract_pred_letter`` returns the first character of the first non-empty line if it is a
valid choice letter (A-D for 4-choice, A-J for 10-choice); otherwise it reverse-scans lines for
a standalone choice letter; otherwise it falls through to the raw first character. Whitespace,
leading punctuation and markdown bullet markers are stripped before the first-character test.

Classification tasks use the same letters: 000 appendix C.3 / table 5 measure the "valid-letter
set" on SST-2, MNLI and AG News, so a classification item's label names are lettered A, B, ...
in ``choices`` order exactly like MC options. The paper defines no label-word matching.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar

from pydantic import Field

from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.outcome import EMPTY, NOT_TEXT, ParseOutcome, coerce_text, failure
from auditlang.resolve.schema import Obj

LETTERS = string.ascii_uppercase


def choice_letters(n: int) -> tuple[str, ...]:
    """The first ``n`` letters: A, B, ... (n between 1 and 26)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 26:
        raise ValueError(f"number of choices must be an integer between 1 and 26, got {n!r}")
    return tuple(LETTERS[:n])


def item_labels(item: Mapping[str, Any], who: str) -> tuple[str, ...]:
    """Letters for an MC/classification item; a clear error for a free-form item."""
    choices = item.get("choices") if isinstance(item, Mapping) else None
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        raise ValueError(
            f"evaluator {who!r} needs a multiple-choice or classification item with a non-empty "
            f"'choices' list; got choices={choices!r}. Hint: use exact_match, lenient_match, "
            "alias_match or llm_judge for free-form QA"
        )
    return choice_letters(len(choices))


def gold_letter(item: Mapping[str, Any]) -> str | None:
    """Letter of the gold choice: from ``answer_index``, else the position of ``answer`` in
    ``choices``; None when neither is available."""
    choices = item.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices or len(choices) > 26:
        return None
    idx = item.get("answer_index")
    if isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < len(choices):
        return LETTERS[idx]
    answer = item.get("answer")
    if answer is not None and answer in choices:
        return LETTERS[list(choices).index(answer)]
    return None


# ----------------------------------------------------------------------------- stripping

# Markdown bullet / quote / emphasis markers that are not Unicode punctuation (category P*).
BULLET_MARKERS = "+>|~`^=•‣◦▪▸►"


@lru_cache(maxsize=1)
def strip_class() -> str:
    """Regex character class body: whitespace except '\\n', every BMP punctuation character
    (Unicode category P*), and the markdown markers above. Built once."""
    chars = {c for c in map(chr, range(0x10000)) if c.isspace() or unicodedata.category(c).startswith("P")}
    chars.update(BULLET_MARKERS)
    chars.discard("\n")
    return "".join(re.escape(c) for c in sorted(chars))


@lru_cache(maxsize=1)
def _regexes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    sc = strip_class()
    lead = re.compile(f"[{sc}]*+")
    # a line that is one letter surrounded only by whitespace / punctuation / markdown markers
    standalone = re.compile(f"(?m)^[{sc}]*+([A-Za-z])[{sc}]*+$")
    return lead, standalone


def extract_pred_letter(text: object, labels: Sequence[str] | int, case_sensitive: bool = True) -> ParseOutcome:
    """Study 000 A.3 ``extract_pred_letter``. Rules (``ParseOutcome.rule``):

    ``first_char``: the first non-empty line (the line holding the first non-whitespace
    character), after stripping leading whitespace, punctuation and markdown bullet markers,
    starts with a valid label. ``standalone_line``: scanning lines from the last to the first,
    a line that is a single valid label once surrounding whitespace/punctuation/markdown is
    stripped (e.g. ``B``, ``(B)``, ``**B.**``). ``raw_first_char``: fall-through; the value is
    the first non-whitespace character and ``ok`` is True only if it is a valid label (the paper
    scores an invalid one as wrong). Lines are split on ``\\n`` (``\\r`` counts as whitespace).
    ``case_sensitive=False`` also accepts lower-case letters (value upper-cased); the paper
    names upper-case letters only. ``labels``: the valid letters, or the number of choices.
    """
    valid = frozenset(choice_letters(labels) if isinstance(labels, int) else labels)
    s = coerce_text(text)
    if s is None:
        return failure(NOT_TEXT)
    first = re.search(r"\S", s)
    if first is None:
        return failure(EMPTY)

    def norm(c: str) -> str:
        return c if case_sensitive else c.upper()

    lead, standalone = _regexes()
    # 1. first character of the first non-empty line, after stripping
    i = lead.match(s, first.start()).end()
    if i < len(s) and s[i] != "\n" and norm(s[i]) in valid:
        return ParseOutcome(norm(s[i]), True, "first_char", (i, i + 1))
    # 2. reverse line scan for a standalone letter (last matching line wins)
    found: re.Match[str] | None = None
    for m in standalone.finditer(s):
        if norm(m.group(1)) in valid:
            found = m
    if found is not None:
        return ParseOutcome(norm(found.group(1)), True, "standalone_line", found.span(1))
    # 3. raw first character
    c = s[first.start()]
    return ParseOutcome(norm(c), norm(c) in valid, "raw_first_char", (first.start(), first.start() + 1))


class FirstCharEvaluator(Evaluator):
    """``first_char``: study 000 appendix A.3 ``extract_pred_letter``; correct iff the extracted
    letter equals the gold letter (an invalid first character is scored wrong, as in 000 C.1)."""

    PROSE = "the answer's first character as the label"  # the rule in a few words (report/methods.py)

    name = "first_char"
    source = "study 000 (arXiv 2605.02038), appendix A.3 'Answer-letter scoring'"

    class Params(Obj):
        DOC: ClassVar[str] = "Study 000 A.3 extract_pred_letter."
        OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("case_sensitive",)
        case_sensitive: bool = Field(True, description="true: upper-case letters only (the paper's); false: also lower case")

    def describe(self) -> str:
        case = "" if self.params["case_sensitive"] else " (lower-case letters accepted)"
        return (
            "First-character evaluator (study 000, A.3): the first character of the first non-empty line, "
            "after stripping whitespace, leading punctuation and markdown bullet markers, if it is a valid "
            f"choice letter{case}; otherwise the last line consisting of a single valid letter; otherwise the "
            "raw first character, which is scored wrong when it is not a valid letter."
        )

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        return extract_pred_letter(text, item_labels(item, self.name), self.params["case_sensitive"])

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        return letter_correct(pred, item)


def letter_correct(pred: Any, item: Mapping[str, Any]) -> bool | None:
    """pred == gold letter; None when the item has no gold letter."""
    gold = gold_letter(item)
    if gold is None:
        return None
    return isinstance(pred, str) and pred == gold

