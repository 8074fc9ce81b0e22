"""The language server behind ``auditc lsp`` (pygls, stdio).

Features: diagnostics as you type (the compiler's own, on open/change/save, debounced and in a
worker thread; bounded work per document, below), hover, completion,
go to definition (local, imported and stdlib names) and whole-document formatting with the ``auditc fmt`` formatter. Positions inside the server are
code points; :class:`pygls.workspace.TextDocument` converts them to the client's encoding.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from auditlang.core.version import __version__
from auditlang.core.diagnostics import CompileError
from auditlang.lsp.analysis import check_text
from auditlang.lsp.complete import complete
from auditlang.lsp.hover import definition, hover
from auditlang.lsp.textsync import install as _install_textsync
from auditlang.lsp.wire import serve_stdio
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


# Work per document is bounded (docs/editors.md): diagnostics are computed DEBOUNCE_S after the
# last change, one analysis at a time in a worker thread (requests keep being answered), a result
# for an older version is dropped, a document over MAX_CHARS is not analysed (nor hovered or
# completed), an imported file over MAX_CHARS is not parsed (E111 at its import), incremental
# changes cost one copy of the text (lsp/textsync.py), and at most MAX_DIAGNOSTICS are published.
MAX_CHARS = 200_000
MAX_DIAGNOSTICS = 200
DEBOUNCE_S = 0.3


class _Analyses:
    """Scheduling of the diagnostics of open documents."""

    def __init__(self) -> None:
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.running: set[str] = set()
        self.again: set[str] = set()
        self.open: set[str] = set()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="auditlang-check")

    def schedule(self, ls: LanguageServer, uri: str, delay: float = DEBOUNCE_S) -> None:
        """Analyse ``uri`` ``delay`` seconds from now, replacing an analysis not yet started."""
        self.open.add(uri)
        old = self.timers.pop(uri, None)
        if old is not None:
            old.cancel()
        self.timers[uri] = asyncio.get_running_loop().call_later(delay, self._start, ls, uri)

    def close(self, uri: str) -> None:
        self.open.discard(uri)
        old = self.timers.pop(uri, None)
        if old is not None:
            old.cancel()

    def _start(self, ls: LanguageServer, uri: str) -> None:
        self.timers.pop(uri, None)
        if uri not in self.open:
            return
        if uri in self.running:  # the running one is stale: start again when it ends
            self.again.add(uri)
            return
        doc = ls.workspace.get_text_document(uri)
        text, version = doc.source, doc.version
        if len(text) > MAX_CHARS:
            msg = (f"this document has {len(text):,} characters, more than the {MAX_CHARS:,} the editor checks as "
                   "you type; run `auditc check` on the file for its diagnostics")
            _send(ls, uri, version, [T.Diagnostic(range=T.Range(T.Position(0, 0), T.Position(0, 1)), message=msg,
                                                  severity=T.DiagnosticSeverity.Information, source="auditc")])
            return
        self.running.add(uri)
        fut = asyncio.get_running_loop().run_in_executor(self.pool, check_text, text, _path(uri), MAX_CHARS)
        fut.add_done_callback(lambda f: self._done(ls, uri, version, f))

    def _done(self, ls: LanguageServer, uri: str, version: int | None, fut: asyncio.Future) -> None:
        self.running.discard(uri)
        if uri not in self.open:
            return
        doc = ls.workspace.get_text_document(uri)
        if uri in self.again or doc.version != version:  # stale: the latest text is analysed instead
            self.again.discard(uri)
            self._start(ls, uri)
            return
        issues = fut.result() if not fut.cancelled() and fut.exception() is None else []
        diags = []
        for i in issues[:MAX_DIAGNOSTICS]:
            rng = doc.range_to_client_units(T.Range(T.Position(i.line, i.col), T.Position(i.end_line, i.end_col)))
            diags.append(T.Diagnostic(range=rng, message=i.message, severity=_SEVERITY.get(i.severity),
                                      code=i.code, source="auditc"))
        if len(issues) > MAX_DIAGNOSTICS:
            diags.append(T.Diagnostic(range=T.Range(T.Position(0, 0), T.Position(0, 1)), source="auditc",
                                      severity=T.DiagnosticSeverity.Information,
                                      message=f"{len(issues) - MAX_DIAGNOSTICS} more diagnostic(s) not shown; "
                                              "`auditc check` lists them all"))
        _send(ls, uri, version, diags)


def _send(ls: LanguageServer, uri: str, version: int | None, diags: list[T.Diagnostic]) -> None:
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))


_ANALYSES = _Analyses()
_install_textsync()


def _too_large(doc) -> bool:
    return len(doc.source) > MAX_CHARS


@server.feature(T.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: T.DidOpenTextDocumentParams) -> None:
    _ANALYSES.schedule(ls, params.text_document.uri, delay=0)


@server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, params: T.DidChangeTextDocumentParams) -> None:
    _ANALYSES.schedule(ls, params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LanguageServer, params: T.DidSaveTextDocumentParams) -> None:
    _ANALYSES.schedule(ls, params.text_document.uri, delay=0)


@server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LanguageServer, params: T.DidCloseTextDocumentParams) -> None:
    _ANALYSES.close(params.text_document.uri)
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(T.TEXT_DOCUMENT_HOVER)
def on_hover(ls: LanguageServer, params: T.HoverParams) -> T.Hover | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    if _too_large(doc):
        return None
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
    if _too_large(doc):
        return None
    found = definition(doc.source, _offset(doc, params.position), _path(doc.uri))
    if found is None:
        return None
    file, line = found
    uri = doc.uri if file is None else file.resolve().as_uri()
    return T.Location(uri=uri, range=T.Range(T.Position(line, 0), T.Position(line, 0)))


@server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=[".", "(", "[", ",", "=", '"', "/"]))
def on_completion(ls: LanguageServer, params: T.CompletionParams) -> T.CompletionList:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    if _too_large(doc):
        return T.CompletionList(is_incomplete=False, items=[])
    items = complete(doc.source, _offset(doc, params.position), _path(doc.uri))
    for it in items:
        if isinstance(it.text_edit, T.TextEdit):
            it.text_edit.range = doc.range_to_client_units(it.text_edit.range)
    return T.CompletionList(is_incomplete=False, items=items)


@server.feature(T.TEXT_DOCUMENT_FORMATTING)
def on_format(ls: LanguageServer, params: T.DocumentFormattingParams) -> list[T.TextEdit] | None:

    doc = ls.workspace.get_text_document(params.text_document.uri)
    if _too_large(doc):
        return None
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
    """Serve over stdin/stdout until the client sends ``exit`` (framing: :mod:`auditlang.lsp.wire`)."""
    try:
        serve_stdio(server)
    finally:  # its idle worker would keep the process alive (`auditc` joins non-daemon threads)
        _ANALYSES.pool.shutdown(wait=False, cancel_futures=True)
