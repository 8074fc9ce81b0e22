"""Normalised string match (study 001 section 3 / appendix M) and alias match (study 003 D.2)."""

from __future__ import annotations

import json

import pytest

from auditlang.evaluators import EVALUATORS, extract_answer, normalize_answer
from auditlang.evaluators.string_match import exact_norm_match, lenient_norm_match


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("Paris", "paris"),  # lower-case
        ("Eiffel-Tower!", "eiffel tower"),  # non-alphanumeric -> space, trimmed
        ("  New   York\tCity ", "new york city"),  # whitespace collapsed
        ("The Beatles", "the beatles"),  # articles are kept (the paper does not drop them)
        ("U.S.A.", "u s a"),
        ("snake_case", "snake case"),  # underscore is not alphanumeric
        ("Café", "café"),  # Unicode letters are alphanumeric
        ("?!", ""),
        ("\ud800x\ufffd", "x"),
    ],
)
def test_normalisation(raw: str, norm: str) -> None:
    assert normalize_answer(raw) == norm


def test_lenient_vs_exact() -> None:
    assert exact_norm_match("paris!", "Paris") and lenient_norm_match("paris!", "Paris")
    # two-way containment: only the lenient (main) rule credits it
    assert lenient_norm_match("Paris", "Paris, France") and not exact_norm_match("Paris", "Paris, France")
    assert lenient_norm_match("It is Paris, France", "Paris")
    assert lenient_norm_match("cat", "concatenate")  # plain substring containment, as stated
    assert not lenient_norm_match("Lyon", "Paris")
    # empty strings never match (they would be contained in everything)
    assert not lenient_norm_match("...", "Paris") and not lenient_norm_match("Paris", "?")
    assert not exact_norm_match("", "")


@pytest.mark.parametrize(
    ("mode", "text", "value"),
    [
        ("first_line", "Paris\nBecause ...", "Paris"),
        ("first_line", "\n\n  Answer: Paris  \nmore", "Paris"),
        ("first_line", "The answer is Lyon.", "Lyon."),
        ("first_line", "The answer isn't known", "The answer isn't known"),
        ("first_line", "A: Rome", "Rome"),
        ("guess", "Guess: Mount Everest\nProbability: 0.9", "Mount Everest"),
        ("guess", "guess :  K2", "K2"),
        ("answer_tag", "<answer>final answer here</answer> ... <ANSWER> Paris </ANSWER>", "Paris"),
        ("full", "  Paris\nFrance ", "Paris\nFrance"),
    ],
)
def test_extraction(mode: str, text: str, value: str) -> None:
    out = extract_answer(text, mode)
    assert out.ok and out.value == value
    assert text[out.span[0] : out.span[1]] == value


@pytest.mark.parametrize(
    ("mode", "text", "rule"),
    [
        ("guess", "Paris", "no_guess"),
        ("guess", "Guess:   \nx", "guess_empty"),
        ("answer_tag", "<answer>Paris", "no_answer_tag"),
        ("answer_tag", "Paris</answer>", "no_answer_tag"),
        ("first_line", " \n ", "empty"),
        ("full", "", "empty"),
    ],
)
def test_extraction_failures(mode: str, text: str, rule: str) -> None:
    out = extract_answer(text, mode)
    assert not out.ok and out.rule == rule


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="Allowed values: first_line, guess"):
        extract_answer("x", "last_line")


def test_evaluators_against_aliases(trivia: dict) -> None:
    lenient, exact, alias = EVALUATORS["lenient_match"](), EVALUATORS["exact_match"](), EVALUATORS["alias_match"]()
    assert lenient.correct("antelopes", trivia) and exact.correct("antelopes", trivia)  # an alias
    assert lenient.correct("It's an antelope species", trivia) and not exact.correct("It's an antelope species", trivia)
    only_answer = EVALUATORS["exact_match"](golds="answer")
    assert not only_answer.correct("Antilopina", trivia) and exact.correct("Antilopina", trivia)
    out = alias.label("<answer>Hybrid antelope</answer>", trivia)
    assert out.ok and alias.correct(out.value, trivia)
    assert alias.label("Hybrid antelope", trivia).rule == "no_answer_tag"
    assert lenient.correct(None, trivia) is False
    assert lenient.correct("x", {"question": "q", "answer": None, "aliases": None}) is None
    assert lenient.label("...", trivia).rule == "empty_after_normalisation"


def test_mc_source_scored_as_text(mc4: dict) -> None:
    # 001 App. M: SciQ / MMLU are scored as short text against the correct option string
    ev = EVALUATORS["lenient_match"]()
    assert ev.correct(ev.label("Jupiter.", mc4).value, mc4) is True
    assert ev.correct(ev.label("B", mc4).value, mc4) is False


def test_truthfulqa_reference_set(shared_data) -> None:
    rows = [json.loads(line) for line in (shared_data / "truthfulqa.jsonl").open(encoding="utf-8")][:50]
    ev = EVALUATORS["lenient_match"]()
    for r in rows:
        for a in r["aliases"]:
            if normalize_answer(a):
                assert ev.correct(a, r) is True
        # a gold answer is always credited; the normalised gold itself is never empty
        assert ev.correct(r["answer"], r) is True


def test_triviaqa_aliases_all_credit(shared_data) -> None:
    ev = EVALUATORS["alias_match"](extract="full")
    for line in (shared_data / "triviaqa.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        for a in r["aliases"][:3]:
            if normalize_answer(a):
                assert ev.correct(ev.label(a, r).value, r) is True
