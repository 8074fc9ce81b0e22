"""Generation requests as engines read them (``_GenSpec``), per-sample seeds and CPU sampling.

Shared by the hf engine's decoder (``hf.py``, ``hf_generate.py``) and the vLLM engine, so a
request means the same thing to every engine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from auditlang.core.requests import Request, TokenLogprob
from auditlang.engines.params import float_param as _float, int_param as _int, sampling_top_k


def sample_seed(seed: int, index: int) -> int:
    """The generator seed of sample ``index`` of a request with ``seed`` (stable across runs)."""
    digest = hashlib.sha256(f"auditlang-sample:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass
class _GenState:
    ids: list[int] = field(default_factory=list)
    tokens: list[TokenLogprob] = field(default_factory=list)
    done: bool = False
    reason: str = "length"
    text: str | None = None  # set when a stop string cut it


@dataclass
class _GenSpec:
    max_tokens: int
    temperature: float
    top_p: float
    n: int
    top_logprobs: int
    stop: tuple[str, ...]
    seed: int
    clamped: bool = False
    top_k: int = 0  # sampling top-k (0 = off), applied before top_p
    first_top_logprobs: int = 0  # a wider window at the first generated position only

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def logprobs(self) -> int:
        """The widest window this request needs at any position."""
        return max(self.top_logprobs, self.first_top_logprobs)

    def window_at(self, position: int) -> int:
        return max(self.top_logprobs, self.first_top_logprobs) if position == 0 else self.top_logprobs

    @staticmethod
    def parse(req: Request) -> "_GenSpec":
        p = req.p
        stop = p.get("stop") or ()
        if isinstance(stop, str):
            stop = (stop,)
        if not all(isinstance(s, str) for s in stop):
            raise ValueError(f"generate: stop must be a list of strings (got {stop!r})")
        temperature = _float(p, "temperature", 0.0, lo=0.0)
        top_p = _float(p, "top_p", 1.0, lo=0.0)
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"generate: top_p must be in (0, 1] (got {top_p})")
        return _GenSpec(
            max_tokens=_int(p, "max_tokens", None, lo=1),
            temperature=temperature,
            top_p=top_p,
            n=_int(p, "n", 1, lo=1),
            top_logprobs=_int(p, "top_logprobs", 0, lo=0),
            stop=tuple(stop),
            seed=int(req.seed),
            top_k=sampling_top_k(p),
            first_top_logprobs=_int(p, "first_top_logprobs", 0, lo=0),
        )


def _sample(torch: Any, logits: Any, spec: _GenSpec, gen: Any) -> int:
    """Temperature, then top-k, then nucleus (top-p) sampling on the CPU with the sample's
    generator; vLLM's order (``apply_top_k_top_p``): top-k keeps every token whose probability
    reaches the k-th largest (ties at the k-th stay), top-p then works on the renormalised rest."""
    probs = torch.softmax(logits.float().cpu() / spec.temperature, dim=-1)
    if 0 < spec.top_k < probs.shape[-1]:
        kth = torch.topk(probs, spec.top_k).values[-1]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    if spec.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of strictly better tokens
        sorted_p[before >= spec.top_p] = 0.0  # the token that crosses top_p is kept
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_p)
    return int(torch.multinomial(probs, 1, generator=gen).item())
