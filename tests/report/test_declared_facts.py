"""Issues 34 and 39: what the report says about a protocol comes from the facts its program
declares (``Program.facts``) and from the requests the run actually sent, through `auditc run` on a
spec: the conditioning context and the P(True) label strings against the journal's requests, the
disclosure's signal and model rows, a user-chosen VPR threshold credited to its spec line, the
accuracy gap of equal models, and a plugin protocol that declares nothing (UNSPECIFIED, never the
probe wording of another protocol)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core.errors import EXIT
from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

REPO = Path(__file__).resolve().parents[2]
ROWS = number_items(4)

SPEC = """import "stdlib/s003"
settings { seed = 1, vpr_threshold = 0.5 }
dataset nums = jsonl("nums.jsonl", task=multiple_choice)
model chatm = hf("org/chat", dtype=float32, max_tokens=4)
model basem = hf("org/base", dtype=float32, max_tokens=4, chat=false)
template ask = template("Question: {{ question }}\\nProposed Answer: {{ proposed_answer }}\\nHow sure are you? Say a decimal:")
template follow = template("How sure are you of that answer? Say a decimal.")
protocol tok = token_prob()
protocol single = verbalized(scale=decimal_01, phrasing=ask)
protocol turn = verbalized(scale=decimal_01, phrasing=follow)
audit a {
  models = [chatm, basem]
  datasets = [nums]
  variants = [s003.answer]
  protocols = [tok, single, turn, s003.p_true, s003.self_consistency]
  evaluators = [s003.letter]
  metrics = [accuracy, vpr]
}
report cells, checklist, disclosure
"""


def _script(req):
    text = prompt_text(req)
    if req.kind == "generate" and ("How sure" in text):
        return generation(req, "0.9")
    if req.kind == "generate":
        return generation(req, "\\boxed{A}")
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("facts")
    try:
        use_scripted_engine(mp, _script)
        (tmp / "data").mkdir()
        (tmp / "data" / "nums.jsonl").write_text(ROWS, encoding="utf-8")
        (tmp / "s.audit").write_text(SPEC, encoding="utf-8")
        rc = main(["run", str(tmp / "s.audit"), "--data-root", str(tmp / "data"), "--out", str(tmp / "run"),
                   "--no-progress"])
        assert rc == 0
    finally:
        mp.undo()
    return tmp / "run"


def _run_spec(tmp_path: Path, monkeypatch, spec: str, script) -> int:
    """`auditc run` of ``spec`` (written as s.audit beside its data) on the scripted engine; the
    run directory is tmp_path / "run"."""
    use_scripted_engine(monkeypatch, script)
    (tmp_path / "s.audit").write_text(spec, encoding="utf-8")
    return main(["run", str(tmp_path / "s.audit"), "--data-root", str(tmp_path), "--out", str(tmp_path / "run"),
                 "--no-progress"])


def _sent(run: Path, protocol: str, role: str) -> dict[str, list[dict]]:
    """model -> the journal's stored requests of ``role`` for ``protocol``'s records."""
    import pandas as pd

    df = pd.read_parquet(run / "records.parquet", columns=["protocol", "model", "request_ids"])
    ids = {(m, json.loads(r).get(role)) for p, m, r in zip(df["protocol"], df["model"], df["request_ids"]) if p == protocol}
    db = sqlite3.connect(run / "journal.sqlite")
    out: dict[str, list[dict]] = {}
    for m, rid in ids:
        row = db.execute("SELECT request FROM requests WHERE request_id = ?", (rid,)).fetchone() if rid else None
        if row:
            out.setdefault(m, []).append(json.loads(row[0]))
    return out


def _section(md: str, head: str) -> str:
    start = md.index(head)
    nxt = md.find("\n## ", start + len(head))
    return md[start:nxt if nxt > 0 else None]


def test_conditioning_context_is_the_prompt_actually_sent(run: Path) -> None:
    md = (run / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    methods = (run / "report" / "methods.tex").read_text(encoding="utf-8")
    single = _sent(run, "single", "verbal")
    turn = _sent(run, "turn", "verbal")
    # single: one new prompt, the answer after "Proposed Answer:", no earlier turn, no variant instruction
    chat_req, base_req = single["chatm"][0]["prompt"], single["basem"][0]["prompt"]
    assert [m["role"] for m in chat_req["messages"]] == ["user"] and "Proposed Answer: " in chat_req["messages"][0]["content"]
    assert "Task:" not in chat_req["messages"][0]["content"] and base_req.get("text") and "Task:" not in base_req["text"]
    sec = _section(md, "## Audit a, cells of protocol single")
    assert "chatm: one new prompt, the phrasing ask rendered with the item and the answer (shown as \u201cProposed " \
           "Answer: <answer>\u201d), as a single user turn (chat template)" in sec
    assert "basem: one new prompt" in sec and "as plain text (no chat template)" in sec
    assert "follow-up user turn" not in sec and "appending" not in sec
    # turn: [user, assistant, user] for the chat model; prompt + answer + follow-up as text for the base model
    assert [m["role"] for m in turn["chatm"][0]["prompt"]["messages"]] == ["user", "assistant", "user"]
    assert turn["basem"][0]["prompt"]["text"].rstrip().endswith("Say a decimal.")
    sec = _section(md, "## Audit a, cells of protocol turn")
    assert "chatm: a follow-up user turn: [user: the answer prompt, assistant: the answer, user: the phrasing follow]" in sec
    assert "basem: one plain-text prompt: the answer prompt, the answer, a blank line and the phrasing follow" in sec
    assert "one new prompt" not in sec
    assert "asked in one new prompt, the phrasing ask rendered with the item and the answer (shown as ``Proposed " \
           "Answer: $<$answer$>$''), not a continuation of the answer's conversation (a single user turn through the " \
           "chat template for \\auditid{org/chat}; plain text, without a chat template for \\auditid{org/base}), and " \
           "this new prompt leaves out the variant's answer prompt (none of the requests checked contains it)" in methods
    assert "asked after the model's answer with the phrasing follow (a user turn after the assistant's answer, " \
           "through the chat template for org/chat; the answer prompt, the answer, a blank line and the phrasing as " \
           "one plain text for org/base)" in md  # the methods paragraph as checklist.md quotes it


def test_p_true_label_strings_are_the_ones_sent(run: Path) -> None:
    sent = _sent(run, "s003.p_true", "p_true")
    got = {m: tuple(reqs[0]["params"]["choices"]) for m, reqs in sent.items()}
    assert got["chatm"] == ("A", "B") and got["basem"] == (" A", " B")  # lead_space after plain text
    md = (run / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    sec = _section(md, "## Audit a, cells of protocol s003.p_true")
    assert 'label strings sent (the requests\' choices in the journal): "A", "B" to chatm; " A", " B" to basem' in sec
    methods = (run / "report" / "methods.tex").read_text(encoding="utf-8")
    q = "{\\ttfamily\\char34}"
    assert (f"label strings sent: {q}A{q}, {q}B{q} to \\auditid{{org/chat}}; {q} A{q}, {q} B{q} to "
            "\\auditid{org/base}") in methods
    assert "`A'" not in methods  # the label is never reported without the space it was sent with


def test_self_consistency_counts_the_runs_it_sent(run: Path) -> None:
    """reference=first_sample: the k=10 runs are the scored answer and 9 samples the journal holds."""
    sent = _sent(run, "s003.self_consistency", "samples")
    assert {r["params"]["n"] for reqs in sent.values() for r in reqs} == {9}
    methods = (run / "report" / "methods.tex").read_text(encoding="utf-8")
    assert ("the share of k=10 runs that agree with the scored answer, run 1 being the scored answer itself and runs "
            "2-10 being 9 further samples (temperature 1)") in methods
    assert "agreement of 10 sampled answers" not in methods


def test_verbal_replies_decoding_is_the_one_sent(run: Path) -> None:
    """The verbal replies' sentence states their decoding as the requests carried it (greedy here)."""
    reqs = [r for reqs in _sent(run, "single", "verbal").values() for r in reqs]
    assert reqs and all(not r["params"].get("temperature") for r in reqs)
    methods = (run / "report" / "methods.tex").read_text(encoding="utf-8")
    assert "The verbal-confidence replies are generated with greedy decoding, at most" in methods


def test_disclosure_names_every_signal_and_the_model_axis(run: Path) -> None:
    md = (run / "report" / "disclosure.md").read_text(encoding="utf-8").replace("&lt;", "<")
    row = next(ln for ln in md.splitlines() if ln.startswith("| Confidence signal"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "token probability (tok)"  # the first protocol, as the note's main setting
    assert "verbalized confidence (single, turn)" in cells[2] and "P(True) (s003.p_true)" in cells[2]
    # one main per protocol family, and which of them is the main signal (the first protocol's)
    note = next(ln for ln in md.splitlines() if ln.startswith("- Main setting"))
    assert note.startswith("- Main setting of each protocol family: tok (")
    assert note.endswith("; the main confidence signal is token probability (tok), the signal of the audit's first "
                         "protocol.")
    model_row = next(ln for ln in md.splitlines() if ln.startswith("| Model | chatm | basem |"))
    # the prompts are not held fixed across the models: the requests sent were messages to chatm, text to basem
    answers = _sent(run, "tok", "answer")
    assert answers["chatm"][0]["prompt"].get("messages") and answers["basem"][0]["prompt"].get("text")
    assert ("| prompt templates (rendered through the chat template for chatm, as plain text for basem), protocols, "
            "evaluators, data |") in model_row


def test_user_chosen_vpr_threshold_is_credited_to_the_spec_line(run: Path) -> None:
    md = (run / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    line = next(ln for ln in md.splitlines() if "Inclusion threshold: VPR >= 0.50" in ln)
    assert "settings vpr_threshold, set in the spec at s.audit:2" in line and "D.1" not in line and "study 000" not in line


def test_equal_accuracies_name_no_gap_between_one_model_and_itself(run: Path) -> None:
    md = (run / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    line = next(ln for ln in md.splitlines() if ln.startswith("- nums: accuracy (mean over variants"))
    assert "no gap: every model has the same accuracy" in line and "(chatm - chatm)" not in line


# ------------------------------------------------------------------ a plugin protocol

PLUGIN = '''from typing import ClassVar

from auditlang.core.params import Obj
from auditlang.core.registry import register
from auditlang.protocols.base import Program, Readout


class ConstParams(Obj):
    DOC: ClassVar[str] = "A constant confidence for every answer."
    value: float = 0.7


class ConstProgram(Program):
    def read(self, ctx, results, pred, answer_text):
        return Readout(self.p.value, True, "const_conf")


def hook():
    register("protocol", "const_conf", schema=ConstParams, impl=ConstProgram)
'''

PLUGIN_SPEC = """import "stdlib/s000"
dataset nums = jsonl("nums.jsonl", task=multiple_choice)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
protocol c = const_conf()
audit a {
  models = [smol]
  datasets = [nums]
  variants = [s000.surface_paraphrase]
  protocols = [c, s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
report cells, checklist, disclosure
"""


def test_plugin_protocol_gets_its_declared_facts_and_no_borrowed_wording(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "constconf").mkdir(parents=True)
    (site / "constconf" / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    dist = site / "constconf-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: constconf\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[auditlang.plugins]\nconst = constconf:hook\n", encoding="utf-8")
    (tmp_path / "nums.jsonl").write_text(ROWS, encoding="utf-8")
    (tmp_path / "p.audit").write_text(PLUGIN_SPEC, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "auditlang.cli", "run", "p.audit", "--data-root", str(tmp_path),
                        "--engine", "dryrun", "--out", "r", "--no-progress"], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}, timeout=600)
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "r" / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    sec = _section(md, "## Audit a, cells of protocol c (const_conf")
    for borrowed in ("probes the model's own answer", "provenance self", "read from the probe's text reply",
                     "built-in probe prompt", "reads logprobs", "hidden states"):
        assert borrowed not in sec and borrowed not in md.split("## Summary")[1].split("## Run")[0]
    for fact in ("answer provenance", "scored-answer fact", "readout", "conditioning context", "normalisation"):
        assert f"UNSPECIFIED: protocol 'c' (const_conf) declares no {fact}" in sec
        summary = md.split("## Summary")[1].split("\n## ")[0]
        assert f"protocol 'c' (const_conf) declares no {fact}" in summary
    methods = (tmp_path / "r" / "report" / "methods.tex").read_text(encoding="utf-8")
    assert "a constant confidence for every answer (protocol \\auditid{const\\_conf}, which declares no facts beyond " \
           "its description)" in methods
    assert "probe" not in methods


def test_a_model_without_accuracy_is_left_out_of_the_gap(tmp_path: Path, monkeypatch) -> None:
    """Every answer of one model failed: its accuracy is n/a, so the gap line neither says "no gap"
    nor names one model twice; it says which model has no accuracy."""
    from auditlang.core.requests import Result

    def script(req):
        if req.model == "basem" and req.kind == "generate":
            return Result(request_id=req.id, kind=req.kind, error="scripted failure")
        return generation(req, "\\boxed{A}") if req.kind == "generate" else None

    (tmp_path / "nums.jsonl").write_text(ROWS, encoding="utf-8")
    spec = SPEC.replace("protocols = [tok, single, turn, s003.p_true, s003.self_consistency]", "protocols = [tok]")
    spec = spec.replace("model chatm = hf(", "model other = hf(\"org/other\", dtype=float32, max_tokens=4)\nmodel chatm = hf(")
    spec = spec.replace("models = [chatm, basem]", "models = [chatm, other, basem]")
    rc = _run_spec(tmp_path, monkeypatch, spec, script)
    assert rc == EXIT["request_errors"]  # the run finishes, scored and reported, with basem's items missing
    md = (tmp_path / "run" / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    line = next(ln for ln in md.splitlines() if ln.startswith("- nums: accuracy (mean over variants"))
    assert "chatm 1.000, other 1.000; no gap: every model has the same accuracy (no accuracy for basem)" in line


def test_evaluator_sentence_states_its_extract_and_golds(tmp_path: Path, monkeypatch) -> None:
    """alias_match(golds="answer", extract=full): the methods sentence names the whole answer and the
    gold answer only (not 'any gold alias'), and the records score an alias as wrong, as it says."""
    rows = "".join(json.dumps({"id": f"t{i}", "question": f"Capital {i}?", "answer": "Paris", "aliases": ["paris city"]})
                   + "\n" for i in range(2))
    (tmp_path / "qa.jsonl").write_text(rows, encoding="utf-8")
    spec = ('import "stdlib/s003"\ndataset qa = jsonl("qa.jsonl", task=open_qa)\nmodel m = hf("org/m", dtype=float32)\n'
            'evaluator ans = alias_match(golds="answer", extract=full)\n'
            "audit a {\n  models = [m]\n  datasets = [qa]\n  variants = [s003.answer]\n  protocols = [s003.self_consistency]\n"
            "  evaluators = [ans]\n  metrics = [accuracy]\n}\nreport checklist\n")
    rc = _run_spec(tmp_path, monkeypatch, spec,
                   lambda req: generation(req, "Paris city") if req.kind == "generate" else None)
    assert rc == 0
    methods = (tmp_path / "run" / "report" / "methods.tex").read_text(encoding="utf-8")
    assert "Answers are scored with normalised exact match of the whole answer with the gold answer (" in methods
    assert "alias" not in methods.split("Answers are scored with")[1].split(".")[0]
    import pandas as pd

    assert not pd.read_parquet(tmp_path / "run" / "records.parquet")["correct"].any()  # the alias is not a gold here


def test_self_consistency_sentence_states_k_and_the_sampling_it_sent(tmp_path: Path, monkeypatch) -> None:
    """k=2 names its one further run in the singular; top-p and top-k, where they cut the sampled
    distribution, are stated beside the temperature; reference=answer counts k further samples
    (session 37: "runs 2-2 1 further samples (temperature 0.7)", top-p unsaid)."""
    (tmp_path / "nums.jsonl").write_text(ROWS, encoding="utf-8")
    spec = ('import "stdlib/s003"\ndataset nums = jsonl("nums.jsonl", task=multiple_choice)\n'
            'model m = hf("org/m", dtype=float32, max_tokens=4)\n'
            "protocol two = self_consistency(k=2, temperature=0.7, top_p=0.9)\n"
            "protocol vs = self_consistency(k=3, temperature=0.5, sample_top_k=20, reference=answer)\n"
            "audit a {\n  models = [m]\n  datasets = [nums]\n  variants = [s003.answer]\n  protocols = [two, vs]\n"
            "  evaluators = [s003.letter]\n  metrics = [accuracy]\n}\nreport checklist\n")
    rc = _run_spec(tmp_path, monkeypatch, spec,
                   lambda req: generation(req, "\\boxed{A}") if req.kind == "generate" else None)
    assert rc == 0
    two, vs = ([r["params"] for reqs in _sent(tmp_path / "run", pid, "samples").values() for r in reqs]
               for pid in ("two", "vs"))
    assert two and {(q["n"], q["temperature"], q["top_p"], q.get("top_k")) for q in two} == {(1, 0.7, 0.9, None)}
    assert vs and {(q["n"], q["temperature"], q["top_p"], q.get("top_k")) for q in vs} == {(3, 0.5, 1.0, 20)}
    methods = (tmp_path / "run" / "report" / "methods.tex").read_text(encoding="utf-8")
    assert ("the share of k=2 runs that agree with the scored answer, run 1 being the scored answer itself and run 2 "
            "a further sample (temperature 0.7, top-p 0.9)") in methods
    assert "the agreement of 3 further sampled answers (temperature 0.5, top-k 20) with the scored answer" in methods
