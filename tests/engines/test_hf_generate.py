"""The hf engine's continuous-batching generation loop (auditlang/engines/hf_generate.py) on the
real SmolLM2 in float32: the same tokens as transformers' own greedy ``generate`` (unbatched and
batched), no wasted rows, one prefill for n samples, recovery from running out of GPU memory,
and ``batch_size=auto`` / ``device="cuda:N"`` written in a spec."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.cli import main as auditc  # noqa: E402  (after importorskip)
from auditlang.engines import hf_generate  # noqa: E402  (after importorskip)
from auditlang.engines.hf import HFEngine  # noqa: E402  (after importorskip)
from auditlang.core.requests import Message, Prompt, Request  # noqa: E402  (after importorskip)
from auditlang.store import Journal  # noqa: E402  (after importorskip)

QUESTIONS = [
    "What is 2+2?", "Name a colour.", "Write a haiku about the sea.", "Say yes.",
    "List three fruits, comma separated.", "What is the capital of France? Answer in one word.",
    "Explain gravity in two sentences.", "Count from one to five.", "Is the sky blue? Answer yes or no.",
]
BUDGETS = [1, 40, 6, 3, 40, 12, 25, 40, 2]  # mixed budgets; EOS ends several rows early


def greedy(q: str, max_tokens: int, k: int = 3) -> Request:
    return Request.make("smol", "generate", Prompt(messages=(Message("user", q),)), max_tokens=max_tokens, temperature=0.0, top_logprobs=k)


def hf_generate_ref(engine: HFEngine, prompts: list[list[int]], max_new: int) -> list[tuple[list[int], list[float]]]:
    """transformers' ``model.generate`` (greedy) on one left-padded batch: token ids up to and
    including the first EOS, and their float32 logprobs."""
    w = max(map(len, prompts))
    ids = torch.full((len(prompts), w), engine.pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), w), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, w - len(p):], mask[i, w - len(p):] = torch.tensor(p), 1
    with torch.inference_mode():
        g = engine.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False, temperature=None,
                                  top_p=None, top_k=None, pad_token_id=engine.pad_id, eos_token_id=sorted(engine.eos_ids),
                                  return_dict_in_generate=True, output_logits=True)
    lps = torch.log_softmax(torch.stack(g.logits, 1).float(), -1)
    out = []
    for i in range(len(prompts)):
        row = g.sequences[i, w:].tolist()
        n = next((j + 1 for j, t in enumerate(row) if t in engine.eos_ids), len(row))
        out.append((row[:n], [float(lps[i, j, t]) for j, t in enumerate(row[:n])]))
    return out


@pytest.fixture(scope="module")
def mixed(smol):
    reqs = [greedy(q, b) for q, b in zip(QUESTIONS, BUDGETS)]
    before = dataclasses.replace(smol.gen_stats)
    out = {r.request_id: r for r in smol.run(reqs)}
    return reqs, out, before, dataclasses.replace(smol.gen_stats)


def test_same_tokens_as_transformers_generate_unbatched_and_batched(smol, mixed):
    reqs, out, _, _ = mixed
    enc = [smol.encode_prompt(r.prompt) for r in reqs]
    batched = hf_generate_ref(smol, enc, max(BUDGETS))
    for r, e, b, ref_b in zip(reqs, enc, BUDGETS, batched):
        got = out[r.id].samples[0]
        ids = [t.token_id for t in got.tokens]
        (ref_ids, ref_lps), = hf_generate_ref(smol, [e], b)
        assert ids == ref_ids  # unbatched reference
        assert ids == ref_b[0][:b]  # one left-padded batch of every prompt
        assert [t.logprob for t in got.tokens] == pytest.approx(ref_lps, abs=1e-4)
        assert got.finish_reason == ("stop" if ref_ids[-1] in smol.eos_ids else "length")
    lengths = {len(out[r.id].samples[0].tokens) for r in reqs}
    assert len(lengths) >= 5  # really mixed generation lengths


def test_finished_rows_leave_the_batch(smol, mixed):
    reqs, out, before, after = mixed
    tokens = sum(len(out[r.id].samples[0].tokens) for r in reqs)
    assert after.generated_tokens - before.generated_tokens == tokens
    # every row computed by a forward yields a kept token: prefill rows + decoding rows = tokens
    assert after.row_steps - before.row_steps == tokens
    assert after.prefill_rows - before.prefill_rows == len(reqs)
    assert after.refills > before.refills  # batch_size 4 < 9 prompts: waiting prompts joined running rows
    assert after.forwards - before.forwards < max(BUDGETS) + len(reqs)


def test_n_samples_share_one_prefill_and_draw_as_if_alone(smol):
    p = Prompt(messages=(Message("user", "Tell me a short joke."),))
    req = Request.make("smol", "generate", p, max_tokens=10, temperature=0.9, top_p=0.95, n=6, seed=11, top_logprobs=2)
    before = dataclasses.replace(smol.gen_stats)
    shared = next(iter(smol.run([req])))
    assert smol.config.batch_size == 4
    # one prefill: samples 0-3 start from it, 4-5 fork from it (kept) once rows are free
    assert smol.gen_stats.prefill_rows - before.prefill_rows == 1
    config = smol.config
    try:  # batch of one row: each sample decodes alone, forked from the same one prefill
        smol.config = dataclasses.replace(config, batch_size=1)
        before = dataclasses.replace(smol.gen_stats)
        alone = next(iter(smol.run([req])))
        assert smol.gen_stats.prefill_rows - before.prefill_rows == 1
    finally:
        smol.config = config
    assert [s.text for s in shared.samples] == [s.text for s in alone.samples]
    assert len({s.text for s in shared.samples}) > 1
    for a, b in zip(shared.samples, alone.samples):
        assert [t.logprob for t in a.tokens] == pytest.approx([t.logprob for t in b.tokens], abs=1e-4)


class OutOfMemoryError(RuntimeError):
    """Named like torch's: the engine retries with half the rows."""


def test_out_of_memory_halves_the_batch(smol, mixed, monkeypatch):
    reqs, out, _, _ = mixed
    caps: list[int] = []
    real = hf_generate.Decoder.run

    def run(self: Any, units: Any) -> None:
        caps.append(self.cap)
        if self.cap > 2:
            raise OutOfMemoryError("CUDA out of memory (simulated)")
        real(self, units)

    monkeypatch.setattr(hf_generate.Decoder, "run", run)
    again = {r.request_id: r for r in smol.run(reqs)}
    assert caps[:2] == [4, 2]
    for r in reqs:
        assert again[r.id].error is None
        assert [t.token_id for t in again[r.id].samples[0].tokens] == [t.token_id for t in out[r.id].samples[0].tokens]


# ----------------------------------------------------------------------------- the spec language


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "gpu.audit"
    p.write_text(textwrap.dedent(body), encoding="utf-8")
    return p


def test_spec_accepts_batch_size_auto_and_cuda_n(tmp_path, capsys):
    ok = _write(tmp_path, """\
        model a = embedded("smollm2-135m-instruct", device="cuda:1", batch_size=auto)
        model b = hf("org/name", device=cuda, batch_size="auto")
        model c = vllm("org/name", batch_size=auto)
        """)
    assert auditc(["check", str(ok)]) == 0
    bad = _write(tmp_path, """\
        model a = hf("org/name", device="gpu:1")
        model b = hf("org/name", batch_size=0)
        model c = hf("org/name", batch_size=big)
        """)
    assert auditc(["check", str(bad)]) != 0
    err = capsys.readouterr()
    text = err.out + err.err
    assert f"{bad}:1:26" in text and "cuda:N" in text and 'hint: write device="cuda:1"' in text
    assert f"{bad}:2:26" in text and f"{bad}:3:26" in text and "positive integer or auto" in text


def test_batch_size_auto_runs_and_is_recorded(tmp_path, cache_dir):
    data = Path(__file__).resolve().parents[2] / "examples" / "data"
    spec = _write(tmp_path, """\
        import "stdlib/s000"
        settings { seed = 42 }
        dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=40, seed=42)
        model smol = embedded("smollm2-135m-instruct", dtype=float32, device="cpu", batch_size=auto, max_tokens=4)
        audit a {
          models = [smol]
          datasets = [capitals]
          variants = [s000.surface_paraphrase]
          protocols = [s000.token_norm]
          evaluators = [s000.first_char]
          metrics = [accuracy]
        }
        report cells
        """)
    run_dir = tmp_path / "run"
    assert auditc(["run", str(spec), "--out", str(run_dir), "--limit", "2", "--data-root", str(data)]) == 0
    with Journal(run_dir) as j:
        fps = [rec.fingerprint for rec in j.fingerprints().values()]
    assert [fp.get("batch_size_auto") for fp in fps] == [16]  # found once at load (CPU: 16), recorded
    assert fps[0]["device"] == "cpu"


def test_cuda_device_without_cuda_is_an_engine_error(cache_dir):
    from auditlang.core.engine import EngineError, ModelConfig

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(EngineError, match="CUDA is not available"):
        HFEngine(ModelConfig(name="m", engine="hf", path="smollm2-135m-instruct", device="cuda:1"))
