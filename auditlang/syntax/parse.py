"""Text -> AST with the lark grammar in ``audit.lark`` (LALR, positions propagated).

Syntax errors become diagnostics with the expected tokens as a hint; the parser recovers
at statement boundaries so several syntax errors are reported in one pass.
"""

from __future__ import annotations

import ast as pyast
import re
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from auditlang.core.diagnostics import CompileError, DiagnosticBag, SourceCache, Span, did_you_mean
from auditlang.syntax import ast as A

GRAMMAR = Path(__file__).with_name("audit.lark")
KINDS = ("dataset", "model", "template", "variant", "perturbation", "protocol", "evaluator", "metric", "audit", "compare", "settings")
STATEMENT_STARTS = KINDS + ("import", "report")


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", propagate_positions=True, maybe_placeholders=False)


def _span(file: str, meta) -> Span:
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(file: str, t: Token) -> Span:
    return Span(file, t.line, t.column, t.end_line or t.line, t.end_column or t.column + len(t))


class _ToAst(Transformer):
    def __init__(self, file: str) -> None:
        super().__init__(visit_tokens=False)
        self.file = file

    def _s(self, meta) -> Span:
        return _span(self.file, meta)

    @v_args(meta=True)
    def start(self, meta, items):
        return tuple(items)

    @v_args(meta=True)
    def import_stmt(self, meta, items):
        path = _unquote(items[0])
        alias = str(items[1]) if len(items) > 1 else None
        return A.Import(path, alias, self._s(meta))

    @v_args(meta=True)
    def decl(self, meta, items):
        kind, name, value = items
        return A.Decl(str(kind), str(name), value, self._s(meta), _tok_span(self.file, name))

    @v_args(meta=True)
    def block(self, meta, items):
        kind, *rest = items
        if rest and isinstance(rest[0], Token):
            name, fields = rest[0], rest[1:]
            name_span = _tok_span(self.file, name)
        else:  # an anonymous block (``settings { ... }``) is named after its kind
            name, fields, name_span = str(kind), rest, _tok_span(self.file, kind)
        return A.Block(str(kind), str(name), tuple(fields), self._s(meta), name_span)

    @v_args(meta=True)
    def field(self, meta, items):
        return A.Field(str(items[0]), items[1], _tok_span(self.file, items[0]))

    @v_args(meta=True)
    def report_stmt(self, meta, items):
        return A.Report(tuple(items), self._s(meta))

    @v_args(meta=True)
    def override(self, meta, items):
        base, *kwargs = items
        return A.Override(base, tuple(kwargs), self._s(meta))

    @v_args(meta=True)
    def call(self, meta, items):
        func, *args = items
        pos = tuple(a for a in args if not isinstance(a, A.Kwarg))
        kws = tuple(a for a in args if isinstance(a, A.Kwarg))
        return A.Call(func, pos, kws, self._s(meta))

    @v_args(meta=True)
    def kwarg(self, meta, items):
        return A.Kwarg(str(items[0]), items[1], _tok_span(self.file, items[0]))

    @v_args(meta=True)
    def ref(self, meta, items):
        return A.Ref(tuple(str(t) for t in items), self._s(meta))

    @v_args(meta=True)
    def list(self, meta, items):
        return A.ListExpr(tuple(items), self._s(meta))

    @v_args(meta=True)
    def string(self, meta, items):
        return A.Literal(_unquote(items[0]), self._s(meta))

    @v_args(meta=True)
    def number(self, meta, items):
        raw = str(items[0])
        val: int | float
        try:
            val = int(raw)
        except ValueError:
            val = float(raw)
        return A.Literal(val, self._s(meta))

    @v_args(meta=True)
    def true(self, meta, items):
        return A.Literal(True, self._s(meta))

    @v_args(meta=True)
    def false(self, meta, items):
        return A.Literal(False, self._s(meta))

    @v_args(meta=True)
    def none(self, meta, items):
        return A.Literal(None, self._s(meta))


def _unquote(tok: Token | str) -> str:
    s = str(tok)
    if s.startswith('"""'):
        body = s[3:-3]
        # Long strings are verbatim except for \" and \\ escapes, so templates keep their backslashes.
        return body.replace('\\"', '"').replace("\\\\", "\\")
    try:
        return pyast.literal_eval(s)
    except (ValueError, SyntaxError):
        return s[1:-1]


_TOKEN_NAMES = {
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'",
    "EQUAL": "'='", "COMMA": "','", "DOT": "'.'", "NAME": "a name", "STRING": "a string",
    "LONG_STRING": "a string", "SIGNED_NUMBER": "a number", "KIND": "a declaration (dataset, model, …)",
    "TRUE": "true/on", "FALSE": "false/off", "NONE": "none", "IMPORT": "'import'", "REPORT": "'report'",
    "WITH": "'with'", "AS": "'as'", "$END": "end of file",
}


_TOKEN_NOUNS = {"NAME": "name", "STRING": "string", "LONG_STRING": "string", "SIGNED_NUMBER": "number",
                "KIND": "keyword", "TRUE": "keyword", "FALSE": "keyword", "NONE": "keyword"}


def _expected(exp: set[str]) -> str:
    names = sorted({_TOKEN_NAMES.get(e, e.lower()) for e in exp})
    return ", ".join(names[:8]) + (", …" if len(names) > 8 else "")


def _syntax_diag(bag: DiagnosticBag, file: str, text: str, e: UnexpectedInput) -> None:
    line, col = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    if isinstance(e, UnexpectedToken) and e.token.type == "$END":
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
        bag.error("E001", "unexpected end of file", Span(file, line, col, line, col + 1),
                  hint=f"expected {_expected(set(e.expected))}")
        return
    if isinstance(e, UnexpectedToken):
        tok = e.token
        width = max(1, len(str(tok)))
        hint = f"expected {_expected(set(e.expected))}"
        if tok.type == "NAME" and "KIND" in e.expected:
            dym = did_you_mean(str(tok), STATEMENT_STARTS)
            if dym and dym.startswith("did you mean"):
                hint = f"a statement starts with a declaration keyword; {dym}"
        noun = _TOKEN_NOUNS.get(tok.type, "token")
        bag.error("E002", f"unexpected {noun} {str(tok)!r}",
                  Span(file, line, col, line, col + width), hint=hint)
        return
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        hint = None
        if ch == "'":
            hint = "strings use double quotes: \"…\""
        elif ch == '"':
            hint = "unterminated string: close it with \" on the same line, or use \"\"\"…\"\"\" for text spanning lines"
        elif e.allowed:
            hint = f"expected {_expected(set(e.allowed))}"
        bag.error("E003", f"unexpected character {ch!r}", Span(file, line, col, line, col + 1), hint=hint)
        return
    bag.error("E004", "syntax error", Span(file, line, col, line, col + 1))  # pragma: no cover


_STMT_LINE = re.compile(r"^(?:" + "|".join(STATEMENT_STARTS) + r")\b", re.M)


def _blank(text: str, start_line: int, end_line: int) -> str:
    """Replace lines [start_line, end_line) (1-based) with empty lines, keeping positions of the rest."""
    lines = text.split("\n")
    for i in range(start_line - 1, min(end_line - 1, len(lines))):
        lines[i] = ""
    return "\n".join(lines)


MAX_NESTING = 64  # brackets deeper than this are refused (no spec needs them; the parser would recurse)
_SKIP = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*(?:"""|$)|"(?:[^"\\\n]|\\.)*"?|#[^\n]*', re.S)


MAX_SPEC_BYTES = 2_000_000  # largest spec file (the stdlib's largest is 15 KB)
MAX_NAME = 128  # longest name: names become parts of file names (255 bytes at most)
MAX_TOKENS = 100_000  # most tokens in one spec file (a 5 MB list literal would take minutes to parse)
_TOKEN = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*(?:"""|$)|"(?:[^"\\\n]|\\.)*"?|#[^\n]*|[A-Za-z0-9_.+-]+|\S', re.S)


def _check_size(bag: DiagnosticBag, file: str, text: str) -> None:
    """E006 for a spec file over :data:`MAX_SPEC_BYTES` or :data:`MAX_TOKENS` (checked before parsing)."""
    hint = ("a spec declares what to audit; put long lists in a data file and filter with filter_field=, "
            "long prompts in a template file (template(file=...))")
    if len(text) > MAX_SPEC_BYTES:
        bag.error("E006", f"the spec file is {len(text):,} characters long, more than {MAX_SPEC_BYTES:,}",
                  Span.point(file, 1, 1), hint=hint)
        raise CompileError(bag)
    count = 0
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        count += tok[0] != "#"
        if len(tok) > MAX_NAME and (tok[0].isalpha() or tok[0] == "_"):
            long = next((p for p in tok.split(".") if len(p) > MAX_NAME and not p[:1].isdigit()), None)
            if long is not None:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() + tok.index(long) - (text.rfind("\n", 0, m.start()) + 1) + 1
                bag.error("E007", f"a name of {len(long):,} characters; names are at most {MAX_NAME}",
                          Span(file, line, col, line, col + len(long)),
                          hint="names become parts of the run directory's file names; use a shorter name")
                raise CompileError(bag)
        if count > MAX_TOKENS:
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            bag.error("E006", f"the spec file has more than {MAX_TOKENS:,} tokens", Span.point(file, line, col), hint=hint)
            raise CompileError(bag)


def _check_nesting(bag: DiagnosticBag, file: str, text: str) -> None:
    """E005 at the first bracket nested deeper than :data:`MAX_NESTING` (strings and comments skipped)."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in '"#':
            m = _SKIP.match(text, i)
            i = m.end() if m and m.end() > i else i + 1
            continue
        if ch in "([{":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, i) + 1
                col = i - (text.rfind("\n", 0, i) + 1) + 1
                bag.error("E005", f"brackets nested more than {MAX_NESTING} deep", Span(file, line, col, line, col + 1),
                          hint="flatten the value: parameters take values, lists of values or lists of pairs")
                raise CompileError(bag)
        elif ch in ")]}":
            depth = max(0, depth - 1)
        i += 1


def parse_text(text: str, file: str = "<string>") -> A.Module:
    """Parse spec text. Raises :class:`CompileError` with every syntax error found.

    Recovery: after an error, the statement that holds it is blanked out (up to the next line
    that starts with a statement keyword) and parsing restarts, so each broken statement is
    reported once and later statements are still checked.
    """
    SourceCache.put(file, text)
    bag = DiagnosticBag()
    _check_size(bag, file, text)
    _check_nesting(bag, file, text)
    work = text
    tree = None
    for _ in range(50):
        try:
            tree = _parser().parse(work)
            break
        except UnexpectedInput as e:
            _syntax_diag(bag, file, work, e)
            err_line = getattr(e, "line", None) or len(work.split("\n"))
            if isinstance(e, UnexpectedToken) and e.token.type == "$END":
                break
            starts = [work.count("\n", 0, m.start()) + 1 for m in _STMT_LINE.finditer(work)]
            before = [ln for ln in starts if ln <= err_line]
            after = [ln for ln in starts if ln > err_line]
            first = before[-1] if before else 1
            if after:
                nxt = after[0]
            else:
                break
            work = _blank(work, first, nxt)
    if bag.items:
        raise CompileError(bag)
    try:
        statements = list(_ToAst(file).transform(tree))  # type: ignore[arg-type]
    except VisitError as e:  # pragma: no cover - internal error
        raise RuntimeError(f"internal error while building the AST: {e.orig_exc!r}") from e
    return A.Module(file, tuple(statements))


def parse_file(path: str | Path) -> A.Module:
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    return parse_text(text, str(p))

