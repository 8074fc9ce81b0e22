"""One prefill per distinct prompt (issue 16): in one hf ``run`` call every generate request of
an encoded prompt, greedy or sampled, whatever its budget, shares that prompt's single prefill,
also when its rows outnumber the batch (the prefill is kept and later rows fork from it); the
outputs are those of each request run alone. And the user's path: ``auditc run`` of a study-003
self-consistency spec prefills each stage-1 prompt once, as run.json's ``engine_work`` records."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.cli import main as auditc  # noqa: E402  (after importorskip)
from auditlang.core.requests import Message, Prompt, Request, Result  # noqa: E402  (after importorskip)
from auditlang.engines.hf import HFEngine  # noqa: E402  (after importorskip)

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-4


def chat(q: str) -> Prompt:
    return Prompt(messages=(Message("user", q),))


def gen(model: str, p: Prompt, max_tokens: int, temperature: float = 0.0, **kw: Any) -> Request:
    return Request.make(model, "generate", p, max_tokens=max_tokens, temperature=temperature, **kw)


@contextmanager
def prefill_rows_seen(engine: HFEngine) -> Iterator[list[int]]:
    """Per model forward: its rows when it is a prefill (more than one input position), else 0
    (a decoding step feeds one token per row)."""
    seen: list[int] = []

    def hook(_m: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(int(ids.shape[0]) if ids.shape[1] > 1 else 0)

    handle = engine.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def run(engine: HFEngine, reqs: list[Request]) -> dict[str, Result]:
    out = {r.request_id: r for r in engine.run(reqs)}
    assert set(out) == {r.id for r in reqs}
    assert not [r.error for r in out.values() if r.error]
    return out


def assert_same(a: Result, b: Result) -> None:
    assert a.meta == b.meta
    if a.kind == "choice_logprobs":
        assert a.choice_logprobs == pytest.approx(b.choice_logprobs, abs=TOL)
        assert list(a.top_logprobs) == list(b.top_logprobs)
        return
    for sa, sb in zip(a.samples, b.samples, strict=True):
        assert (sa.text, sa.finish_reason) == (sb.text, sb.finish_reason)
        assert [t.token_id for t in sa.tokens] == [t.token_id for t in sb.tokens]
        assert [t.logprob for t in sa.tokens] == pytest.approx([t.logprob for t in sb.tokens], abs=TOL)
        for ta, tb in zip(sa.tokens, sb.tokens):
            assert list(ta.top) == list(tb.top)


def test_every_request_of_a_prompt_shares_its_one_prefill(smol):
    p, q, r = chat("Tell me a short story about a cat."), chat("Name a colour."), chat("Write a haiku about rain.")
    reqs = [
        gen("smol", p, 12, top_logprobs=3),  # greedy answer
        gen("smol", p, 8, temperature=0.9, top_p=0.95, n=5, seed=7, top_logprobs=2),  # self-consistency samples
        gen("smol", p, 4, first_top_logprobs=5),  # another greedy budget and window
        Request.make("smol", "choice_logprobs", p, choices=["Yes", "No"], top_logprobs=4),  # rides on the prefill
        gen("smol", q, 6),
        gen("smol", r, 5, temperature=1.0, n=2, seed=3),
    ]
    assert smol.config.batch_size == 4  # 10 rows of generation: p's 7 rows do not fit one admission
    before = dataclasses.replace(smol.gen_stats)
    with prefill_rows_seen(smol) as seen:
        together = run(smol, reqs)
    stats = smol.gen_stats
    assert stats.prefill_rows - before.prefill_rows == 3  # distinct prompts
    assert sum(seen) == 3  # each prompt is a row of exactly one prefill forward
    assert len(seen) == stats.forwards - before.forwards  # the choice request has no forward of its own
    # p's rows: 1 + 5 + 1 generation rows, started from its one prefill across admissions
    assert stats.generated_tokens - before.generated_tokens == sum(
        len(s.tokens) for res in together.values() for s in (res.samples or ()))
    for req in reqs:
        alone = run(smol, [req])
        assert_same(together[req.id], alone[req.id])
    g12, g4 = together[reqs[0].id].samples[0], together[reqs[2].id].samples[0]
    assert [t.token_id for t in g4.tokens] == [t.token_id for t in g12.tokens][: len(g4.tokens)]
    assert len({s.text for s in together[reqs[1].id].samples}) > 1  # really sampled


def _reference_greedy(engine: HFEngine, prompt: list[int], max_new: int) -> list[int]:
    """transformers' own greedy ``generate`` for one prompt: ids up to and including EOS."""
    with torch.inference_mode():
        g = engine.model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones((1, len(prompt)), dtype=torch.long),
                                  max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None, top_k=None,
                                  pad_token_id=engine.pad_id, eos_token_id=sorted(engine.eos_ids))
    row = g[0, len(prompt):].tolist()
    return row[: next((j + 1 for j, t in enumerate(row) if t in engine.eos_ids), len(row))]


def test_a_prompt_with_more_rows_than_the_batch_forks_later_rows_from_its_prefill(engine):
    """Six greedy budgets of one raw-text prompt with batch_size 4 (Gemma 3's sliding-window
    cache included): one prefill; rows 5-6 start from the kept prefill; each equals
    transformers' greedy generation cut to its budget."""
    name = engine.config.name
    p = Prompt(text="The three primary colours are")
    reqs = [gen(name, p, b, top_logprobs=b % 3) for b in (6, 2, 5, 1, 4, 3)]
    before = dataclasses.replace(engine.gen_stats)
    with prefill_rows_seen(engine) as seen:
        out = run(engine, reqs)
    assert engine.gen_stats.prefill_rows - before.prefill_rows == 1 and sum(seen) == 1
    ref = _reference_greedy(engine, engine.encode_prompt(p), 6)
    for req in reqs:
        got = [t.token_id for t in out[req.id].samples[0].tokens]
        assert got == ref[: req.p["max_tokens"]]
        assert out[req.id].samples[0].tokens[0].logprob == pytest.approx(
            out[reqs[0].id].samples[0].tokens[0].logprob, abs=TOL)


# ----------------------------------------------------------------------------- the user's path


def test_auditc_run_of_a_self_consistency_spec_prefills_each_stage1_prompt_once(tmp_path, cache_dir):
    spec = tmp_path / "sc.audit"
    spec.write_text(textwrap.dedent("""\
        import "stdlib/s003"
        settings { seed = 42 }
        dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=40, seed=42)
        model smol = embedded("smollm2-135m-instruct", dtype=float32, device="cpu", batch_size=4, max_tokens=4)
        audit sc {
          models = [smol]
          datasets = [capitals]
          variants = [s003.answer]
          protocols = [s003.self_consistency]
          evaluators = [s003.letter]
          metrics = [accuracy]
        }
        report cells
        """), encoding="utf-8")
    data = ["--data-root", str(ROOT / "examples" / "data")]
    plan_file = tmp_path / "plan.json"
    assert auditc(["plan", str(spec), "--limit", "3", *data, "--format", "json", "-o", str(plan_file)]) == 0
    stage1 = json.loads(plan_file.read_text())["requests"]
    prompts = {json.dumps(r["prompt"], sort_keys=True) for r in stage1}
    # per item: the sampled answer (n=1) and the 9 self-consistency samples, same prompt
    assert len(stage1) == 2 * len(prompts) == 6
    assert {r["params"].get("n", 1) for r in stage1} == {1, 9}
    out = tmp_path / "run"
    assert auditc(["run", str(spec), "--limit", "3", *data, "--out", str(out), "--no-report", "--display", "none"]) == 0
    info = json.loads((out / "run.json").read_text())
    work = info["engine_work"]["smol"]["stage 1"]
    assert work["prefill_rows"] == len(prompts)  # before issue 16: 12 (a prefill per request, per 4 samples)
    assert info["last_run"]["executed"] == len(stage1)
    assert work["generated_tokens"] <= 10 * len(prompts) * 4 and work["row_steps"] <= work["generated_tokens"]


def test_the_gpu_sampler_path_keeps_samples_independent_of_their_batch(smol, monkeypatch):
    """The decoder's batched sampler (gen.sample_rows, used on CUDA) run here on the CPU: a
    request's samples are the same together with other prompts' rows as alone, and differ from
    each other."""
    from auditlang.engines import hf_generate

    init = hf_generate.Decoder.__init__

    def gpu_sampler(self, *a, **kw):
        init(self, *a, **kw)
        self.gpu_sampler = True

    monkeypatch.setattr(hf_generate.Decoder, "__init__", gpu_sampler)
    p, q = chat("Tell me a short story about a cat."), chat("Write a haiku about rain.")
    reqs = [gen("smol", p, 8, temperature=0.9, top_p=0.95, n=5, seed=7, top_logprobs=2),
            gen("smol", q, 6, temperature=1.0, n=3, seed=3), gen("smol", q, 5)]
    together = run(smol, reqs)
    for req in reqs:
        assert_same(together[req.id], run(smol, [req])[req.id])
    assert len({s.text for s in together[reqs[0].id].samples}) > 1
