"""Fixtures for the prompt-layer tests: real items from /work/shared/data (never copied)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared"
DATA = SHARED / "data"
PAPERS = SHARED / "papers"


def read_items(name: str, limit: int | None = None) -> list[dict[str, Any]]:
    path = DATA / f"{name}.jsonl"
    if not path.is_file():
        pytest.skip(f"shared data file {path} not available")
    items = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            items.append(json.loads(line))
            if limit is not None and len(items) >= limit:
                break
    return items


def paper_text(prefix: str) -> str:
    matches = sorted(PAPERS.glob(f"{prefix}_*.txt"))
    if not matches:
        pytest.skip(f"paper {prefix} not available under {PAPERS}")
    return matches[0].read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def paper_of() -> Callable[[str], str]:
    """``paper_of("002")`` -> text of that paper."""
    return paper_text


@pytest.fixture(scope="session")
def arc_items() -> list[dict[str, Any]]:
    return read_items("arc_challenge", 50)


@pytest.fixture(scope="session")
def arc_item(arc_items: list[dict[str, Any]]) -> dict[str, Any]:
    return arc_items[0]


@pytest.fixture(scope="session")
def trivia_item() -> dict[str, Any]:
    return read_items("triviaqa", 1)[0]


@pytest.fixture(scope="session")
def sst2_item() -> dict[str, Any]:
    return read_items("sst2", 1)[0]


@pytest.fixture(scope="session")
def mmlu_items() -> list[dict[str, Any]]:
    return read_items("mmlu", 300)
