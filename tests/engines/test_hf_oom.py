"""``batch_size=auto`` never loses a request to running out of memory (issue 36 item 1).

The user's path: ``auditc run`` of a small study-000 spec on the embedded SmolLM2 (greedy answers
with their first-token windows, stage-2 verbal follow-ups, constrained choices scored by teacher
forcing), with the model's forward replaced by a test double that raises
``torch.cuda.OutOfMemoryError`` whenever a forward holds more than K rows, as a GPU too small
for the batch would. Every request still gets its answer (0 errors, exit 0), the answers equal
an unconstrained run's, and run.json records each halving and the reduced batch per shape.
Two items and 3-token answers and follow-ups suffice: every path still batches more than K rows.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from auditlang.cli import main as auditc  # noqa: E402  (after importorskip)
from auditlang.engines import hf_batch  # noqa: E402  (after importorskip)
from auditlang.engines.hf import HFEngine  # noqa: E402  (after importorskip)
from auditlang.store.journal import Journal  # noqa: E402  (after importorskip)

ROOT = Path(__file__).resolve().parents[2]
K = 1  # the most rows a forward may hold before the double runs "out of memory"

SPEC = textwrap.dedent("""\
    import "stdlib/s000"
    settings { seed = 42 }
    dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=2, seed=42)
    model smol = embedded("smollm2-135m-instruct", dtype=float32, device="cpu", batch_size=auto, max_tokens=3)
    protocol verbal = s000.verbal_decimal with (max_tokens=3)
    audit oom {
      models = [smol]
      datasets = [capitals]
      variants = [s000.surface_paraphrase]
      protocols = [s000.token_norm, verbal]
      evaluators = [s000.first_char, s000.constrained]
      metrics = [accuracy]
    }
    report cells
    """)


def _run(tmp_path: Path, name: str) -> tuple[Path, int]:
    spec = tmp_path / "oom.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / name
    rc = auditc(["run", str(spec), "--data-root", str(ROOT / "examples" / "data"), "--out", str(out),
                 "--no-report", "--display", "none"])
    return out, rc


def _answers(run_dir: Path) -> dict[str, Any]:
    """request id -> what the engine returned (texts and token ids, choices, label logprobs)."""
    j = Journal(run_dir)
    try:
        got = {r.request_id: r for _, r in j.iter_results()}
    finally:
        j.close()
    out: dict[str, Any] = {}
    for rid, r in got.items():
        assert r.error is None, r.error
        out[rid] = (r.kind, [(s.text, [t.token_id for t in s.tokens]) for s in r.samples or ()], r.choice,
                    {c: round(v, 4) for c, v in (r.choice_logprobs or {}).items()})
    return out


def test_out_of_memory_halves_the_batch_and_loses_no_request(tmp_path, cache_dir, monkeypatch):
    free, free_rc = _run(tmp_path, "free")
    assert free_rc == 0

    seen: list[int] = []
    load = HFEngine.__init__

    def tight_gpu(self: HFEngine, config: Any) -> None:
        load(self, config)
        forward = self.model.forward

        def forward_or_oom(*args: Any, **kwargs: Any) -> Any:
            rows = int(kwargs.get("input_ids", args[0] if args else None).shape[0])
            seen.append(rows)
            if rows > K:
                raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a batch of {rows} rows")
            return forward(*args, **kwargs)

        self.model.forward = forward_or_oom

    monkeypatch.setattr(HFEngine, "__init__", tight_gpu)
    tight, rc = _run(tmp_path, "tight")
    assert rc == 0  # exit 4 would mean failed requests
    info = json.loads((tight / "run.json").read_text())
    assert info["last_run"]["errors"] == 0

    assert _answers(tight) == _answers(free)
    # the cells too (float32 sums of other batch compositions: equal to 1e-5)
    pd = pytest.importorskip("pandas")
    a, b = (pd.read_csv(d / "metrics" / "cells.csv") for d in (tight, free))
    pd.testing.assert_frame_equal(a, b, check_exact=False, atol=1e-5, rtol=0)

    sizing = info["batch_sizing"]["smol"]
    halvings = sizing["halvings"]
    assert {h["shape"].split()[0] for h in halvings} == {"generate", "score"}  # both paths halve
    assert all(h["to"] == max(1, h["from"] // 2) for h in halvings)
    # each forward over K rows ran out of memory once and halved its shape; later batches of the
    # shape started at the reduced size instead of failing again
    assert sum(1 for rows in seen if rows > K) == len(halvings)
    assert all(s["start"] == 16 and s["now"] <= K for s in sizing["shapes"].values())  # CPU auto: 16, kept reduced
    work = info["engine_work"]["smol"]
    assert sum(st.get("oom_halvings", 0) for st in work.values()) >= len(halvings) >= 2
    fp = info["fingerprints"]["smol"]
    assert fp  # the fingerprint is the unconstrained run's: a halving changes no recorded configuration
    assert fp == json.loads((free / "run.json").read_text())["fingerprints"]["smol"]


def test_a_single_row_that_does_not_fit_is_a_counted_error(smol, monkeypatch):
    """Only at one row is running out of memory a request error (never an answer)."""
    from auditlang.core.requests import Message, Prompt, Request

    forward = smol.model.forward

    def always_oom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA error: out of memory")

    monkeypatch.setattr(smol.model, "forward", always_oom)
    reqs = [Request.make("smol", "generate", Prompt(messages=(Message("user", f"Count to {i}."),)), max_tokens=3, temperature=0.0)
            for i in range(3)]
    out = list(smol.run(reqs))
    assert len(out) == 3 and all(r.error and "out of memory" in r.error for r in out)
    assert [h["to"] for h in smol.sizer.halvings][-1] == 1  # halved down to one row first (conftest restores it)
    monkeypatch.setattr(smol.model, "forward", forward)
    assert not [r.error for r in smol.run(reqs) if r.error]


def test_oom_detection_and_buckets():
    assert hf_batch.is_oom(torch.cuda.OutOfMemoryError("x"))
    assert hf_batch.is_oom(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not hf_batch.is_oom(RuntimeError("shape mismatch"))
    assert [hf_batch.bucket(n) for n in (1, 64, 65, 300, 1024, 1025)] == [64, 64, 128, 512, 1024, 2048]
    sizer = hf_batch.BatchSizer(fixed=None, free=100_000.0, per_token=1.0, per_row=0.0,
                                grid_rows=lambda free, per_row: max(1, int(0.8 * free / per_row)))
    short, long = sizer.key("generate", 60), sizer.key("score", 1000)
    assert (sizer.cap(short), sizer.cap(long)) == (1250, 78)  # sized from the bucket of the longest row
    assert sizer.halve(short, 8) == 4 and sizer.cap(short) == 4 and sizer.cap(long) == 78
    assert sizer.summary()["halvings"] == [{"shape": short, "from": 8, "to": 4}]
