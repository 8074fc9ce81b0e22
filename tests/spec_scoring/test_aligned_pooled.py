"""Study 003's pooled reversal analysis through ``auditc run`` on a spec (issue 41 item 2): one
``aligned`` comparison over two audits pools every case (003 §6: "across all 120 cases"), and each
table is checked against the paper's definitions, recomputed from the run's own long CSV:

* Table 1 / 2: exclusive reversal rates and NRR per method / dataset over the assessed cases; a case
  where DA is not computable (positivity fails: a model answers every item wrong) is "not assessed"
  in the markdown, CSV and .tex alike, and a group with no assessed case shows no NRR (never 100.0);
* the sign: diff (1-2) = model_1 - model_2 with the pair as declared (Tables 10-14's delta), and the
  per-dataset .tex delta row says the same;
* Table 9: IA retention on the paper's base |D_IA| / |D|, D every item of the dataset (a failed
  request included);
* Table 7 (KRR / RRR), Table 8 (pair types from the declarations) and Figure 1's correlation points.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from auditlang.cli import main
from auditlang.core.requests import Result
from scripted_engine import generation, prompt_text, use_scripted_engine

N = 8
SPEC = """
import "stdlib/s003"
import "stdlib/metrics"
dataset trivia = jsonl("trivia.jsonl", task=open_qa)
dataset mcq = jsonl("mcq.jsonl", task=multiple_choice)
model a = hf("org/q3", dtype=float32, family="q", enable_thinking=false)
model b = hf("org/q3", dtype=float32, family="q", enable_thinking=true)
model c = hf("org/q30", dtype=float32, family="q")
protocol verbal = s003.verbal with (max_tokens=32)
audit know {
  models = [a, b, c]
  datasets = [trivia]
  variants = [s003.answer]
  protocols = [verbal, s003.p_true]
  evaluators = [s003.alias_exact]
  metrics = [accuracy, metrics.ece10, metrics.brier_score]
}
audit reason {
  models = [a, b, c]
  datasets = [mcq]
  variants = [s003.answer]
  protocols = [verbal, s003.p_true]
  evaluators = [s003.letter]
  metrics = [accuracy, metrics.ece10, metrics.brier_score]
}
compare al = aligned(know, audits=[reason], pairs=[[a, b], [a, c]], views=[instance, distribution],
                     knowledge=[trivia], reasoning=[mcq])
report cells, comparisons(format=both), figures
"""


def _item(text: str) -> int:
    m = re.search(r"(?:Capital|number) (?:number )?(\d+)\?", text)
    return int(m.group(1)) if m else -1


RIGHT = {"a": lambda i: i % 4 != 0, "b": lambda i: i % 3 == 0, "c": lambda i: i % 2 == 0}


def script(req):
    text, i, m = prompt_text(req), _item(prompt_text(req)), req.model
    if req.kind == "choice_logprobs":  # P(True): p(A) by model and item
        p = 0.2 + 0.07 * ((i + len(m)) % 9)
        return Result(request_id=req.id, kind=req.kind, choice_logprobs={"A": math.log(p), "B": math.log(1 - p)})
    if req.kind != "generate":
        return None
    if "Proposed Answer" in text:
        return generation(req, f"Confidence: \\boxed{{{30 + 7 * ((i * (ord(m) - 96)) % 10)}}}")
    if "multiple-choice problem" in text:  # gold is A; b and c always answer wrong, so DA is not computable there
        return generation(req, "\\boxed{A}" if m == "a" and RIGHT["a"](i) else "\\boxed{C}")
    if m == "a" and i == 5:
        return Result(request_id=req.id, kind=req.kind, error="HTTP 500: upstream failed")
    return generation(req, f"<answer>{'ans' + str(i) if RIGHT[m](i) else 'nope'}</answer>")


def _data(root: Path) -> None:
    root.mkdir()
    (root / "trivia.jsonl").write_text("".join(json.dumps(
        {"id": f"t{i}", "question": f"Capital number {i}?", "answer": f"ans{i}", "aliases": [f"ans{i}"]}) + "\n"
        for i in range(N)), encoding="utf-8")
    (root / "mcq.jsonl").write_text("".join(json.dumps(
        {"id": f"m{i}", "question": f"Which number is {i}?", "choices": [str(i + k) for k in range(4)],
         "answer": str(i)}) + "\n" for i in range(N)), encoding="utf-8")


def _tex_rows(tex: str) -> dict[str, list[str]]:
    return {m.group(2): [c.strip() for c in m.group(1).split("&")]
            for m in re.finditer(r"^(.*?) \\\\ % row: (\S+)$", tex, re.M)}


def test_pooled_reversal_tables_follow_003(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, script)
    data, out = tmp_path / "data", tmp_path / "run"
    _data(data)
    spec = tmp_path / "s003.audit"
    spec.write_text(SPEC, encoding="utf-8")
    rc = main(["run", str(spec), "--data-root", str(data), "--out", str(out), "--no-progress"])
    assert rc == 4, capsys.readouterr()  # 4: a request failed (a's answer to t5), the run is still reported
    comp = out / "report" / "comparisons"
    long = pd.read_csv(comp / "al.csv")

    # -- pooled: 2 pairs x 2 datasets (two audits) x 2 methods = 8 cases in one comparison
    cases = pd.read_csv(comp / "al_cases.csv")
    assert len(cases) == 8 and set(cases["audit"]) == {"know", "reason"}
    ece = long[(long["metric"] == "ECE")]
    raw = ece[ece["view"] == "raw"].set_index(["model_1", "model_2", "dataset", "protocol"])
    flags: dict[tuple, dict[str, object]] = {}
    for _, r in ece[ece["view"] != "raw"].iterrows():
        flags.setdefault((r["model_1"], r["model_2"], r["dataset"], r["protocol"]), {})[r["view"]] = r["reversal"]
    assert len(flags) == 8 and all(set(f) == {"IA", "DA"} for f in flags.values())  # DA never silently absent
    assert {k[2] for k, f in flags.items() if f["DA"] == "not computed"} == {"mcq"}

    # -- sign: model_1 - model_2 as declared
    for _, r in long.dropna(subset=["value_1", "value_2"]).iterrows():
        assert math.isclose(r["diff (1-2)"], r["value_1"] - r["value_2"], abs_tol=1e-12)
    assert set(zip(cases["model_1"], cases["model_2"])) == {("a", "b"), ("a", "c")}

    # -- Table 1 / 2 recomputed: exclusive RR and NRR over the assessed cases, the rest not assessed
    def expect(key_index: int) -> dict[str, tuple]:
        out: dict[str, list] = {}
        for k, f in flags.items():
            out.setdefault(k[key_index], []).append(f)
        res = {}
        for g, lst in out.items():
            ok = [{v: x == "True" or x is True for v, x in f.items()} for f in lst if "not computed" not in f.values()]
            n = len(ok)

            def pct(k: int, n: int = n) -> float:
                return 100 * k / n if n else math.nan
            res[g] = (len(lst), n, pct(sum(f["IA"] and not f["DA"] for f in ok)),
                      pct(sum(f["DA"] and not f["IA"] for f in ok)), pct(sum(not any(f.values()) for f in ok)),
                      len(lst) - n)
        return res

    for stem, key, idx in (("al_by_method", "method", 3), ("al_by_dataset", "dataset", 2)):
        t = pd.read_csv(comp / f"{stem}.csv").set_index(key)
        rows = _tex_rows((out / "report" / "tables" / "al.tex").read_text(encoding="utf-8"))
        for g, (n, n_ok, ia, da, nrr, na) in expect(idx).items():
            r = t.loc[g]
            assert (r["cases"], r["assessed"], r["not assessed"]) == (n, n_ok, na)
            for col, want in (("IA only %", ia), ("DA only %", da), ("NRR %", nrr)):
                assert (math.isnan(want) and pd.isna(r[col])) or math.isclose(r[col], want), (stem, g, col)
            tex = rows[g]  # the .tex row says the same: Cases, IA, DA, NRR, not assessed
            shown = [ia, da, nrr]
            assert tex[1] == str(n) and tex[-1] == str(na)
            assert tex[2:5] == ["--" if math.isnan(x) else f"{x:.1f}" for x in shown], (stem, g, tex)  # -- is TeX's –
    # MCQ: no case assessed (DA not computable), so no NRR is printed, never 100.0
    assert _tex_rows((out / "report" / "tables" / "al.tex").read_text(encoding="utf-8"))["mcq"][4] == "--"
    md = (comp / "al_by_dataset.md").read_text(encoding="utf-8")
    assert "4 of 8 cases miss a view that could not be computed" in md

    # -- Tables 10-14 .tex: per dataset, the delta row is model_1 - model_2
    tex = _tex_rows((out / "report" / "tables" / "al.tex").read_text(encoding="utf-8"))
    r1, r2, dl = tex["trivia/a-b/verbal/1"], tex["trivia/a-b/verbal/2"], tex["trivia/a-b/verbal/delta"]
    assert abs(float(dl[1]) - (float(r1[1]) - float(r2[1]))) <= 0.11  # Acc: a - b
    raw_ece = raw.loc[("a", "b", "trivia", "verbal")]
    assert dl[3] == f"{100 * raw_ece['diff (1-2)']:+.1f}"  # Raw Brier column first, then Raw ECE

    # -- Table 9: retention = |D_IA| / |D| with D every item (a's failed answer on t5 included)
    rec = pd.read_parquet(out / "records.parquet")
    ret = pd.read_csv(comp / "al_retention.csv").set_index(["model_1", "model_2", "dataset"])
    for (m1, m2, d), r in ret.iterrows():
        sub = rec[(rec["dataset"] == d) & (rec["protocol"] == "verbal")]
        z = {m: sub[(sub["model"] == m) & sub["correct"].notna()].set_index("item_id")["correct"] for m in (m1, m2)}
        both = z[m1].index.intersection(z[m2].index)
        n_ia = int((z[m1].loc[both] == z[m2].loc[both]).sum())
        assert (r["|D_IA|"], r["|D|"]) == (n_ia, N)
        assert math.isclose(r["retention %"], 100 * n_ia / N)
    assert len(rec[(rec["model"] == "a") & (rec["dataset"] == "trivia") & (rec["status"] == "error")]) > 0

    # -- Table 8: pair types from the declarations; Table 7: KRR on trivia, RRR on mcq
    assert dict(zip(cases["model_2"], cases["pair type"])) == {"b": "mode", "c": "size"}
    t7 = pd.read_csv(comp / "al_knowledge.csv").set_index(["method", "view"])
    for (method, view), r in t7.iterrows():
        k = [flags[(m1, m2, "trivia", method)][view] for m1, m2 in (("a", "b"), ("a", "c"))]
        k = [x == "True" or x is True for x in k if x != "not computed"]
        assert r["knowledge cases"] == len(k) and math.isclose(r["KRR %"], 100 * np.mean(k))
    assert (t7["reasoning cases"].loc[(slice(None), "DA"),] == 0).all()  # DA not computed on mcq

    # -- Figure 1: one point per pair and dataset, gaps averaged over the methods
    pts = pd.read_csv(comp / "al_confound.csv")
    assert len(pts) == 4 and set(pts["methods"]) == {2}
    p = pts[(pts["model_2"] == "b") & (pts["dataset"] == "trivia")].iloc[0]
    want = np.mean([raw.loc[("a", "b", "trivia", m), "diff (1-2)"] for m in ("verbal", "s003.p_true")])
    assert math.isclose(p["raw ECE gap (1-2)"], want)
    rho = pd.read_csv(comp / "al_confound_rho.csv").set_index("view")
    assert rho.loc["raw", "n"] == 4

    # -- the figures of 003 (Figures 1-5) are drawn from the same comparison
    figs = {p.name for p in (out / "report" / "figures").glob("*.png")}
    assert {"confound_al.png", "aligned_gaps_al_mode-effort.png", "aligned_gaps_al_size.png", "reversal_patterns_al.png",
            "reversal_by_gap_al.png", "shared_outcomes_al.png"} <= figs, figs
