"""Study 001's supplied-answer tables in the paper's shape (issue 41): Table 6 (pooled quantities),
Table 13 (per cell, self split into Y_cor / Y_wr) and Table 15 (per dataset, Macro and Pooled rows of
one group), through ``auditc run`` of examples/s001_twin.audit on a scripted engine with
``--limit 2`` (two items per dataset).

The script answers by dataset: TriviaQA "it is <gold>" (correct under the lenient match, a string
that differs from the gold), SciQ the gold text exactly (correct, the same string; SciQ items have
choices, so the record's gold is a letter while the supplied gold prompt shows the answer text),
TruthfulQA and MMLU a wrong string, "zzz" for smollm2 (the Instruct group) and "yyy" for gemma3 (base).
Its verbal confidence depends only on the string in the Guess: slot: "it is ..." 0.9, the item's gold
0.8, "zzz" 0.3, "yyy" 0.4, anything else (the off-type gold of another item) 0.1. The plausible-wrong
answer is the other model's wrong answer (TruthfulQA, MMLU) or the off-type fallback (TriviaQA, SciQ).

By hand, smollm2 (8 items): self correct {0.9, 0.9, 0.8, 0.8} -> 0.85, self wrong 0.3, gold 0.8,
plausible (4 x 0.1 + 4 x 0.4) / 8 = 0.25, off-type 0.1, marginal 0.8 - 0.25 = 0.55, paired gold -
plaus. (4 x 0.7 + 4 x 0.4) / 8 = 0.55, self - gold diff. strings 0.9 - 0.8 = 0.1 (TriviaQA), exact
match 0.0 (SciQ), gold - self initially wrong 0.8 - 0.3 = 0.5, diff.-string share 2 / 4. gemma3: self
wrong 0.4, plausible (4 x 0.1 + 4 x 0.3) / 8 = 0.2, marginal 0.6, paired 0.6, initially wrong 0.4.

Table 12 (gemma3, the twin's base model): its own answer to the MMLU physics item gets "sure" (no
confidence parsed) and a token probability e^-0.1 = 0.905; every other answer token e^-1 = 0.368.
MMLU: parse 1/2, tok_full = 10-bin ECE of {0.368, 0.905} both wrong = (0.368 + 0.905) / 2 = 0.636,
tok_sub = 0.368 (the parsed item only), verbal ECE 0.4 (its 0.4 on a wrong answer), so g_full = -0.236
and g_sub = +0.032: the sign flips. TriviaQA (correct, verbal 0.9): g = 0.1 - 0.632 on both sides.

Table 8 (L3): smollm2's joint verbalized call repeats its bare answer on TriviaQA and SciQ and writes
"other" on TruthfulQA and MMLU (change rates 0, 0, 1, 1: mean 0.50, sample std sqrt(1/3) = 0.58);
gemma3's has no Guess: line (no rate).

Figure 1 (``scored``: generated vs gold-teacher-forced token probability): smollm2's gold TriviaQA
strings get e^-0.01 = 0.99, so on smollm2/TriviaQA g_gen = 0.1 - 0.632 < 0 and g_gold = 0.1 - 0.01 > 0,
the one flip; gemma3/TruthfulQA is red in both rows (0.4 - 0.368), every other setting blue in both.
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
from scripted_engine import generation, prompt_text, use_scripted_engine

ROOT = Path(__file__).resolve().parents[2]
FILES = {"triviaqa": "triviaqa", "sciq": "sciq", "truthfulqa": "truthfulqa", "mmlu4": "mmlu"}
CONF = {"zzz": "0.3", "yyy": "0.4"}
PHYSICS = "high_school_physics_test_6"  # one of the two MMLU items of --limit 2 (sample=20, seed=42)


def _questions(data: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for ds, f in FILES.items():
        for line in (data / f"{f}.jsonl").read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            out[item["question"]] = (ds, item["answer"], item["id"])
    return out


def make_script(data: Path):
    questions = _questions(data)
    by_len = sorted(questions, key=len, reverse=True)

    def find(text: str) -> tuple[str, str, str]:
        return next((questions[q] for q in by_len if q in text), ("", "", ""))

    def smollm2_trivia_gold(req) -> bool:
        ds, gold, _ = find(prompt_text(req))
        return req.model == "smollm2" and ds == "triviaqa" and req.p["continuation"].strip() == gold

    def script(req):
        gemma_physics = req.model == "gemma3" and PHYSICS == find(prompt_text(req))[2]
        if req.kind == "continuation_logprobs" and (gemma_physics or smollm2_trivia_gold(req)):
            lp = -0.1 if gemma_physics else -0.01
            return Result(request_id=req.id, kind=req.kind,
                          continuation=[TokenLogprob(token=req.p["continuation"], token_id=1, logprob=lp)])
        if req.kind != "generate":
            return None
        text = prompt_text(req)
        ds, gold, _ = find(text)
        if "Probability:" not in text:  # the bare-query answer
            wrong = "zzz" if "smollm2" in str(req.model) else "yyy"
            return generation(req, {"triviaqa": f"it is {gold}", "sciq": gold}.get(ds, wrong))
        if not text.rstrip().endswith("Probability:"):  # the joint self call (Table 8's L3)
            if req.model != "smollm2":
                return generation(req, "0.7")  # no Guess: line
            guess = {"triviaqa": f"it is {gold}", "sciq": gold}.get(ds, "other")
            return generation(req, f"Guess: {guess}\nProbability: 0.7")
        guess = text[text.rindex("Guess:") + 6:].split("\n", 1)[0].strip()
        if gemma_physics and guess == "yyy":
            return generation(req, "sure")  # gemma3's own answer to the physics item: no confidence parsed
        conf = "0.9" if guess.startswith("it is ") else "0.8" if guess == gold else CONF.get(guess, "0.1")
        return generation(req, conf)

    return script


@pytest.fixture(scope="module")
def report(tmp_path_factory, shared_data: Path) -> Path:
    mp = pytest.MonkeyPatch()
    use_scripted_engine(mp, make_script(shared_data))
    tmp = tmp_path_factory.mktemp("s001rows")
    twin = tmp / "s001_twin.audit"
    twin.write_text((ROOT / "examples" / "s001_twin.audit").read_text(encoding="utf-8")
                    .replace("resamples=200", "resamples=10"), encoding="utf-8")
    try:
        rc = main(["run", str(twin), "--data-root", str(shared_data), "--out", str(tmp / "run"), "--limit", "2",
                   "--no-progress"])
    finally:
        mp.undo()
    assert rc == 0
    return tmp / "run" / "report"


def rows(report: Path, name: str) -> list[dict[str, str]]:
    with open(report / "comparisons" / f"{name}.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def num(s: str) -> float:
    return float(s) if s not in ("", "n/a") else float("nan")


def test_table6_pooled_quantities_per_group(report: Path) -> None:
    got = rows(report, "supplied_contrasts_summary")
    assert list(got[0]) == ["quantity", "Instruct", "base"]
    assert [r["quantity"] for r in got] == [
        "self correct mean", "self wrong mean", "supplied gold mean", "supplied plaus. wrong mean",
        "supplied off-type mean", "marginal gold - plaus. wrong", "paired gold - plaus. wrong",
        "self - gold, diff. strings", "self - gold, exact match", "gold - self, initially wrong",
        "correct diff.-string share"]
    want = {"Instruct": [0.85, 0.3, 0.8, 0.25, 0.1, 0.55, 0.55, 0.1, 0.0, 0.5],
            "base": [0.85, 0.4, 0.8, 0.2, 0.1, 0.6, 0.6, 0.1, 0.0, 0.4]}
    for g, vals in want.items():
        assert [num(r[g]) for r in got[:-1]] == pytest.approx(vals), g
        assert got[-1][g] == "50.0%"  # a percentage, as 001 prints the share
    md = (report / "comparisons" / "supplied_contrasts_summary.md").read_text(encoding="utf-8")
    assert "001 Table 6" in md and "n = 8 supplied-gold items" in md


def test_table13_self_split_by_correctness_and_two_discriminations(report: Path) -> None:
    got = rows(report, "supplied_contrasts_by_cell")
    assert list(got[0]) == ["group", "model", "dataset", "Y_cor", "Y_wr", "gold", "plaus.", "off-type", "self",
                            "suppl."]
    assert [(r["group"], r["model"], r["dataset"]) for r in got] == [
        (g, m, d) for g, m in (("Instruct", "smollm2"), ("base", "gemma3"))
        for d in ("triviaqa", "sciq", "truthfulqa", "mmlu4")]
    cell = {(r["model"], r["dataset"]): [num(r[k]) for k in list(r)[3:]] for r in got}
    nan = float("nan")
    assert cell["smollm2", "triviaqa"] == pytest.approx([0.9, nan, 0.8, 0.1, 0.1, nan, 0.7], nan_ok=True)
    assert cell["smollm2", "sciq"] == pytest.approx([0.8, nan, 0.8, 0.1, 0.1, nan, 0.7], nan_ok=True)
    assert cell["smollm2", "truthfulqa"] == pytest.approx([nan, 0.3, 0.8, 0.4, 0.1, nan, 0.4], nan_ok=True)
    assert cell["gemma3", "mmlu4"] == pytest.approx([nan, 0.4, 0.8, 0.3, 0.1, nan, 0.5], nan_ok=True)


def test_table15_dataset_macro_and_pooled_rows(report: Path) -> None:
    got = [r for r in rows(report, "supplied_contrasts_by_dataset") if r["group"] == "Instruct"]
    assert list(got[0]) == ["group", "dataset", "gold", "plaus.", "off-type", "diff. pref."]
    assert [r["dataset"] for r in got] == ["triviaqa", "sciq", "truthfulqa", "mmlu4", "Macro", "Pooled"]
    assert [num(got[0][k]) for k in ("gold", "plaus.", "off-type", "diff. pref.")] == pytest.approx([0.8, 0.1, 0.1, 0.1])
    assert got[1]["diff. pref."] == ""  # SciQ's correct answers all equal the supplied gold string
    assert [num(got[2][k]) for k in ("gold", "plaus.", "off-type")] == pytest.approx([0.8, 0.4, 0.1])
    macro, pooled = got[4], got[5]
    assert [num(macro[k]) for k in ("gold", "plaus.", "off-type")] == pytest.approx([0.8, 0.25, 0.1])
    assert macro["diff. pref."] == "n/a"
    assert [pooled[k] for k in ("gold", "plaus.", "off-type")] == ["n/a"] * 3
    assert re.fullmatch(r"\+0\.100 \[\+0\.100, \+0\.100\]", pooled["diff. pref."]), pooled


def test_table12_token_side_on_the_parseable_subset(report: Path) -> None:
    got = rows(report, "parse_matched")
    assert list(got[0]) == ["model", "dataset", "parse", "tok_full", "tok_sub", "g_full", "g_sub"]
    assert [(r["model"], r["dataset"]) for r in got] == [("gemma3", d) for d in ("triviaqa", "sciq", "truthfulqa",
                                                                                 "mmlu4")]
    e1, e01 = math.exp(-1), math.exp(-0.1)
    want = {"triviaqa": [1.0, 1 - e1, 1 - e1, 0.1 - (1 - e1), 0.1 - (1 - e1)],
            "sciq": [1.0, 1 - e1, 1 - e1, 0.2 - (1 - e1), 0.2 - (1 - e1)],
            "truthfulqa": [1.0, e1, e1, 0.4 - e1, 0.4 - e1],
            "mmlu4": [0.5, (e1 + e01) / 2, e1, 0.4 - (e1 + e01) / 2, 0.4 - e1]}
    for r in got:
        assert [num(r[k]) for k in list(r)[2:]] == pytest.approx(want[r["dataset"]], abs=1e-9), r
    md = (report / "comparisons" / "parse_matched.md").read_text(encoding="utf-8")
    moved = ((e1 + e01) / 2 - e1) / 4
    assert f"Mean |tok_sub - tok_full| = {moved:.3f}; the gap sign is unchanged on 3 of 4 cells." in md
    assert "001 Table 12" in md


def test_figure1_sign_pattern_generated_vs_gold(report: Path) -> None:
    stem = "sign_pattern_scored_s001_bare_s001_lenient"
    png = report / "figures" / f"{stem}.png"
    assert png.is_file() and (report / "figures" / f"{stem}.pdf").is_file()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"figures/{stem}.png" in (report / "index.md").read_text(encoding="utf-8")
    # the caption (the HTML report's alt text and figure caption): the flip counts by hand
    html = (report / "report.html").read_text(encoding="utf-8")
    assert "(1/8 settings; Instruct 1/4; base 0/4) (study 001 Figure 1)" in html
    assert not list((report / "figures").glob("sign_pattern_grid_*")), "grid's configs differ in context, not scoring"


def test_sign_columns_and_flip_counts_by_hand() -> None:
    from auditlang.report.comparisons.common import Comparison
    from auditlang.report.figures_s001 import flip_counts, sign_columns

    c = Comparison("scored", "protocol_grid", "main", shape="protocol_grid")
    gaps = {("Instruct", "v", "e"): {("m1", "d1"): {"a|ece": -0.2, "b|ece": 0.1}, ("m1", "d2"): {"a|ece": 0.3,
                                                                                                   "b|ece": 0.2}},
            ("base", "v", "e"): {("m2", "d1"): {"a|ece": -0.1, "b|ece": float("nan")}}}
    c.data = {"groups": gaps, "sign_pattern": {"configs": ["a", "b"], "estimator": "ece"}}
    cols = sign_columns(c)[("v", "e")]
    assert cols == [("Instruct", "m1", "d1", -1, 1), ("Instruct", "m1", "d2", 1, 1), ("base", "m2", "d1", -1, 0)]
    assert flip_counts(cols) == {"": (1, 2), "Instruct": (1, 2), "base": (0, 0)}


def test_table8_answer_change_rate_per_family_and_variant(report: Path) -> None:
    got = rows(report, "context_shift")
    assert list(got[0]) == ["model pair", "variant", "L1 KL", "L2 (1-CKA)", "L3 behav."]
    fam = {r["model pair"]: r for r in got}
    assert [r["variant"] for r in got] == ["Instruct", "base", "Instruct", "base"]
    assert fam["smollm2"]["L3 behav."] == "0.50 ± 0.58" and fam["smollm2"]["L1 KL"] == "n/a"
    assert fam["Aggregate Instruct (n=4)"]["L3 behav."] == "0.50 ± 0.58"
    assert fam["Aggregate base (n=4)"]["L3 behav."] == ""  # no Guess: line in any gemma3 call
    cells = {r["dataset"]: r for r in rows(report, "context_shift_by_cell") if r["model"] == "smollm2"}
    assert [num(cells[d]["L3 behav."]) for d in ("triviaqa", "sciq", "truthfulqa", "mmlu4")] == [0, 0, 1, 1]
