"""Every study twin in examples/ runs end to end with `auditc run` (1 item per dataset here;
the committed reports under examples/reports/ come from full runs of the same specs)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
TWINS = sorted(REPO.glob("examples/s00*_twin.audit"))


@pytest.mark.parametrize("spec", TWINS, ids=lambda p: p.stem)
def test_twin_runs_end_to_end(spec: Path, tmp_path: Path, shared_data: Path, capsys) -> None:
    out = tmp_path / spec.stem
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--limit", "1", "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err[-3000:]
    records = pd.read_parquet(out / "records.parquet")
    assert len(records) > 0
    assert (out / "metrics" / "cells.csv").exists()
    report = out / "report"
    assert (report / "index.md").exists()
    assert any(report.glob("checklist.*"))
    # issue 11: report files name no machine path (run files relative, data by name + sha256)
    for f in report.rglob("*"):
        if f.suffix in (".md", ".tex", ".html", ".json", ".csv"):
            text = f.read_text(encoding="utf-8")
            for root in (str(tmp_path), str(shared_data), str(REPO)):
                assert root not in text, f"{f.relative_to(report)} names {root}"
    for name in ("disclosure.tex", "disclosure_wide.tex", "methods.tex", "checklist.tex"):
        assert "\\resizebox" not in (report / name).read_text(encoding="utf-8"), name
