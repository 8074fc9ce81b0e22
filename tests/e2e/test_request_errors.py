"""An errored request is missing, never wrong (issue 22 item 3), on the user's path.

A spec names an ``openai(...)`` model served by an OpenAI-compatible stub on 127.0.0.1 that answers
HTTP 500 for some prompts (the engine retries, then stores the failure). Every answered item is
correct (gold is always option A and the stub answers "A"), so any failed request scored as an
answer would pull accuracy below 1. `auditc run`, `auditc report` and `auditc rescore` are called
through ``main([...])`` and the files a reader opens are read back.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.engines import openai_engine
from auditlang.store.journal import Journal

ROWS = "".join(json.dumps({"id": f"q{i}", "question": f"Which number is {i}?",
                           "choices": [str(i), str(i + 1), str(i + 2), str(i + 3)], "answer": str(i)}) + "\n"
               for i in range(6))
TOKEN = "a/gpt/arc/s000.surface_paraphrase/s000.token_norm/s000.first_char"
VERBAL = "a/gpt/arc/s000.surface_paraphrase/s000.verbal_decimal/s000.first_char"


def _is_followup(text: str) -> bool:
    return "state your confidence" in text


class Stub:
    """OpenAI-compatible chat server: "A" to questions, "0.8" to confidence follow-ups, HTTP 500
    to every prompt ``fails(text)`` selects (``text``: the request's messages as JSON)."""

    def __init__(self, fails: Callable[[str], bool]) -> None:
        self.fails, self.seen = fails, []
        stub = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # noqa: ANN002
                pass

            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._reply(200, {"data": [{"id": "gpt"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                text = json.dumps(body.get("messages"))
                stub.seen.append(text)
                if stub.fails(text):
                    return self._reply(500, {"error": {"message": "boom: the server failed"}})
                ans = "0.8" if _is_followup(text) else "A"
                top = [{"token": ans, "logprob": -0.1}, {"token": "B", "logprob": -2.5}]
                self._reply(200, {"choices": [{"index": 0, "message": {"content": ans}, "finish_reason": "stop",
                                               "logprobs": {"content": [{"token": ans, "logprob": -0.1,
                                                                         "top_logprobs": top}]}}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _fails_first_run(text: str) -> bool:
    """Item q1's answer, and item q2's confidence follow-up (a stage-2 request)."""
    return ("Which number is 1?" in text and not _is_followup(text)) or ("Which number is 2?" in text and _is_followup(text))


@pytest.fixture
def stub(monkeypatch):
    # the engine's real retry loop, without its 1 s / 2 s / 4 s waits
    parse = openai_engine._Options.parse
    monkeypatch.setattr(openai_engine._Options, "parse", staticmethod(lambda c: parse(c).model_copy(update={"backoff": 0.001})))
    srv = Stub(_fails_first_run)
    yield srv
    srv.close()


@pytest.fixture
def project(tmp_path: Path, stub: Stub) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "auditlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "data" / "arc.jsonl").write_text(ROWS, encoding="utf-8")
    (tmp_path / "s.audit").write_text(f'''import "stdlib/s000"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model gpt = openai("gpt", base_url="{stub.url}", max_tokens=4)
audit a {{
  models = [gpt]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}}
''', encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


RUN = ["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress"]


def _cells(path: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in pd.read_csv(path).to_dict("records")}


def test_failed_requests_are_missing_not_wrong_and_a_rerun_retries_exactly_them(project, stub, capsys):
    assert main(RUN) == 4
    err = capsys.readouterr().err
    assert "2 requests failed in the engine" in err and "HTTP 500" in err and "boom: the server failed" in err
    assert "auditc run s.audit --out runs/r --data-root data" in err  # the hint retries them

    # no follow-up is built from the failed answer of q1
    assert not any("Which number is 1?" in t and _is_followup(t) for t in stub.seen)

    run = project / "runs" / "r"
    cells = _cells(run / "metrics" / "cells.csv")
    tok, verb = cells[TOKEN], cells[VERBAL]
    assert (tok["n"], tok["n_error"]) == (5, 1)  # q1's answer failed
    assert (verb["n"], verb["n_error"]) == (4, 2)  # q1's answer and q2's confidence follow-up failed
    for c in (tok, verb):
        assert c["accuracy"] == 1.0 and c["n_correct_known"] == c["n"]  # failures never scored as wrong
        assert c["answer_parse_rate"] == 1.0  # nor as parse failures
    assert verb["vpr"] == 1.0 and math.isnan(tok["vpr"])  # VPR is n/a where nothing is verbal (issue 34)
    assert verb["mean_confidence"] == pytest.approx(0.8)

    df = pd.read_parquet(run / "records.parquet")
    bad = df[df["status"] != "ok"].set_index(["cell_id", "item_id"])
    assert sorted(bad.index) == sorted([(TOKEN, "q1"), (VERBAL, "q1"), (VERBAL, "q2")])
    assert set(bad["status"]) == {"error"}
    assert bad.loc[(VERBAL, "q2"), "error"].startswith("verbal: HTTP 500")
    assert bad.loc[(TOKEN, "q1"), "error"].startswith("answer: HTTP 500")
    assert bad["correct"].isna().all() and bad["confidence"].isna().all() and bad["pred"].isna().all()
    assert (df[df["status"] == "ok"]["error"] == "").all()
    with Journal(run) as j:
        assert j.counts().errors == 2

    report = run / "report"
    md = (report / "cells.md").read_text(encoding="utf-8")
    assert "| n | n_error |" in md and "3 items in 2 cells are missing because a request failed" in md
    checklist = (report / "checklist.md").read_text(encoding="utf-8")
    assert "### Request errors (items missing from the metrics)" in checklist
    assert f"{TOKEN}: n_error 1, n answered 5; first error: answer: HTTP 500" in checklist
    assert f"{VERBAL}: n_error 2, n answered 4" in checklist
    disclosure = (report / "disclosure.md").read_text(encoding="utf-8")
    assert f"{TOKEN}: n_error 1, n answered 5; {VERBAL}: n_error 2, n answered 4" in disclosure
    from auditlang.report.latex import unmark

    assert "n\\_error 1, n answered 5" in unmark((report / "disclosure.tex").read_text(encoding="utf-8"))
    html = (report / "report.html").read_text(encoding="utf-8")
    assert 'id="request-errors">3 items in 2 cells are missing' in html and "n_<wbr>error" in html

    capsys.readouterr()
    assert main(["status", "runs/r"]) == 0
    assert "complete, with 1 failed stage-1 request(s)" in capsys.readouterr().out

    # auditc report and rescore read the same run back: the failures stay missing
    assert main(["report", "runs/r"]) == 0
    assert f"{VERBAL}: n_error 2, n answered 4" in (report / "checklist.md").read_text(encoding="utf-8")
    assert main(["rescore", "runs/r", "--evaluator", "regex_reparse"]) == 0
    re_cells = _cells(run / "rescore" / "regex_reparse" / "cells.csv")
    assert {k.rsplit("/", 1)[0]: (v["n"], v["n_error"]) for k, v in re_cells.items()} == {
        TOKEN.rsplit("/", 1)[0]: (5, 1), VERBAL.rsplit("/", 1)[0]: (4, 2)}

    # the server is fixed: a rerun sends exactly the failed requests and the follow-up they unblock
    before = len(stub.seen)
    stub.fails = lambda text: False
    capsys.readouterr()
    assert main(RUN) == 0, capsys.readouterr().err
    new = stub.seen[before:]
    assert len(new) == 3
    assert sum("Which number is 1?" in t and not _is_followup(t) for t in new) == 1
    assert sum("Which number is 1?" in t and _is_followup(t) for t in new) == 1
    assert sum("Which number is 2?" in t and _is_followup(t) for t in new) == 1
    cells = _cells(run / "metrics" / "cells.csv")
    assert all((c["n"], c["n_error"], c["accuracy"]) == (6, 0, 1.0) for c in cells.values())
    assert (pd.read_parquet(run / "records.parquet")["status"] == "ok").all()
    assert "0 request errors" in (report / "checklist.md").read_text(encoding="utf-8")
    assert "Request errors: 0 request errors" in (report / "disclosure.md").read_text(encoding="utf-8")
    assert json.loads((run / "run.json").read_text())["last_run"]["errors"] == 0

    # and a third run executes nothing
    before = len(stub.seen)
    assert main(RUN) == 0 and stub.seen[before:] == []


def test_keep_errors_does_not_retry_and_still_exits_4(project, stub, capsys):
    assert main(RUN) == 4
    before = len(stub.seen)
    stub.fails = lambda text: False
    capsys.readouterr()
    assert main([*RUN, "--keep-errors"]) == 4
    assert "2 requests failed in the engine" in capsys.readouterr().err
    assert stub.seen[before:] == []
    assert math.isclose(_cells(project / "runs/r/metrics/cells.csv")[TOKEN]["accuracy"], 1.0)
