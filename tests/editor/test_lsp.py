"""`auditc lsp` in a real LSP session over stdio: diagnostics, hover, completion, formatting."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lsp_client import LspClient

pytest.importorskip("pygls")

REPO = Path(__file__).resolve().parents[2]

# One unknown parameter (E120) on line 2, after a non-BMP character in a string, so the range
# must be in UTF-16 code units (the LSP default) to land on `sampel`.
BAD = '''import "stdlib/s000"
dataset arc = jsonl("arc 🙂.jsonl", task=multiple_choice, sampel=5)
model m = embedded("smollm2-135m-instruct")
protocol p = token_prob(normalise=label_set)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [p, s000.token_norm]
  metrics = [ece(bins=10)]
}
'''
GOOD = BAD.replace("sampel=5", "sample=5")
BROKEN = GOOD.replace("model m = embedded", "model m == embedded")
MESSY = 'model   m=embedded( "smollm2-135m-instruct" ,size = 0.135)\n# keep me\nevaluator  fc=first_char( )\n'


def _utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _pos(text: str, needle: str, k: int = 0) -> dict:
    off = text.index(needle) + k
    line = text.count("\n", 0, off)
    col = off - (text.rfind("\n", 0, off) + 1)
    line_text = text.split("\n")[line]
    return {"line": line, "character": _utf16(line_text[:col])}


@pytest.fixture
def client(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    c = LspClient([sys.executable, "-m", "auditlang.cli", "lsp"], cwd=str(tmp_path), env=env)
    res = c.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {}})
    caps = res["capabilities"]
    assert caps["hoverProvider"] and caps["documentFormattingProvider"]
    assert "." in caps["completionProvider"]["triggerCharacters"]
    assert res["serverInfo"]["name"] == "auditlang"
    c.notify("initialized", {})
    yield c
    c.close()


def _open(c: LspClient, uri: str, text: str, version: int = 1) -> dict:
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "audit", "version": version,
                                                        "text": text}})
    return c.wait_notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri and p.get("version") == version)


def _change(c: LspClient, uri: str, text: str, version: int) -> dict:
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                        "contentChanges": [{"text": text}]})
    return c.wait_notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri and p.get("version") == version)


def test_session_diagnostics_hover_completion_format_shutdown(client, tmp_path):
    uri = (tmp_path / "audit.audit").as_uri()  # never saved: the server checks the buffer's text
    diags = _open(client, uri, BAD)["diagnostics"]
    assert [d["code"] for d in diags] == ["E120"]
    d = diags[0]
    assert d["severity"] == 1 and d["source"] == "auditc"
    assert "unknown parameter 'sampel'" in d["message"] and "did you mean 'sample'" in d["message"]
    start = _pos(BAD, "sampel")
    assert d["range"] == {"start": start, "end": {"line": start["line"], "character": start["character"] + 6}}

    # as you type: an incremental edit (as editors send them) fixes it; a syntax error; a fix
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"range": d["range"], "text": "sample"}]})
    assert client.wait_notification("textDocument/publishDiagnostics",
                                    lambda p: p["uri"] == uri and p.get("version") == 2)["diagnostics"] == []
    diags = _change(client, uri, BROKEN, 3)["diagnostics"]
    assert [d["code"] for d in diags] == ["E002"]
    assert diags[0]["range"]["start"] == _pos(BROKEN, "== embedded", 1)
    assert _change(client, uri, GOOD, 4)["diagnostics"] == []

    # hover: a constructor, a parameter, a stdlib name, a metric
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": _pos(GOOD, "token_prob", 3)})
    assert h["contents"]["kind"] == "markdown"
    assert "Token-probability confidence" in h["contents"]["value"] and "token_prob(" in h["contents"]["value"]
    assert h["range"]["start"] == _pos(GOOD, "token_prob")
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": _pos(GOOD, "normalise", 2)})
    assert "**normalise**: `raw | label_set` (default label_set)" in h["contents"]["value"]
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": _pos(GOOD, "s000.token_norm", 7)})
    assert "protocol token_norm = token_prob(" in h["contents"]["value"]
    assert "stdlib/s000.audit" in h["contents"]["value"]
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": _pos(GOOD, "ece(", 1)})
    assert "calibration error" in h["contents"]["value"]
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": _pos(GOOD, "sample=", 2)})
    assert "**sample**" in h["contents"]["value"]

    # go to definition: a stdlib name opens stdlib/s000.audit at its declaration; a local one
    loc = client.request("textDocument/definition", {"textDocument": {"uri": uri},
                                                     "position": _pos(GOOD, "s000.token_norm", 7)})
    assert loc["uri"].endswith("/stdlib/s000.audit")
    s000 = (REPO / "stdlib" / "s000.audit").read_text(encoding="utf-8").splitlines()
    assert s000[loc["range"]["start"]["line"]].startswith("protocol token_norm = ")
    loc = client.request("textDocument/definition", {"textDocument": {"uri": uri}, "position": _pos(GOOD, "[p,", 1)})
    assert loc["uri"] == uri and loc["range"]["start"]["line"] == 3

    # completion: stdlib names after `s000.`, constructor parameters inside a call
    typing = GOOD.replace("protocols = [p, s000.token_norm]", "protocols = [p, s000.tok")
    _change(client, uri, typing, 40)
    res = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                     "position": _pos(typing, "s000.tok", 8)})
    labels = {i["label"]: i for i in res["items"]}
    assert {"s000.token_norm", "s000.token_raw", "p"} <= set(labels)
    assert "s000.surface_paraphrase" not in labels  # a variant, not a protocol
    edit = labels["s000.token_norm"]["textEdit"]
    assert edit["newText"] == "s000.token_norm" and edit["range"]["start"] == _pos(typing, "s000.tok")
    typing = GOOD.replace("token_prob(normalise=label_set)", "token_prob(normalise=label_set, ")
    _change(client, uri, typing, 50)
    res = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                     "position": _pos(typing, "label_set, ", 11)})
    labels = [i["label"] for i in res["items"]]
    assert {"readout", "window", "top_k", "context"} <= set(labels) and "normalise" not in labels
    typing = GOOD.replace("token_prob(normalise=label_set)", "token_prob(normalise=label_set, window=")
    _change(client, uri, typing, 60)
    res = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                     "position": _pos(typing, "window=", 7)})
    assert {i["label"] for i in res["items"]} == {"top_k", "full"}

    # formatting: the same text `auditc fmt` writes
    fmt_uri = (tmp_path / "messy.audit").as_uri()
    assert _open(client, fmt_uri, MESSY)["diagnostics"] == []
    edits = client.request("textDocument/formatting", {"textDocument": {"uri": fmt_uri},
                                                      "options": {"tabSize": 2, "insertSpaces": True}})
    (tmp_path / "messy.audit").write_text(MESSY, encoding="utf-8")
    from auditlang.cli import main

    assert main(["fmt", str(tmp_path / "messy.audit")]) == 0
    want = (tmp_path / "messy.audit").read_text(encoding="utf-8")
    assert want != MESSY and "# keep me" in want
    assert len(edits) == 1 and edits[0]["newText"] == want
    assert edits[0]["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}

    assert client.request("shutdown") is None
    client.notify("exit")
    assert client.proc.wait(30) == 0


def test_saved_file_with_broken_import(client, tmp_path):
    """Imports resolve relative to the document; a problem inside an imported file is shown
    on the import line with that file's location."""
    (tmp_path / "common.audit").write_text('model m = embedded("smollm2-135m-instruct", sise=1)\n', encoding="utf-8")
    spec = tmp_path / "main.audit"
    text = '# header\nimport "common"\nevaluator fc = first_char()\n'
    spec.write_text(text, encoding="utf-8")
    diags = _open(client, spec.as_uri(), text)["diagnostics"]
    assert [d["code"] for d in diags] == ["E120"]
    assert diags[0]["range"]["start"] == {"line": 1, "character": 0}
    assert "common.audit:1:" in diags[0]["message"] and "sise" in diags[0]["message"]
    # completion of import paths: stdlib modules and sibling spec files
    text2 = text + 'import "std'
    _change(client, spec.as_uri(), text2, 2)
    res = client.request("textDocument/completion", {"textDocument": {"uri": spec.as_uri()},
                                                     "position": {"line": 3, "character": len('import "std')}})
    labels = {i["label"] for i in res["items"]}
    assert {"stdlib/s000", "stdlib/protocols", "common"} <= labels and "main" not in labels


def test_lsp_without_pygls_is_a_runtime_error(monkeypatch, capsys):
    """Without the `lsp` extra the command says what to install (exit 3), no traceback."""
    import builtins

    from auditlang.cli import main

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("pygls") or name == "auditlang.lsp.server":
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)

    monkeypatch.delitem(sys.modules, "auditlang.lsp.server", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake)
    assert main(["lsp"]) == 3
    err = capsys.readouterr().err
    assert "pip install 'auditlang[lsp]'" in err and "Traceback" not in err


HUB = '''dataset arc = hub("allenai/ai2_arc", "test", config="ARC-Challenge", task=multiple_choice, sample=5,
                  fallback=jsonl("arc.jsonl", task=multiple_choice))
'''


def test_hub_fallback_diagnostic_hover_and_completion(client, tmp_path):
    """A hub dataset's fallback in the editor: E124 where it sets the task, the parameter's docs on
    hover, and the file dataset's parameters completed inside the inline jsonl(...)."""
    uri = (tmp_path / "hub.audit").as_uri()
    diags = _open(client, uri, HUB)["diagnostics"]
    assert [d["code"] for d in diags] == ["E124"]
    assert diags[0]["range"]["start"] == _pos(HUB, "task=multiple_choice))")
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": _pos(HUB, "fallback=", 2)})
    text = h["contents"]["value"]
    assert "**fallback**" in text and "not available offline" in text and "jsonl(PATH, ...)" in text
    typing = HUB.replace(', task=multiple_choice))', ', ')
    _change(client, uri, typing, 2)
    res = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                     "position": _pos(typing, '"arc.jsonl", ', 13)})
    labels = {i["label"] for i in res["items"]}
    assert {"question", "choices", "gold", "gold_index", "filter_field"} <= labels and "fallback" not in labels
