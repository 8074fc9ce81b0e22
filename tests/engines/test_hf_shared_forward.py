"""One forward pass per prompt: a choice_logprobs request riding on the first decoding step of
a greedy generation of the same prompt (hf engine, real SmolLM2 in float32), and the executor's
grouping of such requests into the same commit batch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.core.engine import ModelConfig
from auditlang.engines.hf import HFEngine
from auditlang.execute import execute
from auditlang.execute.executor import execution_order
from auditlang.core.requests import REQUEST_KINDS, Message, Prompt, Request, Result
from auditlang.store import Journal

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TOL = 1e-4
LABELS = [" A", " B", " C", " D"]


def short_prompts(n: int) -> list[Prompt]:
    """Raw-text MC prompts of the n shortest 4-choice items among ARC-Challenge's first 40."""
    with (DATA / "arc_challenge.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(40), f)]
    rows = sorted((r for r in rows if len(r["choices"]) == 4), key=lambda r: len(r["question"]) + sum(map(len, r["choices"])))
    return [
        Prompt(text="Question: " + r["question"] + "\n" + "".join(f"{l}. {c}\n" for l, c in zip("ABCD", r["choices"])) + "Answer:")
        for r in rows[:n]
    ]


def choice(p: Prompt, k: int = 5) -> Request:
    return Request.make("smol", "choice_logprobs", p, choices=LABELS, top_logprobs=k)


def greedy(p: Prompt, max_tokens: int = 1) -> Request:
    return Request.make("smol", "generate", p, max_tokens=max_tokens, temperature=0.0, top_logprobs=3)


@contextmanager
def forward_count(engine: HFEngine) -> Iterator[list[int]]:
    """Counts calls of the model's forward (prefill and every decoding step)."""
    calls = [0]
    handle = engine.model.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    try:
        yield calls
    finally:
        handle.remove()


def run(engine: HFEngine, reqs: list[Request]) -> tuple[dict[str, Result], int]:
    with forward_count(engine) as calls:
        out = {r.request_id: r for r in engine.run(reqs)}
    assert set(out) == {r.id for r in reqs} and not any(r.error for r in out.values())
    return out, calls[0]


def assert_same_choice(a: Result, b: Result) -> None:
    assert a.choice_logprobs.keys() == b.choice_logprobs.keys()
    for c in a.choice_logprobs:
        assert a.choice_logprobs[c] == pytest.approx(b.choice_logprobs[c], abs=TOL)
    assert list(a.top_logprobs) == list(b.top_logprobs)
    for t in a.top_logprobs:
        assert a.top_logprobs[t] == pytest.approx(b.top_logprobs[t], abs=TOL)
    assert a.meta == b.meta


def assert_same_generation(a: Result, b: Result) -> None:
    assert a.meta == b.meta
    for sa, sb in zip(a.samples, b.samples, strict=True):
        assert (sa.text, sa.finish_reason) == (sb.text, sb.finish_reason)
        assert [t.token_id for t in sa.tokens] == [t.token_id for t in sb.tokens]
        assert [t.logprob for t in sa.tokens] == pytest.approx([t.logprob for t in sb.tokens], abs=TOL)


@pytest.mark.parametrize("max_tokens", [1, 3])
def test_choice_rides_on_the_greedy_generation_of_its_prompt(smol, max_tokens):
    prompts = short_prompts(3)  # one engine batch (batch_size 4)
    choices, gens = [choice(p) for p in prompts], [greedy(p, max_tokens) for p in prompts]
    shared, n_shared = run(smol, gens + choices)
    alone_c, n_c = run(smol, choices)
    alone_g, n_g = run(smol, gens)
    assert n_c == 1 and n_shared == n_g  # the choice requests cost no forward of their own
    if max_tokens == 1:
        assert n_shared == 1
    for r in choices:
        assert_same_choice(shared[r.id], alone_c[r.id])
    for r in gens:
        assert_same_generation(shared[r.id], alone_g[r.id])
        # the greedy token is the top of the choice request's window
        first = shared[r.id].samples[0].tokens[0]
        top_token = next(iter(shared[choices[gens.index(r)].id].top_logprobs))
        assert smol.token_str(first.token_id) == top_token


def test_a_sampled_generation_of_the_same_prompt_carries_the_choice_too(smol):
    """The prefill's log-softmax is raw (no temperature), so a choice request rides on any
    generate request of its prompt, greedy or sampled."""
    p, q = short_prompts(2)
    sampled = Request.make("smol", "generate", p, max_tokens=1, temperature=0.7, seed=3)
    other_prompt = greedy(q)
    out, n = run(smol, [choice(p), sampled, other_prompt])
    assert n == 1  # one prefill of both prompts (1-token budgets end there); no choice forward
    alone, _ = run(smol, [choice(p)])
    assert_same_choice(out[choice(p).id], alone[choice(p).id])
    alone_s, _ = run(smol, [sampled])
    assert_same_generation(out[sampled.id], alone_s[sampled.id])
    assert smol.sort_key(sampled) == smol.sort_key(greedy(p)) == smol.sort_key(choice(p)) != smol.sort_key(choice(q))


def test_a_failed_generation_batch_leaves_its_choice_rider_to_its_own_forward(smol, monkeypatch):
    p = short_prompts(1)[0]

    def boom(*_: Any, **__: Any) -> dict[int, Any]:
        raise RuntimeError("generation failed")

    alone, _ = run(smol, [choice(p)])
    monkeypatch.setattr(smol, "_generate_batch", boom)
    out = {r.request_id: r for r in smol.run([greedy(p), choice(p)])}
    assert "generation failed" in out[greedy(p).id].error
    assert out[choice(p).id].error is None
    assert_same_choice(out[choice(p).id], alone[choice(p).id])


class _GroupingEngine:
    """An engine double that records commit batches; with ``hf_order`` it uses the hf hook."""

    def __init__(self, hf_order: bool) -> None:
        self.config = ModelConfig(name="smol", engine="fake", path="x", batch_size=2)
        self.batches: list[list[str]] = []
        if hf_order:
            self.sort_key = lambda r: HFEngine.sort_key(self, r)  # type: ignore[arg-type]

    def capabilities(self) -> frozenset[str]:
        return frozenset(REQUEST_KINDS)

    def fingerprint(self) -> dict[str, Any]:
        return {"engine": "fake"}

    def run(self, requests: Any) -> Iterator[Result]:
        reqs = list(requests)
        self.batches.append([r.id for r in reqs])
        for r in reqs:
            yield Result(request_id=r.id, kind=r.kind, error="not computed")

    def close(self) -> None:
        pass


def test_executor_puts_requests_of_one_prompt_in_one_commit_batch_shortest_first(tmp_path):
    # prompts of decreasing length, plus a chat prompt of middle length
    p = [Prompt(text="question " + "x" * (30 - 10 * i) + "\nAnswer:") for i in range(3)]
    chat = Prompt(messages=(Message("user", "y" * 32),))  # 27 < 32 < 37 characters
    cont = Request.make("smol", "continuation_logprobs", p[0], continuation=" A")
    sampled = Request.make("smol", "generate", p[1], max_tokens=2, temperature=1.0, seed=1)
    plan = [greedy(x) for x in p] + [cont] + [choice(x) for x in p] + [sampled, choice(chat), greedy(chat)]
    ids = lambda rs: [r.id for r in rs]  # noqa: E731
    # "choice_logprobs+generate" (greedy or sampled) sorts before "continuation_logprobs"; then by
    # length, plan order within a prompt
    grouped = [greedy(p[2]), choice(p[2]), choice(chat), greedy(chat), greedy(p[1]), choice(p[1]), sampled,
               greedy(p[0]), choice(p[0]), cont]
    by_kind = [choice(x) for x in p] + [choice(chat), cont] + [greedy(x) for x in p] + [sampled, greedy(chat)]
    hf_like, plain = _GroupingEngine(True), _GroupingEngine(False)
    assert ids(execution_order(hf_like, plan)) == ids(grouped)
    assert ids(execution_order(plain, plan)) == ids(by_kind)  # default: sorted by kind, plan order within
    with Journal(tmp_path / "run") as j:
        execute(hf_like, plan, j, batch_size=2, progress=False)
    # commit batches of 2, except that one prompt's requests stay together (p[1]'s three)
    cuts = [(0, 2), (2, 4), (4, 7), (7, 9), (9, 10)]
    assert hf_like.batches == [ids(grouped[i:j]) for i, j in cuts]


def test_execute_serves_a_token_confidence_audit_with_one_forward_per_prompt(smol, tmp_path):
    prompts = short_prompts(3)
    plan = [r for p in prompts for r in (greedy(p), choice(p))]
    with forward_count(smol) as calls, Journal(tmp_path / "run") as j:
        stats = execute(smol, plan, j, progress=False)
    assert stats.executed == 6 and stats.errors == 0
    assert calls[0] == 1


def test_a_commit_batch_grows_to_keep_one_prompt_together_at_most_twice_its_size(tmp_path):
    p = Prompt(text="Question: 1+1?\nAnswer:")
    q = Prompt(text=p.text + " Think first.")  # longer: sorts after p
    same = [Request.make("smol", "generate", p, max_tokens=m, temperature=0.0) for m in range(1, 6)] + [greedy(q)]
    hf_like = _GroupingEngine(True)
    with Journal(tmp_path / "run") as j:
        execute(hf_like, same, j, batch_size=2, progress=False)
    # p's five requests: the first batch grows from 2 to 4 (twice batch_size), the fifth goes on
    assert hf_like.batches == [[r.id for r in same[:4]], [same[4].id, same[5].id]]
