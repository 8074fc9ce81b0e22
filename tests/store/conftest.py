"""Fixtures for the store and executor tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_fake_engine import DATA, HashEngine, arc_requests  # noqa: E402

from auditlang.core.requests import Request  # noqa: E402
from auditlang.store import Journal  # noqa: E402



@pytest.fixture(scope="session", autouse=True)
def _shared_data() -> None:
    if not (DATA / "arc_challenge.jsonl").is_file():
        pytest.fail(f"shared test data missing: {DATA / 'arc_challenge.jsonl'}")


@pytest.fixture
def requests_100() -> list[Request]:
    """100 requests (50 ARC items x {generate, choice_logprobs})."""
    return arc_requests(50)


@pytest.fixture
def engine() -> HashEngine:
    return HashEngine()


@pytest.fixture
def journal(tmp_path: Path):
    with Journal(tmp_path / "run") as j:
        yield j
