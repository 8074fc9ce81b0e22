"""001 Tables 3, 5 and 16 as ONE table each (grid_rows, issue 41): the twin on the scripted engine of
test_reproduction_map_001_grid.py (same script, --limit 2): its own table3 / table5 / table16 and one
grid_rows comparison appended (``both``: Table 3's columns for both variant groups).

By hand (see that module's docstring): Instruct, lenient: g_A = -0.2 and g_B = -0.6 on all 4 settings,
so macro g_A = -0.2, g_A - g_B = +0.4, mean |g_A - g_B| = 0.4, no flip (0/4). Base, lenient (SciQ has
no parsed confidence): g_A = +0.2, +0.2, -0.1 -> macro 0.1; g_B = +0.6, +0.6, +0.3; g_A - g_B = -0.4 on
each, mean |.| 0.4; MMLU flips (-0.1 vs +0.3): 1/3. rho = 0.2 / 0.4 = 0.5 on the Instruct settings: 4/4
at rho <= 0.55.
"""

from __future__ import annotations

import csv
import re
import shutil
import sys
from pathlib import Path

import pytest

from auditlang.cli import main
from scripted_engine import use_scripted_engine
from test_reproduction_map_001_grid import _questions, make_script

ROOT = Path(__file__).resolve().parents[2]
EXTRA = """
compare both = grid_rows([grid], labels=["7-8B Instr.", "base"],
  columns=[g_A, abs_context, abs_estimator, context_flips])
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory, shared_data: Path) -> Path:
    text = (ROOT / "examples" / "s001_twin.audit").read_text(encoding="utf-8")
    text = text.replace("resamples=200", "resamples=10").replace(", figures, html", "")
    text = text.replace("\nreport ", EXTRA + "\nreport ")
    tmp = tmp_path_factory.mktemp("s001c")
    (tmp / "twin.audit").write_text(text, encoding="utf-8")
    mp = pytest.MonkeyPatch()
    use_scripted_engine(mp, make_script(_questions(shared_data)))
    try:
        rc = main(["run", str(tmp / "twin.audit"), "--data-root", str(shared_data), "--out", str(tmp / "run"),
                   "--limit", "2", "--no-progress"])
    finally:
        mp.undo()
    assert rc == 0
    return tmp / "run" / "report"


def rows(report: Path, name: str) -> list[dict[str, str]]:
    with open(report / "comparisons" / f"{name}.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _summary(report: Path, name: str, group: str) -> dict[str, dict[str, str]]:
    return {r.get("quantity") or r["axis"]: r for r in rows(report, f"{name}_summary")
            if r["group"] == group and r["evaluator"] == "s001.lenient"}


def test_table3_one_row_per_group_read_from_the_grid_summary(report: Path) -> None:
    twin = rows(report, "table3")  # the twin's own: the Instruct group only (groups=["Instruct"])
    assert [r["setting"] for r in twin] == ["Instruct (smollm2)"]
    md = (report / "comparisons.md").read_text(encoding="utf-8")
    assert "## table3 (grid_rows)\n" in md  # no audit of its own: no empty "audit " in the heading
    got = rows(report, "both")
    assert {k: v for k, v in got[0].items() if k != "setting"} == {k: v for k, v in twin[0].items() if k != "setting"}
    assert list(got[0]) == ["setting", "macro g_A", "mean |g_A - g_B|", "mean |g_A - g_C|", "sign flips g_A vs g_B"]
    assert [r["setting"] for r in got] == ["7-8B Instr.", "base"]
    inst, base = got
    assert float(inst["macro g_A"]) == pytest.approx(-0.2) and float(inst["mean |g_A - g_B|"]) == pytest.approx(0.4)
    assert inst["sign flips g_A vs g_B"] == "0/4"
    assert float(base["macro g_A"]) == pytest.approx(0.1) and base["sign flips g_A vs g_B"] == "1/3"
    for row, grp in ((inst, "Instruct"), (base, "base")):
        s = _summary(report, "grid", grp)
        assert float(row["macro g_A"]) == float(s["g_A"]["macro mean"])
        assert float(row["mean |g_A - g_C|"]) == float(s["A-C"]["mean |.|"])


def test_table5_generated_vs_gold_per_group(report: Path) -> None:
    got = rows(report, "table5")
    assert list(got[0]) == ["setting", "macro g_gen", "macro g_gold", "sign flips g_gen vs g_gold"]  # gaps=[gen, gold]
    assert [r["setting"] for r in got] == ["Instruct (smollm2)", "Base (gemma3)"]
    for r, group in zip(got, ("Instruct", "base")):
        s = _summary(report, "scored", group)["context"]
        assert float(r["macro g_gen"]) == float(s["macro first"])
        assert float(r["macro g_gold"]) == float(s["macro second"])
        assert r["sign flips g_gen vs g_gold"] == f"{s['sign flips']}/{s['n_settings']}"


def test_table16_transposed_with_rho_count(report: Path) -> None:
    got = {r["quantity"]: r["decimal"] for r in rows(report, "table16")}
    assert list(got) == ["macro g_A", "macro g_A - g_B", "macro g_A - g_C", "rho <= 0.55 cells", "mean |g_A - g_B|",
                         "sign flips g_A vs g_B"]
    assert float(got["macro g_A - g_B"]) == pytest.approx(0.4)
    assert got["rho <= 0.55 cells"] == "4/4"


def test_latex_tables_in_001_notation_fit_a_column(report: Path, tmp_path: Path) -> None:
    """tables/<name>.tex: the quantities as 001 writes them, the values of the CSV row by row, and each
    table set in one column of a two-column article (pdflatex, no overfull box)."""
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    try:
        from latex_fit import PDFLATEX, compile_fit
    finally:
        sys.path.pop(0)
    t3 = (report / "tables" / "both.tex").read_text(encoding="utf-8")
    assert ("Setting & $\\bar{g}_{A}$ & $\\overline{|g_{A}-g_{B}|}$ & $\\overline{|g_{A}-g_{C}|}$ & sign flips "
            "$g_{A}$ vs $g_{B}$ \\\\") in t3
    body = {m.group(1): m.group(0) for m in re.finditer(r"^.* % row: (\S+)$", t3, re.M)}
    assert body["both[0]"].startswith("7-8B Instr. & -0.200 & 0.400 & 0.000 & 0/4 ")
    assert body["both[1]"].startswith("base & 0.100 & 0.400 & 0.000 & 1/3 ")
    t5 = (report / "tables" / "table5.tex").read_text(encoding="utf-8")
    assert "$\\bar{g}_{\\mathrm{gen}}$ & $\\bar{g}_{\\mathrm{gold}}$" in t5 and "(in the layout of study 001 Tables 3, 5 and 20)" in t5
    assert "(in the layout of study 001 Table 16)" in (report / "tables" / "table16.tex").read_text(encoding="utf-8")
    t16 = (report / "tables" / "table16.tex").read_text(encoding="utf-8")
    assert "Quantity & decimal \\\\" in t16 and "$\\rho \\le 0.55$ cells & 4/4 " in t16
    if PDFLATEX is None:
        pytest.skip("pdflatex not installed")
    for name in ("both", "table3", "table5", "table16"):
        tex = report / "tables" / f"{name}.tex"
        assert "\\begin{\\auditwide}" in tex.read_text(encoding="utf-8")
        fit = compile_fit(tex, tmp_path / name, twocolumn=True)
        assert fit.returncode == 0, fit.log[-2000:]
        assert fit.overfull == [] and fit.too_large == [], (name, fit.overfull, fit.too_large)


def test_a_grid_read_before_its_declaration_is_computed_once(report: Path, tmp_path: Path, monkeypatch,
                                                             capsys) -> None:
    """A grid_rows declared above its grid: the report computes the grid for it and reuses that outcome
    when the grid's own declaration comes (one protocol_grid call per grid, the same numbers)."""
    import auditlang.report.comparisons.grid as grid_mod

    run = tmp_path / "run"  # a copy: the edited spec becomes the run's spec
    shutil.copytree(report.parent, run)
    spec = tmp_path / "early.audit"
    src = (ROOT / "examples" / "s001_twin.audit").read_text(encoding="utf-8")
    src = src.replace("resamples=200", "resamples=10").replace(", figures, html", "").replace("\nreport ", EXTRA + "\nreport ")
    early = 'compare early = grid_rows([scored], gaps=["gen", "gold"], columns=[g_A, g_second, context_flips])\n\n'
    spec.write_text(src.replace("compare grid = protocol_grid(", early + "compare grid = protocol_grid(", 1),
                    encoding="utf-8")
    calls: list[str] = []
    real = grid_mod.protocol_grid

    def counted(rd, name, c):
        calls.append(name)
        return real(rd, name, c)

    monkeypatch.setattr(grid_mod, "protocol_grid", counted)
    assert main(["report", str(run), "--spec", str(spec)]) == 0, capsys.readouterr().err
    assert calls.count("scored") == 1 and len(calls) == len(set(calls)), calls
    values = [{k: v for k, v in r.items() if k != "setting"} for r in rows(run / "report", "early")]
    assert values == [{k: v for k, v in r.items() if k != "setting"} for r in rows(report, "table5")]
    assert [r["setting"] for r in rows(run / "report", "early")] == ["Instruct", "base"]  # the group labels
