"""The LaTeX outputs compile with pdflatex (booktabs from texlive-latex-recommended)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from auditlang.report.latex import unmark, document, escape
from auditlang.report.tables import Table

pytestmark = pytest.mark.latex
PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not installed (Debian: apt-get install -y "
                                    "texlive-latex-base texlive-latex-recommended)")


def compile_tex(src: Path, workdir: Path) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, workdir / src.name)
    return subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", src.name], cwd=workdir,
                          capture_output=True, text=True, timeout=120)


@needs_pdflatex
@pytest.mark.parametrize("name", ["disclosure_standalone.tex", "checklist.tex"])
def test_report_latex_compiles(run, tmp_path, name):
    res = compile_tex(run.report / name, tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]
    pdf = tmp_path / name.replace(".tex", ".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-"


@needs_pdflatex
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) not installed")
def test_standalone_disclosure_starts_on_its_title_page(run, tmp_path):
    res = compile_tex(run.report / "disclosure_standalone.tex", tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]
    page1 = subprocess.run(["pdftotext", "-f", "1", "-l", "1", "-layout", str(tmp_path / "disclosure_standalone.pdf"), "-"],
                           capture_output=True, text=True, check=True).stdout
    assert "Protocol disclosure" in page1 and "Axis" in page1 and "Main setting" in page1, page1[:800]


@needs_pdflatex
def test_disclosure_fragment_is_booktabs(run):
    frag = unmark((run.report / "disclosure.tex").read_text())
    assert frag.count("\\toprule") == frag.count("\\bottomrule") == 2  # one table per audit
    assert "\\textbf{Axis} & \\textbf{Main setting} & \\textbf{Alternative} & \\textbf{Held fixed} & " in frag
    assert "Conditioning context (C4) & context=bare (tok\\_bare) & context=verbal\\_prefix (tok\\_prefix)" in frag


@needs_pdflatex
def test_hostile_text_compiles(tmp_path):
    nasty = 'a\\b {x} <y> "q" 50% $5 a_b ~ ^ | # & – ≥ 0.8 ✗ Ω'
    t = Table("t", nasty, ["col_1", "c%"], notes=[nasty])
    t.add(nasty, 0.5)
    (tmp_path / "x.tex").write_text(document(t.to_latex() + escape(nasty), nasty), encoding="utf-8")
    res = compile_tex(tmp_path / "x.tex", tmp_path / "build")
    assert res.returncode == 0, res.stdout[-3000:]
    assert "[U+03A9]" in escape(nasty)
