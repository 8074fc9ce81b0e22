"""A streaming engine (vLLM's way: ``streams = True``) gets each item's stage-2 follow-ups while
it still serves stage 1, in one ``run`` call, through ``auditc run`` on a real spec: the requests,
records and metrics are those of the engine that runs the stages in turn (issue 22: no stage
barrier). A rerun after a kill mid-way builds the follow-ups of stored stage-1 answers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd

from auditlang.cli import main
from auditlang.core.requests import Result
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

ROWS = number_items(8)
SPEC = """import "stdlib/s000"
import "stdlib/protocols"
import "stdlib/s002"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/scripted", dtype=float32, max_tokens=4)
evaluator acc = loglik_argmax()
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal, protocols.answer_t1, s002.p_true]
  evaluators = [s000.first_char, s000.constrained, acc]
  metrics = [accuracy]
}
report cells
"""


def _script(req):
    text = prompt_text(req)
    n = sum(map(ord, text)) % 4
    if req.kind == "constrained_choice":
        return Result(request_id=req.id, kind=req.kind, choice=req.p["choices"][n % len(req.p["choices"])])
    if req.kind == "choice_logprobs":
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: -0.1 - i * (n + 1) for i, c in enumerate(req.p["choices"])})
    if req.kind == "generate" and "confidence" in text:
        return generation(req, f"0.{n + 5}")
    if req.kind == "generate":
        return generation(req, "ABCD"[n])
    return None


def _run(tmp_path: Path, monkeypatch, name: str, streaming: bool, *extra: str) -> tuple[int, Path, type]:
    cls = use_scripted_engine(monkeypatch, _script, streaming=streaming)
    data = tmp_path / "data"
    if not data.exists():
        data.mkdir()
        (data / "arc.jsonl").write_text(ROWS, encoding="utf-8")
        (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    out = tmp_path / name
    rc = main(["run", str(tmp_path / "s.audit"), "--data-root", str(data), "--out", str(out), "--no-progress", *extra])
    return rc, out, cls


def _requests(out: Path) -> list[str]:
    db = sqlite3.connect(out / "journal.sqlite")
    try:
        return sorted(r[0] for r in db.execute("SELECT request_id FROM results"))
    finally:
        db.close()


def test_streamed_followups_match_stages_in_turn(tmp_path: Path, monkeypatch) -> None:
    rc, turn, plain = _run(tmp_path, monkeypatch, "turn", False)
    assert rc == 0
    rc, streamed, cls = _run(tmp_path, monkeypatch, "streamed", True)
    assert rc == 0
    assert cls.calls == 1  # stage 1 and every follow-up in one run call
    kinds = {r.kind for r in cls.seen}
    assert {"generate", "choice_logprobs", "constrained_choice", "continuation_logprobs"} <= kinds
    assert len(cls.seen) == len(plain.seen) > 8 * 4
    assert _requests(streamed) == _requests(turn)
    a = pd.read_csv(turn / "metrics" / "cells.csv")
    b = pd.read_csv(streamed / "metrics" / "cells.csv")
    pd.testing.assert_frame_equal(a, b)
    ra = pd.read_parquet(turn / "records.parquet").drop(columns=["run_id"], errors="ignore")
    rb = pd.read_parquet(streamed / "records.parquet").drop(columns=["run_id"], errors="ignore")
    pd.testing.assert_frame_equal(ra, rb)


def test_rerun_after_a_failure_builds_followups_of_stored_answers(tmp_path: Path, monkeypatch) -> None:
    rc, turn, _ = _run(tmp_path, monkeypatch, "turn", False)
    assert rc == 0
    boom = {"n": 0}

    def dying(req):
        boom["n"] += 1
        if boom["n"] > 20:
            raise RuntimeError("simulated engine crash")
        return _script(req)

    cls = use_scripted_engine(monkeypatch, dying, streaming=True)
    out = tmp_path / "streamed"
    args = ["run", str(tmp_path / "s.audit"), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"]
    assert main(args) == 70  # an engine's own exception is an internal error
    done = len(_requests(out))
    assert 0 < done <= 20
    cls = use_scripted_engine(monkeypatch, _script, streaming=True)
    assert main(args) == 0
    assert cls.calls == 1 and len(cls.seen) == len(_requests(turn)) - done  # only what was missing
    assert _requests(out) == _requests(turn)
    pd.testing.assert_frame_equal(pd.read_csv(turn / "metrics" / "cells.csv"), pd.read_csv(out / "metrics" / "cells.csv"))
