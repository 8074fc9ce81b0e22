"""A run directory belongs to the spec file it was run from (issue 24 item 5; docs/security.md).

`auditc run other.audit --out runs/x`, where runs/x holds a finished run of s.audit, is refused
with an error naming s.audit and nothing in runs/x changes; `--replace` takes it over. Editing
s.audit and rerunning it into the same folder stays the normal resume.
"""

from __future__ import annotations

import json
from pathlib import Path

from auditlang.cli import main

from .conftest import BASE, make_project, run_dryrun

OTHER = BASE.replace("sample=4, seed=7", "sample=3, seed=9")


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name not in ("heartbeat.json", "run.lock")}


def test_another_spec_cannot_take_over_a_run_directory(tmp_path, capsys):
    proj = make_project(tmp_path / "proj")
    (proj / "other.audit").write_text(OTHER, encoding="utf-8")
    assert run_dryrun("s.audit", "runs/x") == 0
    before = _snapshot(proj / "runs/x")
    capsys.readouterr()
    assert run_dryrun("other.audit", "runs/x") == 1
    err = capsys.readouterr().err
    assert "runs/x holds a run of another spec, s.audit" in err and "--replace" in err
    assert _snapshot(proj / "runs/x") == before  # plan, records, report and spec copy untouched
    # the owner resumes as before, edits included
    (proj / "s.audit").write_text(BASE.replace("report cells, checklist", "report cells"), encoding="utf-8")
    assert run_dryrun("s.audit", "runs/x") == 0
    # --replace: the other spec takes it over
    assert run_dryrun("other.audit", "runs/x", "--replace") == 0
    info = json.loads((proj / "runs/x/run.json").read_text(encoding="utf-8"))
    assert info["spec_entry"] == "spec/project/other.audit"
    assert run_dryrun("s.audit", "runs/x") == 1  # now owned by other.audit
    assert "holds a run of another spec, other.audit" in capsys.readouterr().err


def test_the_default_out_of_two_specs_with_one_name(tmp_path, capsys):
    """`auditc run s.audit` and `auditc run exp/s.audit` both default to runs/s."""
    proj = make_project(tmp_path / "proj")
    (proj / "exp").mkdir()
    (proj / "exp" / "s.audit").write_text(OTHER, encoding="utf-8")
    args = ["--data-root", "data", "--engine", "dryrun", "--no-progress"]
    assert main(["run", "s.audit", *args]) == 0
    assert main(["run", "exp/s.audit", *args]) == 1
    assert "runs/s holds a run of another spec, s.audit (this is exp/s.audit)" in capsys.readouterr().err
