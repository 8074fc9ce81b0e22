"""An OpenAI-compatible server's malformed or missing replies (issue 40, items 4 and 10) are counted
request errors, never a crash (exit 70) and never an answer: `auditc run` against a small
http.server on 127.0.0.1 that answers every completion request with one bad body, then the report
is written and the run exits 4 with the failed requests counted in ``n_error``.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from auditlang.cli import main

from .conftest import BASE, make_project

GOOD = {"choices": [{"index": 0, "message": {"content": "A"}, "finish_reason": "stop",
                     "logprobs": {"content": [{"token": "A", "logprob": -0.1,
                                               "top_logprobs": [{"token": "A", "logprob": -0.1}]}]}}]}
BAD = {
    "message_not_object": {"choices": [{"index": 0, "message": "A", "finish_reason": "stop"}]},
    "list_body": [GOOD],
    "string_body": "A",
    "number_body": 3,
    "null_body": None,
    "choices_not_list": {"choices": "A"},
    "choice_not_object": {"choices": ["A"]},
    "logprobs_not_object": {"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": "x"}]},
    "content_not_list": {"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": {"content": 5}}]},
    "top_not_list": {"choices": [{"index": 0, "message": {"content": "A"},
                                  "logprobs": {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": 7}]}}]},
    "logprob_not_number": {"choices": [{"index": 0, "message": {"content": "A"},
                                        "logprobs": {"content": [{"token": "A", "logprob": "x",
                                                                  "top_logprobs": [{"token": "A", "logprob": "x"}]}]}}]},
    "index_not_int": {"choices": [{"index": "z", "message": {"content": "A"}}, {"index": 1, "message": {"content": "B"}}]},
    "not_json": b"<html>busy</html>",
    "not_utf8": b"\xff\xfe{}",
    "models_list_odd": GOOD,  # /models answers a list of strings; completions are fine
}


class _Server:
    def __init__(self, body, hang_s: float = 0.0) -> None:
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # noqa: ANN002
                pass

            def _send(self, payload) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._send({"data": ["gpt", 3]} if body is GOOD else {"data": [{"id": "gpt"}]})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if hang_s:
                    time.sleep(hang_s)
                self._send(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.handle_error = lambda *a: None  # the client gave up on a hanging reply: a broken pipe
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _spec(url: str, protocol: str = "s000.token_norm") -> str:
    return (BASE.replace('embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)',
                         f'openai("gpt", base_url="{url}", max_tokens=4, retries=0, timeout=1)')
            .replace("s000.token_norm", protocol))


def _run(capsys, monkeypatch, tmp_path, body, hang_s=0.0, protocol="s000.token_norm"):
    srv = _Server(body, hang_s)
    try:
        monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "no-config.toml"))
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        proj = make_project(tmp_path / "p", _spec(srv.url, protocol))
        rc = main(["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress"])
    finally:
        srv.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err[-3000:]
    return rc, err, proj / "runs" / "r"


def _n_error(run) -> int:
    with open(run / "metrics" / "cells.csv", newline="") as fh:
        return sum(int(r["n_error"]) for r in csv.DictReader(fh))


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_reply_is_a_counted_request_error(tmp_path, capsys, monkeypatch, case):
    rc, err, run = _run(capsys, monkeypatch, tmp_path, BAD[case])
    if case == "models_list_odd":
        assert rc == 0, err[-2000:]
        return
    assert rc == 4, err[-2000:]
    assert (run / "report").is_dir() and _n_error(run) == 4


def test_a_malformed_generate_reply_is_a_counted_error(tmp_path, capsys, monkeypatch):
    rc, err, run = _run(capsys, monkeypatch, tmp_path, BAD["message_not_object"], protocol="s000.verbal_decimal")
    assert rc == 4 and _n_error(run) > 0, err[-2000:]


def test_a_hanging_request_is_a_counted_error_and_the_run_reports(tmp_path, capsys, monkeypatch):
    t0 = time.monotonic()
    rc, err, run = _run(capsys, monkeypatch, tmp_path, GOOD, hang_s=3)
    assert rc == 4, err[-2000:]
    assert time.monotonic() - t0 < 60
    assert (run / "report").is_dir() and _n_error(run) == 4
    assert "no reply from /chat/completions within 1 s" in (run / "report" / "checklist.md").read_text() + err
