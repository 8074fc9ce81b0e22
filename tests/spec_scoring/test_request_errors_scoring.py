"""Failed evaluator follow-ups are missing, never wrong (issue 22 item 3), through a real spec and
``auditc run`` with a scripted engine (tests/scripted_engine.py).

The case the issue found on an H100: every ``constrained_choice`` request failed (a structured-output
backend was missing), the run exited 0 and ``metrics/cells.csv`` reported accuracy 0.000 for the
constrained cells. Here they fail the same way, and a ``loglik_argmax`` follow-up and a verbal
confidence follow-up fail for one item each: only the cells that read a failed request lose that
item, and no number counts it as an incorrect answer.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.core.requests import Result
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

ROWS = number_items(6)
SPEC = """import "stdlib/s000"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/scripted", dtype=float32, max_tokens=4)
evaluator acc = loglik_argmax()
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char, s000.constrained, acc]
  metrics = [accuracy]
}
report cells, checklist
"""
BACKEND = "structured outputs need the xgrammar backend, which is not installed"


def _script(req):
    text = prompt_text(req)
    if req.kind == "constrained_choice":
        return Result(request_id=req.id, kind=req.kind, error=BACKEND)
    if req.kind == "choice_logprobs":  # the loglik_argmax letter follow-up: gold (A) most probable
        if "Which number is 1?" in text:
            return Result(request_id=req.id, kind=req.kind, error="CUDA error: an illegal memory access")
        return Result(request_id=req.id, kind=req.kind,
                      choice_logprobs={c: (-0.1 if c.strip() == "A" else -3.0) for c in req.p["choices"]})
    if req.kind == "generate" and "confidence" in text:
        if "Which number is 2?" in text:
            return Result(request_id=req.id, kind=req.kind, error="the prompt is longer than the context")
        return generation(req, "0.8")
    if req.kind == "generate":
        return generation(req, "A")  # always the gold letter
    return None


@pytest.mark.parametrize("streaming", [False, True], ids=["stages-in-turn", "streamed-followups"])
def test_failed_followups_are_missing_per_cell_never_wrong(tmp_path: Path, monkeypatch, capsys, streaming):
    """Also with the follow-ups streamed into stage 1's call, as vLLM runs them."""
    use_scripted_engine(monkeypatch, _script, streaming=streaming)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arc.jsonl").write_text(ROWS, encoding="utf-8")
    spec = tmp_path / "s.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "8 requests failed in the engine" in err  # 6 constrained (both protocols share the answer), 1 loglik, 1 verbal

    cells = {tuple(r["cell_id"].split("/")[-2:]): r for r in pd.read_csv(out / "metrics" / "cells.csv").to_dict("records")}
    got = {k: (v["n"], v["n_error"]) for k, v in cells.items()}
    assert got == {
        ("s000.token_norm", "s000.first_char"): (6, 0), ("s000.verbal_decimal", "s000.first_char"): (5, 1),
        ("s000.token_norm", "s000.constrained"): (0, 6), ("s000.verbal_decimal", "s000.constrained"): (0, 6),
        ("s000.token_norm", "acc"): (5, 1), ("s000.verbal_decimal", "acc"): (4, 2),
    }
    for (_pid, eid), c in cells.items():
        if eid == "s000.constrained":
            assert math.isnan(c["accuracy"])  # was 0.000: every failed request scored as a wrong answer
        else:
            assert c["accuracy"] == 1.0 and c["answer_parse_rate"] == 1.0
            # VPR only where a verbal parse exists: n/a (NaN) for the token-probability cells (issue 34)
            assert c["vpr"] == 1.0 if _pid == "s000.verbal_decimal" else math.isnan(c["vpr"])

    df = pd.read_parquet(out / "records.parquet")
    con = df[df["evaluator"] == "s000.constrained"]
    assert (con["status"] == "error").all()
    # each row names the first failed request it reads (for verbal q2: its confidence follow-up)
    why = {(p, i): e for p, i, e in zip(con["protocol"], con["item_id"], con["error"])}
    assert why.pop(("s000.verbal_decimal", "q2")).startswith("verbal: the prompt is longer")
    assert all(e == f"constrained:s000.constrained: {BACKEND}" for e in why.values())
    assert con["correct"].isna().all() and con["pred"].isna().all()
    checklist = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert f"n_error 6, n answered 0; first error: constrained:s000.constrained: {BACKEND}" in checklist
