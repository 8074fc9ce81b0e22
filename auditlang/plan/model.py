"""The plan artifact: cells, unique requests and counts. Versioned, hashable, JSON-serialisable."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from auditlang.core.requests import Request, canonical_json
from auditlang.prompts.seeds import REQUEST_SEED_RULE

PLAN_VERSION = "auditlang.plan/1"


@dataclass(frozen=True)
class Cell:
    """One evaluated configuration: model x dataset x variant x protocol x evaluator (in one audit)."""

    id: str
    audit: str
    model: str
    dataset: str
    variant: str
    protocol: str
    evaluator: str
    hash: str
    n_items: int
    n_dev: int = 0
    estimated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Plan:
    version: str
    spec_path: str
    spec_hash: str
    seed: int
    cells: list[Cell]
    requests: list[Request]  # unique stage-1 requests (exact when data is present)
    deferred: list[dict[str, Any]]  # stage-2 request counts per (model, role, kind): built at run time
    naive_request_count: int
    datasets: dict[str, dict[str, Any]]
    estimated: bool  # True when some dataset was not available and counts come from declared sizes
    notes: list[str] = field(default_factory=list)
    token_estimate: dict[str, int] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    # without data: stage-1 counts from declared sizes, [{"model", "kind", "count"}] (not hashed)
    estimated_stage1: list[dict[str, Any]] = field(default_factory=list)
    # follow-up (stage 2 / cross) token estimate, from the stage-1 prompts of the same model (not hashed)
    token_estimate_followups: dict[str, int] = field(default_factory=dict)
    # model -> its stage-1 and follow-up token estimate (planner._tokens_by_model; not serialised)
    tokens_by_model: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    # in-memory only: what the runner needs (not serialised)
    units: dict[tuple, list] = field(default_factory=dict, repr=False)
    # (model, kind) -> unique stage-1 requests; a lean plan (``auditc plan``) keeps these counts
    # and no Request objects (``requests`` is empty, ``lean`` is True, units hold no items)
    request_counts: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    lean: bool = field(default=False, repr=False)
    # (model, kind, core.capabilities.call_shape) -> unique stage-1 requests: what each engine executes
    call_shapes: dict[tuple[str, str, str], int] = field(default_factory=dict, repr=False)
    sources: dict[str, Any] = field(default_factory=dict, repr=False)  # dataset id -> DatasetItems read (incl. dev sets)
    warnings: list = field(default_factory=list, repr=False)  # warning Diagnostics of planning (data warnings)

    @property
    def hash(self) -> str:
        """The plan's content hash (as stored in ``plan.json``)."""
        return self.to_dict(include_requests=False)["hash"]

    def runs_as(self, mid: str) -> str:
        """The model whose requests ``mid``'s cells read: itself, or the earlier model with the
        same declaration (``models[mid]["shares_requests_of"]``, resolve/models.py)."""
        return self.models.get(mid, {}).get("shares_requests_of", mid)

    @property
    def deferred_count(self) -> int:
        return sum(d["count"] for d in self.deferred)

    @property
    def estimated_stage1_count(self) -> int:
        return sum(d["count"] for d in self.estimated_stage1)

    @property
    def stage1_exact_count(self) -> int:
        """Unique stage-1 requests rendered from the data (``len(requests)`` of a full plan)."""
        return sum(self.request_counts.values()) if self.lean else len(self.requests)

    @property
    def unique_request_count(self) -> int:
        return self.stage1_exact_count + self.estimated_stage1_count + self.deferred_count

    def model_kinds(self, model: str) -> frozenset[str]:
        """Request kinds this plan sends ``model`` in any stage: stage 1 (rendered or estimated),
        stage 2 follow-ups, cross-stage and judge requests (``deferred``), as `auditc plan`'s
        "requests by model and kind" table counts them."""
        kinds = {k for (m, k), n in self.request_counts.items() if m == model and n}
        if not self.request_counts:  # a plan built elsewhere: count its requests
            kinds |= {r.kind for r in self.requests if r.model == model}
        kinds |= {d["kind"] for d in (*self.deferred, *self.estimated_stage1) if d["model"] == model and d["count"]}
        return frozenset(kinds)

    def to_dict(self, include_requests: bool = True) -> dict[str, Any]:
        d = {
            "version": self.version,
            "spec": {"path": self.spec_path, "hash": self.spec_hash},
            "seed": self.seed,
            "sampling_seeds": REQUEST_SEED_RULE,
            "estimated": self.estimated,
            "notes": self.notes,
            "models": self.models,
            "datasets": self.datasets,
            "naive_request_count": self.naive_request_count,
            "unique_request_count": self.unique_request_count,
            "stage1_request_count": self.stage1_exact_count + self.estimated_stage1_count,
            "deferred_request_count": self.deferred_count,
            "token_estimate": self.token_estimate,
            "cells": [c.to_dict() for c in self.cells],
            "deferred": self.deferred,
        }
        if include_requests and self.lean:
            raise ValueError("a lean plan keeps no requests: plan with lean=False, or stream them (plan.sink)")
        d["requests"] = [r.to_dict() for r in self.requests] if include_requests else []
        if self.estimated_stage1:
            d["estimated_stage1"] = self.estimated_stage1
        if self.token_estimate_followups:
            d["token_estimate_followups"] = self.token_estimate_followups
        d["hash"] = plan_hash(d)
        return d


def plan_hash(d: dict[str, Any]) -> str:
    """Content hash of a plan; machine-specific paths are left out, so the same spec and data
    give the same hash in any checkout."""
    return hashlib.sha256(canonical_json(plan_body(d)).encode()).hexdigest()[:16]


def plan_body(d: dict[str, Any]) -> dict[str, Any]:
    """What :func:`plan_hash` hashes (canonical JSON of it)."""
    body = {k: v for k, v in d.items()
            if k not in ("hash", "notes", "spec", "datasets", "estimated_stage1", "token_estimate_followups")}
    body["spec"] = d.get("spec", {}).get("hash")
    # where the files lie and why a hub split was not available offline do not change what is run
    body["datasets"] = {k: {kk: vv for kk, vv in v.items() if kk not in ("path", "hub_unavailable")}
                        for k, v in d.get("datasets", {}).items()}
    return body


def content_hash(*parts: Any) -> str:
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()[:16]
