"""The OpenAI-compatible engine against a real server: vLLM's ``vllm serve`` on 127.0.0.1.

The server runs SmolLM2-135M-Instruct (float32, eager) from the converted embedded checkpoint;
it is started once for this module by a fixture (bounded wait) and killed at the end. The
server tests run only where vLLM is installed (the venv of scripts/setup_vllm_cpu.sh); the
unreachable-server and option tests run everywhere (standard library only).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.engines.openai_engine import OpenAIEngine
from auditlang.core.requests import Message, Prompt, Request, Result

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_server = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed here; the server tests run in the vLLM venv (scripts/setup_vllm_cpu.sh)")
SERVED = "smol"
START_TIMEOUT_S = 300
TOL = 1e-3

CHAT = Prompt(messages=(Message("user", "Which planet is known as the Red Planet?\nA. Venus\nB. Mars\nC. Jupiter\nD. Saturn\n"
                                        "Answer with the letter only."),))
RAW = Prompt(text="Question: What is the capital of France?\nAnswer:")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _client(base_url: str, **options) -> OpenAIEngine:
    return OpenAIEngine(ModelConfig(name="smol", engine="openai", path=SERVED, options={"base_url": base_url, **options}))


# ----------------------------------------------------------------------------- everywhere


def test_unreachable_server_raises_engine_error() -> None:
    port = _free_port()  # bound then released: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(EngineError, match="unreachable") as e:
        _client(f"http://127.0.0.1:{port}/v1", retries=1, backoff=0.05, timeout=2)
    assert f"127.0.0.1:{port}" in str(e.value)
    assert "resume" in (e.value.hint or "")
    assert time.monotonic() - t0 < 30  # bounded by retries x timeout, no hang


def test_bad_options_are_rejected() -> None:
    with pytest.raises(EngineError, match="unknown openai option"):
        _client("http://127.0.0.1:9/v1", base="x")
    with pytest.raises(EngineError, match="endpoint"):
        _client("http://127.0.0.1:9/v1", endpoint="responses")
    with pytest.raises(EngineError, match="http"):
        _client("127.0.0.1:9/v1")


# ----------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def server(cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not HAS_VLLM:
        pytest.skip("vLLM is not installed here")
    from auditlang.engines.embedded import resolve_embedded

    ckpt = resolve_embedded("smollm2-135m-instruct")
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=str(cache_dir / "vllm"),
               VLLM_CPU_OMP_THREADS_BIND=",".join(str(c) for c in sorted(os.sched_getaffinity(0))))
    # `vllm serve` is what users run; vllm-cpu 0.32.0's `vllm` CLI dies looking up the metadata of a
    # distribution named "vllm" (it is "vllm-cpu"), so start the same server through its module.
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(ckpt), "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", SERVED, "--dtype", "float32", "--enforce-eager", "--max-logprobs", "64",
           "--no-enable-prefix-caching", "--generation-config", "vllm", "--max-model-len", "4096"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not answer within {START_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield base
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (API server + engine core); SIGKILL what is left after 30 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group, if any
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def client(server: str) -> OpenAIEngine:
    return _client(server, server="vllm")


@pytest.fixture(scope="module")
def hf_reference(smol) -> dict[str, Result]:
    reqs = [
        Request.make("smol", "generate", CHAT, max_tokens=8, top_logprobs=3),
        Request.make("smol", "generate", RAW, max_tokens=6, top_logprobs=2),
        Request.make("smol", "choice_logprobs", CHAT, choices=["A", "B", "C", "D"], top_logprobs=5),
        Request.make("smol", "continuation_logprobs", RAW, continuation=" Paris", top_logprobs=2),
        Request.make("smol", "continuation_logprobs", CHAT, continuation="B. Mars"),
    ]
    return {r.request_id: r for r in smol.run(reqs)}


def _one(engine: OpenAIEngine, req: Request) -> Result:
    (r,) = engine.run([req])
    assert r.request_id == req.id
    return r


def _ok(r: Result) -> Result:
    assert r.error is None, r.error
    return r


@needs_server
def test_capabilities_and_fingerprint(client: OpenAIEngine, server: str) -> None:
    assert client.capabilities() == {"generate", "choice_logprobs", "continuation_logprobs", "constrained_choice"}
    assert _client(server).capabilities() == {"generate", "choice_logprobs"}
    fp = client.fingerprint()
    assert fp["engine"] == "openai" and fp["model"] == SERVED and fp["base_url"] == server
    assert fp["root"].endswith("float32-r1")  # vLLM reports the checkpoint it loaded


@needs_server
def test_unknown_model_names_the_served_ones(server: str) -> None:
    with pytest.raises(EngineError, match="does not serve 'nope'") as e:
        OpenAIEngine(ModelConfig(name="x", engine="openai", path="nope", options={"base_url": server}))
    assert SERVED in (e.value.hint or "")


@needs_server
@pytest.mark.parametrize("which", [0, 1], ids=["chat", "completions"])
def test_greedy_generation_with_logprobs_equals_hf(client: OpenAIEngine, hf_reference: dict[str, Result], which: int) -> None:
    prompt, k, max_tokens = [(CHAT, 3, 8), (RAW, 2, 6)][which]
    req = Request.make("smol", "generate", prompt, max_tokens=max_tokens, top_logprobs=k)
    got, ref = _ok(_one(client, req)).samples[0], _ok(hf_reference[req.id]).samples[0]
    assert got.text == ref.text
    assert got.finish_reason == ref.finish_reason
    assert [t.token for t in got.tokens] == [t.token for t in ref.tokens]
    for a, b in zip(got.tokens, ref.tokens):
        assert a.token_id == -1  # the OpenAI API does not return ids
        assert a.logprob == pytest.approx(b.logprob, abs=TOL)
        assert list(a.top) == list(b.top) and len(a.top) == k


@needs_server
def test_sampled_generation_is_seeded(client: OpenAIEngine) -> None:
    req = Request.make("smol", "generate", CHAT, seed=5, max_tokens=6, temperature=1.0, n=2)
    a, b = _ok(_one(client, req)), _ok(_one(client, req))
    assert len(a.samples) == 2 and [s.text for s in a.samples] == [s.text for s in b.samples]


@needs_server
def test_choice_logprobs_from_the_window(client: OpenAIEngine, server: str, hf_reference: dict[str, Result]) -> None:
    req = Request.make("smol", "choice_logprobs", CHAT, choices=["A", "B", "C", "D"], top_logprobs=5)
    ref = _ok(hf_reference[req.id])
    exact = _ok(_one(client, req))
    generic = _ok(_one(_client(server), req))  # string matching against the window, no tokenizer
    for r in (exact, generic):
        assert r.choice_logprobs.keys() == ref.choice_logprobs.keys()  # the letters are in the top 20 here
        for label, lp in r.choice_logprobs.items():
            assert lp == pytest.approx(ref.choice_logprobs[label], abs=TOL)
        assert list(r.top_logprobs) == list(ref.top_logprobs)
    assert exact.meta["label_rule"].startswith("server tokenizer") and generic.meta["label_rule"] == "window string match"


@needs_server
def test_labels_outside_the_window_are_absent(client: OpenAIEngine) -> None:
    req = Request.make("smol", "choice_logprobs", CHAT, choices=["B", "zebra"], top_logprobs=0)
    r = _ok(_one(client, req))
    assert "B" in r.choice_logprobs and "zebra" not in r.choice_logprobs
    assert r.meta["labels_outside_window"] == ["zebra"] and r.top_logprobs == {}


@needs_server
@pytest.mark.parametrize("which", [0, 1], ids=["raw", "chat"])
def test_continuation_logprobs_by_echo_equal_hf(client: OpenAIEngine, hf_reference: dict[str, Result], which: int) -> None:
    req = [Request.make("smol", "continuation_logprobs", RAW, continuation=" Paris", top_logprobs=2),
           Request.make("smol", "continuation_logprobs", CHAT, continuation="B. Mars")][which]
    got, ref = _ok(_one(client, req)), _ok(hf_reference[req.id])
    assert [t.token_id for t in got.continuation] == [t.token_id for t in ref.continuation]
    for a, b in zip(got.continuation, ref.continuation):
        assert a.logprob == pytest.approx(b.logprob, abs=TOL)
        assert list(a.top) == list(b.top)
    assert got.meta["prompt_tokens"] == ref.meta["prompt_tokens"]
    assert got.meta["sum_logprob"] == pytest.approx(ref.meta["sum_logprob"], abs=TOL)


@needs_server
def test_constrained_choice_and_prefill(client: OpenAIEngine) -> None:
    r = _ok(_one(client, Request.make("smol", "constrained_choice", CHAT, choices=["A", "B", "C", "D"])))
    assert r.choice in {"A", "B", "C", "D"}
    pre = Prompt(messages=CHAT.messages + (Message("assistant", "The answer is"),))
    g = _ok(_one(client, Request.make("smol", "generate", pre, max_tokens=5)))
    assert g.samples[0].tokens and not g.samples[0].text.startswith("<|im_start|>")


@needs_server
def test_rejected_requests_fail_alone(client: OpenAIEngine, server: str) -> None:
    reqs = [
        Request.make("smol", "generate", CHAT, max_tokens=2, top_logprobs=500),  # above --max-logprobs: HTTP 400
        Request.make("smol", "hidden_states", CHAT),
        Request.make("smol", "generate", RAW, max_tokens=2),
    ]
    by_id = {r.request_id: r for r in client.run(reqs)}  # results arrive in finishing order
    big_k, hidden, fine = (by_id[q.id] for q in reqs)
    assert big_k.error and "HTTP 400" in big_k.error
    assert hidden.error and "cannot serve 'hidden_states'" in hidden.error
    assert fine.error is None and fine.samples[0].tokens
    generic = _client(server)
    (cont,) = generic.run([Request.make("smol", "continuation_logprobs", RAW, continuation=" Paris")])
    assert "server: vllm" in cont.error
