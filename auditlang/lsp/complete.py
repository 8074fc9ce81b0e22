"""Completion: keywords, constructors, parameters, literal choices, declared and stdlib names.

A stdlib name whose module the document does not import yet (``s000.token_norm``) comes with
the ``import "stdlib/s000"`` line as an additional edit.
"""

from __future__ import annotations

import re
from pathlib import Path

from lsprotocol import types as T

from auditlang.lsp import docs as D
from auditlang.lsp import symbols
from auditlang.lsp.context import KEYWORDS, context_at, in_string
from auditlang.lsp.slots import Slot, param_annotation, slot_of
from auditlang.resolve import schema as S

_IMPORT_PREFIX = re.compile(r'^\s*import\s+"([^"]*)$')
K = T.CompletionItemKind


def _pos(text: str, offset: int) -> T.Position:
    """Code-point position (the server converts to the client's encoding)."""
    line = text.count("\n", 0, offset)
    return T.Position(line, offset - (text.rfind("\n", 0, offset) + 1))


def _import_line(text: str) -> int:
    """Where a new import goes: after the last import, else before the first statement."""
    lines = text.splitlines()
    last = None
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith("import"):
            last = i
    if last is not None:
        return last + 1
    for i, ln in enumerate(lines):
        if ln.strip() and not ln.lstrip().startswith("#"):
            return i
    return len(lines)


def complete(text: str, offset: int, path: Path | None) -> list[T.CompletionItem]:
    """Completion items at ``offset`` (code points) of ``text``."""
    line_start = text.rfind("\n", 0, offset) + 1
    m = _IMPORT_PREFIX.match(text[line_start:offset])
    if m:
        return _imports(text, offset, m.group(1), path)
    if in_string(text, offset):
        return []
    ctx = context_at(text, offset)
    rng = T.Range(_pos(text, offset - len(ctx.word)), _pos(text, offset))
    items: list[T.CompletionItem] = []

    def add(label: str, kind, detail: str | None = None, doc: str | None = None, insert: str | None = None,
            sort: str = "5", extra: list[T.TextEdit] | None = None, snippet: bool = False) -> None:
        items.append(T.CompletionItem(
            label=label, kind=kind, detail=detail,
            documentation=T.MarkupContent(T.MarkupKind.Markdown, doc) if doc else None,
            text_edit=T.TextEdit(rng, insert if insert is not None else label), filter_text=label,
            sort_text=f"{sort}{label}", additional_text_edits=extra,
            insert_text_format=T.InsertTextFormat.Snippet if snippet else None))

    top = ctx.top
    if top is None and not ctx.value_of_decl:
        if ctx.stmt == "report" and ctx.prev is not None and ctx.prev.text in ("report", ","):
            for o in S.REPORT_OUTPUTS:
                add(o, K.Value, "report output")
            return items
        if ctx.stmt is None:
            for kw in KEYWORDS:
                add(kw, K.Keyword, "statement", D.KIND_DOCS.get(kw))
        return items
    slot = slot_of(ctx, text, path)
    prev = ctx.prev.text if ctx.prev is not None else ""
    at_name = slot.in_group and top is not None and top.current is None and (
        prev in ("(", ",", "{") or (top.open == "{" and _line_start(text, offset - len(ctx.word))))
    if at_name:
        _param_names(slot, set(top.given) if top else set(), add)
        return items
    _values(slot, text, path, add, ctx.stmt_name)
    return items


def _line_start(text: str, pos: int) -> bool:
    return not text[text.rfind("\n", 0, pos) + 1:pos].strip()


def _param_names(slot: Slot, given: set[str], add) -> None:
    if slot.metric is not None:
        m = D.metrics().get(slot.metric)
        for p in (D.params(m.schema) if m else {}):
            if p not in given:
                add(p, K.Property, f"{slot.metric} parameter", D.metric_param_doc(slot.metric, p), f"{p}=", "0")
        return
    if slot.cls is None:
        return
    for p, f in D.params(slot.cls).items():
        if p in given:
            continue
        block = slot.ctor in D.BLOCK_SCHEMAS
        add(p, K.Field if block else K.Property, D.type_str(f.annotation), D.param_doc(slot.cls, p),
            f"{p} = " if block else f"{p}=", "0" if f.is_required() else "1")


def _values(slot: Slot, text: str, path: Path | None, add, own: str | None) -> None:
    ann = param_annotation(slot)
    if ann is not None:
        for c in D.literal_choices(ann):
            add(c, K.EnumMember, f"{slot.param} value", sort="0")
        if D.is_bool(ann):
            for c in ("true", "false"):
                add(c, K.Keyword, f"{slot.param} value", sort="0")
    kind = slot.value_kind
    if kind is None:
        return
    if kind == "metric":
        for name in sorted(D.metrics()):
            add(name, K.Function, "metric", D.metric_doc(name), sort="2")
    for ctor in S.constructor_names(kind):
        if ctor == kind and kind in D.BLOCK_SCHEMAS:
            continue
        add(ctor, K.Constructor, f"{kind} constructor", D.ctor_doc(kind, ctor), f"{ctor}($0)", "2", snippet=True)
    at = _import_line(text)
    for n in symbols.visible(text, path, kind):
        if n.file is None and n.label == own:
            continue  # the declaration being written
        extra = None
        sort = "0" if n.file is None else "1"
        if n.import_needed:
            extra = [T.TextEdit(T.Range(T.Position(at, 0), T.Position(at, 0)), n.import_needed + "\n")]
            sort = "3"
        doc = (f"```audit\n{n.decl.source}\n```" + (f"\n\n{n.decl.comment}" if n.decl.comment else "")
               + (f"\n\nadds `{n.import_needed}`" if n.import_needed else ""))
        add(n.label, K.Variable, f"{n.decl.kind} ({n.decl.ctor})", doc, sort=sort, extra=extra)


def _imports(text: str, offset: int, typed: str, path: Path | None) -> list[T.CompletionItem]:
    rng = T.Range(_pos(text, offset - len(typed)), _pos(text, offset))
    out = []
    cands = [f"stdlib/{m}" for m in symbols.stdlib_modules()]
    if path is not None and path.parent.is_dir():
        cands += sorted(p.stem for p in path.parent.glob("*.audit") if p.resolve() != path.resolve())
    for c in cands:
        out.append(T.CompletionItem(label=c, kind=T.CompletionItemKind.Module, text_edit=T.TextEdit(rng, c),
                                    detail="stdlib module" if c.startswith("stdlib/") else "spec file"))
    return out
