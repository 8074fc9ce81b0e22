"""Fixtures for the evaluator/parser tests: dataset items and the study texts."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


@pytest.fixture(scope="session")
def papers() -> Path:
    p = SHARED / "papers"
    if not p.is_dir():
        pytest.skip(f"study texts not found at {p}")
    return p


@pytest.fixture(scope="session")
def paper_text(papers: Path):
    def read(prefix: str) -> str:
        (path,) = papers.glob(f"{prefix}_*.txt")
        return path.read_text(encoding="utf-8")

    return read


@pytest.fixture
def mc4() -> dict:
    return {
        "question": "Which planet is largest?",
        "choices": ["Mars", "Jupiter", "Venus", "Earth"],
        "answer": "Jupiter",
        "answer_index": 1,
        "aliases": None,
    }


@pytest.fixture
def mc10() -> dict:
    return {
        "question": "Pick the tenth.",
        "choices": [f"option {i}" for i in range(10)],
        "answer": "option 9",
        "answer_index": 9,
        "aliases": None,
    }


@pytest.fixture
def sst2() -> dict:
    return {"question": "a gorgeous film .", "choices": ["negative", "positive"], "answer": "positive",
            "answer_index": 1, "aliases": None}


@pytest.fixture
def trivia() -> dict:
    return {
        "question": "What type of animal is a dik-dik?",
        "choices": None,
        "answer": "Antelope",
        "answer_index": None,
        "aliases": ["Botswanan Antelopes", "Antelope", "Antilopina", "Antelopes", "Hybrid antelope"],
    }
