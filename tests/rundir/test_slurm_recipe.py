"""The SLURM recipe of docs/scale-out.md without SLURM: the array script runs once per task as a
separate process (``SLURM_ARRAY_TASK_ID`` set, all at once like an array), the merge script after
them; the merged run's records equal one `auditc run` process's.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
SLURM = REPO / "examples" / "slurm"

SPEC = """import "stdlib/s000"

dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=9, seed=3)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)
model gem = embedded("gemma3-270m", dtype=float32, batch_size=4, max_tokens=8)
audit a {
  models = [smol, gem]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}
report cells, checklist
"""


def _results(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / "journal.sqlite") as c:
        return c.execute("SELECT COUNT(*) FROM results").fetchone()[0]


def _records(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "records.parquet").sort_values(["cell_id", "item_index"]).reset_index(drop=True)


def test_slurm_array_recipe_equals_one_process(tmp_path: Path, monkeypatch) -> None:
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    (tmp_path / "data").mkdir()
    lines = (DATA / "arc_challenge.jsonl").read_text(encoding="utf-8").splitlines()[:50]
    (tmp_path / "data" / "arc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "audit.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "N": "3", "AUDITC": f"{sys.executable} -m auditlang.cli",
           "AUDITC_ARGS": "--engine dryrun --data-root data"}
    tasks = [subprocess.Popen(["bash", str(SLURM / "audit-array.sbatch"), "audit.audit", "runs"],
                              env={**env, "SLURM_ARRAY_TASK_ID": str(i)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(3)]
    for i, p in enumerate(tasks):
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out
        assert f"shard {i}/3 done" in out
    done = subprocess.run(["bash", str(SLURM / "merge.sbatch"), "audit.audit", "runs"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "merged 3 journal(s)" in done.stdout
    # every shard did part of the work, and no request twice
    counts = [_results(tmp_path / f"runs/shard-{i}") for i in range(3)]
    assert all(c > 0 for c in counts) and sum(counts) == _results(tmp_path / "runs/all")
    assert main(["run", "audit.audit", "--data-root", "data", "--out", "runs/one", "--engine", "dryrun",
                 "--no-progress"]) == 0
    merged, one = _records(tmp_path / "runs/all"), _records(tmp_path / "runs/one")
    assert len(one) == 2 * 2 * 9
    pd.testing.assert_frame_equal(merged, one)
    assert (tmp_path / "runs/all/report/checklist.md").exists()
