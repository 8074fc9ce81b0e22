"""Terminal output that echoes data shows control characters instead of sending them (issue 24
item 7; docs/security.md): a hostile dataset cannot clear the screen and paint a fake verdict
through `auditc show`, a diagnostic's message or excerpt, or an error line."""

from __future__ import annotations

import json

from auditlang.cli import main

from .conftest import BASE, make_project, spec_with_template

PAINT = "\x1b[2J\x1b[H\x1b[32mALL CHECKS PASSED\x1b[0m\r\u202e"


def _rows(question: str, answer: str = "1") -> str:
    return "".join(json.dumps({"id": f"q{i}", "question": question, "choices": ["1", "2", "3", "4"],
                               "answer": answer}) + "\n" for i in range(6))


def _clean(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text


def test_show_prints_data_and_template_controls_visibly(tmp_path, capsys):
    spec = spec_with_template(f'"{PAINT} {{{{ question }}}}"', dataset=BASE.splitlines()[2])
    make_project(tmp_path / "p", spec, rows=_rows(f"Which number? {PAINT}"))
    assert main(["show", "s.audit", "*", "--data-root", "data"]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert out.count("␛[2J") >= 2  # the template's and the data's, shown


def test_diagnostics_and_errors_show_controls_visibly(tmp_path, capsys):
    proj = make_project(tmp_path / "p", BASE, rows=_rows("Q?", answer=f"none of them {PAINT}"))
    assert main(["plan", "s.audit", "--data-root", "data"]) == 1  # the gold answer is not a choice
    err = capsys.readouterr().err
    _clean(err)
    assert "ALL CHECKS PASSED" in err  # quoted, as text
    # an excerpt of a spec line holding a control character, caret under the right column
    (proj / "s.audit").write_text(BASE.replace("# a small audit", f'model bad = nosuch("{PAINT}")'), encoding="utf-8")
    assert main(["check", "s.audit"]) == 1
    err = capsys.readouterr().err
    _clean(err)
    lines = err.splitlines()
    i = next(n for n, ln in enumerate(lines) if "| model bad = nosuch(" in ln)
    assert lines[i + 1].index("^") == lines[i].index("nosuch")
    # a run-time error quoting a path with a control character
    assert main(["status", f"runs/{PAINT}"]) == 1
    _clean(capsys.readouterr().err)
