"""Helpers for protocol-program tests: real items from /work/shared/data, hand-built specs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from auditlang.core.diagnostics import Span
from auditlang.core.requests import Result, Sample, TokenLogprob
from auditlang.prompts.context import build_context
from auditlang.prompts.render import compile_stdlib_template
from auditlang.protocols.base import ItemCtx, ModelInfo
from auditlang.protocols.registry import program_for
from auditlang.resolve.schema import CONSTRUCTORS
from auditlang.resolve.spec import Resolved, Spec

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def read_item(name: str, index: int = 0) -> dict[str, Any]:
    path = DATA / f"{name}.jsonl"
    if not path.is_file():
        pytest.skip(f"shared data file {path} not available")
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i == index:
                return json.loads(line)
    raise IndexError(index)


def read_items(name: str, limit: int) -> list[dict[str, Any]]:
    return [read_item(name, i) for i in range(limit)]


class SpecBuilder:
    """A resolved spec built by hand: ``add("p", "protocol", "verbalized", scale=...)``."""

    def __init__(self, tmp: Path) -> None:
        self.spec = Spec(entry=tmp / "t.audit", root=tmp)

    def add(self, oid: str, kind: str, ctor: str, **params: Any) -> Resolved:
        cls = CONSTRUCTORS[kind][ctor]
        obj = Resolved(oid, kind, ctor, cls(**params), Span.point("t.audit"))
        self.spec.objects[oid] = obj
        return obj

    def template(self, oid: str, *, text: str | None = None, file: str | None = None) -> str:
        self.add(oid, "template", "template", text=text, file=file)
        return oid

    def program(self, oid: str, ctor: str, **params: Any):
        return program_for(self.add(oid, "protocol", ctor, **params), self.spec)


def make_ctx(item: dict[str, Any], template: str, *, task: str = "multiple_choice", chat: bool = True,
             dataset: str = "ds", extras: dict[str, Any] | None = None) -> ItemCtx:
    """An ItemCtx as the planner builds it: the item's template context and the rendered prompt."""
    ctx = build_context(item)
    text = compile_stdlib_template(template).render(ctx)
    return ItemCtx(model=ModelInfo("m", chat, 32, 42), dataset=dataset, task=task, split="test", index=0,
                   item=ctx, variant="v", user_text=text, system_text=None, answer_max_tokens=32, seed=42,
                   labels=ctx.get("labels"), extras=extras or {})


def gen_result(text: str, tokens: list[TokenLogprob] | None = None, rid: str = "r") -> Result:
    return Result(request_id=rid, kind="generate", samples=[Sample(text, tokens or [])])


def samples_result(texts: list[str]) -> Result:
    return Result(request_id="s", kind="generate", samples=[Sample(t) for t in texts])


def tok(token: str, logprob: float, top: dict[str, float] | None = None) -> TokenLogprob:
    return TokenLogprob(token, 0, logprob, top or {})
