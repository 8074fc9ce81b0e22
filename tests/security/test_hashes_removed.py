"""Deleting the hashes does not turn their check off (issue 40 item 1; docs/security.md).

A finished dry-run run directory; the user (or an attacker) edits its metrics, records or journal
and removes the content hashes run.json recorded for them (`artifacts` deleted, set to `{}`, or
one entry dropped). Every command that reads the run refuses it (exit 1, a message naming run.json
or the file) instead of reporting the edited numbers; derived files with no hash are rebuilt.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main

from .conftest import make_project, run_dryrun

COMMANDS = (["report", "runs/r"], ["status", "runs/r"], ["rescore", "runs/r", "--evaluator", "first_char"],
            ["diff", "runs/r", "runs/r"], ["merge", "runs/m", "runs/r"])


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    proj = make_project(tmp_path / "proj")
    assert run_dryrun("s.audit", "runs/r") == 0
    return proj / "runs/r"


def _info(run: Path) -> dict:
    return json.loads((run / "run.json").read_text(encoding="utf-8"))


def _write_info(run: Path, info: dict) -> None:
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")


def _edit_everything(run: Path) -> None:
    """Accuracy 0.987 in the metrics, every record correct, every journal answer 'A'."""
    cells = pd.read_csv(run / "metrics/cells.csv")
    cells["accuracy"] = 0.987
    cells.to_csv(run / "metrics/cells.csv", index=False)
    rec = pd.read_parquet(run / "records.parquet")
    rec["correct"] = True
    rec.to_parquet(run / "records.parquet")
    db = sqlite3.connect(run / "journal.sqlite")
    db.execute("UPDATE results SET result = replace(result, '\"text\"', '\"text\" ') WHERE error IS NULL")
    db.commit()
    db.close()


@pytest.mark.parametrize("how", ["deleted", "empty", "null"])
def test_a_run_directory_without_its_hashes_is_refused(finished, capsys, how):
    _edit_everything(finished)
    info = _info(finished)
    if how == "deleted":
        del info["artifacts"]
    else:
        info["artifacts"] = {} if how == "empty" else None
    _write_info(finished, info)
    report_before = (finished / "report/cells.md").read_bytes()
    for cmd in COMMANDS:
        capsys.readouterr()
        assert main(cmd) == 1, cmd
        err = capsys.readouterr().err
        assert "Traceback" not in err and "internal error" not in err, cmd
        assert "runs/r/run.json: its content hashes (`artifacts`)" in err, (cmd, err)
        assert "refusing to read the run directory" in err and "restore" in err, cmd
    assert (finished / "report/cells.md").read_bytes() == report_before  # nothing rewritten
    assert not (finished.parent / "m").exists()
    # the Python API refuses it too
    proc = subprocess.run([sys.executable, "-c", "import auditlang; auditlang.open_run('runs/r')"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "content hashes" in proc.stderr


def test_the_subprocess_path_exits_1(finished):
    info = _info(finished)
    info["artifacts"] = {}
    _write_info(finished, info)
    proc = subprocess.run([sys.executable, "-m", "auditlang.cli", "report", "runs/r"], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "content hashes" in proc.stderr and "Traceback" not in proc.stderr


def test_journal_digest_removed_with_an_edited_journal(finished, capsys):
    _edit_everything(finished)
    info = _info(finished)
    del info["artifacts"]["journal.sqlite"]
    for rel in ("records.parquet", "records.jsonl", "metrics/cells.csv", "metrics/cells.md", "metrics/cells.json"):
        del info["artifacts"][rel]
    _write_info(finished, info)
    for cmd in (["report", "runs/r"], ["status", "runs/r"], ["rescore", "runs/r", "--evaluator", "first_char"]):
        capsys.readouterr()
        assert main(cmd) == 1, cmd
        err = capsys.readouterr().err
        assert "runs/r/journal.sqlite: has no hash recorded in run.json" in err, (cmd, err)


@pytest.mark.parametrize("rel", ["plan.json", "spec", "plan.requests.tsv.gz"])
def test_an_input_hash_removed_is_refused(finished, capsys, rel):
    info = _info(finished)
    del info["artifacts"][rel]
    _write_info(finished, info)
    capsys.readouterr()
    assert main(["report", "runs/r"]) == 1
    assert f"runs/r/{rel}: has no hash recorded in run.json" in capsys.readouterr().err


def test_a_data_hash_removed_is_refused(finished, capsys):
    info = _info(finished)
    del info["data"]["arc"]["sha256"]
    _write_info(finished, info)
    capsys.readouterr()
    assert main(["report", "runs/r"]) == 1
    assert "the copy of dataset 'arc' has no sha256 recorded" in capsys.readouterr().err


def test_edited_metrics_and_records_with_their_hashes_removed_are_rebuilt(finished, capsys):
    """Derived files with no hash are not trusted: `auditc report` rebuilds them from the
    (verified) journal, says so, and the edited numbers are gone; `diff` refuses them."""
    true_acc = float(pd.read_csv(finished / "metrics/cells.csv")["accuracy"].iloc[0])
    cells = pd.read_csv(finished / "metrics/cells.csv")
    cells["accuracy"] = 0.987
    cells.to_csv(finished / "metrics/cells.csv", index=False)
    rec = pd.read_parquet(finished / "records.parquet")
    rec["correct"] = True
    rec.to_parquet(finished / "records.parquet")
    info = _info(finished)
    for rel in ("records.parquet", "metrics/cells.csv"):
        del info["artifacts"][rel]
    _write_info(finished, info)
    capsys.readouterr()
    assert main(["diff", "runs/r", "runs/r"]) == 1
    assert "records.parquet: this file has no hash recorded in run.json" in capsys.readouterr().err
    assert main(["report", "runs/r"]) == 0
    err = capsys.readouterr().err
    assert "records.parquet has no hash recorded in run.json" in err and "rebuilt from journal.sqlite" in err
    assert float(pd.read_csv(finished / "metrics/cells.csv")["accuracy"].iloc[0]) == pytest.approx(true_acc)
    assert "0.987" not in (finished / "report/cells.md").read_text(encoding="utf-8")
    assert main(["report", "runs/r"]) == 0  # recorded again: nothing to note
    assert "note:" not in capsys.readouterr().err

