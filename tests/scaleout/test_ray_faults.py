"""A Ray worker killed mid-unit: Ray retries the unit, the retry resumes from the unit's journal
(no committed request is executed again), and the records equal a local run's.

The dry-run engine sleeps ``AUDITLANG_DRYRUN_DELAY`` seconds per request in the workers, so the
unit (80 items, one stage-1 request each, commit batches of 32) is still running when its first
batch is committed; the test then kills the worker process named in the unit's ``attempts.jsonl``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from scaleout_helpers import make_project, records, start_ray

SPEC = """import "stdlib/s000"

dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=80, seed=7)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=4)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}
report cells
"""


@pytest.fixture(scope="module")
def slow_ray():
    # In os.environ too: workers of another driver (a subprocess joining with --address) inherit
    # the raylet's environment, not this driver's runtime_env.
    old = os.environ.get("AUDITLANG_DRYRUN_DELAY")
    os.environ["AUDITLANG_DRYRUN_DELAY"] = "0.05"
    try:
        ray = start_ray(AUDITLANG_DRYRUN_DELAY="0.05")
    finally:
        if old is None:
            os.environ.pop("AUDITLANG_DRYRUN_DELAY")
        else:
            os.environ["AUDITLANG_DRYRUN_DELAY"] = old
    yield ray
    ray.shutdown()


def _results(journal: Path) -> list[tuple[str, str]]:
    """(request id, created_at) of every committed result."""
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5) as c:
            return c.execute("SELECT request_id, created_at FROM results").fetchall()
    except sqlite3.Error:
        return []


def _attempts(unit: Path) -> list[dict]:
    p = unit / "attempts.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def test_killed_worker_is_retried_without_rerunning_committed_requests(slow_ray, tmp_path: Path, monkeypatch,
                                                                        capsys) -> None:
    proj = make_project(tmp_path, SPEC, rows=120)
    monkeypatch.chdir(proj)
    args = ["audit.audit", "--data-root", "data", "--engine", "dryrun", "--no-progress"]
    assert main(["run", *args, "--out", "runs/local"]) == 0
    n = len(_results(proj / "runs/local/journal.sqlite"))
    assert n >= 64  # at least two commit batches of 32
    unit = proj / "runs/ray/units/smol.0of1"
    killed: dict = {}

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = len(_results(unit / "journal.sqlite"))
            starts = [a for a in _attempts(unit) if a["event"] == "start"]
            if starts and 32 <= done < n:  # the first commit batch is in, the unit is still running
                os.kill(starts[0]["pid"], signal.SIGKILL)
                killed.update(pid=starts[0]["pid"], seen=done)
                return
            time.sleep(0.02)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    capsys.readouterr()
    assert main(["run", *args, "--out", "runs/ray", "--executor", "ray", "--ray-shards", "1"]) == 0
    t.join(5)
    out = "".join(capsys.readouterr())  # the run's lines (stderr since issue 35) and anything on stdout
    assert killed, "the unit finished before the test could kill its worker"
    starts = [a for a in _attempts(unit) if a["event"] == "start"]
    finishes = [a for a in _attempts(unit) if a["event"] == "finish"]
    assert len(starts) == 2 and starts[0]["pid"] == killed["pid"] != starts[1]["pid"]
    assert len(finishes) == 1 and finishes[0]["attempt"] == 2
    assert "unit smol.0of1 merged" in out and "(attempt 2)" in out
    # results committed before the retry started were not executed again
    rows = _results(unit / "journal.sqlite")
    assert len(rows) == len({r for r, _ in rows}) == n
    retry_start = starts[1]["time"]
    before = [r for r, at in rows if datetime.fromisoformat(at).timestamp() < retry_start]
    assert len(before) >= killed["seen"] >= 32
    assert finishes[0]["cached"] == len(before) and finishes[0]["executed"] == n - len(before)
    # the merged run is the local run
    pd.testing.assert_frame_equal(records(proj / "runs/ray"), records(proj / "runs/local"))
    assert len(_results(proj / "runs/ray/journal.sqlite")) == n


def test_driver_killed_then_rerun_resumes(slow_ray, tmp_path: Path, monkeypatch, capsys) -> None:
    """`kill -9` of the driver (a separate `auditc run --executor ray --address` process on the
    same cluster) after its first unit is merged; rerunning the command skips that unit and
    resumes the other; records equal a local run's."""
    proj = make_project(tmp_path, SPEC, rows=120)
    monkeypatch.chdir(proj)
    args = ["audit.audit", "--data-root", "data", "--engine", "dryrun", "--no-progress"]
    assert main(["run", *args, "--out", "runs/local"]) == 0
    n = len(_results(proj / "runs/local/journal.sqlite"))
    assert n >= 64  # at least two commit batches of 32
    address = slow_ray.get_runtime_context().gcs_address
    ray_args = ["--out", "runs/ray", "--executor", "ray", "--address", address, "--ray-shards", "2"]
    driver = subprocess.Popen([sys.executable, "-m", "auditlang.cli", "run", *args, *ray_args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    units = proj / "runs/ray/units"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and driver.poll() is None and not list(units.glob("*/merged.json")):
        time.sleep(0.02)
    driver.kill()
    out, _ = driver.communicate(timeout=60)
    assert driver.returncode == -signal.SIGKILL, out
    merged = [p.parent.name for p in units.glob("*/merged.json")]
    assert len(merged) == 1, out  # killed between the two merges
    capsys.readouterr()
    assert main(["run", *args, *ray_args]) == 0
    out = "".join(capsys.readouterr())  # the run's lines (stderr since issue 35) and anything on stdout
    assert "resuming: 1 of 2 units already merged" in out
    starts = [a for a in _attempts(units / merged[0]) if a["event"] == "start"]
    assert len(starts) == 1  # the merged unit did not run again
    pd.testing.assert_frame_equal(records(proj / "runs/ray"), records(proj / "runs/local"))
    assert len(_results(proj / "runs/ray/journal.sqlite")) == n
