"""`auditc plan` shows what each engine will actually execute (issue 22, item 1): the plan's
requests are engine-neutral; on vLLM a first-token window folded into an answer is a one-token
request of its own, on hf it is read from the answer's first forward."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

SPEC = '''import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=7, seed=42)
model m = {model}
audit a {{
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}}
'''


@pytest.mark.parametrize("model, calls", [
    ('vllm("org/some-model", dtype=float32, max_tokens=32)',
     ["generate, logprobs=0 per step", "1-token window, logprobs=200 (shares the prompt's prefix cache)"]),
    ('hf("org/some-model", dtype=float32, max_tokens=32)',
     ["generate, window 200 at position 0 folded into the answer's forward"]),
])
def test_plan_prints_each_engines_calls(model: str, calls: list[str], tmp_path: Path, capsys) -> None:
    if not (DATA / "arc_challenge.jsonl").is_file():
        pytest.skip("../shared/data is not available")
    spec = tmp_path / "calls.audit"
    spec.write_text(SPEC.format(model=model), encoding="utf-8")
    assert main(["plan", str(spec), "--data-root", str(DATA)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps cells: compare whitespace-free
    assert "stage-1 engine calls" in out
    table = out[out.index("stage-1 engine calls"):]
    for call in calls:
        assert " ".join(call.split()) in table or _wrapped(call, table), (call, table[:600])
    # 7 answers, each one generate (and on vLLM one window request)
    assert table.count(" 7 ") >= len(calls)


def _wrapped(call: str, table: str) -> bool:
    """rich may wrap a long cell over lines: every word appears, in order."""
    pos = 0
    for word in call.split():
        pos = table.find(word, pos)
        if pos < 0:
            return False
    return True
