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

from auditlang.report.latex import prose

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
    assert csv["excluded"].astype(str).str.startswith("VPR").sum() == 2
    # an included verbal cell says "no"; a token cell, where no VPR rule applies, n/a (read as NaN)
    assert set(csv["excluded"].dropna()) - {e for e in csv["excluded"].dropna() if e.startswith("VPR")} == {"no"}


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


def grid_columns(tex: str) -> list[tuple[str, dict[str, str]]]:
    """(header cell, {quantity: cell}) per value column, across the tables a wide grid is split into."""
    cols: list[tuple[str, dict[str, str]]] = []
    part: list[tuple[str, dict[str, str]]] = []
    for line in tex.splitlines():
        if line.startswith("Quantity"):
            part = [(h, {}) for h in line.rsplit("\\\\", 1)[0].split(" & ")[1:]]
            cols += part
        elif "% row: " in line:
            body, key = line.rsplit("% row: ", 1)
            for (_, by), cell in zip(part, body.rsplit("\\\\", 1)[0].split(" & ")[1:]):
                by[key.strip().split(" (columns")[0]] = cell
    return cols


def check_grid_numbers(tex_file, comparisons) -> None:
    """Study 001 Table 2's shape (a row per quantity, a column per variant group, split into several
    tables when they do not fit the page) and every number: the macro mean of ``<grid>_summary.csv``
    with its interval from ``<grid>_macro_ci.csv``, "ns" where that interval covers 0."""
    stem = tex_file.stem
    summ = pd.read_csv(comparisons / f"{stem}_summary.csv")
    mci = pd.read_csv(comparisons / f"{stem}_macro_ci.csv")
    cols = grid_columns(tex_file.read_text(encoding="utf-8"))
    # a column per variant x evaluator, and per group of the grid's group_by (001's Instruct / base)
    # when it declares one
    grouped = "group" in summ.columns
    summ["group"] = summ["group"].astype(str) if grouped else ""
    mci["group"] = mci["group"].astype(str) if grouped else ""
    groups = list(dict.fromkeys(zip(summ["group"], summ["variant"], summ["evaluator"])))
    assert len(cols) == len(groups), [h for h, _ in cols]
    for (head, cells), (grp, var, ev) in zip(cols, groups):
        if grouped:
            assert head.split("\\\\", 1)[0].endswith(grp), (head, grp)
        g = summ[(summ["group"] == grp) & (summ["variant"] == var) & (summ["evaluator"] == ev)]
        ci = mci[(mci["group"] == grp) & (mci["variant"] == var) & (mci["evaluator"] == ev)]
        assert f"($n = {int(g['n_settings'].iloc[0])}$)" in head, head
        assert list(cells) == list(g["quantity"]), list(cells)
        by_q = dict(zip(ci["quantity"], ci.to_dict("records")))
        # readout= (001 Table 2's token-readout row): "<T1 config>|<est> - <T2 config>|<est>", whose
        # right side is the T2 configuration's own gap; neither is one of the four A-D gaps
        readout = [q for q in ci["quantity"] if "|" in q and " - " in q]
        t2 = {readout[0].split(" - ", 1)[1]} if readout else set()
        gaps = [q for q in ci["quantity"] if "|" in q and " - " not in q and q not in t2]
        names = dict(zip(["g_A", "g_B", "g_C", "g_D"], gaps)) | {"A-B": "g_A - g_B", "A-C": "g_A - g_C",
                                                                "interaction": "interaction"}
        names |= {"readout": readout[0]} if readout else {}
        for q, mean in zip(g["quantity"], g["macro mean"]):
            m = by_q[names[q]]
            # 001 Table 2 prints the bootstrap mean where there is an interval, else the plain macro mean
            want = ([m["bootstrap mean"], m["macro lo"], m["macro hi"]] if pd.notna(m["macro lo"]) else [mean])
            assert [float(x) for x in NUM.findall(cells[q])] == [round(x, 3) for x in want], (stem, q, var, ev)
            assert ("mathrm{ns}" in cells[q]) == str(m["interval"]).startswith("ns"), (q, cells[q])


def test_grid_table_is_study_001_table_2(run):
    check_grid_numbers(run.report / "tables" / "grid.tex", run.report / "comparisons")


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
EXAMPLE_TABLES = [pytest.param(p, id=f"{p.parent.parent.name}/{p.name}")
                  for p in sorted((REPO / "examples" / "reports").glob("s00*/tables/*.tex"))]


@needs_pdflatex
@pytest.mark.parametrize("tex", EXAMPLE_TABLES)
def test_example_tables_compile_and_match_their_cells(tex, tmp_path):
    """The committed twin reports' tables: two-column fit (study 001's A-D grid included), the
    cells tables' first numbers are the committed cells.csv's (answer parse rate, then the
    metrics), and the A-D grids' numbers are their comparison CSVs'."""
    fit = compile_fit(tex, tmp_path, twocolumn=True)
    assert fit.returncode == 0 and fit.overfull == [] and "Float too large" not in fit.log, fit.overfull
    if tex.name.startswith("cells_"):
        cells = pd.read_csv(tex.parent.parent / "cells.csv")
        for cid, body in rows_of(tex.read_text(encoding="utf-8")).items():
            rec = cells[cells["cell_id"] == cid].iloc[0]
            assert float(NUM.findall(body)[0]) == round(float(rec["answer_parse_rate"]), 3), cid
    comparisons = tex.parent.parent / "comparisons"
    if (comparisons / f"{tex.stem}_macro_ci.csv").is_file() and "g_A" in set(
            pd.read_csv(comparisons / f"{tex.stem}_summary.csv").get("quantity", [])):
        check_grid_numbers(tex, comparisons)


def test_aligned_table_is_study_003_table_1(run):
    """Exclusive reversal rates per method and NRR over the assessed cases, recomputed from the long
    comparison CSV; a case with a view not computed is counted as not assessed, never dropped."""
    long = pd.read_csv(run.report / "comparisons" / "al.csv")
    ece = long[(long["metric"] == "ECE") & (long["view"] != "raw")]
    views = sorted(set(ece["view"]), key=["IA", "DA", "CA"].index)
    rows = rows_of((run.report / "tables" / "al.tex").read_text(encoding="utf-8"))
    for method, g in ece.groupby("protocol"):
        piv = g.pivot_table(index=["audit", "model_1", "model_2", "dataset", "variant", "evaluator"], columns="view",
                            values="reversal", aggfunc="first")
        assessed = piv[~(piv.astype(str) == "not computed").any(axis=1)].astype(str) == "True"
        n, n_all = len(assessed), len(piv)
        cells = [c.strip() for c in rows[method].rsplit("\\\\", 1)[0].split("&")]
        assert cells[1] == str(n_all) and cells[-1] == str(n_all - n), method
        if n:
            want = [100 * ((assessed[v]) & ~assessed.drop(columns=v).any(axis=1)).sum() / n for v in views]
            want.append(100 * (~assessed.any(axis=1)).sum() / n)
            assert [float(x) for x in cells[2:-1]] == [round(w, 1) for w in want], method
        else:  # nothing assessed: no rate, never NRR 100
            assert set(cells[2:-1]) == {"--"}, method


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
    assert t.header[0] == "Cell" and set(t.header[1:]) == {"g_A - g_B (T1, grid)", "g_A - g_B (T2, grid2)"}
    j = t.header.index("g_A - g_B (T1, grid)")
    macro = pd.read_csv(run.report / "comparisons" / "grid_macro_ci.csv")
    ab = macro[macro["quantity"] == "g_A - g_B"].set_index(["variant", "evaluator"])
    macro_rows = [(row, key) for row, key in zip(t.rows, t.keys) if key.endswith("/macro")]
    assert macro_rows and any(k.endswith("/agreement") for k in t.keys)
    for row, key in macro_rows:  # 001 Table 9 prints bootstrap means (B = 200)
        var, ev = key.split("/")[:2]
        v = row[j][0] if isinstance(row[j], tuple) else row[j]
        assert v == f"{ab.loc[(var, ev), 'bootstrap mean']:.3f}"


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


@needs_pdflatex
def test_a_table_wider_than_the_page_is_split_by_columns(tmp_path):
    """The general rule: a table wider than \\columnwidth is a table*; one wider than \\textwidth even
    with its text columns wrapped (here the old 001 grid layout: two name columns and eight interval
    columns) becomes consecutive tables of columns, each repeating the row labels, all fitting."""
    from auditlang.report.textables import TexTable, fragment, value_cell

    qs = ["Settings", "g_A", "g_B", "g_C", "g_D", "A-B", "A-C", "interaction", "extra"]
    t = TexTable("wide", "A wide grid.", ["Variant", "Evaluator"] + qs, [False, False] + [True] * len(qs))
    for i, ev in enumerate(["s001.lenient", "s001.exact"]):
        t.add(["s001.bare", ev, "7"] + [value_cell(-0.1 * (i + 1) - 0.01 * k, -0.333, 0.222) for k in range(8)], ev)
    assert t.min_width_pt() > 460
    parts = t.column_parts()
    assert len(parts) == 2 and all(p.header[:2] == ["Variant", "Evaluator"] for p in parts)
    assert [h for p in parts for h in p.header[2:]] == qs
    src = fragment([t])
    assert src.count("\\caption{") == 2 and "(continued, part 2)" in src
    rows = rows_of(src)
    assert set(rows) == {"s001.lenient", "s001.exact", "s001.lenient (columns 2)", "s001.exact (columns 2)"}
    got = [NUM.findall(rows[k]) + NUM.findall(rows[k + " (columns 2)"]) for k in ("s001.lenient", "s001.exact")]
    assert [x[0::3] for x in got] == [[f"{-0.1 * (i + 1) - 0.01 * k:.3f}" for k in range(8)] for i in range(2)]
    (tmp_path / "wide.tex").write_text(src, encoding="utf-8")
    fit = compile_fit(tmp_path / "wide.tex", tmp_path / "fit", twocolumn=True)
    assert fit.returncode == 0 and fit.overfull == [] and "Float too large" not in fit.log, fit.overfull


TALL_SPEC = """
settings s { seed = 42, data_root = "DATA" }

dataset mmlu = jsonl("mmlu.jsonl", task=multiple_choice, sample=20, seed=7)
model mid = hf("org/mid-3b", size=3.0, dtype=bf16)

template t_plain = template("Answer the following multiple-choice question. {{ question }} Answer:")
template t_reorder = template("Choose the correct answer. Question: {{ question }} Correct answer letter:")
template conf_dec = template("Now state your confidence in your answer above as a decimal probability between 0.0 and 1.0.")

variant surface_paraphrase_of_the_instruction = variant(t_plain)
variant reorder = variant(t_reorder)
variant instruction_reorder_with_typos = variant(t_reorder, perturb=[typo()])
variant option_shuffle_with_seed_four = variant(t_plain, perturb=[option_shuffle(seed=4)])
variant implicit_framing_with_typos = variant(t_plain, perturb=[typo()])
variant fewshot_examples_shuffled = variant(t_plain, perturb=[option_shuffle(seed=9)])

protocol tok_norm = token_prob(readout=first_token, normalise=label_set, window=top_k, top_k=200)
protocol tok_raw = tok_norm with (normalise=raw)
protocol verbal = verbalized(scale=decimal_01, phrasing=conf_dec, provenance=self, mode=followup)

evaluator fc = first_char()
evaluator rx = regex_reparse(tail=150)

metric ece10 = ece(bins=10, binning=equal_width)

audit tall {
  models = [mid]
  datasets = [mmlu]
  variants = [surface_paraphrase_of_the_instruction, reorder, instruction_reorder_with_typos, option_shuffle_with_seed_four, implicit_framing_with_typos, fewshot_examples_shuffled]
  protocols = [tok_norm, tok_raw, verbal]
  evaluators = [fc, rx]
  metrics = [accuracy, ece10, brier, auroc]
  bootstrap = bootstrap(resamples=50, seed=42)
  vpr_threshold = 0.8
}

report cells(format=latex)
"""


def floats_of(tex: str) -> list[str]:
    """The floats of a generated fragment, in order (a part's tabular is set in \\auditbox before its float)."""
    return re.split(r"(?=\\sbox\\auditbox|\\begin\{table\*\})", tex.split("\\providecommand\\auditwide", 1)[1])[1:]


@needs_pdflatex
def test_a_cells_table_taller_than_a_page_is_split_into_continued_parts_that_fit(tmp_path_factory):
    """A model x dataset with 36 cells whose names wrap (the s000 twin's cells_primary was cut every 16
    rows, 11pt over the page with its caption and notes): the report's cells table is cut into floats
    that each fit the page of a two-column article, at variant boundaries, every cell once, the later
    parts captioned "(continued, part k)", and each part explains the marks of its own rows."""
    from report_fixtures import build_run

    from auditlang.report import build_report

    tmp = tmp_path_factory.mktemp("tall")
    spec, plan, run_dir = build_run(tmp, TALL_SPEC, journal=False)
    tex_file = build_report(spec, plan, run_dir) / "tables" / "cells_tall.tex"
    src = tex_file.read_text(encoding="utf-8")
    fit = compile_fit(tex_file, tmp / "fit", twocolumn=True)
    assert fit.returncode == 0, fit.log[-2000:]
    assert "Float too large" not in fit.log and fit.overfull == [], (re.findall(r"Float too large[^\n]*", fit.log),
                                                                    fit.overfull)
    assert not SCALING.findall(src)

    cells = pd.read_csv(run_dir / "metrics" / "cells.csv")
    assert len(cells) == 36
    parts = floats_of(src)
    assert len(parts) >= 3
    captions = [re.search(r"\\caption\{(.*)\}\n", p).group(1) for p in parts]
    assert "continued" not in captions[0]
    for k, cap in enumerate(captions[1:], start=2):
        assert f"(continued, part {k}). Point estimate" in cap, cap
        assert cap.startswith("Audit tall: model mid on mmlu")
    labels = re.findall(r"\\label\{([^}]*)\}", src)
    assert labels == ["tab:cells_tall_mid_mmlu"] + [f"tab:cells_tall_mid_mmlu-{k}" for k in range(2, len(parts) + 1)]
    keys = [list(rows_of(p)) for p in parts]
    assert sorted(k for ks in keys for k in ks) == sorted(cells["cell_id"])
    for prev, nxt in zip(keys, keys[1:]):  # parts end where a variant ends
        assert prev[-1].split("/")[3] != nxt[0].split("/")[3], (prev[-1], nxt[0])
    marked = 0
    for p in parts:
        rows = rows_of(p)
        for key, body in rows.items():
            if "dagger" in body:
                marked += 1
                variant, protocol, evaluator = key.split("/")[3:]
                note = p.split("\\bottomrule", 1)[1]
                assert "excluded by the audit's verbal parse-rate rule" in note, key
                assert prose(f"{variant} / {protocol} / {evaluator}: VPR") in note, key
    assert marked == 2  # reorder / verbal under fc and under rx (LOW_VPR_CELL)


@needs_pdflatex
def test_a_tall_generic_table_carries_its_notes_once_under_its_last_part(tmp_path):
    """A comparison table (no per-part notes) of 64 two-line rows and a long note: parts that fit, the notes under the last only."""
    from auditlang.report.textables import TexTable, fragment, value_cell

    t = TexTable("long", "A long comparison.", ["Setting", "Value", "Other"], [False, True, True])
    for i in range(64):
        t.add([f"setting_{i:02d}", value_cell(0.01 * i, 0.0, 0.5), value_cell(0.5, 0.1, 0.9)], f"s{i}")
    t.notes = ["A note that explains the table. " * 40]
    src = fragment([t])
    parts = floats_of(src)
    assert len(parts) >= 2 and [p.count("A note that explains") for p in parts] == [0] * (len(parts) - 1) + [40]
    assert [k for p in parts for k in rows_of(p)] == [f"s{i}" for i in range(64)]
    (tmp_path / "long.tex").write_text(src, encoding="utf-8")
    fit = compile_fit(tmp_path / "long.tex", tmp_path / "fit", twocolumn=True)
    assert fit.returncode == 0 and fit.overfull == [] and "Float too large" not in fit.log, fit.overfull
