"""Where the cursor is, syntactically, in a spec that may not parse (it is being typed).

A small tolerant lexer mirrors the terminals of ``auditlang/syntax/audit.lark``; a scan of the
tokens before the cursor tracks the statement's kind, the open ``(`` / ``[`` / ``{`` groups with
the callee or field they belong to, and the parameter being given a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from auditlang.syntax.parse import KINDS

KEYWORDS = KINDS + ("import", "report")

_TOKEN = re.compile(
    r'(?P<long>"""(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z))'
    r'|(?P<str>"(?:[^"\\\n]|\\.)*"?)'
    r"|(?P<comment>#[^\n]*)"
    r"|(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\.?)"
    r"|(?P<punct>[()\[\]{}=,])"
    r"|(?P<ws>\s+)"
    r"|(?P<other>.)",
    re.S,
)


@dataclass(frozen=True)
class Tok:
    kind: str  # long | str | comment | num | name | punct | other
    text: str
    start: int
    end: int


def tokens(text: str) -> list[Tok]:
    out = []
    for m in _TOKEN.finditer(text):
        k = m.lastgroup or "other"
        if k not in ("ws", "comment"):
            out.append(Tok(k, m.group(), m.start(), m.end()))
    return out


@dataclass
class Group:
    open: str  # ( [ {
    owner: str | None  # the callee of "(", the field/param of "[", the block kind of "{"
    current: str | None = None  # the parameter or field whose value is being written inside
    given: list[str] = field(default_factory=list)  # parameters/fields already written
    override: bool = False  # "( ... )" after `with`


@dataclass
class Context:
    """The syntactic position of an offset."""

    stmt: str | None = None  # dataset | model | ... | import | report, the statement it belongs to
    stmt_name: str | None = None
    stack: list[Group] = field(default_factory=list)
    prev: Tok | None = None  # the last token before the word at the cursor
    word: str = ""  # the (dotted) word being typed, up to the cursor
    value_of_decl: bool = False  # right-hand side of `KIND NAME =` at depth 0
    callee_before: str | None = None  # for `base with (`: the override's base

    @property
    def top(self) -> Group | None:
        return self.stack[-1] if self.stack else None


def context_at(text: str, offset: int) -> Context:
    """The context of ``offset`` (a code-point index into ``text``)."""
    toks = [t for t in tokens(text[:offset])]
    ctx = Context()
    if toks and toks[-1].kind == "name" and toks[-1].end == offset:
        ctx.word = toks[-1].text
        toks = toks[:-1]
    last_expr: str | None = None  # the dotted name or callee just before the current token
    for i, t in enumerate(toks):
        depth0 = not ctx.stack
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if t.kind == "name" and depth0 and t.text in KEYWORDS and _starts_line(text, t.start):
            ctx.stmt, ctx.stmt_name, ctx.value_of_decl = t.text, None, False
            if t.text in ("audit", "settings"):
                ctx.stmt_name = t.text
        elif t.kind == "name" and depth0 and ctx.stmt in KINDS and ctx.stmt_name in (None, ctx.stmt) \
                and not ctx.value_of_decl and (i > 0 and toks[i - 1].text == ctx.stmt):
            ctx.stmt_name = t.text
        elif t.text == "=" and depth0:
            ctx.value_of_decl = True
        elif t.text == "=" and ctx.top is not None and i > 0 and toks[i - 1].kind == "name":
            ctx.top.current = toks[i - 1].text
            ctx.top.given.append(toks[i - 1].text)
        elif t.text == "(":
            override = last_expr == "with"
            owner = (toks[i - 2].text if override and i >= 2 else last_expr)
            ctx.stack.append(Group("(", owner, override=override))
        elif t.text == "[":
            ctx.stack.append(Group("[", ctx.top.current if ctx.top else None))
        elif t.text == "{":
            ctx.stack.append(Group("{", ctx.stmt))
        elif t.text in ")]}":
            if ctx.stack:
                ctx.stack.pop()
        elif t.text == "," and ctx.top is not None and ctx.top.open == "(":
            ctx.top.current = None
        elif t.kind in ("name", "str", "num", "long") and ctx.top is not None and ctx.top.open == "{" \
                and nxt is not None and nxt.text == "=" and _starts_line(text, t.start):
            ctx.top.current = None  # a new field begins
        last_expr = t.text if t.kind == "name" else None
    # a field name at the start of a line inside a block ends the previous field's value
    if ctx.top is not None and ctx.top.open == "{" and _starts_line(text, offset - len(ctx.word)):
        ctx.top.current = None
    ctx.prev = toks[-1] if toks else None
    if not ctx.stack and _starts_line(text, offset - len(ctx.word)) and (
            ctx.prev is None or ctx.prev.text not in ("=", "with", ",")):
        ctx.stmt, ctx.stmt_name, ctx.value_of_decl = None, None, False  # a new statement begins here
    return ctx


def _starts_line(text: str, pos: int) -> bool:
    i = text.rfind("\n", 0, pos)
    return not text[i + 1:pos].strip()


def word_at(text: str, offset: int) -> tuple[str, int, int]:
    """The dotted word around ``offset``: (word, start, end); ("", offset, offset) if none."""
    start = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
        start -= 1
    end = offset
    while end < len(text) and (text[end].isalnum() or text[end] == "_" or
                               (text[end] == "." and end + 1 < len(text) and text[end + 1].isalpha())):
        end += 1
    w = text[start:end].strip(".")
    if w and (w[0].isdigit() or not w.replace(".", "").replace("_", "").isalnum()):
        return "", offset, offset
    return w, start, end


def in_string(text: str, offset: int) -> bool:
    """Whether ``offset`` is inside a string literal or a comment."""
    for m in _TOKEN.finditer(text):
        if m.start() >= offset:
            return False
        g, tok = m.lastgroup, m.group()
        if g == "comment" and offset <= m.end():
            return True
        if g in ("str", "long"):
            closed = tok.endswith('"""') and len(tok) >= 6 if g == "long" else (len(tok) > 1 and tok.endswith('"'))
            if offset < m.end() or (not closed and offset == m.end()):
                return True
    return False
