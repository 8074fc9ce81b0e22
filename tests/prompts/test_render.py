"""Compiling, inspecting and rendering templates in the sandbox."""

from __future__ import annotations

import pytest

from auditlang.prompts import (
    TemplateError,
    TemplateNotFoundError,
    compile_stdlib_template,
    compile_template,
    letters,
    load_stdlib_template,
    options,
    template_hash,
)


def test_render_inline_with_filters() -> None:
    t = compile_template("Q: {{ question }}\n{{ choices | options }}\nLabels: {{ labels | join(', ') }}", "t")
    out = t.render({"question": "2+2?", "choices": ["3", "4"], "labels": ["A", "B"]})
    assert out == "Q: 2+2?\nA. 3\nB. 4\nLabels: A, B"


def test_options_custom_format_and_letters() -> None:
    assert options(["x", "y", "z"], "{label}: {text}", ", ") == "A: x, B: y, C: z"
    assert options(["x"], "({label}) {text} {other}") == "(A) x {other}"
    assert letters(10)[-1] == "J"
    with pytest.raises(ValueError, match="at most 26"):
        letters(27)
    with pytest.raises(ValueError, match="free-form"):
        options(None)


def test_format_placeholders_cannot_reach_attributes() -> None:
    out = compile_template("{{ choices | options('{text.__class__}') }}", "t").render({"choices": ["a"]})
    assert out == "{text.__class__}"


def test_keep_trailing_newline_is_byte_exact() -> None:
    assert compile_template("a\n", "t").render({}) == "a\n"
    assert compile_template("a", "t").render({}) == "a"


def test_strict_undefined_names_the_variable() -> None:
    t = compile_template("line one\nHello {{ persona }}!", "greet")
    with pytest.raises(TemplateError) as info:
        t.render({"question": "q"})
    err = info.value
    assert "'persona' is undefined" in str(err)
    assert err.name == "greet" and err.line == 2
    assert "question" in (err.hint or "")


def test_missing_attribute_of_a_dict_is_named() -> None:
    t = compile_template("{{ oneshot.gold_label }}", "t")
    with pytest.raises(TemplateError, match="gold_label"):
        t.render({"oneshot": {"question": "q"}})


def test_none_is_never_rendered() -> None:
    with pytest.raises(TemplateError, match="None"):
        compile_template("Gold: {{ gold_label }}", "t").render({"gold_label": None})


def test_syntax_error_reports_line_and_col() -> None:
    with pytest.raises(TemplateError) as info:
        compile_template("ok line\nbad {{ question + }} here", "broken")
    err = info.value
    assert err.line == 2 and err.col == 5
    assert "broken, line 2, col 5" in str(err)


def test_unclosed_block_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="line"):
        compile_template("{% for x in examples %}{{ x }}", "t")


def test_variables_are_undeclared_context_names() -> None:
    src = "{% set n = 3 %}{% for ex in examples %}{{ ex.question }}{% endfor %}{{ question }}{{ letters(n) }}"
    assert compile_template(src, "t").variables == frozenset({"examples", "question"})


def test_variables_follow_includes() -> None:
    t = compile_template("{% include 's000/reasoning/instruction_reorder.j2' %} {{ generation }}", "t")
    assert t.variables == frozenset({"question", "choices", "labels", "generation"})


def test_sandbox_blocks_dunder_access() -> None:
    t = compile_template("{{ question.__class__.__mro__ }}", "evil")
    with pytest.raises(TemplateError, match="unsafe"):
        t.render({"question": "q"})
    t2 = compile_template("{{ ''.__class__.__subclasses__() }}", "evil2")
    with pytest.raises(TemplateError):
        t2.render({})


def test_sandbox_forbids_mutating_the_context() -> None:
    t = compile_template("{{ choices.append('x') }}", "t")
    ctx = {"choices": ["a"]}
    with pytest.raises(TemplateError):
        t.render(ctx)
    assert ctx["choices"] == ["a"]


def test_template_hash_is_sha256_prefix() -> None:
    import hashlib

    assert template_hash("abc") == hashlib.sha256(b"abc").hexdigest()[:16]
    t = compile_template("abc", "t")
    assert t.hash == template_hash("abc") and t.source == "abc"


def test_stdlib_lookup_and_suggestion() -> None:
    src = load_stdlib_template("s000/confidence/decimal_01")
    assert src.startswith("{# source:")
    assert load_stdlib_template("s000/confidence/decimal_01.j2") == src
    with pytest.raises(TemplateNotFoundError, match="did you mean s000/confidence/decimal_01"):
        load_stdlib_template("s000/confidence/decimal01")
    with pytest.raises(TemplateNotFoundError):
        load_stdlib_template("../../pyproject.toml")
    assert compile_stdlib_template("s000/confidence/decimal_01").name == "s000/confidence/decimal_01"


def test_include_of_unknown_template_fails_at_compile_time() -> None:
    with pytest.raises(TemplateNotFoundError, match="no stdlib template"):
        compile_template("{% include 's000/nope.j2' %}", "t")


def test_render_needs_a_dict() -> None:
    with pytest.raises(TemplateError, match="dict"):
        compile_template("x", "t").render([])  # type: ignore[arg-type]
