"""Study 004's prompt variants as pure, seeded item transformations (paper 004, appendix A.2-A.3).

Paper 004, A.2: "We used three different random seeds (4, 44, 99) to introduce variations into
the original prompt (i.e., multiple-choice questions). For the shuffling options variant, we
ensured that the correct answer's option order was always changed. For the typo variant, a
randomly selected non-numeric word in the question had a letter added, deleted, or swapped.
In the blank space insertion variant, we ensured that numeric values remained unchanged."

A perturbation is a :class:`Perturbation` subclass: its ``name`` in the language, its ``Params``
(the one declaration of its parameters: the resolver checks a spec against it, the language
server and ``docs/prompts.md``'s table show it) and ``apply(item, seed)``, which returns a new
item (the input is not modified); the same seed always gives the same result. Registering the
class (at the end of this module) is all a new perturbation needs. Use :func:`apply_perturbation`
to derive the per-item seed from a run's base seed with ``seed_for(base_seed, item["id"], name)``
(SHA-256; see :mod:`auditlang.prompts.seeds`), so results never depend on iteration order. Each
perturbation appends a record ``{"name", "seed", ...details}`` to the item's ``perturbations`` list.
The functions ``insert_space``, ``shuffle_options``, ``add_typo`` and ``one_shot`` are the classes
called as ``fn(item, seed, **params)`` (the Python API).
Only ``question`` (or ``choices``/``answer_index``) changes: dataset-specific copies of the
text such as ``sentence`` or ``premise`` are left as they are, so templates must read
``question``.
"""

from __future__ import annotations

import random
from functools import lru_cache
import re
import string
from collections.abc import Mapping
from typing import Any, Callable, ClassVar, Literal

from pydantic import Field

from auditlang.core.params import Obj, build_params
from auditlang.core.registry import REGISTRY, RegistryError
from auditlang.prompts.render import letters
from auditlang.prompts.seeds import seed_for

PAPER_SEEDS: tuple[int, ...] = (4, 44, 99)  # paper 004, A.2

# A number: optional sign (only where it cannot be a binary operator), optional leading dot,
# digits, and digit groups joined by . , : / (3.14, 1,000, 12:30, 1/2).
NUMBER_RE = re.compile(r"(?:(?<![\w.])[-+\u2212])?\.?\d+(?:[.,:/]\d+)*")
_TOKEN_RE = re.compile(r"\S+")
_LETTERS_RE = re.compile(r"[^\W\d_]+")


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    new = dict(item)
    new["perturbations"] = list(item.get("perturbations") or [])
    return new


def _question(item: dict[str, Any], what: str) -> str:
    q = item.get("question")
    if not isinstance(q, str):
        raise ValueError(f"{what}: item {item.get('id')!r} has no text 'question'")
    return q


class Perturbation:
    """A prompt perturbation: ``name`` (the constructor the language accepts), ``seed_name`` (the
    operation name in the per-item seed, kept from the first release so plans stay identical;
    also an alias of the constructor), ``source`` (where its rule comes from), ``Params`` (its
    parameters, declared once) and :meth:`apply`. ``Perturbation(**params)(item, seed)``
    checks the parameters against ``Params`` (ValueError naming the parameter) and applies it."""

    name: ClassVar[str] = ""
    seed_name: ClassVar[str] = ""  # default: name
    source: ClassVar[str] = ""

    class Params(Obj):
        """``seed``: the base seed of the per-item seeds (default: the spec's ``settings.seed``),
        which every perturbation takes; a subclass adds its own parameters."""

        seed: int | None = None

        def draws(self) -> bool:
            """Whether :meth:`Perturbation.apply` makes a random choice with these parameters (so
            its seed matters; the checklist lists the seed). A deterministic perturbation, or
            one whose parameters fix the choice, declares False."""
            return True

    def __init__(self, **params: Any) -> None:
        self.params = self.Params(**build_params(f"perturbation {self.name!r}", self.Params, params))

    def __call__(self, item: dict[str, Any], seed: int) -> dict[str, Any]:
        return self.apply(item, seed)

    def apply(self, item: dict[str, Any], seed: int) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


class SpaceInsertion(Perturbation):
    """Insert ``n_spaces`` extra blank spaces into the question, never inside a number.

    Each space goes at a uniformly drawn position strictly between two characters of the
    current text, excluding positions strictly inside a number (``NUMBER_RE``), so "3.14",
    "1,000" and "-5" keep their values. The paper does not say how many spaces are inserted
    or whether positions inside words are allowed; we insert one (``n_spaces=1``) anywhere
    outside numbers.
    """

    name, seed_name, source = "space_insertion", "space", "paper 004, A.2"

    class Params(Perturbation.Params):
        DOC: ClassVar[str] = "Study 004: insert extra spaces between words; numbers stay intact."
        OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("n_spaces",)
        n_spaces: int = Field(default=1, ge=1, description="spaces inserted (the paper does not say; one)")

    def apply(self, item: dict[str, Any], seed: int) -> dict[str, Any]:
        return _insert_space(item, seed, self.params.n_spaces)


def _insert_space(item: dict[str, Any], seed: int, n_spaces: int) -> dict[str, Any]:
    rng = random.Random(seed)
    text = _question(item, "insert_space")
    positions: list[int] = []
    for _ in range(n_spaces):
        inside = set()
        for m in NUMBER_RE.finditer(text):
            inside.update(range(m.start() + 1, m.end()))
        allowed = [p for p in range(1, len(text)) if p not in inside]
        if not allowed:
            raise ValueError(f"insert_space: question of item {item.get('id')!r} has no position "
                             "outside numbers to insert a space")
        pos = rng.choice(allowed)
        text = text[:pos] + " " + text[pos:]
        positions.append(pos)
    new = _copy(item)
    new["question"] = text
    new["perturbations"].append({"name": "space", "seed": seed, "positions": positions})
    return new


class OptionShuffle(Perturbation):
    """Shuffle the choices so that the gold option always lands at a new position.

    Draws uniform permutations with ``random.Random(seed).shuffle`` until the gold option's
    index changes (a uniform draw among permutations that move the gold). Returns the item with
    new ``choices`` and ``answer_index``; ``answer`` (the gold text) is unchanged.
    """

    name, seed_name, source = "option_shuffle", "shuffle", "paper 004, A.2"

    class Params(Perturbation.Params):
        DOC: ClassVar[str] = "Study 004: shuffle the options so that the gold option always moves."

    def apply(self, item: dict[str, Any], seed: int) -> dict[str, Any]:
        return _shuffle_options(item, seed)


def _shuffle_options(item: dict[str, Any], seed: int) -> dict[str, Any]:
    choices = item.get("choices")
    idx = item.get("answer_index")
    if not isinstance(choices, list) or len(choices) < 2:
        raise ValueError(f"shuffle_options: item {item.get('id')!r} needs at least 2 choices")
    if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(choices):
        raise ValueError(f"shuffle_options: item {item.get('id')!r} needs a valid answer_index, got {idx!r}")
    rng = random.Random(seed)
    order = list(range(len(choices)))
    while True:
        rng.shuffle(order)
        if order.index(idx) != idx:
            break
    new = _copy(item)
    new["choices"] = [choices[i] for i in order]
    new["answer_index"] = order.index(idx)
    new["perturbations"].append({"name": "shuffle", "seed": seed, "order": order})
    return new


@lru_cache(maxsize=4096)
def _candidate_words(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of letter runs inside whitespace tokens that contain no digit (cached: the
    same question gets a typo under several seeds and in several variants)."""
    spans = []
    for tok in _TOKEN_RE.finditer(text):
        g = tok.group()
        if g.isalpha():  # the common case: one run, the whole token (letters are never digits)
            spans.append(tok.span())
            continue
        if any(ch.isdigit() for ch in g):
            continue
        for m in _LETTERS_RE.finditer(g):
            spans.append((tok.start() + m.start(), tok.start() + m.end()))
    return tuple(spans)


class Typo(Perturbation):
    """Add, delete or swap one letter in one random non-numeric word of the question.

    A word is a run of letters inside a whitespace-separated token that has no digit (so
    "H2O" or "1990s" are never edited). The word is drawn uniformly, then the operation
    uniformly among those that change it: ``add`` (a random lowercase ASCII letter at a random
    position of the word), ``delete`` (one letter; words of 2+ letters) and ``swap`` (two
    adjacent, different letters).
    """

    name, seed_name, source = "typo", "typo", "paper 004, A.2"

    class Params(Perturbation.Params):
        DOC: ClassVar[str] = "Study 004: add, delete or swap one letter in a random non-numeric word of the question."

    def apply(self, item: dict[str, Any], seed: int) -> dict[str, Any]:
        return _add_typo(item, seed)


def _add_typo(item: dict[str, Any], seed: int) -> dict[str, Any]:
    text = _question(item, "add_typo")
    words = _candidate_words(text)
    if not words:
        raise ValueError(f"add_typo: question of item {item.get('id')!r} has no non-numeric word")
    rng = random.Random(seed)
    start, end = rng.choice(words)
    word = text[start:end]
    swaps = [i for i in range(len(word) - 1) if word[i] != word[i + 1]]
    ops = ["add"] + (["delete"] if len(word) >= 2 else []) + (["swap"] if swaps else [])
    op = rng.choice(ops)
    if op == "add":
        pos = rng.randrange(len(word) + 1)
        new_word = word[:pos] + rng.choice(string.ascii_lowercase) + word[pos:]
    elif op == "delete":
        pos = rng.randrange(len(word))
        new_word = word[:pos] + word[pos + 1:]
    else:
        pos = rng.choice(swaps)
        new_word = word[:pos] + word[pos + 1] + word[pos] + word[pos + 2:]
    new = _copy(item)
    new["question"] = text[:start] + new_word + text[end:]
    new["perturbations"].append({"name": "typo", "seed": seed, "op": op, "offset": start,
                                 "word": word, "new_word": new_word})
    return new


# ----------------------------------------------------------------------------- one-shot examples

# Paper 004, appendix A.3, Table 4 (verbatim texts; the answer letter is the gold).
ONESHOT_EXAMPLES: dict[str, tuple[dict[str, Any], ...]] = {
    "mmlu": (
        {"question": "Who sings 'Here Comes the Sun'?",
         "choices": ["Led Zeppelin", "Queen", "Pink Floyd", "The Beatles"], "answer_index": 3},
        {"question": "What is 2+2?", "choices": ["3", "4", "5", "6"], "answer_index": 1},
        {"question": "What is the capital of France?",
         "choices": ["Berlin", "Madrid", "Paris", "Rome"], "answer_index": 2},
        {"question": "What is the chemical symbol for water?",
         "choices": ["H2O", "CO2", "NaCl", "O2"], "answer_index": 0},
    ),
    "hellaswag": (
        {"question": "When the lights went out during the storm, they",
         "choices": ["started watching a movie.", "lit some candles.", "opened the refrigerator.",
                     "went swimming in the river"], "answer_index": 1},
        {"question": "After the baby started crying, the mother",
         "choices": ["picked up the baby to comfort it.", "paint the ceiling with a toothbrush.",
                     "whispered to the toaster.", "opened an umbrella indoors"], "answer_index": 0},
        {"question": "As the sun set over the horizon, the sky turned",
         "choices": ["white.", "completely green.", "a mix of orange and pink.",
                     "into a checkerboard pattern"], "answer_index": 2},
        {"question": "When the doorbell rang, I went to the door and",
         "choices": ["closed the windows.", "started cooking dinner.", "went to bed.",
                     "opened it to see who was there"], "answer_index": 3},
    ),
}


def oneshot_example(bank: str, index: int) -> dict[str, Any]:
    """Example ``index`` (0-3) of a Table 4 bank, with ``answer``, ``labels`` and ``gold_label``."""
    if bank not in ONESHOT_EXAMPLES:
        raise ValueError(f"unknown one-shot bank {bank!r}; choose one of {sorted(ONESHOT_EXAMPLES)}")
    bank_items = ONESHOT_EXAMPLES[bank]
    if not isinstance(index, int) or not 0 <= index < len(bank_items):
        raise ValueError(f"one-shot index must be 0..{len(bank_items) - 1}, got {index!r}")
    ex = dict(bank_items[index])
    ex["choices"] = list(ex["choices"])
    labs = letters(len(ex["choices"]))
    ex["answer"] = ex["choices"][ex["answer_index"]]
    ex["labels"] = labs
    ex["gold_label"] = labs[ex["answer_index"]]
    return ex


class OneShot(Perturbation):
    """Attach a one-shot example as the item's ``oneshot`` field (read by ``s004/*_oneshot``).

    The paper runs each of the four examples of a bank as its own variant (fixed for every
    item), so pass ``index`` (0-3) to reproduce it; with ``index=None`` the example is drawn
    with ``random.Random(seed)``. A spec that names no ``bank`` gets hellaswag for datasets named
    so, else mmlu (the planner's choice); called directly, ``bank`` is required.
    """

    name, seed_name, source = "one_shot", "one_shot", "paper 004, A.3 (Table 4)"

    class Params(Perturbation.Params):
        DOC: ClassVar[str] = ("Study 004: prefix one solved example (Table 4): a fixed index of a bank, "
                              "or a seeded draw.")
        bank: Literal["mmlu", "hellaswag"] | None = None  # default: hellaswag for datasets named so, else mmlu
        index: int | None = Field(default=None, ge=0, le=3)

        def draws(self) -> bool:
            return self.index is None  # a fixed index: no draw

    def apply(self, item: dict[str, Any], seed: int) -> dict[str, Any]:
        if self.params.bank is None:
            raise ValueError(f"one_shot: item {item.get('id')!r}: no one-shot bank given; choose one of "
                             f"{sorted(ONESHOT_EXAMPLES)}")
        return _one_shot(item, seed, self.params.bank, self.params.index)


def _one_shot(item: dict[str, Any], seed: int, bank: str, index: int | None) -> dict[str, Any]:
    if "oneshot" in item:
        raise ValueError(f"one_shot: item {item.get('id')!r} already has a 'oneshot' field")
    if bank not in ONESHOT_EXAMPLES:
        raise ValueError(f"unknown one-shot bank {bank!r}; choose one of {sorted(ONESHOT_EXAMPLES)}")
    chosen = random.Random(seed).randrange(len(ONESHOT_EXAMPLES[bank])) if index is None else index
    new = _copy(item)
    new["oneshot"] = oneshot_example(bank, chosen)
    new["perturbations"].append({"name": "one_shot", "seed": seed, "bank": bank, "index": chosen})
    return new


# The component registry's ``perturbation`` entries: the class is the implementation and its
# ``Params`` the schema (auditlang/core/registry.py reads it); the seed name is an alias.
for _cls in (SpaceInsertion, OptionShuffle, Typo, OneShot):
    REGISTRY.register("perturbation", _cls.name, impl=_cls, seed_name=_cls.seed_name or _cls.name,
                      aliases=(_cls.seed_name,) if _cls.seed_name not in ("", _cls.name) else ())

# constructor name (space_insertion, ...; the short names space/shuffle are aliases) -> class
PERTURBATIONS: Mapping[str, Callable[..., Any]] = REGISTRY.view("perturbation")


def insert_space(item: dict[str, Any], seed: int, **params: Any) -> dict[str, Any]:
    """:class:`SpaceInsertion` as a function (``n_spaces=``)."""
    return SpaceInsertion(**params)(item, seed)


def shuffle_options(item: dict[str, Any], seed: int, **params: Any) -> dict[str, Any]:
    """:class:`OptionShuffle` as a function."""
    return OptionShuffle(**params)(item, seed)


def add_typo(item: dict[str, Any], seed: int, **params: Any) -> dict[str, Any]:
    """:class:`Typo` as a function."""
    return Typo(**params)(item, seed)


def one_shot(item: dict[str, Any], seed: int, **params: Any) -> dict[str, Any]:
    """:class:`OneShot` as a function (``bank=``, ``index=``)."""
    return OneShot(**params)(item, seed)


def apply_perturbation(item: dict[str, Any], name: str, base_seed: int, **options: Any) -> dict[str, Any]:
    """Apply perturbation ``name`` (a constructor name or its short alias) with the per-item seed
    ``seed_for(base_seed, item['id'], seed_name)``; ``seed_name`` is the short name (space,
    shuffle, typo, one_shot)."""
    try:
        entry = REGISTRY.get("perturbation", name)
    except RegistryError as e:
        raise ValueError(f"unknown perturbation {name!r}; {e.hint}") from None
    if "id" not in item:
        raise ValueError(f"perturbation {name!r} needs items with an 'id' (used to derive the seed)")
    seed = seed_for(base_seed, str(item["id"]), entry.meta.get("seed_name", entry.name))
    impl = entry.load()
    if isinstance(impl, type) and issubclass(impl, Perturbation):
        return impl(**options)(item, seed)
    return impl(item, seed, **options)  # a function registered with its own schema= (older plugins)
