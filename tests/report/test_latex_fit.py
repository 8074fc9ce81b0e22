"""Generated LaTeX fits a paper as it is (issue 11): compiled with pdflatex in a plain article,
one- and two-column, with zero overfull \\hbox, no scaling, tables at \\footnotesize or larger and
no Type 3 font. Checked on the report fixture's run (every output) and on every committed
example report under examples/reports/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from latex_fit import PDFLATEX, SCALING, compile_fit

pytestmark = pytest.mark.latex
needs_pdflatex = pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not installed (Debian: apt-get install -y "
                                    "texlive-latex-base texlive-latex-recommended texlive-latex-extra)")
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "examples" / "reports").glob("*/*.tex") if p.name != "disclosure_standalone.tex")
# (file, two-column article?): the one-column table also fits a column of a two-column article
LAYOUTS = [("disclosure.tex", False), ("disclosure.tex", True), ("disclosure_wide.tex", True),
           ("methods.tex", False), ("methods.tex", True), ("checklist.tex", False), ("checklist.tex", True)]
TABLES = ("disclosure.tex", "disclosure_wide.tex", "methods.tex")


def check(tex: Path, workdir: Path, twocolumn: bool) -> None:
    src = tex.read_text(encoding="utf-8")
    assert not SCALING.findall(src), f"{tex.name}: scaled or tiny type: {set(SCALING.findall(src))}"
    fit = compile_fit(tex, workdir, twocolumn)
    assert fit.returncode == 0, fit.log[-3000:]
    assert fit.overfull == [], f"{tex.name} ({'two' if twocolumn else 'one'}-column): {fit.overfull}"
    assert fit.too_large == [], f"{tex.name} ({'two' if twocolumn else 'one'}-column): float too large by {fit.too_large}"
    assert not [n for n, t in fit.fonts if t == "Type 3"], fit.fonts
    if tex.name in TABLES:  # \footnotesize at 10pt is 8pt: no Computer Modern font below that size
        assert fit.min_cm_size() is not None and fit.min_cm_size() >= 8, fit.fonts
    if tex.name.startswith("disclosure"):
        assert ("\\begin{table*}" in src) == (tex.name == "disclosure_wide.tex")
        assert "\\footnotesize" in src and "\\begin{tabularx}{\\linewidth}" in src


@needs_pdflatex
@pytest.mark.parametrize("name,twocolumn", LAYOUTS, ids=[f"{n}-{'two' if t else 'one'}" for n, t in LAYOUTS])
def test_fixture_report_latex_fits(run, tmp_path, name, twocolumn):
    check(run.report / name, tmp_path, twocolumn)


@needs_pdflatex
@pytest.mark.parametrize("tex", EXAMPLES, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLES])
@pytest.mark.parametrize("twocolumn", [False, True], ids=["one", "two"])
def test_example_report_latex_fits(tex, tmp_path, twocolumn):
    if tex.name == "disclosure_wide.tex" and not twocolumn:
        pytest.skip("table* is for two-column articles")
    check(tex, tmp_path, twocolumn)


@needs_pdflatex
def test_overfull_and_scaling_are_detected(tmp_path):
    """The measurement itself: an unbreakable 64-digit hash overflows, \\resizebox is refused."""
    bad = tmp_path / "bad.tex"
    bad.write_text("x " + "0123456789abcdef" * 4 + "\n", encoding="utf-8")
    fit = compile_fit(bad, tmp_path / "b", twocolumn=True)
    assert fit.returncode == 0 and fit.overfull
    assert SCALING.findall("\\resizebox{\\linewidth}{!}{x}")


@pytest.mark.parametrize("folder", sorted((REPO / "examples" / "reports").glob("s00*")), ids=lambda p: p.name)
def test_every_example_has_its_latex(folder):
    """Each twin's report carries the LaTeX a paper inputs (its spec asks for disclosure(format=both))."""
    for name in ("disclosure.tex", "disclosure_wide.tex", "methods.tex", "checklist.tex"):
        assert (folder / name).is_file(), f"{folder.name}/{name} (regenerate examples/reports)"


@needs_pdflatex
@pytest.mark.parametrize("twin", ["s000", "s001", "s002", "s004"])
def test_twin_disclosure_fits_a_column_of_a_two_column_article(twin, tmp_path):
    """The identifier macro's breaks (issue 25 item 3) in the narrowest layout: each twin spec's
    disclosure table (built from the spec and plan) in one column of a two-column article."""
    from auditlang.plan.planner import build_plan
    from auditlang.report.disclosure import disclosure_tables
    from auditlang.report.latex import IDENT_DEF
    from auditlang.report.rundata import load_run
    from auditlang.resolve import compile_spec

    data = REPO.parent / "shared" / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is not available")
    spec = compile_spec(REPO / "examples" / f"{twin}_twin.audit")
    rd = load_run(spec, build_plan(spec, str(data), limit=1), tmp_path / "no-run")
    tex = tmp_path / "disclosure.tex"
    tex.write_text(IDENT_DEF + "\n".join(t.to_latex(caption=t.title, label=f"tab:{t.name}")
                                         for t in disclosure_tables(rd)), encoding="utf-8")
    check(tex, tmp_path / "build", twocolumn=True)
    # every lettered note the table moved out of its cells is set (001's lost (c)-(r), issue 41)
    src = tex.read_text(encoding="utf-8")
    marks = set(re.findall(r"see note \(([a-z]+)\)", src))
    assert all(f"({m}) " in src for m in marks)
