"""Fixtures for the report tests: one synthetic run directory and its report, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_fixtures import DATA, Run, build_run  # noqa: E402


@pytest.fixture(scope="session")
def run(tmp_path_factory) -> Run:
    if not (DATA / "arc_challenge.jsonl").is_file():
        pytest.fail(f"shared test data missing: {DATA}")
    from auditlang.report import build_report

    spec, plan, run_dir = build_run(tmp_path_factory.mktemp("report"))
    return Run(spec, plan, run_dir, build_report(spec, plan, run_dir))
