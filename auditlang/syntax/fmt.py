"""The canonical formatter behind ``auditc fmt``: AST -> text, idempotent, comments kept.

Rules: one statement per line; a blank line between statements of different kinds and
around multi-line statements; calls longer than 100 columns put one argument per line;
blocks indent fields by two spaces; booleans print as true/false; strings with a newline use
triple quotes. Full-line comments stay attached to the statement or field that follows them;
end-of-line comments stay on their line.
"""

from __future__ import annotations

import json
from functools import lru_cache

from lark import Lark

from auditlang.syntax import ast as A
from auditlang.syntax.parse import GRAMMAR, parse_text

WIDTH = 100


@lru_cache(maxsize=1)
def _comment_parser():
    comments: list = []
    parser = Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", propagate_positions=True,
                  lexer_callbacks={"COMMENT": comments.append})
    return parser, comments


def _comments(text: str) -> list[tuple[int, int, str]]:
    parser, sink = _comment_parser()
    sink.clear()
    parser.parse(text)
    return [(t.line, t.column, str(t).rstrip()) for t in sink]


def _num(v: int | float) -> str:
    """Shortest exact spelling: ``1e-6`` rather than Python's ``1e-06``."""
    r = repr(v)
    if isinstance(v, float) and "e" in r:
        mant, exp = r.split("e")
        return f"{mant}e{int(exp)}"
    return r


def _str(s: str) -> str:
    if "\n" in s:
        return '"""' + s.replace("\\", "\\\\").replace('"""', '\\"""') + '"""'
    return json.dumps(s, ensure_ascii=False)


def expr(e: A.Expr, indent: int = 0) -> str:
    if isinstance(e, A.Literal):
        v = e.value
        if v is True:
            return "true"
        if v is False:
            return "false"
        if v is None:
            return "none"
        if isinstance(v, str):
            return _str(v)
        return _num(v)
    if isinstance(e, A.Ref):
        return e.dotted
    if isinstance(e, A.ListExpr):
        items = [expr(x, indent + 2) for x in e.items]
        one = "[" + ", ".join(items) + "]"
        if len(one) + indent <= WIDTH and "\n" not in one:
            return one
        pad = " " * (indent + 2)
        return "[\n" + "".join(f"{pad}{x},\n" for x in items) + " " * indent + "]"
    if isinstance(e, A.Call):
        parts = [expr(x, indent + 2) for x in e.args] + [f"{k.name}={expr(k.value, indent + 2)}" for k in e.kwargs]
        return _args(e.func.dotted + "(", parts, ")", indent)
    if isinstance(e, A.Override):
        parts = [f"{k.name}={expr(k.value, indent + 2)}" for k in e.kwargs]
        return _args(expr(e.base, indent) + " with (", parts, ")", indent)
    raise TypeError(f"internal error: unknown expression {e!r}")


def _args(head: str, parts: list[str], tail: str, indent: int) -> str:
    one = head + ", ".join(parts) + tail
    if len(one) + indent <= WIDTH and not any("\n" in p and '"""' not in p for p in parts):
        return one
    pad = " " * (indent + 2)
    return head + "\n" + "".join(f"{pad}{p},\n" for p in parts) + " " * indent + tail


def _stmt(st: A.Statement, field_comments: dict[int, list[str]], eol: dict[int, str]) -> str:
    if isinstance(st, A.Import):
        return f"import {_str(st.path)}" + (f" as {st.alias}" if st.alias else "")
    if isinstance(st, A.Decl):
        head = f"{st.kind} {st.name} = "
        return head + expr(st.value, 0)
    if isinstance(st, A.Block):
        head = st.kind if st.name == st.kind else f"{st.kind} {st.name}"
        lines = [f"{head} {{" + (f"  {eol[st.span.line]}" if st.span.line in eol else "")]
        for f in st.fields:
            for c in field_comments.get(f.span.line, []):
                lines.append(f"  {c}")
            line = f"  {f.name} = {expr(f.value, 2)}"
            if f.span.line in eol:
                line += f"  {eol[f.span.line]}"
            lines.append(line)
        lines.append("}")
        return "\n".join(lines)
    if isinstance(st, A.Report):
        return "report " + ", ".join(expr(o) for o in st.outputs)
    raise TypeError(f"internal error: unknown statement {st!r}")


def _kind(st: A.Statement) -> str:
    return type(st).__name__ if not isinstance(st, (A.Decl, A.Block)) else st.kind


def format_text(text: str, file: str = "<string>") -> str:
    """Canonical text of a spec. Raises CompileError when the text does not parse."""
    mod = parse_text(text, file)
    comments = _comments(text)
    src_lines = text.split("\n")
    full: list[tuple[int, str]] = []
    eol: dict[int, str] = {}
    for line, col, c in comments:
        if src_lines[line - 1][: col - 1].strip():
            eol[line] = c
        else:
            full.append((line, c))
    stmts = list(mod.statements)
    out: list[str] = []
    prev: A.Statement | None = None
    ci = 0
    for st in stmts:
        lead: list[str] = []
        field_comments: dict[int, list[str]] = {}
        field_lines = [f.span.line for f in st.fields] if isinstance(st, A.Block) else []
        while ci < len(full) and full[ci][0] < st.span.line:
            lead.append(full[ci][1])
            ci += 1
        while ci < len(full) and full[ci][0] <= st.span.end_line:
            ln, c = full[ci]
            target = next((fl for fl in field_lines if fl > ln), None)
            if target is None:
                lead.append(c)
            else:
                field_comments.setdefault(target, []).append(c)
            ci += 1
        body = _stmt(st, field_comments, eol)
        if not isinstance(st, A.Block):
            tail = eol.get(st.span.end_line) or eol.get(st.span.line)
            if tail:
                body += f"  {tail}"
        multi = "\n" in body or "\n" in (out[-1] if out else "")
        if prev is not None and (lead or multi or _kind(prev) != _kind(st)):
            out.append("")
        out.extend(lead)
        out.append(body)
        prev = st
    out.extend(c for _, c in full[ci:])
    return "\n".join(out).rstrip("\n") + "\n"
