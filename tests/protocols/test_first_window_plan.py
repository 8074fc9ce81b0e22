"""The planner folds one-token top-k confidence calls into the greedy answer generation of the
same prompt (issue 16, item 2): one stage-1 request per (model, prompt), in every audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.plan.planner import Planner
from auditlang.resolve import compile_spec

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"

SPEC = """import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=5, seed=3)
model smol = embedded("smollm2-135m-instruct", max_tokens=16)
audit primary {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase, s000.format_change]
  protocols = [s000.token_norm, s000.token_raw, s000.verbal_decimal]
  evaluators = [s000.first_char]
}
audit repair {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [s000.first_char, s000.regex_reparse]
}
"""


@pytest.fixture
def spec(tmp_path: Path):
    if not (SHARED_DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    p = tmp_path / "fold.audit"
    p.write_text(SPEC, encoding="utf-8")
    return compile_spec(p)


def test_one_stage1_request_per_prompt_and_the_window_rides_on_the_answer(spec) -> None:
    plan = Planner(spec, str(SHARED_DATA)).build()
    prompts = {(r.model, r.prompt) for r in plan.requests}
    assert len(plan.requests) == len(prompts) == 10  # 5 items x 2 variants, in both audits
    for unit in plan.units.values():
        for per_item in unit.stage1.values():
            for reqs in per_item:
                if "first" in reqs:
                    assert reqs["first"].id == reqs["answer"].id
                    assert reqs["answer"].p["first_top_logprobs"] == 200 and reqs["answer"].p["max_tokens"] > 1
    assert plan.naive_request_count > plan.unique_request_count


def test_dry_run_executes_what_the_plan_counts(spec, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["run", str(spec.entry), "--data-root", str(SHARED_DATA), "--out", str(out), "--engine", "dryrun",
                 "--no-progress"]) == 0
    text = capsys.readouterr().err  # auditc run prints on stderr only
    assert "10 stage-1 requests" in text
