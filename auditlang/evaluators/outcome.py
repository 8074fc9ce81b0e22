"""The uniform result of every evaluator and parser, and the text guard they all share.

Input: model text (any object; only ``str`` and ``bytes`` are text).
Output: :class:`ParseOutcome`. Parsers never raise on text: a failure is an outcome with
``ok=False`` and a ``rule`` naming why, so it can be counted (e.g. verbal parse rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ParseOutcome:
    """What a parser extracted from one text.

    ``value``: the label / answer string / confidence in [0, 1] / judge verdict (``None`` when
    nothing could be read; a first-char fall-through keeps the invalid character for disclosure).
    ``ok``: the value is a valid, usable result. ``rule``: the rule that fired, or the failure
    reason. ``span``: ``(start, end)`` of the value in the input text, when it comes from one.
    """

    value: Any
    ok: bool
    rule: str
    span: tuple[int, int] | None = None


def failure(rule: str, value: Any = None) -> ParseOutcome:
    """A counted failure outcome."""
    return ParseOutcome(value=value, ok=False, rule=rule, span=None)


def coerce_text(text: object) -> str | None:
    """``str`` as is; ``bytes`` decoded as UTF-8 with replacement characters; anything else None.

    Lone surrogates and U+FFFD are kept: every parser here treats them as ordinary
    non-alphanumeric characters.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return None


NOT_TEXT = "not_text"  # rule of the failure outcome for a non-text input
EMPTY = "empty"  # rule of the failure outcome for empty / whitespace-only text
