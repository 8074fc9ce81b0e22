"""What belongs at a cursor position: the schema whose parameters are being written and the
kind of object (or the literal choices) a value there must be.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from auditlang.lsp import docs as D
from auditlang.lsp import symbols
from auditlang.lsp.context import Context
from auditlang.resolve import schema as S


@dataclass
class Slot:
    """The innermost open group: its schema (or metric) and the value expected at the cursor."""

    cls: type[S.Obj] | None = None  # the constructor whose parameters are written in the group
    ctor: str | None = None
    metric: str | None = None  # a metric call's name, e.g. "ece"
    value_kind: str | None = None  # the kind of object expected as a value (REFS), "metric", or None
    param: str | None = None  # the parameter/field receiving a value
    in_group: bool = False  # inside ( ... ) or { ... } (a parameter-name position is possible)


def resolve_ctor(kind: str | None, name: str | None, text: str, path: Path | None, depth: int = 0) -> str | None:
    """Follow ``name`` (a constructor, or a declared object derived from one) to its constructor."""
    if name is None or kind is None or depth > 8:
        return None
    if name in S.CONSTRUCTORS.get(kind, {}):
        return name
    n = symbols.lookup(text, path, name)
    if n is None or n.decl.kind != kind:
        return None
    if n.file is not None:
        text, path = n.file.read_text(encoding="utf-8"), n.file
    return resolve_ctor(kind, n.decl.ctor, text, path, depth + 1)


def _ref_kind(cls: type[S.Obj] | None, param: str | None) -> str | None:
    if cls is None or param is None:
        return None
    if cls is S.Audit and param == "metrics":
        return "metric"
    return cls.REFS.get(param)


def slot_of(ctx: Context, text: str, path: Path | None) -> Slot:
    """The slot of the innermost group of ``ctx`` (depth 0: a declaration's right-hand side)."""
    kind = ctx.stmt if ctx.value_of_decl or ctx.stmt in D.BLOCK_SCHEMAS else None
    slot = Slot(value_kind=kind if ctx.value_of_decl else None)
    for g in ctx.stack:
        if g.open == "(":
            if kind == "metric" or (g.owner in D.metrics() and kind in (None, "metric")):
                slot = Slot(metric=g.owner, in_group=True)
            else:
                ctor = resolve_ctor(kind, g.owner, text, path)
                cls = D.ctor_class(kind, ctor) if ctor else None
                slot = Slot(cls=cls, ctor=ctor, in_group=True)
        elif g.open == "{":
            cls = D.BLOCK_SCHEMAS.get(g.owner or "")
            slot = Slot(cls=cls, ctor=g.owner, in_group=True)
        else:  # "[": the items of the list parameter
            slot = Slot(cls=slot.cls, ctor=slot.ctor, metric=slot.metric, param=slot.param,
                        value_kind=slot.value_kind)
            continue
        slot.param = g.current
        slot.value_kind = _ref_kind(slot.cls, g.current)
        kind = slot.value_kind
    if ctx.stack and ctx.stack[-1].open == "[":
        slot.in_group = False
    return slot


def param_annotation(slot: Slot):
    """The type of the parameter at the cursor: a constructor's, or a metric call's (its ``Params``)."""
    m = D.metrics().get(slot.metric) if slot.metric is not None else None
    cls = m.schema if m is not None else slot.cls
    if cls is None or slot.param is None:
        return None
    f = D.params(cls).get(slot.param)
    return f.annotation if f is not None else None
