"""Dry-run engine: counts requests and estimates tokens (chars/4) without running a model."""

from __future__ import annotations

from auditlang.core.engine import ModelConfig
from auditlang.engines.dryrun import DryRunEngine, estimate_prompt_tokens, estimate_text_tokens, estimate_tokens
from auditlang.core.requests import Message, Prompt, Request


def test_text_estimate_is_ceil_chars_over_4():
    assert [estimate_text_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_prompt_estimates():
    assert estimate_prompt_tokens(Prompt(text="abcdefgh")) == 2
    chat = Prompt(messages=(Message("system", "abcd"), Message("user", "abcdefgh")))
    assert estimate_prompt_tokens(chat) == (1 + 4) + (2 + 4) + 3  # + generation prompt
    prefill = Prompt(messages=(Message("user", "abcd"), Message("assistant", "ab")))
    assert estimate_prompt_tokens(prefill) == (1 + 4) + (1 + 4)  # continued: no generation prompt


def test_estimates_by_kind():
    p = Prompt(text="x" * 40)  # 10 tokens
    assert estimate_tokens(Request.make("m", "generate", p, max_tokens=32, n=5)) == (10, 160)
    assert estimate_tokens(Request.make("m", "generate", p, max_tokens=32)) == (10, 32)
    assert estimate_tokens(Request.make("m", "choice_logprobs", p, choices=["A", "B"])) == (10, 0)
    assert estimate_tokens(Request.make("m", "continuation_logprobs", p, continuation="y" * 8)) == (12, 0)
    assert estimate_tokens(Request.make("m", "constrained_choice", p, choices=["A", "y" * 12])) == (10, 3)
    assert estimate_tokens(Request.make("m", "hidden_states", p)) == (10, 0)


def test_engine_counts_and_never_fails():
    e = DryRunEngine(ModelConfig(name="m", engine="dryrun", path="some/model"))
    p = Prompt(text="x" * 40)
    reqs = [
        Request.make("m", "generate", p, max_tokens=8, n=2),
        Request.make("m", "choice_logprobs", p, choices=["A"]),
        Request.make("m", "choice_logprobs", Prompt(text="y" * 4), choices=["A"]),
        Request.make("m", "generate", p),  # missing max_tokens -> error result, not an exception
    ]
    out = {r.request_id: r for r in e.run(reqs)}
    assert len(out) == 4
    assert out[reqs[3].id].error and "max_tokens" in out[reqs[3].id].error
    ok = [out[r.id] for r in reqs[:3]]
    assert all(r.error is None and r.samples is None and r.choice_logprobs is None and r.meta["dry_run"] for r in ok)
    assert ok[0].meta == {"dry_run": True, "prompt_tokens_est": 10, "max_generated_tokens_est": 16}
    assert e.summary() == {
        "requests": 3, "by_kind": {"choice_logprobs": 2, "generate": 1},
        "prompt_tokens_est": 21, "max_generated_tokens_est": 16,
    }
    assert e.fingerprint()["engine"] == "dryrun"
