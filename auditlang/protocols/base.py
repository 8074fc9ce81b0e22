"""The protocol-program interface and the per-item context shared by every program."""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any

from auditlang.core.requests import Message, Prompt, Request, RequestMaker, Result
from auditlang.resolve.templates import compile_obj
from auditlang.prompts.context import build_context
from auditlang.prompts.render import letters
from auditlang.prompts.seeds import request_seed
from auditlang.core.requests import Sample



def invariant(ok: bool, message: str) -> None:
    """An internal assertion: the resolver (resolve/protocol_checks.py E159, resolve/checks.py)
    rejects every spec that could break it, so a failure here is a bug, never a user mistake."""
    if not ok:
        raise AssertionError(f"internal: {message} (auditc check should have rejected this spec)")

RENDERS = "_renders"  # ItemCtx.extras key of the planner's shared render cache


@lru_cache(maxsize=1024)
def _answer_maker(model: str, max_tokens, _mt_type, temperature: float, top_p, top_k, first: int):
    return RequestMaker(model, "generate", seed=0, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                        top_k=top_k, top_logprobs=0, first_top_logprobs=first or None)


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
        if user_text is None and assistant_prefix is None:
            cached = self.extras.get("_prompt")
            if cached is None:
                cached = self.extras["_prompt"] = self._prompt(None, None)
            return cached
        return self._prompt(user_text, assistant_prefix)

    def _prompt(self, user_text: str | None, assistant_prefix: str | None) -> Prompt:
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

    def sampling_seed(self, purpose: str, base: int | None = None) -> int:
        """The seed of this item's sampled request for ``purpose`` (``prompts.seeds.request_seed``
        of ``base``, default the model seed, the item id and the purpose): distinct per item and
        per purpose, so no two sampled requests share a random stream. Greedy requests keep the
        model seed (it changes nothing they return)."""
        return request_seed(self.seed if base is None else base, str(self.item.get("id")), purpose)

    def request_seed(self, temperature: float | None, purpose: str, base: int | None = None) -> int:
        """:meth:`sampling_seed` for a sampled request (``temperature > 0``), else the model seed."""
        return self.sampling_seed(purpose, base) if temperature else self.seed

    def answer_request(self) -> Request:
        """The answer-scoring generation shared by every protocol of a cell: greedy unless the
        variant sets a temperature (study 003 samples its answers at temperature 1.0; its seed is
        then ``sampling_seed("answer")``). Built once per context (the planner asks for it once
        per protocol)."""
        cached = self.extras.get("_answer_request")
        if cached is not None:
            return cached
        req = self._answer_request()
        self.extras["_answer_request"] = req
        return req

    def _answer_request(self) -> Request:
        temperature = float(self.extras.get("temperature", 0.0))
        top_p = self.extras.get("top_p")
        top_k = self.extras.get("sample_top_k")  # sampling top-k (request param top_k); none = off
        first = int(self.extras.get("first_window") or 0) if temperature == 0 else 0
        top_p = float(top_p) if temperature > 0 and top_p is not None else None
        top_k = int(top_k) if temperature > 0 and top_k else None
        # every item of a unit shares these: one RequestMaker (typed key: 1, 1.0 and True differ)
        mt, seed = self.answer_max_tokens, self.request_seed(temperature, "answer")
        return _answer_maker(self.model.id, mt, type(mt), temperature, top_p, top_k, first)(self.prompt(), seed)

    # ------------------------------------------------------------ protocol helpers
    def prefilled(self, user_text: str, prefill: str) -> Prompt:
        """``user_text`` answered by an assistant prefill the model continues (study 001, §3.3).

        Chat models: [user: user_text, assistant: prefill] (the engine continues the final
        message). Base models: raw ``user_text + "\n" + prefill``; the newline is left out when
        ``user_text`` already ends with whitespace (the Tian et al. format puts ``Guess:`` on its
        own line).
        """
        if self.model.chat:
            return self.prompt(user_text, assistant_prefix=prefill)
        sep = "" if not user_text or user_text[-1].isspace() else "\n"
        return self.prompt(user_text + sep, assistant_prefix=prefill)

    def render(self, tpl) -> str:
        """``tpl`` rendered with this item's context and no protocol variables. The text depends
        on the item only, not on the model, so the planner shares one cache (``extras["_renders"]``)
        across every model's context of an item: each prompt is rendered once."""
        cache = self.extras.get(RENDERS)
        if cache is None:
            return tpl.render(self.template_context())
        key = (id(tpl), id(self.item))
        hit = cache.get(key)
        if hit is not None and hit[0] is tpl and hit[1] is self.item:  # the objects are held: ids not reused
            return hit[2]
        text = tpl.render(self.template_context())
        cache[key] = (tpl, self.item, text)
        return text

    def template_context(self, **protocol: Any) -> dict[str, Any]:
        """Template context of this item plus protocol variables (``proposed_answer``, ...).

        ``item`` may be a raw normalised item or an already built context (the planner stores
        the context, which has ``labels``/``gold_label``/``examples``); protocol variables must
        not shadow item fields.
        """

        if "labels" not in self.item:
            return build_context(self.item, **protocol)
        shadow = sorted(k for k in protocol if k in self.item)
        if shadow:
            raise ValueError(f"protocol variable(s) {shadow} would shadow item fields of item "
                             f"{self.item.get('id')!r}; choose other names")
        ctx = dict(self.item)
        ctx.update(protocol)
        return ctx

    def valid_labels(self) -> list[str] | None:
        """Option letters of a multiple-choice / classification item (``None`` for free-form QA)."""
        if self.labels:
            return list(self.labels)
        choices = self.item.get("choices")
        if isinstance(choices, list) and choices:

            return letters(len(choices))
        return None

    def gold_answer(self) -> str | None:
        """The gold answer as the model would write it: the gold letter for multiple-choice and
        classification tasks, the gold text for free-form QA (``None`` when unknown)."""
        if self.task in ("multiple_choice", "classification"):
            labs = self.valid_labels()
            idx = self.item.get("answer_index")
            if labs and isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < len(labs):
                return labs[idx]
            return None
        ans = self.item.get("answer")
        return None if ans is None else str(ans)


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
    # the confidence is a number stated in the reply and read by a verbal parser, so the verbal
    # parse rate (VPR) applies to its cells; elsewhere VPR is n/a (empty in cells.csv, NaN in the API)
    verbal_parse: bool = False
    # the confidence is a probability that the scored answer is right, drawn in the report's
    # reliability diagrams (report/figures.py) as read from the answer's tokens ("token", circles)
    # or asked for by a question about the answer ("asked", squares); "": not drawn (decisions,
    # agreement rates and fitted scores)
    reliability_diagram: str = ""
    # read() takes keyword arguments ``extract`` / ``same`` (the cell evaluator's answer
    # extraction and equivalence) -- self-consistency, and Platt scaling over it.
    accepts_extract: bool = False

    def __init__(self, obj, spec) -> None:
        self.obj = obj
        self.p = obj.value
        self.spec = spec

    def stage1_roles(self) -> dict[str, str]:
        """Names and kinds of the stage-1 requests (plan-time counting without data)."""
        return {}

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        return {}

    def first_window(self) -> int:
        """k when this protocol's stage 1 is the first step of the greedy answer generation with a
        top-k window (the planner folds it into the answer request); 0 otherwise."""
        return 0

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return {}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        return {}

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        raise NotImplementedError

    # ------------------------------------------------------------ supplied candidates (cross stage)
    def answer_conditioned(self) -> bool:
        """True when the confidence is a function of the answer shown to the model, so the
        program can score an answer it did not generate (another model's answer, the answer of
        another prompt, a sampled answer: see auditlang/plan/crossdata.py). Programs whose
        confidence ignores the answer (first-token windows, supplied provenances, probes) say no."""
        return False

    def candidate_requests(self, ctx: ItemCtx, results: dict[str, Result], answer_text: str, pred: Any) -> dict[str, Request]:
        """Requests that score ``answer_text`` (with evaluator answer ``pred``) as if it were the
        model's own answer: the program's stage-2 follow-ups built on a substituted answer."""
        return self.stage2(ctx, {**results, "answer": supplied_result(answer_text)}, pred)

    def read_candidate(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        """The confidence of a supplied candidate; ``results`` holds the item's stage-1 results and
        the candidate's requests' results under their roles."""
        return self.read(ctx, {**results, "answer": supplied_result(answer_text)}, pred, answer_text, **kw)

    def describe(self) -> str:
        return self.p.DOC

    def facts(self, chat: bool) -> dict[str, Any]:
        """What the report may say about this protocol, as ``{key: protocols.facts.Fact}`` (keys in
        ``protocols.facts.FACT_KEYS``) for a model given chat messages (``chat``) or plain text.
        A key left out is printed as UNSPECIFIED; the base class declares nothing."""
        return {}

    # ------------------------------------------------------------ dev-split fitting
    def fit(self, dev_rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Fit on the dev split (``needs_dev`` programs); JSON-serialisable parameters.

        ``dev_rows``: one dict per dev item with ``confidence`` (float, NaN allowed),
        ``correct`` (bool or None) and ``extras`` (the dev item's ``Readout.extras``).
        Programs without dev fitting return ``{}``.
        """
        return {}

    def apply(self, fitted: dict[str, Any], readout: Readout) -> Readout:
        """Apply what :meth:`fit` returned to one test readout (identity by default)."""
        return readout

    # ------------------------------------------------------------ helpers
    def template(self, template_id: str):
        """Compile the spec's template object ``template_id`` (cached by the compiler)."""
        return compile_obj(self.spec, self.spec.get(template_id))


# results role of a supplied candidate that is the model's own generation (a self_consistency
# sample scored in the cross stage): its Result, token logprobs included
OWN_GENERATION = "own_generation"


def supplied_result(text: str) -> Result:
    """A stand-in answer generation holding ``text`` (never stored; ids are not real)."""

    return Result(request_id="supplied", kind="generate", samples=[Sample(text=text, tokens=[], finish_reason="stop")])


def generated_text(res: Result | None) -> str:
    if res is None or not res.samples:
        return ""
    return res.samples[0].text or ""


def usable(results: dict[str, Result], role: str) -> Result | None:
    """The result of ``role`` if it exists and the engine did not report an error."""
    res = results.get(role)
    if res is None or res.error is not None:
        return None
    return res


def lead_space(prompt: Prompt) -> str:
    """Separator before a label or teacher-forced continuation that follows ``prompt``.

    The engines tokenise labels and continuations on their own, exactly as written
    (docs/engines.md): after a chat generation prompt the model's first token has no leading
    space ("A"), after raw text or an assistant prefill that ends in a non-space character
    (``Answer:``, ``Guess:``) it does (" A"). Returns ``" "`` in the second case, else ``""``.
    """
    if prompt.text is not None:
        tail = prompt.text
    elif prompt.continue_final:
        tail = prompt.messages[-1].content  # type: ignore[index]
    else:
        return ""
    return "" if not tail or tail[-1].isspace() else " "
