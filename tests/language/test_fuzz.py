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


# ------------------------------------------------------------------ data loading and template rendering
# The same property for what a spec reads besides itself (issue 15): any data file bytes and any
# template text give diagnostics through `auditc plan`, never a traceback.

FUZZ_SPEC = """dataset d = {ctor}("d.{ext}", task=multiple_choice)
model m = embedded("smollm2-135m-instruct")
template t = template(file="t.j2")
variant v = variant(multiple_choice=t)
protocol p = token_prob()
audit a {{
  models = [m]
  datasets = [d]
  variants = [v]
  protocols = [p]
}}
"""
GOOD_ROW = '{"id": "a", "question": "q?", "choices": ["x", "y"], "answer": "x"}\n'
DATA_TOKENS = ['{', '}', '[', ']', '"', ':', ',', '\n', 'NaN', '1e999', '9' * 5000, '"question"', '"choices"',
               '"answer"', '"answer_index"', '-1', 'true', 'null', '\ufeff', '\xff', '\\u0000', '[' * 3000]
TEMPLATE_TOKENS = ["{{", "}}", "{%", "%}", "question", "choices", "1/0", "range(200000)", "10.0 ** 400", "2 ** 9999",
                   "'x' * 99999999", "for", "in", "endfor", "macro f()", "f()", "endmacro", "|float", "|int", "loop",
                   "__class__", "include", "'a'", "\n", "\xff", "(", ")"]


def _plan_case(tmp: Path, data: bytes, ext: str, template: bytes) -> None:
    from auditlang.cli import main

    proj = tmp / "fz"
    proj.mkdir(exist_ok=True)
    (proj / "auditlang.toml").write_text("")
    if ext == "csv":
        data = data.replace(GOOD_ROW.encode(), b'id,question,choices,answer\na,q?,"[""x"",""y""]",x\n', 1)
    (proj / f"d.{ext}").write_bytes(data)
    (proj / "t.j2").write_bytes(template)
    (proj / "s.audit").write_text(FUZZ_SPEC.format(ctor="csv" if ext == "csv" else "jsonl", ext=ext))
    from auditlang.resolve.templates import _compile

    _compile.cache_clear()  # the template file changes between examples
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["plan", str(proj / "s.audit"), "--data-root", str(proj)])
    assert rc in (0, 1), err.getvalue()[-3000:]
    assert "Traceback" not in err.getvalue()


def _joined(tokens: list[str]):
    return st.lists(st.sampled_from(tokens), max_size=25).map("".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_joined(DATA_TOKENS).map(lambda s: (GOOD_ROW + s).encode("utf-8", "surrogatepass")),
                      st.binary(max_size=300).map(lambda b: GOOD_ROW.encode() + b)),
       ext=st.sampled_from(["jsonl", "csv"]))
def test_fuzzed_data_files_only_diagnostics(tmp_path: Path, data: bytes, ext: str) -> None:
    _plan_case(tmp_path, data, ext, b"{{ question }}")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=st.one_of(_joined(TEMPLATE_TOKENS).map(lambda s: s.encode("utf-8")),
                          st.binary(max_size=200)))
def test_fuzzed_templates_only_diagnostics(tmp_path: Path, template: bytes) -> None:
    _plan_case(tmp_path, GOOD_ROW.encode(), "jsonl", template)
