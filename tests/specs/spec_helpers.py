"""Helpers for the study-spec and twin tests: spec paths, cached compiles and plans, one-audit sub-specs."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from auditlang.plan.model import Plan
from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec
from auditlang.resolve.spec import Spec

REPO = Path(__file__).resolve().parents[2]
SPECS = {
    "s000": REPO / "specs" / "s000_multivariant_audit.audit",
    "s001": REPO / "specs" / "s001_protocol_sensitivity.audit",
    "s002": REPO / "specs" / "s002_language_variations.audit",
    "s003": REPO / "specs" / "s003_accuracy_controlled.audit",
    "s004": REPO / "specs" / "s004_probe_consistency.audit",
}
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
TWINS = {study: REPO / "examples" / f"{study}_twin.audit" for study in SPECS}


@cache
def compiled(path: Path) -> Spec:
    return compile_spec(path)


@cache
def declared_plan(path: Path) -> Plan:
    """The plan from declared sample sizes only (no data read): fast, counts only."""
    return build_plan(compiled(path), load_data=False)


def only_audit(spec: Spec, audit: str, models: list[str] | None = None) -> Spec:
    """A copy of ``spec`` keeping one audit (optionally fewer models) and no comparisons."""
    objects = {k: v for k, v in spec.objects.items() if v.kind not in ("audit", "compare") or k == audit}
    if models is not None:
        a = objects[audit]
        objects[audit] = dataclasses.replace(a, value=a.value.model_copy(update={"models": models}))
    return dataclasses.replace(spec, objects=objects)
