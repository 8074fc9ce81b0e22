"""Decoding settings and chat-template options as the run sends them, for the checklist and disclosure.

Every statement mirrors the request builders: a generation with ``temperature = 0`` is greedy and
carries neither ``top_p`` nor the sampling ``top_k`` (auditlang/protocols/base.py answer_request,
verbal.py, probes.py); self_consistency always samples and always sends its ``top_p`` and
``sample_top_k`` (protocols/consistency.py). Chat-template options are the model parameters
``enable_thinking`` / ``reasoning_effort`` that ``run.runner.model_config`` passes to the engine as
``options["chat_template_kwargs"]`` (engines that apply them also record them in the fingerprint).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from auditlang.protocols.facts import sampling_terms
from auditlang.report import describe as D
from auditlang.report.rundata import RunData
from auditlang.resolve.spec import Resolved
from auditlang.resolve.models import model_config

SAMPLING_FIELDS = ("temperature", "top_p", "sample_top_k")


@dataclass(frozen=True)
class Decoding:
    """The effective decoding of one kind of generation: greedy, or sampled with top_p / top-k."""

    temperature: float
    top_p: float | None
    top_k: int | None  # sampling top-k; None = off
    n: int = 1

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def text(self) -> str:
        if self.greedy:
            return "greedy (temperature 0; top_p and sampling top-k do not apply)"
        k = "off" if not self.top_k else str(self.top_k)
        return (f"sampled{f' n={self.n}' if self.n > 1 else ''}: temperature {self.temperature:g}, top_p "
                f"{1.0 if self.top_p is None else self.top_p:g}, sampling top-k {k}")

    def prose(self) -> str:
        """As a methods section says it: 'greedy decoding', 'sampling at temperature 1 (top-p 0.9)'."""
        if self.greedy:
            return "greedy decoding"
        first, *extra = sampling_terms(self.temperature, self.top_p, self.top_k)
        return f"sampling at {first}" + (f" ({', '.join(extra)})" if extra else "")


def decoding_of(obj: Resolved) -> Decoding | None:
    """The decoding a variant or protocol object asks for (None when it makes no sampled-or-greedy
    generation of its own, e.g. token-probability readouts and fitted probes)."""
    v = obj.value
    if not hasattr(v, "temperature"):
        return None
    if hasattr(v, "sampled_runs"):  # the protocol samples answers itself: that many per item
        return Decoding(float(v.temperature), float(v.top_p), v.sample_top_k, v.sampled_runs())
    t = float(v.temperature)
    return Decoding(t, float(v.top_p) if t > 0 else None, v.sample_top_k if t > 0 else None)


def decoding_flags(obj: Resolved, what: str) -> list[str]:
    """UNSPECIFIED flags for the decoding parameters that matter and were left at their default:
    the temperature always; top_p and sample_top_k only when the generation samples."""
    dec = decoding_of(obj)
    if dec is None:
        return []
    fields = ("temperature",) if dec.greedy else SAMPLING_FIELDS
    return [f for f in (D.unspecified(obj, p, f"{what} {p}") for p in fields) if f]


def planned_decoding(rd: RunData, aid: str, *, variant: str | None = None, protocol: str | None = None,
                     roles: tuple[str, ...] | None = None) -> Counter | None:
    """Decoding of the planned stage-1 ``generate`` requests of an audit (test split), counted;
    None when the plan holds no requests for it (data not available, or only stage-2 requests)."""
    got: Counter = Counter()
    seen: set[str] = set()  # protocols of a cell share the answer request: count unique requests
    for key, unit in getattr(rd.plan, "units", {}).items():
        if key[0] != aid or key[4] != "test" or (variant is not None and key[3] != variant):
            continue
        for pid, per_item in unit.stage1.items():
            if protocol is not None and pid != protocol:
                continue
            for reqs in per_item:
                for role, r in reqs.items():
                    if r.kind != "generate" or (roles is not None and role not in roles) or r.id in seen:
                        continue
                    seen.add(r.id)
                    p = dict(r.params)
                    t = float(p.get("temperature", 0.0) or 0.0)
                    got[Decoding(t, p.get("top_p"), p.get("top_k") or None, int(p.get("n", 1) or 1))] += 1
    return got or None


def planned_text(got: Counter | None, expected: Decoding) -> tuple[str, bool]:
    """(statement, agrees): the plan's unique requests checked against the spec's decoding."""
    if not got:
        return "not computable from the plan (no planned stage-1 generate requests here)", True
    n = sum(got.values())
    if set(got) == {expected}:
        return f"all {n} unique planned requests decode this way", True
    return "planned requests: " + "; ".join(f"{k} x {d.text()}" for d, k in got.most_common()), False


def chat_template_options(rd: RunData, mid: str) -> dict[str, Any]:
    """The chat-template variables the run passes for model ``mid`` ({} when none are set)."""

    return dict(model_config(rd.spec, mid).options.get("chat_template_kwargs") or {})


def is_chat(rd: RunData, mid: str) -> bool:

    return bool(model_config(rd.spec, mid).chat)


def kwargs_text(kw: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(kw.items()))


def all_models(rd: RunData) -> list[str]:
    """Audited models, then judge models of the audits' evaluators (they render chat prompts too)."""
    out = [m for aid in rd.audit_ids() for m in rd.audit(aid).models]
    return list(dict.fromkeys(out + rd.spec.judge_models(rd.audit_ids())))


__all__ = ["Decoding", "all_models", "chat_template_options", "decoding_flags", "decoding_of", "is_chat",
           "kwargs_text", "planned_decoding", "planned_text"]
