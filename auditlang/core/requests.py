"""Model requests: the unit of work an engine executes, and the result it returns.

This module is the contract between the planner (which creates requests), the engines
(which execute them) and the store (which journals results). It imports no engine.

A request is content-addressed: ``Request.id`` is a hash of everything that can change the
engine's answer (model reference, kind, prompt, parameters, seed). Two cells that need the
same thing share one request.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
import typing
from typing import Any, Literal
from dataclasses import asdict

RequestKind = Literal[
    "generate",  # free generation; n samples; chosen-token logprobs and top-k window per position
    "choice_logprobs",  # next-token full-vocabulary logprobs of each label's first token + top-k window
    "continuation_logprobs",  # teacher forcing: per-token logprobs of `continuation` given the prompt
    "constrained_choice",  # one label forced among `choices` (never a confidence source)
    "hidden_states",  # hidden state of the last prompt token at `layer`
]

REQUEST_KINDS: tuple[str, ...] = typing.get_args(RequestKind)  # the kinds, said once (above)


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Prompt:
    """What the model sees.

    Exactly one of ``text`` (raw completion prompt, used for base models / ``chat=off``) and
    ``messages`` (chat; the engine applies the model's chat template) is set. When the last
    message has role ``assistant`` the engine *continues* it (assistant prefill: the chat
    template is applied without a generation prompt and the final message is left open).
    """

    text: str | None = None
    messages: tuple[Message, ...] | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.messages is None):
            raise ValueError("Prompt needs exactly one of text= or messages=")

    @property
    def continue_final(self) -> bool:
        return bool(self.messages) and self.messages[-1].role == "assistant"

    def to_dict(self) -> dict[str, Any]:
        if self.text is not None:
            return {"text": self.text}
        return {"messages": [{"role": m.role, "content": m.content} for m in self.messages or ()]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Prompt":
        if "text" in d and d["text"] is not None:
            return Prompt(text=d["text"])
        return Prompt(messages=tuple(Message(m["role"], m["content"]) for m in d["messages"]))


@dataclass(frozen=True)
class Request:
    """One unique model request.

    ``params`` by kind (all optional unless stated):
      generate: max_tokens (int, required), temperature (float, 0 = greedy), top_p, n (samples),
                top_logprobs (k of the per-position window, 0 = none), stop (list[str]),
                top_k (SAMPLING top-k, vLLM semantics: keep the k most probable tokens after
                temperature and before top_p; absent, 0 or -1 = off; ignored when greedy;
                the logprob window is top_logprobs, never top_k), first_top_logprobs (a wider
                window at the first generated position only: the planner folds a one-token
                top-k confidence call into the greedy answer generation of the same prompt)
      choice_logprobs: choices (list[str], required), top_logprobs (k)
      continuation_logprobs: continuation (str, required)
      constrained_choice: choices (list[str], required)
      hidden_states: layer (int, default -1)
    ``seed`` is always recorded (sampling seeds; greedy requests carry it too).
    """

    model: str  # the spec's model name (the engine is chosen by the model declaration)
    kind: str
    prompt: Prompt
    params: tuple[tuple[str, Any], ...] = ()
    seed: int = 0
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in REQUEST_KINDS:
            raise ValueError(f"unknown request kind {self.kind!r}")
        if not self.id:
            object.__setattr__(self, "id", _request_id(self.model, self.kind, self.prompt, self.params, self.seed))

    @property
    def p(self) -> dict[str, Any]:
        return dict(self.params)

    @staticmethod
    def make(model: str, kind: str, prompt: Prompt, seed: int = 0, **params: Any) -> "Request":
        types = tuple(map(type, params.values()))
        if _PLAIN.issuperset(types) and type(seed) is int:
            # scalars: the values with their types (1, 1.0 and True apart) key one maker
            key = (model, kind, seed, tuple(params.items()), types)
            mk = _MAKERS.get(key)
            if mk is None:
                if len(_MAKERS) > 10_000:
                    _MAKERS.clear()
                mk = _MAKERS[key] = RequestMaker(model, kind, seed, **params)
            return mk(prompt)
        if all(type(v) in _PLAIN or (type(v) in (list, tuple) and all(type(x) in _PLAIN for x in v))
               for v in params.values()):
            # repr is faithful for these values (and keeps 1, 1.0 and True apart): one maker per key
            key = (model, kind, repr(params))
            mk = _MAKERS.get(key)
            if mk is None:
                if len(_MAKERS) > 10_000:
                    _MAKERS.clear()
                mk = _MAKERS[key] = RequestMaker(model, kind, 0, **params)
            return mk(prompt, seed)
        return Request(model=model, kind=kind, prompt=prompt, params=_freeze(params), seed=seed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "kind": self.kind,
            "prompt": self.prompt.to_dict(),
            "params": _thaw(dict(self.params)),
            "seed": self.seed,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Request":
        r = Request(
            model=d["model"], kind=d["kind"], prompt=Prompt.from_dict(d["prompt"]),
            params=_freeze(d.get("params", {})), seed=int(d.get("seed", 0)),
        )
        return r


def _fz(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_fz(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _fz(x)) for k, x in v.items()))
    return v


_SCALARS = frozenset({int, float, str, bool})


def _freeze(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    # keys are distinct, so sorting the pairs compares keys only
    return tuple(sorted([(k, v if type(v) in _SCALARS else _fz(v)) for k, v in params.items() if v is not None]))


def _thaw(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_thaw)


def prompt_digest(prompt: Prompt) -> str:
    """SHA-256 of the prompt's canonical JSON; cached on the prompt object (not a field: equality,
    hashing and serialisation ignore it) and by value, since many requests share one prompt."""
    got = prompt.__dict__.get("_digest")
    if got is None:
        got = prompt.__dict__["_digest"] = _prompt_digest(prompt)
    return got


@lru_cache(maxsize=200_000)
def _prompt_digest(prompt: Prompt) -> str:
    return hashlib.sha256(canonical_json(prompt.to_dict()).encode("utf-8")).hexdigest()


def request_hash(model: str, kind: str, prompt: Prompt, params: dict[str, Any], seed: int) -> str:
    payload = canonical_json({"m": model, "k": kind, "p": prompt_digest(prompt), "a": _thaw(params), "s": seed})
    return "r" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]


def _request_id(model: str, kind: str, prompt: Prompt, params: tuple[tuple[str, Any], ...], seed: int) -> str:
    """:func:`request_hash` of a request's frozen ``params``, byte for byte, without encoding the
    whole payload each time: the payload's canonical JSON is assembled from cached pieces (keys
    sorted: a, k, m, p, s). The planner makes millions of requests that differ only in the prompt."""
    try:
        a = _params_json(repr(params), params)  # repr keeps 1, 1.0 and True apart (equal as keys)
    except TypeError:  # unhashable parameter values: the plain path
        return request_hash(model, kind, prompt, dict(params), seed)
    s = str(seed) if type(seed) is int else canonical_json(seed)
    payload = f'{{"a":{a},"k":{_json_str(kind)},"m":{_json_str(model)},"p":"{prompt_digest(prompt)}","s":{s}}}'
    return "r" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]


_PLAIN = frozenset({int, float, str, bool, type(None)})
_MAKERS: dict[tuple, "RequestMaker"] = {}


class RequestMaker:
    """Requests of one model, kind, seed and parameters that differ only in their prompt (and,
    when the call passes one, their seed: sampled requests get a seed per item): the frozen
    parameters and the payload around the prompt digest are built once, so each request costs
    one prompt digest and one SHA-256 (ids equal :func:`request_hash`'s)."""

    __slots__ = ("model", "kind", "seed", "params", "_head", "_tail")

    def __init__(self, model: str, kind: str, seed: int = 0, **params: Any) -> None:
        if kind not in REQUEST_KINDS:
            raise ValueError(f"unknown request kind {kind!r}")
        self.model, self.kind, self.seed, self.params = model, kind, seed, _freeze(params)
        a = canonical_json(_thaw(dict(self.params)))
        self._head = f'{{"a":{a},"k":{canonical_json(kind)},"m":{canonical_json(model)},"p":"'
        self._tail = f'","s":{str(seed) if type(seed) is int else canonical_json(seed)}}}'

    def __call__(self, prompt: Prompt, seed: int | None = None) -> Request:
        if seed is None or (seed == self.seed and type(seed) is type(self.seed)):
            seed, tail = self.seed, self._tail
        else:
            tail = f'","s":{str(seed) if type(seed) is int else canonical_json(seed)}}}'
        payload = self._head + prompt_digest(prompt) + tail
        rid = "r" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]
        # the checked fields of Request(...) without its frozen __setattr__ per field (the kind was
        # checked when the maker was built); millions of these per study-scale plan
        r = object.__new__(Request)
        r.__dict__.update(model=self.model, kind=self.kind, prompt=prompt, params=self.params, seed=seed, id=rid)
        return r


_PARAMS_JSON: dict[str, str] = {}


def _params_json(key: str, params: tuple[tuple[str, Any], ...]) -> str:
    got = _PARAMS_JSON.get(key)
    if got is None:
        if len(_PARAMS_JSON) > 100_000:
            _PARAMS_JSON.clear()
        got = _PARAMS_JSON[key] = canonical_json(_thaw(dict(params)))
    return got


@lru_cache(maxsize=4096)
def _json_str(s: str) -> str:
    return canonical_json(s)


# ----------------------------------------------------------------------------- results


@dataclass
class TokenLogprob:
    token: str
    token_id: int
    logprob: float
    # top-k window at this position: token string -> logprob (full-vocabulary, raw logits)
    top: dict[str, float] = field(default_factory=dict)


@dataclass
class Sample:
    text: str
    tokens: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "length" | "error"


@dataclass
class Result:
    """What an engine returns for one request. Every field an evaluator or metric may need.

    by kind:
      generate: samples (n of them)
      choice_logprobs: choice_logprobs (label -> full-vocab logprob of the label's first token),
                       top_logprobs (next-token window, token string -> logprob)
      continuation_logprobs: continuation (list of TokenLogprob over the continuation tokens)
      constrained_choice: choice (the forced label)
      hidden_states: hidden_state (list of floats)
    """

    request_id: str
    kind: str
    samples: list[Sample] | None = None
    choice_logprobs: dict[str, float] | None = None
    top_logprobs: dict[str, float] | None = None
    continuation: list[TokenLogprob] | None = None
    choice: str | None = None
    hidden_state: list[float] | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:

        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any], *, owned: bool = False) -> "Result":
        """``owned``: ``d`` belongs to this result alone (freshly decoded JSON), so each token's
        top-k window is taken as it is instead of copied (the copy was most of the decoding time
        of a generation with a 200-entry first-token window)."""
        def tl(x: dict[str, Any]) -> TokenLogprob:
            top = x.get("top") or {}
            return TokenLogprob(x["token"], int(x["token_id"]), float(x["logprob"]), top if owned else dict(top))

        samples = None
        if d.get("samples") is not None:
            samples = [Sample(s["text"], [tl(t) for t in s.get("tokens") or []], s.get("finish_reason", "stop")) for s in d["samples"]]
        cont = [tl(t) for t in d["continuation"]] if d.get("continuation") is not None else None
        return Result(
            request_id=d["request_id"], kind=d["kind"], samples=samples,
            choice_logprobs=d.get("choice_logprobs"), top_logprobs=d.get("top_logprobs"),
            continuation=cont, choice=d.get("choice"), hidden_state=d.get("hidden_state"),
            error=d.get("error"), meta=d.get("meta") or {},
        )
