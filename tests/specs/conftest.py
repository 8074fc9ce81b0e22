"""Fixtures for the study-spec and twin tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from spec_helpers import SHARED_DATA

from auditlang.plan.model import Plan
from auditlang.plan.planner import build_plan
from auditlang.resolve.spec import Spec


@pytest.fixture(autouse=True)
def _pool_data_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # Off-type / plausible-wrong answers (study 001 §3.3) load their dataset pool through
    # AUDITLANG_DATA_ROOT; the planner does not hand its loaded items to the protocol yet.
    if SHARED_DATA.is_dir():
        monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(SHARED_DATA))


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The study specs name Hub splits with the local copies as fallbacks: offline, with the test
    # machine's cache holding none of them, every dataset is read from its fallback file, on a
    # machine with network access or without (CI sets HF_HUB_OFFLINE=1 too).
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def plan_with_data(shared_data: Path) -> Callable[[Spec], Plan]:
    def run(spec: Spec) -> Plan:
        return build_plan(spec, data_root=str(shared_data))

    return run
