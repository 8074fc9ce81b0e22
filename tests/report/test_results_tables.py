"""LaTeX results tables (issue 25 item 1): every table under report/tables/ compiles inside a
two-column article with no overfull box, its numbers are those of metrics/cells.csv and of the
comparison CSVs, cells the audit's VPR rule excludes are marked, and the spec's ``report``
statement chooses them (``cells(format=...)``, ``comparisons(format=...)``)."""

from __future__ import annotations

import dataclasses
import re
import shutil

import pandas as pd
import pytest
from latex_fit import PDFLATEX, SCALING, compile_fit
from report_fixtures import LOW_VPR_CELL

needs_pdflatex = pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not installed (Debian: apt-get install -y "
                                    "texlive-latex-base texlive-latex-recommended texlive-latex-extra)")
NUM = re.compile(r"-?\d+\.\d{3}")


def rows_of(tex: str) -> dict[str, str]:
    """'% row: KEY' -> the row's LaTeX."""
    out = {}
    for line in tex.splitlines():
        if "% row: " in line:
            body, key = line.rsplit("% row: ", 1)
            out[key.strip()] = body
    return out


def test_tables_are_written(run):
    names = sorted(p.name for p in (run.report / "tables").glob("*.tex"))
    assert "cells_main.tex" in names and "cells_probes.tex" in names
    for comp in ("sp", "sz", "gap", "ns", "rep", "rep3", "grid", "rob", "al", "cons"):
        assert f"{comp}.tex" in names, names


@needs_pdflatex
def test_every_table_compiles_in_a_two_column_article(run, tmp_path):
    for tex in sorted((run.report / "tables").glob("*.tex")):
        src = tex.read_text(encoding="utf-8")
        assert "\\toprule" in src and "\\bottomrule" in src, tex.name
        assert not SCALING.findall(src), tex.name
        fit = compile_fit(tex, tmp_path / tex.stem, twocolumn=True)
        assert fit.returncode == 0, fit.log[-2000:]
        assert fit.overfull == [], f"{tex.name}: {fit.overfull}"
        assert "Float too large" not in fit.log, tex.name
        assert not [n for n, t in fit.fonts if t == "Type 3"], fit.fonts


def test_cells_table_numbers_are_cells_csv(run):
    cells = pd.read_csv(run.run_dir / "metrics" / "cells.csv")
    rows = rows_of((run.report / "tables" / "cells_main.tex").read_text(encoding="utf-8"))
    main = cells[cells["audit"] == "main"]
    assert set(rows) == set(main["cell_id"])
    metrics = ["accuracy", "ece(binning=equal_width, bins=10)", "brier", "auroc"]
    for rec in main.to_dict("records"):
        expect = [rec["answer_parse_rate"]] + ([rec["vpr"]] if rec["protocol"] == "verbal" else [])
        for m in metrics:
            expect += [rec[m]] + ([rec[f"{m} lo"], rec[f"{m} hi"]] if pd.notna(rec[f"{m} lo"]) else [])
        got = [float(x) for x in NUM.findall(rows[rec["cell_id"]])]
        assert got == [round(float(x), 3) for x in expect if pd.notna(x)], rec["cell_id"]
        assert f" {int(rec['n'])} " in rows[rec["cell_id"]]


def test_vpr_excluded_cells_are_marked_in_every_cells_table(run):
    mid, ds, var = LOW_VPR_CELL
    rows = rows_of((run.report / "tables" / "cells_main.tex").read_text(encoding="utf-8"))
    marked = {k for k, body in rows.items() if "dagger" in body}
    assert marked == {f"main/{mid}/{ds}/{var}/verbal/{e}" for e in ("fc", "rx")}
    assert "excluded by the audit's verbal parse-rate rule" in (run.report / "tables" / "cells_main.tex").read_text()
    md = (run.report / "cells.md").read_text(encoding="utf-8")
    line = next(ln for ln in md.splitlines() if f"main/{mid}/{ds}/{var}/verbal/fc" in ln)
    assert re.search(r"\| VPR 0\.\d{3} < 0\.80 \|$", line), line
    csv = pd.read_csv(run.report / "cells.csv")
    assert csv.loc[csv["cell_id"] == f"main/{mid}/{ds}/{var}/verbal/fc", "excluded"].iloc[0].startswith("VPR")
    assert csv["excluded"].notna().sum() == 2


def test_repair_table_is_study_000_table_1(run):
    comp = pd.read_csv(run.report / "comparisons" / "rep.csv")
    mean = pd.read_csv(run.report / "comparisons" / "rep_mean.csv")
    tex = (run.report / "tables" / "rep.tex").read_text(encoding="utf-8")
    rows = rows_of(tex)
    header = next(ln for ln in tex.splitlines() if ln.startswith("Model"))
    assert "Reference" in header and "Base" in header and "Gap rec." in header
    for (mid, dsid), g in comp.groupby(["model", "dataset"], sort=False):
        r = g.iloc[0]
        got = NUM.findall(rows[f"{mid}/{dsid}"])
        assert got[:3] == [f"{r.iloc[4]:.3f}", f"{r.iloc[5]:.3f}", f"{r['acc repair']:.3f}"]
        rec = r["gap recovery %"]
        assert (f"{rec:.1f}" if pd.notna(rec) else "–") in rows[f"{mid}/{dsid}"]
    m = mean["mean gap recovery %"].iloc[0]
    assert (f"{m:.1f}" if pd.notna(m) else "–") in rows["mean"]
    assert NUM.findall(rows["mean"])[0] == f"{comp.drop_duplicates(['model', 'dataset']).iloc[:, 4].mean():.3f}"


def test_ece_gap_table_is_study_000_table_2(run):
    by = pd.read_csv(run.report / "comparisons" / "gap_by_model.csv")
    tex = (run.report / "tables" / "gap.tex").read_text(encoding="utf-8")
    rows = list(rows_of(tex).values())
    for body, rec in zip(rows, by.to_dict("records")):
        want = [rec[c] for c in ("mean accuracy", "mean ece_token", "mean ece_verbal", "mean ece_gap")]
        assert [float(x) for x in NUM.findall(body)] == [round(x, 3) for x in want]


def test_grid_table_is_study_001_table_2(run):
    summ = pd.read_csv(run.report / "comparisons" / "grid_summary.csv")
    tex = (run.report / "tables" / "grid.tex").read_text(encoding="utf-8")
    header = next(ln for ln in tex.splitlines() if ln.startswith("Variant"))
    for q in ("g\\_A", "g\\_D", "A-B", "A-C", "interaction"):
        assert q in header or q.replace("\\_", "_") in header, header
    rows = rows_of(tex)
    for (var, ev), g in summ.groupby(["variant", "evaluator"], sort=False):
        body = rows[f"{var}/{ev}"]
        first = float(NUM.findall(body)[0])
        assert first == round(g[g["quantity"] == "g_A"]["macro mean"].iloc[0], 3)


def test_report_statement_chooses_the_tables(run, tmp_path):
    from auditlang.report import build_report

    run_dir = tmp_path / "run"
    shutil.copytree(run.run_dir, run_dir, ignore=shutil.ignore_patterns("report"))
    spec = dataclasses.replace(run.spec, report=[("cells", {"format": "markdown"}), ("comparisons", {"format": "latex"})])
    out = build_report(spec, run.plan, run_dir)
    tables = {p.name for p in (out / "tables").glob("*.tex")}
    assert "cells_main.tex" not in tables and "rep.tex" in tables
    assert (out / "cells.md").is_file() and not (out / "comparisons.md").exists()


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
# Known defect (issue 25, left open): study 001's A-D grid has eight interval columns, wider than a
# two-column page even when the text columns wrap; strict, so the fix shows up as XPASS.
TOO_WIDE = {"s001/grid.tex"}
EXAMPLE_TABLES = [
    pytest.param(p, id=f"{p.parent.parent.name}/{p.name}", marks=[pytest.mark.xfail(
        strict=True, reason="the 001 A-D grid (8 interval columns) is wider than the page")]
        if f"{p.parent.parent.name}/{p.name}" in TOO_WIDE else [])
    for p in sorted((REPO / "examples" / "reports").glob("s00*/tables/*.tex"))]


@needs_pdflatex
@pytest.mark.parametrize("tex", EXAMPLE_TABLES)
def test_example_tables_compile_and_match_their_cells(tex, tmp_path):
    """The committed twin reports' tables: two-column fit, and the cells tables' first numbers
    are the committed cells.csv's (answer parse rate, then the metrics)."""
    fit = compile_fit(tex, tmp_path, twocolumn=True)
    assert fit.returncode == 0 and fit.overfull == [] and "Float too large" not in fit.log, fit.overfull
    if tex.name.startswith("cells_"):
        cells = pd.read_csv(tex.parent.parent / "cells.csv")
        for cid, body in rows_of(tex.read_text(encoding="utf-8")).items():
            rec = cells[cells["cell_id"] == cid].iloc[0]
            assert float(NUM.findall(body)[0]) == round(float(rec["answer_parse_rate"]), 3), cid


def test_aligned_table_is_study_003_table_1(run):
    """Exclusive reversal rates per method and NRR, recomputed from the long comparison CSV."""
    long = pd.read_csv(run.report / "comparisons" / "al.csv")
    ece = long[(long["metric"] == "ECE") & (long["view"] != "raw")]
    views = sorted(set(ece["view"]), key=["IA", "DA", "CA"].index)
    rows = rows_of((run.report / "tables" / "al.tex").read_text(encoding="utf-8"))
    for method, g in ece.groupby("protocol"):
        piv = g.pivot_table(index=["model_1", "model_2", "dataset", "variant", "evaluator"], columns="view",
                            values="reversal", aggfunc="first").dropna()
        piv = piv.astype(str) == "True"
        n = len(piv)
        want = [100 * ((piv[v]) & ~piv.drop(columns=v).any(axis=1)).sum() / n for v in views]
        want.append(100 * (~piv.any(axis=1)).sum() / n)
        cells = [c.strip() for c in rows[method].rsplit("\\\\", 1)[0].split("&")]
        assert cells[1] == str(n) and [float(x) for x in cells[2:]] == [round(w, 1) for w in want], method


def test_two_grids_with_different_readouts_give_study_001_table_9(run, tmp_path):
    """Two protocol_grids of one audit whose configurations read T1 and T2: one table of A-B per readout."""
    from test_methods_truth import run_with

    from auditlang.report.comparisons import compute_all
    from auditlang.report.textables import comparison_tables

    rd = run_with(run, tmp_path, "protocols = [tok_norm, tok_raw, verbal, tok_bare, tok_prefix]",
                  "protocols = [tok_norm, tok_raw, verbal, tok_bare, tok_prefix, tok_bare2, tok_prefix2]",
                  keep_compare="protocol_grid",
                  more=[("protocol nota = nota()", "protocol nota = nota()\nprotocol tok_bare2 = tok_bare with "
                         "(readout=T2)\nprotocol tok_prefix2 = tok_prefix with (readout=T2)"),
                        ("compare grid = ", "compare grid2 = protocol_grid(main, verbal=verbal, configs=[tok_bare2, "
                         "tok_prefix2], estimators=[ece10, binfree])\ncompare grid = ")])
    tables = comparison_tables(rd, compute_all(rd))
    t = tables["readouts_main"][0]
    assert t.header[:2] == ["Variant", "Evaluator"] and set(t.header[2:]) == {"A-B (T1, grid)", "A-B (T2, grid2)"}
    j = t.header.index("A-B (T1, grid)")
    macro = pd.read_csv(run.report / "comparisons" / "grid_macro_ci.csv")
    ab = macro[macro["quantity"] == "g_A - g_B"].set_index(["variant", "evaluator"])
    for row, key in zip(t.rows, t.keys):
        var, ev = key.split("/")
        v = row[j][0] if isinstance(row[j], tuple) else row[j]
        assert v == f"{ab.loc[(var, ev), 'macro mean']:.3f}"


def test_report_statement_in_the_spec_language(run, tmp_path):
    """`report cells(format=latex), comparisons(format=markdown)` written in the spec: cells as LaTeX
    only, comparisons as Markdown only."""
    from test_methods_truth import run_with

    from auditlang.report import build_report

    line = "compare cons = consistency(probes, probes=[nota, moreinfo, selfref])"
    rd = run_with(run, tmp_path, line, line + "\nreport cells(format=latex), comparisons(format=markdown)")
    assert rd.spec.report == [("cells", {"format": "latex"}), ("comparisons", {"format": "markdown"})]
    run_dir = tmp_path / "run"
    shutil.copytree(run.run_dir, run_dir, ignore=shutil.ignore_patterns("report"))
    out = build_report(rd.spec, rd.plan, run_dir)
    assert {p.name for p in (out / "tables").glob("*.tex")} == {"cells_main.tex", "cells_probes.tex"}
    assert (out / "comparisons.md").is_file() and not (out / "cells.md").exists()
