"""Normalised string matching for free-form answers (studies 001 and 003).

Study 001 (Kim & Kang, arXiv 2605.27752), section 3 and appendix M: predictions and gold strings
are lower-cased, non-alphanumeric characters are replaced with spaces and multiple spaces are
collapsed into one; a prediction is correct iff the normalised strings are equal or one contains
the other (lenient, the main rule). Appendix M / table 22 "exact match only" drops the
containment branch (strict). TriviaQA is scored against its aliases, TruthfulQA against the
reference correct-answer set (``aliases`` in the shared data); SciQ/MMLU against the correct
option text. Answer extraction (section 3): bare-query outputs use the first generated line after
removing common answer prefixes; verbalized-confidence outputs use the string after ``Guess:``.

Study 003 (arXiv 2606.30814), appendix D.2: TriviaQA uses alias-aware exact match (correct if the
prediction matches any acceptable alias); the open-ended template (table 3, III) asks for the
answer inside ``<answer>...</answer>``.

Decisions where the papers are silent (disclosed in ``describe()``): "alphanumeric" is Unicode
(``str.isalnum``); containment is plain substring containment of the normalised strings; an
answer that normalises to the empty string is never correct and an empty gold is skipped (the
empty string is contained in every string); 003's normalisation is not stated, so alias_match
uses 001's; the "common answer prefixes" are ``ANSWER_PREFIXES``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.outcome import EMPTY, NOT_TEXT, ParseOutcome, coerce_text, failure
from auditlang.resolve.schema import Obj

_NON_ALNUM = re.compile(r"[\W_]+")


def normalize_answer(s: str) -> str:
    """001 section 3: lower-case; every run of non-alphanumeric characters -> one space; trimmed."""
    return _NON_ALNUM.sub(" ", s.lower()).strip()


def exact_norm_match(pred: str, gold: str) -> bool:
    """Normalised strings equal (empty strings never match)."""
    p, g = normalize_answer(pred), normalize_answer(gold)
    return bool(p) and p == g


def lenient_norm_match(pred: str, gold: str) -> bool:
    """Normalised strings equal, or one contains the other (empty strings never match)."""
    p, g = normalize_answer(pred), normalize_answer(gold)
    return bool(p) and bool(g) and (p == g or p in g or g in p)


# ----------------------------------------------------------------------------- extraction

# auditlang's list for 001's unspecified "common answer prefixes"; longest first, matched
# case-insensitively at the start of the first line, one prefix removed.
ANSWER_PREFIXES: tuple[str, ...] = (
    "the final answer is:", "the final answer is", "final answer:", "the answer is:", "the answer is",
    "answer:", "a:",
)
_PREFIX_RX = re.compile(
    r"\s*+(?:"
    + "|".join(re.escape(p) + ("" if p.endswith(":") else r"(?![A-Za-z0-9])") for p in sorted(ANSWER_PREFIXES, key=len, reverse=True))
    + ")",
    re.IGNORECASE,
)
_NON_SPACE = re.compile(r"\S")
_GUESS_RX = re.compile(r"guess\s{0,3}:", re.IGNORECASE)
_LINE_RX = re.compile(r"[^\n]*")

EXTRACT_MODES = ("first_line", "guess", "answer_tag", "full")
# the answer each ``extract`` takes, as the methods paragraph names it (EXTRACT_DOC in full)
EXTRACT_PROSE = {"first_line": "the answer's first non-empty line (a leading answer prefix removed)", "guess": "the text after 'Guess:'",
                 "answer_tag": "the last <answer> element's content", "full": "the whole answer"}

EXTRACT_DOC = {
    "first_line": "the first non-empty line with one leading answer prefix ("
    + ", ".join(repr(p) for p in ANSWER_PREFIXES) + ") removed",
    "guess": "the rest of the line after the first 'Guess:'",
    "answer_tag": "the content of the last <answer>...</answer> element",
    "full": "the whole text",
}


def _trimmed(s: str, start: int, end: int, rule: str) -> ParseOutcome:
    first = _NON_SPACE.search(s, start, end)
    if first is None:
        return failure(EMPTY if rule in ("full", "first_line") else f"{rule}_empty")
    start = first.start()
    value = s[start:end].rstrip()
    return ParseOutcome(value, True, rule, (start, start + len(value)))


def extract_answer(text: object, mode: str) -> ParseOutcome:
    """Extract the answer string by ``mode`` (one of ``EXTRACT_MODES``); never raises on text."""
    if mode not in EXTRACT_MODES:
        raise ValueError(f"unknown extract mode {mode!r}. Allowed values: {', '.join(EXTRACT_MODES)}")
    s = coerce_text(text)
    if s is None:
        return failure(NOT_TEXT)
    if mode == "full":
        return _trimmed(s, 0, len(s), "full")
    if mode == "first_line":
        first = re.search(r"\S", s)
        if first is None:
            return failure(EMPTY)
        line_start = s.rfind("\n", 0, first.start()) + 1
        line_end = _LINE_RX.match(s, first.start()).end()
        m = _PREFIX_RX.match(s, line_start, line_end)
        return _trimmed(s, m.end() if m else line_start, line_end, "first_line")
    if mode == "guess":
        m = _GUESS_RX.search(s)
        if m is None:
            return failure("no_guess")
        return _trimmed(s, m.end(), _LINE_RX.match(s, m.end()).end(), "guess")
    close = _ascii_rfind(s, "</answer>")
    if close < 0:
        return failure("no_answer_tag")
    open_ = _ascii_rfind(s, "<answer>", 0, close)
    if open_ < 0:
        return failure("no_answer_tag")
    return _trimmed(s, open_ + len("<answer>"), close, "answer_tag")


_TAG_RX: dict[str, re.Pattern[str]] = {n: re.compile(re.escape(n), re.IGNORECASE) for n in ("<answer>", "</answer>")}


def _ascii_rfind(s: str, needle: str, start: int = 0, end: int | None = None) -> int:
    """Case-insensitive rfind of a tag without changing offsets (linear)."""
    last = -1
    for m in _TAG_RX[needle].finditer(s, start, len(s) if end is None else end):
        last = m.start()
    return last


def gold_strings(item: Mapping[str, Any], use_aliases: bool) -> list[str]:
    """``answer`` plus, when ``use_aliases``, every alias (strings only, de-duplicated)."""
    out: list[str] = []
    ans = item.get("answer")
    if isinstance(ans, str):
        out.append(ans)
    aliases = item.get("aliases")
    if use_aliases and isinstance(aliases, Sequence) and not isinstance(aliases, str):
        out.extend(a for a in aliases if isinstance(a, str) and a not in out)
    return out


Extract = Literal["first_line", "guess", "answer_tag", "full"]
Golds = Literal["answer", "answer+aliases"]
EXTRACT_PARAM_DOC = "which part of the generation is the answer (first_line, guess, answer_tag or full)"
GOLDS_PARAM_DOC = "the gold set: the answer, or the answer and its aliases"


class _StringMatch(Evaluator):
    _lenient = False


    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        out = extract_answer(text, self.params["extract"])
        if out.ok and not normalize_answer(out.value):
            return failure("empty_after_normalisation", out.value)
        return out

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        golds = gold_strings(item, self.params["golds"] == "answer+aliases")
        if not any(normalize_answer(g) for g in golds):
            return None
        if not isinstance(pred, str):
            return False
        match = lenient_norm_match if self._lenient else exact_norm_match
        return any(match(pred, g) for g in golds)

    def _golds_doc(self) -> str:
        return "the gold answer and its aliases" if self.params["golds"] == "answer+aliases" else "the gold answer"

    # the words of PROSE before "with ...": the match kind; the answer extracted and the golds follow
    _MATCH_PROSE: ClassVar[str] = "normalised exact match"

    def prose(self) -> str:
        golds = "the gold answer or any of its aliases" if self.params["golds"] == "answer+aliases" else "the gold answer"
        return f"{self._MATCH_PROSE} of {EXTRACT_PROSE[self.params['extract']]} with {golds}"


class ExactMatchEvaluator(_StringMatch):
    """``exact_match``: 001 appendix M table 22 strict scorer (normalised equality)."""

    PROSE = "exact match with the gold answer"  # the rule in a few words (report/methods.py)

    name = "exact_match"
    source = "study 001 (arXiv 2605.27752), section 3 and appendix M (table 22, 'exact match only')"

    class Params(Obj):
        DOC: ClassVar[str] = "Exact match after study 001 appendix M normalisation."
        extract: Extract = Field("first_line", description=EXTRACT_PARAM_DOC)
        golds: Golds = Field("answer+aliases", description=GOLDS_PARAM_DOC)

    def describe(self) -> str:
        return (
            f"Normalised exact match (study 001, App. M strict scorer): the answer is {EXTRACT_DOC[self.params['extract']]}; "
            "answer and golds are lower-cased, every run of non-alphanumeric characters becomes one space and the "
            f"result is trimmed; correct iff it equals one of {self._golds_doc()} (an empty answer is never correct)."
        )


class LenientMatchEvaluator(_StringMatch):
    """``lenient_match``: 001 section 3 / appendix M main scorer."""

    PROSE = "lenient (normalised) match with the gold answer"  # the rule in a few words (report/methods.py)
    _MATCH_PROSE = "lenient (normalised, containment) match"

    name = "lenient_match"
    source = "study 001 (arXiv 2605.27752), section 3 and appendix M"
    _lenient = True

    class Params(Obj):
        DOC: ClassVar[str] = "Lenient (containment) match after study 001 appendix M normalisation."
        extract: Extract = Field("first_line", description=EXTRACT_PARAM_DOC)
        golds: Golds = Field("answer+aliases", description=GOLDS_PARAM_DOC)

    def describe(self) -> str:
        return (
            f"Lenient normalised match (study 001, section 3 / App. M): the answer is {EXTRACT_DOC[self.params['extract']]}; "
            "answer and golds are lower-cased, every run of non-alphanumeric characters becomes one space and the "
            f"result is trimmed; correct iff it equals, contains or is contained in one of {self._golds_doc()} "
            "(substring containment; empty strings never match)."
        )


class AliasMatchEvaluator(_StringMatch):
    """``alias_match``: 003 appendix D.2 TriviaQA alias-aware exact match."""

    PROSE = "match with any gold alias"  # the rule in a few words (report/methods.py)

    name = "alias_match"
    source = "study 003 (arXiv 2606.30814), appendix D.2 (TriviaQA) and table 3 template III"

    class Params(Obj):
        DOC: ClassVar[str] = "Match against any of the item's aliases (study 003 alias-aware exact match)."
        extract: Extract = Field("answer_tag", description=EXTRACT_PARAM_DOC)
        golds: Golds = Field("answer+aliases", description=GOLDS_PARAM_DOC)

    def describe(self) -> str:
        return (
            f"Alias-aware exact match (study 003, App. D.2): the answer is {EXTRACT_DOC[self.params['extract']]}; "
            f"correct iff it matches any of {self._golds_doc()} after study 001's normalisation (lower-case, "
            "non-alphanumeric runs to one space, trimmed), which 003 does not specify."
        )
