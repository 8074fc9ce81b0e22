"""ItemCtx helpers added for the programs: template contexts, prefills, gold answers."""

from __future__ import annotations

import pytest

from auditlang.protocols.base import ItemCtx, ModelInfo, Program

from protocol_helpers import make_ctx, read_item


def test_template_context_from_raw_item_and_from_built_context():
    item = read_item("arc_challenge", 0)
    built = make_ctx(item, "s000/reasoning/surface_paraphrase")
    raw = ItemCtx(ModelInfo("m", True, 32, 42), "ds", "multiple_choice", "test", 0, item, "v", "q", None, 32, 42)
    for ctx in (built, raw):
        tc = ctx.template_context(proposed_answer="B")
        assert tc["proposed_answer"] == "B" and tc["gold_label"] == "C" and tc["labels"] == ["A", "B", "C", "D"]
        with pytest.raises(ValueError, match="shadow"):
            ctx.template_context(question="x")
    assert raw.valid_labels() == ["A", "B", "C", "D"] and raw.gold_answer() == "C"


def test_prefilled_prompt_layouts():
    item = read_item("triviaqa", 0)
    chat = make_ctx(item, "s001/bare_query", task="open_qa")
    base = make_ctx(item, "s001/bare_query", task="open_qa", chat=False)
    p = chat.prefilled("Q?", "Guess:")
    assert [(m.role, m.content) for m in p.messages] == [("user", "Q?"), ("assistant", "Guess:")]
    assert base.prefilled("Q?", "Guess:").text == "Q?\nGuess:"
    assert base.prefilled("Q?\n", "Guess:").text == "Q?\nGuess:"
    assert chat.gold_answer() == "Antelope" and chat.valid_labels() is None


def test_default_fit_apply_are_identity(sb):
    sb.template("dec", file="stdlib:s000/confidence/decimal_01")
    prog = sb.program("v", "verbalized", phrasing="dec")
    assert isinstance(prog, Program) and not prog.needs_dev and prog.fit([]) == {}
    from auditlang.protocols.base import Readout

    r = Readout(0.3, True, "verbalized")
    assert prog.apply({}, r) is r
