"""An API key goes only where the user said, by name (issue 24 items 3 and 4; docs/security.md).

Item 4: a spec naming ``api_key_env="LAB_API_KEY"`` (or relying on the default OPENAI_API_KEY)
gets the key only with ``--allow-secret NAME``: no ``*_API_KEY`` convention. Item 3: a server the
user allowed cannot redirect the request, with its ``Authorization`` header, to another host.
Servers listen on 127.0.0.1 only; ``evil.test`` resolves to 127.0.0.1 in this process.
"""

from __future__ import annotations

import json

from auditlang.cli import main

from .conftest import BASE, make_project
from .hosts import Recorder, fake_dns

KEY = "sk-lab-0123456789"


def openai_server(h) -> tuple[int, dict, bytes]:
    """A minimal OpenAI-compatible server: /models lists "gpt"; completions answer "A"."""
    if h.command == "GET":
        return 200, {}, json.dumps({"data": [{"id": "gpt"}]}).encode()
    top = [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.5}]
    return 200, {}, json.dumps({"choices": [{"index": 0, "message": {"content": "A"}, "finish_reason": "stop",
                                             "logprobs": {"content": [{"token": "A", "logprob": -0.1,
                                                                       "top_logprobs": top}]}}]}).encode()


def _spec(base_url: str, key_env: str | None) -> str:
    key = f', api_key_env="{key_env}"' if key_env else ""
    return BASE.replace('embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)',
                        f'openai("gpt", base_url="{base_url}"{key}, max_tokens=4)')


def _run(*extra: str) -> int:
    return main(["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress", *extra])


def test_a_key_variable_the_spec_names_needs_the_users_consent(tmp_path, capsys, monkeypatch):
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("LAB_API_KEY", KEY)
    with Recorder(openai_server) as srv:
        (proj / "s.audit").write_text(_spec(f"http://127.0.0.1:{srv.port}/v1", "LAB_API_KEY"), encoding="utf-8")
        assert _run() == 1
        err = capsys.readouterr().err
        assert "error[E181]" in err and "LAB_API_KEY" in err and "s.audit:4:" in err and "--allow-secret LAB_API_KEY" in err
        assert srv.connections == 0 and not (proj / "runs").exists()
        assert main(["plan", "s.audit", "--data-root", "data"]) == 0
        assert "reads $LAB_API_KEY as its API key: NOT ALLOWED" in capsys.readouterr().out
        assert _run("--allow-secret", "LAB_API_KEY") == 0, capsys.readouterr().err
        assert srv.requests and all(h.get("Authorization") == f"Bearer {KEY}" for _, _, h in srv.requests)
    info = json.loads((proj / "runs/r/run.json").read_text())
    assert info["access"][0]["secret_allowed_by"] == "--allow-secret"


def test_the_default_key_is_not_sent_to_a_spec_s_server_without_consent(tmp_path, capsys, monkeypatch):
    """openai(base_url=...) naming no api_key_env reads OPENAI_API_KEY: consent by name too; an
    unset variable sends nothing and needs none."""
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Recorder(openai_server) as srv:
        (proj / "s.audit").write_text(_spec(f"http://127.0.0.1:{srv.port}/v1", None), encoding="utf-8")
        assert _run() == 1
        err = capsys.readouterr().err
        assert "error[E181]" in err and "OPENAI_API_KEY" in err and "--allow-secret OPENAI_API_KEY" in err
        assert srv.connections == 0
        monkeypatch.delenv("OPENAI_API_KEY")
        assert _run() == 0, capsys.readouterr().err
        assert srv.requests and not srv.saw_header("authorization")


def test_a_redirect_to_another_host_does_not_carry_the_key(tmp_path, capsys, monkeypatch):
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("LAB_API_KEY", KEY)
    fake_dns(monkeypatch)
    with Recorder(openai_server) as evil:
        def redirect(h):
            return 307, {"Location": f"http://evil.test:{evil.port}{h.path}"}, b""

        with Recorder(redirect) as allowed:
            (proj / "s.audit").write_text(_spec(f"http://127.0.0.1:{allowed.port}/v1", "LAB_API_KEY"), encoding="utf-8")
            assert _run("--allow-secret", "LAB_API_KEY") == 3
            err = capsys.readouterr().err
            assert allowed.requests  # the allowed server was asked ...
            assert evil.connections == 0 and not evil.requests  # ... and its redirect not followed
            assert "redirected" in err and "evil.test" in err and "--allow-host evil.test" in err
            assert "Traceback" not in err and KEY not in err
