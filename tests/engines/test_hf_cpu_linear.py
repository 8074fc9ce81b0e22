"""CPU float32 linears through oneDNN with pre-packed weights (hf option cpu_linear).

The default engine (the session's ``smol`` fixture) packs every linear layer but the output
head; a second engine with ``cpu_linear='torch'`` keeps stock ``F.linear``. Both must give the
same generations and logprobs within float32 summation-order noise, and differ in the
fingerprint's ``cpu_linear`` only."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.core.engine import EngineError, ModelConfig  # noqa: E402
from auditlang.engines.registry import load_engine  # noqa: E402
from auditlang.core.requests import Prompt, Request  # noqa: E402

TOL = 5e-4


def config(**options) -> ModelConfig:
    return ModelConfig(name="smol", engine="hf", path="smollm2-135m-instruct", dtype="float32", device="cpu",
                       batch_size=4, options=options)


@pytest.fixture(scope="module")
def stock(smol):  # smol first: it sets the test cache and threads
    engine = load_engine(config(cpu_linear="torch"))
    yield engine
    engine.close()


def requests() -> list[Request]:
    prompts = [Prompt(text=t) for t in ("Question: What is the capital of France?\nA. Paris\nB. Rome\nAnswer:",
                                        "The tallest mountain on Earth is", "2 + 2 =")]
    out = []
    for p in prompts:
        out.append(Request.make("smol", "generate", p, max_tokens=6, temperature=0.0, top_logprobs=3))
        out.append(Request.make("smol", "choice_logprobs", p, choices=[" A", " B"], top_logprobs=4))
        out.append(Request.make("smol", "continuation_logprobs", p, continuation=" Paris is nice", top_logprobs=2))
        out.append(Request.make("smol", "hidden_states", p, layer=-1))
    return out


def test_default_packs_every_linear_but_the_head(smol, stock) -> None:
    packed = [m for m in smol.model.modules() if type(m).__name__ == "PackedLinear"]
    linear = [m for m in smol.model.modules() if type(m) is torch.nn.Linear]
    assert smol.cpu_linear == "onednn" and stock.cpu_linear == "torch"
    assert len(packed) == 7 * smol.model.config.num_hidden_layers  # q, k, v, o, gate, up, down
    assert linear == [smol.model.get_output_embeddings()]
    assert not any(type(m).__name__ == "PackedLinear" for m in stock.model.modules())
    a, b = smol.fingerprint(), stock.fingerprint()
    assert {k for k in a if a[k] != b.get(k)} == {"cpu_linear"}


def test_same_results_within_float_noise(smol, stock) -> None:
    reqs = requests()
    got = {r.request_id: r for r in smol.run(reqs)}
    ref = {r.request_id: r for r in stock.run(reqs)}
    for req in reqs:
        a, b = got[req.id], ref[req.id]
        assert a.error is None and b.error is None
        if req.kind == "generate":
            assert [t.token_id for t in a.samples[0].tokens] == [t.token_id for t in b.samples[0].tokens]
            for ta, tb in zip(a.samples[0].tokens, b.samples[0].tokens):
                assert ta.logprob == pytest.approx(tb.logprob, abs=TOL)
        elif req.kind == "choice_logprobs":
            assert a.choice_logprobs.keys() == b.choice_logprobs.keys()
            for k in a.choice_logprobs:
                assert a.choice_logprobs[k] == pytest.approx(b.choice_logprobs[k], abs=TOL)
        elif req.kind == "continuation_logprobs":
            assert [t.logprob for t in a.continuation] == pytest.approx([t.logprob for t in b.continuation], abs=TOL)
        else:
            ha, hb = torch.tensor(a.hidden_state), torch.tensor(b.hidden_state)
            assert torch.allclose(ha, hb, rtol=1e-3, atol=1e-3)


def test_bad_value_is_an_engine_error(smol) -> None:
    with pytest.raises(EngineError, match="cpu_linear must be 'onednn' or 'torch'"):
        load_engine(config(cpu_linear="mkl"))
