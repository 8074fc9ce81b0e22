"""Progress that moves (issue 25 item 4): the count rises while an engine is still generating,
not only when a commit batch lands, in non-TTY logs (``--display plain``) as on a terminal.

User path: `auditc run --display plain` of a spec with a real embedded model (smollm2-135m on
the CPU), its stderr read as a log file would be. The hf engine logs ``hf generate: ...`` when
the generation of a ``run`` call is over; progress lines must count finished requests before it.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest

from auditlang.cli import main

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"

SPEC = """import "stdlib/s000"

dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=4, seed=7)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=2, max_tokens=6)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
"""


def test_plain_log_of_a_real_run_counts_requests_while_generating(tmp_path: Path, capsys, monkeypatch) -> None:
    pytest.importorskip("torch")
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    lines = (DATA / "arc_challenge.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    (tmp_path / "arc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "p.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.setenv("AUDITLANG_PROGRESS_INTERVAL", "0")  # a line at every change
    capsys.readouterr()
    handler = logging.StreamHandler(sys.stderr)  # the engine's own log, into the same stream
    hf_log = logging.getLogger("auditlang.engines.hf")
    level = hf_log.level
    hf_log.addHandler(handler)
    hf_log.setLevel(logging.INFO)
    try:
        rc = main(["run", str(tmp_path / "p.audit"), "--out", str(tmp_path / "r"), "--no-report", "--display", "plain"])
    finally:
        hf_log.removeHandler(handler)
        hf_log.setLevel(level)
    out, log = capsys.readouterr()
    if rc != 0 and "not converted" in log:
        pytest.skip("the embedded model is not converted yet")
    assert rc == 0, log
    assert "\x1b[" not in log  # no colour codes in a log file
    stage = [ln for ln in log.splitlines() if ln.startswith("[smol stage 1]") or ln.startswith("hf generate:")]
    end = next(i for i, ln in enumerate(stage) if ln.startswith("hf generate:"))
    counts = [int(m.group(1)) for ln in stage[:end] if (m := re.search(r"\] (\d+)/4 requests", ln))]
    assert any(0 < c < 4 for c in counts), "\n".join(stage)
    assert counts == sorted(counts)  # it only rises
    assert re.search(r"\[smol stage 1\] done: 4/4 requests", log)
    # issue 35 item 7: the count moves inside a generation batch (every decoding step reports its
    # share), the whole run's line follows, everything is on stderr, transformers' bars are off
    pcts = [float(m.group(1)) for ln in stage[:end] if (m := re.search(r"requests \((\d+\.\d)%\)", ln))]
    assert any(p % 25 for p in pcts), "\n".join(stage)
    assert "[run] " in log and "Loading weights" not in log and out == ""


def test_ray_worker_log_lines_reach_a_log_file_without_colour_codes(monkeypatch, capsys) -> None:
    """Ray forwards worker output to the driver as ``ESC[36m(UnitWorker pid=7)ESC[0m text`` even
    when the driver writes to a file; the Ray executor strips the codes there (not on a terminal)."""
    from auditlang.core.errors import RuntimeFailure
    from auditlang.scaleout import rayexec

    class FakeRay:
        def is_initialized(self) -> bool:
            return False

        def init(self, **kwargs) -> None:  # what Ray's log monitor thread prints (ray/_private/worker.py)
            print("\x1b[36m(UnitWorker pid=7)\x1b[0m [smol.0of4] loading the hf engine", file=sys.stderr)
            print("\x1b[36m(UnitWorker pid=7)\x1b[0m [smol.0of4] ready")
            raise ConnectionError("no cluster in this test")

    monkeypatch.setattr(rayexec, "require_ray", lambda: FakeRay())
    with pytest.raises(RuntimeFailure):
        rayexec.execute_on_ray(None, None, Path("."), engine_override=None)
    out = capsys.readouterr()
    assert "(UnitWorker pid=7) [smol.0of4] loading the hf engine" in out.err
    assert "(UnitWorker pid=7) [smol.0of4] ready" in out.out
    assert "\x1b" not in out.err + out.out
    assert not hasattr(sys.stderr, "_stream")  # the streams are restored afterwards


def test_openai_engine_yields_each_result_as_it_finishes() -> None:
    """Progress on the openai engine counts finished requests: a slow first request does not hold
    back the results of the ones behind it (they used to be yielded in submission order)."""
    import threading
    from types import SimpleNamespace

    from auditlang.engines.openai_engine import OpenAIEngine

    released = threading.Event()
    eng = OpenAIEngine.__new__(OpenAIEngine)
    eng._opts = SimpleNamespace(concurrency=4)

    def one(req: str) -> str:
        if req == "slow":
            released.wait(timeout=10)  # finishes only once another result reached the caller
        return req

    eng._one = one
    got = []
    for res in eng.run(["slow", "a", "b", "c"]):
        got.append(res)
        released.set()
    assert got[0] != "slow" and sorted(got) == ["a", "b", "c", "slow"]
