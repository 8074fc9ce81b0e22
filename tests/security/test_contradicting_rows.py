"""A data row that contradicts itself, or a CSV row with cells missing, is a DataError at plan
time naming the file and line (issue 40 item 3; docs/language.md "Datasets"), never a gold picked
silently from one of two fields, nor a crash in scoring after every request ran."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from auditlang.cli import main

from .conftest import ARC_ROWS, BASE, make_project, run_dryrun


def _rows(**change) -> str:
    """ARC_ROWS with answer_index added (agreeing), then row 3 (line 4) changed."""
    rows = [json.loads(line) for line in ARC_ROWS.splitlines()]
    for r in rows:
        r["answer_index"] = r["choices"].index(r["answer"])
    rows[3].update(change)
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_agreeing_answer_and_index_plan_as_before(tmp_path, capsys):
    make_project(tmp_path / "p", rows=_rows())
    assert main(["plan", "s.audit", "--data-root", "data"]) == 0


@pytest.mark.parametrize("cmd", ["plan", "check-run"])
def test_answer_and_answer_index_that_disagree(tmp_path, capsys, cmd):
    # row 3: answer "3" is choice 0, answer_index says 2 ("5")
    make_project(tmp_path / "p", rows=_rows(answer_index=2))
    capsys.readouterr()
    rc = main(["plan", "s.audit", "--data-root", "data"]) if cmd == "plan" else run_dryrun("s.audit", "runs/r")
    assert rc == 1
    err = capsys.readouterr().err
    assert "data/arc.jsonl:4" in err and "contradicts itself" in err, err
    assert "'answer' '3' is choice 0" in err and "'answer_index' is 2 ('5')" in err
    assert "hint:" in err and "Traceback" not in err
    if cmd == "check-run":
        assert not (tmp_path / "p/runs/r").exists()  # refused before anything was written


def test_an_option_label_that_disagrees_with_the_index(tmp_path, capsys):
    spec = BASE.replace('task=multiple_choice,', 'task=multiple_choice, labels=["A", "B", "C", "D"],')
    make_project(tmp_path / "p", spec=spec, rows=_rows(answer="D", answer_index=1))
    capsys.readouterr()
    assert main(["plan", "s.audit", "--data-root", "data"]) == 1
    err = capsys.readouterr().err
    assert "data/arc.jsonl:4" in err and "the option labelled 'D' (choice 3)" in err, err


CSV_SPEC = BASE.replace('jsonl("arc.jsonl", task=multiple_choice,', 'csv("arc.csv", task=multiple_choice, gold=none,')


def test_a_csv_row_with_too_few_cells(tmp_path):
    """Subprocess, as typed: `auditc plan` and `auditc run` refuse the row before any request."""
    proj = make_project(tmp_path / "p", spec=CSV_SPEC)
    lines = ["id,question,choices,answer_index"]
    lines += [f'q{i},Which is {i}?,"[""{i}"", ""{i + 1}"", ""{i + 2}""]",{i % 3}' for i in range(8)]
    lines[5] = 'q4,Which is 4?,"[""4"", ""5"", ""6""]"'  # the answer_index cell is missing
    (proj / "data/arc.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for cmd in (["plan", "s.audit", "--data-root", "data"],
                ["run", "s.audit", "--data-root", "data", "--engine", "dryrun", "--no-progress", "--out", "runs/r"]):
        proc = subprocess.run([sys.executable, "-m", "auditlang.cli", *cmd], capture_output=True, text=True, cwd=proj)
        assert proc.returncode == 1, proc.stderr
        assert "data/arc.csv:6" in proc.stderr and "row has 3 cells, the header has 4" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert not (proj / "runs/r").exists()
