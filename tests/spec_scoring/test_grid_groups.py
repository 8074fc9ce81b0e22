"""Study 001's tables per model group through ``auditc run`` on scripted engines (issue 41): the A-D
grid per Instruct/base group (``group_by=[instruct]``, Table 2), per-metric prefix shifts (Table 19),
the bin sweep's g_A - g_C against ``reference=`` (Table 10), an undefined metric leaving a setting out
of that metric only, and supplied-answer pooling per size class (Tables 14, 15)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.core.requests import Result, TokenLogprob
from scripted_engine import generation, prompt_text, use_scripted_engine

N = 10


def _u(text: str, salt: str = "") -> float:
    return int(hashlib.sha256((salt + text).encode()).hexdigest()[:8], 16) / 2**32


def _golds(shared_data: Path) -> dict[str, str]:
    rows = [json.loads(x) for x in (shared_data / "triviaqa.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["question"]: r["answer"] for r in rows}


def make_script(golds: dict[str, str]):
    def answer(model: str, text: str) -> str:
        q = next((q for q in golds if q in text), "")
        if model.endswith("never"):  # every answer wrong: AUROC is undefined on its settings
            return "Nobody"
        return golds.get(q, "x") if _u(text, model) < 0.6 else "Nobody"

    def script(req):
        text = prompt_text(req)
        model = req.model if hasattr(req, "model") else ""
        if req.kind == "generate":
            if text.rstrip().endswith("Probability:"):  # a supplied answer: only the value is written
                return generation(req, f" {0.2 + 0.7 * _u(text, 's'):.2f}")
            if "Provide your best guess" in text:  # the joint verbal call
                return generation(req, f"Guess: {answer(model, text)}\nProbability: {0.3 + 0.6 * _u(text, 'v'):.2f}")
            return generation(req, answer(model, text))
        if req.kind == "continuation_logprobs":
            u = _u(text + "|" + req.p["continuation"], "t")
            return Result(request_id=req.id, kind=req.kind,
                          continuation=[TokenLogprob(token=req.p["continuation"], token_id=1,
                                                     logprob=float(np.log(0.1 + 0.85 * u)))])
        return None

    return script


SPEC = f"""
import "stdlib/s001"
import "stdlib/metrics"
dataset triviaqa = jsonl("triviaqa.jsonl", task=open_qa, sample={N}, seed=42)
dataset sciq = jsonl("sciq.jsonl", task=open_qa, sample={N}, seed=42)
model a_it = hf("org/a-it", dtype=float32, instruct=true, size_class="7-8B")
model a_base = hf("org/a-base", dtype=float32, chat=false, instruct=false, size_class="7-8B")
model b_it = hf("org/b-it", dtype=float32, instruct=true, size_class="7-8B")
model b_never = hf("org/b-never", dtype=float32, chat=false, instruct=false, size_class="7-8B")
model c_it = hf("org/c-14b-it", dtype=float32, instruct=true, size_class="14B")
audit main {{
  models = [a_it, a_base, b_it, b_never]
  datasets = [triviaqa, sciq]
  variants = [s001.bare]
  protocols = [s001.verbal_self, s001.tok_bare, s001.tok_prefix]
  evaluators = [s001.lenient]
  metrics = [accuracy, metrics.ece10]
  bootstrap = bootstrap(resamples=100, seed=42, unit=macro)
}}
compare grid = protocol_grid(main, verbal=s001.verbal_self, configs=[s001.tok_bare, s001.tok_prefix],
                             estimators=[metrics.ece10, metrics.ece20], group_by=[instruct])
compare multi = protocol_grid(main, verbal=s001.verbal_self, configs=[s001.tok_bare, s001.tok_prefix],
                              estimators=[metrics.brier_score, metrics.auroc_score], group_by=[instruct])
compare sweep = protocol_grid(main, verbal=s001.verbal_self, configs=[s001.tok_bare, s001.tok_prefix],
                              estimators=[metrics.ece20, metrics.ece30], reference=metrics.ece10,
                              group_by=[instruct])
protocol wrong = s001.verbal_plausible_wrong with (wrong_from=[a_it, b_it, c_it])
audit supplied {{
  models = [a_it, b_it, c_it]
  datasets = [triviaqa, sciq]
  variants = [s001.bare]
  protocols = [s001.verbal_self, s001.verbal_gold, wrong, s001.verbal_off_type]
  evaluators = [s001.lenient]
  metrics = [accuracy]
  bootstrap = bootstrap(resamples=100, seed=42, unit=cell)
}}
compare prov = provenance(supplied, own=s001.verbal_self, gold=s001.verbal_gold, plausible=wrong,
                          off_type=s001.verbal_off_type, group_by=[size_class])
report cells, comparisons(format=both)
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, shared_data):
    mp = pytest.MonkeyPatch()
    try:
        use_scripted_engine(mp, make_script(_golds(shared_data)))
        tmp = tmp_path_factory.mktemp("groups")
        spec = tmp / "groups.audit"
        spec.write_text(SPEC, encoding="utf-8")
        out = tmp / "run"
        rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
        assert rc == 0
        yield out
    finally:
        mp.undo()


def _csv(run_dir: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(run_dir / "report" / "comparisons" / f"{name}.csv")


def test_grid_macro_means_are_per_instruct_group(run_dir):
    per = _csv(run_dir, "grid")
    s = _csv(run_dir, "grid_summary")
    assert set(per.group) == {"Instruct", "base"}
    assert set(per[per.group == "Instruct"].model) == {"a_it", "b_it"}
    for grp in ("Instruct", "base"):
        rows = per[per.group == grp]
        got = s[(s.group == grp) & (s.quantity == "g_A")].iloc[0]
        assert got["n_settings"] == 4
        assert got["macro mean"] == pytest.approx(rows["g_A"].mean(), abs=1e-12)
        ab = s[(s.group == grp) & (s.quantity == "A-B")].iloc[0]
        assert ab["mean |.|"] == pytest.approx((rows["g_A"] - rows["g_B"]).abs().mean(), abs=1e-12)
        assert ab["sign flips"] == int((np.sign(rows["g_A"]) * np.sign(rows["g_B"]) < 0).sum())
    mc = _csv(run_dir, "grid_macro_ci")
    assert set(mc.group) == {"Instruct", "base"} and (mc.n_settings == 4).all()
    tex = (run_dir / "report" / "tables" / "grid.tex").read_text(encoding="utf-8")
    assert "Instruct" in tex and "base" in tex and "\\auditid{group\\_by}=instruct" in tex  # 001 Table 2's two columns


def test_every_metric_gets_its_own_prefix_shift_and_an_undefined_one_drops_only_itself(run_dir):
    per = _csv(run_dir, "multi")
    s = _csv(run_dir, "multi_summary")
    assert set(s.axis) == {"context"}  # no Brier-vs-AUROC row: 001 never defines one
    brier = "s001.tok_bare|brier vs s001.tok_prefix|brier"
    auroc = "s001.tok_bare|auroc vs s001.tok_prefix|auroc"
    assert set(s.contrast) == {brier, auroc}
    base_b = s[(s.group == "base") & (s.contrast == brier)].iloc[0]
    base_a = s[(s.group == "base") & (s.contrast == auroc)].iloc[0]
    assert base_b["n_settings"] == 4  # b_never's AUROC is undefined, its Brier is not
    rows = per[per.group == "base"]
    auroc_ok = rows["g[s001.tok_bare | auroc]"].notna() & rows["g[s001.tok_prefix | auroc]"].notna()
    assert rows[rows.model == "b_never"]["g[s001.tok_bare | auroc]"].isna().all()
    assert 0 < base_a["n_settings"] == auroc_ok.sum() <= 2
    ga, gb = rows["g[s001.tok_bare | brier]"], rows["g[s001.tok_prefix | brier]"]
    assert base_b["macro shift"] == pytest.approx((ga - gb).mean(), abs=1e-12)
    assert base_b["mean |shift|"] == pytest.approx((ga - gb).abs().mean(), abs=1e-12)
    assert any("auroc" in n for n in (run_dir / "report" / "comparisons" / "multi_summary.md").read_text().split("\n"))


def test_bin_sweep_reports_g_a_minus_g_c_per_bin_count(run_dir):
    per = _csv(run_dir, "sweep")
    s = _csv(run_dir, "sweep_summary")
    est = s[s.axis == "estimator"]
    # (the spec's bin sweep takes reference=metrics.binfree; a 10-bin reference keeps this test fast)
    lab = {b: f"ece(binning=equal_width, bins={b})" for b in (10, 20, 30)}
    assert set(est.contrast) == {f"s001.tok_bare|{lab[20]} vs s001.tok_bare|{lab[10]}",
                                 f"s001.tok_bare|{lab[30]} vs s001.tok_bare|{lab[10]}"}
    assert len(est) == 4  # two bin counts x two groups
    for _, r in est.iterrows():
        rows = per[per.group == r["group"]]
        b = int(r["contrast"].split("bins=")[1].split(")")[0])
        assert r["macro first"] == pytest.approx(rows[f"g[s001.tok_bare | {lab[b]}]"].mean(), abs=1e-12)
        assert r["macro shift"] == pytest.approx((rows[f"g[s001.tok_bare | {lab[b]}]"]
                                                  - rows[f"g[s001.tok_bare | {lab[10]}]"]).mean(), abs=1e-12)
    tex = (run_dir / "report" / "tables" / "sweep.tex").read_text(encoding="utf-8")
    assert "Table 10" in tex and "g\\_ref}" in tex
    assert "\\auditid{s001.tok\\_bare} $|$" not in tex  # rows are named by their metric, as in Tables 10 and 19


def test_supplied_answers_pool_per_size_class(run_dir):
    pooled = _csv(run_dir, "prov_pooled")
    per = _csv(run_dir, "prov")
    assert set(pooled.group) == {"7-8B", "14B"}
    n78 = pooled[(pooled.group == "7-8B") & (pooled.contrast == "gold - plaus.")].iloc[0]["n"]
    n14 = pooled[(pooled.group == "14B") & (pooled.contrast == "gold - plaus.")].iloc[0]["n"]
    assert n78 > n14 > 0 and set(per.model) == {"a_it", "b_it", "c_it"}
    md = (run_dir / "report" / "comparisons" / "prov_pooled.md").read_text(encoding="utf-8")
    assert "7-8B: a_it, b_it" in md and "14B: c_it" in md


@pytest.mark.parametrize(("model_line", "needle"), [
    ('model b_never = hf("org/b-never", dtype=float32, chat=false, size_class="7-8B")',
     "group_by=instruct, but model 'b_never' of audit 'main' declares no instruct"),
])
def test_group_by_an_undeclared_attribute_is_a_diagnostic(tmp_path, capsys, model_line, needle):
    text = re.sub(r"model b_never = .*", model_line, SPEC)
    spec = tmp_path / "g.audit"
    spec.write_text(text, encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if "group_by=[instruct]" in s)
    col = lines[line - 1].index("group_by") + 1
    assert f"g.audit:{line}:{col}: error[E157]" in err, err
    assert needle in err and "hint: declare it on the model, e.g. instruct=true" in err
    assert "^" in err
