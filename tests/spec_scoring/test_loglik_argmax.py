"""MCQ accuracy from log-likelihoods (issue 10 item 3), through real specs and ``auditc run``
with a scripted engine: ``loglik_argmax`` (lm-evaluation-harness ``acc`` / ``acc_norm``) and
``token_prob(label_form=...)`` (the label token with or without its leading space; study 000
App. A.3 reads the label token, the "Answer:" prompt of its App. B.1 is followed by " A")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.core.requests import Result, TokenLogprob
from scripted_engine import generation, prompt_text, use_scripted_engine

N = 8
HEAD = """
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=8, seed=42)
model base = hf("org/scripted-base", dtype=float32, chat=false)
"""


def _items(shared_data: Path) -> list[dict]:
    with open(shared_data / "arc_challenge.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _item_of(prompt: str, items: list[dict]) -> dict:
    (hit,) = [it for it in items if it["question"] in prompt and all(c in prompt for c in it["choices"])]
    return hit


def _run(tmp_path: Path, shared_data: Path, text: str, capsys) -> tuple[pd.DataFrame, pd.DataFrame]:
    spec = tmp_path / "mcq.audit"
    spec.write_text(HEAD + text, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr()
    return pd.read_parquet(out / "records.parquet"), pd.read_csv(out / "metrics" / "cells.csv")


def _letter_lps(item: dict, k: int) -> dict[str, float]:
    """Gold letter most probable on even positions k (of the sorted sample), else 'A' (or 'B')."""
    letters = "ABCDE"[: len(item["choices"])]
    gold = letters[item["answer_index"]]
    wrong = "A" if gold != "A" else "B"
    top = gold if k % 2 == 0 else wrong
    return {lab: (-0.2 if lab == top else -2.0 - 0.1 * i) for i, lab in enumerate(letters)}


def test_letter_argmax_scores_items_a_one_token_generation_cannot(tmp_path, shared_data, monkeypatch, capsys):
    items = _items(shared_data)
    order = {it["question"]: k for k, it in enumerate(sorted(items, key=lambda it: it["id"]))}

    def script(req):
        if req.kind == "generate":
            return generation(req, "")  # end of turn: nothing for first_char to read (issue 10.3)
        if req.kind == "choice_logprobs":
            it = _item_of(prompt_text(req), items)
            lps = _letter_lps(it, order[it["question"]])
            return Result(request_id=req.id, kind=req.kind,
                          choice_logprobs={c: lps[c.strip()] for c in req.p["choices"]})
        return None

    eng = use_scripted_engine(monkeypatch, script)
    df, cells = _run(tmp_path, shared_data, """
protocol tok_full = token_prob(window=full, normalise=label_set)
evaluator acc = loglik_argmax()
audit a {
  models = [base]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [tok_full]
  evaluators = [s000.first_char, acc]
  metrics = [accuracy]
}
""", capsys)
    ll = df[df.evaluator == "acc"].sort_values("item_index")
    fc = df[df.evaluator == "s000.first_char"]
    assert len(ll) == N and set(ll.parse_rule) == {"loglik_letter"}
    # hand computation: the argmax letter of each item's scripted log-probabilities
    expected = []
    for _, row in ll.iterrows():
        it = items[int(row.item_index)]
        lps = _letter_lps(it, order[it["question"]])
        best = max(lps, key=lps.get)
        assert row.pred == best
        expected.append(float(best == "ABCDE"[it["answer_index"]]))
    assert ll.correct.tolist() == expected and 0 < np.mean(expected) < 1
    assert (fc.correct == 0).all()  # the one-token generation reads nothing
    acc_cell = cells[cells.evaluator == "acc"].iloc[0]
    assert acc_cell["accuracy"] == pytest.approx(np.mean(expected))
    # the evaluator's letter request is the token_prob(window=full) request: run once per item
    letter_reqs = {r.id for r in eng.seen if r.kind == "choice_logprobs"}
    assert len(letter_reqs) == N
    # after the raw-text "Answer:" the automatic label form is " A"
    assert all(c.startswith(" ") for r in eng.seen if r.kind == "choice_logprobs" for c in r.p["choices"])


def _option_lp(option: str, gold: bool) -> float:
    return -0.1 * len(option) - (0.0 if gold else 0.5)


def test_option_argmax_raw_and_length_normalised(tmp_path, shared_data, monkeypatch, capsys):
    items = _items(shared_data)

    def script(req):
        if req.kind == "continuation_logprobs":
            it = _item_of(prompt_text(req), items)
            text = req.p["continuation"].strip()
            gold = text == it["choices"][it["answer_index"]].strip()
            return Result(request_id=req.id, kind=req.kind,
                          continuation=[TokenLogprob(token=req.p["continuation"], token_id=1, logprob=_option_lp(text, gold))])
        return None

    eng = use_scripted_engine(monkeypatch, script)
    df, _ = _run(tmp_path, shared_data, """
evaluator acc = loglik_argmax(target=option)
evaluator acc_norm = loglik_argmax(target=option, normalise=chars)
audit a {
  models = [base]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [acc, acc_norm]
  metrics = [accuracy]
}
""", capsys)
    raw = df[df.evaluator == "acc"].set_index("item_index")
    norm = df[df.evaluator == "acc_norm"].set_index("item_index")
    assert len(raw) == len(norm) == N
    for idx in raw.index:
        it = items[int(idx)]
        opts = [c.strip() for c in it["choices"]]
        g = it["answer_index"]
        s = [_option_lp(o, i == g) for i, o in enumerate(opts)]
        sn = [v / len(o) for v, o in zip(s, opts)]
        assert raw.loc[idx, "pred"] == "ABCDE"[int(np.argmax(s))]
        assert norm.loc[idx, "pred"] == "ABCDE"[int(np.argmax(sn))]
    assert norm.correct.eq(1.0).all()  # per character the gold option always wins
    assert raw.correct.mean() < 1.0  # the summed score prefers short options
    # one continuation per option, each " " + option text after "Answer:"
    conts = [r for r in eng.seen if r.kind == "continuation_logprobs"]
    assert len({r.id for r in conts}) == sum(len(items[int(i)]["choices"]) for i in raw.index)
    assert all(r.p["continuation"].startswith(" ") for r in conts)


def test_token_prob_label_form(tmp_path, shared_data, monkeypatch, capsys):
    window = {"A": -0.5, " A": -1.0, " B": -2.0, "B": -0.1}

    def script(req):
        if req.kind == "generate":  # the answer "A" (first_char) and its first-token window
            tok = TokenLogprob(token=" A", token_id=1, logprob=-1.0, top=dict(window))
            from auditlang.core.requests import Sample

            return Result(request_id=req.id, kind=req.kind, samples=[Sample(text=" A", tokens=[tok])])
        if req.kind == "choice_logprobs":
            return Result(request_id=req.id, kind=req.kind, choice_logprobs={c: window.get(c, -5.0) for c in req.p["choices"]})
        return None

    eng = use_scripted_engine(monkeypatch, script)
    df, _ = _run(tmp_path, shared_data, """
protocol win_auto = token_prob(window=top_k, top_k=20)
protocol win_space = win_auto with (label_form=space)
protocol win_bare = win_auto with (label_form=bare)
protocol full_auto = token_prob(window=full)
protocol full_bare = full_auto with (label_form=bare)
audit a {
  models = [base]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [win_auto, win_space, win_bare, full_auto, full_bare]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
""", capsys)
    conf = df.groupby("protocol").confidence.agg(["min", "max"])
    assert (conf["min"] == conf["max"]).all()  # every item sees the same scripted window
    c = conf["min"]
    e = math.exp
    assert c["win_auto"] == pytest.approx((e(-0.5) + e(-1.0)) / (e(-0.5) + e(-1.0) + e(-2.0) + e(-0.1)))
    assert c["win_space"] == pytest.approx(e(-1.0) / (e(-1.0) + e(-2.0)))
    assert c["win_bare"] == pytest.approx(e(-0.5) / (e(-0.5) + e(-0.1)))
    n_labels = {len(r.p["choices"]) for r in eng.seen if r.kind == "choice_logprobs"}
    assert n_labels <= {4, 5}
    # full window: the engine is asked for " A".. (auto, after "Answer:") or "A".. (bare)
    forms = {tuple(r.p["choices"][:2]) for r in eng.seen if r.kind == "choice_logprobs"}
    assert forms == {(" A", " B"), ("A", "B")}
    assert c["full_bare"] != c["full_auto"]
    if n_labels == {4}:
        assert c["full_auto"] == pytest.approx(e(-1.0) / (e(-1.0) + e(-2.0) + 2 * e(-5.0)))
        assert c["full_bare"] == pytest.approx(e(-0.5) / (e(-0.5) + e(-0.1) + 2 * e(-5.0)))


@pytest.mark.parametrize(("decl", "where", "needle"), [
    ("evaluator ll = loglik_argmax(normalise=chars)", "normalise=chars", "target=letter scores one label token"),
    ("protocol tk = token_prob(readout=T1, label_form=bare)", "label_form=bare", "readout=T1 scores the answer text"),
])
def test_parameters_that_do_not_apply_are_diagnostics(tmp_path, capsys, decl, where, needle):
    spec = tmp_path / "bad.audit"
    spec.write_text(HEAD + decl + "\n", encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    line = (HEAD + decl).splitlines().index(decl) + 1
    col = decl.index(where) + 1
    assert f"bad.audit:{line}:{col}: error[E159]" in err and needle in err and "hint:" in err
