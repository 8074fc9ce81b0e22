"""Property tests: random and mutated specs produce diagnostics, never a Python traceback."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditlang.core.diagnostics import CompileError, render
from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec
from auditlang.syntax.fmt import format_text

REPO = Path(__file__).resolve().parents[2]
SEEDS = [p.read_text(encoding="utf-8") for p in sorted(REPO.glob("examples/*.audit"))] + [
    (REPO / "stdlib" / "s000.audit").read_text(encoding="utf-8"),
    (Path(__file__).parent / "cases" / "unknown_names.audit").read_text(encoding="utf-8"),
]
TOKENS = ["dataset", "model", "audit", "protocol", "=", "(", ")", "[", "]", "{", "}", ",", ".", '"', '"""', "with",
          "import", "report", "x", "jsonl", "token_prob", "verbalized", "1", "-3.5", "on", "none", "\n", "#", "'"]


def _compile(tmp: Path, text: str) -> None:
    p = tmp / "fuzz.audit"
    p.write_text(text, encoding="utf-8")
    try:
        spec = compile_spec(p)
        build_plan(spec, load_data=False)
    except CompileError as e:
        assert e.diagnostics, "a CompileError must carry diagnostics"
        for d in e.diagnostics:
            assert d.code and d.message
            render(d)
    # any other exception propagates and fails the test


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        op = draw(st.sampled_from(["delete", "insert", "dup", "token"]))
        if op == "delete":
            j = min(len(text), i + draw(st.integers(1, 12)))
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.text(min_size=1, max_size=4)) + text[i:]
        elif op == "dup":
            j = min(len(text), i + draw(st.integers(1, 40)))
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated())
def test_mutated_specs_only_diagnostics(tmp_path: Path, text: str) -> None:
    _compile(tmp_path, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join) | st.text(max_size=200))
def test_random_text_only_diagnostics(tmp_path: Path, text: str) -> None:
    _compile(tmp_path, text)


@settings(max_examples=60, deadline=None)
@given(text=mutated())
def test_fmt_never_crashes_and_is_idempotent(text: str) -> None:
    try:
        once = format_text(text)
    except CompileError:
        return
    assert format_text(once) == once
