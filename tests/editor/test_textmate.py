"""The TextMate grammar (editors/vscode/): valid JSON, regexes that compile on Oniguruma and
Python ``re``, keywords keyed on audit.lark, and every token of every spec in the repository
highlighted as the compiler's own lexer classifies it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from textmate import Tokenizer, regexes

from auditlang.syntax.parse import KINDS, _parser

REPO = Path(__file__).resolve().parents[2]
VSCODE = REPO / "editors" / "vscode"
GRAMMAR = VSCODE / "syntaxes" / "audit.tmLanguage.json"
SPECS = sorted([*REPO.glob("specs/*.audit"), *REPO.glob("stdlib/*.audit"), *REPO.glob("examples/*.audit")])


@pytest.fixture(scope="module")
def grammar() -> dict:
    return json.loads(GRAMMAR.read_text(encoding="utf-8"))


def test_extension_manifest_points_at_real_files(grammar):
    pkg = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    lang = pkg["contributes"]["languages"][0]
    gram = pkg["contributes"]["grammars"][0]
    assert lang["id"] == gram["language"] == "audit" and lang["extensions"] == [".audit"]
    assert gram["scopeName"] == grammar["scopeName"] == "source.audit"
    assert (VSCODE / gram["path"]).resolve() == GRAMMAR.resolve()
    conf = json.loads((VSCODE / lang["configuration"]).read_text(encoding="utf-8"))
    assert conf["comments"]["lineComment"] == "#"
    for key in ("increaseIndentPattern", "decreaseIndentPattern"):
        re.compile(conf["indentationRules"][key])
    word = re.compile(conf["wordPattern"])
    assert word.fullmatch("s000.token_norm") and word.fullmatch("-0.5")
    assert (VSCODE / pkg["main"]).is_file()
    assert pkg["contributes"]["configuration"]["properties"]["auditlang.server.command"]["default"] == ["auditc", "lsp"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_extension_entry_point_is_valid_javascript():
    subprocess.run(["node", "--check", str(VSCODE / "extension.js")], check=True)


def test_every_regex_compiles_and_every_include_resolves(grammar):
    onig = pytest.importorskip("onigurumacffi")
    pats = regexes(grammar)
    assert len(pats) > 15
    for p in pats:
        re.compile(p)
        onig.compile(p)
    text = json.dumps(grammar)
    for inc in re.findall(r'"include": "#([\w-]+)"', text):
        assert inc in grammar["repository"], inc


def _lark_words(terminal: str) -> set[str]:
    lark = (REPO / "auditlang" / "syntax" / "audit.lark").read_text(encoding="utf-8")
    m = re.search(rf"^{terminal}(?:\.\d+)?:\s*/\(?([\w|]+)\)?\\b/", lark, re.M)
    assert m, terminal
    return set(m.group(1).split("|"))


def _tm_words(pattern: str) -> set[str]:
    m = re.fullmatch(r"\\b(?:\(\?:)?([\w|]+)\)?\\b", pattern)
    assert m, pattern
    return set(m.group(1).split("|"))


def test_keywords_are_the_lark_grammars(grammar):
    """The keyword alternatives in the TextMate grammar are exactly the lark terminals'."""
    rep = grammar["repository"]
    assert _tm_words(rep["keyword"]["patterns"][0]["match"]) == _lark_words("KIND") == set(KINDS)
    assert _tm_words(rep["constant"]["patterns"][0]["match"]) == _lark_words("TRUE") | _lark_words("FALSE")
    assert _tm_words(rep["constant"]["patterns"][1]["match"]) == _lark_words("NONE")
    assert "(" + "|".join(KINDS) + ")" in rep["declaration"]["match"]


# lark token type -> the scope every character of it must carry
EXPECTED = {
    "KIND": "storage.type.audit", "IMPORT": "keyword.control.import.audit", "AS": "keyword.control.import.audit",
    "REPORT": "keyword.other.report.audit", "WITH": "keyword.operator.with.audit",
    "TRUE": "constant.language.boolean.audit", "FALSE": "constant.language.boolean.audit",
    "NONE": "constant.language.null.audit", "SIGNED_NUMBER": "constant.numeric.audit",
    "STRING": "string.quoted.double.audit", "LONG_STRING": "string.quoted.triple.audit",
    "COMMENT": "comment.line.number-sign.audit", "EQUAL": "keyword.operator.assignment.audit",
}
NOT_FOR_NAMES = ("storage.", "keyword.", "constant.", "string.", "comment.")


@pytest.mark.parametrize("path", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_grammar_highlights_every_token_as_the_compiler_lexes_it(grammar, path):
    text = path.read_text(encoding="utf-8")
    scopes = Tokenizer(grammar).scopes(text)
    toks = [t for t in _parser().lex(text, dont_ignore=True) if t.type != "WS"]
    seen = set()
    for i, t in enumerate(toks):
        start, end = t.start_pos, t.end_pos
        nxt = toks[i + 1].type if i + 1 < len(toks) else None
        prev = toks[i - 1].type if i else None
        where = f"{path.name}:{t.line}:{t.column} {t.type} {str(t)[:30]!r}"
        if t.type in EXPECTED:
            want = EXPECTED[t.type]
        elif t.type == "NAME" and nxt == "LPAR":
            want = "entity.name.function.audit"
        elif t.type == "NAME" and prev == "KIND":
            want = "entity.name.type.audit"
        elif t.type == "NAME" and nxt == "EQUAL":
            want = "variable.parameter.audit"
        elif t.type == "NAME" and nxt == "DOT" and toks[i + 2].type == "NAME" and (i + 3 >= len(toks) or toks[i + 3].type != "LPAR"):
            want = "entity.name.namespace.audit"
        else:
            want = None
        for j in range(start, end):
            if t.type == "NAME" and want is None:
                assert not any(s.startswith(NOT_FOR_NAMES) for s in scopes[j]), (where, scopes[j])
            elif want is not None:
                assert want in scopes[j], (where, j - start, scopes[j])
        seen.add(t.type)
    assert {"KIND", "NAME", "EQUAL"} <= seen


def test_tokenizer_on_a_hand_written_line(grammar):
    """The scopes of one line, written out by hand (guards the test tokenizer itself)."""
    line = 'protocol p = s000.token_norm with (top_k=5, prefix="{{ x }}") # note'
    sc = Tokenizer(grammar).scopes(line)

    def at(sub, k=0):
        return sc[line.index(sub) + k][-1]

    assert at("protocol") == "storage.type.audit"
    assert at("p =") == "entity.name.type.audit"
    assert at("s000") == "entity.name.namespace.audit" and at(".token") == "punctuation.accessor.audit"
    assert at("token_norm") == "source.audit"
    assert at("with") == "keyword.operator.with.audit"
    assert at("top_k") == "variable.parameter.audit" and at("5") == "constant.numeric.audit"
    assert at("{{") == "meta.embedded.template.jinja.audit" and "string.quoted.double.audit" in sc[line.index("{{")]
    assert at("# note") == "comment.line.number-sign.audit"
