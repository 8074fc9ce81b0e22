"""Golden plans: cell ids, cell hashes, request ids and counts are stable across runs and machines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "goldens" / "plan"


def normalised_plan(spec_path: Path, data_root: Path | None = None) -> str:
    plan = build_plan(compile_spec(spec_path), data_root=str(data_root) if data_root else None).to_dict()
    out = {
        "version": plan["version"],
        "hash": plan["hash"],
        "naive_request_count": plan["naive_request_count"],
        "unique_request_count": plan["unique_request_count"],
        "estimated": plan["estimated"],
        "datasets": {k: {kk: vv for kk, vv in v.items() if kk != "path"} for k, v in plan["datasets"].items()},
        "cells": [[c["id"], c["hash"], c["n_items"]] for c in plan["cells"]],
        "requests": sorted(r["id"] for r in plan["requests"]),
        "deferred": plan["deferred"],
    }
    return json.dumps(out, indent=1, sort_keys=True) + "\n"


def test_quickstart_plan_golden(golden) -> None:
    golden(GOLDEN / "quickstart.json", normalised_plan(REPO / "examples" / "quickstart_full.audit"))


@pytest.mark.parametrize("name", ["s000_twin"])
def test_twin_plan_golden(name: str, golden, shared_data: Path) -> None:
    path = REPO / "examples" / f"{name}.audit"
    if not path.exists():
        pytest.skip(f"{path} not present")
    golden(GOLDEN / f"{name}.json", normalised_plan(path, shared_data))
