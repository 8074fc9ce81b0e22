"""`auditc show` previews the follow-ups (issue 35): P(True), verbalized confidence and the
constrained re-prompt, built by the run's own builder (``FromJournal``) from the placeholder
``<answer>`` (the gold answer where a follow-up shows the evaluator's reading of the answer), and
with ``--run RUN_DIR`` from the stored answers: then exactly the requests the run sent."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core.requests import Result
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

REPO = Path(__file__).resolve().parents[2]
SPEC = """import "stdlib/s000"
import "stdlib/s002"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/scripted", dtype=float32, max_tokens=4)
protocol pt_extracted = s002.p_true with (answer_form=extracted)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal, s002.p_true, pt_extracted]
  evaluators = [s000.first_char, s000.constrained]
  metrics = [accuracy]
}
"""
CELL = "a/m/arc/s000.surface_paraphrase/{}/s000.first_char"


def _script(req):
    text = prompt_text(req)
    if req.kind == "generate" and "confidence" in text:
        return generation(req, "0.7")
    if req.kind == "generate":
        return generation(req, "C) because")
    if req.kind == "choice_logprobs":
        return Result(request_id=req.id, kind=req.kind, choice_logprobs={"A": -0.2, "B": -1.7})
    return None


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("showfu")
    (tmp / "data").mkdir()
    (tmp / "data" / "arc.jsonl").write_text(number_items(4), encoding="utf-8")
    (tmp / "s.audit").write_text(SPEC, encoding="utf-8")
    return tmp


@pytest.fixture(scope="module")
def run_dir(project: Path) -> Path:
    mp = pytest.MonkeyPatch()
    try:
        use_scripted_engine(mp, _script)
        rc = main(["run", str(project / "s.audit"), "--data-root", str(project / "data"), "--out", str(project / "run"),
                   "--no-progress", "--no-report"])
    finally:
        mp.undo()
    assert rc == 0
    return project / "run"


def _show(project: Path, cell: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "auditlang.cli", "show", str(project / "s.audit"), cell,
                           "--data-root", str(project / "data"), *extra], capture_output=True, text=True, env=env,
                          timeout=300)


def _followups(out: str) -> dict[str, str]:
    """Role -> its block of `show`'s follow-up section."""
    part = out.split("follow-ups (stage 2)", 1)[1]
    blocks = re.split(r"\n  request ", part)[1:]
    return {re.match(r"\S+ \(role ([^,]+),", b).group(1): b for b in blocks}


def test_show_previews_verbal_and_p_true_followups_with_a_placeholder(project: Path) -> None:
    res = _show(project, CELL.format("s000.verbal_decimal"))
    assert res.returncode == 0, res.stderr
    assert "<answer> stands for the model's answer (a placeholder: no model was run)" in res.stdout
    verbal = _followups(res.stdout)["verbal"]
    assert "built from: the placeholder answer <answer>" in verbal
    assert "│[assistant] <answer>" in verbal and "state your confidence" in verbal  # the answer, then the question
    res = _show(project, CELL.format("s002.p_true"))
    p_true = _followups(res.stdout)["p_true"]
    assert "kind: choice_logprobs" in p_true and "params: choices=['A', 'B']" in p_true
    assert "Proposed Answer: <answer>" in p_true and "Which number is 0?" in p_true
    # answer_form=extracted shows the evaluator's reading of the answer: the gold answer stands in, said so
    res = _show(project, CELL.format("pt_extracted"), "--item", "2")
    p_true = _followups(res.stdout)["p_true"]
    assert "built from: the item's gold answer 'A' standing in for the model's answer" in p_true
    assert "Proposed Answer: A" in p_true and "Which number is 2?" in p_true
    # the cell's own evaluator follow-up (constrained re-prompt), not the other evaluator's
    res = _show(project, "a/m/arc/s000.surface_paraphrase/s000.verbal_decimal/s000.constrained")
    roles = _followups(res.stdout)
    assert set(roles) == {"verbal", "constrained:s000.constrained"}
    assert "│[assistant] <answer>" in roles["constrained:s000.constrained"]
    assert set(_followups(_show(project, CELL.format("s000.verbal_decimal")).stdout)) == {"verbal"}


def test_show_with_run_builds_followups_from_the_stored_answers(project: Path, run_dir: Path) -> None:
    res = _show(project, CELL.format("s000.verbal_decimal"), "--item", "1", "--run", str(run_dir))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"from the answers stored in {run_dir}" in out and "placeholder" not in out
    assert "    stored answer:\n    │C) because" in out  # the stage-1 answer
    verbal = _followups(out)["verbal"]
    assert f"built from: the stored answer in {run_dir}" in verbal
    assert "│[assistant] C) because" in verbal and "    stored answer:\n    │0.7" in verbal
    # exactly the request the run sent: its id is in the run's journal
    rid = re.match(r"(r[0-9a-f]+) ", verbal).group(1)
    db = sqlite3.connect(run_dir / "journal.sqlite")
    try:
        assert db.execute("SELECT count(*) FROM results WHERE request_id = ?", (rid,)).fetchone()[0] == 1
    finally:
        db.close()
    p_true = _followups(_show(project, CELL.format("pt_extracted"), "--item", "1", "--run", str(run_dir)).stdout)["p_true"]
    assert "Proposed Answer: C" in p_true and "stored answer: label logprobs 'A': -0.2000, 'B': -1.7000" in p_true


def test_show_run_must_be_a_run_directory(project: Path, tmp_path: Path) -> None:
    res = _show(project, CELL.format("s002.p_true"), "--run", str(tmp_path))
    assert res.returncode == 2 and "not a run directory" in res.stderr and "Traceback" not in res.stderr
