"""A one-token top-k call folded into the greedy answer generation (issue 16, item 2).

The folded request (the answer generation with ``first_top_logprobs=k``) must give, at its first
position, the same greedy token and the same top-k window as the dedicated one-token call it
replaces, and the requested window (``top_logprobs``) everywhere else.
"""

from __future__ import annotations

from auditlang.core.requests import Message, Prompt, Request

QUESTIONS = [
    "Which planet is known as the Red Planet?\nA. Venus\nB. Mars\nC. Jupiter\nD. Saturn\nAnswer with the letter only.",
    "What is 7 times 8?\nA. 54\nB. 56\nC. 64\nD. 48\nAnswer with the letter only.",
    "Which gas do plants absorb from the air?\nA. Oxygen\nB. Nitrogen\nC. Carbon dioxide\nD. Helium\nAnswer with the letter.",
]


def test_folded_first_window_equals_the_dedicated_call(smol) -> None:
    prompts = [Prompt(messages=(Message("user", q),)) for q in QUESTIONS]
    dedicated = [Request.make("m", "generate", p, seed=1, max_tokens=1, temperature=0.0, top_logprobs=20) for p in prompts]
    folded = [Request.make("m", "generate", p, seed=1, max_tokens=12, temperature=0.0, top_logprobs=0,
                           first_top_logprobs=20) for p in prompts]
    got = {r.request_id: r for r in smol.run(dedicated + folded)}
    for d, f in zip(dedicated, folded):
        a, b = got[d.id].samples[0], got[f.id].samples[0]
        assert a.tokens[0].token == b.tokens[0].token
        assert len(b.tokens[0].top) == 20
        assert set(a.tokens[0].top) == set(b.tokens[0].top)
        for tok, lp in a.tokens[0].top.items():
            assert abs(lp - b.tokens[0].top[tok]) < 1e-4
        assert all(t.top == {} for t in b.tokens[1:])  # top_logprobs=0 after the first position
