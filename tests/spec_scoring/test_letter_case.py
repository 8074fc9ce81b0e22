"""Regex re-parse letter case through a real spec (issue 10 item 5; study 000 App. A.3: valid
choice letters "A-D ... A-J"; App. C.1 repair path 1). ``auditc run`` with a scripted engine."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from auditlang.cli import main
from scripted_engine import generation, use_scripted_engine

SPEC = """
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=6, seed=42)
model m = hf("org/scripted", dtype=float32)
evaluator upper = regex_reparse(tail=150, case_sensitive=true)
evaluator anycase = regex_reparse(tail=150, case_sensitive=false)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [upper, anycase, s000.regex_reparse]
  metrics = [accuracy]
}
"""


def test_lower_case_letter_after_a_marker(tmp_path: Path, shared_data: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, lambda r: generation(r, "Let me think.\nAnswer: c")
                        if r.kind == "generate" and r.p.get("max_tokens", 0) != 8 else None)
    spec = tmp_path / "case.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().out
    df = pd.read_parquet(out / "records.parquet")
    upper = df[df.evaluator == "upper"]
    anycase = df[df.evaluator == "anycase"]
    stdlib = df[df.evaluator == "s000.regex_reparse"]
    assert len(upper) == len(anycase) == 6
    # case_sensitive=false: the marker takes the lower-case letter, read as C
    assert set(anycase.pred) == {"C"} and set(anycase.parse_rule) == {"marker:answer_colon"}
    # upper case only (the stdlib's choice): no marker matches, the first-character fallback
    # reads the "L" of "Let", which is no valid letter
    assert upper.pred.isna().all() and set(upper.parse_rule) == {"fallback:raw_first_char"}
    assert stdlib.pred.isna().all() and set(stdlib.parse_rule) == {"fallback:raw_first_char"}
    gold_c = anycase.gold == "C"
    assert (anycase.correct == gold_c.astype(float)).all()
