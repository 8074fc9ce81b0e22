"""Report files and terminal output quote a server's error message and a model's path as text
(issue 40 item 7; docs/security.md "Report files"): no raw `<script>` in Markdown, no terminal
escape, carriage return or bidi override in any Markdown, HTML or LaTeX file, nor in what
`auditc status` and `auditc plan` print.

User path: a spec whose model path holds markup, `auditc run` with a scripted engine whose
"server" fails one request with a hostile message (tests/scripted_engine.py), then the report
files are read back, `auditc report` rebuilds them, and `auditc status` / `auditc plan` run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core.requests import Result
from auditlang.report.safe_text import md_safe
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[2J\x1b[32mALL CHECKS PASSED\x1b[0m\r\u202e"
SPEC = """import "stdlib/s000"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model m = hf("org/x<script>alert(3)</script>", dtype=float32, max_tokens=4)
audit a {
  models = [m]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
report cells, checklist(format=both), disclosure(format=both), comparisons, html
"""
RAW_CONTROLS = ("\x1b", "\r", "\u202e")


def _script(req):
    if "Which number is 1?" in prompt_text(req):
        return Result(request_id=req.id, kind=req.kind, error="upstream said: " + EVIL)
    return generation(req, "A") if req.kind == "generate" else None


def _check_report(report: Path) -> int:
    files = [p for p in report.rglob("*") if p.suffix in (".md", ".html", ".tex")]
    assert {"checklist.md", "checklist.tex", "report.html", "index.md"} <= {p.name for p in files}
    for p in files:
        text = p.read_text(encoding="utf-8")
        for c in RAW_CONTROLS:
            assert c not in text, (p.name, repr(c))
        assert "<script>alert" not in text and "<img src=x" not in text, p.name
    md = (report / "checklist.md").read_text(encoding="utf-8")
    assert "upstream said: &lt;script>alert(1)&lt;/script>&lt;img" in md  # shown as text, not markup
    assert "␛[2J␛[32mALL CHECKS PASSED" in md  # the escape shown, not sent
    assert "hf('org/x&lt;script>alert(3)&lt;/script>'" in md
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "␛[2J" in html
    assert "[U+001B][2J" in (report / "checklist.tex").read_text(encoding="utf-8")  # report/latex.py
    return len(files)


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the scripted engine stands in for the model: nothing to download
    (tmp_path / "data").mkdir()
    (tmp_path / "auditlang.toml").write_text("", encoding="utf-8")
    (tmp_path / "data" / "arc.jsonl").write_text(number_items(4), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    use_scripted_engine(monkeypatch, _script)
    return tmp_path


def test_hostile_error_and_model_path_stay_text_in_every_report_file(project: Path, capsys):
    assert main(["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress"]) == 4  # one failed
    out = capsys.readouterr()
    for c in RAW_CONTROLS:
        assert c not in out.out + out.err
    _check_report(project / "runs/r/report")
    assert main(["report", "runs/r"]) == 0  # rebuilt the same way
    _check_report(project / "runs/r/report")


def test_terminal_output_of_status_and_plan(project: Path, capsys, monkeypatch):
    assert main(["run", "s.audit", "--data-root", "data", "--out", "runs/r", "--no-progress"]) == 4
    hb = project / "runs/r/heartbeat.json"
    beat = json.loads(hb.read_text(encoding="utf-8"))
    beat.update(state="failed", error="model 'm': server at http://127.0.0.1:9 failed: " + EVIL)  # as a run stopped
    hb.write_text(json.dumps(beat), encoding="utf-8")
    capsys.readouterr()
    assert main(["status", "runs/r"]) == 0
    out = capsys.readouterr().out
    assert "ALL CHECKS PASSED" in out and not any(c in out for c in RAW_CONTROLS), out
    # a data file name and a note quoting it, in `auditc plan`'s rich summary
    (project / "s.audit").write_text(SPEC.replace('"arc.jsonl"', '"arc\x1b[2J.jsonl"'), encoding="utf-8")
    (project / "data" / "arc\x1b[2J.jsonl").write_text(number_items(4), encoding="utf-8")
    monkeypatch.setenv("COLUMNS", "400")  # rich prints the whole path, not a cut one
    assert main(["plan", "s.audit", "--data-root", "data"]) == 0
    out = capsys.readouterr()
    assert "arc␛[2J.jsonl" in out.out, out.out
    assert not any(c in out.out + out.err for c in RAW_CONTROLS)


@pytest.mark.parametrize("text", [
    "```\n<script>x</script>",                 # a fence opened by the text itself: its content stays literal
    "- a\n````text\nb\n```\n<script>x</script>",  # a shorter run does not close a longer fence
    "`` <script>x</script>",                   # not a code span, not a fence
    "\\`<script>x</script>`",                  # an escaped backtick opens no code span
    "<!-- c --> <?php ?> <a href=javascript:x> </p>",
])
def test_md_safe_leaves_no_raw_html_outside_fences(text):
    out = md_safe(text).split("\n")
    fence = None
    for line in out:
        stripped = line.lstrip(" ")
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:len(stripped) - len(stripped.lstrip(stripped[0]))]
            continue
        if fence is not None:
            if stripped.rstrip().startswith(fence) and set(stripped.strip()) == {fence[0]}:
                fence = None
            continue
        assert "<script" not in line and "<!--" not in line and "<?" not in line and "<a " not in line \
            and "</p" not in line, line
