"""What the openai engine sends for sampling top-k and chat-template arguments, checked against
a tiny in-process HTTP server that records request bodies (standard library only)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.engines.openai_engine import OpenAIEngine
from auditlang.core.requests import Message, Prompt, Request

CHAT = Prompt(messages=(Message("user", "Say hi."),))
RAW = Prompt(text="Say hi:")


class _Recorder(BaseHTTPRequestHandler):
    bodies: list[tuple[str, dict]] = []

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"data": [{"id": "m"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append((self.path, body))
        if self.path.endswith("/tokenize"):
            self._send({"tokens": [1, 2, 3]})
        elif self.path.endswith("/chat/completions"):
            self._send({"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]})
        else:
            self._send({"choices": [{"index": 0, "text": " hi", "finish_reason": "stop"}]})


@pytest.fixture
def server() -> Iterator[tuple[str, list]]:
    _Recorder.bodies = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", _Recorder.bodies
    httpd.shutdown()
    httpd.server_close()


def _engine(url: str, **options) -> OpenAIEngine:
    return OpenAIEngine(ModelConfig(name="m", engine="openai", path="m", options={"base_url": url, "retries": 0, **options}))


def _sent(engine: OpenAIEngine, bodies: list, req: Request) -> dict:
    (res,) = engine.run([req])
    assert res.error is None, res.error
    return bodies[-1][1]


def test_top_k_is_sent_only_when_set_and_sampling(server) -> None:
    url, bodies = server
    eng = _engine(url)
    assert _sent(eng, bodies, Request.make("m", "generate", CHAT, max_tokens=4, temperature=0.1, top_k=50))["top_k"] == 50
    assert "top_k" not in _sent(eng, bodies, Request.make("m", "generate", CHAT, max_tokens=4, temperature=0.1))
    assert "top_k" not in _sent(eng, bodies, Request.make("m", "generate", CHAT, max_tokens=4, temperature=0.1, top_k=-1))
    assert "top_k" not in _sent(eng, bodies, Request.make("m", "generate", CHAT, max_tokens=4, top_k=50))  # greedy
    (bad,) = eng.run([Request.make("m", "generate", CHAT, max_tokens=4, temperature=1.0, top_k=-3)])
    assert "top_k" in bad.error


def test_chat_template_kwargs_and_reasoning_effort(server) -> None:
    url, bodies = server
    eng = _engine(url, chat_template_kwargs={"enable_thinking": False, "reasoning_effort": "low"})
    body = _sent(eng, bodies, Request.make("m", "generate", CHAT, max_tokens=4))
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["reasoning_effort"] == "low"
    raw = _sent(eng, bodies, Request.make("m", "generate", RAW, max_tokens=4))  # no chat template on completions
    assert "chat_template_kwargs" not in raw and "reasoning_effort" not in raw
    assert eng.fingerprint()["chat_template_kwargs"] == {"enable_thinking": False, "reasoning_effort": "low"}


def test_reasoning_effort_alone_sends_no_template_kwargs(server) -> None:
    url, bodies = server
    eng = _engine(url, chat_template_kwargs={"reasoning_effort": "high"})
    body = _sent(eng, bodies, Request.make("m", "generate", CHAT, max_tokens=4))
    assert body["reasoning_effort"] == "high" and "chat_template_kwargs" not in body
    plain = _engine(url)
    body = _sent(plain, bodies, Request.make("m", "generate", CHAT, max_tokens=4))
    assert "reasoning_effort" not in body and "chat_template_kwargs" not in body
    assert "chat_template_kwargs" not in plain.fingerprint()


def test_tokenize_gets_the_template_kwargs(server) -> None:
    url, bodies = server
    eng = _engine(url, server="vllm", chat_template_kwargs={"enable_thinking": True})
    eng._prompt_ids(CHAT)
    path, body = bodies[-1]
    assert path == "/tokenize" and body["chat_template_kwargs"] == {"enable_thinking": True}


def test_bad_chat_template_kwargs_is_an_engine_error(server) -> None:
    url, _ = server
    with pytest.raises(EngineError, match="mapping"):
        _engine(url, chat_template_kwargs="enable_thinking=false")
