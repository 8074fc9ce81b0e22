"""First-char and regex evaluators over ARC-Challenge gold answers written in common answer formats."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from auditlang.evaluators import EVALUATORS, gold_letter


@pytest.fixture(scope="module")
def arc(shared_data) -> list[dict]:
    rows = [json.loads(line) for line in (shared_data / "arc_challenge.jsonl").open(encoding="utf-8")]
    assert len(rows) == 1172
    return rows


FORMATS_BOTH = [  # both evaluators must score these correct
    "{L}",
    "**{L}**",
    "- {L}",
    "Reasoning first.\n{L}",
]
FORMATS_WITH_TEXT = ["{L}. {A}", "({L}) {A}"]  # the option text follows the letter
FORMATS_REGEX = [  # only the regex re-parse reads these
    "Answer: {L}",
    "The correct answer is {L}.",
    "Let's think step by step. {Q}\nThe best match is \"{A}\".\nFinal answer: {L}",
    "{Q}\nSo the answer is {L}: {A}",
    "Looking at the options, I choose {L}",
]


def render(fmt: str, row: dict) -> str:
    return fmt.format(L=gold_letter(row), A=row["answer"], Q=row["question"])


@pytest.mark.parametrize("fmt", FORMATS_BOTH + FORMATS_REGEX)
def test_regex_reparse_reads_every_gold(arc: list[dict], fmt: str) -> None:
    ev = EVALUATORS["regex_reparse"]()
    wrong = [r["id"] for r in arc if ev.correct(ev.label(render(fmt, r), r).value, r) is not True]
    assert wrong == []


@pytest.mark.parametrize("fmt", FORMATS_WITH_TEXT)
def test_regex_tail_scan_misreads_letters_inside_the_option_text(arc: list[dict], fmt: str) -> None:
    # study 000 C.1 order: no marker -> the last standalone letter of the final 150 characters wins,
    # so an option text such as "A tree removes ..." is read as A (the regex fragility the paper reports)
    ev = EVALUATORS["regex_reparse"]()
    wrong = {r["id"] for r in arc if ev.correct(ev.label(render(fmt, r), r).value, r) is not True}
    letters = {r["id"]: set("ABCDEFGHIJ"[: len(r["choices"])]) for r in arc}
    expected = {
        r["id"] for r in arc
        if (set(re.split(r"[^A-Za-z0-9'’]+", r["answer"])) & letters[r["id"]]) - {gold_letter(r)}
    }
    assert wrong == expected and 0 < len(wrong) < 30


@pytest.mark.parametrize("fmt", FORMATS_BOTH + FORMATS_WITH_TEXT)
def test_first_char_reads_direct_answers(arc: list[dict], fmt: str) -> None:
    ev = EVALUATORS["first_char"]()
    wrong = [r["id"] for r in arc if ev.correct(ev.label(render(fmt, r), r).value, r) is not True]
    assert wrong == []


def test_first_char_misreads_answer_prefix(arc: list[dict]) -> None:
    # "Answer: X" starts with the valid letter A: the first-character rule predicts A for every item
    ev = EVALUATORS["first_char"]()
    preds = Counter(ev.label(render("Answer: {L}", r), r).value for r in arc)
    assert preds == Counter({"A": len(arc)})
    n_correct = sum(ev.correct("A", r) for r in arc)
    assert n_correct == sum(gold_letter(r) == "A" for r in arc)


def test_first_char_collapses_on_chain_of_thought(arc: list[dict]) -> None:
    # study 000 C.1: CoT opens with "Let..."; the first character is not a valid letter
    ev = EVALUATORS["first_char"]()
    fmt = "Let's think step by step. {Q}\nThe best match is \"{A}\".\nFinal answer: {L}"
    rules = Counter(ev.label(render(fmt, r), r).rule for r in arc)
    assert rules["raw_first_char"] + rules["standalone_line"] == len(arc)
    assert sum(bool(ev.correct(ev.label(render(fmt, r), r).value, r)) for r in arc) < len(arc) * 0.05
