"""A paired model contrast inside one run (issue 35 item 1): ``compare ... = contrast(...)`` in a
spec, ``auditc run`` on a scripted engine, then the delta and its paired bootstrap interval in
every report format, checked against an independent numpy computation and against
``auditc diff --match`` on the same run."""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import numpy as np

from auditlang.cli import main
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

N = 40
SPEC = """import "stdlib/s000"
dataset arc = jsonl("arc.jsonl", task=multiple_choice)
model smol = hf("org/smol", dtype=float32, max_tokens=4)
model gemma = hf("org/gemma", dtype=float32, max_tokens=4)
audit a {
  models = [smol, gemma]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  metrics = [accuracy, ece(bins=10), brier]
  bootstrap = bootstrap(resamples=500, seed=7)
}
compare smol_vs_gemma = contrast(a, models=[smol, gemma], metrics=[accuracy, brier])
compare views = aligned(a, pairs=[[smol, gemma]], views=[instance, distribution])
report cells, comparisons, html
"""


def smol_right(i: int) -> bool:
    return i % 4 != 0


def gemma_right(i: int) -> bool:
    return i % 2 == 0


def conf(model: str, i: int) -> float:
    return 0.9 if model == "smol" else (0.6 if i % 3 else 0.8)


def _script(req):
    text = prompt_text(req)
    i = int(re.search(r"Which number is (\d+)\?", text).group(1))
    if req.kind == "generate" and "confidence" in text:
        return generation(req, str(conf(req.model, i)))
    if req.kind == "generate":
        right = smol_right(i) if req.model == "smol" else gemma_right(i)
        return generation(req, "A" if right else "B")
    return None


def _independent(B: int, seed: int, level: float):
    """smol - gemma of accuracy and Brier with numpy alone: the same items resampled on both sides."""
    za = np.array([float(smol_right(i)) for i in range(N)])
    zb = np.array([float(gemma_right(i)) for i in range(N)])
    ca = np.array([conf("smol", i) for i in range(N)])
    cb = np.array([conf("gemma", i) for i in range(N)])
    idx = np.random.default_rng(seed).integers(0, N, size=(B, N))
    out = {}
    acc_reps = za[idx].mean(1) - zb[idx].mean(1)
    brier_reps = ((ca[idx] - za[idx]) ** 2).mean(1) - ((cb[idx] - zb[idx]) ** 2).mean(1)
    a = (1 - level) / 2
    out["accuracy"] = (za.mean() - zb.mean(), *np.quantile(acc_reps, [a, 1 - a]))
    out["brier"] = (((ca - za) ** 2).mean() - ((cb - zb) ** 2).mean(), *np.quantile(brier_reps, [a, 1 - a]))
    return out


def test_model_contrast_in_every_report_format(tmp_path: Path, monkeypatch, capsys) -> None:
    engine = use_scripted_engine(monkeypatch, _script)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arc.jsonl").write_text(number_items(N), encoding="utf-8")
    spec = tmp_path / "s.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert {r.model for r in engine.seen} == {"smol", "gemma"}
    want = _independent(500, 7, 0.95)

    rows = list(csv.DictReader((out / "report" / "comparisons" / "smol_vs_gemma.csv").open(encoding="utf-8")))
    assert [(r["a"], r["b"], r["metric"]) for r in rows] == [("smol", "gemma", "accuracy"), ("smol", "gemma", "brier")]
    for r in rows:
        point, lo, hi = want[r["metric"]]
        assert int(r["n_paired"]) == N
        assert float(r["delta"]) == np.float64(point) or abs(float(r["delta"]) - point) < 1e-12
        assert abs(float(r["delta lo"]) - lo) < 1e-12 and abs(float(r["delta hi"]) - hi) < 1e-12
        assert float(r["value_a"]) - float(r["value_b"]) == float(r["delta"])
    acc = next(r for r in rows if r["metric"] == "accuracy")
    assert abs(float(acc["delta"]) - 0.25) < 1e-12  # 30/40 - 20/40
    assert acc["significant"] == str(want["accuracy"][1] > 0 or want["accuracy"][2] < 0)

    # aligned's raw difference gets the same interval (same helper, same items, same resamples)
    views = list(csv.DictReader((out / "report" / "comparisons" / "views.csv").open(encoding="utf-8")))
    raw = next(r for r in views if r["metric"] == "Brier" and r["view"] == "raw")
    brier = next(r for r in rows if r["metric"] == "brier")
    assert (raw["diff (1-2) lo"], raw["diff (1-2) hi"]) == (brier["delta lo"], brier["delta hi"])
    assert all(r["diff (1-2) lo"] == "" for r in views if r["view"] != "raw")

    # the report shows what `auditc plan --precision` planned for the same pair and metric
    capsys.readouterr()
    assert main(["plan", str(spec), "--data-root", str(tmp_path / "data"), "--precision", "--format", "json",
                 "--no-requests"]) == 0
    planned = [r for r in json.loads(capsys.readouterr().out)["precision"]["rows"]
               if r["group"] == "compare smol_vs_gemma"]
    assert {r["metric"] for r in planned} == {"accuracy", "brier"}
    for r in rows:
        p = next(x for x in planned if x["metric"] == r["metric"])
        assert p["cell"].split("/")[1] == "smol" and p["cell_a"].split("/")[1] == "gemma"  # B - A = smol - gemma
        assert abs(float(r["planned MDD"]) - p["mdd"]) < 1e-12
        assert abs(float(r["planned half-width"]) - p["half_width"]) < 1e-12
        assert abs(float(r["half-width"]) - (float(r["delta hi"]) - float(r["delta lo"])) / 2) < 1e-12

    d, lo, hi = want["accuracy"]
    shown = f"{d:.3f} [{lo:.3f}, {hi:.3f}]"
    md = (out / "report" / "comparisons.md").read_text(encoding="utf-8")
    assert "smol_vs_gemma (contrast, audit a)" in md and shown in md and "B=500 resamples, seed=7" in md
    tex = (out / "report" / "tables" / "smol_vs_gemma.tex").read_text(encoding="utf-8")
    assert f"{d:.3f}" in tex and f"{{[}}{lo:.3f}, {hi:.3f}]" in tex and "smol & gemma & accuracy & 40" in tex
    assert "B=500, seed=7" in tex
    html = (out / "report" / "report.html").read_text(encoding="utf-8")
    assert "smol_vs_gemma (contrast)" in html and shown in html
    # the LaTeX table compiles in a two-column article with no overfull box
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    try:
        from latex_fit import PDFLATEX, compile_fit
    finally:
        sys.path.pop(0)
    if PDFLATEX is not None:  # CI installs pdflatex; without it the rest of the test still runs
        fit = compile_fit(out / "report" / "tables" / "smol_vs_gemma.tex", tmp_path / "tex", twocolumn=True)
        assert fit.returncode == 0, fit.log[-2000:]
        assert fit.overfull == [] and "Float too large" not in fit.log

    # auditc diff --match pairs each smol cell with the gemma cell of the same run: B - A = gemma - smol
    capsys.readouterr()
    assert main(["diff", str(out), str(out), "--match", "smol=gemma", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    got = {r["metric"]: r for r in body["rows"]}
    assert abs(got["accuracy"]["diff"] + d) < 1e-12
    assert abs(got["accuracy"]["low"] + hi) < 1e-9 and abs(got["accuracy"]["high"] + lo) < 1e-9
    cell = "a/smol/arc/s000.surface_paraphrase/s000.verbal_decimal/<default>"
    assert got["accuracy"]["cell_id"] == cell
    assert body["matched"] == [{"a": cell, "b": cell.replace("/smol/", "/gemma/")}]
    assert main(["diff", str(out), str(out), "--match", "smol=gemma"]) == 0
    text = capsys.readouterr().out
    assert "cells matched by --match smol=gemma: 1 pair(s)" in text and "org/gemma" in text.splitlines()[1]
    # a name no cell carries is a usage error, not a traceback
    assert main(["diff", str(out), str(out), "--match", "smol=llama"]) == 2
    assert "no cell of RUN_B names 'llama'" in capsys.readouterr().err


def _journal_results(run: Path) -> int:
    from auditlang.store.journal import Journal

    with Journal(run) as j:
        return j.counts().results


def test_one_model_under_two_names_runs_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """The same declaration under two names (and a --swap-model to an identical declaration):
    each distinct request executes once, both names' cells get the results."""
    engine = use_scripted_engine(monkeypatch, _script)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arc.jsonl").write_text(number_items(N), encoding="utf-8")
    twice = SPEC.replace('model gemma = hf("org/gemma"', 'model gemma = hf("org/smol"')
    spec = tmp_path / "twice.audit"
    spec.write_text(twice, encoding="utf-8")
    single = tmp_path / "single.audit"
    single.write_text(SPEC.replace("models = [smol, gemma]", "models = [smol]").split("compare ")[0], encoding="utf-8")
    one = tmp_path / "one"
    assert main(["run", str(single), "--data-root", str(tmp_path / "data"), "--out", str(one), "--no-progress"]) == 0
    n_single = len(engine.seen)
    assert n_single == 2 * N and _journal_results(one) == 2 * N  # an answer and a confidence follow-up per item
    engine.seen.clear()
    out = tmp_path / "run"
    assert main(["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"]) == 0
    assert len(engine.seen) == n_single and len({r.id for r in engine.seen}) == n_single
    assert {r.model for r in engine.seen} == {"smol"}
    assert _journal_results(out) == n_single
    cells = {r["model"]: r for r in csv.DictReader((out / "metrics" / "cells.csv").open(encoding="utf-8"))}
    assert set(cells) == {"smol", "gemma"} and cells["gemma"]["n"] == cells["smol"]["n"] == str(N)
    assert cells["gemma"]["accuracy"] == cells["smol"]["accuracy"] == "0.75"
    run_json = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run_json["fingerprints"]["gemma"] == run_json["fingerprints"]["smol"]
    rows = list(csv.DictReader((out / "report" / "comparisons" / "smol_vs_gemma.csv").open(encoding="utf-8")))
    assert {float(r["delta"]) for r in rows} == {0.0}
    capsys.readouterr()
    assert main(["plan", str(spec), "--data-root", str(tmp_path / "data")]) == 0
    assert "model gemma is declared as smol is" in capsys.readouterr().out

    # --swap-model to a declaration identical to another model's: the swapped model runs nothing new
    two = tmp_path / "two.audit"
    two.write_text(SPEC, encoding="utf-8")
    engine.seen.clear()
    swapped = tmp_path / "swapped"
    assert main(["run", str(two), "--data-root", str(tmp_path / "data"), "--out", str(swapped), "--no-progress",
                 "--swap-model", 'gemma=hf("org/smol", dtype=float32, max_tokens=4)']) == 0
    assert len(engine.seen) == n_single and _journal_results(swapped) == n_single


def test_contrast_mistakes_are_diagnostics(tmp_path: Path, capsys) -> None:
    bad = SPEC.split("compare ")[0].replace("bootstrap = bootstrap(resamples=500, seed=7)", "") + """
compare two_axes = contrast(a, models=[smol, gemma], protocols=[s000.verbal_decimal])
compare one_name = contrast(a, models=[smol, smol])
compare outside = contrast(a, variants=[s000.surface_paraphrase, s000.implicit_framing])
compare no_evals = contrast(a, evaluators=[s000.first_char, s000.regex_reparse])
"""
    spec = tmp_path / "bad.audit"
    spec.write_text(bad, encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "error[E157]: compare 'two_axes': contrast() takes exactly one axis" in err
    assert "error[E157]: compare 'one_name': models= names 1 distinct model" in err
    assert "error[E156]: compare 'outside': 's000.implicit_framing' is not in audit 'a' variants" in err
    assert "error[E156]: compare 'no_evals': 's000.first_char' is not in audit 'a' evaluators" in err
    assert "hint: audit 'a' declares no evaluators" in err and err.count("^") >= 4
    unit = SPEC.replace("bootstrap(resamples=500, seed=7)", "bootstrap(resamples=500, seed=7, unit=cell)")
    spec.write_text(unit, encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    assert "error[E159]: compare 'smol_vs_gemma' (contrast) cannot use bootstrap unit=cell" in capsys.readouterr().err
