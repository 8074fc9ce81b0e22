"""Every protocol constructor through the real resolver and planner on shared data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from auditlang.plan.planner import build_plan
from auditlang.resolve.resolver import compile_spec

from protocol_helpers import DATA

SPEC = """
settings {{
  seed = 42
  data_root = "{data}"
}}
dataset mmlu = jsonl("mmlu.jsonl", task=multiple_choice, sample=4, seed=42, dev_sample=6)
dataset trivia = jsonl("triviaqa.jsonl", task=open_qa, sample=4, seed=42)
model m = hf("some/model", max_tokens=16)
template tokprob = template(file="stdlib:s004/mc/tokprob")
template bare = template(file="stdlib:s001/bare_query")
template verb = template(file="stdlib:s001/verbalized")
template pre = template(file="stdlib:s001/supplied_prefill")
template bv = template(file="stdlib:s003/confidence/binary_verification")
variant v004 = variant(multiple_choice=tokprob)
variant v001 = variant(open_qa=bare)
protocol tp = tok_prob_probe(top_k=20)
protocol ask = ask_cal()
protocol nota = nota()
protocol mi = more_info()
protocol sr = self_ref()
protocol emb = embedding_probe(layer=-1)
protocol tok = token_prob(top_k=20, window=full)
protocol ps = platt(tok)
protocol t1 = token_prob(readout=T1)
protocol t2g = token_prob(readout=T2, scored=gold, context=verbal_prefix, prefix=verb)
protocol vj = verbalized(mode=joint, phrasing=verb, max_tokens=32)
protocol vo = verbalized(phrasing=verb, prefill=pre, provenance=off_type)
protocol pt = p_true(template=bv)
protocol sc = self_consistency(k=3)
audit a004 {{
  models = [m]
  datasets = [mmlu]
  variants = [v004]
  protocols = [tp, ask, nota, mi, sr, emb, ps]
}}
audit a001 {{
  models = [m]
  datasets = [trivia]
  variants = [v001]
  protocols = [t1, t2g, vj, vo, pt, sc]
}}
"""


def test_all_protocols_plan(tmp_path: Path):
    if not (DATA / "mmlu.jsonl").is_file():
        pytest.skip("shared data not available")
    path = tmp_path / "t.audit"
    path.write_text(SPEC.format(data=DATA), encoding="utf-8")
    plan = build_plan(compile_spec(path), data_root=str(DATA))  # a data folder outside the project: the user names it
    assert len(plan.cells) == 13
    kinds = Counter(r.kind for r in plan.requests)
    # stage 1: answers (4 test + 6 dev MMLU, 4 TriviaQA), first-token / NOTA / choice / gold / joint / off-type / samples
    assert kinds["choice_logprobs"] == 10  # platt(token_prob window=full) on test + dev
    assert kinds["continuation_logprobs"] == 4  # T2 of the gold answer
    deferred = {(d["source"], d["role"], d["kind"]): d["count"] for d in plan.deferred}
    assert deferred == {
        ("ask", "ask_cal", "generate"): 10, ("emb", "hidden", "hidden_states"): 10,
        ("mi", "more_info", "generate"): 4, ("sr", "self_ref", "generate"): 4,
        ("pt", "p_true", "choice_logprobs"): 4, ("t1", "score", "continuation_logprobs"): 4,
    }
    gens = [r for r in plan.requests if r.kind == "generate"]
    # self-consistency k=3, reference=first_sample: the scored answer is run 1, 2 more samples (003 App. D.3)
    assert sum(1 for r in gens if r.p.get("n") == 2) == 4
    offtype = [r for r in gens if r.prompt.messages and r.prompt.messages[-1].role == "assistant"]
    assert len(offtype) == 4 and all(m.prompt.messages[-1].content.startswith("Guess: ") for m in offtype)
