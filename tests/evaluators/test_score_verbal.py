"""Verbal-confidence parsers: study 000 A.3, study 001 App. I, study 002 table 5 / A.2, study 003 D.3."""

from __future__ import annotations

import re

import pytest

from auditlang.evaluators import LINGUISTIC_MAP, LINGUISTIC_OPTIONS, VERBAL_PARSERS

D, P, I, S = (VERBAL_PARSERS[n]() for n in ("decimal_01", "percent_0_100", "integer_0_100", "scale_0_10"))


def val(parser, text):
    out = parser.parse(text)
    return out.value if out.ok else out.rule


# ----------------------------------------------------------------------------- study 000 A.3


@pytest.mark.parametrize(
    ("text", "decimal_01", "percent_0_100"),
    [
        ("75%", 0.75, 0.75),  # explicit percentage
        ("75 percent", 0.75, 0.75),
        ("0.75", 0.75, "scale_mismatch"),  # decimal form; under percent phrasing a decimal <= 1 is flagged (issue 34.4)
        (".75", 0.75, "scale_mismatch"),
        ("75 out of 100", 0.75, 0.75),  # phrase form
        ("85", "scale_mismatch", 0.85),  # bare 85 is a percentage without its sign for decimal_01
        ("0.8", 0.8, "scale_mismatch"),  # B.2 example for decimal_01: no 0.8 % under percent
        ("1", 1.0, 0.01),
        ("0", 0.0, 0.0),
        ("100%", 1.0, 1.0),
        ("Confidence: 0.9.", 0.9, "scale_mismatch"),
        ("150", "not_well_formed", "not_well_formed"),  # on no scale
        ("7.5", "scale_mismatch", 0.075),  # a percentage (above 1) written with a point
    ],
)
def test_forms_and_phrasing_scale(text: str, decimal_01, percent_0_100) -> None:
    assert val(D, text) == pytest.approx(decimal_01) if isinstance(decimal_01, float) else val(D, text) == decimal_01
    assert val(P, text) == pytest.approx(percent_0_100) if isinstance(percent_0_100, float) else val(P, text) == percent_0_100


def test_precedence_percent_then_decimal_then_phrase() -> None:
    assert val(D, "0.6, i.e. 80%") == pytest.approx(0.8)  # percentage beats an earlier decimal
    assert val(D, "60 out of 100, so 0.7") == pytest.approx(0.7)  # decimal beats an earlier phrase
    assert val(D, "50 out of 100, or rather 0.5, no: 60%") == pytest.approx(0.6)


def test_first_well_formed_value() -> None:
    assert val(D, "0.85\n0.9") == pytest.approx(0.85)
    assert val(D, "Out of 5 options, 0.7") == pytest.approx(0.7)  # 5 is not in [0, 1]
    assert val(D, "150% sure, well 90%") == pytest.approx(0.9)  # 150% is outside [0%, 100%]


@pytest.mark.parametrize("text", ["0.7-0.8", "70-80%", "70% - 80%", "0.7 or 0.8", "between 0.6 and 0.8", "0.6 to 0.8", "60–70%", "0.7/0.8"])
def test_multi_valued_does_not_parse(text: str) -> None:
    for parser in (D, P, I, S):
        assert val(parser, text) == "multi_valued"


def test_range_elsewhere_does_not_block_a_single_value() -> None:
    assert val(D, "On a scale of 0 to 1: 0.8") == pytest.approx(0.8)


@pytest.mark.parametrize("text", ["0.", "Confidence: 1.", "75 out of", "8/"])
def test_partial_does_not_parse(text: str) -> None:
    assert val(D, text) == "partial"


@pytest.mark.parametrize(
    ("text", "rule"),
    [("", "empty"), ("   \n", "empty"), ("I am fairly confident", "no_number"), ("-0.5", "not_well_formed"),
     ("1e-3", "not_well_formed"), ("GPT4", "no_number"), ("0.8.5", "no_number"), ("9" * 40, "not_well_formed"),
     ("８０%", "no_number")],
)
def test_failures(text: str, rule: str) -> None:
    out = D.parse(text)
    assert out.value is None and not out.ok and out.rule == rule


def test_values_are_in_unit_interval_and_span_points_at_the_value() -> None:
    out = D.parse("My confidence: 85%.")
    assert out.value == pytest.approx(0.85) and out.rule == "percent" and out.span == (15, 18)
    out = P.parse("Roughly 75 out of 100")
    assert "Roughly 75 out of 100"[out.span[0] : out.span[1]] == "75 out of 100"


def test_scale_mismatch_is_flagged_not_guessed() -> None:
    """issue 34 item 4: a bare number that fits another scale better is a non-parse
    ``scale_mismatch``; an explicit percentage or another well-formed value still wins."""
    assert val(P, "0.01") == "scale_mismatch" and val(I, "0.5") == "scale_mismatch"
    assert val(D, "85") == "scale_mismatch" and val(D, "100") == "scale_mismatch"
    assert val(P, "0.01, that is 1%") == pytest.approx(0.01)  # the explicit percentage
    assert val(D, "85, i.e. 0.85") == pytest.approx(0.85)  # the next well-formed bare number
    assert val(P, "0") == 0.0 and val(P, "1") == pytest.approx(0.01)  # integers: on the percent scale
    for parser in (D, P, I, S):
        assert "scale_mismatch" in parser.describe()


# ----------------------------------------------------------------------------- other scales


def test_integer_0_100() -> None:
    assert val(I, "85") == pytest.approx(0.85)
    assert val(I, "85.5") == "not_well_formed"  # not an integer
    assert val(I, "85.5%") == pytest.approx(0.855)  # explicit percentages are self-scaled
    assert val(I, "101") == "not_well_formed"


def test_scale_0_10() -> None:
    assert val(S, "8") == pytest.approx(0.8)
    assert val(S, "8/10") == pytest.approx(0.8)
    assert val(S, "8 out of 10") == pytest.approx(0.8)
    assert val(S, "7.5") == pytest.approx(0.75)
    assert val(S, "11") == "scale_mismatch"  # a percentage without its sign
    assert val(S, "101") == "not_well_formed"
    assert val(S, "7/8") == "multi_valued"  # X/N only for N = 10 or 100; otherwise "/" joins two values
    assert val(D, "8 out of 10") == "not_well_formed"  # 000's phrase form is "X out of 100" only


def test_linguistic_map_is_the_papers(paper_text) -> None:
    text = paper_text("002")
    m = re.search(r"The specific mapping are \[(.*?)\] to \[(.*?)\]", text)
    names = [re.sub(r"^[“‘'\"]|[”’'\"]$", "", x.strip()) for x in m.group(1).split(",")]
    values = [float(x) for x in m.group(2).split(",")]
    assert list(LINGUISTIC_MAP) == names and list(LINGUISTIC_MAP.values()) == values
    mc = re.search(r"one of the following options</b> : \[(.*?)\]", text).group(1)
    options = dict(re.findall(r"([a-m]): '([^']+)'", mc))
    assert options == LINGUISTIC_OPTIONS


@pytest.mark.parametrize(
    ("text", "value"),
    [("Likely", 0.7), ("'Highly Likely'", 0.9), ("highly unlikely.", 0.05), ("Probably Not", 0.25),
     ("Probably", 0.7), ("Better than Even", 0.6), ("Chances are  slight", 0.1), ("Almost Certain. Almost certain!", 0.95)],
)
def test_linguistic(text: str, value: float) -> None:
    assert val(VERBAL_PARSERS["linguistic"](), text) == value


@pytest.mark.parametrize(("text", "rule"), [("Likely or Unlikely", "multi_valued"), ("Unlikelyhood", "no_expression"), ("80%", "no_expression")])
def test_linguistic_failures(text: str, rule: str) -> None:
    assert val(VERBAL_PARSERS["linguistic"](), text) == rule


@pytest.mark.parametrize(
    ("text", "value"),
    [("i", 0.7), ("i: 'Likely'", 0.7), ("(c)", 0.1), ("m)", 0.95), ("Option k", 0.8), ("**a**", 0.02), ("Very Good Chance", 0.8), ("J.", 0.7)],
)
def test_linguistic_mc(text: str, value: float) -> None:
    assert val(VERBAL_PARSERS["linguistic_mc"](), text) == value


@pytest.mark.parametrize(("text", "rule"), [("i: 'Highly Likely'", "conflict"), ("a good chance", "no_option"), ("n", "no_option"), ("Likely, Unlikely", "multi_valued")])
def test_linguistic_mc_failures(text: str, rule: str) -> None:
    assert val(VERBAL_PARSERS["linguistic_mc"](), text) == rule


@pytest.mark.parametrize(
    ("text", "value"),
    [("Confidence: \\boxed{85}", 0.85), ("\\boxed{Your confidence score from 0-100.}\nConfidence: \\boxed{90\\%}", 0.9),
     ("\\boxed{ 100 }", 1.0), ("\\boxed{0}", 0.0), ("\\boxed{0000}", 0.0), ("\\boxed{72.5}", 0.725)],
)
def test_boxed(text: str, value: float) -> None:
    assert val(VERBAL_PARSERS["boxed_0_100"](), text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "rule"),
    [("85", "no_boxed"), ("\\boxed{150}", "out_of_range"), ("\\boxed{1000}", "out_of_range"), ("\\boxed{}", "bad_content"), ("\\boxed{85} then \\boxed{high}", "bad_content")],
)
def test_boxed_failures(text: str, rule: str) -> None:
    assert val(VERBAL_PARSERS["boxed_0_100"](), text) == rule


def test_later_percentage_skips_ill_formed_ones() -> None:
    assert val(D, "0.8 then 70-80% then 150% then 60%") == pytest.approx(0.6)
    assert val(D, "0.8, not 70% - 90%") == pytest.approx(0.8)


def test_too_many_numbers_is_a_counted_failure() -> None:
    from auditlang.evaluators.verbal import MAX_NUMBERS

    assert val(D, "85 " * (MAX_NUMBERS + 1)) == "too_many_numbers"
    assert val(D, "1 " + "150% " * (MAX_NUMBERS + 1)) == "too_many_numbers"
    assert val(D, "85 " * (MAX_NUMBERS - 5) + "0.5") == pytest.approx(0.5)
