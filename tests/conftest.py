"""Shared pytest options: ``--update-goldens`` rewrites golden files instead of comparing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
SHARED_DATA = SHARED / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files (parse trees, diagnostics, plans) from the current output")


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture
def golden(update_goldens: bool):
    """``golden(path, text)``: compare with (or, under --update-goldens, rewrite) a golden file."""

    def check(path: Path, text: str) -> None:
        if update_goldens or not path.exists():
            if not update_goldens and os.environ.get("CI"):
                pytest.fail(f"golden file {path} is missing; run pytest --update-goldens and commit it")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"output differs from golden {path.name}; if intended, rerun with --update-goldens"

    return check


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
