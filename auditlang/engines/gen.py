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


# How a sampled token is drawn on a GPU (in the hf engine's fingerprint there; a CPU keeps
# `_sample`, torch.multinomial with the sample's own generator, and its fingerprint is unchanged).
SAMPLER = "gumbel-fmix32/1"


def _i32(x: int) -> int:
    """A 32-bit constant as a signed int32 value (two's complement)."""
    return x - (1 << 32) if x >= (1 << 31) else x


def _fmix32(h: Any) -> Any:
    """MurmurHash3's 32-bit finaliser on int32 tensors: products wrap (two's complement, on a
    CPU and on CUDA), logical right shifts are arithmetic shifts masked."""
    h = h ^ ((h >> 16) & 0xFFFF)
    h = h * _i32(0x85EBCA6B)
    h = h ^ ((h >> 13) & 0x7FFFF)
    h = h * _i32(0xC2B2AE35)
    return h ^ ((h >> 16) & 0xFFFF)


def gumbel_noise(torch: Any, keys: list[int], positions: list[int], vocab: int, device: Any) -> Any:
    """Standard Gumbel noise [rows, vocab] (float32), a pure function of (key, position, token id):
    counter-based like vLLM's model runner v2 (``murmur3(seed, position, token_id)``), so a draw
    needs no generator state and does not depend on the batch."""
    k = torch.tensor([[_i32(key & 0xFFFFFFFF), _i32((key >> 32) & 0xFFFFFFFF), _i32(pos & 0xFFFFFFFF)]
                      for key, pos in zip(keys, positions)], dtype=torch.int32, device=device)
    row = _fmix32(k[:, 0] ^ _fmix32(k[:, 1] ^ _i32(0x5BD1E995)))
    row = _fmix32(row ^ (k[:, 2] * _i32(0x9E3779B1)))
    tok = torch.arange(vocab, dtype=torch.int32, device=device) * _i32(0x27D4EB2F)
    h = _fmix32(row[:, None] ^ tok[None, :])
    u = ((h & 0xFFFFFF).float() + 0.5) / 16777216.0  # 24 bits, in (0, 1)
    return -torch.log(-torch.log(u))


def filtered_probs(torch: Any, logits: Any, specs: list[_GenSpec]) -> Any:
    """Sampling probabilities of each row of ``logits`` ([rows, vocab]) under its spec:
    temperature, then top-k, then nucleus (top-p), in vLLM's order (``apply_top_k_top_p``):
    top-k keeps every token whose probability reaches the k-th largest (ties at the k-th stay)
    and renormalises, top-p then keeps the best tokens until the mass of strictly better ones
    reaches p (the token that crosses p is kept; not renormalised: both samplers below only need
    the proportions)."""
    dev = logits.device
    vocab = logits.shape[-1]
    temps = torch.tensor([s.temperature for s in specs], dtype=torch.float32, device=dev)
    probs = torch.softmax(logits.float() / temps[:, None], dim=-1)
    ks = [s.top_k if 0 < s.top_k < vocab else 0 for s in specs]
    if any(ks):
        top = torch.topk(probs, max(ks), dim=-1).values
        kth = top.gather(1, torch.tensor([max(k, 1) - 1 for k in ks], device=dev)[:, None])
        kept = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        has_k = torch.tensor([k > 0 for k in ks], device=dev)[:, None]
        probs = torch.where(has_k, kept / kept.sum(dim=-1, keepdim=True), probs)
    if any(s.top_p < 1.0 for s in specs):
        ps = torch.tensor([s.top_p if s.top_p < 1.0 else float("inf") for s in specs], dtype=torch.float32, device=dev)
        sorted_p, order = torch.sort(probs, descending=True, dim=-1)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of strictly better tokens
        sorted_p = torch.where(before >= ps[:, None], torch.zeros_like(sorted_p), sorted_p)
        probs = torch.zeros_like(probs).scatter_(1, order, sorted_p)
    return probs


def sample_rows(torch: Any, logits: Any, specs: list[_GenSpec], keys: list[int], positions: list[int]) -> Any:
    """One sampled token per row of ``logits`` ([rows, vocab]), all rows at once on their device
    (the hf engine's sampler on a GPU).

    The probabilities are :func:`filtered_probs`'s, as for :func:`_sample`. The draw is the
    Gumbel-max trick: ``argmax(log p + g)`` with ``g`` from :func:`gumbel_noise` keyed by the
    sample's seed (``sample_seed(seed, i)``) and the token's position, so sample i of a request
    does not depend on its batch or on n, and float rounding of ``p`` changes a draw only when two
    candidates' perturbed scores are that close (an inverse-CDF draw over the vocabulary does not
    have this property: rounding accumulated along the cumulative sum moves draws among tail
    tokens). A token of probability 0 is never drawn. Returns the chosen ids on the logits' device.
    """
    probs = filtered_probs(torch, logits, specs)
    noise = gumbel_noise(torch, keys, positions, logits.shape[-1], logits.device)
    return (torch.log(probs) + noise).argmax(dim=-1)  # log 0 = -inf: never drawn


def _sample(torch: Any, logits: Any, spec: _GenSpec, gen: Any) -> int:
    """One row's draw on the CPU: :func:`filtered_probs`, then ``torch.multinomial`` with the
    sample's own generator."""
    probs = filtered_probs(torch, logits.float().cpu().reshape(1, -1), [spec])[0]
    return int(torch.multinomial(probs, 1, generator=gen).item())
