"""The AST: frozen dataclasses, each carrying the :class:`~auditlang.core.diagnostics.Span` it came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from auditlang.core.diagnostics import Span


@dataclass(frozen=True)
class Literal:
    value: Any  # str | int | float | bool | None
    span: Span


@dataclass(frozen=True)
class Ref:
    """A (possibly dotted) name: ``smol``, ``stdlib_protocols.verbal``."""

    parts: tuple[str, ...]
    span: Span

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True)
class Kwarg:
    name: str
    value: "Expr"
    span: Span  # the span of the name


@dataclass(frozen=True)
class Call:
    func: Ref
    args: tuple["Expr", ...]
    kwargs: tuple[Kwarg, ...]
    span: Span


@dataclass(frozen=True)
class ListExpr:
    items: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True)
class Override:
    """``base with (k=v, ...)``: a copy of ``base`` with some parameters replaced."""

    base: "Expr"
    kwargs: tuple[Kwarg, ...]
    span: Span


Expr = Union[Literal, Ref, Call, ListExpr, Override]


@dataclass(frozen=True)
class Import:
    path: str
    alias: str | None
    span: Span

    @property
    def namespace(self) -> str:
        if self.alias:
            return self.alias
        stem = self.path.rstrip("/").rsplit("/", 1)[-1]
        return stem[:-6] if stem.endswith(".audit") else stem


@dataclass(frozen=True)
class Decl:
    """``KIND NAME = expr``."""

    kind: str
    name: str
    value: Expr
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Field:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class Block:
    """``KIND NAME { field = expr ... }``."""

    kind: str
    name: str
    fields: tuple[Field, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Report:
    outputs: tuple[Expr, ...]
    span: Span


Statement = Union[Import, Decl, Block, Report]


@dataclass(frozen=True)
class Module:
    path: str
    statements: tuple[Statement, ...]

    @property
    def imports(self) -> tuple[Import, ...]:
        return tuple(s for s in self.statements if isinstance(s, Import))
