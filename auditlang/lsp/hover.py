"""Hover: the docs of a keyword, constructor, parameter, metric or declared (stdlib) name."""

from __future__ import annotations

from pathlib import Path

from auditlang.lsp import docs as D
from auditlang.lsp import symbols
from auditlang.lsp.context import KEYWORDS, context_at, in_string, word_at
from auditlang.lsp.slots import param_annotation, resolve_ctor, slot_of
from auditlang.resolve import schema as S
from auditlang.resolve.modules import stdlib_root


def hover(text: str, offset: int, path: Path | None) -> tuple[str, int, int] | None:
    """(Markdown, start, end) for the word at ``offset`` (code points), or None."""
    word, start, end = word_at(text, offset)
    if not word or in_string(text, start):
        return None
    ctx = context_at(text, start)
    rest = text[end:].lstrip(" \t")
    nxt = rest[:1]
    md = None
    if word in KEYWORDS and ctx.top is None and not ctx.value_of_decl:
        md = _keyword(word)
    else:
        slot = slot_of(ctx, text, path)
        kind = slot.value_kind
        if nxt == "=" and not rest.startswith("==") and slot.in_group and ctx.top is not None:
            if slot.metric is not None:
                md = D.metric_param_doc(slot.metric, word)
            elif slot.cls is not None:
                md = D.param_doc(slot.cls, word)
                if md:
                    md = f"*{slot.ctor}* parameter\n\n{md}"
        elif ctx.stmt == "report" and ctx.top is None and word in S.REPORT_OUTPUTS:
            md = f"**{word}**: report output (`report {', '.join(S.REPORT_OUTPUTS)}`); see docs/report.md"
        elif kind == "metric" and word in D.metrics():
            md = D.metric_doc(word)
        elif kind is not None and word in S.CONSTRUCTORS.get(kind, {}) and (
                nxt == "(" or not symbols.lookup(text, path, word)):
            md = D.ctor_doc(kind, word)
        if md is None:
            md = _declared(text, path, word)
        if md is None and word in D.metrics():
            md = D.metric_doc(word)
        if md is None:
            ann = param_annotation(slot)
            if ann is not None and word in D.literal_choices(ann) and slot.cls is not None:
                md = f"value of *{slot.ctor}*.{slot.param}\n\n" + (D.param_doc(slot.cls, slot.param or "") or "")
    return (md, start, end) if md else None


def definition(text: str, offset: int, path: Path | None) -> tuple[Path | None, int] | None:
    """(file — None for the document itself —, 0-based line) of the declaration of the name at ``offset``."""
    word, start, _ = word_at(text, offset)
    if not word or in_string(text, start):
        return None
    n = symbols.lookup(text, path, word)
    return (n.file, n.decl.line) if n is not None else None


def _keyword(word: str) -> str:
    out = [f"**{word}**: {D.KIND_DOCS.get(word, '')}"]
    ctors = [c for c in S.constructor_names(word) if c != word]
    if ctors:
        out.append("constructors: " + ", ".join(f"`{c}`" for c in ctors))
    return "\n\n".join(out)


def _declared(text: str, path: Path | None, word: str) -> str | None:
    n = symbols.lookup(text, path, word)
    if n is None:
        return None
    where = "this file" if n.file is None else _short(n.file)
    out = [f"```audit\n{n.decl.source}\n```"]
    if n.decl.comment:
        out.append(n.decl.comment)
    out.append(f"*{n.decl.kind}, declared in {where}:{n.decl.line + 1}*")
    src_text, src_path = (text, path) if n.file is None else (n.file.read_text(encoding="utf-8"), n.file)
    ctor = resolve_ctor(n.decl.kind, n.decl.ctor, src_text, src_path)
    cls = D.ctor_class(n.decl.kind, ctor) if ctor else None
    if cls is not None and (cls.DOC or cls.__doc__):
        out.append(f"`{ctor}`: {cls.DOC or (cls.__doc__ or '').strip()}")
    if n.import_needed:
        out.append(f"not imported: add `{n.import_needed}`")
    return "\n\n".join(out)


def _short(p: Path) -> str:

    try:
        return "stdlib/" + p.resolve().relative_to(stdlib_root().resolve()).as_posix()
    except ValueError:
        return p.name
