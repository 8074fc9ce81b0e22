"""A deterministic test double of the Engine protocol, plus request builders from real data.

``HashEngine`` derives every output (texts, pseudo-logprobs, hidden states) from sha256 of the
request id, optionally sleeping per request, so two runs give byte-identical results. Failure
knobs: ``fail_ids`` (Result.error set), ``raise_after`` (EngineError after that many results
in this engine's lifetime), ``interrupt_after`` (KeyboardInterrupt likewise), ``drop_ids``
(contract violation: no result), ``stall_after`` (hang, so a test can kill it mid-batch).
Imported by conftest.py and by the subprocess worker of the kill -9 test.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.requests import REQUEST_KINDS, Message, Prompt, Request, Result, Sample, TokenLogprob

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
LETTERS = ("A", "B", "C", "D", "E")


def _floats(seed: str, n: int) -> list[float]:
    """n pseudo-random floats in [0, 1) from sha256(seed)."""
    out: list[float] = []
    block = 0
    while len(out) < n:
        digest = hashlib.sha256(f"{seed}/{block}".encode()).digest()
        out.extend(v / 2**32 for v in struct.unpack(">8I", digest))
        block += 1
    return out[:n]


def _logprob(u: float) -> float:
    return -20.0 * u  # deterministic pseudo-logprob in (-20, 0]


def _tokens(seed: str, n: int) -> list[TokenLogprob]:
    u = _floats(seed, 3 * n)
    return [
        TokenLogprob(
            token=f"t{int(u[3 * i] * 1000)}", token_id=int(u[3 * i] * 50000), logprob=_logprob(u[3 * i + 1]),
            top={f"t{int(u[3 * i] * 1000)}": _logprob(u[3 * i + 1]), "alt": _logprob(u[3 * i + 2])},
        )
        for i in range(n)
    ]


def hash_result(req: Request) -> Result:
    p = req.p
    u = _floats(req.id, 4)
    if req.kind == "generate":
        samples = [
            Sample(text=f"The answer is {LETTERS[int(u[0] * 4)]} ({req.id[:6]}/{k})", tokens=_tokens(f"{req.id}/{k}", 5),
                   finish_reason="stop")
            for k in range(int(p.get("n", 1)))
        ]
        return Result(request_id=req.id, kind=req.kind, samples=samples, meta={"engine": "hash"})
    if req.kind == "choice_logprobs":
        choices = list(p["choices"])
        vals = _floats(req.id + "/c", len(choices))
        lps = {c: _logprob(v) for c, v in zip(choices, vals, strict=True)}
        return Result(request_id=req.id, kind=req.kind, choice_logprobs=lps, top_logprobs=dict(list(lps.items())[:2]))
    if req.kind == "continuation_logprobs":
        return Result(request_id=req.id, kind=req.kind, continuation=_tokens(req.id + "/k", 3))
    if req.kind == "constrained_choice":
        choices = list(p["choices"])
        return Result(request_id=req.id, kind=req.kind, choice=choices[int(u[1] * len(choices))])
    return Result(request_id=req.id, kind=req.kind, hidden_state=_floats(req.id + "/h", 8))


class HashEngine:
    """Deterministic Engine protocol implementation for store/executor tests."""

    def __init__(
        self,
        name: str = "fake",
        *,
        version: str = "1",
        sleep: float = 0.0,
        kinds: Iterable[str] = REQUEST_KINDS,
        fail_ids: Iterable[str] = (),
        raise_after: int | None = None,
        interrupt_after: int | None = None,
        drop_ids: Iterable[str] = (),
        stall_after: int | None = None,
    ) -> None:
        self.config = ModelConfig(name=name, engine="hash", path="sha256", batch_size=4)
        self.version = version
        self.sleep = sleep
        self.kinds = frozenset(kinds)
        self.fail_ids = set(fail_ids)
        self.raise_after = raise_after
        self.interrupt_after = interrupt_after
        self.drop_ids = set(drop_ids)
        self.stall_after = stall_after
        self.executed: list[str] = []
        self.batches: list[int] = []

    def capabilities(self) -> frozenset[str]:
        return self.kinds

    def fingerprint(self) -> dict[str, Any]:
        return {"engine": "hash", "version": self.version, "path": self.config.path}

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        batch = list(requests)
        self.batches.append(len(batch))
        for req in batch:
            if self.raise_after is not None and len(self.executed) >= self.raise_after:
                raise EngineError("simulated device failure", hint="check the GPU")
            if self.interrupt_after is not None and len(self.executed) >= self.interrupt_after:
                raise KeyboardInterrupt
            if self.stall_after is not None and len(self.executed) >= self.stall_after:
                time.sleep(3600)  # a hung device: only a kill ends this
            if self.sleep:
                time.sleep(self.sleep)
            self.executed.append(req.id)
            if req.id in self.drop_ids:
                continue
            if req.id in self.fail_ids:
                yield Result(request_id=req.id, kind=req.kind, error="simulated: prompt too long")
                continue
            yield hash_result(req)

    def close(self) -> None:
        pass


def arc_items(n: int) -> list[dict[str, Any]]:
    """The first n ARC-Challenge items of the shared test data."""
    items = []
    with open(DATA / "arc_challenge.jsonl", encoding="utf-8") as fh:
        for line in fh:
            items.append(json.loads(line))
            if len(items) == n:
                break
    return items


def arc_requests(n_items: int, model: str = "fake") -> list[Request]:
    """Two requests per ARC item: a greedy answer generation and the letter logprobs."""
    out = []
    for item in arc_items(n_items):
        letters = LETTERS[: len(item["choices"])]
        body = item["question"] + "\n" + "\n".join(f"{c}. {t}" for c, t in zip(letters, item["choices"], strict=True))
        prompt = Prompt(messages=(Message("user", body + "\nAnswer with the letter."),))
        out.append(Request.make(model, "generate", prompt, max_tokens=16, temperature=0.0))
        out.append(Request.make(model, "choice_logprobs", prompt, choices=list(letters), top_logprobs=5))
    return out


def dump_results(path: Path) -> list[tuple[str, str, str, str | None]]:
    """Every (request_id, fp_hash, result JSON, error) row of a journal file, sorted."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT request_id, fp_hash, result, error FROM results ORDER BY request_id, fp_hash").fetchall()
    finally:
        db.close()
