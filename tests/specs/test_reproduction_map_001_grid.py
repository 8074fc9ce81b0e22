"""Study 001's grid tables in the paper's shape (issue 41): Tables 2, 4, 9, 11 and 22, through
``auditc run`` of examples/s001_twin.audit on a scripted engine with ``--limit 2`` (two items per
dataset). The test declares gemma3 the base model of smollm2's pair (``family="smollm2",
size=0.135``) so that the variant axis of Table 4 has pairs.

The script: the Instruct model (a chat prompt) answers "<gold> indeed" (correct under the lenient
scorer, wrong under exact match), the base model "zzqx" (wrong under both). The prefilled
"Probability:" gets 0.8 from the Instruct model; from the base model 0.8 on TriviaQA and
TruthfulQA, 0.5 on MMLU and no number on SciQ (parse rate 0: that setting leaves the grid).
Teacher-forced answers get two tokens with probabilities 0.4 and 0.9 under the bare query (T1 =
sqrt(0.36) = 0.6, T2 = 0.4) and 0.2, 0.2 after the verbalized prefix (T1 = T2 = 0.2).

By hand, with the 10-bin ECE of a constant confidence p at accuracy a being |p - a|: Instruct,
lenient (a = 1): ECE_verb 0.2, g_A = 0.2 - 0.4 = -0.2, g_B = 0.2 - 0.8 = -0.6, g_A^T2 = 0.2 - 0.6
= -0.4, so readout g_A - g_A^T2 = +0.2 and context g_A - g_B = +0.4; exact (a = 0): g_A = 0.8 - 0.6
= +0.2, g_B = +0.6, g_A^T2 = +0.4. Base (a = 0 under both): g_A = +0.2 on TriviaQA and TruthfulQA,
0.5 - 0.6 = -0.1 on MMLU; g_B = 0.8 - 0.2 = +0.6 / +0.6 / +0.3; g_A^T2 = 0.4 / 0.4 / 0.1.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core.requests import Result, TokenLogprob
from auditlang.metrics.calibration import binfree_ece
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
FILES = {"triviaqa": "triviaqa", "sciq": "sciq", "truthfulqa": "truthfulqa", "mmlu4": "mmlu"}


def _questions(data: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for ds, f in FILES.items():
        for line in open(data / f"{f}.jsonl", encoding="utf-8"):
            r = json.loads(line)
            out[r["question"]] = (ds, r["answer"])
    return out


def make_script(questions: dict[str, tuple[str, str]]):
    def item(text: str) -> tuple[str, str]:
        return questions[max((q for q in questions if q in text), key=len)]

    def script(req):
        text = prompt_text(req)
        instruct = req.prompt.messages is not None
        if req.kind == "continuation_logprobs":
            ps = (0.2, 0.2) if "Guess" in text else (0.4, 0.9)
            return Result(request_id=req.id, kind=req.kind,
                          continuation=[TokenLogprob(token=t, token_id=1, logprob=math.log(p)) for t, p in zip("xy", ps)])
        if req.kind != "generate":
            return None
        ds, gold = item(text)
        if text.rstrip().endswith("Probability:"):
            if instruct:
                return generation(req, " 0.8")
            return generation(req, {"sciq": " maybe", "mmlu4": " 0.5"}.get(ds, " 0.8"))
        return generation(req, f"{gold} indeed" if instruct else "zzqx")
    return script


@pytest.fixture(scope="module")
def report(tmp_path_factory, shared_data: Path) -> Path:
    text = (ROOT / "examples" / "s001_twin.audit").read_text(encoding="utf-8")
    text = text.replace("resamples=200", "resamples=10").replace(", figures, html", "")
    text = text.replace('embedded("gemma3-270m", dtype=float32,', 'embedded("gemma3-270m", family="smollm2", size=0.135, '
                        'dtype=float32,')
    assert 'family="smollm2"' in text
    tmp = tmp_path_factory.mktemp("s001g")
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


def num(x: str) -> float:
    return float(x) if x not in ("", "nan", "NaN") else math.nan


def test_table11_parse_rate_is_a_model_pair_by_dataset_matrix(report: Path) -> None:
    got = rows(report, "grid_parse_rate")
    assert list(got[0]) == ["model pair", "variant", "triviaqa", "sciq", "truthfulqa", "mmlu4"]
    assert [(r["model pair"], r["variant"]) for r in got] == [("smollm2 0.135B", "base"), ("smollm2 0.135B", "Instruct")]
    assert [num(got[0][d]) for d in FILES] == [1.0, 0.0, 1.0, 1.0]
    assert [num(got[1][d]) for d in FILES] == [1.0, 1.0, 1.0, 1.0]


def test_table22_scorers_with_mean_change_of_g_a(report: Path) -> None:
    got = rows(report, "grid_scorers")
    assert list(got[0]) == ["group", "variant", "evaluator", "n_settings", "g_A", "g_A - g_B", "g_A - g_C",
                            "mean |delta g_A| vs s001.lenient"]
    by = {(r["group"], r["evaluator"]): r for r in got}
    ins_l, ins_e = by[("Instruct", "s001.lenient")], by[("Instruct", "s001.exact")]
    assert int(ins_l["n_settings"]) == 4 and num(ins_l["g_A"]) == pytest.approx(-0.2)
    assert num(ins_l["g_A - g_B"]) == pytest.approx(0.4) and ins_l["mean |delta g_A| vs s001.lenient"] == ""
    assert num(ins_e["g_A"]) == pytest.approx(0.2) and num(ins_e["g_A - g_B"]) == pytest.approx(-0.4)
    assert num(ins_e["mean |delta g_A| vs s001.lenient"]) == pytest.approx(0.4)
    base_l, base_e = by[("base", "s001.lenient")], by[("base", "s001.exact")]
    assert int(base_l["n_settings"]) == 3 and num(base_l["g_A"]) == pytest.approx((0.2 + 0.2 - 0.1) / 3)
    assert num(base_e["mean |delta g_A| vs s001.lenient"]) == pytest.approx(0.0)


def test_table4_identity_and_protocol_axes(report: Path) -> None:
    got = [r for r in rows(report, "grid_axes") if r["evaluator"] == "s001.lenient"]
    assert list(got[0]) == ["variant", "evaluator", "source of variation", "kind", "n", "mean |delta g|"]
    by = {r["source of variation"].split(" (")[0]: r for r in got}
    # variant: the base and Instruct model of the pair on TriviaQA, TruthfulQA, MMLU (SciQ has no base setting)
    assert (by["Variant"]["kind"], int(by["Variant"]["n"])) == ("identity", 3)
    assert num(by["Variant"]["mean |delta g|"]) == pytest.approx((0.4 + 0.4 + 0.1) / 3)
    # dataset: 6 pairs of the Instruct model (all 0) and 3 of the base model (0, 0.3, 0.3)
    assert int(by["Dataset identity"]["n"]) == 9
    assert num(by["Dataset identity"]["mean |delta g|"]) == pytest.approx(0.6 / 9)
    assert "Model family" not in by  # one family: no pair, said in a note
    assert any("differ in family only" in line for line in
               (report / "comparisons" / "grid_axes.md").read_text(encoding="utf-8").splitlines())
    ctx, ro = by["Conditioning context"], by["Token readout"]
    assert (ctx["kind"], int(ctx["n"])) == ("protocol", 7)
    assert num(ctx["mean |delta g|"]) == pytest.approx(0.4)  # |g_A - g_B| = 0.4 on all seven settings
    assert num(ro["mean |delta g|"]) == pytest.approx(0.2)
    # estimator: |g_A - g_C| = |ECE10 - binfree| of the verbal side minus the same of the token side
    conf = {"i": 0.8, "t": 0.6}
    est = []
    for a, v in [(1.0, 0.8)] * 4 + [(0.0, 0.8), (0.0, 0.8), (0.0, 0.5)]:
        y = [a, a]
        ev = abs(v - a) - binfree_ece([v, v], y)
        et = abs(conf["t"] - a) - binfree_ece([conf["t"]] * 2, y)
        est.append(abs(ev - et))
    assert num(by["ECE estimator"]["mean |delta g|"]) == pytest.approx(sum(est) / 7, abs=1e-9)
    vals = [num(r["mean |delta g|"]) for r in got]
    assert vals == sorted(vals, reverse=True)  # largest first, as 001 orders Table 4
    md = (report / "comparisons" / "grid_axes.md").read_text(encoding="utf-8")
    assert f"| **{float(ctx['mean |delta g|']):.3f}** |" in md  # protocol axes bold


def test_table2_readout_row_and_bootstrap_means(report: Path) -> None:
    tex = (report / "tables" / "grid.tex").read_text(encoding="utf-8")
    lines = {m.group(2): m.group(1) for m in re.finditer(r"^(.*) % row: (\S+)$", tex, re.M)}
    order = [m.group(1) for m in re.finditer(r"% row: (\S+)$", tex, re.M)]
    assert order[:8] == ["g_A", "g_B", "g_C", "g_D", "readout", "A-B", "A-C", "interaction"]
    assert lines["readout"].startswith("Token readout ($g_{A}^{T1}-g_{A}^{T2}$)")
    # Instruct / lenient first: every Instruct setting has the same values, so the bootstrap mean is exact
    cells = lines["readout"].split(" & ")
    assert cells[1].startswith(r"\begin{tabular}[t]{@{}r@{}}0.200\\")
    assert "bootstrap mean of the macro mean" in tex
    r = next(r for r in rows(report, "grid_macro_ci") if (r["group"], r["evaluator"]) == ("base", "s001.lenient")
             and r["quantity"].startswith("s001.tok_bare|") and " - s001.tok_bare_t2|" in r["quantity"])
    assert num(r["macro mean"]) == pytest.approx(-0.2)  # base: g_A - g_A^T2 = 0.2 - 0.4 on each setting
    assert int(r["n_settings"]) == 3


def test_table9_per_cell_shifts_with_sign_agreement(report: Path) -> None:
    tex = (report / "tables" / "readouts_main.tex").read_text(encoding="utf-8")
    keys = re.findall(r"% row: (\S+)$", tex, re.M)
    assert keys[:6] == ["Instruct/s001.bare/s001.lenient/agreement"] + [
        f"Instruct/s001.bare/s001.lenient/smollm2/{d}" for d in FILES] + ["Instruct/s001.bare/s001.lenient/macro"]
    head = next(line for line in tex.splitlines() if line.endswith("% row: Instruct/s001.bare/s001.lenient/agreement"))
    assert "(sign agreement 4/4)" in head
    assert "(sign agreement 3/3)" in tex  # the base model's three settings
    row = next(line for line in tex.splitlines() if line.endswith("% row: Instruct/s001.bare/s001.lenient/smollm2/triviaqa"))
    # T1: g_A - g_B = -0.2 - (-0.6) = 0.4; T2: -0.4 - (-0.6) = 0.2
    assert re.search(r"& 0\.400 & 0\.200 \\\\", row), row
