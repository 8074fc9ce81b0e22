"""The run directory is the artifact (issue 13): report/status/rescore/merge read it back as it
was run, from any folder and after a move, with version and hash checks; edits to the spec are
either adopted (nothing new to execute) or refused with the changed cells named.

These tests take the user's path: a spec file and a data file on disk, `auditc` commands through
``main([...])``, the dry-run engine (``--engine dryrun``) so no model is loaded.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
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
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}
report cells, checklist
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A project folder with a spec and a small data folder; cwd is the project."""
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    lines = (DATA / "arc_challenge.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    (proj / "data" / "arc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (proj / "audit.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(proj)
    return proj


def _run(out: str = "runs/r", *extra: str) -> int:
    return main(["run", "audit.audit", "--data-root", "data", "--out", out, "--engine", "dryrun", "--no-progress", *extra])


def _plan_hash(run_dir: Path) -> str:
    return json.loads((run_dir / "plan.json").read_text())["hash"]


def test_run_dir_holds_spec_data_plan_and_no_absolute_paths(project: Path) -> None:
    assert _run() == 0
    run_dir = project / "runs" / "r"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["format"] == "auditlang.run/2"
    assert (run_dir / info["spec_entry"]).read_text() == SPEC
    assert (run_dir / "spec" / "stdlib" / "s000.audit").exists()
    assert (run_dir / info["data"]["arc"]["file"]).read_bytes() == (project / "data" / "arc.jsonl").read_bytes()
    assert (run_dir / "plan.requests.tsv.gz").exists()
    assert str(project) not in (run_dir / "run.json").read_text()


def test_edit_after_run_reports_the_run_as_it_was(project: Path, capsys) -> None:
    assert _run() == 0
    run_dir = project / "runs" / "r"
    h = _plan_hash(run_dir)
    records = pd.read_parquet(run_dir / "records.parquet")
    # the user edits the sample and the seed after the run
    (project / "audit.audit").write_text(SPEC.replace("sample=6, seed=7", "sample=5, seed=8"), encoding="utf-8")
    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert h in out and "complete" in out
    assert main(["report", str(run_dir)]) == 0
    assert _plan_hash(run_dir) == h
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "records.parquet"), records)
    indices = json.loads((run_dir / "plan.json").read_text())["datasets"]["arc"]["indices"]
    assert len(indices) == 6 and records["item_index"].nunique() == 6
    # the edited spec changes executed cells: refused, with the cells named
    assert main(["report", str(run_dir), "--spec", "audit.audit"]) == 1
    err = capsys.readouterr().err
    assert "a/smol/arc/s000.surface_paraphrase/s000.token_norm/s000.first_char" in err
    assert "auditc run audit.audit" in err
    assert _plan_hash(run_dir) == h  # nothing adopted


def test_report_spec_with_only_new_metrics_is_adopted(project: Path, capsys) -> None:
    assert _run() == 0
    run_dir = project / "runs" / "r"
    new = project / "more_metrics.audit"
    new.write_text(SPEC.replace("metrics = [accuracy, brier]", "metrics = [accuracy, brier, auroc]"), encoding="utf-8")
    assert main(["report", str(run_dir), "--spec", str(new)]) == 0
    cells = pd.read_csv(run_dir / "metrics" / "cells.csv")
    assert "auroc" in cells.columns
    info = json.loads((run_dir / "run.json").read_text())
    assert info["spec_entry"].endswith("more_metrics.audit")
    # from now on the run reports under the adopted spec, with no other input
    assert main(["report", str(run_dir)]) == 0


def test_moved_run_dir_reports_from_anywhere(project: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    assert _run() == 0  # relative --data-root
    moved = tmp_path / "elsewhere" / "copied_run"
    shutil.copytree(project / "runs" / "r", moved)
    shutil.rmtree(project)  # spec, data and the original run are gone
    other = tmp_path / "cwd"
    other.mkdir()
    monkeypatch.chdir(other)
    assert main(["status", str(moved)]) == 0
    assert main(["report", str(moved)]) == 0
    assert main(["rescore", str(moved), "--evaluator", "regex_reparse", "--evaluator", "exact_match"]) == 0
    assert (moved / "rescore" / "regex_reparse" / "records.parquet").exists()
    assert (moved / "rescore" / "exact_match" / "records.parquet").exists()


def test_tampered_or_foreign_run_dirs_are_refused(project: Path, capsys) -> None:
    assert _run() == 0
    run_dir = project / "runs" / "r"
    info = json.loads((run_dir / "run.json").read_text())
    copy = run_dir / info["spec_entry"]
    copy.write_text(copy.read_text().replace("sample=6", "sample=3"))
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 1
    err = capsys.readouterr().err  # the spec copy's hash (store/integrity.py) names the edited file
    assert "spec: this folder has changed since it was written: project/audit.audit" in err
    copy.write_text(SPEC)
    plan = json.loads((run_dir / "plan.json").read_text())
    (run_dir / "plan.json").write_text(json.dumps({**plan, "version": "auditlang.plan/0"}))
    assert main(["report", str(run_dir)]) == 1
    assert "plan version" in capsys.readouterr().err
    assert main(["report", str(project / "data")]) == 1
    assert "not a run directory" in capsys.readouterr().err


def test_status_is_fast_and_tells_live_from_interrupted(project: Path, capsys) -> None:
    assert _run() == 0
    run_dir = project / "runs" / "r"
    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    assert "finished at" in capsys.readouterr().out
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom auditlang.store.runlock import RunLock\n"
        "with RunLock(sys.argv[1]) as lock:\n    lock.beat(doing='smol stage 1')\n    print('held', flush=True)\n"
        "    time.sleep(120)\n"), str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.perf_counter()
        assert main(["status", str(run_dir)]) == 0
        assert time.perf_counter() - t0 < 5  # reads no spec and no data (benchmarks measure the real figure)
        out = capsys.readouterr().out
        assert "LIVE" in out and "smol stage 1" in out and str(holder.pid) in out and "in progress" in out
        # a second run into a live directory is refused
        assert _run() == 1
        assert "in use by another" in capsys.readouterr().err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert main(["status", str(run_dir)]) == 0
    assert "INTERRUPTED" in capsys.readouterr().out


def test_bad_shard_is_a_usage_error_and_writes_nothing(project: Path, capsys) -> None:
    for bad in ("5/4", "x/2", "1/0", "-1/3"):
        assert _run("runs/shard", "--shard", bad) == 2, bad
        assert "--shard" in capsys.readouterr().err
    assert not (project / "runs").exists()


def test_shards_merge_into_a_reportable_run(project: Path, capsys) -> None:
    assert _run("runs/s0", "--shard", "0/2") == 0
    assert _run("runs/s1", "--shard", "1/2") == 0
    assert main(["merge", "runs/all", "runs/s0", "runs/s1"]) == 0
    assert main(["report", "runs/all"]) == 0
    assert _run("runs/one") == 0
    a = pd.read_parquet(project / "runs" / "all" / "records.parquet").drop(columns=["extras"], errors="ignore")
    b = pd.read_parquet(project / "runs" / "one" / "records.parquet").drop(columns=["extras"], errors="ignore")
    key = ["cell_id", "item_index"]
    pd.testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True))
    # shards of different plans are refused
    (project / "audit.audit").write_text(SPEC.replace("seed=7", "seed=9"), encoding="utf-8")
    assert _run("runs/other", "--shard", "0/2") == 0
    assert main(["merge", "runs/mixed", "runs/s0", "runs/other"]) == 1
    assert "different plans" in capsys.readouterr().err


def test_older_run_dirs_get_a_clear_message(project: Path, capsys) -> None:
    assert _run() == 0
    run_dir = project / "runs" / "r"
    info = json.loads((run_dir / "run.json").read_text())
    info.pop("format")
    (run_dir / "run.json").write_text(json.dumps(info))
    assert main(["report", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "older auditlang" in err and "hint" in err
