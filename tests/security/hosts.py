"""Loopback servers standing in for remote hosts, for the consent tests (issue 24).

A ``Recorder`` listens on 127.0.0.1 only and records every connection and request (method, path,
headers); ``answer(handler)`` decides the reply (default: 404). Names ending in ``.test`` (a
reserved TLD, RFC 6761) resolve to 127.0.0.1 in-process (``fake_dns``) or in an `auditc`
subprocess (``auditc``), so a host auditlang must treat as remote is still this machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_REQUESTS = 200  # a bound on what a test server answers

_SITECUSTOMIZE = '''
import socket
_orig = socket.getaddrinfo
def _fake(host, *a, **k):
    if isinstance(host, str) and host.endswith(".test"):
        host = "127.0.0.1"
    return _orig(host, *a, **k)
socket.getaddrinfo = _fake
'''


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply=None) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.connections = 0
        self.reply = reply or (lambda h: (404, {}, b'{"error": "not found"}'))
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                if len(recorder.requests) >= MAX_REQUESTS:
                    self.send_error(503)
                    return
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(min(n, 1 << 20))
                recorder.requests.append((self.command, self.path, dict(self.headers)))
                code, headers, body = recorder.reply(self)
                self.send_response(code)
                for k, v in {"Content-Length": str(len(body)), "Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_HEAD = _any

            def log_message(self, *a) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        self.timeout = 5

    def verify_request(self, request, client_address) -> bool:
        self.connections += 1
        return True

    def __enter__(self) -> "Recorder":
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    def saw_header(self, name: str) -> bool:
        return any(name.lower() in {k.lower() for k in h} for _, _, h in self.requests)


def fake_dns(monkeypatch) -> None:
    """``*.test`` resolves to 127.0.0.1 in this process."""
    orig = socket.getaddrinfo

    def fake(host, *a, **k):
        return orig("127.0.0.1" if isinstance(host, str) and host.endswith(".test") else host, *a, **k)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def auditc(args: list[str], cwd: Path, env: dict[str, str], tmp: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    """`auditc ARGS` in a fresh process (``*.test`` names resolve to 127.0.0.1 there)."""
    site = tmp / "_fake_dns"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    code = "import sys; from auditlang.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout)
