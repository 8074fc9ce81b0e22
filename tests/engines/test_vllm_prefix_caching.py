"""vLLM prefix caching on the real SmolLM2-135M-Instruct (float32, the vLLM CPU build of CI).

One prompt's greedy answer and a 4-sample sampled request (5 vLLM requests: one n=1 request per
sample) run once with ``enable_prefix_caching`` on and once off. With it on, vLLM's own counter
(``RequestOutput.num_cached_tokens``, summed by the engine's ``prefill_stats``) shows the prompt
prefilled once: the four samples read every whole KV block of it from the cache (128 tokens a
block on CPU, 16 on GPU) and compute only the tail. The samples are the same texts either way
(same per-sample seeds). Continuation scoring gives the same values with the cache on: vLLM reads
no cached block for a prompt-logprobs request, and a request that did read some (forced here)
fails alone instead of returning the uninitialised rows of vLLM bug #42019.
The rule that resolves ``prefix_caching=auto`` is tests/engines/test_prefix_caching_rule.py.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from auditlang.core.engine import ModelConfig
from auditlang.core.requests import Message, Prompt, Request

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed here; run in the vLLM venv (scripts/setup_vllm_cpu.sh)")]

FACTS = " ".join(f"Fact {i}: the lamp in room {i} is colour number {i * 7}." for i in range(30))
PROMPT = Prompt(messages=(Message("user", f"{FACTS}\nWhich colour is the lamp in room 12? Answer briefly."),))
GREEDY = Request.make("m", "generate", PROMPT, max_tokens=8, top_logprobs=2)
SAMPLED = Request.make("m", "generate", PROMPT, seed=5, max_tokens=8, temperature=1.0, n=4, top_logprobs=2)
SCORE = Request.make("m", "continuation_logprobs", PROMPT, continuation=" 84")


@pytest.fixture(scope="module")
def runs(cache_dir: Path) -> dict[bool, dict]:
    """Per setting: results, prefill counters, fingerprint, block size, prompt length, the score.
    One engine at a time (each is closed before the next loads)."""
    from auditlang.engines.registry import load_engine

    out = {}
    for on in (True, False):
        engine = load_engine(ModelConfig(name="m", engine="vllm", path="smollm2-135m-instruct", dtype="float32",
                                         options={"enable_prefix_caching": on}))
        try:
            results = {r.request_id: r for r in engine.run([GREEDY, SAMPLED])}
            stats = engine.prefill_stats.as_dict()
            before = engine.prefill_stats.as_dict()
            score = next(iter(engine.run([SCORE])))  # after GREEDY and SAMPLED wrote this prompt's blocks
            after = engine.prefill_stats.as_dict()
            forced = None
            if on:  # a prompt-logprobs request made to read the cache: the #42019 case, refused
                real_sp = engine._sp

                def reading_sp(real_sp=real_sp, **kw):
                    if kw.get("prompt_logprobs") is not None:
                        kw["skip_reading_prefix_cache"] = False
                    return real_sp(**kw)

                engine._sp = reading_sp
                forced = next(iter(engine.run([SCORE])))
                engine._sp = real_sp
            out[on] = {"results": results, "stats": stats, "fp": engine.fingerprint(), "score": score, "forced": forced,
                       "score_cached": after["cached_tokens"] - before["cached_tokens"],
                       "block": engine.llm.llm_engine.vllm_config.cache_config.block_size,
                       "prompt_tokens": len(engine.encode_prompt(PROMPT))}
        finally:
            engine.close()
    return out


def test_prompt_is_prefilled_once_with_the_cache_on(runs) -> None:
    on, off = runs[True], runs[False]
    n = on["prompt_tokens"]
    block = on["block"]
    assert n > 2 * block, "the prompt must span whole KV blocks for the cache to serve it"
    cached_per_sample = (n - 1) // block * block  # whole blocks; vLLM always computes the last token
    assert on["stats"] == {"requests": 5, "prompt_tokens": 5 * n, "cached_tokens": 4 * cached_per_sample,
                           "computed_tokens": 5 * n - 4 * cached_per_sample}
    assert on["stats"]["computed_tokens"] < n + 4 * block  # one prefill + the tails
    assert off["stats"] == {"requests": 5, "prompt_tokens": 5 * n, "cached_tokens": 0, "computed_tokens": 5 * n}
    assert on["fp"]["prefix_caching"] is True and off["fp"]["prefix_caching"] is False


def test_samples_are_the_same_with_and_without_the_cache(runs) -> None:
    for req in (GREEDY, SAMPLED):
        a, b = runs[True]["results"][req.id], runs[False]["results"][req.id]
        assert a.error is None and b.error is None, (a.error, b.error)
        assert [s.text for s in a.samples] == [s.text for s in b.samples]
        for sa, sb in zip(a.samples, b.samples):
            assert [t.token_id for t in sa.tokens] == [t.token_id for t in sb.tokens]
            assert all(math.isclose(x.logprob, y.logprob, abs_tol=1e-4) for x, y in zip(sa.tokens, sb.tokens))
    texts = [s.text for s in runs[True]["results"][SAMPLED.id].samples]
    assert len(texts) == 4 and len(set(texts)) > 1  # really sampled


def test_continuation_scores_are_the_same_with_the_cache_on(runs) -> None:
    on, off = runs[True]["score"], runs[False]["score"]
    assert on.error is None and off.error is None, (on.error, off.error)
    assert runs[True]["score_cached"] == 0  # the prompt was in the cache, and not read
    assert [t.token_id for t in on.continuation] == [t.token_id for t in off.continuation]
    assert [t.logprob for t in on.continuation] == pytest.approx([t.logprob for t in off.continuation], abs=1e-5)


def test_a_teacher_forced_request_that_reads_the_cache_fails_alone(runs) -> None:
    forced = runs[True]["forced"]
    assert forced.error and "#42019" in forced.error and "prompt tokens" in forced.error
    assert not forced.continuation
