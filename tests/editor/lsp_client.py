"""A minimal LSP client over stdio (JSON-RPC with Content-Length framing), for tests."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time


class LspClient:
    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._next_id = 0
        self.responses: dict[int, dict] = {}
        self.notifications: queue.Queue = queue.Queue()
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
            body = json.loads(out.read(int(headers["content-length"])).decode("utf-8"))
            if "id" in body and "method" not in body:
                with self._cv:
                    self.responses[body["id"]] = body
                    self._cv.notify_all()
            elif "method" in body and "id" in body:  # a server->client request: answer it
                self._send({"jsonrpc": "2.0", "id": body["id"], "result": None})
            else:
                self.notifications.put(body)

    def _send(self, msg: dict) -> None:
        data = json.dumps(msg).encode("utf-8")
        self.proc.stdin.write(f"Content-Length: {len(data)}\r\n\r\n".encode("ascii") + data)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def request(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        self._next_id += 1
        rid = self._next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        with self._cv:
            while rid not in self.responses:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no response to {method}; stderr: {self._stderr()}")
                self._cv.wait(left)
            resp = self.responses.pop(rid)
        assert "error" not in resp, resp
        return resp["result"]

    def wait_notification(self, method: str, pred=lambda p: True, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} notification; stderr: {self._stderr()}")
            try:
                msg = self.notifications.get(timeout=left)
            except queue.Empty:
                continue
            if msg.get("method") == method and pred(msg["params"]):
                return msg["params"]

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(server still running)"
        return self.proc.stderr.read().decode("utf-8", "replace")[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
