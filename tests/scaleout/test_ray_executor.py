"""`auditc run --executor ray` on a local Ray cluster (2 CPUs): records identical to a local run
with the dry-run engine and with the embedded SmolLM2 (hf engine), resume of a rerun, the spec
setting, the checklist line, and the error without Ray installed.

The user's path: a spec file and a data file on disk, `auditc` commands through ``main([...])``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from scaleout_helpers import make_project, records, start_ray

SPEC = """import "stdlib/s000"

dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=8, seed=7)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=4)
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


@pytest.fixture(scope="module")
def ray_cluster():
    ray = start_ray()
    yield ray
    ray.shutdown()


def _run(out: str, *extra: str) -> int:
    return main(["run", "audit.audit", "--data-root", "data", "--out", out, "--no-progress", *extra])


def test_dryrun_on_ray_matches_local_and_resumes(ray_cluster, tmp_path: Path, monkeypatch, capsys) -> None:
    spec = SPEC.replace('report cells', 'settings { executor = ray }\nreport cells')
    proj = make_project(tmp_path, spec)
    monkeypatch.chdir(proj)
    assert _run("runs/local", "--engine", "dryrun", "--executor", "local") == 0
    capsys.readouterr()
    # the spec's settings choose Ray; no flag needed
    assert _run("runs/ray", "--engine", "dryrun", "--ray-shards", "3") == 0
    out = "".join(capsys.readouterr())  # the run's lines are on stderr (issue 35)
    assert "[ray] 3 unit(s) scheduled: 1 model(s) x 3 item shard(s)" in out
    assert "[ray] units 3/3 (smol 3/3)" in out and "req/s" in out and "eta 0s" in out
    pd.testing.assert_frame_equal(records(proj / "runs/ray"), records(proj / "runs/local"))
    info = json.loads((proj / "runs/ray/run.json").read_text())
    assert info["executor"]["name"] == "ray" and info["executor"]["units"] == 3
    assert info["executor"]["gpus"] == {"smol": 0.0}  # the dry-run engine needs no GPU
    units = sorted(p.name for p in (proj / "runs/ray/units").iterdir())
    assert units == ["smol.0of3", "smol.1of3", "smol.2of3"]
    assert "on smol 2 worker(s)" in out  # 2 CPUs: two workers, one of them runs two units in one process
    pids = {json.loads(line)["pid"] for u in units for line in (proj / "runs/ray/units" / u / "attempts.jsonl").read_text().splitlines()}
    assert len(pids) == 2
    checklist = (proj / "runs/ray/report/checklist.md").read_text()
    assert "Executor: ray (Ray " in checklist and "3 units" in checklist and "workers per model smol 2" in checklist
    assert "Executor: local (one process)" in (proj / "runs/local/report/checklist.md").read_text()
    # a rerun of the same command merges nothing new and executes nothing
    assert _run("runs/ray", "--engine", "dryrun", "--ray-shards", "3") == 0
    out = "".join(capsys.readouterr())  # the run's lines are on stderr (issue 35)
    assert "resuming: 3 of 3 units already merged" in out
    assert "requests: executed 0" in out
    pd.testing.assert_frame_equal(records(proj / "runs/ray"), records(proj / "runs/local"))


def test_python_api_runs_on_ray(ray_cluster, tmp_path: Path, monkeypatch) -> None:
    import auditlang

    proj = make_project(tmp_path, SPEC)
    monkeypatch.chdir(proj)
    local = auditlang.run("audit.audit", out="runs/local", data_root="data", engine="dryrun")
    run = auditlang.run("audit.audit", out="runs/ray", data_root="data", engine="dryrun", executor="ray", ray_shards=2)
    assert run.info["executor"]["name"] == "ray" and run.info["executor"]["units"] == 2
    pd.testing.assert_frame_equal(run.records, local.records)


@pytest.mark.slow
def test_embedded_hf_on_ray_matches_local(ray_cluster, tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # batch_size=1: a unit batches other requests than the whole run, and batched float32 logprobs
    # differ in rounding (~1e-6) with the batch's padding (docs/engines.md); one request per
    # forward pass makes every result independent of where it ran, so the records are identical.
    proj = make_project(tmp_path, SPEC.replace("sample=8", "sample=3").replace("batch_size=4", "batch_size=1"))
    monkeypatch.chdir(proj)
    assert _run("runs/local") == 0
    capsys.readouterr()
    assert _run("runs/ray", "--executor", "ray", "--ray-shards", "2") == 0
    out = "".join(capsys.readouterr())  # the run's lines are on stderr (issue 35)
    assert "[ray] units 2/2 (smol 2/2)" in out
    local, ray = records(proj / "runs/local"), records(proj / "runs/ray")
    assert local["generation"].str.len().gt(0).all()  # a real model answered
    assert local["confidence_parsed"].notna().any() or local["confidence"].notna().all()
    pd.testing.assert_frame_equal(ray, local)
    # stage 2 (verbal confidence after the model's own answer) ran inside the units
    unit_runs = [json.loads((p / "run.json").read_text())["last_run"] for p in (proj / "runs/ray/units").iterdir()]
    assert sum(r["executed"] for r in unit_runs) == json.loads((proj / "runs/local/run.json").read_text())["last_run"]["executed"]


CROSS_SPEC = """import "stdlib/s002"
import "stdlib/s001"
dataset trivia = jsonl("triviaqa.jsonl", task=open_qa, sample=2, seed=3, dev_sample=2)
model m1 = embedded("smollm2-135m-instruct", dtype=float32, batch_size=1, max_tokens=6)
model m2 = embedded("gemma3-270m", dtype=float32, batch_size=1, max_tokens=6)
protocol pw = s001.verbal_plausible_wrong with (wrong_from=[m2, m1])
audit supplied {
  models = [m1, m2]
  datasets = [trivia]
  variants = [s002.a1]
  protocols = [pw]
  evaluators = [s002.lenient]
}
report cells
"""


@pytest.mark.slow
def test_cross_stage_runs_after_the_units(ray_cluster, tmp_path: Path, monkeypatch, capsys) -> None:
    """Requests built from another model's answers (the cross stage) run in the final task, on
    the merged journal: records equal a local run's."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from scaleout_helpers import DATA

    if not (DATA / "triviaqa.jsonl").exists():
        pytest.skip("../shared/data/triviaqa.jsonl is not available")
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    rows = (DATA / "triviaqa.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    (proj / "data" / "triviaqa.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (proj / "audit.audit").write_text(CROSS_SPEC, encoding="utf-8")
    monkeypatch.chdir(proj)
    assert _run("runs/local") == 0
    capsys.readouterr()
    assert _run("runs/ray", "--executor", "ray", "--ray-shards", "2") == 0
    out = "".join(capsys.readouterr())  # the run's lines are on stderr (issue 35)
    final = json.loads((proj / "runs/ray/run.json").read_text())["last_run"]
    assert "[ray] units 4/4 (m1 2/2, m2 2/2)" in out
    units = [json.loads((p / "run.json").read_text())["last_run"]["executed"] for p in (proj / "runs/ray/units").iterdir()]
    assert final["executed"] > sum(units)  # the cross requests ran after the units
    pd.testing.assert_frame_equal(records(proj / "runs/ray"), records(proj / "runs/local"))


def test_without_ray_is_a_clear_error(tmp_path: Path, monkeypatch, capsys) -> None:
    proj = make_project(tmp_path, SPEC)
    monkeypatch.chdir(proj)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as when it is not installed
    assert _run("runs/r", "--engine", "dryrun", "--executor", "ray") == 3
    err = capsys.readouterr().err
    assert "needs the Ray package" in err and "pip install 'auditlang[ray]'" in err
    assert not (proj / "runs/r").exists()  # refused before anything is written


def test_ray_flags_need_the_ray_executor(tmp_path: Path, monkeypatch, capsys) -> None:
    proj = make_project(tmp_path, SPEC)
    monkeypatch.chdir(proj)
    assert _run("runs/r", "--engine", "dryrun", "--ray-shards", "2") == 2
    assert "--executor ray" in capsys.readouterr().err
    assert _run("runs/r", "--engine", "dryrun", "--executor", "ray", "--shard", "0/2") == 2
    assert "--ray-shards" in capsys.readouterr().err
