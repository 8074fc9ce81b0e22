"""``loglik_argmax``: multiple-choice accuracy from log-likelihoods, as lm-evaluation-harness
computes it (issue 10 item 3).

No text is generated. For each item the model scores every option after the variant prompt and
the prediction is the option with the highest score:

* ``target=letter``: the option labels (A, B, C, ...) as the next token -- one
  ``choice_logprobs`` request; the prediction is ``argmax_l log P(l | prompt)``. This is the
  argmax over the label log-probabilities that a ``token_prob(window=full)`` protocol stores
  (the request is the same, so a spec with both runs it once).
* ``target=option``: each option's text as a continuation -- one ``continuation_logprobs``
  request per option, the score ``sum_i log p(a_i | prompt, a_<i)`` (lm-eval ``acc``).
  ``normalise=chars`` divides by the option text's length in characters (lm-eval ``acc_norm``),
  ``bytes`` by its UTF-8 length (lm-eval ``acc_bytes``), ``tokens`` by its token count (mean
  per-token log-probability).

The label/continuation follows the prompt with the separator of ``label_form``: ``auto`` (a
space after raw text or a prefill that ends in a non-space character such as ``Answer:``, none
after a chat generation prompt; docs/engines.md), ``space`` (always ``" A"``) or ``bare``
(always ``"A"``). Ties go to the first option in order (numpy's argmax).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from auditlang.core.requests import Prompt, Request, Result
from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.letters import item_labels, letter_correct
from auditlang.evaluators.outcome import ParseOutcome, failure
from auditlang.resolve.schema import Obj

LETTER_WINDOW = 20  # top_logprobs of the letter request: token_prob's default, so the two share it


def separator(label_form: str, auto: str) -> str:
    """What goes between the prompt and a scored label or option text; ``auto`` is the prompt's
    own separator (``auditlang.protocols.base.lead_space``, supplied by the caller)."""
    return {"space": " ", "bare": ""}.get(label_form, auto)


def loglik_requests(model: str, prompt: Prompt, labels: Sequence[str], options: Sequence[str], target: str,
                    label_form: str, seed: int = 0, auto_sep: str = "") -> dict[str, Request]:
    """Role -> request: ``letters`` (one choice_logprobs) or ``option:<k>`` (one continuation each)."""
    sep = separator(label_form, auto_sep)
    if target == "letter":
        return {"letters": Request.make(model, "choice_logprobs", prompt, seed=seed,
                                        choices=[sep + lab for lab in labels], top_logprobs=LETTER_WINDOW)}
    return {f"option:{k}": Request.make(model, "continuation_logprobs", prompt, seed=seed,
                                        continuation=sep + str(opt).strip())
            for k, opt in enumerate(options)}


def _norm(total: float, option: str, n_tokens: int, normalise: str) -> float:
    if normalise == "chars":
        return total / max(len(option), 1)
    if normalise == "bytes":
        return total / max(len(option.encode("utf-8")), 1)
    if normalise == "tokens":
        return total / max(n_tokens, 1)
    return total


def option_scores(results: Mapping[str, Result | None], labels: Sequence[str], options: Sequence[str],
                  target: str, normalise: str) -> list[float] | None:
    """One score per option (NaN where the engine gave none); None when nothing came back."""
    if target == "letter":
        res = results.get("letters")
        if res is None or res.error or not res.choice_logprobs:
            return None
        lps = {k.strip(): v for k, v in res.choice_logprobs.items()}
        return [float(lps.get(lab, math.nan)) for lab in labels]
    scores = []
    for k, opt in enumerate(options):
        res = results.get(f"option:{k}")
        if res is None or res.error or not res.continuation:
            scores.append(math.nan)
            continue
        total = float(sum(t.logprob for t in res.continuation))
        scores.append(_norm(total, str(opt).strip(), len(res.continuation), normalise))
    return None if all(math.isnan(s) for s in scores) else scores


def argmax_label(scores: Sequence[float], labels: Sequence[str]) -> str | None:
    """The label of the highest score; the first on ties; None if any score is missing."""
    if any(math.isnan(s) for s in scores):
        return None
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return labels[best]


class LoglikArgmaxEvaluator(Evaluator):
    """``loglik_argmax``: the option with the highest (normalised) log-likelihood."""

    PROSE = "the label of highest log-likelihood"  # the rule in a few words (report/methods.py)

    name = "loglik_argmax"
    source = ("lm-evaluation-harness multiple_choice (acc, acc_norm); issue 10 item 3 (study 000 A.3 letter "
              "labels, study 001 §3.1 teacher-forced option scores)")
    requires_model = True

    class Params(Obj):
        DOC: ClassVar[str] = ("Multiple-choice accuracy as lm-evaluation-harness computes it: argmax over the option "
                              "labels' (or option texts') log-likelihoods; no generation is read.")
        target: Literal["letter", "option"] = Field(
            "letter", description="score the option labels (one token) or the option texts (continuations)")
        normalise: Literal["none", "chars", "bytes", "tokens"] = Field(
            "none", description="target=option: divide the summed log-probability by the option's length (acc_norm: chars)")
        label_form: Literal["auto", "space", "bare"] = Field("auto", description="separator before the scored label/text")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["target"] == "letter" and self.params["normalise"] != "none":
            raise ValueError(f"evaluator {self.name!r}: normalise={self.params['normalise']!r} applies to target='option'; "
                             "a letter label is one token")

    def describe(self) -> str:
        p = self.params
        sep = {"auto": "the prompt's own separator (a space after text ending in a non-space character)",
               "space": "a leading space", "bare": "no leading space"}[p["label_form"]]
        if p["target"] == "letter":
            what = "the log-probability of each option label as the next token after the prompt"
        else:
            norm = {"none": "summed", "chars": "summed and divided by the option's length in characters (lm-eval acc_norm)",
                    "bytes": "summed and divided by the option's UTF-8 length in bytes",
                    "tokens": "averaged over the option's tokens"}[p["normalise"]]
            what = f"the log-probability of each option text as a continuation of the prompt, {norm}"
        return (f"Log-likelihood argmax (lm-evaluation-harness multiple-choice accuracy; label tokens as in study 000 "
                f"App. A.3): {what}, with "
                f"{sep}; the prediction is the option with the highest score (first on ties); no text is generated.")

    def requests(self, model: str, prompt: Prompt, item: Mapping[str, Any], seed: int = 0,
                 auto_sep: str = "") -> dict[str, Request]:
        """The log-likelihood requests of one item; ``auto_sep`` is ``lead_space(prompt)``."""
        labels = item_labels(item, self.name)
        options = list(item.get("choices") or [])
        return loglik_requests(model, prompt, labels, options, self.params["target"], self.params["label_form"], seed,
                               auto_sep)

    def label_results(self, results: Mapping[str, Result | None], item: Mapping[str, Any]) -> ParseOutcome:
        labels = item_labels(item, self.name)
        options = list(item.get("choices") or [])
        scores = option_scores(results, labels, options, self.params["target"], self.params["normalise"])
        if scores is None:
            return failure("loglik_missing")
        pred = argmax_label(scores, labels)
        if pred is None:
            return failure("loglik_incomplete")
        return ParseOutcome(pred, True, f"loglik_{self.params['target']}")

    def label(self, text: str, item: Mapping[str, Any]) -> ParseOutcome:
        """The text is not read: the prediction comes from the log-likelihood requests."""
        return failure("needs_loglik")

    def correct(self, pred: Any, item: Mapping[str, Any]) -> bool | None:
        return letter_correct(pred, item)
