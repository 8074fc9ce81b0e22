"""The LaTeX outputs compile with pdflatex (booktabs from texlive-latex-recommended)."""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
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
    assert "$\\Omega$" in escape(nasty)  # Greek is mapped (issue 34 item 5), no [U+03A9]


@needs_pdflatex
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) not installed")
def test_non_ascii_text_prints_its_characters(tmp_path):
    """issue 34 item 5: `§`, `–`, `é`, `≤` (and other Latin letters, Greek, symbols) come out as
    themselves in the PDF, never as [U+XXXX]; CJK falls back to its code point with a note."""
    text = "See § 4.2 – café, naïve, Škoda, Øre, straße; p ≤ 0.05, ≠ 1, α = 0.1, 20 °, ECE ↓ AUROC ↑; 中文"
    t = Table("t", "Non-ASCII " + text, ["column"], notes=[text])
    t.add(text)
    (tmp_path / "u.tex").write_text(document(t.to_latex() + escape(text), "Unicode"), encoding="utf-8")
    res = compile_tex(tmp_path / "u.tex", tmp_path / "build")
    assert res.returncode == 0, res.stdout[-3000:]
    pdf = subprocess.run(["pdftotext", str(tmp_path / "build" / "u.pdf"), "-"], capture_output=True, text=True,
                         check=True).stdout
    # pdftotext gives accents as combining marks, ï as a dotless i + diaeresis, ≠ as "=" with a
    # combining slash and ° as \circ: composed back before comparing
    flat = unicodedata.normalize("NFC", " ".join(pdf.split()))
    flat = flat.replace("ı\u0308", "ï").replace("\u0338=", "≠").replace("◦", "°")
    for want in ("§", "–", "café", "naïve", "Škoda", "Øre", "straße", "≤", "≠", "α", "°", "↓", "↑"):
        assert want in flat, (want, flat[:600])
    assert "[U+00A7]" not in flat and "[U+00E9]" not in flat and "[U+2193]" not in flat  # 002 Table 1's arrows
    assert "[U+4E2D][U+6587]" in flat and "have no glyph in the fonts pdflatex uses" in flat


UNICODE_SPEC = '''import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=42)
model m = hf("org/tiny", dtype=float32, batch_size=4, max_tokens=8)
template t = template("""Règle § 4.2 – réponds (p ≤ 0.5, A → B), 中文:
{{ question }}
{% for c in choices %}{{ c }}
{% endfor %}Answer:""")
variant v = variant(multiple_choice=t)
audit a {
  models = [m]
  datasets = [arc]
  variants = [v]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}
report cells, checklist(format=both), disclosure(format=both)
'''


@needs_pdflatex
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) not installed")
def test_template_characters_print_in_the_checklist_pdf(tmp_path, shared_data):
    """issue 34 item 5, the user's path: a template with `§`, `–`, `é`, `≤`, `→` and CJK, `auditc
    run`, pdflatex on the checklist: the prompt shown verbatim has its characters; CJK falls back
    to its code point with the note."""
    from auditlang.cli import main

    spec = tmp_path / "u.audit"
    spec.write_text(UNICODE_SPEC, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--engine", "dryrun",
                 "--no-progress"]) == 0
    tex = (out / "report" / "checklist.tex").read_text(encoding="utf-8")
    assert "[U+00A7]" not in tex and "[U+00E9]" not in tex and "[U+2192]" not in tex
    res = compile_tex(out / "report" / "checklist.tex", tmp_path / "build")
    assert res.returncode == 0, res.stdout[-3000:]
    pdf = subprocess.run(["pdftotext", str(tmp_path / "build" / "checklist.pdf"), "-"], capture_output=True,
                         text=True, check=True).stdout
    flat = unicodedata.normalize("NFC", " ".join(pdf.split()))
    for want in ("§ 4.2", "–", "è", "é", "≤ 0.5", "→"):
        assert want in flat, want
    assert "[U+4E2D][U+6587]" in flat and "have no glyph in the fonts pdflatex uses" in flat
