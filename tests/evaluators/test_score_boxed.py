"""``boxed_letter`` output (study 003 App. C Table 3 template I, App. D.2: the letter in \\boxed{};
issue 10 item 4): nested braces, the last box, wrappers, failures."""

from __future__ import annotations

import pytest

from auditlang.evaluators import make_evaluator, make_verbal_parser
from auditlang.evaluators.boxed import last_boxed

ITEM = {"question": "q", "choices": ["w", "x", "y", "z"], "answer": "y", "answer_index": 2, "aliases": None}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{C}", "C"),
        ("The answer is \\boxed{\\text{C}}", "C"),  # nested braces (issue 10.4)
        ("\\boxed{A}\\boxed{\\text{C}}", "C"),  # the LAST box, even when it has nested braces
        ("\\boxed{\\text{A}} then \\boxed{B}", "B"),
        ("\\boxed{ (D). }", "D"),
        ("\\boxed{\\textbf{B}}", "B"),
        ("\\boxed{\\text{\\textbf{ A }}}", "A"),
        ("\\boxed {C}", "C"),
        ("\\boxed{\\mathrm{D}}", "D"),
        ("Final: \\boxed{B} and a stray { brace", "B"),  # an unclosed brace after the box
        ("an unclosed { before \\boxed{A}", "A"),
        ("\\boxed{\\boxed{B}}", "B"),
    ],
)
def test_boxed_letter_reads(text, value):
    out = make_evaluator("boxed_letter").label(text, ITEM)
    assert (out.value, out.ok) == (value, True)
    assert text[out.span[0] : out.span[1]] == value


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("C", "no_boxed"),
        ("\\boxed{C", "no_boxed"),
        ("\\boxed{}", "bad_content"),
        ("\\boxed{AB}", "bad_content"),
        ("\\boxed{C}\\boxed{\\text{Paris}}", "bad_content"),  # the last box counts, no fallback
        ("\\boxed{E}", "not_a_label"),
        ("\\boxed{c}", "not_a_label"),  # case-sensitive by default
    ],
)
def test_boxed_letter_failures(text, rule):
    out = make_evaluator("boxed_letter").label(text, ITEM)
    assert not out.ok and out.rule == rule


def test_boxed_letter_correctness_and_case_option():
    ev = make_evaluator("boxed_letter")
    assert ev.correct(ev.label("\\boxed{A}\\boxed{\\text{C}}", ITEM).value, ITEM) is True
    assert ev.correct(ev.label("\\boxed{\\text{C}}\\boxed{A}", ITEM).value, ITEM) is False
    lower = make_evaluator("boxed_letter", case_sensitive=False).label("\\boxed{\\text{c}}", ITEM)
    assert (lower.value, lower.ok) == ("C", True)


def test_boxed_0_100_uses_the_same_last_box():
    p = make_verbal_parser("boxed_0_100")
    assert p.parse("\\boxed{Your confidence score from 0-100.}\n\\boxed{85}").value == pytest.approx(0.85)
    assert p.parse("\\boxed{85} then \\boxed{\\text{high}}").rule == "bad_content"


def test_last_boxed_matches_braces_on_deep_input():
    # the innermost box closes; every other box stays open
    s = "\\boxed{" * 100_000 + "}" + "{" * 100_000
    box = last_boxed(s)
    assert box is not None and box.text == "" and box.start == len("\\boxed{") * 100_000
