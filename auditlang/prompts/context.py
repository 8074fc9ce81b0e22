"""The template context convention: which variables a prompt template can read.

For one dataset item the context holds
  * every field of the item as loaded (``id``, ``question``, ``choices`` list or ``None``,
    ``answer``, ``answer_index``, ``aliases``, ``subject``, dataset-specific extras, ...);
  * ``labels``: option letters ``["A", "B", ...]`` for the choices, ``None`` without choices;
  * ``gold_label``: letter of the gold choice, ``None`` unless the item has choices and an
    ``answer_index``;
  * ``examples``: few-shot items, each a context of the same shape (without ``examples``);
  * protocol variables passed by the planner, e.g. ``proposed_answer`` (an answer supplied for
    confidence elicitation) or ``generation`` (the model's earlier output).
See docs/prompts.md.
"""

from __future__ import annotations

from typing import Any, Sequence

from auditlang.prompts.render import letters

def item_context(item: dict[str, Any]) -> dict[str, Any]:
    """Item fields plus ``labels`` and ``gold_label``."""
    if not isinstance(item, dict):
        raise ValueError(f"an item must be a dict, got {type(item).__name__}")
    clash = [k for k in ("labels", "gold_label") if k in item]
    if clash:
        raise ValueError(f"item {item.get('id')!r} already has field(s) {clash}, which the prompt "
                         "context derives from 'choices'; rename them in the dataset")
    ctx = dict(item)
    choices = item.get("choices")
    if choices is None:
        ctx["labels"] = None
        ctx["gold_label"] = None
        return ctx
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise ValueError(f"item {item.get('id')!r}: 'choices' must be a list or null, got {type(choices).__name__}")
    labs = letters(len(choices))
    ctx["labels"] = labs
    idx = item.get("answer_index")
    if idx is None:
        ctx["gold_label"] = None
    elif isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < len(choices):
        ctx["gold_label"] = labs[idx]
    else:
        raise ValueError(f"item {item.get('id')!r}: answer_index {idx!r} is not a valid index "
                         f"into its {len(choices)} choices")
    return ctx


def build_context(item: dict[str, Any], *, examples: Sequence[dict[str, Any]] | None = None,
                  **protocol: Any) -> dict[str, Any]:
    """Full template context for ``item``; ``protocol`` variables must not shadow item fields."""
    ctx = item_context(item)
    ctx["examples"] = [item_context(ex) for ex in examples] if examples is not None else []
    shadow = sorted(k for k in protocol if k in ctx)
    if shadow:
        raise ValueError(f"protocol variable(s) {shadow} would shadow item fields of item "
                         f"{item.get('id')!r}; choose other names")
    ctx.update(protocol)
    return ctx
