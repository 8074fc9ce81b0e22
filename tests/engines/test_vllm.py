"""The vLLM offline engine on the real SmolLM2-135M-Instruct (float32, eager), against the hf engine.

Runs only where vLLM is installed (the separate venv of scripts/setup_vllm_cpu.sh); elsewhere
every engine test is skipped with that reason. One vLLM engine for the module (module scope:
it is freed before test_openai.py starts its server, keeping peak memory to one vLLM at a
time); all requests run in one ``run()`` call and the tests inspect its results.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.requests import Message, Prompt, Request, Result

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed here; run in the vLLM venv (scripts/setup_vllm_cpu.sh)")
pytestmark = pytest.mark.vllm

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
LETTERS = "ABCDE"
TOL = 1e-3  # fp32 vLLM vs fp32 transformers: notes/models.md saw agreement to 4 decimals
N_ITEMS = 4


def _arc_items() -> list[dict[str, Any]]:
    path = SHARED_DATA / "arc_challenge.jsonl"
    if not path.is_file():
        pytest.skip(f"shared data not found at {path}")
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(N_ITEMS), f)]
    return rows


def _question(row: dict[str, Any]) -> str:
    opts = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(row["choices"]))
    return f"{row['question']}\n{opts}\nAnswer with the letter only."


def _chat(row: dict[str, Any]) -> Prompt:
    return Prompt(messages=(Message("user", _question(row)),))


def _labels(row: dict[str, Any]) -> list[str]:
    return list(LETTERS[: len(row["choices"])])


def _build_requests() -> dict[str, list[Request]]:
    rows = _arc_items()
    raw = Prompt(text="Question: What is the capital of France?\nAnswer:")
    prefill = Prompt(messages=(Message("user", _question(rows[0])), Message("assistant", "The answer is")))
    return {
        "choice": [Request.make("m", "choice_logprobs", _chat(r), choices=_labels(r), top_logprobs=5) for r in rows]
        + [Request.make("m", "choice_logprobs", raw, choices=[" Paris", " London"], top_logprobs=3)],
        "cont": [Request.make("m", "continuation_logprobs", _chat(r), continuation=f"{r['answer']}", top_logprobs=2) for r in rows[:3]]
        + [Request.make("m", "continuation_logprobs", _chat(rows[0]), continuation=_labels(rows[0])[rows[0]["answer_index"]])]
        + [Request.make("m", "continuation_logprobs", raw, continuation=" Paris")],
        "greedy": [Request.make("m", "generate", _chat(r), max_tokens=8, top_logprobs=3) for r in rows[:3]]
        + [Request.make("m", "generate", raw, max_tokens=6, n=2)],
        "prefill": [Request.make("m", "generate", prefill, max_tokens=6)],
        "sampled": [Request.make("m", "generate", _chat(rows[0]), seed=11, max_tokens=6, temperature=1.0, n=3, top_logprobs=2),
                    Request.make("m", "generate", _chat(rows[0]), seed=11, max_tokens=6, temperature=1.0, n=2, top_logprobs=2)],
        "topk": [Request.make("m", "generate", _chat(rows[1]), seed=7, max_tokens=8, temperature=1.5, n=3, top_logprobs=5, top_k=3),
                 Request.make("m", "generate", _chat(rows[1]), seed=7, max_tokens=8, temperature=1.0, top_k=1),
                 Request.make("m", "generate", _chat(rows[1]), seed=7, max_tokens=8),
                 Request.make("m", "generate", _chat(rows[1]), seed=7, max_tokens=8, temperature=1.0, top_k=-4)],
        "first": [Request.make("m", "generate", _chat(r), max_tokens=5, top_logprobs=2, first_top_logprobs=20) for r in rows[:3]],
        "first_ref": [Request.make("m", "generate", _chat(r), max_tokens=5, top_logprobs=20) for r in rows[:3]],
        "constrained": [Request.make("m", "constrained_choice", _chat(r), choices=_labels(r)) for r in rows]
        + [Request.make("m", "constrained_choice", raw, choices=[" Paris", " London", " Berlin"])],
        "hidden": [Request.make("m", "hidden_states", _chat(r)) for r in rows[:2]],
        "bad": [
            Request.make("m", "hidden_states", _chat(rows[0]), layer=3),
            Request.make("m", "generate", _chat(rows[0]), max_tokens=4, top_logprobs=10_000),
            Request.make("m", "generate", _chat(rows[0])),  # max_tokens missing
            Request.make("m", "choice_logprobs", _chat(rows[0]), choices=["A", "A"]),
            Request.make("m", "generate", Prompt(text="word " * 9000), max_tokens=2),
        ],
    }


@pytest.fixture(scope="module")
def vllm_engine(cache_dir: Path):
    if not HAS_VLLM:
        pytest.skip("vLLM is not installed here; run in the vLLM venv (scripts/setup_vllm_cpu.sh)")
    from auditlang.engines.registry import load_engine

    engine = load_engine(ModelConfig(name="m", engine="vllm", path="smollm2-135m-instruct", dtype="float32",
                                     options={"max_logprobs": 64}))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def requests_() -> dict[str, list[Request]]:
    return _build_requests()


@pytest.fixture(scope="module")
def vllm_results(vllm_engine, requests_) -> dict[str, Result]:
    all_reqs = [r for group in requests_.values() for r in group]
    out = {r.request_id: r for r in vllm_engine.run(all_reqs)}
    assert set(out) == {r.id for r in all_reqs}
    return out


@pytest.fixture(scope="module")
def hf_results(smol, requests_) -> dict[str, Result]:
    reqs = requests_["choice"] + requests_["cont"] + requests_["greedy"] + requests_["hidden"]
    return {r.request_id: r for r in smol.run(reqs)}


def _ok(results: dict[str, Result], req: Request) -> Result:
    r = results[req.id]
    assert r.error is None, r.error
    return r


@needs_vllm
def test_capabilities_and_fingerprint(vllm_engine) -> None:
    import vllm

    assert vllm_engine.capabilities() == {"generate", "choice_logprobs", "continuation_logprobs", "constrained_choice", "hidden_states"}
    fp = vllm_engine.fingerprint()
    assert fp["engine"] == "vllm" and fp["vllm"] == vllm.__version__
    assert fp["model_runner"] in ("v1", "v2") and fp["dtype"] == "float32"
    assert fp["prefix_caching"] is False and fp["logprobs_mode"] == "raw_logprobs"
    assert fp["embedded"]["gguf_sha256"] == fp["weights_sha256"]
    json.dumps(fp)  # the store hashes it


@needs_vllm
def test_choice_logprobs_equal_hf(vllm_results, hf_results, requests_) -> None:
    for req in requests_["choice"]:
        v, h = _ok(vllm_results, req), _ok(hf_results, req)
        assert v.meta["label_token_ids"] == h.meta["label_token_ids"]
        assert v.choice_logprobs.keys() == h.choice_logprobs.keys()
        for label, lp in v.choice_logprobs.items():
            assert lp == pytest.approx(h.choice_logprobs[label], abs=TOL), label
        assert list(v.top_logprobs) == list(h.top_logprobs)
        for tok, lp in v.top_logprobs.items():
            assert lp == pytest.approx(h.top_logprobs[tok], abs=TOL)


@needs_vllm
def test_choice_logprobs_are_full_vocabulary(vllm_results, requests_) -> None:
    """The label values (logprob_token_ids call) equal the same tokens in the top-k window (a
    separate logprobs=k call): both are raw full-vocabulary logprobs of one distribution."""
    seen_in_window = 0
    for req in requests_["choice"]:
        r = _ok(vllm_results, req)
        k = req.p["top_logprobs"]
        assert len(r.top_logprobs) == k
        assert list(r.top_logprobs.values()) == sorted(r.top_logprobs.values(), reverse=True)
        assert math.fsum(math.exp(v) for v in r.top_logprobs.values()) <= 1.0 + 1e-6
        for label, lp in r.choice_logprobs.items():
            assert lp < 0.0
            if label in r.top_logprobs:
                seen_in_window += 1
                assert lp == pytest.approx(r.top_logprobs[label], abs=1e-5)
    assert seen_in_window >= N_ITEMS  # the letters are among SmolLM2's top-5 after these prompts


@needs_vllm
def test_continuation_logprobs_equal_hf(vllm_results, hf_results, vllm_engine, requests_) -> None:
    from auditlang.engines.hf import label_token_ids

    for req in requests_["cont"]:
        v, h = _ok(vllm_results, req), _ok(hf_results, req)
        assert [t.token_id for t in v.continuation] == label_token_ids(vllm_engine.tokenizer, req.p["continuation"])
        assert [t.token_id for t in v.continuation] == [t.token_id for t in h.continuation]
        for tv, th in zip(v.continuation, h.continuation):
            assert tv.logprob == pytest.approx(th.logprob, abs=TOL)
            assert tv.token == th.token
        assert v.meta["sum_logprob"] == pytest.approx(h.meta["sum_logprob"], abs=TOL)
        k = req.p.get("top_logprobs", 0)
        assert all(len(t.top) == k for t in v.continuation)


@needs_vllm
def test_teacher_forcing_agrees_with_next_token_scoring(vllm_results, requests_) -> None:
    """prompt_logprobs of the gold letter == logprob_token_ids of that letter after the same prompt."""
    choice = _ok(vllm_results, requests_["choice"][0])
    cont_req = requests_["cont"][3]
    cont = _ok(vllm_results, cont_req)
    (tok,) = cont.continuation
    assert tok.logprob == pytest.approx(choice.choice_logprobs[cont_req.p["continuation"]], abs=1e-4)


@needs_vllm
def test_greedy_generation_equals_hf(vllm_results, hf_results, requests_) -> None:
    for req in requests_["greedy"]:
        v, h = _ok(vllm_results, req), _ok(hf_results, req)
        assert len(v.samples) == req.p.get("n", 1)
        for sv, sh in zip(v.samples, h.samples):
            assert sv.text == sh.text
            assert sv.finish_reason == sh.finish_reason
            assert [t.token_id for t in sv.tokens] == [t.token_id for t in sh.tokens]
            for tv, th in zip(sv.tokens, sh.tokens):
                assert tv.logprob == pytest.approx(th.logprob, abs=TOL)
                assert list(tv.top) == list(th.top)
        if req.p.get("n", 1) > 1:  # greedy n>1: identical copies, not aliases
            assert v.samples[0] == v.samples[1] and v.samples[0] is not v.samples[1]


@needs_vllm
def test_assistant_prefill_is_continued(vllm_engine, vllm_results, requests_) -> None:
    req = requests_["prefill"][0]
    ids = vllm_engine.encode_prompt(req.prompt)
    text = vllm_engine.tokenizer.decode(ids)
    assert text.rstrip().endswith("<|im_start|>assistant\nThe answer is")  # left open: no <|im_end|>
    r = _ok(vllm_results, req)
    assert r.samples[0].tokens and r.samples[0].text


@needs_vllm
def test_seeded_sampling_is_reproducible_and_prefix_stable(vllm_engine, vllm_results, requests_) -> None:
    three, two = (_ok(vllm_results, q) for q in requests_["sampled"])
    assert len(three.samples) == 3 and len(two.samples) == 2
    # sample i depends on (seed, i) only, not on n or on the batch it ran in
    assert [s.text for s in three.samples[:2]] == [s.text for s in two.samples]
    (again,) = vllm_engine.run([requests_["sampled"][0]])
    assert [s.text for s in again.samples] == [s.text for s in three.samples]
    for s in three.samples:
        assert all(t.logprob <= 0.0 and len(t.top) == 2 for t in s.tokens)


@needs_vllm
def test_batched_encoding_equals_one_by_one(vllm_engine, requests_) -> None:
    """run() tokenizes all prompts in batched calls, each distinct prompt once; the ids are
    those of encode_prompt, prompt by prompt (raw text with special tokens, chats without)."""
    prompts = [r.prompt for g in ("choice", "cont", "greedy", "prefill") for r in requests_[g]]
    assert vllm_engine.encode_all(prompts) == [vllm_engine.encode_prompt(p) for p in prompts]


@needs_vllm
def test_each_distinct_prompt_is_rendered_once(vllm_engine, requests_, monkeypatch) -> None:
    """Requests of one prompt (an answer, its samples, a window) render its chat template once
    per run() call; the ids are still those of encode_prompt."""
    prompts = [r.prompt for g in ("choice", "greedy") for r in requests_[g]] * 3
    seen: list = []
    render = type(vllm_engine).render_prompt
    monkeypatch.setattr(vllm_engine, "render_prompt", lambda p: seen.append(p) or render(vllm_engine, p))
    out = vllm_engine.encode_all(prompts)
    assert len(seen) == len(set(prompts)) < len(prompts)
    monkeypatch.undo()
    assert out == [vllm_engine.encode_prompt(p) for p in prompts]


@needs_vllm
def test_equal_sampling_params_are_built_once(vllm_engine) -> None:
    """Jobs with equal parameters share one SamplingParams (vLLM clones each request's params
    when it is added, as for ``LLM.generate``'s one shared object); different values or an
    unhashable value (structured outputs) get their own."""
    a = vllm_engine._sp(max_tokens=1, temperature=0.0, logprobs=5, seed=3, stop_token_ids=[1, 2])
    assert vllm_engine._sp(max_tokens=1, temperature=0.0, logprobs=5, seed=3, stop_token_ids=[1, 2]) is a
    assert vllm_engine._sp(max_tokens=1, temperature=0.0, logprobs=5, seed=4, stop_token_ids=[1, 2]) is not a
    assert a.logprobs == 5 and list(a.stop_token_ids) == [1, 2]
    so = vllm_engine._vllm.sampling_params.StructuredOutputsParams(choice=["A", "B"])
    assert vllm_engine._sp(max_tokens=2, structured_outputs=so) is not vllm_engine._sp(max_tokens=2, structured_outputs=so)


@needs_vllm
def test_first_token_window_is_a_one_token_request(vllm_engine, vllm_results, requests_) -> None:
    """Issue 22: a first-token window (``first_top_logprobs``) is not asked on every decoding step
    but served by a one-token request of the same prompt: position 0 carries the wide window
    (equal to a request asking that window on every step), later positions only ``top_logprobs``.
    All of it ran in the same stream as the choice_logprobs requests (label ids run as their own
    phase on Model Runner V1, so the windows are real top-k windows)."""
    for req, ref in zip(requests_["first"], requests_["first_ref"]):
        got, want = _ok(vllm_results, req).samples[0].tokens, _ok(vllm_results, ref).samples[0].tokens
        assert [t.token_id for t in got] == [t.token_id for t in want]
        assert len(got[0].top) == 20 and set(got[0].top) == set(want[0].top)
        assert all(abs(got[0].top[k] - want[0].top[k]) < TOL for k in got[0].top)
        assert all(len(t.top) <= 2 for t in got[1:])
        assert all(abs(a.logprob - b.logprob) < TOL for a, b in zip(got, want))


@needs_vllm
def test_constrained_choice(vllm_results, requests_) -> None:
    for req in requests_["constrained"]:
        v = _ok(vllm_results, req)
        assert v.choice in req.p["choices"]
    # single-token letters: greedy under the grammar == argmax of the unconstrained label logprobs
    for creq, qreq in zip(requests_["constrained"][:N_ITEMS], requests_["choice"][:N_ITEMS]):
        lps = _ok(vllm_results, qreq).choice_logprobs
        assert _ok(vllm_results, creq).choice == max(lps, key=lps.__getitem__)


@needs_vllm
def test_hidden_states_equal_hf_last_layer(vllm_results, hf_results, requests_) -> None:
    for req in requests_["hidden"]:
        v, h = _ok(vllm_results, req), _ok(hf_results, req)
        assert len(v.hidden_state) == len(h.hidden_state) == 576  # SmolLM2-135M hidden size
        assert v.meta["layer"] == h.meta["layer"] == 30
        assert max(abs(a - b) for a, b in zip(v.hidden_state, h.hidden_state)) < 1e-2
        dot = sum(a * b for a, b in zip(v.hidden_state, h.hidden_state))
        norm = math.sqrt(sum(a * a for a in v.hidden_state) * sum(b * b for b in h.hidden_state))
        assert dot / norm > 0.99999


@needs_vllm
def test_bad_requests_fail_alone(vllm_results, requests_) -> None:
    layer, big_k, no_max, dup, too_long = (vllm_results[r.id] for r in requests_["bad"])
    assert "hf engine" in layer.error
    assert "max_logprobs" in big_k.error
    assert "max_tokens" in no_max.error
    assert "duplicate" in dup.error
    assert "max_model_len" in too_long.error
    assert all(r.samples is None and r.choice_logprobs is None for r in (layer, big_k, no_max, dup, too_long))


@needs_vllm
def test_chat_messages_for_base_model_raise(vllm_engine, requests_) -> None:
    base = copy.copy(vllm_engine)
    base.config = ModelConfig(name="m", engine="vllm", path="smollm2-135m-instruct", chat=False)
    with pytest.raises(EngineError, match="chat is off"):
        base.run(requests_["choice"][:1])


@needs_vllm
def test_sampling_top_k(vllm_results, requests_) -> None:
    k3, k1, greedy, bad = (vllm_results[r.id] for r in requests_["topk"])
    assert k3.error is None and len(k3.samples) == 3
    # every sampled token is among the 3 best of its position (raw-logit ranks = scaled ranks)
    ranks = [sum(v > t.logprob + 1e-6 for v in t.top.values()) for s in k3.samples for t in s.tokens]
    assert ranks and max(ranks) <= 2
    assert _ok(vllm_results, requests_["topk"][1]).samples[0].text == greedy.samples[0].text  # top_k=1 = argmax
    assert "top_k" in bad.error and bad.samples is None


@needs_vllm
def test_chat_template_kwargs_reach_the_template(vllm_engine) -> None:
    seen: list[dict] = []
    eng = copy.copy(vllm_engine)
    eng._template_kwargs = {"enable_thinking": False}
    eng._fingerprint = None
    tok = vllm_engine.tokenizer

    class Spy:
        def __getattr__(self, name):
            return getattr(tok, name)

        def apply_chat_template(self, msgs, **kw):
            seen.append(kw)
            return tok.apply_chat_template(msgs, **kw)

    eng.tokenizer = Spy()
    prompt = _chat(_arc_items()[0])
    assert eng.render_prompt(prompt) == vllm_engine.render_prompt(prompt)  # SmolLM2's template ignores it
    assert seen[-1]["enable_thinking"] is False
    assert eng.fingerprint()["chat_template_kwargs"] == {"enable_thinking": False}
    assert "chat_template_kwargs" not in vllm_engine.fingerprint()


def test_bad_chat_template_kwargs_are_rejected() -> None:
    from auditlang.engines.vllm_engine import VLLMEngine

    with pytest.raises(EngineError, match="set by the engine"):
        VLLMEngine(ModelConfig(name="m", engine="vllm", path="x", options={"chat_template_kwargs": {"tools": "x"}}))


def test_unknown_option_is_rejected() -> None:
    from auditlang.engines.vllm_engine import VLLMEngine

    with pytest.raises(EngineError, match="unknown vllm option") as e:
        VLLMEngine(ModelConfig(name="m", engine="vllm", path="x", options={"kv_cache": 2}))
    assert "kv_cache_gib" in (e.value.hint or "")


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed: the missing-package path cannot occur")
def test_missing_vllm_names_the_install() -> None:
    from auditlang.engines.vllm_engine import VLLMEngine

    with pytest.raises(EngineError, match="needs vLLM") as e:
        VLLMEngine(ModelConfig(name="m", engine="vllm", path="smollm2-135m-instruct"))
    assert "auditlang[vllm]" in e.value.hint and "setup_vllm_cpu.sh" in e.value.hint


_CLOSE_SCRIPT = """
import os
import threading
from auditlang.core.engine import ModelConfig
from auditlang.core.workers import fork_workers
from auditlang.core.requests import Prompt, Request
from auditlang.engines import vllm_release
from auditlang.engines.registry import load_engine

if __name__ == "__main__":  # vLLM spawns its engine core
    os.environ["AUDITLANG_SCORE_WORKERS"] = "2"
    engine = load_engine(ModelConfig(name="m", engine="vllm", path="smollm2-135m-instruct", dtype="float32",
                                     options={"in_process": False}))
    procs = list(engine.llm.llm_engine.engine_core.resources.engine_manager.processes)
    assert procs and all(p.is_alive() for p in procs)
    [res] = engine.run([Request.make("m", "generate", Prompt(text="The capital of France is"), max_tokens=2)])
    assert res.error is None and res.samples[0].text, res
    engine.close()
    assert vllm_release._EXITING == procs, "signalled, not waited for"
    # vLLM's client threads are gone, so scoring may fork its workers (a tqdm monitor is stopped there)
    assert fork_workers("AUDITLANG_SCORE_WORKERS", 4, min_cpus=1, cap=2) == 2, threading.enumerate()
    load_engine(ModelConfig(name="d", engine="dryrun", path="x"))
    assert vllm_release._EXITING == [] and all(p.exitcode is not None for p in procs)
    assert all(p.exitcode == -9 for p in procs), [p.exitcode for p in procs]  # world size 1: killed
    print("CLOSE-OK")
"""


@needs_vllm
def test_close_leaves_the_engine_core_exiting_and_the_next_load_reaps_it(tmp_path: Path) -> None:
    """A multiprocess engine core of world size 1 gets SIGKILL at close, after the client side is
    down, and is not waited for (vLLM's own shutdown waits ~5 s for a SIGTERM'd core); close stops
    the client's threads, vLLM's liveness monitor included (woken by the exit), so scoring may fork
    workers, and the next engine load reaps the process, so the GPU memory is back before it
    starts; vLLM logs no unexpected engine death. In a fresh interpreter: this module's in-process
    engine fixes vLLM's (cached) settings here."""
    import os
    import subprocess
    import sys

    script = tmp_path / "close_script.py"
    script.write_text(_CLOSE_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0 and "CLOSE-OK" in proc.stdout, proc.stderr[-4000:]
    assert "unexpectedly" not in proc.stderr, proc.stderr[-4000:]


_LOCAL_HASH_SCRIPT = """
import json, os, sys
from auditlang.core.engine import ModelConfig
from auditlang.core.requests import Prompt, Request
from auditlang.engines import embedded, weight_hash
from auditlang.engines.hf import resolve_model
from auditlang.engines.registry import load_engine

if __name__ == "__main__":  # vLLM may spawn its engine core
    d = embedded.resolve_embedded("smollm2-135m-instruct")  # its converted checkpoint, as a local directory
    started = []
    real = weight_hash.WeightHash.__init__
    def init(self, resolved):
        real(self, resolved)
        started.append(self.child)
    weight_hash.WeightHash.__init__ = init
    cfg = ModelConfig(name="m", engine="vllm", path=str(d), dtype="float32", options={"in_process": False})
    engine = load_engine(cfg)
    assert len(started) == 1 and started[0] is not None and started[0].pid != os.getpid(), started
    [res] = engine.run([Request.make("m", "generate", Prompt(text="The capital of France is"), max_tokens=2)])
    assert res.error is None and res.samples[0].text, res
    fp = engine.fingerprint()
    assert started[0].returncode == 0
    engine.close()
    os.remove(os.path.join(os.environ["AUDITLANG_CACHE"], "file-sha256.json"))
    assert fp["source"] == "local" and fp["weights_sha256"] == weight_hash.weights_sha256(resolve_model(cfg))
    print("HASH-OK", fp["weights_sha256"])
"""


@needs_vllm
def test_a_local_checkpoint_hashes_in_a_child_beside_a_real_engine_start(tmp_path: Path, cache_dir: Path) -> None:
    """A checkpoint directory on the real vLLM with its engine core in its own process (forked
    while the weight-hash child runs): the child's hash is the fingerprint's, equal to hashing here,
    and the engine answers. In a fresh interpreter, with the hash cache emptied."""
    import os
    import subprocess
    import sys

    from auditlang.engines import embedded

    embedded.resolve_embedded("smollm2-135m-instruct")  # converted once into the test cache
    (cache_dir / "file-sha256.json").unlink(missing_ok=True)  # not hashed yet on this machine
    script = tmp_path / "local_hash_script.py"
    script.write_text(_LOCAL_HASH_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    env["AUDITLANG_CACHE"] = str(cache_dir)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0 and "HASH-OK" in proc.stdout, proc.stderr[-4000:]


def test_vllm_keeps_a_triton_cache_folder_set_before_it_compiles(monkeypatch, tmp_path) -> None:
    """What the engine's pinned ``TRITON_CACHE_DIR`` relies on: vLLM's compile path that sets the
    folder treats one already set as the caller's and keeps it (checked on the installed vLLM)."""
    import os

    ci = pytest.importorskip("vllm.compilation.compiler_interface")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "pinned"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-before"))
    for name in ("InductorAdaptor", "InductorStandaloneAdaptor"):
        adaptor = getattr(ci, name, None)
        if adaptor is None:
            continue
        obj = adaptor.__new__(adaptor)
        obj.initialize_cache(str(tmp_path / "model" / "backbone"), disable_cache=False, prefix="backbone")
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "pinned"), name


@needs_vllm
def test_followups_added_to_the_feed_join_the_running_stream(vllm_engine, requests_) -> None:
    """Issue 22: the executor adds each answer's follow-ups to the engine's Feed as results arrive
    (stage 2 beside stage 1). Every request, initial or added, gets exactly one Result from the one
    ``run`` call; a top-k window added while answers decode runs after them (its own phase); a
    request that fails at once (too long) is an error, not an answer."""
    from auditlang.core.engine import Feed

    answers = requests_["greedy"][:3] + requests_["first"]
    first = answers + [requests_["bad"][4]]
    refills = []
    feed = Feed(first, refill=lambda: refills.append(1))
    added: list[Request] = []
    results: dict[str, Result] = {}
    for res in vllm_engine.run(feed):
        assert res.request_id not in results
        results[res.request_id] = res
        if res.request_id in {r.id for r in answers} and res.error is None:
            text = res.samples[0].text
            new = [Request.make("m", "generate", Prompt(text=f"Answer: {text}\nConfidence (0-1):"), max_tokens=4),
                   Request.make("m", "generate", Prompt(text=f"Answer: {text}\nIs it right?"), max_tokens=3,
                                top_logprobs=1, first_top_logprobs=20),
                   Request.make("m", "constrained_choice", Prompt(text=f"Answer: {text}\nRight or wrong?"),
                                choices=[" right", " wrong"])]
            added += new
            feed.add(new)
    assert len(added) == 3 * len(answers) and refills  # asked for more when idle
    assert set(results) == {r.id for r in first + added}
    assert all(results[r.id].error is None for r in added), [results[r.id].error for r in added]
    assert "context" in (results[requests_["bad"][4].id].error or "")
    window = [results[r.id] for r in added if r.p.get("first_top_logprobs")]
    assert all(len(w.samples[0].tokens[0].top) >= 10 for w in window)


@needs_vllm
def test_vllm_decodes_text_only_for_stop_strings(vllm_engine, requests_) -> None:
    """The engine decodes answers itself (``_sample``: one decode of all ids, as hf), so vLLM's
    incremental detokenizer, a main-process cost per generated token, runs only for requests with
    stop strings, which need it; the text is the same either way."""
    req = requests_["greedy"][0]
    plain = vllm_engine._build_generate(req, vllm_engine.encode_prompt(req.prompt))
    assert plain.jobs[0].params.detokenize is False
    stop = Request.make("m", "generate", req.prompt, max_tokens=8, top_logprobs=3, stop=["\n\n"])
    assert vllm_engine._build_generate(stop, vllm_engine.encode_prompt(stop.prompt)).jobs[0].params.detokenize is True
    a, b = (next(iter(vllm_engine.run([r]))) for r in (req, stop))
    assert a.error is None and b.error is None
    assert b.samples[0].text == a.samples[0].text.split("\n\n")[0]
    assert [t.token for t in a.samples[0].tokens] == [t.token for t in b.samples[0].tokens][: len(a.samples[0].tokens)]
