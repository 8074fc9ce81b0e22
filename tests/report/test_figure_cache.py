"""An unchanged rerun or `auditc report` reads its figures from report/.figures-cache instead of
drawing them again (issue 27: redrawing unchanged figures was 15 of 20 s of a rerun); any change
to what they are drawn from redraws them. User path: `auditc run` / `auditc report`, dry-run engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

pytest.importorskip("matplotlib")
QUICK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.audit"


def test_unchanged_runs_reuse_the_figures_and_changed_inputs_redraw_them(tmp_path: Path, monkeypatch) -> None:
    from auditlang.report import figures

    calls = []
    real = figures.all_figures
    monkeypatch.setattr(figures, "all_figures", lambda *a: calls.append(1) or real(*a))
    run = tmp_path / "r"
    args = ["run", str(QUICK), "--limit", "2", "--engine", "dryrun", "--out", str(run), "--display", "none"]
    assert main(args) == 0 and len(calls) == 1
    pngs = sorted((run / "report" / "figures").glob("*.png"))
    first = {p.name: p.read_bytes() for p in pngs}
    assert (run / "report" / "report.html").is_file()
    assert main(args) == 0 and main(["report", str(run)]) == 0
    assert len(calls) == 1  # nothing redrawn
    assert {p.name: p.read_bytes() for p in sorted((run / "report" / "figures").glob("*.png"))} == first
    cells = run / "metrics" / "cells.csv"
    cells.write_text(cells.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # edited by hand:
    assert main(["report", str(run)]) == 0 and len(calls) == 1  # recomputed from the records (store/integrity.py): same inputs
    edited = tmp_path / "quickstart.audit"  # an input really changed: the spec the report adopts
    edited.write_text(QUICK.read_text(encoding="utf-8") + "\n# edited: the report adopts this spec\n", encoding="utf-8")
    assert main(["report", str(run), "--spec", str(edited)]) == 0 and len(calls) == 2


def test_stored_figures_read_back_byte_for_byte(tmp_path: Path) -> None:
    from auditlang.report import _read_figure_cache, _write_figure_cache
    from auditlang.report.figures import Figure

    figs = [Figure("reliability_a_m", "Reliability: a, m", b"\x89PNG one", b"%PDF one"),
            Figure("spread_c", "Spread: c", b"\x89PNG two", b"%PDF two")]
    _write_figure_cache(tmp_path / "c", "k1", figs)
    back = _read_figure_cache(tmp_path / "c", "k1")
    assert [(f.name, f.title, f.png, f.pdf) for f in back] == [(f.name, f.title, f.png, f.pdf) for f in figs]
    assert _read_figure_cache(tmp_path / "c", "k2") is None  # another key: drawn again
    written = back[0].write(tmp_path / "out")
    assert [p.read_bytes() for p in written] == [figs[0].png, figs[0].pdf]


def test_a_run_without_matplotlib_reports_figures_as_not_computable(tmp_path: Path, monkeypatch) -> None:
    """Without the `report` extra (e.g. the vLLM CPU venv) a run that asks for figures finishes;
    the figures are named not computable instead of an internal error from the cache key."""
    import importlib.metadata as md
    import sys

    real_version = md.version

    def version(name: str) -> str:
        if name == "matplotlib":
            raise md.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(md, "version", version)
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.") or m == "auditlang.report.figures"]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    run = tmp_path / "r"
    rc = main(["run", str(QUICK), "--limit", "2", "--engine", "dryrun", "--out", str(run), "--display", "none"])
    assert rc == 0
    assert not list((run / "report").rglob("*.png"))
    text = "\n".join(p.read_text(encoding="utf-8") for p in (run / "report").glob("*.md"))
    assert "figures need matplotlib" in text
