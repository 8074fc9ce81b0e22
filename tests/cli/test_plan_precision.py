"""``auditc plan --precision [--pilot RUN_DIR]``: the commands a user types, on the project's example spec
and on a pilot made by ``auditc run --limit N``.

The analytic figures are checked against their formulas at the declared sizes (the formulas
themselves against simulation in tests/metrics_core/test_precision.py); the pilot figures against a
percentile bootstrap and per-item differences computed here from the pilot's records.parquet, and
both against the 1/sqrt(N) scaling when N changes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlang.cli import main
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "data"
QUICKSTART = ROOT / "examples" / "quickstart_full.audit"
Z = 1.959963984540054
K = Z + 0.8416212335729143  # z_0.975 + z_0.8

SPEC = """import "stdlib/s000"
dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=30, seed=42)
model m = hf("org/scripted", dtype=float32)
audit a {
  models = [m]
  datasets = [capitals]
  variants = [s000.surface_paraphrase, s000.implicit_framing]
  protocols = [s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier, s000.ece10]
  bootstrap = bootstrap(resamples=400, seed=5)
}
"""


def _plan_json(capsys, *args: str) -> dict:
    assert main(["plan", *args, "--precision", "--format", "json", "--no-requests"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["precision"]


def _rows(body: dict, kind: str, metric: str, group: str = "") -> list[dict]:
    return [r for r in body["rows"] if r["kind"] == kind and r["metric"] == metric and (not group or r["group"] == group)]


def test_analytic_precision_of_the_quickstart(capsys) -> None:
    body = _plan_json(capsys, str(QUICKSTART), "--data-root", str(DATA))
    assert body["pilot"] is None and body["planning_p"] == 0.5 and body["mdd_factor"] == pytest.approx(K)
    acc = _rows(body, "cell", "accuracy")
    assert len(acc) == 48 and {r["source"] for r in acc} == {"analytic"}
    by_ds = {r["dataset"]: r for r in acc}
    assert {ds: r["n"] for ds, r in by_ds.items()} == {"capitals": 60, "arithmetic": 100}
    for r in by_ds.values():
        assert r["half_width"] == pytest.approx(Z * 0.5 / math.sqrt(r["n"]))
    ratio = by_ds["capitals"]["half_width"] / by_ds["arithmetic"]["half_width"]
    assert ratio == pytest.approx(math.sqrt(100 / 60))  # half-width ~ 1/sqrt(N)
    # brier: plug-in variance under the stated assumption (a calibrated model with Beta(1, 1)
    # confidence at p = 0.5: per-item SD sqrt(1/15 - 1/36)), not the worst-case bound 0.5
    brier = _rows(body, "cell", "brier")[0]
    assert brier["half_width"] == pytest.approx(Z * math.sqrt(7 / 180) / math.sqrt(brier["n"]))
    assert "assumption: a calibrated model" in brier["method"]
    ece = _rows(body, "cell", "s000.ece10")  # shown as the spec names it
    assert ece and all(r["half_width"] is None and "biased upward" in r["note"] for r in ece)
    auroc = _rows(body, "cell", "auroc")[0]
    n1 = auroc["n"] // 2
    se = math.sqrt((0.25 + (n1 - 1) * (1 / 3 - 0.25) + (n1 - 1) * (0.5 / 1.5 - 0.25)) / (n1 * n1))  # Hanley-McNeil, A=0.5
    assert auroc["half_width"] == pytest.approx(Z * se)
    # paired contrasts: every pair of cells differing in one axis; MDD = 2.80 * sqrt(2 p (1-p)) / sqrt(N)
    groups = {r["group"] for r in body["rows"] if r["kind"] == "contrast"}
    assert groups == {"model pairs", "variant pairs", "protocol pairs", "evaluator pairs"}
    models = [r for r in _rows(body, "contrast", "accuracy", "model pairs") if r["dataset"] == "arithmetic"]
    assert len(models) == 12 and all(r["cell_a"].split("/")[1] != r["cell"].split("/")[1] for r in models)
    assert models[0]["mdd"] == pytest.approx(K * math.sqrt(0.5) / 10)
    assert models[0]["half_width"] == pytest.approx(Z * math.sqrt(0.5) / 10)
    # --limit plans the smaller run: the same formulas at N = 15
    small = _plan_json(capsys, str(QUICKSTART), "--data-root", str(DATA), "--limit", "15")
    assert _rows(small, "cell", "accuracy")[0]["half_width"] == pytest.approx(Z * 0.5 / math.sqrt(15))
    # planning accuracy and correlation
    p8 = _plan_json(capsys, str(QUICKSTART), "--data-root", str(DATA), "--precision-p", "0.8", "--precision-rho", "0.5")
    r = [x for x in _rows(p8, "cell", "accuracy") if x["dataset"] == "arithmetic"][0]
    assert r["half_width"] == pytest.approx(Z * 0.4 / 10)
    c = [x for x in _rows(p8, "contrast", "accuracy") if x["dataset"] == "arithmetic"][0]
    assert c["mdd"] == pytest.approx(K * math.sqrt(2 * 0.16 * 0.5) / 10)


def test_precision_table_and_formulas_are_printed(capsys) -> None:
    assert main(["plan", str(QUICKSTART), "--data-root", str(DATA), "--precision"]) == 0
    out = capsys.readouterr().out
    assert "precision (analytic, planning accuracy p=0.5)" in out
    assert "audit quickstart: per cell" in out and "audit quickstart: paired contrasts" in out
    line = next(x for x in out.splitlines() if x.startswith("arithmetic") and " accuracy " in x)
    assert line.split()[-1] == f"{Z * 0.5 / 10:.3f}"
    line = next(x for x in out.splitlines() if x.startswith("model pairs") and "arithmetic" in x and " accuracy " in x)
    assert line.split()[-2:] == [f"{Z * math.sqrt(0.5) / 10:.3f}", f"{K * math.sqrt(0.5) / 10:.3f}"]
    assert "MDD = (z_{1-α/2} + z_{power}) · sd_d / √n = 2.802 · sd_d / √n" in out
    assert "binned ECE is biased upward at small n" in out
    # the Brier figure names the assumption it rests on
    assert "brier: plug-in z·s/√N with s = 0.197, the per-item SD under an assumption: a calibrated model" in out
    # without data the sizes are the declared sample sizes, marked as estimated
    assert main(["plan", str(QUICKSTART), "--no-data", "--precision"]) == 0
    out = capsys.readouterr().out
    assert "* N estimated from the declared sample sizes" in out
    assert any(x.startswith("arithmetic") and " 100* " in x for x in out.splitlines())


def test_declared_comparisons_give_their_pairs(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "cmp.audit"
    spec.write_text(SPEC.replace("protocols = [s000.verbal_decimal]", "protocols = [s000.verbal_decimal, s000.token_norm]")
                    + "compare gap = ece_gap(a, verbal=s000.verbal_decimal, token=s000.token_norm, metric=s000.ece10)\n"
                      "compare gap1 = ece_gap(a, verbal=s000.verbal_decimal, token=s000.token_norm, metric=s000.ece10, "
                      "variants=[s000.implicit_framing])\n"
                      "compare sp = spread(a, metric=accuracy)\ncompare sz = size_spread(a, metric=accuracy)\n",
                    encoding="utf-8")
    body = _plan_json(capsys, str(spec), "--data-root", str(DATA))
    gap = [r for r in body["rows"] if r["group"] == "compare gap"]
    assert len(gap) == 2 and all(r["cell_a"].split("/")[4] == "s000.token_norm" and r["cell"].split("/")[4] ==
                                 "s000.verbal_decimal" and r["metric"] == "s000.ece10" for r in gap)
    gap1 = [r for r in body["rows"] if r["group"] == "compare gap1"]  # variants=: the pairs of those variants
    assert len(gap1) == 1 and gap1[0]["cell"].split("/")[3] == "s000.implicit_framing"
    sp = [r for r in body["rows"] if r["group"] == "compare sp"]
    assert len(sp) == 2 and sp[0]["mdd"] == pytest.approx(K * math.sqrt(0.5 / 30))
    sz = [r for r in body["rows"] if r["group"] == "compare sz"]
    assert len(sz) == 1 and sz[0]["kind"] == "comparison" and "number of models" in sz[0]["note"]


def _script(req):
    if req.kind != "generate":
        return None
    text = prompt_text(req)
    h = sum(map(ord, text))
    if "confidence" in text.lower() and req.prompt.messages and len(req.prompt.messages) > 1:
        return generation(req, "not sure" if h % 5 == 0 else f"{0.2 + (h % 8) / 10:.1f}")  # the verbal follow-up
    return generation(req, "ABCD"[h % 4])


def _pilot(tmp_path: Path, monkeypatch, capsys) -> tuple[Path, Path]:
    spec = tmp_path / "p.audit"
    spec.write_text(SPEC, encoding="utf-8")
    use_scripted_engine(monkeypatch, _script)
    out = tmp_path / "pilot"
    rc = main(["run", str(spec), "--data-root", str(DATA), "--out", str(out), "--limit", "20", "--no-report",
               "--display", "none"])
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()
    return spec, out


def _boot_half_width(x: list[np.ndarray], stat, B: int, seed: int) -> float:
    n = len(x[0])
    idx = np.random.default_rng(seed).integers(0, n, size=(B, n))
    reps = np.array([stat(*(a[r] for a in x)) for r in idx])
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return (hi - lo) / 2


def test_pilot_precision_scales_the_bootstrap_of_the_pilot(tmp_path: Path, monkeypatch, capsys) -> None:
    spec, pilot = _pilot(tmp_path, monkeypatch, capsys)
    rec = pd.read_parquet(pilot / "records.parquet").sort_values(["item_index", "item_id"])
    assert rec.correct.nunique() == 2 and rec.confidence.notna().sum() > 10  # the pilot varies
    full = _plan_json(capsys, str(spec), "--data-root", str(DATA), "--pilot", str(pilot))
    at20 = _plan_json(capsys, str(spec), "--data-root", str(DATA), "--pilot", str(pilot), "--limit", "20")
    assert full["pilot"] == str(pilot)
    for cid, df in rec.groupby("cell_id"):
        y = df.correct.to_numpy(dtype=float)
        h20 = _boot_half_width([y], np.mean, 400, 5)  # the audit's bootstrap(resamples=400, seed=5)
        r20 = next(r for r in _rows(at20, "cell", "accuracy") if r["cell"] == cid)
        r30 = next(r for r in _rows(full, "cell", "accuracy") if r["cell"] == cid)
        assert (r20["source"], r20["n_pilot"], r20["n"], r30["n"]) == ("pilot", 20, 20, 30)
        assert r20["half_width"] == pytest.approx(h20)
        assert r30["half_width"] == pytest.approx(h20 * math.sqrt(20 / 30))  # ~ 1/sqrt(N)
        # brier on the rows with a parsed confidence; N scaled by the pilot's usable fraction
        ok = df.confidence.notna().to_numpy()
        c, yy = df.confidence.to_numpy(dtype=float)[ok], y[ok]
        rb = next(r for r in _rows(full, "cell", "brier") if r["cell"] == cid)
        assert rb["n_pilot"] == ok.sum() and rb["n_used"] == pytest.approx(30 * ok.sum() / 20)
        hb = _boot_half_width([c, yy], lambda a, b: np.mean((a - b) ** 2), 400, 5)
        assert rb["half_width"] == pytest.approx(hb * math.sqrt(ok.sum() / rb["n_used"]))
    # the variant contrast: sd of the per-item differences of correctness, MDD = 2.80 sd / sqrt(N)
    pair = _rows(full, "contrast", "accuracy", "variant pairs")
    assert len(pair) == 1
    a = rec[rec.cell_id == pair[0]["cell_a"]].set_index("item_id").correct
    b = rec[rec.cell_id == pair[0]["cell"]].set_index("item_id").correct.loc[a.index]
    sd = float(np.std((b - a).to_numpy(dtype=float), ddof=1))
    assert sd > 0 and pair[0]["sd"] == pytest.approx(sd)
    assert pair[0]["mdd"] == pytest.approx(K * sd / math.sqrt(30))
    assert pair[0]["half_width"] == pytest.approx(Z * sd / math.sqrt(30))
    p20 = _rows(at20, "contrast", "accuracy", "variant pairs")[0]
    assert p20["mdd"] / pair[0]["mdd"] == pytest.approx(math.sqrt(30 / 20))
    ece = _rows(full, "contrast", "s000.ece10", "variant pairs")[0]
    assert ece["source"] == "pilot" and ece["mdd"] > 0 and "paired bootstrap" in ece["method"]
    # a cell's binned ECE: the plug-in variance of its per-item terms on the pilot, at the used N
    from auditlang.metrics.calibration import ece_terms

    for cid, df in rec.groupby("cell_id"):
        d = df[df.confidence.notna()]
        re = next(r for r in _rows(full, "cell", "s000.ece10") if r["cell"] == cid)
        terms = ece_terms(d.confidence.to_numpy(float), d.correct.to_numpy(float), bins=10)
        assert "plug-in" in re["method"]
        assert re["half_width"] == pytest.approx(Z * np.std(terms, ddof=1) / math.sqrt(re["n_used"]))
    # the summary (the printed lines) takes median / max over the cells of a row
    acc_rows = _rows(full, "cell", "accuracy")
    g = next(x for x in full["summary"] if x["kind"] == "cell" and x["metric"] == "accuracy")
    assert g["rows"] == 2 and g["half_width"]["max"] == pytest.approx(max(r["half_width"] for r in acc_rows))
    assert g["usable"]["min"] == 1.0
    gb = next(x for x in full["summary"] if x["kind"] == "cell" and x["metric"] == "brier")
    usable_b = min(r["usable"] for r in _rows(full, "cell", "brier"))
    assert gb["usable"]["min"] == pytest.approx(usable_b) and usable_b < 1.0  # an unparsed verbal confidence
    # the table says where the numbers come from
    assert main(["plan", str(spec), "--data-root", str(DATA), "--precision", "--pilot", str(pilot)]) == 0
    out = capsys.readouterr().out
    assert f"precision (from pilot run {pilot})" in out and "percentile bootstrap" in out
    assert "binned ECE: plug-in variance" in out
    line = next(x for x in out.splitlines() if x.startswith("capitals") and " accuracy " in x)
    assert "100 %" in line and f"{g['half_width']['median']:.3f}" in line


def test_dryrun_pilot_and_user_errors(tmp_path: Path, capsys) -> None:
    text = QUICKSTART.read_text(encoding="utf-8")
    spec = tmp_path / "q.audit"
    spec.write_text(text.replace('  data_root = "data"\n', ""), encoding="utf-8")
    pilot = tmp_path / "pilot"
    assert main(["run", str(spec), "--data-root", str(DATA), "--engine", "dryrun", "--limit", "4", "--out", str(pilot),
                 "--no-report", "--display", "none"]) == 0
    capsys.readouterr()
    body = _plan_json(capsys, str(spec), "--data-root", str(DATA), "--pilot", str(pilot))
    acc = _rows(body, "cell", "accuracy")
    assert len(acc) == 48 and all(r["n_pilot"] == 4 and r["half_width"] == 0.0 and "no variation" in r["note"] for r in acc)
    assert all(r["half_width"] is None and "no pilot item with confidence" in r["note"] for r in _rows(body, "cell", "brier"))
    # user mistakes: exit 2 with a message, no traceback
    assert main(["plan", str(spec), "--data-root", str(DATA), "--pilot", str(pilot)]) == 2
    assert "--pilot RUN_DIR is read only with --precision" in capsys.readouterr().err
    assert main(["plan", str(spec), "--data-root", str(DATA), "--precision", "--precision-p", "1.5"]) == 2
    assert "--precision-p 1.5" in capsys.readouterr().err
    other = tmp_path / "other.audit"
    other.write_text(text.replace('  data_root = "data"\n', "").replace("audit quickstart", "audit other"), encoding="utf-8")
    assert main(["plan", str(other), "--data-root", str(DATA), "--precision", "--pilot", str(pilot)]) == 2
    assert "none of its cells is a cell of" in capsys.readouterr().err
    assert main(["plan", str(spec), "--data-root", str(DATA), "--precision", "--pilot", str(tmp_path / "nope")]) == 1
    assert "is not a run directory" in capsys.readouterr().err


def test_analytic_brier_says_it_assumes_calibration_against_a_monte_carlo(capsys) -> None:
    """issue 39 item 5: without a pilot the Brier half-width is the calibrated model's; an
    over-confident model's Monte Carlo spread is wider (0.45-0.66x was reported), and the figure
    says so next to itself, with the [0, 1] bound that holds for every model."""
    body = _plan_json(capsys, str(QUICKSTART), "--data-root", str(DATA))
    rows = _rows(body, "cell", "brier") + _rows(body, "contrast", "brier")
    assert rows and all("assumes a calibrated model" in r["note"] and "run --pilot" in r["note"] for r in rows)
    row = next(r for r in _rows(body, "cell", "brier") if r["dataset"] == "arithmetic")
    n = row["n"]
    rng = np.random.default_rng(11)
    reps = 6000
    # calibrated (the stated assumption): the figure is the spread
    c = rng.uniform(0.0, 1.0, (reps, n))
    y = (rng.random((reps, n)) < c).astype(float)
    calibrated = np.quantile(((c - y) ** 2).mean(axis=1), [0.025, 0.975])
    assert (calibrated[1] - calibrated[0]) / 2 == pytest.approx(row["half_width"], rel=0.08)
    # over-confident: confidence 0.8-1.0, accuracy 0.5: the spread is about twice the figure, below the bound
    c = rng.uniform(0.8, 1.0, (reps, n))
    y = (rng.random((reps, n)) < 0.5).astype(float)
    lo, hi = np.quantile(((c - y) ** 2).mean(axis=1), [0.025, 0.975])
    spread = (hi - lo) / 2
    assert row["half_width"] / spread < 0.66
    assert spread <= Z * 0.5 / math.sqrt(n)  # the bound the note names
    # the printed table carries the note as a footnote of the Brier rows
    assert main(["plan", str(QUICKSTART), "--data-root", str(DATA), "--precision"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # long lines are wrapped
    assert ("no pilot: the figure assumes a calibrated model, and an over- or under-confident model's half-width "
            "is wider (up to the bound z*0.5/sqrt(N)") in out
    assert "a miscalibrated model's is wider, up to z·0.5/√N" in out
