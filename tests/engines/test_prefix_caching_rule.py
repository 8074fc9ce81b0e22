"""vLLM prefix caching as ``auditc run`` loads it (issue 16, stage-1 prefills).

``prefix_caching=auto`` (the default of ``vllm(...)``) is resolved to on by the run, also for
models scored with prompt logprobs (``continuation_logprobs``): vLLM reads no cached block for
those, and the engine fails any request that did (vLLM bug #42019);
``on``/``off`` are honoured. No vLLM is needed: the configuration the runner loads is captured at
the loader. The vLLM side (cache hits, identical samples and continuation scores, the refused
cached read, fingerprint) is tests/engines/test_vllm_prefix_caching.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.api import plan_spec
from auditlang.cli import main
from auditlang.core.errors import RuntimeFailure
from auditlang.engines.registry import check_config
from auditlang.execute.runner import engine_config
from auditlang.report.checklist import _vllm_settings
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config, prefix_caching_for

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

SPEC = """import "stdlib/s000"
import "stdlib/s001"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=42)
model gen = vllm("org/gen", max_tokens=6{gen})
model scored = vllm("org/scored", max_tokens=6{scored})
audit sampled {{
  models = [gen]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}}
audit teacher_forced {{
  models = [scored]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s001.tok_bare]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}}
report cells
"""


def _spec(tmp_path: Path, gen: str = "", scored: str = "") -> Path:
    p = tmp_path / "pc.audit"
    p.write_text(SPEC.format(gen=gen, scored=scored), encoding="utf-8")
    return p


@pytest.fixture
def data() -> Path:
    if not (DATA / "arc_challenge.jsonl").is_file():
        pytest.skip(f"shared data not found at {DATA}")
    return DATA


def test_auto_is_on_with_and_without_prompt_logprobs(tmp_path: Path, data: Path) -> None:
    spec = compile_spec(_spec(tmp_path))
    plan = plan_spec(spec, str(data))
    assert "continuation_logprobs" not in plan.model_kinds("gen")
    assert plan.model_kinds("scored") >= {"generate", "continuation_logprobs"}  # T1 scoring: a stage-2 kind
    gen, scored = engine_config(spec, plan, "gen"), engine_config(spec, plan, "scored")
    assert _pc(gen) == {"enable_prefix_caching": True}
    assert _pc(scored) == {"enable_prefix_caching": True}  # before session 7: off (#42019), now guarded
    for cfg in (gen, scored):
        check_config(cfg)  # the vllm engine's own option parser takes it
    # --engine hf on these models: no vLLM option follows
    assert engine_config(spec, plan, "gen", engine_override="hf").options == {}


def test_auditc_plan_says_how_run_will_set_it(tmp_path: Path, data: Path, capsys) -> None:
    assert main(["plan", str(_spec(tmp_path)), "--data-root", str(data)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "vLLM prefix caching: on for gen, scored (the answers and samples of a prompt share its prefill)" in out
    assert ("vLLM stage 2: the follow-ups of gen, scored join stage 1's stream as the answers are committed (no barrier "
            "between the stages; with --shard or --executor ray the stages run in turn)") in out
    assert main(["plan", str(_spec(tmp_path, scored=", prefix_caching=off")), "--data-root", str(data)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("vLLM prefix caching: on for gen (the answers and samples of a prompt share its prefill); "
            "off for scored (prefix_caching=off)") in out


def test_explicit_values_are_honoured(tmp_path: Path, data: Path) -> None:
    spec = compile_spec(_spec(tmp_path, gen=", prefix_caching=off", scored=", prefix_caching=off"))
    plan = plan_spec(spec, str(data))
    assert _pc(engine_config(spec, plan, "gen")) == {"enable_prefix_caching": False}
    spec = compile_spec(_spec(tmp_path, gen=", prefix_caching=on", scored=", prefix_caching=auto"))
    plan = plan_spec(spec, str(data))
    assert _pc(engine_config(spec, plan, "gen")) == {"enable_prefix_caching": True}
    assert _pc(engine_config(spec, plan, "scored")) == {"enable_prefix_caching": True}
    # without the run's kinds (auditc show, access checks) only a written on/off is sent, never "auto"
    assert model_config(spec, "gen").options == {"enable_prefix_caching": True}
    assert model_config(spec, "scored").options == {}


def _pc(cfg) -> dict:
    """The options without ``enforce_eager``, which the runner sets from the planned GPU work
    (issue 36, tests/cli/test_plan_gpu_time.py): here every model's work is small, so it is on."""
    assert cfg.options.get("enforce_eager") is True
    return {k: v for k, v in cfg.options.items() if k != "enforce_eager"}


def test_rule_table() -> None:
    assert prefix_caching_for("auto") is True
    assert prefix_caching_for(False) is False
    assert prefix_caching_for(True) is True


def test_on_with_prompt_logprobs_is_accepted_by_check_and_plan(tmp_path: Path, data: Path, capsys) -> None:
    p = _spec(tmp_path, scored=", prefix_caching=on")  # was E178 before the per-request check
    assert main(["check", str(p)]) == 0
    assert main(["plan", str(p), "--data-root", str(data)]) == 0
    assert "error" not in " ".join(capsys.readouterr())


def test_auditc_run_loads_the_resolved_value(tmp_path: Path, data: Path, monkeypatch, capsys) -> None:
    """The runner's own path: `auditc run` builds each model's configuration with the plan's kinds
    (the loader is replaced so no vLLM is needed; it records what it was given and stops the run)."""
    import auditlang.execute.runner as runner

    seen = {}

    def fake_load(cfg):
        seen[cfg.name] = cfg
        raise RuntimeFailure("stop here", None)

    monkeypatch.setattr(runner, "_load", fake_load)
    rc = main(["run", str(_spec(tmp_path)), "--data-root", str(data), "--out", str(tmp_path / "run"), "--no-progress"])
    assert rc == 3 and "stop here" in "".join(capsys.readouterr())
    first = next(iter(seen.values()))
    assert first.engine == "vllm" and _pc(first) == {"enable_prefix_caching": True}


def test_checklist_discloses_the_setting() -> None:
    fp = {"engine": "vllm", "model_runner": "v1", "enforce_eager": True, "prefix_caching": True}
    assert _vllm_settings(fp) == ("; vLLM model runner v1, enforce_eager True, "
                                  "prefix caching on (prompt prefills shared between requests)")
    assert _vllm_settings({**fp, "prefix_caching": False}).endswith("prefix caching off")
    assert _vllm_settings({"engine": "hf"}) == ""
