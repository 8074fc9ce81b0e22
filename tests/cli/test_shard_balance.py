"""`auditc run --shard I/N` balances shards by request count, and `auditc status` on a shard run
names the exact `auditc merge` command (issue 35, item 8). The spec's items need different numbers
of requests: the 8 items of `few` get four variants in audit `deep`, the other 32 items one."""

from __future__ import annotations

import shlex
import sqlite3
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripted_engine import number_items  # noqa: E402

from auditlang.api import prepare  # noqa: E402
from auditlang.cli import main  # noqa: E402
from auditlang.execute.runner import item_shard, item_shard_key  # noqa: E402
from auditlang.store.shards import Shard  # noqa: E402

SPEC = """import "stdlib/s000"

dataset all = jsonl("n.jsonl", task=multiple_choice)
dataset few = jsonl("n.jsonl", task=multiple_choice, sample=8, seed=1)
model smol = embedded("smollm2-135m-instruct", max_tokens=8)
audit base {
  models = [smol]
  datasets = [all]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
audit deep {
  models = [smol]
  datasets = [few]
  variants = [s000.surface_paraphrase, s000.instruction_reorder, s000.format_change, s000.implicit_framing]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
"""


def _results(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / "journal.sqlite") as c:
        return c.execute("SELECT COUNT(*) FROM results").fetchone()[0]


def _run(*args: str) -> int:
    return main(["run", "s.audit", "--engine", "dryrun", "--data-root", ".", "--no-progress", *args])


def _records(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "records.parquet").sort_values(["cell_id", "item_index"]).reset_index(drop=True)


def test_shards_balanced_by_requests_and_status_says_merge(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "n.jsonl").write_text(number_items(40), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    _, plan = prepare("s.audit", ".", None)
    total = len({r.id for r in plan.requests})
    hashed = [len(Shard(i, 2, item_shard_key(plan)).select(plan.requests)) for i in range(2)]
    assert abs(hashed[0] - hashed[1]) > 4  # the item hash alone splits this plan unevenly (27 / 37)
    # the assignment is a function of the plan: the same in every process, every request once
    again = [[r.id for r in item_shard(plan, i, 2).select(plan.requests)] for i in range(2)]
    assert again == [[r.id for r in item_shard(prepare("s.audit", ".", None)[1], i, 2).select(plan.requests)]
                     for i in range(2)]
    assert sorted(again[0] + again[1]) == sorted(r.id for r in plan.requests)

    assert _run("--shard", "0/2", "--out", "runs/s0") == 0
    out = capsys.readouterr().err
    assert "when shard(s) 1/2 are done too" in out and "auditc merge runs/s-merged runs/s0 OTHER_SHARD_DIR..." in out
    assert main(["status", "runs/s0"]) == 0
    status = capsys.readouterr().out
    assert "shard   0/2" in status and "rerun" not in status
    assert "shard(s) 1/2 not found next to it" in status

    assert _run("--shard", "1/2", "--out", "runs/s1") == 0
    capsys.readouterr()
    n0, n1 = _results(tmp_path / "runs/s0"), _results(tmp_path / "runs/s1")
    assert n0 + n1 == total and abs(n0 - n1) <= 4  # at most one item's requests apart (4 variants)

    assert main(["status", "runs/s0"]) == 0
    status = capsys.readouterr().out
    line = status.strip().splitlines()[-1]
    assert line.startswith("shard 0/2 complete; every shard of this plan is here")
    assert f"smol   {n0}/{n0}" in status
    command = line.split("`")[1]
    assert command == "auditc merge runs/s-merged runs/s0 runs/s1"
    assert main(shlex.split(command)[1:]) == 0
    capsys.readouterr()
    assert main(["status", "runs/s-merged"]) == 0
    merged_status = capsys.readouterr().out
    assert "shard   " not in merged_status and "`auditc report runs/s-merged` scores and reports it" in merged_status
    assert main(["report", "runs/s-merged"]) == 0
    assert _run("--out", "runs/one") == 0
    pd.testing.assert_frame_equal(_records(tmp_path / "runs/s-merged"), _records(tmp_path / "runs/one"))
