"""Fixtures for protocol-program tests (helpers live in protocol_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol_helpers import SpecBuilder


@pytest.fixture
def sb(tmp_path: Path) -> SpecBuilder:
    return SpecBuilder(tmp_path)
