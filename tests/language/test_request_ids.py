"""Request ids: the planner's fast id path equals the reference hash of the canonical payload."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from auditlang.core.requests import Message, Prompt, Request, RequestMaker, request_hash

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 300), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=6))
_values = st.one_of(_scalars, st.lists(st.text(max_size=4), max_size=4), st.dictionaries(st.text(max_size=3), _scalars,
                                                                                       max_size=3))
_params = st.dictionaries(st.sampled_from(["max_tokens", "temperature", "top_p", "n", "top_logprobs", "stop", "choices",
                                           "first_top_logprobs", "extra"]), _values, max_size=5)


def _reference(r: Request) -> str:
    return request_hash(r.model, r.kind, r.prompt, dict(r.params), r.seed)


@settings(max_examples=300, deadline=None)
@given(params=_params, seed=st.one_of(st.integers(-3, 10**12), st.booleans()), text=st.text(max_size=20),
       model=st.text(min_size=1, max_size=8), chat=st.booleans())
def test_fast_id_equals_reference_hash(params, seed, text, model, chat):
    prompt = Prompt(messages=(Message("user", text),)) if chat else Prompt(text=text)
    r = Request.make(model, "generate", prompt, seed=seed, **params)
    assert r.id == _reference(r)
    made = RequestMaker(model, "generate", seed=seed, **params)(prompt)  # the planner's per-unit maker
    assert made == r and made.id == r.id


def test_numeric_types_are_not_conflated():
    """1, 1.0 and True are equal as dict keys but encode differently: three different ids."""
    p = Prompt(text="q")
    ids = {Request.make("m", "generate", p, max_tokens=v).id for v in (1, 1.0, True)}
    assert len(ids) == 3
    for v in (1, 1.0, True, 0.0, 0):
        r = Request.make("m", "generate", p, temperature=v, max_tokens=4)
        assert r.id == _reference(r)


def test_known_id_is_stable():
    """An id computed before the fast path existed (plans and journals key results by it)."""
    r = Request.make("smol", "generate", Prompt(text="Q: 2+2?\nA:"), seed=42, max_tokens=8, temperature=0.0,
                     top_logprobs=0)
    assert r.id == _reference(r)
    assert r.id == KNOWN


KNOWN = "r3d417bdc29cbd63c0355"  # from main at dffc522 (request_hash only)
