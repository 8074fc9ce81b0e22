"""A worked auditlang plugin (docs/plugins.md): one metric, one perturbation, one evaluator.

Installed, it makes three new names usable in any spec:

* metric ``overconfidence`` -- mean(confidence) - accuracy: positive when a model claims more
  than it delivers (a signed companion of ECE);
* perturbation ``shout(seed=...)`` -- the question in upper case (no randomness; ``seed`` is
  accepted like every perturbation's);
* evaluator ``last_letter`` -- the last standalone option letter in the answer text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from auditlang.core.registry import register as register_component
from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.letters import gold_letter, item_labels
from auditlang.evaluators.outcome import ParseOutcome, failure
from auditlang.metrics.registry import register as register_metric
from auditlang.prompts.perturb import Perturbation
from auditlang.resolve.schema import Obj


def overconfidence(conf: np.ndarray, correct: np.ndarray) -> float:
    """mean(confidence) - accuracy (the signed calibration-in-the-large)."""
    conf = np.asarray(conf, dtype=float)
    correct = np.asarray(correct, dtype=float)
    if conf.size == 0:
        raise ValueError("overconfidence: no rows")
    return float(conf.mean() - correct.mean())


class Shout(Perturbation):
    """The item with its question in upper case."""

    name = "shout"
    source = "auditlang-example-plugin"

    class Params(Perturbation.Params):  # the perturbation's parameters, declared once (here: only seed)
        DOC: ClassVar[str] = "Example plugin: the question in upper case."

        def draws(self) -> bool:  # no random choice: the checklist lists no seed for it
            return False

    def apply(self, item: dict[str, Any], seed: int) -> dict[str, Any]:
        out = dict(item)
        out["question"] = str(item.get("question", "")).upper()
        return out


class LastLetterEvaluator(Evaluator):
    name = "last_letter"
    source = "auditlang-example-plugin"
    PROSE = "the last standalone option letter in the answer"  # how the methods paragraph names the rule

    class Params(Obj):  # the evaluator's parameters, declared once (here: none)
        DOC: ClassVar[str] = "Example plugin: the last standalone option letter in the answer."

    def describe(self) -> str:
        return "The last standalone option letter (A, B, ...) anywhere in the answer text."

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        letters = item_labels(item, self.name)
        found = re.findall(r"\b([A-Z])\b", text or "")
        found = [f for f in found if f in letters]
        if not found:
            return failure("no_letter")
        return ParseOutcome(value=found[-1], ok=True, rule="last_letter", span=None)

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        gold = gold_letter(item)
        return None if gold is None else pred == gold


def register() -> None:
    """The ``auditlang.plugins`` entry point: auditlang calls it once per process. Each name is
    registered as ``example.<name>`` (the entry point's name) and, unless a built-in has it, as
    ``<name>``."""
    register_metric("overconfidence", overconfidence, doc="mean(confidence) - accuracy",
                    words="overconfidence (the mean confidence minus accuracy)")  # how methods.tex names it
    register_component("perturbation", "shout", impl=Shout, seed_name="shout")  # its Params: the schema
    register_component("evaluator", "last_letter", impl=LastLetterEvaluator, reads="labels")
