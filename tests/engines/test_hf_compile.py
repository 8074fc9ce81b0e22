"""``compile=true`` on hf models (issue 16, scoring MFU): torch.compile(dynamic=True) of the
scoring forward passes. On an H100 it raised the scoring workload's MFU from 0.46 to 0.57 (8B
shape) and 0.30 to 0.43 (1B), benchmarks/README.md. Here: the spec reaches the engine, a CPU is
refused with the reason through ``auditc run``, and the compiled paths give the eager scores
(run on a CPU through the engine's own compiled model, stock linears, a tiny random model): the
left-padded one and the right-padded, mask-free one (hf_scoring) that plain-head models use,
which is also checked uncompiled on the real SmolLM2 (choice, continuation and hidden states)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from auditlang.cli import main as auditc
from auditlang.core.engine import ModelConfig
from auditlang.core.requests import Prompt, Request
from auditlang.engines.registry import check_config
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config

ROOT = Path(__file__).resolve().parents[2]


def test_compile_written_in_a_spec_reaches_the_hf_engine_and_only_when_written(tmp_path: Path) -> None:
    p = tmp_path / "m.audit"
    p.write_text('model a = hf("org/m", compile=true)\n'
                 'model b = embedded("smollm2-135m-instruct", compile=true)\n'
                 'model c = embedded("smollm2-135m-instruct")\n', encoding="utf-8")
    spec = compile_spec(p)
    for mid in ("a", "b"):
        cfg = model_config(spec, mid)
        assert cfg.engine == "hf" and cfg.options == {"compile": True}
        check_config(cfg)
    assert model_config(spec, "c").options == {}


def test_compile_on_a_vllm_model_a_cpu_model_or_a_non_boolean_is_a_diagnostic(tmp_path: Path, capsys) -> None:
    p = tmp_path / "m.audit"
    p.write_text('model a = embedded("smollm2-135m-instruct", engine=vllm, compile=true)\n'
                 'model b = hf("org/m", compile=maybe)\n'
                 'model c = hf("org/m", compile=true, device="cpu")\n'
                 'model d = hf("org/m", device="cuda:1", compile=true)\n', encoding="utf-8")
    assert auditc(["check", str(p)]) == 1
    err = capsys.readouterr().err
    assert "m.audit:1:" in err and "compile=true applies to the hf engine" in err and "^" in err
    assert "m.audit:2:" in err and "'compile' takes true or false" in err
    assert "m.audit:3:23:" in err and 'declared device="cpu"' in err and "remove it on a CPU" in err
    assert "m.audit:4:" not in err and err.count("error[") == 3
    assert "Traceback" not in err


def test_auditc_run_with_compile_on_a_cpu_stops_with_the_reason(tmp_path: Path, cache_dir: Path, capsys) -> None:
    """device=auto (not an error in the spec) that finds no GPU when the engine loads."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: device=auto would load the model there")
    spec = tmp_path / "c.audit"
    spec.write_text(textwrap.dedent("""\
        import "stdlib/s000"
        settings { seed = 1 }
        dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=2, seed=1)
        model smol = embedded("smollm2-135m-instruct", dtype=float32, compile=true)
        audit a {
          models = [smol]
          datasets = [capitals]
          variants = [s000.surface_paraphrase]
          protocols = [s000.token_norm]
          evaluators = [s000.first_char]
          metrics = [accuracy]
        }
        """), encoding="utf-8")
    rc = auditc(["run", str(spec), "--data-root", str(ROOT / "examples" / "data"), "--out", str(tmp_path / "run"),
                 "--no-report", "--display", "none"])
    out = capsys.readouterr()
    assert rc == 3, out
    assert "compile=true needs a CUDA device (this model loads on cpu)" in out.err and "Traceback" not in out.err


REQS = ([Request.make("m", "choice_logprobs", Prompt(text=f"Question {i}: " + "word " * (3 + i % 11) + "Answer:"),
                      choices=[" A", " B", " C", " D"], top_logprobs=3) for i in range(24)]
        + [Request.make("m", "continuation_logprobs", Prompt(text=f"Q {i}: the sky is"), continuation=" blue" * (1 + i % 3))
           for i in range(6)]
        + [Request.make("m", "hidden_states", Prompt(text=f"Statement {i}: " + "fact " * (2 + i % 5)), layer=-1)
           for i in range(5)])


def _same(a: dict, b: dict, tol: float, reqs: list[Request] = REQS) -> None:
    for r in reqs:
        x, y = a[r.id], b[r.id]
        assert not x.error and not y.error, (x.error, y.error)
        if r.kind == "choice_logprobs":
            assert x.choice_logprobs == pytest.approx(y.choice_logprobs, abs=tol)
            assert list(x.top_logprobs) == list(y.top_logprobs)
        elif r.kind == "continuation_logprobs":
            assert [t.token_id for t in x.continuation] == [t.token_id for t in y.continuation]
            assert [t.logprob for t in x.continuation] == pytest.approx([t.logprob for t in y.continuation], abs=tol)
        else:
            assert x.hidden_state and x.hidden_state == pytest.approx(y.hidden_state, abs=tol * 10)


def test_eligibility_of_the_right_padded_path(smol, gemma) -> None:
    from auditlang.engines import hf_scoring

    assert hf_scoring.ineligible(smol.model) is None  # SmolLM2 is a Llama
    assert "gemma3" in hf_scoring.ineligible(gemma.model)  # sliding-window layers: keeps left padding


def test_right_padded_scoring_gives_the_left_padded_scores_on_smollm2(smol) -> None:
    from auditlang.engines import hf_scoring

    reqs = [r.__class__.make("smol", r.kind, r.prompt, **r.p) for r in REQS]
    left = {r.request_id: r for r in smol.run(reqs)}
    hf_scoring.register(smol._transformers)
    smol.scoring_padding = "right"
    try:
        right = {r.request_id: r for r in smol.run(reqs)}
    finally:
        smol.scoring_padding = "left"
    assert smol.model.config._attn_implementation == "sdpa"  # restored for generation
    _same(left, right, 1e-4, reqs)


def test_compiled_scoring_gives_the_eager_scores(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_mfu import shell_checkpoint, tokenizer_dir
    finally:
        sys.path.pop(0)
    import torch

    from auditlang.engines import hf_scoring
    from auditlang.engines.hf import HFEngine

    shell, _ = shell_checkpoint("tiny", tokenizer_dir())
    engine = HFEngine(ModelConfig(name="m", engine="hf", path=shell, dtype="float32", device="cpu", batch_size=8,
                                  chat=False, options={"cpu_linear": "torch"}))
    eager = {r.request_id: r for r in engine.run(REQS)}
    assert engine.fingerprint().get("compile") is None
    for padding in ("left", "right"):  # what compile=true sets at load, minus the CUDA check
        hf_scoring.register(engine._transformers)
        engine.compile, engine.scoring_padding, engine._fingerprint, engine._compiled = True, padding, None, None
        compiled = {r.request_id: r for r in engine.run(REQS)}
        assert isinstance(engine._scoring_model(), torch._dynamo.eval_frame.OptimizedModule)
        assert engine._scoring_model() is engine._scoring_model()  # compiled once, reused
        assert engine.fingerprint()["compile"] == "torch.compile(dynamic=True)"
        assert engine.fingerprint()["scoring_padding"] == padding
        _same(eager, compiled, 1e-5)
    engine.close()


def test_checklist_discloses_compiled_scoring() -> None:
    from auditlang.report.checklist import _hf_settings

    fp = {"engine": "hf", "compile": "torch.compile(dynamic=True)", "scoring_padding": "right"}
    assert _hf_settings(fp) == ("; hf scoring passes compiled (torch.compile(dynamic=True)), rows padded on the right "
                                "without an attention mask")
    assert _hf_settings({**fp, "scoring_padding": "left"}).endswith("padded on the left")
    assert _hf_settings({"engine": "hf"}) == "" and _hf_settings({"engine": "vllm", "compile": "x"}) == ""
