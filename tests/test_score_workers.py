"""Scoring and cell metrics in forked workers (core/workers.py: hosts with cores to spare) write
the files the serial path writes: records in plan order, every cell's metrics and intervals.
User path: `auditc run` on the embedded model (serial), then `auditc report` on the run directory
after its records are removed (they are rebuilt from the journal) with workers forced."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.core import workers

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# two datasets of different sizes: the shares weigh differently, so the heavier ones are handed out first
SPEC = """import "stdlib/s000"
settings { seed = 3  data_root = "data" }
dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=5, seed=1)
dataset arithmetic = jsonl("demo_arithmetic.jsonl", task=multiple_choice, sample=8, seed=2)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=16, max_tokens=8)
audit a {
  models = [smol]
  datasets = [capitals, arithmetic]
  variants = [s000.surface_paraphrase, s000.implicit_framing]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char, s000.regex_reparse]
  metrics = [accuracy, s000.ece10, brier, auroc]
  bootstrap = bootstrap(resamples=200, seed=5)
}
report cells
"""


@pytest.mark.skipif(sys.platform != "linux", reason="stages fork workers only on Linux")
def test_forced_score_workers_rebuild_the_serial_records_and_metrics(tmp_path: Path, monkeypatch) -> None:
    from auditlang.score import cellmetrics, stage

    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    for name in ("demo_capitals.jsonl", "demo_arithmetic.jsonl"):
        (proj / "data" / name).write_bytes((EXAMPLES / "data" / name).read_bytes())
    (proj / "a.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(proj)
    monkeypatch.setenv(workers.SCORE_WORKERS_ENV, "1")
    assert main(["run", "a.audit", "--out", "runs/r", "--display", "none"]) == 0
    run = proj / "runs" / "r"
    serial_records = pd.read_parquet(run / "records.parquet")
    serial_cells = (run / "metrics" / "cells.csv").read_bytes()
    assert len(serial_records) == 2 * 2 * 2 * (5 + 8) and serial_records["cell_id"].nunique() == 16

    workers._stop_tqdm_monitor()
    if threading.active_count() > 1:  # the stages would (rightly) not fork beside them
        pytest.skip("threads left running by earlier tests in this process")
    forked: list[tuple[str, int, list]] = []
    for mod, label in ((stage, "score"), (cellmetrics, "cell metrics")):
        real = mod.fork_map

        def spy(fn, jobs, n, weights=None, _real=real, _label=label):
            forked.append((_label, len(jobs), list(weights or [])))
            return _real(fn, jobs, n, weights=weights)

        monkeypatch.setattr(mod, "fork_map", spy)
    (run / "records.parquet").unlink()
    monkeypatch.setenv(workers.SCORE_WORKERS_ENV, "3")
    assert main(["report", str(run)]) == 0
    assert [(label, n > 3) for label, n, _ in forked] == [("score", True), ("cell metrics", True)]
    assert all(len(w) == n and min(w) > 0 for _, n, w in forked)  # each share weighed by its rows
    pd.testing.assert_frame_equal(pd.read_parquet(run / "records.parquet"), serial_records)
    assert (run / "metrics" / "cells.csv").read_bytes() == serial_cells
