"""Every stdlib template renders with real items and carries the papers' strings verbatim."""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from auditlang.prompts import build_context, compile_stdlib_template, list_stdlib_templates, load_stdlib_template
from auditlang.prompts.perturb import one_shot

OPEN_QA = ("s001/", "s002/", "s003/answer/open_ended", "s003/answer/reasoning")
PROTOCOL = {"generation": "C", "proposed_answer": "Gazelle", "samples": ["Antelope", " an antelope"]}


def _context(name: str, arc_items: list[dict[str, Any]], trivia: dict[str, Any]) -> dict[str, Any]:
    item = trivia if name.startswith(OPEN_QA) else arc_items[0]
    if name.endswith("_oneshot"):
        item = one_shot(item, 0, bank="mmlu", index=3)
    return build_context(item, examples=arc_items[1:4], **PROTOCOL)


def render(name: str, arc_items: list[dict[str, Any]], trivia: dict[str, Any]) -> str:
    return compile_stdlib_template(name).render(_context(name, arc_items, trivia))


def test_there_are_templates_for_every_study() -> None:
    names = list_stdlib_templates()
    for study in ("s000", "s001", "s002", "s003", "s004"):
        assert any(n.startswith(study + "/") for n in names), study


@pytest.mark.parametrize("name", list_stdlib_templates())
def test_every_template_renders_without_trailing_newline(name: str, arc_items: list[dict[str, Any]],
                                                         trivia_item: dict[str, Any]) -> None:
    source = load_stdlib_template(name)
    assert source.startswith("{# source:"), "each template starts with its source comment"
    out = render(name, arc_items, trivia_item)
    assert out and not out.endswith("\n") and not out.startswith(("\n", " "))
    assert "{#" not in out and not re.search(r"\bNone\b(?! of the above)", out)


def test_classification_templates_render_sst2(sst2_item: dict[str, Any]) -> None:
    out = compile_stdlib_template("s000/classification/surface_paraphrase").render(build_context(sst2_item))
    assert out == ("Answer the following multiple-choice question. " + sst2_item["question"]
                   + "\nA. negative\nB. positive Answer with only the letter of the correct option. Answer:")


def _norm(text: str) -> str:
    """Paper text with extraction artifacts removed: markup tags, the space before ',' / ':'."""
    text = re.sub(r"</?(b|code|p)>", "", text)
    text = text.replace(" ,", ",").replace(" :", ":")
    return re.sub(r"[ \t]+", " ", text)


# (template, paper, fragments of the rendered prompt that must appear verbatim in the paper)
VERBATIM = [
    ("s000/reasoning/surface_paraphrase", "000", ["Answer the following multiple-choice question.",
                                                   "Answer with only the letter of the correct option. Answer:"]),
    ("s000/reasoning/instruction_reorder", "000", ["Choose the correct answer:", ". Question:", ". Correct answer letter:"]),
    ("s000/reasoning/fewshot_k", "000", ["For each question, choose the correct answer from the options provided."]),
    ("s000/reasoning/format_change", "000", ["Answer the following question. Think step by step, then give the letter "
                                              "of the correct answer on the last line.", "Reasoning and answer:"]),
    ("s000/reasoning/implicit_framing", "000", ["The answer is:"]),
    ("s000/confidence/decimal_01", "000", ["*"]),
    ("s000/confidence/percent_0_100", "000", ["*"]),
    ("s000/repair/final_answer", "000", ["Final answer:"]),
    ("s003/answer/multiple_choice", "003", ["Task: Solve the following multiple-choice problem. The answer should be a "
                                            "single letter (A, B, C, D, etc.). Provide your final answer in the "
                                            "following format: \\boxed{A} Problem:"]),
    ("s003/answer/reasoning", "003", ["Task: Solve the following reasoning problem. Provide your final answer in the "
                                      "following XML format: <answer>final answer here</answer> Problem:"]),
    ("s003/answer/open_ended", "003", ["Task: Answer the following factual question directly. This is NOT a "
                                       "multiple-choice question. Provide a direct factual answer. Provide your final "
                                       "answer in the following XML format: <answer>final answer here</answer> Question:"]),
    ("s003/confidence/verbalized", "003", [
        "\nProposed Answer:", "\nHow confident are you that the proposed answer is correct?\nThe confidence score should "
        "be a number from 0 (completely unsure) to 100 (absolutely certain).\nYour response MUST strictly adhere to this "
        "format:\nConfidence: \\boxed{Your confidence score from 0-100.}\nNow it is your turn to give a response:"]),
    ("s003/confidence/binary_verification", "003", [
        "\nIs the proposed answer:\nA. True\nB. False\nOutput format: A or B only (single uppercase letter; no spaces, "
        "punctuation, or explanation):"]),
    ("s004/mc/askcal_oneshot", "004", ["The question is: What is the chemical symbol for water? Choices: A: H2O, B: CO2, "
                                       "C: NaCl, D: O2 Choose one answer from the above choices. Guess: A Provide the "
                                       "probability that your guess is correct. Give ONLY the probability, no other words "
                                       "or explanation.For example: Probability: <the probability between 0.0 and 1.0 "
                                       "that your guess is correct, without any extra commentary whatsoever; just the "
                                       "probability!> Probability: 1.0", "Choose one answer from the above choices. Guess:"]),
    ("s004/mc/moreinfo_oneshot", "004", ["The question is: What is the chemical symbol for water? Choices: A: H2O, B: "
                                         "CO2, C: NaCl, D: O2 Choose one answer from the above choices. Guess: A Do you "
                                         "need more information to answer this question? (Yes or No)No"]),
    ("s004/mc/selfref_oneshot", "004", ["The question is: What is the chemical symbol for water? Choices: A: H2O, B: "
                                        "CO2, C: NaCl, D: O2 Choose one answer from the above choices. Guess: A",
                                        "The above answer is: A. True B. False The answer is"]),
    ("s004/mc/nota", "004", ["E: None of the above Choose one answer from the above choices. Guess:"]),
    ("s002/judge/correctness", "002", ["You are evaluating whether an answer is semantically equivalent to the reference "
                                       "answer.", "Reference answer:", "Equivalent:"]),
    ("s002/judge/answer_groups", "002", ["You are grouping 10 answers by their semantic equivalence."]),
]


@pytest.mark.parametrize("name,paper,fragments", VERBATIM, ids=[v[0] for v in VERBATIM])
def test_fragments_are_verbatim_from_the_paper(name: str, paper: str, fragments: list[str],
                                               arc_items: list[dict[str, Any]], trivia_item: dict[str, Any],
                                               paper_of: Callable[[str], str]) -> None:
    out = render(name, arc_items, trivia_item)
    text = _norm(paper_of(paper))
    for frag in fragments:
        frag = out if frag == "*" else frag
        assert frag in out, f"{frag!r} not in the rendered {name}"
        assert _norm(frag) in text, f"{frag!r} not found in paper {paper}"


def test_s002_prompts_are_the_table_rows(paper_of: Callable[[str], str]) -> None:
    text = _norm(paper_of("002"))
    names = [n for n in list_stdlib_templates() if n.startswith(("s002/answer/", "s002/confidence/"))]
    assert len(names) == 17  # 10 answer-elicitation + 7 confidence-elicitation prompts
    for name in names:
        out = compile_stdlib_template(name).render({"question": "Q?"})
        instruction = out.removesuffix("\nQ?")
        assert f"\t{instruction}" in text or f" {instruction}" in text or f"\n{instruction}" in text, name


def test_s000_reasoning_exact_rendering(arc_item: dict[str, Any]) -> None:
    ctx = build_context(arc_item)
    inp = arc_item["question"] + "\n" + "\n".join(f"{l}. {c}" for l, c in zip("ABCD", arc_item["choices"]))
    assert compile_stdlib_template("s000/reasoning/instruction_reorder").render(ctx) == \
        f"Choose the correct answer: A, B, C, D. Question: {inp}. Correct answer letter:"
    assert compile_stdlib_template("s000/reasoning/implicit_framing").render(ctx) == f"{inp} The answer is:"
    assert compile_stdlib_template("s000/reasoning/baseline").render(ctx) == \
        compile_stdlib_template("s000/reasoning/surface_paraphrase").render(ctx)


def test_fewshot_block_shows_gold_letters(arc_items: list[dict[str, Any]]) -> None:
    ctx = build_context(arc_items[0], examples=arc_items[1:4])
    out = compile_stdlib_template("s000/reasoning/fewshot_k").render(ctx)
    for ex in arc_items[1:4]:
        assert ex["question"] in out
    assert out.count(" Answer: ") == 3 and out.endswith(" Answer:")
    assert out.index(arc_items[3]["question"]) < out.index(arc_items[0]["question"])


def test_s001_verbalized_and_supplied_prefill(trivia_item: dict[str, Any]) -> None:
    out = compile_stdlib_template("s001/verbalized").render(build_context(trivia_item))
    assert out.endswith("The question is: " + trivia_item["question"])
    assert "Guess: <most likely guess" in out and "\nProbability: <the probability between 0.0 and 1.0" in out
    pre = compile_stdlib_template("s001/supplied_prefill").render(build_context(trivia_item, proposed_answer="Gazelle"))
    assert pre == "Guess: Gazelle\nProbability:"


def test_s004_two_step_prompts_continue_the_answer_prompt(arc_item: dict[str, Any]) -> None:
    ctx = build_context(arc_item, generation=" B\n")
    base = compile_stdlib_template("s004/mc/tokprob").render(ctx)
    for method in ("askcal", "moreinfo", "selfref"):
        out = compile_stdlib_template(f"s004/mc/{method}").render(ctx)
        assert out.startswith(base + " B"), method
    assert compile_stdlib_template("s004/mc/embedding").render(ctx) == base
