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
