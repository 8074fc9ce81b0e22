"""Compile a generated LaTeX file inside a plain article (one- or two-column) and measure the fit.

Imported by test_latex_fit.py. A fragment (disclosure.tex, methods.tex) is \\input as a paper
would; a standalone file (checklist.tex) has its body placed in the test article. The result
lists every overfull \\hbox, the PDF's fonts (pdffonts) and the scaling commands in the source.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PDFLATEX = shutil.which("pdflatex")
PDFFONTS = shutil.which("pdffonts")
PACKAGES = "booktabs,tabularx,array,fvextra,amssymb,xcolor,graphicx"
SCALING = re.compile(r"\\(resizebox|scalebox|tiny|scriptsize)\b")
# Computer Modern fonts carry their design size in the name (CMR8, CMBX10, CMSY8 ...)
CM_SIZE = re.compile(r"\+CM[A-Z]+?(\d+)$")


@dataclass
class Fit:
    returncode: int
    overfull: list[str]  # "<pt> too wide: <line excerpt>"
    too_large: list[str]  # "Float too large for page by <pt>": what does not fit is lost (issue 41)
    fonts: list[tuple[str, str]]  # (name, type) from pdffonts
    log: str

    def min_cm_size(self) -> int | None:
        sizes = [int(m.group(1)) for name, _ in self.fonts if (m := CM_SIZE.search(name))]
        return min(sizes) if sizes else None


def article(body: str, twocolumn: bool) -> str:
    return (f"\\documentclass[10pt{',twocolumn' if twocolumn else ''}]{{article}}\n\\usepackage{{{PACKAGES}}}\n"
            "\\begin{document}\n" + body + "\n\\end{document}\n")


def body_of(tex_file: Path) -> str:
    """A fragment as \\input would see it; the body of a standalone document (title dropped)."""
    text = tex_file.read_text(encoding="utf-8")
    if "\\begin{document}" not in text:
        return f"\\input{{{tex_file.resolve().as_posix()}}}"
    return text.split("\\begin{document}", 1)[1].rsplit("\\end{document}", 1)[0].replace("\\maketitle", "")


def compile_fit(tex_file: Path, workdir: Path, twocolumn: bool) -> Fit:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "doc.tex").write_text(article(body_of(tex_file), twocolumn), encoding="utf-8")
    res = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=workdir,
                         capture_output=True, text=True, timeout=300)
    log = (workdir / "doc.log").read_text(encoding="utf-8", errors="replace") if (workdir / "doc.log").exists() else ""
    over = [f"{m.group(1)}pt too wide: {m.group(2)[:100]}"
            for m in re.finditer(r"Overfull \\hbox \(([\d.]+)pt too wide\)[^\n]*\n([^\n]*)", log)]
    fonts: list[tuple[str, str]] = []
    if res.returncode == 0 and PDFFONTS:
        out = subprocess.run([PDFFONTS, str(workdir / "doc.pdf")], capture_output=True, text=True).stdout
        for line in out.splitlines()[2:]:
            parts = line.split()
            if len(parts) >= 2:
                fonts.append((parts[0], "Type 3" if "Type 3" in line else parts[1]))
    large = re.findall(r"Float too large for page by ([\d.]+pt)", log)
    return Fit(res.returncode, over, large, fonts, log)
