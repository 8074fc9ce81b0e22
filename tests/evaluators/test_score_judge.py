"""LLM judge: study 002 appendix A.1 prompts, requests and reply parsing."""

from __future__ import annotations

import re

import pytest

from auditlang.core.requests import Result, Sample
from auditlang.evaluators import (
    CORRECTNESS_PROMPT,
    EVALUATORS,
    GROUPING_PROMPT,
    correctness_prompt,
    grouping_prompt,
    grouping_request,
    judge_request,
    parse_grouping_reply,
    parse_judge_reply,
)


def _paper_block(text: str, start: str, end: str) -> str:
    block = text[text.index(start) + len(start) : text.index(end)]
    lines = [line.rstrip() for line in block.splitlines() if line.strip() != "```"]  # documented artefacts
    return "\n".join(lines).strip()


def test_prompts_are_verbatim_from_the_paper(paper_text) -> None:
    t = paper_text("002")
    correctness = _paper_block(t, "#### Semantic Equivalence Judgment Prompt for Correctness",
                               "#### Semantic Equivalence Judgment Prompt for Semantic Answer Groups")
    grouping = _paper_block(t, "#### Semantic Equivalence Judgment Prompt for Semantic Answer Groups",
                            "## A.2 Mapping of Linguistic Prompts")
    assert CORRECTNESS_PROMPT == correctness
    assert GROUPING_PROMPT == grouping


def test_correctness_prompt_fills_slots_once() -> None:
    p = correctness_prompt("Who wrote <target>?", "Einstein", "Albert Einstein")
    assert p.endswith("Question: Who wrote <target>?\n\nAnswer: Einstein\n\nReference answer: Albert Einstein\n\nEquivalent:")
    assert "<question>" not in p and "<answer>" not in p
    with pytest.raises(ValueError, match="answer must be a str"):
        correctness_prompt("q", None, "t")  # type: ignore[arg-type]


def test_grouping_prompt() -> None:
    answers = [f"a{i}" for i in range(10)]
    p = grouping_prompt("Q?", answers)
    assert "You are grouping 10 answers" in p
    assert p.endswith('Question: Q?\nAnswer: {1: "a0", 2: "a1", 3: "a2", 4: "a3", 5: "a4", 6: "a5", 7: "a6", 8: "a7", 9: "a8", 10: "a9"}')
    assert "You are grouping 3 answers" in grouping_prompt("Q?", ["x", "y", 'say "z"'])
    with pytest.raises(ValueError, match="at least two"):
        grouping_prompt("Q?", ["only"])


def test_requests() -> None:
    r = judge_request("gpt-4o", "q", "a", "t", seed=1)
    assert r.model == "gpt-4o" and r.kind == "generate"
    assert r.p["temperature"] == 0.0 and r.p["max_tokens"] == 8
    assert r.prompt.messages[0].role == "user" and r.prompt.messages[0].content.endswith("Equivalent:")
    assert judge_request("j", "q", "a", "t", chat=False).prompt.text.startswith("You are evaluating")
    g = grouping_request("j", "q", ["x", "y"])
    assert g.p["max_tokens"] == 1024 and "You are grouping 2 answers" in g.prompt.messages[0].content


@pytest.mark.parametrize(
    ("reply", "value", "rule"),
    [
        ("1", True, "digit"),
        ("0", False, "digit"),
        (" **1**", True, "digit"),
        ("\n0.", False, "digit"),
        ("YES", True, "yes_no"),
        ("no.", False, "yes_no"),
        ("Yes, they match", True, "yes_no"),
    ],
)
def test_judge_reply(reply: str, value: bool, rule: str) -> None:
    out = parse_judge_reply(reply)
    assert (out.value, out.ok, out.rule) == (value, True, rule)


@pytest.mark.parametrize(("reply", "rule"), [("10", "unparsed"), ("Nope", "unparsed"), ("", "empty"), ("  ", "empty"), ("Equivalent", "unparsed")])
def test_judge_reply_failures(reply: str, rule: str) -> None:
    out = parse_judge_reply(reply)
    assert not out.ok and out.rule == rule


def test_judge_reply_from_result() -> None:
    assert parse_judge_reply(Result("r", "generate", samples=[Sample("1")])).value is True
    assert parse_judge_reply(Result("r", "generate", error="timeout")).rule == "engine_error"


def test_grouping_reply() -> None:
    out = parse_grouping_reply("{1: Paris, 2: paris, France}\n{3: Lyon}", 3)
    assert out.ok and out.value == ((0, 1), (2,))
    assert parse_grouping_reply("{1: Paris, 2: Paris}\n{2: Lyon}", 3).rule == "duplicate_index"
    assert parse_grouping_reply("{1: Paris}", 3).rule == "incomplete"
    assert parse_grouping_reply("{1: a, 9: b}", 3).rule == "index_out_of_range"
    assert parse_grouping_reply("all the same", 3).rule == "no_groups"
    with pytest.raises(ValueError, match="positive integer"):
        parse_grouping_reply("{1: a}", 0)


def test_evaluator(trivia: dict) -> None:
    ev = EVALUATORS["llm_judge"](judge="judge")
    assert ev.requires_model and ev.correct("Antelope", trivia) is None
    pred = ev.label("  an antelope\n", trivia).value
    req = ev.request(pred, trivia, seed=5)
    assert re.search(r"Answer: an antelope\n\nReference answer: Antelope", req.prompt.messages[0].content)
    assert ev.verdict("1").value is True
    with pytest.raises(ValueError, match="question"):
        ev.request("x", {"answer": "y"})
