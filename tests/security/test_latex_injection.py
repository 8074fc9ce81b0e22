"""LaTeX output escapes every user-controlled string (issue 15): a hostile spec (template text that
closes the checklist's Verbatim block and \\input's a file, specials in model paths, file names and
data) runs end to end, and every .tex the report writes compiles with pdflatex without reading
the file the spec tried to smuggle in."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import make_project, run_dryrun

PDFLATEX = shutil.which("pdflatex")
MARKER = "SMUGGLEDMARKER"
HOSTILE = r"\end{Verbatim}\input{SECRET}\end {Verbatim} \immediate\write18{touch PWNED} }{ % $x$ # & _ ^ ~ [o] <a> |"


def _spec(secret: Path) -> str:
    h = HOSTILE.replace("SECRET", str(secret)).replace('"', "'")
    return f'''import "stdlib/s000"
dataset arc = jsonl("we$ird&_%#{{x}}.jsonl", task=multiple_choice, sample=4, seed=7)
model evil = hf("{h.replace(chr(92), chr(92) * 2)}", dtype=float32, batch_size=4, max_tokens=8)
template t = template("""{h}
{{{{ question }}}}
{{% for c in choices %}}{{{{ c }}}}
{{% endfor %}}Answer:""")
variant v = variant(multiple_choice=t)
audit a {{
  models = [evil]
  datasets = [arc]
  variants = [v, s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}}
report cells, checklist(format=both), disclosure(format=both), comparisons, html
'''


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not installed (apt-get install -y texlive-latex-base "
                    "texlive-latex-recommended)")
def test_hostile_strings_compile_in_every_latex_output(tmp_path):
    secret = tmp_path / "secret.tex"
    secret.write_text(MARKER + "\n", encoding="utf-8")
    rows = "".join(json.dumps({"id": f"q{i}_%$", "question": HOSTILE.replace("SECRET", str(secret)) + f" #{i}",
                               "choices": [r"\end{Verbatim}", f"{i}&", "}{", "x_y"], "answer": f"{i}&"}) + "\n"
                   for i in range(6))
    proj = make_project(tmp_path / "p", _spec(secret), rows="")
    (proj / "data" / "arc.jsonl").unlink()
    (proj / "data" / "we$ird&_%#{x}.jsonl").write_text(rows, encoding="utf-8")
    assert run_dryrun("s.audit", "runs/r") == 0
    report = proj / "runs" / "r" / "report"
    texs = sorted(report.rglob("*.tex"))
    names = {p.name for p in texs}
    assert {"checklist.tex", "disclosure_standalone.tex"} <= names, names
    assert MARKER not in "".join(p.read_text() for p in texs)
    checklist = (report / "checklist.tex").read_text()
    # the template text is shown, neutralised: \ { } are typewriter glyphs, never a command or group
    assert r"\auditbs{}end\auditlb{}Verbatim\auditrb{}\auditbs{}input\auditlb{}" in checklist
    for tex in texs:
        body = tex.read_text()
        if "\\documentclass" not in body:  # a fragment: compile it inside the standalone preamble
            from auditlang.report.latex import document

            body = document(body, tex.name)
        build = tmp_path / "build" / tex.stem
        build.mkdir(parents=True)
        (build / "x.tex").write_text(body, encoding="utf-8")
        res = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "x.tex"],
                             cwd=build, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{tex.name}:\n{res.stdout[-3000:]}"
        log = (build / "x.log").read_text(errors="replace")
        assert str(secret) not in log and MARKER not in log
        assert "FancyVerb Error" not in log
        pdftext = subprocess.run(["pdftotext", "x.pdf", "-"], cwd=build, capture_output=True, text=True).stdout \
            if shutil.which("pdftotext") else ""
        assert MARKER not in pdftext
        assert not (build / "PWNED").exists()
