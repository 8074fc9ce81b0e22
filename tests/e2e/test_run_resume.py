"""`auditc run` for real: results, resume after kill -9, zero work on rerun, rescore offline."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main

pytestmark = pytest.mark.slow


def _auditc(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=900)


def _records(run_dir: Path) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / "records.parquet")
    return df.sort_values(["cell_id", "item_index"]).reset_index(drop=True)


def _committed(run_dir: Path) -> int:
    try:
        with sqlite3.connect(run_dir / "journal.sqlite", timeout=5) as c:
            return c.execute("select count(*) from results").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_run_rerun_and_rescore(tiny_spec: Path, tmp_path: Path, shared_data: Path, capsys, monkeypatch) -> None:
    run_dir = tmp_path / "run"
    rc = main(["run", str(tiny_spec), "--data-root", str(shared_data), "--out", str(run_dir), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    df = _records(run_dir)
    # 2 protocols x 3 evaluators x 4 items
    assert len(df) == 24
    assert set(df["evaluator"]) == {"s000.first_char", "s000.regex_reparse", "s000.constrained"}
    assert df["generation"].str.len().gt(0).all()
    verbal = df[df["protocol"] == "s000.verbal_decimal"]
    assert verbal["confidence_kind"].iloc[0]
    cells = pd.read_csv(run_dir / "metrics" / "cells.csv")
    assert len(cells) == 6 and "accuracy" in cells.columns
    assert (run_dir / "report").is_dir()
    # nothing lost: every record's request ids are in the journal
    with sqlite3.connect(run_dir / "journal.sqlite") as c:
        stored = {r[0] for r in c.execute("select request_id from results")}
    for ids in df["request_ids"]:
        assert set(json.loads(ids).values()) <= stored

    # rerun of an unchanged spec executes zero requests
    rc = main(["run", str(tiny_spec), "--data-root", str(shared_data), "--out", str(run_dir), "--no-progress"])
    out = capsys.readouterr().err
    assert rc == 0 and "executed 0," in out, out
    pd.testing.assert_frame_equal(df, _records(run_dir))

    # rescore under another evaluator loads no model
    import auditlang.engines.registry as reg

    monkeypatch.setattr(reg, "load_engine", lambda *a, **k: (_ for _ in ()).throw(AssertionError("model loaded")))
    rc = main(["rescore", str(run_dir), "--evaluator", "regex_reparse"])
    assert rc == 0
    res = pd.read_parquet(run_dir / "rescore" / "regex_reparse" / "records.parquet")
    assert len(res) == 8 and set(res["evaluator"]) == {"regex_reparse"}
    assert main(["status", str(run_dir)]) == 0
    assert "complete" in capsys.readouterr().out
    assert main(["rescore", str(run_dir), "--evaluator", "constrainted"]) == 1


def test_kill_9_then_resume_matches_uninterrupted(tiny_spec: Path, tmp_path: Path, shared_data: Path) -> None:
    env = {"AUDITLANG_DATA_ROOT": str(shared_data)}
    ref = tmp_path / "ref"
    done = _auditc("run", str(tiny_spec), "--out", str(ref), "--no-progress", "--no-report", env=env)
    assert done.returncode == 0, done.stderr
    total = _committed(ref)

    run_dir = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "auditlang.cli", "run", str(tiny_spec), "--out", str(run_dir),
                             "--no-progress", "--no-report"], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and _committed(run_dir) < 3 and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _committed(run_dir)
    assert 0 < partial < total, f"kill came too late or too early ({partial}/{total})"

    resumed = _auditc("run", str(tiny_spec), "--out", str(run_dir), "--no-progress", "--no-report", env=env)
    assert resumed.returncode == 0, resumed.stderr
    executed = int(resumed.stderr.split("executed ")[1].split(",")[0])
    assert executed == total - partial
    pd.testing.assert_frame_equal(_records(ref), _records(run_dir))
