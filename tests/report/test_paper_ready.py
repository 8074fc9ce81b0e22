"""Report files a paper can use as they are (issue 11): no absolute path in any file, figures with
Type 42 fonts, one reliability panel per dataset with bin counts, spread plots on a shared y-axis
named after their comparison, no duplicate figure, and a methods paragraph traced to the checklist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from auditlang.report.checklist import ITEMS

PDFFONTS = shutil.which("pdffonts")
REPO = Path(__file__).resolve().parents[2]
ABSOLUTE = re.compile(r"(?<![\w.])/(?:work|tmp|home|root|Users|mnt|data|var|opt|srv)/")


def text_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and p.suffix in (".md", ".tex", ".csv", ".json", ".html")]


def test_no_absolute_path_in_any_report_file(run):
    files = text_files(run.report)
    assert len(files) > 20
    roots = {str(run.run_dir), str(run.run_dir.resolve()), str(REPO), str(Path.home())}
    for p in files:
        text = p.read_text(encoding="utf-8")
        assert not ABSOLUTE.search(text), f"{p.name}: {ABSOLUTE.search(text).group(0)}"
        assert not [r for r in roots if r in text], p.name


def test_data_files_by_name_and_sha256(run):
    import hashlib

    from report_fixtures import DATA

    md = (run.report / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    digest = hashlib.sha256((DATA / "arc_challenge.jsonl").read_bytes()).hexdigest()
    assert f"dataset arc: file arc_challenge.jsonl (sha256 {digest})" in md
    assert "Scored records (one row per cell x item, with the raw generation text): records.parquet" in md
    html = (run.report / "report.html").read_text(encoding="utf-8")
    assert "<th>spec (relative to the run directory)</th><td>audit_test.audit</td>" in html  # outside the run dir


def test_spec_and_data_names(tmp_path):
    from auditlang.report.paths import data_file, spec_path

    run_dir = tmp_path / "runs" / "r1"
    (run_dir / "spec").mkdir(parents=True)
    assert spec_path(tmp_path / "a.audit", run_dir, {"spec_entry": "spec/project/a.audit"}) == "spec/project/a.audit"
    assert spec_path(run_dir / "spec" / "a.audit", run_dir, {}) == "spec/a.audit"
    assert spec_path(tmp_path / "x" / "a.audit", run_dir, {}) == "a.audit"  # no ../../ climbing out of the run dir
    f = tmp_path / "d.jsonl"
    f.write_bytes(b"{}\n")
    import hashlib

    assert data_file(f) == f"d.jsonl (sha256 {hashlib.sha256(b'{}' + bytes([10])).hexdigest()})"
    assert data_file(f, {"file": "data/ds/d.jsonl", "sha256": "ab" * 32}) == f"d.jsonl (sha256 {'ab' * 32})"
    assert "not computable" in data_file(tmp_path / "missing.jsonl")


@pytest.mark.skipif(PDFFONTS is None, reason="pdffonts not installed (Debian: apt-get install -y poppler-utils)")
def test_figure_pdfs_embed_truetype_not_type3(run):
    pdfs = sorted((run.report / "figures").glob("*.pdf"))
    assert pdfs
    for pdf in pdfs:
        out = subprocess.run([PDFFONTS, str(pdf)], capture_output=True, text=True, check=True).stdout
        rows = out.splitlines()[2:]
        assert rows and all("TrueType" in r for r in rows), (pdf.name, out)
        assert "Type 3" not in out


def test_figures_are_distinct_vector_plus_png(run):
    figs = run.report / "figures"
    pngs = sorted(figs.glob("*.png"))
    assert len({p.read_bytes() for p in pngs}) == len(pngs)  # no duplicate figure
    assert sorted(p.stem for p in pngs) == sorted(p.stem for p in figs.glob("*.pdf"))
    # the fixture's spread (sp) and size_spread (sz) comparisons plot the same per-variant values: one figure
    assert not (figs / "spread_sz.png").exists()
    html = (run.report / "report.html").read_text(encoding="utf-8")
    assert "comparison sp, sz" in html


def test_reliability_figures_per_dataset_with_counts():
    """The figure functions themselves: one panel per dataset, a count histogram under each, hollow
    unjoined points for sparse bins and the pooling in the title."""
    from auditlang.report import figures as F

    src = Path(F.__file__).read_text(encoding="utf-8")
    assert '"pdf.fonttype": 42' in src
    calls = []

    class Ax:
        def __getattr__(self, name):
            return lambda *a, **k: calls.append((name, a, k))

    import numpy as np

    from auditlang.metrics.calibration import reliability_bins

    conf = np.array([0.05, 0.15, 0.55, 0.56, 0.57, 0.58, 0.59, 0.95])
    rb = reliability_bins(conf, np.array([0, 0, 1, 0, 1, 1, 0, 1.0]), bins=10)
    F._reliability_panel(Ax(), Ax(), [(0, 0, "token_prob", rb)], "dataset arc")
    lines = [a for n, a, k in calls if n == "plot" and len(a) > 2 and a[2] == "-"]
    assert lines == []  # only one dense bin (0.5-0.6, 5 items): nothing to join
    hollow = [k for n, a, k in calls if n == "plot" and k.get("mfc") == "none"]
    assert len(hollow) == 1
    assert any(n == "step" for n, a, k in calls)
    legend = next(k for n, a, k in calls if n == "legend")  # the panel's own legend: n of each curve here
    assert [h.get_label() for h in legend["handles"]] == ["n=8"]
    calls.clear()
    F._reliability_panel(Ax(), Ax(), [(0, 0, "token_prob", rb), (1, 0, "verbal", rb)], "dataset arc", ["tok", "verb"])
    legend = next(k for n, a, k in calls if n == "legend")  # each entry names its curve, not only its colour
    assert [h.get_label() for h in legend["handles"]] == ["tok: n=8", "verb: n=8"]


def test_reliability_figures_plot_every_evaluator_and_spread_markers_do_not_hide(run, monkeypatch):
    """Issue 25 item 5: one curve per protocol and evaluator (the repair audit shows the repair),
    n per dataset panel, and equal values of two variants at different x positions."""
    import matplotlib.pyplot as plt

    from auditlang.report import figures as F
    from auditlang.report.comparisons import compute_all
    from auditlang.report.rundata import load_run

    rd = load_run(run.spec, run.plan, run.run_dir)
    drawn = []
    real = F._reliability_panel
    monkeypatch.setattr(F, "_reliability_panel", lambda ax, hax, curves, title, names=None: (
        drawn.append((title, curves, names)), real(ax, hax, curves, title, names)))
    with plt.rc_context(F.RC):
        F.reliability_figures(rd)
    panels = [(t, c) for t, c, _ in drawn]
    assert all(len(names) == len(c) for _, c, names in drawn)
    assert {n for _, _, names in drawn for n in names} >= {"tok_norm, rx"}  # protocol and evaluator by name
    # audit main: 3 token/verbal protocols of interest x 2 evaluators per dataset panel
    main_small = panels[0][1]
    assert {(k, j) for k, j, _, _ in main_small} >= {(0, 0), (0, 1)}
    ns = [rb.n for _, _, _, rb in main_small]
    arc = rd.rows("main", model="small", dataset="arc", protocol="tok_norm", evaluator="rx")
    assert int(arc["confidence"].notna().sum()) in ns  # n of this dataset only, not of both panels
    xs = []
    monkeypatch.setattr(plt.Axes, "plot", lambda self, *a, **k: xs.append(a[0]) or [])
    with plt.rc_context(F.RC):
        F.spread_figures([c for c in compute_all(rd) if c.ctor == "spread"], rd)
    assert len(set(x for x in xs if isinstance(x, float))) > 1  # variants are offset around each model


def test_reliability_titles_state_the_pooling(run):
    html = (run.report / "report.html").read_text(encoding="utf-8")
    assert "Reliability, model small, audit main, 2 evaluators (line style); pooled over 4 variants; 10 equal-width bins" in html


def test_methods_paragraph_traced_to_checklist(run):
    from auditlang.report.methods import methods_sentences
    from auditlang.report.rundata import load_run

    rd = load_run(run.spec, run.plan, run.run_dir)
    sentences = methods_sentences(rd)
    assert all(s.items and set(s.items) <= set(ITEMS) for s in sentences)
    md = (run.report / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    assert "## How to cite the setup" in md and "\\input{disclosure.tex}" in md
    for i, s in enumerate(sentences, 1):
        assert s.text in md
        assert f"Sentence {i}: checklist {s.where()}" in md
        for part in s.where().split("; "):  # the group and item it points to are in the checklist
            group, items = part.split(" > ")
            section = re.search(rf"^## {re.escape(group.replace(', cells of each protocol', ', cells of protocol'))}"
                                rf".*?(?=^## |\Z)", md, re.S | re.M)
            for item in items.split(" + "):
                assert section and f"### {item}" in section.group(0), part
    assert "percentile-bootstrap intervals over the items of each cell" in md and "(B=200, seed 42)" in md
    assert "Audit main evaluates 3 models (org/small-1b at revision rev-small, " in md
    tex = (run.report / "methods.tex").read_text(encoding="utf-8")
    assert "\\emergencystretch" in tex and "Confidence is measured as (1) the first-token probability" in tex


@pytest.mark.parametrize("folder", sorted((REPO / "examples" / "reports").glob("s00*")), ids=lambda p: p.name)
def test_no_absolute_path_in_example_reports(folder):
    for p in text_files(folder):
        m = ABSOLUTE.search(p.read_text(encoding="utf-8"))
        assert not m, f"{p.relative_to(folder)}: {m.group(0)}"


@pytest.mark.skipif(PDFFONTS is None, reason="pdffonts not installed (Debian: apt-get install -y poppler-utils)")
@pytest.mark.parametrize("folder", sorted((REPO / "examples" / "reports").glob("s00*")), ids=lambda p: p.name)
def test_example_figures_have_no_type3_font_and_no_duplicate(folder):
    pngs = sorted((folder / "figures").glob("*.png"))
    assert len({p.read_bytes() for p in pngs}) == len(pngs)
    for pdf in sorted((folder / "figures").glob("*.pdf")):
        out = subprocess.run([PDFFONTS, str(pdf)], capture_output=True, text=True, check=True).stdout
        assert "Type 3" not in out, pdf.name
