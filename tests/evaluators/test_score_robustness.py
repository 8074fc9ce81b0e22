"""No evaluator or parser raises on empty, huge, repeated or broken text; failures are outcomes."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditlang.core.registry import REGISTRY
from auditlang.evaluators import EVALUATORS, VERBAL_PARSERS, ParseOutcome, make_evaluator

MC_ITEM = {"question": "q", "choices": ["w", "x", "y", "z"], "answer": "x", "answer_index": 1, "aliases": None}
QA_ITEM = {"question": "q", "choices": None, "answer": "Paris", "answer_index": None, "aliases": ["Paris, France"]}
# the evaluators that read option letters, as their registry entries declare (meta reads="labels")
LETTER_EVALUATORS = tuple(e.name for e in REGISTRY.entries("evaluator") if e.meta.get("reads") == "labels")


def components():
    for name in EVALUATORS:
        ev = make_evaluator(name, judge="j") if name == "llm_judge" else make_evaluator(name)
        item = MC_ITEM if name in LETTER_EVALUATORS else QA_ITEM
        yield name, (lambda t, ev=ev, item=item: ev.label(t, item))
    for name, factory in VERBAL_PARSERS.items():
        yield name, factory().parse


COMPONENTS = list(components())
_rng = random.Random(0)
_JUNK_BLOCK = "".join(_rng.choice("0.5%aB \n\ud800\udfff\ufffd\u2028\u0085*#-:{}\\é漢🙂") for _ in range(1000))
MB = 1_000_000
HUGE = {  # two 5 MB shapes; the rest 1 MB (every parser is linear, so size only scales time)
    "digits": "1" * (5 * MB),
    "unicode_junk": _JUNK_BLOCK * (5 * MB // 1000),
    "repeated_B": "B. " * (MB // 3),  # study 000 C.1 repetition pattern
    "spaces": " " * MB,
    "newlines": "\n" * MB,
    "repeated_cot": "Let me think step by step about option B. " * (MB // 42),
    "answer_markers": "Answer: " * (MB // 8),
    "expressions": "Likely " * (MB // 7),
    "boxed_openings": "\\boxed{" * (MB // 7),
    "out_of": "5 out of " * (MB // 9),
    "ranges": "0.7-" * (MB // 4),
    "bad_percent": "1 150% " * (MB // 7),
    "tags": "<answer>" * (MB // 8),
}


def check(name: str, out: object, text: object) -> None:
    assert isinstance(out, ParseOutcome), name
    assert isinstance(out.ok, bool) and isinstance(out.rule, str) and out.rule, name
    if name in VERBAL_PARSERS:
        assert (out.value is not None) == out.ok, name
        if out.ok:
            assert 0.0 <= out.value <= 1.0, name
    if name in LETTER_EVALUATORS and out.ok:
        assert out.value in MC_ITEM_LABELS, name
        if isinstance(text, str):
            assert text[out.span[0] : out.span[1]].upper() == out.value, name
    if out.span is not None and isinstance(text, str):
        assert 0 <= out.span[0] <= out.span[1] <= len(text), name


MC_ITEM_LABELS = ("A", "B", "C", "D")


@pytest.mark.parametrize("kind", sorted(HUGE))
def test_huge_inputs(kind: str) -> None:
    text = HUGE[kind]
    for name, fn in COMPONENTS:
        check(name, fn(text), text)


@pytest.mark.parametrize(
    "text",
    ["", " ", "\n", "\x00", "\ud800", "\udfff\ud800", "\ufffd" * 50, "\u0085\u2028\u2029", "%", ".", "-", "{}", "\\boxed{",
     "<answer></answer>", "Answer:", "Final answer:", "Guess:", b"\xff\xfe\xfa", b"", None, 42, ["0.5"]],
)
def test_degenerate_inputs(text: object) -> None:
    for name, fn in COMPONENTS:
        check(name, fn(text), text)  # type: ignore[arg-type]


def test_failures_are_counted_not_raised() -> None:
    outs = [fn("") for _, fn in COMPONENTS]
    assert all(not o.ok for o in outs)


_TOKENS = ["0", "1", "0.", ".5", "0.75", "75", "100", "%", " percent", " out of ", "/", "-", " or ", " to ", "Answer: ",
           "Final answer: ", "the correct answer is ", "B", "(C)", "**", "\n", " ", "Likely", "Highly ", "i:", "\\boxed{", "}",
           "<answer>", "</answer>", "Guess: ", "\ud800", "\ufffd", "é"]
_texts = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=()), max_size=200),
    st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=3)), max_size=40).map("".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts)
def test_no_component_raises_on_arbitrary_text(text: str) -> None:
    for name, fn in COMPONENTS:
        check(name, fn(text), text)
