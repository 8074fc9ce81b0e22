"""Sampling top-k and chat-template arguments in the hf engine (real SmolLM2-135M-Instruct),
and the shared parameter checks of engines/params.py."""

from __future__ import annotations

import dataclasses

import copy

import pytest

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.engines.params import chat_template_kwargs, sampling_top_k
from auditlang.core.requests import Message, Prompt, Request

SEA = Prompt(messages=(Message("user", "Write one sentence about the sea."),))
# A chat template that reads `enable_thinking` the way Qwen3's does (an empty think block when off).
THINK_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


# ----------------------------------------------------------------------------- shared checks


@pytest.mark.parametrize("value, expected", [(None, 0), (0, 0), (-1, 0), (1, 1), (50, 50)])
def test_sampling_top_k_off_values(value, expected) -> None:
    assert sampling_top_k({} if value is None else {"top_k": value}) == expected


@pytest.mark.parametrize("value", [-2, 2.5, "50", True])
def test_sampling_top_k_rejects(value) -> None:
    with pytest.raises(ValueError, match="top_k"):
        sampling_top_k({"top_k": value})


def test_chat_template_kwargs_checks() -> None:
    assert chat_template_kwargs({}, "m") == {}
    kw = {"reasoning_effort": "low", "enable_thinking": False}
    assert chat_template_kwargs({"chat_template_kwargs": kw}, "m") == kw
    with pytest.raises(ValueError, match="mapping"):
        chat_template_kwargs({"chat_template_kwargs": ["enable_thinking"]}, "m")
    with pytest.raises(ValueError, match="set by the engine"):
        chat_template_kwargs({"chat_template_kwargs": {"add_generation_prompt": False}}, "m")
    with pytest.raises(ValueError, match="string, number or boolean"):
        chat_template_kwargs({"chat_template_kwargs": {"x": [1]}}, "m")


def test_hf_bad_chat_template_kwargs_is_an_engine_error() -> None:
    pytest.importorskip("torch")
    from auditlang.engines.hf import HFEngine

    with pytest.raises(EngineError, match="set by the engine"):
        HFEngine(ModelConfig(name="m", engine="hf", path="smollm2-135m-instruct",
                             options={"chat_template_kwargs": {"tokenize": True}}))


def test_sample_keeps_top_k_and_ties() -> None:
    torch = pytest.importorskip("torch")
    from auditlang.engines.gen import _GenSpec, _sample

    logits = torch.log(torch.tensor([0.30, 0.25, 0.25, 0.10, 0.10]))
    spec = _GenSpec(max_tokens=1, temperature=1.0, top_p=1.0, n=1, top_logprobs=0, stop=(), seed=0, top_k=2)
    gen = torch.Generator().manual_seed(0)
    draws = {_sample(torch, logits, spec, gen) for _ in range(300)}
    assert draws == {0, 1, 2}  # the tie at the 2nd-largest probability keeps both tokens (vLLM, HF)
    spec.top_k = 1
    assert {_sample(torch, logits, spec, gen) for _ in range(50)} == {0}
    spec.top_k = 0
    assert {_sample(torch, logits, spec, gen) for _ in range(300)} == {0, 1, 2, 3, 4}
    # the batched GPU sampler keeps the same top-k semantics
    from auditlang.engines.gen import sample_rows

    spec.top_k = 2
    assert set(sample_rows(torch, logits.repeat(300, 1), [spec] * 300, list(range(300)), [0] * 300).tolist()) == {0, 1, 2}


def test_gpu_sampler_draws_the_distribution_and_is_a_pure_function_of_key_and_position() -> None:
    torch = pytest.importorskip("torch")
    from auditlang.engines.gen import _GenSpec, sample_rows

    p = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0])
    logits = torch.log(p).repeat(4000, 1)
    spec = _GenSpec(max_tokens=1, temperature=1.0, top_p=1.0, n=1, top_logprobs=0, stop=(), seed=0)
    keys = [k * 7919 for k in range(4000)]
    draws = sample_rows(torch, logits, [spec] * 4000, keys, [3] * 4000)
    freq = torch.bincount(draws, minlength=5).double() / 4000
    assert freq[4] == 0  # probability 0 is never drawn
    assert torch.allclose(freq[:4], p[:4].double(), atol=0.025), freq  # ~3.3 standard errors at most
    again = sample_rows(torch, logits[:50], [spec] * 50, keys[:50], [3] * 50)
    assert torch.equal(again, draws[:50])  # a pure function: no generator state
    one_by_one = torch.stack([sample_rows(torch, logits[i:i + 1], [spec], [keys[i]], [3])[0] for i in range(50)])
    assert torch.equal(one_by_one, draws[:50])  # a row's draw does not depend on its batch
    moved = sample_rows(torch, logits[:500], [spec] * 500, keys[:500], [4] * 500)
    assert not torch.equal(moved, draws[:500])  # another position, other noise
    # temperature 0.5 sharpens: the top token is drawn more often than its probability
    cold = dataclasses.replace(spec, temperature=0.5)
    top = (sample_rows(torch, logits, [cold] * 4000, keys, [3] * 4000) == 0).double().mean()
    assert top == pytest.approx(0.25 / (0.25 + 0.09 + 0.0225 + 0.0025), abs=0.03)
    # top_p keeps the best tokens until the mass of strictly better ones reaches p
    nucleus = dataclasses.replace(spec, top_p=0.6)
    assert set(sample_rows(torch, logits, [nucleus] * 4000, keys, [3] * 4000).tolist()) == {0, 1}


def test_gpu_sampler_is_robust_to_float_rounding_of_the_logits() -> None:
    torch = pytest.importorskip("torch")
    from auditlang.engines.gen import _GenSpec, sample_rows

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(300, 49152, generator=g) * 4  # a long tail of tiny probabilities
    spec = _GenSpec(max_tokens=1, temperature=1.0, top_p=1.0, n=1, top_logprobs=0, stop=(), seed=0)
    keys, pos = list(range(300)), [1] * 300
    a = sample_rows(torch, logits, [spec] * 300, keys, pos)
    b = sample_rows(torch, logits + torch.randn(300, 49152, generator=g) * 1e-6, [spec] * 300, keys, pos)
    assert (a != b).sum() <= 1  # batched and unbatched logits differ by ~1e-6: the draws do not


# ----------------------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def sampled(smol):
    reqs = {
        "k3": Request.make("smol", "generate", SEA, seed=7, max_tokens=8, temperature=1.5, n=3, top_logprobs=5, top_k=3),
        "off": Request.make("smol", "generate", SEA, seed=7, max_tokens=8, temperature=1.5, n=3, top_logprobs=5),
        "off0": Request.make("smol", "generate", SEA, seed=7, max_tokens=8, temperature=1.5, n=3, top_logprobs=5, top_k=0),
        "k1": Request.make("smol", "generate", SEA, seed=7, max_tokens=8, temperature=1.0, top_k=1),
        "greedy": Request.make("smol", "generate", SEA, seed=7, max_tokens=8),
        "bad": Request.make("smol", "generate", SEA, seed=7, max_tokens=8, temperature=1.0, top_k=-5),
    }
    out = {r.request_id: r for r in smol.run(list(reqs.values()))}
    return {name: out[q.id] for name, q in reqs.items()}


def _ranks(result) -> list[int]:
    """Rank (0 = best) of each sampled token among its position's raw top-5 window."""
    return [sum(v > t.logprob + 1e-6 for v in t.top.values()) for s in result.samples for t in s.tokens]


@pytest.mark.slow
def test_hf_top_k_samples_stay_within_the_k_best(sampled) -> None:
    k3, off = sampled["k3"], sampled["off"]
    assert k3.error is None and len(k3.samples) == 3
    assert max(_ranks(k3)) <= 2  # raw-logit ranks equal temperature-scaled ranks
    assert max(_ranks(off)) > 2, "without top-k this seeded request samples outside the top 3"
    assert [s.text for s in sampled["off0"].samples] == [s.text for s in off.samples]  # 0 = off


@pytest.mark.slow
def test_hf_top_k_one_is_greedy_and_seeded(smol, sampled) -> None:
    assert sampled["k1"].samples[0].text == sampled["greedy"].samples[0].text
    (again,) = smol.run([Request.make("smol", "generate", SEA, seed=7, max_tokens=8, temperature=1.5, n=3,
                                      top_logprobs=5, top_k=3)])
    assert [s.text for s in again.samples] == [s.text for s in sampled["k3"].samples]


@pytest.mark.slow
def test_hf_bad_top_k_fails_alone(sampled) -> None:
    assert "top_k" in sampled["bad"].error and sampled["bad"].samples is None


@pytest.fixture
def think_engines(smol):
    """Two copies of the loaded smol engine with a template reading `enable_thinking`: one
    without chat-template arguments, one with enable_thinking=False."""
    def make(kwargs):
        eng = copy.copy(smol)
        eng.tokenizer = copy.deepcopy(smol.tokenizer)
        eng.tokenizer.chat_template = THINK_TEMPLATE
        eng.config = ModelConfig(name="smol", engine="hf", path="smollm2-135m-instruct", dtype="float32", device="cpu",
                                 batch_size=4, options={"chat_template_kwargs": kwargs} if kwargs else {})
        eng._template_kwargs = chat_template_kwargs(eng.config.options, "smol")
        eng._fingerprint = None
        eng._token_str = {}
        return eng
    return make({}), make({"enable_thinking": False})


@pytest.mark.slow
def test_hf_chat_template_kwargs_reach_the_template(think_engines) -> None:
    plain, nothink = think_engines
    assert plain.render_prompt(SEA) == "<|user|>Write one sentence about the sea.\n<|assistant|>"
    assert nothink.render_prompt(SEA) == "<|user|>Write one sentence about the sea.\n<|assistant|><think>\n\n</think>\n\n"
    assert len(nothink.encode_prompt(SEA)) > len(plain.encode_prompt(SEA))
    req = Request.make("smol", "generate", SEA, max_tokens=2)
    (a,), (b,) = plain.run([req]), nothink.run([req])
    assert b.meta["prompt_tokens"] > a.meta["prompt_tokens"]


@pytest.mark.slow
def test_hf_chat_template_kwargs_are_in_the_fingerprint(smol, think_engines) -> None:
    plain, nothink = think_engines
    assert "chat_template_kwargs" not in smol.fingerprint()  # unset: fingerprints of plain models unchanged
    assert nothink.fingerprint()["chat_template_kwargs"] == {"enable_thinking": False}
    assert plain.fingerprint() != nothink.fingerprint()


@pytest.mark.slow
def test_hf_kwargs_are_passed_to_apply_chat_template(smol, monkeypatch) -> None:
    seen: list[dict] = []
    eng = copy.copy(smol)
    eng._template_kwargs = {"reasoning_effort": "high"}
    real = smol.tokenizer.apply_chat_template

    def spy(msgs, **kw):
        seen.append(kw)
        return real(msgs, **kw)

    monkeypatch.setattr(eng, "tokenizer", copy.copy(smol.tokenizer))
    monkeypatch.setattr(eng.tokenizer, "apply_chat_template", spy)
    eng.render_prompt(SEA)
    eng.render_prompt(Prompt(messages=(*SEA.messages, Message("assistant", "The sea"))))
    assert [k["reasoning_effort"] for k in seen] == ["high", "high"]
    assert seen[1]["continue_final_message"] is True
