"""Study 004 perturbations: seeded, pure, and faithful to appendix A.2."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from auditlang.prompts import add_typo, apply_perturbation, insert_space, one_shot, seed_for, shuffle_options
from auditlang.prompts.perturb import PAPER_SEEDS, ONESHOT_EXAMPLES

DIGITS = re.compile(r"\d+(?:[.,:/]\d+)*")


def mc_items(arc_items: list[dict[str, Any]], mmlu_items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return arc_items + mmlu_items


@pytest.mark.parametrize("fn", [insert_space, shuffle_options, add_typo])
def test_deterministic_and_pure(fn: Any, arc_items: list[dict[str, Any]]) -> None:
    for item in arc_items[:20]:
        before = copy.deepcopy(item)
        a, b = fn(item, 1234), fn(item, 1234)
        assert a == b
        assert item == before, "the input item is not modified"
    outs = {fn(arc_items[0], s)["question" if fn is not shuffle_options else "answer_index"] for s in range(30)}
    assert len(outs) > 1, "different seeds give different variants"


def test_space_insertion_keeps_numbers(arc_items: list[dict[str, Any]], mmlu_items: list[dict[str, Any]]) -> None:
    with_numbers = 0
    for item in mc_items(arc_items, mmlu_items):
        for seed in PAPER_SEEDS:
            new = insert_space(item, seed)
            q, nq = item["question"], new["question"]
            pos = new["perturbations"][-1]["positions"][0]
            assert len(nq) == len(q) + 1 and nq[pos] == " " and nq[:pos] + nq[pos + 1:] == q
            assert DIGITS.findall(nq) == DIGITS.findall(q)
            with_numbers += bool(DIGITS.search(q))
    assert with_numbers > 50


@pytest.mark.parametrize("text", ["Compute -5 + 3.14 * 1,000 at 12:30 or .5", "2+2=4", "x 1/2 y"])
def test_space_never_splits_a_number(text: str) -> None:
    numbers = re.findall(r"(?:(?<![\w.])-)?\.?\d+(?:[.,:/]\d+)*", text)
    for seed in range(200):
        nq = insert_space({"id": "t", "question": text}, seed)["question"]
        assert all(n in nq for n in numbers), (seed, nq)


def test_space_needs_a_position() -> None:
    with pytest.raises(ValueError, match="no position"):
        insert_space({"id": "t", "question": "123456"}, 0)


def test_shuffle_always_moves_the_gold(arc_items: list[dict[str, Any]], mmlu_items: list[dict[str, Any]]) -> None:
    for item in mc_items(arc_items, mmlu_items):
        for seed in (*PAPER_SEEDS, 7):
            new = shuffle_options(item, seed)
            assert new["answer_index"] != item["answer_index"]
            assert new["choices"][new["answer_index"]] == item["choices"][item["answer_index"]] == new["answer"]
            assert sorted(new["choices"]) == sorted(item["choices"])


def test_shuffle_two_options_swaps(sst2_item: dict[str, Any]) -> None:
    new = shuffle_options(sst2_item, 3)
    assert new["choices"] == sst2_item["choices"][::-1] and new["answer_index"] == 1 - sst2_item["answer_index"]
    with pytest.raises(ValueError, match="at least 2 choices"):
        shuffle_options({"id": "t", "choices": ["a"], "answer_index": 0}, 0)
    with pytest.raises(ValueError, match="answer_index"):
        shuffle_options({"id": "t", "choices": ["a", "b"], "answer_index": None}, 0)


def _single_letter_edit(old: str, new: str) -> tuple[str, int]:
    """Classify old -> new as one add/delete/adjacent swap; return (op, position in old)."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    if len(new) == len(old) + 1 and old[p:] == new[p + 1:]:
        return "add", p
    if len(new) == len(old) - 1 and old[p + 1:] == new[p:]:
        return "delete", p
    if len(new) == len(old) and old[p + 2:] == new[p + 2:] and old[p] == new[p + 1] and old[p + 1] == new[p]:
        return "swap", p
    raise AssertionError(f"not a single-letter edit: {old!r} -> {new!r}")


def test_typo_edits_one_letter_in_a_non_numeric_word(arc_items: list[dict[str, Any]],
                                                     mmlu_items: list[dict[str, Any]]) -> None:
    ops = set()
    for item in mc_items(arc_items, mmlu_items):
        for seed in PAPER_SEEDS:
            new = add_typo(item, seed)
            old_q, new_q = item["question"], new["question"]
            op, pos = _single_letter_edit(old_q, new_q)
            ops.add(op)
            rec = new["perturbations"][-1]
            assert rec["op"] == op
            token = next(m.group() for m in re.finditer(r"\S+", old_q) if m.start() <= pos <= m.end())
            assert not any(ch.isdigit() for ch in token), token
            assert old_q[pos:pos + 1].isalpha() or old_q[pos - 1:pos].isalpha()
            changed = new_q[pos] if op == "add" else old_q[pos]
            assert changed.isalpha()
    assert ops == {"add", "delete", "swap"}


def test_typo_never_touches_numeric_tokens() -> None:
    item = {"id": "t", "question": "H2O 1990s 42 is"}
    for seed in range(100):
        new = add_typo(item, seed)["question"]
        assert new.startswith("H2O 1990s 42 ")
    with pytest.raises(ValueError, match="no non-numeric word"):
        add_typo({"id": "t", "question": "1 22 3.5"}, 0)


def test_one_shot_attaches_a_table_4_example(arc_item: dict[str, Any]) -> None:
    new = one_shot(arc_item, 0, bank="mmlu", index=3)
    ex = new["oneshot"]
    assert ex["question"] == "What is the chemical symbol for water?" and ex["gold_label"] == "A"
    assert ex["answer"] == "H2O" and new["question"] == arc_item["question"]
    assert one_shot(arc_item, 5, bank="hellaswag")["oneshot"]["question"] in {
        e["question"] for e in ONESHOT_EXAMPLES["hellaswag"]}
    assert [ONESHOT_EXAMPLES["mmlu"][i]["answer_index"] for i in range(4)] == [3, 1, 2, 0]  # D, B, C, A
    # the parameters are checked against OneShot.Params (the one declaration the spec is checked against)
    with pytest.raises(ValueError, match="bank='arc'.*'mmlu' or 'hellaswag'"):
        one_shot(arc_item, 0, bank="arc")
    with pytest.raises(ValueError, match="index=4.*less than or equal to 3"):
        one_shot(arc_item, 0, bank="mmlu", index=4)
    with pytest.raises(ValueError, match="no one-shot bank"):
        one_shot(arc_item, 0)
    with pytest.raises(ValueError, match="n_spaces=0"):
        insert_space(arc_item, 0, n_spaces=0)


def test_seed_for_is_order_independent(arc_items: list[dict[str, Any]]) -> None:
    items = arc_items[:10]
    forward = {it["id"]: apply_perturbation(it, "typo", 44) for it in items}
    backward = {it["id"]: apply_perturbation(it, "typo", 44) for it in reversed(items)}
    assert forward == backward
    first = items[0]
    assert forward[first["id"]] == add_typo(first, seed_for(44, first["id"], "typo"))
    assert seed_for(44, "a", "typo") != seed_for(44, "a", "space") != seed_for(4, "a", "space")
    assert apply_perturbation(first, "one_shot", 4, bank="mmlu", index=0)["oneshot"]["gold_label"] == "D"
    with pytest.raises(ValueError, match="unknown perturbation"):
        apply_perturbation(first, "paraphrase", 4)


def test_perturbations_compose_and_record(arc_item: dict[str, Any]) -> None:
    new = apply_perturbation(apply_perturbation(arc_item, "shuffle", 4), "typo", 4)
    assert [p["name"] for p in new["perturbations"]] == ["shuffle", "typo"]
    assert "perturbations" not in arc_item
