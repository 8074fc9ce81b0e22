"""Spec input that used to crash `auditc` with exit 70 (issue 40, items 8 and 10): each is a spec or
run directory on disk and `auditc check`/`plan`/`run` through ``main([...])``; each must be a
diagnostic with a location and a hint (exit 1), never a traceback.
"""

from __future__ import annotations

import pytest

from auditlang.cli import main

from .conftest import BASE, make_project, run_dryrun, spec_with_template


def _check(capsys, *cmd: str) -> tuple[int, str]:
    rc = main(list(cmd))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    return rc, err


@pytest.mark.parametrize("edit,code,needle", [
    (("seed=7)", "seed=7, filter_field=\"x\", filter_in=[" + ",".join(['"a"'] * 1_300_000) + "])"), "E006",
     "more than 2,000,000"),
    (("seed=7)", "seed=7, filter_field=\"x\", filter_in=[" + ",".join(["1"] * 120_000) + "])"), "E006",
     "more than 100,000 tokens"),
    (("model smol", "model " + "s" * 300), "E007", "names are at most 128"),
    (("audit a {", "audit " + "a" * 300 + " {"), "E007", "names are at most 128"),
    (("\"arc.jsonl\"", '"' + "a" * 300 + '.jsonl"'), "E123", "at most 255 bytes"),
    (("\"arc.jsonl\"", '"arc\\u0000.jsonl"'), "E123", "NUL"),
    (("sample=4", "sample=" + "9" * 400), "E123", "less than or equal to 1000000"),
    (("  metrics = [accuracy]", "  metrics = [accuracy]\n  bootstrap = bootstrap(resamples=10000000000000)"), "E123",
     "at most 100,000 resamples"),
    (("audit a {", "audit a\x00 {"), "E003", "unexpected character"),
])
def test_hostile_spec_text_is_a_diagnostic_from_check(tmp_path, capsys, edit, code, needle):
    make_project(tmp_path / "p", BASE.replace(*edit))
    for cmd in (["check", "s.audit"], ["plan", "s.audit", "--no-data"], ["plan", "s.audit", "--data-root", "data"]):
        rc, err = _check(capsys, *cmd)
        assert rc == 1 and f"error[{code}]" in err and needle in err and "hint:" in err, err[-1500:]
        assert "s.audit:" in err


@pytest.mark.parametrize("template", [
    "{% if true %}" * 2000 + "{{ question }}" + "{% endif %}" * 2000,
    "{{ " + "(" * 2000 + "question" + ")" * 2000 + " }}",
    "".join(f"{{% for x{i} in [1] %}}" for i in range(30)) + "{{ question }}" + "{% endfor %}" * 30,
])
def test_deeply_nested_templates_are_e160_from_check(tmp_path, capsys, template):
    proj = make_project(tmp_path / "p", spec_with_template('file="t.j2"'))
    (proj / "t.j2").write_text(template, encoding="utf-8")
    rc, err = _check(capsys, "check", "s.audit")
    assert rc == 1 and f"{proj / 't.j2'}:1:1: error[E160]" in err and "cannot be compiled" in err and "hint:" in err


def test_a_folder_in_place_of_run_lock_is_a_user_error(tmp_path, capsys):
    make_project(tmp_path / "p")
    assert run_dryrun("s.audit", "runs/r") == 0
    capsys.readouterr()
    lock = tmp_path / "p" / "runs" / "r" / "run.lock"
    lock.unlink()
    lock.mkdir()
    rc, err = _check(capsys, "run", "s.audit", "--data-root", "data", "--out", "runs/r", "--engine", "dryrun",
                     "--no-progress")
    assert rc == 1 and "cannot open the run lock" in err and "hint:" in err
    rc, _ = _check(capsys, "status", "runs/r")
    assert rc == 0


@pytest.mark.parametrize("imp", ["stdlib/s00", "nothere", "sub/othr", "sub", "../../etc/passwd", "/etc/passwd",
                                 "a" * 300, "stdlib/../../x", "x\\u0000y", "sub/other.audit/x", ""])
def test_every_import_error_has_a_hint(tmp_path, capsys, imp):
    proj = make_project(tmp_path / "p", f'import "{imp}"\n')
    (proj / "sub").mkdir()
    (proj / "sub" / "other.audit").write_text("", encoding="utf-8")
    rc, err = _check(capsys, "check", "s.audit")
    assert rc == 1 and "s.audit:1:1: error[E112]" in err and "hint:" in err, err


def test_unknown_report_output_parameter_is_e120_with_did_you_mean(tmp_path, capsys):
    make_project(tmp_path / "p", BASE.replace("report cells, checklist", "report cells, disclosure(fromat=latex)"))
    rc, err = _check(capsys, "check", "s.audit")
    assert rc == 1 and "s.audit:13:26: error[E120]: unknown parameter 'fromat'" in err and "did you mean 'format'?" in err


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_a_with_chain_deeper_than_100_is_e103(tmp_path, capsys, order):
    decls = ["protocol p0 = s000.token_norm\n"] + [f"protocol p{i + 1} = p{i} with (top_k=20)\n" for i in range(1000)]
    spec = 'import "stdlib/s000"\n' + "".join(decls if order == "forward" else decls[::-1])
    make_project(tmp_path / "p", spec)
    rc, err = _check(capsys, "check", "s.audit")
    assert rc == 1 and "error[E103]: definition chain deeper than 100 objects" in err and "hint:" in err
    assert err.count("error[E103]") == 1
    make_project(tmp_path / "q", 'import "stdlib/s000"\n' + "".join(decls[:60]))
    assert _check(capsys, "check", "s.audit")[0] == 0


def test_non_utf8_spec_and_template_show_the_line_and_a_caret(tmp_path, capsys):
    proj = make_project(tmp_path / "p", spec_with_template('file="t.j2"'))
    (proj / "s.audit").write_bytes(b'import "stdlib/s000"\n# caf\xe9 \n')
    rc, err = _check(capsys, "check", "s.audit")
    assert rc == 1 and "s.audit:2:6: error[E111]" in err and "   2 | # caf\ufffd" in err and "\n            ^\n" in err
    (proj / "s.audit").write_text(spec_with_template('file="t.j2"'), encoding="utf-8")
    (proj / "t.j2").write_bytes(b"ok {{ question }}\nbad \xff byte\n")
    rc, err = _check(capsys, "check", "s.audit")
    assert rc == 1 and f"{proj / 't.j2'}:2:5: error[E160]" in err and "   2 | bad \ufffd byte" in err
    assert "\n           ^\n" in err and "hint: save the file as UTF-8" in err
