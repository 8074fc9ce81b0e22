"""Inputs that used to crash (exit 70) or were silently accepted are diagnostics (issue 15): each
case is a spec, template or data file on disk and `auditc plan`/`run` through ``main([...])``;
each must exit 1 with the code, a location and a hint, never a traceback.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from auditlang.cli import main

from .conftest import ARC_ROWS, BASE, make_project, run_dryrun, spec_with_template

JSONL_DS = 'dataset arc = jsonl("x.jsonl", task=multiple_choice)'
CSV_DS = 'dataset arc = csv("x.csv", task=multiple_choice)'


def _plan(capsys) -> tuple[int, str]:
    rc = main(["plan", "s.audit", "--data-root", "data"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err
    return rc, out.err


# ---------------------------------------------------------------- template crashes

@pytest.mark.parametrize("text,needle", [
    ("{{ 1/0 }}", "division by zero"),
    ("{% for i in range(200000) %}{% endfor %}", "Range too big"),
    ("{{ 10.0 ** 400 }}", "OverflowError"),
    ("{{ 2 ** 5000 }}", "exponent 5000 is larger than 1000"),
    ("{{ (10**300)|float * 1e300 }}", ""),  # inf: renders, no crash
    ("{{ 'x' * 100000000 }}", "builds more than"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion too deep"),
])
def test_template_render_failures_are_diagnostics_at_the_template(tmp_path, capsys, text, needle):
    make_project(tmp_path / "p", spec_with_template('"' + text + ' {{ question }}"'))
    rc, err = _plan(capsys)
    if not needle:
        assert rc == 0
        return
    assert rc == 1 and needle in err
    assert "s.audit:4:" in err and ("error[E163]" in err) and "hint:" in err


def test_template_file_errors_point_at_the_template_file_line(tmp_path, capsys):
    proj = make_project(tmp_path / "p", spec_with_template('file="t.j2"'))
    (proj / "t.j2").write_text("Question: {{ question }}\nline two\n{{ 1/0 }}\n", encoding="utf-8")
    rc, err = _plan(capsys)
    assert rc == 1 and f"{proj / 't.j2'}:3:1: error[E163]" in err and "division by zero" in err
    (proj / "s.audit").write_text(spec_with_template('file="t2.j2"'))
    (proj / "t2.j2").write_bytes(b"ok {{ question }}\nbad \xff\xfe byte\n")
    rc, err = _plan(capsys)
    assert rc == 1 and f"{proj / 't2.j2'}:2:" in err and "not valid UTF-8" in err and "hint: save the file as UTF-8" in err


def test_template_file_with_bom_is_accepted(tmp_path, capsys):
    proj = make_project(tmp_path / "p", spec_with_template('file="t.j2"'))
    (proj / "t.j2").write_bytes("\ufeffQ: {{ question }}".encode("utf-8"))
    assert main(["plan", "s.audit", "--data-root", "data", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert all("\ufeff" not in json.dumps(r) for r in body["requests"])


# ---------------------------------------------------------------- data crashes

@pytest.mark.parametrize("name,content,needle,line", [
    ("x.jsonl", '{"question": "q", "choices": ["a", "b"], "answer": "a", "n": ' + "9" * 5000 + "}\n", "unreadable JSON value", 1),
    ("x.jsonl", '{"question": "q", "choices": ["a", "b"], "answer": "a"}\n{"n": ' + "[" * 100000 + "]" * 100000 + "}\n",
     "nested too deeply", 2),
    ("x.jsonl", '{"question": "q", "choices": ["a", "b"], "answer": "a"}\n{"question": "r", "choices": ["a"], "answer": "c"}\n',
     "gold answer 'c' is not one of the 1 choices", 2),
    ("x.csv", b"question,choices,answer\nq,\"[\"\"a\"\",\"\"b\"\"]\",a\n\xff\xfe,x,y\n", "not valid UTF-8", 3),
    ("x.jsonl", b'{"question": "q", "choices": ["a", "b"], "answer": "a"}\n\xff\n', "not valid UTF-8", 2),
])
def test_data_file_failures_are_diagnostics_at_file_line(tmp_path, capsys, name, content, needle, line):
    proj = make_project(tmp_path / "p", spec_with_template('"{{ question }}"', CSV_DS if name.endswith("csv") else JSONL_DS))
    data = proj / "data" / name
    data.write_bytes(content if isinstance(content, bytes) else content.encode())
    rc, err = _plan(capsys)
    assert rc == 1 and "error[E170]" in err and needle in err
    assert f"{data}:{line}:" in err and "s.audit:2:" in err


def test_gold_outside_choices_counts_the_rows(tmp_path, capsys):
    rows = "".join(json.dumps({"question": f"q{i}", "choices": ["a", "b"], "answer": "z"}) + "\n" for i in range(5))
    proj = make_project(tmp_path / "p", spec_with_template('"{{ question }}"', JSONL_DS))
    (proj / "data" / "x.jsonl").write_text(rows)
    rc, err = _plan(capsys)
    assert rc == 1 and "gold answer 'z' is not one of the 2 choices (5 rows have problems; the first is shown)" in err


def test_csv_and_jsonl_with_bom_are_read(tmp_path, capsys):
    proj = make_project(tmp_path / "p", spec_with_template('"{{ question }}"', CSV_DS))
    (proj / "data" / "x.csv").write_bytes("\ufeffquestion,choices,answer\nq,\"[\"\"a\"\",\"\"b\"\"]\",a\n".encode())
    assert _prompts(capsys) == ["q"]  # the first column is `question`, not `\ufeffquestion`
    (proj / "s.audit").write_text(spec_with_template('"{{ question }}"', JSONL_DS))
    (proj / "data" / "x.jsonl").write_bytes(b"\xef\xbb\xbf" + ARC_ROWS.encode())
    first = json.loads(ARC_ROWS.splitlines()[0])["question"]
    assert _prompts(capsys)[0] == first


def _prompts(capsys) -> list[str]:
    """The user-message texts of the planned requests (``auditc plan --format json``), in order."""
    assert main(["plan", "s.audit", "--data-root", "data", "--format", "json"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "\ufeff" not in out.out
    reqs = json.loads(out.out)["requests"]
    return [m["content"] for r in reqs for m in r["prompt"]["messages"] if m["role"] == "user"]


def test_data_warnings_have_counts_and_can_be_errors(tmp_path, capsys):
    rows = [{"id": "a", "question": "", "choices": ["x", "y"], "answer": "x"},
            {"id": "a", "question": "q1", "choices": ["x", "y"], "answer": "x"},
            {"id": "b", "question": "q1", "choices": ["x", "y"], "answer": "x"},
            {"id": "c", "question": "q2", "choices": ["x", {"k": 1}], "answer": "x"},
            {"id": "d", "question": "q3", "choices": ["x", "y"], "answer": "x"}]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"id": "e", "question": NaN, "choices": ["x", "y"], "answer": "x"}\n'
    proj = make_project(tmp_path / "p", spec_with_template('"{{ question }}"', JSONL_DS))
    (proj / "data" / "x.jsonl").write_text(text)
    rc, err = _plan(capsys)
    assert rc == 0
    assert "warning[W170]" in err and "1 of 6 row(s) have an empty question (line 1)" in err
    assert "warning[W171]" in err and "1 row(s) repeat an id already used (line 2)" in err
    assert "warning[W172]" in err and "1 row(s) duplicate an earlier row (line 3)" in err
    assert "warning[W173]" in err and "2 row(s) hold NaN" in err and "lines 4, 6" in err
    assert "0 error(s), 4 warning(s)" in err
    (proj / "s.audit").write_text(spec_with_template('"{{ question }}"', JSONL_DS, "settings {\n  data_warnings = error\n}\n"))
    rc, err = _plan(capsys)
    assert rc == 1 and "error[E174]" in err and "error[E177]" in err


# ---------------------------------------------------------------- spec text

def test_deeply_nested_lists_are_a_diagnostic(tmp_path, capsys):
    for n in (500, 20000):
        make_project(tmp_path / f"p{n}", BASE.replace("sample=4", "filter_in=" + "[" * n + "]" * n))
        rc, err = _plan(capsys)
        assert rc == 1 and "error[E005]" in err and "s.audit:3:" in err and len(err) < 2000


def test_long_invalid_with_chain_is_one_diagnostic(tmp_path, capsys):
    chain = "".join(f"protocol p{i} = p{i - 1} with (top_k=2)\n" for i in range(3000, 0, -1)) + "protocol p0 = nope(x=1)\n"
    make_project(tmp_path / "p", BASE + chain)
    rc, err = _plan(capsys)
    assert rc == 1 and "error[E107]" in err and "definition chain deeper than 100 objects" in err
    assert "2 error(s)" in err and len(err) < 3000


def test_spec_with_bom_is_accepted_and_non_utf8_has_a_location(tmp_path, capsys):
    proj = make_project(tmp_path / "p", BASE)
    (proj / "s.audit").write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert _plan(capsys)[0] == 0
    (proj / "s.audit").write_bytes(BASE.encode() + b"# caf\xe9\n")
    rc, err = _plan(capsys)
    assert rc == 1 and "s.audit:14:6: error[E111]" in err and "hint: save the spec as UTF-8" in err


@pytest.mark.parametrize("edit,needle", [
    (("sample=4, seed=7", "sample=4, sample=3, seed=7"), "s.audit:3:66: error[E115]: parameter 'sample' given twice"),
    (("  metrics = [accuracy]", "  metrics = [accuracy]\n  metrics = [brier]"), "error[E115]: parameter 'metrics' given twice"),
    (("sample=4", "sample=true"), "error[E123]: invalid value for 'sample' of jsonl(): expected an integer, got true"),
    (("batch_size=4", "batch_size=false"), "expected an integer or one of auto, got false"),
])
def test_silent_acceptances_are_errors(tmp_path, capsys, edit, needle):
    make_project(tmp_path / "p", BASE.replace(*edit))
    rc, err = _plan(capsys)
    assert rc == 1 and needle in err and "hint:" in err


def test_error_output_is_capped_with_a_count(tmp_path, capsys):
    make_project(tmp_path / "p", BASE + "".join(f'dataset d{i} = jsonl("x", nope{i}=1)\n' for i in range(3000)))
    rc, err = _plan(capsys)
    assert rc == 1 and "... and 2950 more diagnostic(s) not shown" in err and "3000 error(s)" in err
    assert len(err) < 40_000


# ---------------------------------------------------------------- run directory details

def test_records_have_the_mode_of_other_outputs_and_no_tmp_is_left(tmp_path):
    proj = make_project(tmp_path / "p")
    old = os.umask(0o022)
    try:
        assert run_dryrun("s.audit", "runs/r") == 0
    finally:
        os.umask(old)
    rd = proj / "runs" / "r"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in rd.iterdir() if p.is_file() and p.name != "run.lock"}
    assert modes["records.parquet"] == modes["run.json"] == modes["plan.json"] == 0o644, modes
    assert [p for p in rd.rglob("*") if p.name.endswith(".tmp") or p.name == "spec.new"] == []


def test_two_imports_sharing_a_file_name_are_both_stored(tmp_path):
    proj = make_project(tmp_path / "p")
    for sub, text in (("a", "template ta = template(\"A {{ question }}\")\n"), ("b", "template tb = template(\"B {{ question }}\")\n")):
        (proj / sub).mkdir()
        (proj / sub / "lib.audit").write_text(text)
    (proj / "s.audit").write_text('import "a/lib" as la\nimport "b/lib" as lb\n' + BASE)
    assert run_dryrun("s.audit", "runs/r") == 0
    stored = proj / "runs" / "r" / "spec" / "project"
    assert (stored / "a" / "lib.audit").read_text().startswith("template ta")
    assert (stored / "b" / "lib.audit").read_text().startswith("template tb")
