"""The template context convention."""

from __future__ import annotations

from typing import Any

import pytest

from auditlang.prompts import build_context, item_context


def test_mc_item_gets_labels_and_gold_label(arc_item: dict[str, Any]) -> None:
    ctx = item_context(arc_item)
    assert ctx["labels"] == ["A", "B", "C", "D"]
    assert ctx["gold_label"] == "ABCD"[arc_item["answer_index"]]
    assert ctx["question"] == arc_item["question"] and "labels" not in arc_item


def test_free_form_item_has_no_labels(trivia_item: dict[str, Any]) -> None:
    ctx = build_context(trivia_item, generation="Antelope")
    assert ctx["labels"] is None and ctx["gold_label"] is None
    assert ctx["examples"] == [] and ctx["generation"] == "Antelope"


def test_examples_get_the_same_shape(arc_items: list[dict[str, Any]]) -> None:
    ctx = build_context(arc_items[0], examples=arc_items[1:4])
    assert [ex["gold_label"] for ex in ctx["examples"]] == ["ABCD"[x["answer_index"]] for x in arc_items[1:4]]


def test_protocol_variables_cannot_shadow_item_fields(arc_item: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="shadow"):
        build_context(arc_item, answer="x")


def test_bad_answer_index_is_reported(arc_item: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="answer_index 9"):
        item_context({**arc_item, "answer_index": 9})
