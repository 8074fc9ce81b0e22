"""`auditc run` with study 002's Calib1, BL and generation-logprob Prob. and study 003's
self-consistency on the embedded SmolLM2 (CPU): every method yields a confidence, Calib1 is
fitted on the dev split, and self-consistency makes k runs per item with the scored answer as
run 1 (003 App. D.3), not k + 1."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main

pytestmark = pytest.mark.slow

SPEC = """
import "stdlib/s000"
import "stdlib/s002"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=4, seed=42, dev_sample=12)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)
variant sampled = s000.surface_paraphrase with (temperature=1.0, top_p=1.0)
protocol prob_gen = token_prob(readout=T1, normalise=raw, scored=generated, context=bare, source=generation)
protocol sc3 = self_consistency(k=3, temperature=1.0, top_p=1.0, seed=42, reference=first_sample)
protocol s2 = self_consistency(k=2, temperature=0.7, top_p=1.0, seed=7, reference=answer)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [sampled]
  protocols = [prob_gen, s002.calib1, s002.random_bl, sc3]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
  bootstrap = bootstrap(resamples=50, seed=42)
}
compare rob = robustness(a, variants=[sampled], answer=own, samples=s2)
report cells, checklist
"""


def test_s002_methods_and_self_consistency_run(tmp_path: Path, shared_data: Path, capsys) -> None:
    spec = tmp_path / "m.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().out
    df = pd.read_parquet(out / "records.parquet")
    by = {p: g for p, g in df.groupby("protocol")}
    assert set(by) == {"prob_gen", "s002.calib1", "s002.random_bl", "sc3"} and all(len(g) == 4 for g in by.values())
    for p, g in by.items():
        ok = g["confidence_parsed"].astype(bool)
        # sc3: 003 skips an item whose run 1 (the sampled scored answer) has no extracted letter;
        # which items those are depends on the sampled answers (their seeds)
        assert (ok.sum() >= 2 if p == "sc3" else ok.all()) and g.loc[ok, "confidence"].between(0, 1).all(), p
    # Prob. from the answer generation's own logprobs: geometric mean over its tokens
    for _, r in by["prob_gen"].iterrows():
        x = json.loads(r["extras"])
        assert x["source"] == "generation"
        lps = x["token_logprobs"]
        assert r["confidence"] == pytest.approx(math.exp(sum(lps) / len(lps)), rel=1e-6)
    assert all(json.loads(x)["n_train"] == 12 for x in by["s002.calib1"]["extras"])  # fitted on the dev split
    # self-consistency: run 1 is the scored answer (its extracted letter is the reference), k = 3
    for _, r in by["sc3"].iterrows():
        x = json.loads(r["extras"])
        if not r["confidence_parsed"]:
            assert x["answers"][0] is None and x["reason"].startswith("reference answer missing")
            continue
        assert x["k"] == 3 and len(x["answers"]) == 3 and x["answers"][0] == r["pred"] == x["reference"]
        assert r["confidence"] == pytest.approx(sum(a == x["reference"] for a in x["answers"]) / 3)
    # 4 test answers + 12 dev answers + 4 sampling requests of n = 2 (sc3): no 11th (here 4th)
    # answer; + 4 requests of the robustness samples (s2)
    with sqlite3.connect(out / "journal.sqlite") as c:
        n = c.execute("select count(*) from results").fetchone()[0]
    assert n == 4 + 12 + 4 + 4
    # 002 A-STB / A-SST samples: every method scores the model's own samples; Prob. from the
    # sample's own token logprobs (App. A.3, GPT-4o), Calib1 and BL from the text
    for p in ("prob_gen", "s002.calib1", "s002.random_bl"):
        for x in by[p]["extras"]:
            sup = [c for c in json.loads(x)["supplied"] if c["source"].startswith("samples:s2")]
            assert len(sup) == 2 and all(c["confidence"] is not None and 0 <= c["confidence"] <= 1 for c in sup), p
    md = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert "k=3 runs per item: the scored answer (run 1) and k-1=2 samples" in md
    assert "| smol / arc / sampled / s000.first_char | fitted on the dev split (12 items) |" in md


S003_SC = """
import "stdlib/s003"
import "stdlib/metrics"
settings { seed = 42 }
dataset triviaqa = jsonl("triviaqa.jsonl", task=open_qa, sample=20, seed=42)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=16, max_tokens=12)
audit trivia {
  models = [smol]
  datasets = [triviaqa]
  variants = [s003.answer]
  protocols = [s003.self_consistency]
  evaluators = [s003.alias_exact]
  metrics = [accuracy, metrics.ece10]
}
report cells
"""


def test_s003_self_consistency_samples_are_not_the_scored_answer(tmp_path: Path, shared_data: Path, capsys) -> None:
    """Issue 23: study 003's design (its stdlib answer variant at T=1 and self-consistency with
    seed=42, as specs/s003 uses them) on a real run: the scored answer (run 1) and the 9 samples
    (runs 2..10) of one item come from different seeds, so sample 1 is not a copy of run 1
    (before: same prompt, decoding and seed, so 4/4 items had sample 1 == the answer, token for
    token), and no two items share a seed."""
    spec = tmp_path / "s003sc.audit"
    spec.write_text(S003_SC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--limit", "4", "--no-progress"])
    assert rc == 0, capsys.readouterr().err[-3000:]
    with sqlite3.connect(out / "journal.sqlite") as c:
        rows = c.execute("select q.request, r.result from requests q join results r using (request_id, fp_hash)").fetchall()
    by_prompt: dict[str, dict[int, tuple[int, list]]] = {}
    for q, r in rows:
        q, r = json.loads(q), json.loads(r)
        n = q["params"].get("n", 1)
        runs = [[(t["token_id"], round(t["logprob"], 6)) for t in s["tokens"]] for s in r["samples"]]
        by_prompt.setdefault(json.dumps(q["prompt"], sort_keys=True), {})[n] = (q["seed"], runs)
    assert len(by_prompt) == 4
    seeds = []
    for reqs in by_prompt.values():
        assert set(reqs) == {1, 9}  # the scored answer and the 9 samples
        (a_seed, [answer]), (s_seed, samples) = reqs[1], reqs[9]
        assert a_seed != s_seed
        assert samples[0] != answer  # the first sample is not a copy of the scored answer
        assert len({tuple(s) for s in samples}) > 1
        seeds += [a_seed, s_seed]
    assert len(set(seeds)) == len(seeds)  # per item and purpose
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert "request:<purpose>" in plan["sampling_seeds"]
