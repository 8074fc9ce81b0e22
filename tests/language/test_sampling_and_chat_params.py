"""`sample_top_k` (sampling top-k) and the chat-template model parameters (`enable_thinking`,
`reasoning_effort`): schema, diagnostics, the requests they produce and the engine options."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.core.diagnostics import CompileError
from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config

REPO = Path(__file__).resolve().parents[2]

SPEC = """
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=42)
model smol = embedded("smollm2-135m-instruct", enable_thinking=false)
model think = vllm("Qwen/Qwen3-8B", enable_thinking=true, reasoning_effort=high)
model plain = embedded("gemma3-270m")
variant sampled = s000.surface_paraphrase with (temperature=0.1, top_p=0.9, sample_top_k=50)
variant greedy_k = s000.surface_paraphrase with (sample_top_k=50)
protocol sc = self_consistency(k=3, temperature=1.0, sample_top_k=5, seed=1)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [sampled, greedy_k, s000.surface_paraphrase]
  protocols = [sc, s000.token_norm]
  evaluators = [s000.first_char]
}
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.audit"
    p.write_text(text, encoding="utf-8")
    return p


def test_sample_top_k_reaches_generate_requests(tmp_path: Path, shared_data: Path) -> None:
    plan = build_plan(compile_spec(_write(tmp_path, SPEC)), data_root=str(shared_data))
    gens = [r for r in plan.requests if r.kind == "generate"]
    sc = [r for r in gens if r.p.get("n") == 2]  # k=3 runs: the scored answer + 2 samples (003 App. D.3)
    assert sc and all(r.p["top_k"] == 5 and r.p["temperature"] == 1.0 for r in sc)
    answers = [r for r in gens if r.p.get("n") is None and r.p.get("top_logprobs") == 0]
    sampled = [r for r in answers if r.p["temperature"] == 0.1]
    assert len(sampled) == 3 and all(r.p["top_k"] == 50 and r.p["top_p"] == 0.9 for r in sampled)
    # greedy decoding ignores top-k: the greedy variant's answers carry no top_k (and equal the
    # plain variant's requests, which the planner deduplicates)
    assert all("top_k" not in r.p for r in answers if r.p["temperature"] == 0.0)
    assert len(answers) == 3 + 3


def test_sample_top_k_is_not_the_logprob_window(tmp_path: Path) -> None:
    spec = compile_spec(_write(tmp_path, SPEC))
    assert spec.get("sampled").value.sample_top_k == 50
    assert spec.get("s000.token_norm").value.top_k == 200  # the window, untouched


def test_chat_template_params_become_engine_options(tmp_path: Path) -> None:
    spec = compile_spec(_write(tmp_path, SPEC))
    assert model_config(spec, "smol").options == {"chat_template_kwargs": {"enable_thinking": False}}
    assert model_config(spec, "think").options["chat_template_kwargs"] == {"enable_thinking": True, "reasoning_effort": "high"}
    assert "chat_template_kwargs" not in model_config(spec, "plain").options


@pytest.mark.parametrize("bad, needle", [
    ('variant v = variant("{{ question }}", temperature=1.0, sample_top_k=0)', "sample_top_k"),
    ('protocol p = self_consistency(sample_top_k=2.5)', "sample_top_k"),
    ('model m = vllm("x", reasoning_effort=extreme)', "reasoning_effort"),
    ('model m = hf("x", enable_thinking="sometimes")', "enable_thinking"),
    ('variant v = variant("{{ question }}", top_k=50)', "top_k"),
])
def test_bad_values_are_diagnostics(tmp_path: Path, bad: str, needle: str) -> None:
    with pytest.raises(CompileError) as e:
        compile_spec(_write(tmp_path, bad + "\n"))
    assert any(needle in d.message for d in e.value.diagnostics), [d.message for d in e.value.diagnostics]
    assert all(d.span is not None for d in e.value.diagnostics)


def test_top_k_on_a_sampling_object_points_to_sample_top_k(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as e:
        compile_spec(_write(tmp_path, 'protocol p = self_consistency(top_k=50)\n'))
    (d,) = e.value.diagnostics
    assert d.code == "E120" and "sample_top_k" in (d.hint or "")


def test_study_specs_use_them() -> None:
    s003 = compile_spec(REPO / "specs" / "s003_accuracy_controlled.audit")
    assert model_config(s003, "qwen3_8b_think").options["chat_template_kwargs"] == {"enable_thinking": True}
    assert model_config(s003, "qwen3_32b_nothink").options["chat_template_kwargs"] == {"enable_thinking": False}
    assert model_config(s003, "gptoss_120b_low").options["chat_template_kwargs"] == {"reasoning_effort": "low"}
    assert "chat_template_kwargs" not in model_config(s003, "llama31_8b").options
    s004 = compile_spec(REPO / "specs" / "s004_probe_consistency.audit")
    variants = [o for o in s004.objects.values() if o.kind == "variant" and o.id.startswith("s004.")]
    assert len(variants) == 14 and all(v.value.sample_top_k == 50 for v in variants)  # 004 App. A
    for name in ("askcal", "nota", "moreinfo", "selfref"):
        assert s004.get(f"s004.{name}").value.sample_top_k == 50
