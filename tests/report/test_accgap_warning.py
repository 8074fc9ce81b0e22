"""The checklist's accuracy-gap item says a comparison of models "of different accuracy" lacks an
accuracy-controlled view only when the run shows a gap (issue 34: a plugin-protocol run printed
"no gap: every model has the same accuracy" and, in the same item, the different-accuracy WARNING).
Through `auditc run` of a two-model spec on a scripted engine: the chat model (SmolLM2) answers
"A" (gold), the base model (Gemma, plain-text prompts) answers "A" or "B"."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main
from scripted_engine import generation, number_items, use_scripted_engine

SPEC = """import "stdlib/s000"
dataset nums = jsonl("nums.jsonl", task=multiple_choice)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
model gem = embedded("gemma3-270m", max_tokens=4)
audit a {
  models = [smol, gem]
  datasets = [nums]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
report checklist
"""


def _checklist(tmp_path: Path, monkeypatch, base_answer: str) -> str:
    def script(req):
        if req.kind != "generate":
            return None
        if "confidence" in (req.prompt.text or "" if req.prompt.messages is None else req.prompt.messages[-1].content):
            return generation(req, "0.6")
        return generation(req, "A" if req.prompt.messages is not None else base_answer)

    use_scripted_engine(monkeypatch, script)
    (tmp_path / "nums.jsonl").write_text(number_items(3), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    rc = main(["run", str(tmp_path / "s.audit"), "--data-root", str(tmp_path), "--out", str(tmp_path / "run"),
               "--no-progress"])
    assert rc == 0
    return (tmp_path / "run" / "report" / "checklist.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("base_answer, gap", [("A", False), ("B", True)])
def test_the_different_accuracy_warning_follows_the_gap(tmp_path: Path, monkeypatch, base_answer: str, gap: bool) -> None:
    text = _checklist(tmp_path, monkeypatch, base_answer)
    warned = "compares 2 models of different accuracy without an accuracy-controlled view" in text
    assert warned is gap, text
    if gap:
        assert "nums: accuracy (mean over variants, evaluator s000.first_char) smol 1.000, gem 0.000; largest gap 1.000 (smol - gem)" in text
    else:
        assert "smol 1.000, gem 1.000; no gap: every model has the same accuracy" in text
        assert "none is needed in this run: the 2 models have the same accuracy on every dataset" in text
