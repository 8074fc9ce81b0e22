"""The protocol-program interface and the per-item context shared by every program."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from auditlang.plan.requests import Message, Prompt, Request, Result


@dataclass(frozen=True)
class ModelInfo:
    id: str
    chat: bool
    max_tokens: int
    seed: int


@dataclass
class ItemCtx:
    """Everything a program needs about one (model, dataset, variant, item)."""

    model: ModelInfo
    dataset: str
    task: str
    split: str  # "test" | "dev"
    index: int  # index into the dataset file
    item: dict[str, Any]  # normalised (and perturbed) item
    variant: str
    user_text: str  # the rendered answer prompt
    system_text: str | None
    answer_max_tokens: int
    seed: int
    labels: list[str] | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------- prompts
    def prompt(self, user_text: str | None = None, assistant_prefix: str | None = None) -> Prompt:
        """The answer prompt as this model sees it (chat messages, or raw text for base models)."""
        text = self.user_text if user_text is None else user_text
        if self.model.chat:
            msgs = []
            if self.system_text:
                msgs.append(Message("system", self.system_text))
            msgs.append(Message("user", text))
            if assistant_prefix is not None:
                msgs.append(Message("assistant", assistant_prefix))
            return Prompt(messages=tuple(msgs))
        raw = (self.system_text + "\n\n" if self.system_text else "") + text
        if assistant_prefix is not None:
            raw = raw + assistant_prefix
        return Prompt(text=raw)

    def followup(self, answer_text: str, followup_text: str, assistant_prefix: str | None = None) -> Prompt:
        """A follow-up turn after the model's (or a supplied) answer.

        Chat models: [user: prompt, assistant: answer, user: follow-up]. Base models: the raw
        text ``prompt + answer + "\\n\\n" + follow-up + "\\n"`` (documented in docs/protocols.md).
        """
        if self.model.chat:
            msgs = []
            if self.system_text:
                msgs.append(Message("system", self.system_text))
            msgs += [Message("user", self.user_text), Message("assistant", answer_text), Message("user", followup_text)]
            if assistant_prefix is not None:
                msgs.append(Message("assistant", assistant_prefix))
            return Prompt(messages=tuple(msgs))
        raw = (self.system_text + "\n\n" if self.system_text else "") + self.user_text + answer_text + "\n\n" + followup_text + "\n"
        return Prompt(text=raw + (assistant_prefix or ""))

    def answer_request(self) -> Request:
        """The greedy answer-scoring generation (shared by every protocol of a cell)."""
        return Request.make(self.model.id, "generate", self.prompt(), seed=self.seed,
                            max_tokens=self.answer_max_tokens, temperature=0.0, top_logprobs=0)


@dataclass
class Readout:
    """What a program reads back for one item (before the evaluator's label is known)."""

    confidence: float = math.nan
    parsed: bool = True
    kind: str = ""
    abstain: bool | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Program:
    """Base class: subclasses override the hooks they need.

    ``roles1`` / ``stage1``: named stage-1 requests (the answer request is added by the planner).
    ``roles2``: names and kinds of stage-2 requests, for plan-time counting.
    ``stage2``: build stage-2 requests from stage-1 results (and the evaluator's label).
    ``read``: turn results into a :class:`Readout`.
    ``needs_dev``: the program fits something on the dev split (thresholds, Platt, probes).
    """

    needs_dev: bool = False

    def __init__(self, obj, spec) -> None:
        self.obj = obj
        self.p = obj.value
        self.spec = spec

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        return {}

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return {}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        return {}

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        raise NotImplementedError

    def describe(self) -> str:
        return self.p.DOC


def program_for(obj, spec) -> Program:
    from auditlang.protocols import consistency, probes, token, verbal

    table = {
        "token_prob": token.TokenProgram,
        "verbalized": verbal.VerbalProgram,
        "p_true": verbal.PTrueProgram,
        "self_consistency": consistency.SelfConsistencyProgram,
        "nota": probes.NotaProgram,
        "more_info": probes.MoreInfoProgram,
        "self_ref": probes.SelfRefProgram,
        "ask_cal": probes.AskCalProgram,
        "tok_prob_probe": probes.TokProbProbeProgram,
        "embedding_probe": probes.EmbeddingProgram,
        "platt": probes.PlattProgram,
    }
    return table[obj.ctor](obj, spec)


def generated_text(res: Result | None) -> str:
    if res is None or not res.samples:
        return ""
    return res.samples[0].text or ""
