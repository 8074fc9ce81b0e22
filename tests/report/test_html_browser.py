"""The HTML report opens in real headless Chromium with no script errors and every figure decoded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install -y chromium)")

# Injected into a copy of the page: after load, write every image's state and any script error into the DOM.
PROBE = """<script>
window.__errs = [];
window.addEventListener('error', function (e) { window.__errs.push(String(e.message || e.type)); }, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).map(function (i) { return i.alt; });
  var m = document.createElement('pre');
  m.id = 'probe';
  m.textContent = 'PROBE' + JSON.stringify({total: imgs.length, bad: bad, errors: window.__errs});
  document.body.appendChild(m);
});
</script>"""


def open_in_chromium(html_path: Path, tmp: Path) -> tuple[dict, str]:
    page = tmp / "probe.html"
    page.write_text(html_path.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    res = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180)
    found = re.findall(r"PROBE(\{.*?\})</pre>", res.stdout)
    assert found, f"chromium did not run the page (rc={res.returncode}): {res.stderr[-2000:]}"
    return json.loads(found[-1]), res.stderr


def console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln and ("Uncaught" in ln or "ERROR" in ln or "Error" in ln)]


@needs_chromium
def test_report_html_loads_with_all_figures(run, tmp_path):
    html = run.report / "report.html"
    n_figures = len(list((run.report / "figures").glob("*.png")))
    state, stderr = open_in_chromium(html, tmp_path)
    assert state["total"] == n_figures > 0
    assert state["bad"] == [] and state["errors"] == []
    assert console_errors(stderr) == []
    text = html.read_text()
    assert "src=\"http" not in text and "<link" not in text  # self-contained
    for needle in ("Per-cell results", "Reporting checklist", "Protocol disclosure", "Conditioning context (C4)",
                   "UNSPECIFIED", "not computable: CA"):
        assert needle in text, needle


@needs_chromium
def test_probe_detects_a_broken_figure(run, tmp_path):
    broken = tmp_path / "broken.html"
    text = (run.report / "report.html").read_text()
    broken.write_text(re.sub(r'src="data:image/png;base64,[^"]{40}', 'src="data:image/png;base64,AAAA', text, count=1))
    state, _ = open_in_chromium(broken, tmp_path)
    assert len(state["bad"]) == 1


PDFTOTEXT = shutil.which("pdftotext")
INTERVAL = re.compile(r"\[-?\d+\.\d{3}, -?\d+\.\d{3}\]")


def print_to_pdf(html_path: Path, tmp: Path) -> str:
    """Chromium --print-to-pdf, then the PDF's text (pdftotext -raw)."""
    pdf = tmp / "print.pdf"
    res = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         f"--user-data-dir={tmp / 'profile'}", "--no-pdf-header-footer", f"--print-to-pdf={pdf}", html_path.as_uri()],
        capture_output=True, text=True, timeout=300)
    assert pdf.exists(), res.stderr[-2000:]
    text = subprocess.run([PDFTOTEXT, "-raw", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return re.sub(r"\s+", " ", text)  # a wrapped cell may split "[lo,\nhi]" over two lines


@needs_chromium
@pytest.mark.skipif(PDFTOTEXT is None, reason="pdftotext not installed (Debian: apt-get install -y poppler-utils)")
def test_report_prints_every_metric_column(run, tmp_path):
    """Printed (Chromium --print-to-pdf), every bootstrap interval of every table is on the page: a
    clipped or scrolled-away column would drop its intervals from the PDF's text."""
    html = run.report / "report.html"
    text = print_to_pdf(html, tmp_path)
    src = html.read_text(encoding="utf-8")
    assert len(INTERVAL.findall(text)) == len(INTERVAL.findall(src)) > 100
    flat = re.sub(r"\s+", "", text)
    for metric in ("accuracy", "brier", "auroc", "ece(bins=10,binning=equal_width)"):
        assert metric in flat, metric


@needs_chromium
@pytest.mark.skipif(PDFTOTEXT is None, reason="pdftotext not installed (Debian: apt-get install -y poppler-utils)")
def test_print_check_detects_clipped_columns(run, tmp_path):
    """The check above fails on the pre-issue-11 layout (scrolling tables, unwrapped cells)."""
    old = tmp_path / "old.html"
    css = "table { display: block; overflow: auto; max-height: 36em; } th, td { white-space: nowrap; } td .ci { display: inline; }"
    old.write_text((run.report / "report.html").read_text(encoding="utf-8").replace("</style>", css + "</style>", 1),
                   encoding="utf-8")
    text = print_to_pdf(old, tmp_path)
    assert len(INTERVAL.findall(text)) < len(INTERVAL.findall(old.read_text(encoding="utf-8")))


def test_cells_table_puts_metrics_first(run):
    """One label cell, then the audit's metrics, then the counts; one sortable table per audit."""
    text = (run.report / "report.html").read_text(encoding="utf-8")
    heads = re.findall(r'<section class="table cells" id="cells-(\w+)">.*?<thead><tr>(.*?)</tr>', text, re.S)
    assert [a for a, _ in heads] == ["main", "probes"]
    cols = re.findall(r'<th class="(\w+)"[^>]*>(.*?)</th>', heads[0][1])
    assert [k for k, _ in cols][:5] == ["label", "metric", "metric", "metric", "metric"]
    assert [c for _, c in cols][1] == "accuracy" and "brier" in [c for _, c in cols[:5]]
    assert "big · arc · cot · tok_bare · fc" in text
    assert 'class="sortable"' in text and "addEventListener('click'" in text


SORT_PROBE = """<script>
window.addEventListener('load', function () {
  var t = document.querySelector('table.sortable');
  var th = t.tHead.rows[0].cells[1];
  var col = function () { return Array.prototype.map.call(t.tBodies[0].rows, function (r) {
    var v = r.cells[1].dataset.sort; return v === '' ? null : parseFloat(v); }); };
  th.click(); var up = col(); th.click(); var down = col();
  var m = document.createElement('pre'); m.id = 'sortprobe';
  m.textContent = 'SORTED' + JSON.stringify({head: th.textContent, up: up, down: down});
  document.body.appendChild(m);
});
</script>"""


@needs_chromium
def test_cells_table_sorts_in_chromium(run, tmp_path):
    page = tmp_path / "sort.html"
    page.write_text((run.report / "report.html").read_text(encoding="utf-8").replace("</body>", SORT_PROBE + "</body>", 1),
                    encoding="utf-8")
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.findall(r"SORTED(\{.*?\})</pre>", res.stdout)
    assert found, res.stderr[-2000:]
    got = json.loads(found[-1])
    assert got["head"].startswith("accuracy")
    up = [v for v in got["up"] if v is not None]
    assert len(up) > 10 and up == sorted(up) and up != sorted(up, reverse=True)
    assert [v for v in got["down"] if v is not None] == sorted(up, reverse=True)
