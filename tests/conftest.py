"""Shared pytest options: ``--update-goldens`` (or ``AUDITLANG_UPDATE_GOLDENS=1``) rewrites golden
files instead of comparing; without it a missing golden file fails the test (it is never
written silently, so CI cannot pass on a golden it just wrote)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The suite never reaches the network (servers it needs run on loopback): the Hub clients stay
# offline, as `.ci/run` sets them, so the README's test command behaves the same on a developer's
# machine (a scripted test model named by a Hub id passes the host-consent check offline).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
SHARED_DATA = SHARED / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files (parse trees, diagnostics, plans) from the current output")


UPDATE_GOLDENS_ENV = "AUDITLANG_UPDATE_GOLDENS"


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens")) or os.environ.get(UPDATE_GOLDENS_ENV, "") not in ("", "0")


@pytest.fixture
def golden(update_goldens: bool):
    """``golden(path, text)``: compare with (or, under --update-goldens, rewrite) a golden file;
    a missing golden file fails."""

    def check(path: Path, text: str) -> None:
        if not update_goldens and not path.exists():
            pytest.fail(f"golden file {path} is missing; run pytest --update-goldens (or {UPDATE_GOLDENS_ENV}=1) "
                        "and commit it")
        if update_goldens:
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
