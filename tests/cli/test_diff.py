"""``auditc diff RUN_A RUN_B``: the command a user types, on run directories made by ``auditc run``.

Dry-run directories give no confidences (every difference 0 or undefined); a scripted engine
(tests/scripted_engine.py) gives two runs of one spec with different answers and confidences, whose
differences are checked against a paired bootstrap computed here from the two records files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlang.cli import main
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "data"

SPEC = """
dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=30, seed=42)
model m = hf("org/scripted", dtype=float32)
audit a {
  models = [m]
  datasets = [capitals]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
  bootstrap = bootstrap(resamples=500, seed=11)
}
"""


def _run(tmp_path: Path, name: str, spec_text: str, capsys, *extra: str) -> Path:
    spec = tmp_path / f"{name}.audit"
    spec.write_text('import "stdlib/s000"\n' + spec_text, encoding="utf-8")
    out = tmp_path / name
    rc = main(["run", str(spec), "--data-root", str(DATA), "--out", str(out), "--no-report", "--display", "none", *extra])
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()
    return out


def test_diff_of_two_dry_runs_is_zero(tmp_path: Path, capsys) -> None:
    text = (ROOT / "examples" / "quickstart_full.audit").read_text(encoding="utf-8").replace('import "stdlib/s000"\n', "")
    a = _run(tmp_path, "a", text, capsys, "--engine", "dryrun", "--limit", "4")
    b = _run(tmp_path, "b", text, capsys, "--engine", "dryrun", "--limit", "4")
    assert main(["diff", str(a), str(b), "--metric", "accuracy", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert len(body["rows"]) == 48 and not body["only_a"] and not body["only_b"]
    assert all(r["diff"] == 0.0 and (r["low"], r["high"]) == (0.0, 0.0) and r["significant"] is False
               and (r["B"], r["seed"]) == (1000, 42) and r["n_paired"] == 4 for r in body["rows"])
    assert main(["diff", str(a), str(b)]) == 0  # table: confidence metrics are undefined (dryrun has none)
    out = capsys.readouterr().out
    assert "48 cell(s) in both runs, 0 only in A, 0 only in B" in out and "seed=42" in out
    assert "no usable item in A and B (confidence unknown)" in out
    assert "0 of 192 difference(s) significant" in out
    assert "s000.ece10" in out  # a named metric of the spec is shown (and selected) by its name
    assert main(["diff", str(a), str(b), "--metric", "s000.ece10", "--format", "json"]) == 0
    assert {r["metric"] for r in json.loads(capsys.readouterr().out)["rows"]} == {"s000.ece10"}


def _answers(letter_of):
    def script(req):
        if req.kind != "generate":
            return None
        text = prompt_text(req)
        if "confidence" in text.lower() and req.prompt.messages and len(req.prompt.messages) > 1:
            return generation(req, "0.9" if letter_of(text) == "B" else "0.3")  # the verbal follow-up
        return generation(req, letter_of(text))
    return script


def _independent(a: pd.DataFrame, b: pd.DataFrame, stat, cols, B: int, seed: int, level: float = 0.95):
    a = a.sort_values(["item_index", "item_id"]).set_index("item_id")  # the pairing's item order
    b = b.set_index("item_id").loc[a.index]
    ok = np.ones(len(a), dtype=bool)
    for c in cols:
        ok &= a[c].notna().to_numpy() & b[c].notna().to_numpy()
    xa = [a[c].to_numpy(dtype=float)[ok] for c in cols]
    xb = [b[c].to_numpy(dtype=float)[ok] for c in cols]
    n = int(ok.sum())
    idx = np.random.default_rng(seed).integers(0, n, size=(B, n))
    reps = np.array([stat(*(x[r] for x in xb)) - stat(*(x[r] for x in xa)) for r in idx])
    return stat(*xb) - stat(*xa), *np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])


def test_diff_of_two_scripted_runs_matches_an_independent_paired_bootstrap(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, _answers(lambda t: "B"))
    a = _run(tmp_path, "a", SPEC, capsys)
    use_scripted_engine(monkeypatch, _answers(lambda t: "A" if len(t) % 3 else "B"))
    b = _run(tmp_path, "b", SPEC, capsys)
    ra, rb = pd.read_parquet(a / "records.parquet"), pd.read_parquet(b / "records.parquet")
    assert ra.confidence.notna().any() and rb.confidence.notna().any()  # the scripted confidences were parsed
    assert main(["diff", str(a), str(b), "--format", "json"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert set(rows) == {"accuracy", "brier"}
    acc = _independent(ra, rb, lambda y: y.mean(), ["correct"], 500, 11)
    brier = _independent(ra, rb, lambda c, y: ((c - y) ** 2).mean(), ["confidence", "correct"], 500, 11)
    for name, (point, lo, hi) in (("accuracy", acc), ("brier", brier)):
        r = rows[name]
        assert (r["diff"], r["low"], r["high"]) == (pytest.approx(point), pytest.approx(lo), pytest.approx(hi))
        assert r["significant"] == (lo > 0 or hi < 0) and (r["B"], r["seed"]) == (500, 11)
    assert acc[0] != 0.0  # the two runs really differ
    # --seed / --resamples / --level override the audit's bootstrap, and the table says so
    assert main(["diff", str(a), str(b), "--metric", "accuracy", "--seed", "3", "--resamples", "200", "--level", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "B=200 resamples, seed=3, level=90 %" in out
    _, lo, hi = _independent(ra, rb, lambda y: y.mean(), ["correct"], 200, 3, 0.9)
    assert f"[{lo:+.3f}, {hi:+.3f}]" in out
    assert main(["diff", str(a), str(b), "--metric", "brier", "--format", "csv"]) == 0
    csv = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert list(csv.metric) == ["brier"] and csv["diff"].iat[0] == pytest.approx(brier[0])


def test_diff_reports_unmatched_cells_and_bad_metrics(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, _answers(lambda t: "B"))
    a = _run(tmp_path, "a", SPEC, capsys)
    b = _run(tmp_path, "b", SPEC.replace("audit a {", "audit other {"), capsys)
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "0 cell(s) in both runs, 1 only in A, 1 only in B" in out
    assert "only in A (1):\n  a/m/capitals/" in out and "only in B (1):\n  other/m/capitals/" in out
    assert main(["diff", str(a), str(a), "--metric", "acuracy"]) == 2
    assert "did you mean 'accuracy'" in capsys.readouterr().err
    assert main(["diff", str(a), str(tmp_path / "nope")]) == 1
    assert "is not a run directory" in capsys.readouterr().err


def test_diff_of_a_run_without_records_is_a_user_error(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, _answers(lambda t: "B"))
    a = _run(tmp_path, "a", SPEC, capsys)
    (a / "records.parquet").unlink()
    assert main(["diff", str(a), str(a)]) == 1
    assert "holds no scored records" in capsys.readouterr().err


def test_diff_cautions_small_samples_and_many_comparisons_and_names_the_models(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:
    """Issue 23: significant differences on few paired items carry a small-sample caution, several
    intervals a multiple-comparison one, and after --swap-model each run says which model ran."""
    use_scripted_engine(monkeypatch, _answers(lambda t: "B"))
    a = _run(tmp_path, "a", SPEC.replace("sample=30", "sample=12"), capsys)
    use_scripted_engine(monkeypatch, _answers(lambda t: "A"))
    b = _run(tmp_path, "b", SPEC.replace("sample=30", "sample=12"), capsys,
             "--swap-model", 'm=hf("org/other-scripted", dtype=float32, revision="r2")')
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "A = " in out and "ran m = hf org/scripted" in out
    assert "ran m = hf org/other-scripted at revision r2 (--swap-model m=" in out
    n_sig = int(out.split(" of 2 difference(s) significant")[0].rsplit("\n", 1)[1])
    assert n_sig >= 1  # every answer changed: accuracy moves
    assert f"caution: {n_sig} of the {n_sig} significant difference(s) rest on fewer than 30 paired items" in out
    assert "caution: 2 intervals were computed and none is corrected for multiple comparisons" in out
    assert main(["diff", str(a), str(b), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["models_b"] == {"m": 'hf org/other-scripted at revision r2 (--swap-model m=hf("org/other-scripted", '
                                     'dtype=float32, revision="r2"))'}
    assert len(body["cautions"]) == 2
