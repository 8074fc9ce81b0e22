"""The language server behind ``auditc lsp`` (pygls, stdio).

Features: diagnostics as you type (the compiler's own, on open/change/save), hover, completion,
go to definition (local, imported and stdlib names) and whole-document formatting with the ``auditc fmt`` formatter. Positions inside the server are
code points; :class:`pygls.workspace.TextDocument` converts them to the client's encoding.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from auditlang.core.version import __version__
from auditlang.core.diagnostics import CompileError
from auditlang.lsp.analysis import check_text
from auditlang.lsp.complete import complete
from auditlang.lsp.hover import definition, hover
from auditlang.syntax.fmt import format_text

_SEVERITY = {"error": T.DiagnosticSeverity.Error, "warning": T.DiagnosticSeverity.Warning,
             "note": T.DiagnosticSeverity.Information}

server = LanguageServer("auditlang", __version__, text_document_sync_kind=T.TextDocumentSyncKind.Incremental)


def _path(uri: str) -> Path:
    """The file a document URI names; an untitled buffer is placed in the working directory."""
    p = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(p) if p else Path.cwd() / "untitled.audit"


def _offset(doc, pos: T.Position) -> int:
    sp = doc.position_from_client_units(pos)
    lines = doc.lines
    return sum(len(ln) for ln in lines[: sp.line]) + min(sp.character, len(lines[sp.line]) if sp.line < len(lines) else 0)


def _publish(ls: LanguageServer, uri: str) -> None:
    doc = ls.workspace.get_text_document(uri)
    diags = []
    for i in check_text(doc.source, _path(uri)):
        rng = doc.range_to_client_units(T.Range(T.Position(i.line, i.col), T.Position(i.end_line, i.end_col)))
        diags.append(T.Diagnostic(range=rng, message=i.message, severity=_SEVERITY.get(i.severity),
                                  code=i.code, source="auditc"))
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=doc.version))


@server.feature(T.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: T.DidOpenTextDocumentParams) -> None:
    _publish(ls, params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, params: T.DidChangeTextDocumentParams) -> None:
    _publish(ls, params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LanguageServer, params: T.DidSaveTextDocumentParams) -> None:
    _publish(ls, params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LanguageServer, params: T.DidCloseTextDocumentParams) -> None:
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(T.TEXT_DOCUMENT_HOVER)
def on_hover(ls: LanguageServer, params: T.HoverParams) -> T.Hover | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    found = hover(text, _offset(doc, params.position), _path(doc.uri))
    if found is None:
        return None
    md, start, end = found
    rng = T.Range(_position(text, start), _position(text, end))
    return T.Hover(contents=T.MarkupContent(T.MarkupKind.Markdown, md), range=doc.range_to_client_units(rng))


@server.feature(T.TEXT_DOCUMENT_DEFINITION)
def on_definition(ls: LanguageServer, params: T.DefinitionParams) -> T.Location | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    found = definition(doc.source, _offset(doc, params.position), _path(doc.uri))
    if found is None:
        return None
    file, line = found
    uri = doc.uri if file is None else file.resolve().as_uri()
    return T.Location(uri=uri, range=T.Range(T.Position(line, 0), T.Position(line, 0)))


@server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=[".", "(", "[", ",", "=", '"', "/"]))
def on_completion(ls: LanguageServer, params: T.CompletionParams) -> T.CompletionList:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    items = complete(doc.source, _offset(doc, params.position), _path(doc.uri))
    for it in items:
        if isinstance(it.text_edit, T.TextEdit):
            it.text_edit.range = doc.range_to_client_units(it.text_edit.range)
    return T.CompletionList(is_incomplete=False, items=items)


@server.feature(T.TEXT_DOCUMENT_FORMATTING)
def on_format(ls: LanguageServer, params: T.DocumentFormattingParams) -> list[T.TextEdit] | None:

    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    try:
        out = format_text(text, str(_path(doc.uri)))
    except CompileError:
        return None  # the document does not parse; its diagnostics say why
    if out == text:
        return []
    lines = text.split("\n")
    end = T.Position(len(lines) - 1, len(lines[-1]))
    return [T.TextEdit(doc.range_to_client_units(T.Range(T.Position(0, 0), end)), out)]


def _position(text: str, offset: int) -> T.Position:
    line = text.count("\n", 0, offset)
    return T.Position(line, offset - (text.rfind("\n", 0, offset) + 1))


def serve() -> None:
    """Serve over stdin/stdout until the client sends ``exit``."""
    server.start_io()
