"""First-character evaluator: study 000 appendix A.3 extract_pred_letter."""

from __future__ import annotations

import pytest

from auditlang.evaluators import EVALUATORS, choice_letters, extract_pred_letter, gold_letter

ABCD = choice_letters(4)


@pytest.mark.parametrize(
    ("text", "value", "rule"),
    [
        ("B", "B", "first_char"),
        ("B. Jupiter", "B", "first_char"),
        ("  \n\n  C", "C", "first_char"),  # first non-empty line
        ("(D) Earth", "D", "first_char"),  # leading punctuation stripped
        ("**B**", "B", "first_char"),  # markdown emphasis
        ("- A", "A", "first_char"),  # markdown bullet
        ("* C\n* D", "C", "first_char"),
        ("> B", "B", "first_char"),  # quote marker
        ("• D", "D", "first_char"),
        ("\tA\r\n", "A", "first_char"),
        # first char not a valid letter -> reverse line scan for a standalone letter
        ("The answer is below\nB", "B", "standalone_line"),
        ("Thinking...\n(C)\nmore text\n**D.**\nend", "D", "standalone_line"),  # last standalone line wins
        ("E is not an option\nA", "A", "standalone_line"),
        ("Looking at it\nA\n", "A", "standalone_line"),
    ],
)
def test_rules(text: str, value: str, rule: str) -> None:
    out = extract_pred_letter(text, ABCD)
    assert (out.value, out.ok, out.rule) == (value, True, rule)
    assert text[out.span[0] : out.span[1]] == value


@pytest.mark.parametrize("opening", ["The", "Looking", "Let", "First"])
def test_cot_openings_fall_through_to_raw_first_char(opening: str) -> None:
    # study 000 C.1: CoT output opens with a reasoning word; the letter is embedded in prose
    text = f"{opening} step by step: the planet with the most mass is Jupiter, so the answer is B."
    out = extract_pred_letter(text, ABCD)
    assert out.rule == "raw_first_char" and out.value == opening[0] and not out.ok


def test_letter_valid_only_within_choice_count(mc10: dict) -> None:
    assert extract_pred_letter("E", ABCD).ok is False
    out = extract_pred_letter("J", 10)  # A-J for 10-choice MMLU-Pro
    assert out.ok and out.value == "J"
    ev = EVALUATORS["first_char"]()
    assert ev.correct(ev.label("J) option 9", mc10).value, mc10) is True


def test_case_sensitivity() -> None:
    assert extract_pred_letter("b", ABCD).ok is False
    out = extract_pred_letter("b", ABCD, case_sensitive=False)
    assert out.ok and out.value == "B"


def test_a_line_of_only_punctuation_does_not_hide_the_scan() -> None:
    out = extract_pred_letter("**\nB", ABCD)
    assert out.rule == "standalone_line" and out.value == "B"


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t"])
def test_empty(text: str) -> None:
    out = extract_pred_letter(text, ABCD)
    assert out == out.__class__(None, False, "empty", None)


def test_non_text_and_bytes() -> None:
    assert extract_pred_letter(None, ABCD).rule == "not_text"
    assert extract_pred_letter(b"\xff\xfeB", ABCD).rule == "raw_first_char"  # U+FFFD first
    assert extract_pred_letter(b"C", ABCD).value == "C"


def test_classification_items_use_letters(sst2: dict) -> None:
    # study 000 C.3 / table 5: SST-2, MNLI, AG News are scored on a valid-letter set
    ev = EVALUATORS["first_char"]()
    assert ev.label("B", sst2).value == "B" and ev.correct("B", sst2) is True
    assert ev.label("C", sst2).ok is False  # only A-B for two labels
    assert ev.correct("A", sst2) is False


def test_correct_and_gold(mc4: dict) -> None:
    ev = EVALUATORS["first_char"]()
    assert ev.correct("B", mc4) is True
    assert ev.correct("A", mc4) is False
    assert ev.correct(None, mc4) is False
    assert ev.correct("T", mc4) is False
    assert gold_letter(mc4) == "B"
    no_index = dict(mc4, answer_index=None)
    assert gold_letter(no_index) == "B"  # from the answer text
    assert ev.correct("B", dict(mc4, answer_index=None, answer="Pluto")) is None


def test_free_form_item_is_a_clear_error(trivia: dict) -> None:
    with pytest.raises(ValueError, match="choices.*Hint: use exact_match"):
        EVALUATORS["first_char"]().label("A", trivia)


def test_choice_letters_bounds() -> None:
    assert choice_letters(1) == ("A",)
    assert choice_letters(26)[-1] == "Z"
    for bad in (0, 27, True, "4"):
        with pytest.raises(ValueError, match="between 1 and 26"):
            choice_letters(bad)  # type: ignore[arg-type]
