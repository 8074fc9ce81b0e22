"""Regex re-parse: study 000 appendix C.1 repair path 1."""

from __future__ import annotations

import pytest

from auditlang.evaluators import EVALUATORS, choice_letters, regex_reparse

ABCD = choice_letters(4)


@pytest.mark.parametrize(
    ("text", "value", "rule"),
    [
        ("Reasoning...\nFinal answer: C", "C", "marker:final_answer"),
        ("Reasoning... the correct answer is D.", "D", "marker:correct_answer_is"),
        ("Reasoning...\nAnswer: A", "A", "marker:answer_colon"),
        ("**Final Answer:** B", "B", "marker:final_answer"),
        ("Final answer: (C)", "C", "marker:final_answer"),
        ("Final answer: option D", "D", "marker:final_answer"),
        ("FINAL ANSWER: a mistake? no: Answer: B", "B", "marker:answer_colon"),  # letter must be upper-case
        ("So the final answer is C.", "C", "marker:final_answer_is"),
        ("Thus the answer is A because", "A", "marker:answer_is"),
        ("The best option is B", "B", "marker:correct_option_is"),
    ],
)
def test_markers(text: str, value: str, rule: str) -> None:
    out = regex_reparse(text, ABCD)
    assert (out.value, out.ok, out.rule) == (value, True, rule)
    assert text[out.span[0] : out.span[1]] == value


def test_marker_order_follows_the_paper() -> None:
    # "Final answer: X" is searched before "the correct answer is X" before "Answer: X"
    text = "Answer: A. Hmm, the correct answer is B. Final answer: C"
    assert regex_reparse(text, ABCD).value == "C"
    text = "Answer: A. On reflection the correct answer is B."
    assert regex_reparse(text, ABCD).value == "B"


def test_occurrence_last_vs_first() -> None:
    text = "Answer: A\n... wait.\nAnswer: D"
    assert regex_reparse(text, ABCD).value == "D"
    assert regex_reparse(text, ABCD, occurrence="first").value == "A"


def test_marker_with_invalid_letter_is_skipped() -> None:
    # E is not a valid label on a 4-choice item; the valid earlier match is used
    assert regex_reparse("Answer: B ... Answer: E", ABCD).value == "B"
    assert regex_reparse("The answer is Alpha", ABCD).rule == "fallback:raw_first_char"


def test_tail_scan_window() -> None:
    body = "Let me think about each option in detail. " * 10
    out = regex_reparse(body + "I pick B", ABCD)
    assert out.rule == "tail_scan" and out.value == "B"
    # a standalone letter more than 150 characters from the end is not seen by the tail scan
    far = "I pick B. " + "x" * 200
    assert regex_reparse(far, ABCD).rule == "fallback:raw_first_char"
    assert regex_reparse(far, ABCD, window=300).rule == "tail_scan"


def test_tail_scan_last_letter_wins_and_repetition_pattern() -> None:
    # study 000 C.1: Qwen's pathological "B. B. B. B ..." repetition; the regex reads a repeated letter
    assert regex_reparse("C or D? " + "B. " * 100, ABCD).value == "B"
    assert regex_reparse("it is A, not C", ABCD).value == "C"


def test_fallback_to_first_char_rule() -> None:
    out = regex_reparse("Thinking hard", ABCD)
    assert out.rule == "fallback:raw_first_char" and out.value == "T" and not out.ok
    assert regex_reparse("", ABCD).rule == "fallback:empty"


def test_evaluator(mc4: dict) -> None:
    ev = EVALUATORS["regex_reparse"](tail=100, occurrence="first")
    assert ev.params == {"tail": 100, "occurrence": "first", "case_sensitive": True}
    out = ev.label("Step by step.\nFinal answer: B", mc4)
    assert ev.correct(out.value, mc4) is True
    assert "150" not in ev.describe() and "100" in ev.describe()



@pytest.mark.parametrize(
    ("text", "rule"),
    [("Final answer: B", "final_answer"), ("the correct answer is B", "correct_answer_is"), ("answer: B", "answer_colon"),
     ("final answer is B", "final_answer_is"), ("answer is B", "answer_is"), ("correct option is B", "correct_option_is"),
     ("right choice is B", "correct_option_is"), ("best option is B", "correct_option_is")],
)
def test_every_marker_form_in_any_case(text: str, rule: str) -> None:
    for variant in (text, text.upper().replace(" B", " B"), text.title().replace(" b", " B")):
        out = regex_reparse("... " + variant, ABCD)
        assert out.rule == f"marker:{rule}" and out.value == "B", variant


@pytest.mark.parametrize(
    ("text", "strict", "lax"),
    [
        ("Answer: c", ("A", "fallback:first_char"), ("C", "marker:answer_colon")),  # "A" of "Answer"
        ("Reasoning.\nFinal answer: **b**", (None, "fallback:raw_first_char"), ("B", "marker:final_answer")),
        ("Reasoning.\nAnswer: C", ("C", "marker:answer_colon"), ("C", "marker:answer_colon")),
        ("so the answer is a tree", (None, "fallback:raw_first_char"), ("A", "marker:answer_is")),  # the cost
        ("Reasoning, then the letter\nd", (None, "fallback:raw_first_char"), ("D", "fallback:standalone_line")),
    ],
)
def test_letter_case_option(text: str, strict: tuple, lax: tuple) -> None:
    # issue 10.5: study 000 A.3's valid letters are upper case ("A-D ... A-J"), the paper does not
    # say what a lower-case letter after a marker means; case_sensitive makes the choice explicit
    for case_sensitive, (value, rule) in ((True, strict), (False, lax)):
        out = regex_reparse(text, ABCD, case_sensitive=case_sensitive)
        assert (out.value if out.ok else None, out.rule) == (value, rule), case_sensitive
        if out.ok:
            assert text[out.span[0] : out.span[1]].upper() == value


def test_tail_scan_stays_upper_case() -> None:
    body = "x" * 20 + " pick a or b"
    assert regex_reparse(body, ABCD, case_sensitive=False).rule == "fallback:raw_first_char"


def test_case_option_is_disclosed() -> None:
    assert "upper case only" in EVALUATORS["regex_reparse"]().describe()
    assert "either case" in EVALUATORS["regex_reparse"](case_sensitive=False).describe()
