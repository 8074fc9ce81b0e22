"""``--limit``: which of a dataset's sampled items a run uses (docs/cli.md).

A count (``10``: the first 10), a fraction (``0.1`` or ``10%``: the first ceil(10 %) of each
dataset's sampled items, as lm-evaluation-harness rounds it) or a range (``10:20``: positions
10..19 of the sampled order, 0-based, end exclusive; ``10:`` to the end). Applied per dataset
after sampling, so the items are a prefix or a slice of the declared sample; recorded in
plan.json and run.json as written (a count as an integer) and disclosed by the checklist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FORMS = "a count (10, at least 1), a fraction (0.1 or 10%) or a range of sampled positions (10:20, 0-based, end exclusive)"


@dataclass(frozen=True)
class Limit:
    text: str
    count: int | None = None
    fraction: float | None = None
    start: int | None = None
    stop: int | None = None

    @staticmethod
    def parse(value: int | str | Limit | None) -> Limit | None:
        """A ``Limit`` from an integer, its text or a ``Limit``; ``ValueError`` naming the forms."""
        if value is None or isinstance(value, Limit):
            return value
        if isinstance(value, bool):
            raise ValueError(f"invalid limit {value!r}: expected {FORMS}")
        if isinstance(value, int):
            value = str(value)
        if isinstance(value, float):
            value = repr(value)
        text = str(value).strip()
        try:
            if ":" in text:
                a, _, b = text.partition(":")
                start, stop = int(a) if a.strip() else 0, int(b) if b.strip() else None
                if start < 0 or (stop is not None and stop <= start):
                    raise ValueError
                return Limit(text, start=start, stop=stop)
            if text.endswith("%"):
                pct = float(text[:-1])
                if not 0 < pct <= 100:
                    raise ValueError
                return Limit(text, fraction=pct / 100)
            if "." in text or "e" in text.lower():
                f = float(text)
                if not 0 < f <= 1:
                    raise ValueError
                return Limit(text, fraction=f)
            n = int(text)
            if n < 1:  # --limit 0 would run nothing and report empty cells
                raise ValueError
            return Limit(text, count=n)
        except ValueError:
            raise ValueError(f"invalid limit {text!r}: expected {FORMS}") from None

    @property
    def recorded(self) -> int | str:
        """As plan.json and run.json store it: a count as an integer (as before), else the text."""
        return self.count if self.count is not None else self.text

    def cut(self, items: list) -> list:
        """The items of one dataset's sampled order this limit keeps."""
        if self.count is not None:
            return items[: self.count]
        if self.fraction is not None:
            return items[: math.ceil(len(items) * self.fraction - 1e-9)]
        return items[self.start: self.stop]

    def phrase(self, n_used: int, n_drawn: int | None) -> str:
        """Which items were kept, for the checklist and methods text: 'the first 10 of the 40
        sampled items', 'positions 10 to 19 (10 items) of the 40 sampled items'."""
        of = f" of the {n_drawn} sampled items" if n_drawn is not None else " of the sampled items"
        if self.start is not None:
            last = self.start + n_used - 1
            return f"positions {self.start} to {last} ({n_used} item{'s' if n_used != 1 else ''}){of}"
        return f"the first {n_used}{of}"
