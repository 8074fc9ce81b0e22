"""Registries, parameter validation and the disclosure surface (params, describe)."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from auditlang.resolve import schema as S
from auditlang.evaluators import EVALUATORS, VERBAL_PARSERS, Evaluator, ParseOutcome, VerbalParser, make_evaluator, make_verbal_parser



def build(name: str) -> Evaluator:
    return make_evaluator(name, judge="gpt-4o") if name == "llm_judge" else make_evaluator(name)


def test_names() -> None:
    """The language accepts exactly the registered evaluators, and a verbal protocol's ``scale=``
    exactly the registered parsers (derived from the registry, no hand list)."""
    assert set(S.CONSTRUCTORS["evaluator"]) == set(EVALUATORS)
    assert set(typing.get_args(S.VerbalScale)) == set(VERBAL_PARSERS)


@pytest.mark.parametrize("name", sorted(EVALUATORS))
def test_evaluator_disclosure(name: str) -> None:
    ev = build(name)
    assert isinstance(ev, Evaluator) and ev.name == name
    json.dumps(ev.params)  # serialisable for the plan / report
    text = ev.describe()
    assert text and text == ev.describe()
    assert type(ev).source.strip()  # every evaluator names where its rule comes from (docs table's source)


@pytest.mark.parametrize("name", sorted(VERBAL_PARSERS))
def test_parser_disclosure(name: str) -> None:
    p = make_verbal_parser(name)
    assert isinstance(p, VerbalParser) and p.name == name and p.params == {}
    assert "study" in p.describe() or "study" in type(p).source


def test_parse_outcome_is_frozen() -> None:
    out = ParseOutcome(0.5, True, "bare", (0, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.value = 1  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(ParseOutcome)] == ["value", "ok", "rule", "span"]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: make_evaluator("first_chr"), r"Unknown evaluator 'first_chr'\. Did you mean: first_char\? Available: "),
        (lambda: make_verbal_parser("percent"), r"Unknown verbal parser 'percent'\..*Available: .*percent_0_100"),
        (lambda: make_evaluator("regex_reparse", tial=10), r"unknown parameter 'tial'\. Did you mean: tail\?"),
        (lambda: make_evaluator("regex_reparse", occurrence="middle"), r"occurrence='middle': Input should be 'last' or 'first'"),
        (lambda: make_evaluator("regex_reparse", tail=0), r"tail=0: Input should be greater than or equal to 1"),
        (lambda: make_evaluator("regex_reparse", tail="150"), r"should be a valid integer"),
        (lambda: make_evaluator("first_char", case_sensitive="yes"), r"should be a valid boolean"),
        (lambda: make_evaluator("lenient_match", extract="last"), r"'first_line', 'guess', 'answer_tag' or 'full'"),
        (lambda: make_evaluator("llm_judge"), r"'judge' is required"),
        (lambda: make_evaluator("llm_judge", judge=""), r"at least 1 character"),
        (lambda: make_verbal_parser("decimal_01", strict=False), r"unknown parameter 'strict'\. .*Allowed parameters: \(none\)"),
    ],
)
def test_user_errors(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_params_include_defaults() -> None:
    assert make_evaluator("lenient_match", extract="guess").params == {"extract": "guess", "golds": "answer+aliases"}
    assert make_evaluator("alias_match").params["extract"] == "answer_tag"
    assert make_evaluator("llm_judge", judge="j").params == {"judge": "j", "extract": "full", "max_tokens": 8}
