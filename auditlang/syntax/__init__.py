"""Parsing: .audit text -> AST (frozen dataclasses with source spans)."""

from auditlang.syntax.ast import (  # noqa: F401
    Block, Call, Decl, Expr, Field, Import, Kwarg, ListExpr, Literal, Module, Override, Ref, Report, Statement,
)
from auditlang.syntax.parse import parse_file, parse_text  # noqa: F401
