"""The dry-run engine: accepts every request kind, runs no model, counts and estimates.

Input: Requests. Output: Results with no model output (``meta`` holds the estimates), plus
running totals on the engine (``counts``, ``prompt_tokens``, ``max_generated_tokens``).
Used by ``auditc plan`` to preview cost. Imports no torch.

Token counts are ESTIMATES, not tokenizer counts: ``ceil(characters / 4)`` per text (a common
rule of thumb for English with BPE vocabularies), plus ``MESSAGE_OVERHEAD_TOKENS`` per chat
message for role markers and separators, plus ``GENERATION_PROMPT_TOKENS`` for the
assistant header a chat template appends.

``AUDITLANG_DRYRUN_DELAY`` (seconds per request, default 0) makes it sleep as a slow engine
would, to rehearse scheduling, progress and fault handling (docs/scale-out.md) without a model.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from auditlang.core.engine import ModelConfig
from auditlang.core.requests import REQUEST_KINDS, Prompt, Request, Result

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
GENERATION_PROMPT_TOKENS = 3


def check_config(config: ModelConfig) -> None:
    """The dry-run engine accepts any configuration."""


def estimate_text_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``: an estimate, not a tokenizer count."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_prompt_tokens(prompt: Prompt) -> int:
    if prompt.text is not None:
        return estimate_text_tokens(prompt.text)
    msgs = prompt.messages or ()
    n = sum(estimate_text_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in msgs)
    return n if prompt.continue_final else n + GENERATION_PROMPT_TOKENS


def estimate_tokens(request: Request) -> tuple[int, int]:
    """``(prompt_tokens, max_generated_tokens)`` for one request (estimates).

    generate: (prompt, max_tokens * n); choice_logprobs and hidden_states: (prompt, 0), one
    forward pass; continuation_logprobs: (prompt + continuation, 0), teacher forcing;
    constrained_choice: (prompt, longest choice), i.e. a guided decoder's worst case.
    Raises ValueError for a request missing a required parameter.
    """
    p = request.p
    prompt = estimate_prompt_tokens(request.prompt)

    def need(key: str) -> Any:
        if p.get(key) is None:
            raise ValueError(f"request {request.id} ({request.kind}) is missing parameter {key!r}")
        return p[key]

    if request.kind == "generate":
        return prompt, int(need("max_tokens")) * int(p.get("n", 1) or 1)
    if request.kind == "continuation_logprobs":
        return prompt + estimate_text_tokens(str(need("continuation"))), 0
    if request.kind == "constrained_choice":
        return prompt, max(estimate_text_tokens(str(c)) for c in need("choices"))
    if request.kind == "choice_logprobs":
        need("choices")
    return prompt, 0


class DryRunEngine:
    """Serves every kind with empty Results; keeps request counts and token estimates."""

    engine_name = "dryrun"

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.counts: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.max_generated_tokens = 0
        self.delay = float(os.environ.get("AUDITLANG_DRYRUN_DELAY", "0") or 0)  # simulated seconds per request

    def capabilities(self) -> frozenset[str]:
        return frozenset(REQUEST_KINDS)

    def fingerprint(self) -> dict[str, Any]:
        return {"engine": self.engine_name, "model": self.config.path, "estimate": f"chars/{CHARS_PER_TOKEN}"}

    def run(self, requests: Iterable[Request]) -> Iterator[Result]:
        for r in requests:
            if self.delay > 0:
                time.sleep(self.delay)
            try:
                prompt, generated = estimate_tokens(r)
            except ValueError as e:
                yield Result(request_id=r.id, kind=r.kind, error=str(e), meta={"dry_run": True})
                continue
            self.counts[r.kind] += 1
            self.prompt_tokens += prompt
            self.max_generated_tokens += generated
            yield Result(request_id=r.id, kind=r.kind,
                         meta={"dry_run": True, "prompt_tokens_est": prompt, "max_generated_tokens_est": generated})

    def summary(self) -> dict[str, Any]:
        """Totals so far: requests by kind and estimated tokens."""
        return {
            "requests": sum(self.counts.values()),
            "by_kind": dict(sorted(self.counts.items())),
            "prompt_tokens_est": self.prompt_tokens,
            "max_generated_tokens_est": self.max_generated_tokens,
        }

    def close(self) -> None:
        return None
