"""The run directory vouches for itself (issue 23): each stage records content hashes of what it
wrote (run.json ``artifacts``, store/integrity.py) and later commands check them. Derived files
(records, metrics) are rebuilt with a note; inputs and the journal are errors naming the file.

User path: a spec and a data file on disk, ``auditc run`` with the dry-run engine, then the
user edits or damages a file in the run directory and types the next command.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

SPEC = """import "stdlib/s000"

dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=6, seed=7)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}
report cells
"""


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch) -> Path:
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    lines = (DATA / "arc_challenge.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    (proj / "data" / "arc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (proj / "audit.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(proj)
    assert main(["run", "audit.audit", "--data-root", "data", "--out", "runs/r", "--engine", "dryrun",
                 "--display", "none"]) == 0
    return proj / "runs" / "r"


def _accuracy(run_dir: Path) -> float:
    return float(pd.read_csv(run_dir / "metrics" / "cells.csv")["accuracy"].iloc[0])


def test_stages_record_hashes_of_what_they_wrote(run_dir: Path) -> None:
    arts = json.loads((run_dir / "run.json").read_text())["artifacts"]
    for rel in ("plan.json", "plan.requests.tsv.gz", "spec", "records.parquet", "records.jsonl", "metrics/cells.csv"):
        assert len(arts[rel]["sha256"]) == 64, rel
    assert arts["journal.sqlite"]["ok"] > 0


def test_edited_cells_csv_is_recomputed_not_reported(run_dir: Path, capsys) -> None:
    true_acc = _accuracy(run_dir)
    cells = pd.read_csv(run_dir / "metrics" / "cells.csv")
    cells.loc[0, "accuracy"] = 0.988
    cells.to_csv(run_dir / "metrics" / "cells.csv", index=False)
    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    assert "changed since scoring: metrics/cells.csv" in capsys.readouterr().out
    assert main(["report", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert "metrics/cells.csv" in err and "recomputed from records.parquet" in err
    assert _accuracy(run_dir) == pytest.approx(true_acc)
    report = (run_dir / "report" / "cells.md").read_text(encoding="utf-8")
    assert "0.988" not in report
    # rebuilt files are recorded again: the next report has nothing to note
    assert main(["report", str(run_dir)]) == 0
    assert "note:" not in capsys.readouterr().err


def test_tampered_records_are_rebuilt_from_the_journal(run_dir: Path, capsys) -> None:
    original = pd.read_parquet(run_dir / "records.parquet")
    tampered = original.copy()
    tampered["correct"] = True
    tampered.to_parquet(run_dir / "records.parquet")
    # a command that reads records without rebuilding them refuses, naming the file
    capsys.readouterr()
    assert main(["diff", str(run_dir), str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "records.parquet" in err and "auditc report" in err
    assert main(["report", str(run_dir)]) == 0
    assert "rebuilt from journal.sqlite" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "records.parquet"), original)


def test_edited_data_copy_is_an_error_naming_the_file(run_dir: Path, capsys) -> None:
    info = json.loads((run_dir / "run.json").read_text())
    data = run_dir / info["data"]["arc"]["file"]
    data.write_text(data.read_text(encoding="utf-8").replace("a", "e", 1), encoding="utf-8")
    for cmd in (["report", str(run_dir)], ["rescore", str(run_dir), "--evaluator", "first_char"]):
        capsys.readouterr()
        assert main(cmd) == 1
        err = capsys.readouterr().err
        assert str(data) in err and "sha256" in err and "Traceback" not in err


def test_edited_plan_json_is_an_error_for_status_and_report(run_dir: Path, capsys) -> None:
    plan = run_dir / "plan.json"
    plan.write_text(plan.read_text(encoding="utf-8").replace('"indices"', '"indices" ', 1), encoding="utf-8")
    for cmd in (["status", str(run_dir)], ["report", str(run_dir)]):
        capsys.readouterr()
        assert main(cmd) == 1
        assert "plan.json" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["empty", "deleted_rows", "edited_result"])
def test_damaged_journal_is_an_error_naming_it(run_dir: Path, damage: str, capsys) -> None:
    journal = run_dir / "journal.sqlite"
    if damage == "empty":
        for p in run_dir.glob("journal.sqlite*"):
            p.unlink()
        journal.write_bytes(b"")
    else:
        db = sqlite3.connect(journal)
        if damage == "deleted_rows":
            db.execute("DELETE FROM results WHERE rowid IN (SELECT rowid FROM results LIMIT 2)")
        else:  # the same length: only the content hash sees it
            rid, res = db.execute("SELECT request_id, result FROM results WHERE error IS NULL LIMIT 1").fetchone()
            i = next(i for i, c in enumerate(res) if c.isdigit())
            db.execute("UPDATE results SET result = ? WHERE request_id = ?",
                       (res[:i] + str((int(res[i]) + 1) % 10) + res[i + 1:], rid))
        db.commit()
        db.close()
    commands = [["report", str(run_dir)], ["rescore", str(run_dir), "--evaluator", "first_char"]]
    if damage != "edited_result":  # status counts rows only
        commands.append(["status", str(run_dir)])
    for cmd in commands:
        capsys.readouterr()
        assert main(cmd) == 1, cmd
        err = capsys.readouterr().err
        assert "journal.sqlite" in err and "Traceback" not in err
        if damage == "empty":
            assert "0 bytes" in err


def test_resumed_run_appending_to_the_journal_stays_valid(run_dir: Path, capsys) -> None:
    """Appends after the digest was recorded (a rerun with more items) are not damage."""
    db = sqlite3.connect(run_dir / "journal.sqlite")
    row = db.execute("SELECT request_id, fp_hash, result, error, created_at, shard FROM results LIMIT 1").fetchone()
    db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)", ("zz-extra", row[1], row[2], None, "9999", None))
    db.commit()
    db.close()
    assert main(["status", str(run_dir)]) == 0
    assert main(["report", str(run_dir)]) == 0


def test_merge_refuses_a_shard_whose_journal_was_emptied(tmp_path: Path, capsys) -> None:
    quick = Path(__file__).resolve().parents[2] / "examples" / "quickstart_full.audit"
    for i in (0, 1):
        assert main(["run", str(quick), "--limit", "2", "--engine", "dryrun", "--out", str(tmp_path / f"s{i}"),
                     "--shard", f"{i}/2", "--display", "none"]) == 0
    assert json.loads((tmp_path / "s1" / "run.json").read_text())["artifacts"]["journal.sqlite"]["rows"] > 0
    for p in (tmp_path / "s1").glob("journal.sqlite*"):
        p.unlink()
    (tmp_path / "s1" / "journal.sqlite").write_bytes(b"")
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "all"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path / "s1" / "journal.sqlite") in err and "0 bytes" in err
    assert not (tmp_path / "all" / "journal.sqlite").exists()  # nothing merged


def test_open_run_refuses_an_edited_metrics_file(run_dir: Path) -> None:
    import auditlang
    from auditlang.store.integrity import IntegrityError

    run = auditlang.open_run(run_dir)
    assert len(run.metrics) == 1
    (run_dir / "metrics" / "cells.csv").write_text(
        (run_dir / "metrics" / "cells.csv").read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(IntegrityError) as e:
        run.metrics  # noqa: B018 - the property read is what raises
    assert "metrics/cells.csv" in str(e.value) and "auditc report" in (e.value.hint or "")
