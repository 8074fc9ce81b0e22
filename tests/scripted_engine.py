"""A scripted engine for spec-level scoring tests: ``auditc run`` on a real spec, with model
outputs chosen by the test instead of a model.

``use_scripted_engine(monkeypatch, script)`` makes the ``hf`` engine name load
:class:`ScriptedEngine`; ``script(request) -> Result | None`` answers each request (None: the
default answer for its kind — an empty generation, equal label logprobs, a one-token
continuation of logprob -1, the first choice forced). Everything else (compile, plan, journal,
scoring, metrics, report) is the real path a user takes.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from auditlang.core.engine import ModelConfig
from auditlang.core.requests import Request, Result, Sample, TokenLogprob

Script = Callable[[Request], "Result | None"]


def number_items(n: int) -> str:
    """JSONL of ``n`` multiple-choice items "Which number is i?" (choices i..i+3, gold i)."""
    import json

    return "".join(json.dumps({"id": f"q{i}", "question": f"Which number is {i}?",
                               "choices": [str(i), str(i + 1), str(i + 2), str(i + 3)], "answer": str(i)}) + "\n"
                   for i in range(n))


def generation(req: Request, text: str) -> Result:
    tok = TokenLogprob(token=text[:1] or " ", token_id=1, logprob=-0.1, top={text[:1] or " ": -0.1})
    return Result(request_id=req.id, kind=req.kind, samples=[Sample(text=text, tokens=[tok])])


def prompt_text(req: Request) -> str:
    p = req.prompt
    return p.text if p.text is not None else "\n".join(m.content for m in p.messages or ())


def _default(req: Request) -> Result:
    if req.kind == "generate":
        return generation(req, "")
    if req.kind == "choice_logprobs":
        lps = {c: -1.0 for c in req.p["choices"]}
        return Result(request_id=req.id, kind=req.kind, choice_logprobs=lps, top_logprobs=dict(lps))
    if req.kind == "continuation_logprobs":
        return Result(request_id=req.id, kind=req.kind,
                      continuation=[TokenLogprob(token=req.p["continuation"], token_id=1, logprob=-1.0)])
    if req.kind == "constrained_choice":
        return Result(request_id=req.id, kind=req.kind, choice=req.p["choices"][0])
    return Result(request_id=req.id, kind=req.kind, hidden_state=[0.0] * 4)


class ScriptedEngine:
    script: Script = staticmethod(lambda req: None)
    seen: list[Request] = []

    def __init__(self, config: ModelConfig) -> None:
        self.config = config

    def capabilities(self) -> frozenset[str]:
        from auditlang.core.requests import REQUEST_KINDS

        return frozenset(REQUEST_KINDS)

    def fingerprint(self) -> dict[str, Any]:
        return {"engine": "scripted", "model": self.config.path}

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        for req in requests:
            type(self).seen.append(req)
            yield type(self).script(req) or _default(req)

    def close(self) -> None:
        pass


class StreamingScriptedEngine(ScriptedEngine):
    """Takes its requests as vLLM's engine does (``streams = True``): from the executor's feed,
    a few at a time, asking it to refill when none is left, so follow-ups built from the results
    it yielded join the same ``run`` call. ``calls`` counts ``run`` calls."""

    streams = True
    calls = 0

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        from auditlang.core.engine import Feed

        type(self).calls += 1
        feed = requests if isinstance(requests, Feed) else Feed(requests)
        queue: list[Request] = []
        while True:
            queue += feed.take()
            if not queue and not feed.refill():
                return
            for req in queue[:3]:  # a few per step, as a continuous batch finishes them
                type(self).seen.append(req)
                yield type(self).script(req) or _default(req)
            del queue[:3]


def use_scripted_engine(monkeypatch, script: Script, streaming: bool = False) -> type[ScriptedEngine]:
    import dataclasses

    from auditlang.core.registry import REGISTRY

    base = StreamingScriptedEngine if streaming else ScriptedEngine
    cls = type("Scripted", (base,), {"script": staticmethod(script), "seen": [], "calls": 0})
    mod = types.ModuleType("auditlang_test_scripted_engine")
    mod.ScriptedEngine = cls  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    hf = REGISTRY.get("engine", "hf")  # the hf entry, served by the scripted class (restored after the test)
    monkeypatch.setitem(REGISTRY._entries["engine"], "hf", dataclasses.replace(hf, impl=f"{mod.__name__}:ScriptedEngine"))
    return cls
