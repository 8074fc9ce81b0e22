"""Issue 34 item 2: a test that reads every sentence. For the five study twins, the quickstart and
a spec with a plugin protocol, `auditc run` (a scripted engine in place of the models, `--limit 2`)
writes ``report/claims.json``: every statement of checklist.md, methods.tex and disclosure.md with
the facts it was built from. This test checks that every rendered statement is a claim, that every
claim names its facts, and that the facts agree with the run: a protocol's declared conditioning
context with the requests the journal holds, the label strings with the requests' choices, the
provenance with the records, an UNSPECIFIED parameter with the spec, a disclosure axis with the
spec values, a VPR threshold's cited spec line with the spec text."""

from __future__ import annotations

import json
import re
from collections import defaultdict
import sqlite3
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from auditlang.api import load_run
from auditlang.cli import main
from auditlang.core.params import Obj
from auditlang.core.registry import REGISTRY
from auditlang.protocols import program_for
from auditlang.protocols.base import Program, Readout
from auditlang.protocols.facts import FACT_KEYS
from scripted_engine import generation, number_items, use_scripted_engine

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
TWINS = sorted(REPO.glob("examples/s00*_twin.audit"))


class ConstParams(Obj):
    DOC: ClassVar[str] = "A constant confidence for every answer."
    value: float = 0.7


class ConstProgram(Program):  # a plugin protocol that declares no facts
    def read(self, ctx, results, pred, answer_text):
        return Readout(self.p.value, True, "const_conf")


PLUGIN_SPEC = """import "stdlib/s000"
dataset nums = jsonl("nums.jsonl", task=multiple_choice)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
model gem = embedded("gemma3-270m", max_tokens=4)
protocol c = const_conf()
audit a {
  models = [smol, gem]
  datasets = [nums]
  variants = [s000.surface_paraphrase]
  protocols = [c, s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, vpr]
  vpr_threshold = 0.5
}
report cells, checklist, disclosure(format=both)
"""


def _script(req):
    if req.kind == "generate":
        return generation(req, "<answer>A</answer> \\boxed{A}\nGuess: A\nProbability: 0.8")
    return None


SPECS = [t.stem for t in TWINS] + ["quickstart", "plugin"]


@pytest.fixture(scope="module", params=SPECS)
def run(request, tmp_path_factory) -> Path:
    name = request.param
    if name != "plugin" and name != "quickstart" and not (DATA / "mmlu.jsonl").exists():
        pytest.skip("../shared/data is not available")
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp(name)
    try:
        use_scripted_engine(mp, _script)
        if name == "plugin":
            REGISTRY.register("protocol", "const_conf", schema=ConstParams, impl=ConstProgram)
            (tmp / "nums.jsonl").write_text(number_items(3), encoding="utf-8")
            spec = tmp / "p.audit"
            spec.write_text(PLUGIN_SPEC, encoding="utf-8")
            args = ["--data-root", str(tmp)]
        elif name == "quickstart":
            spec, args = REPO / "examples" / "quickstart.audit", []
        else:
            spec, args = REPO / "examples" / f"{name}.audit", ["--data-root", str(DATA)]
        rc = main(["run", str(spec), *args, "--out", str(tmp / "run"), "--limit", "2", "--no-progress"])
        assert rc in (0, 4), name
        yield tmp / "run"
    finally:
        if name == "plugin":
            REGISTRY.unregister("protocol", "const_conf")
        mp.undo()


def _claims(run: Path) -> list[dict]:
    return json.loads((run / "report" / "claims.json").read_text(encoding="utf-8"))


def _journal(run: Path) -> dict[str, dict]:
    db = sqlite3.connect(run / "journal.sqlite")
    return {rid: json.loads(text) for rid, text in db.execute("SELECT request_id, request FROM requests")}


def _text(prompt: dict) -> str:
    if prompt.get("text") is not None:
        return prompt["text"]
    return next((m["content"] for m in prompt.get("messages") or [] if m["role"] == "user"), "")


def _roles(prompt: dict) -> list[str]:
    return [m["role"] for m in prompt.get("messages") or [] if m["role"] != "system"]


def _agrees(value, req: dict, answer: dict) -> bool:
    """Whether a request has the layout a declared context value ``(layout, form)`` states."""
    layout, form = value
    p, a = req["prompt"], answer["prompt"]
    if form == "chat" and layout != "answer_prompt" and "messages" not in p:
        return False
    if form == "text" and "text" not in p:
        return False
    if layout == "single":
        return _roles(p) == ["user"] and p["messages"][-1] != a["messages"][-1] if form == "chat" else True
    if layout == "followup":
        return (_roles(p) == ["user", "assistant", "user"] and p["messages"][-3] == a["messages"][-1]
                if form == "chat" else p["text"].startswith(a["text"]))
    if layout == "prefill":
        return _roles(p)[-1] == "assistant" if form == "chat" else True
    if layout == "answer_prompt":
        return p == a
    return True


def test_every_rendered_statement_is_a_claim_with_facts(run: Path) -> None:
    claims = _claims(run)
    assert claims and all(c["facts"] and all(":" in f for f in c["facts"]) for c in claims)
    texts = {c["file"]: set() for c in claims}
    for c in claims:
        texts[c["file"]].add(c["text"])
    md = (run / "report" / "checklist.md").read_text(encoding="utf-8").replace("&lt;", "<")
    body, _, cite = md.partition("## How to cite the setup")
    summary, _, groups = body.partition("\n## Run")
    flags = {re.sub(r"^(UNSPECIFIED|WARNING):?\s*", "", c["text"]) for c in claims
             if c["file"] == "checklist" and c["kind"] == "flag"}
    for line in groups.splitlines():  # every item line and flag is a claim
        if line.startswith("- "):
            text = line[2:].removeprefix("**").removesuffix("**")
            assert text in texts["checklist"], text
    for line in summary.splitlines():  # every summary entry repeats a flag
        if line.startswith("- ") and ": " in line:
            for part in line[2:].split(" · "):
                assert any(part.endswith(f) for f in flags), part
    paragraph = next(ln[2:] for ln in cite.splitlines() if ln.startswith("> "))
    assert paragraph == " ".join(c["text"] for c in claims if c["file"] == "methods")
    dis = (run / "report" / "disclosure.md").read_text(encoding="utf-8").replace("&lt;", "<")
    for line in dis.splitlines():
        if line.startswith("| ") and not line.startswith("| Axis |"):
            row = " | ".join(x.strip() for x in line.strip()[1:-1].split(" | ")).replace("\\|", "|")
            assert row in texts["disclosure"], line
        elif line.startswith("- "):
            assert line[2:] in texts["disclosure"], line


def test_every_protocol_fact_agrees_with_the_requests_sent(run: Path) -> None:
    r = load_run(run)
    spec, claims = r.spec, _claims(run)
    recs = pd.read_parquet(run / "records.parquet", columns=["cell_id", "protocol", "model", "request_ids", "extras"])
    journal = _journal(run)
    checked = 0
    for aid, a in spec.of_kind("audit").items():
        for pid in a.value.protocols:
            o = spec.get(pid)
            prog = program_for(o, spec)
            mine = recs[recs["cell_id"].str.startswith(aid + "/") & (recs["protocol"] == pid)]
            lines = [c for c in claims if c["file"] == "checklist" and any(f.startswith(f"protocol:{pid}:") for f in c["facts"])
                     and f"Audit {aid}, cells of protocol {pid} " in c["where"]]
            for model, rows in mine.groupby("model"):
                chat = None
                shown = defaultdict(lambda: [0, 0])
                for ids, extras in zip(rows.drop_duplicates("request_ids")["request_ids"],
                                       rows.drop_duplicates("request_ids")["extras"]):
                    ids = json.loads(ids)
                    answer = journal.get(ids.get("answer"))
                    if answer is None:
                        continue
                    chat = "messages" in answer["prompt"]
                    facts = prog.facts(chat)
                    ctx = facts.get("context")
                    for role, rid in ids.items():
                        req = journal.get(rid if isinstance(rid, str) else rid[0])
                        if role == "answer" or ":" in role or req is None or ctx is None or not isinstance(ctx.value, tuple):
                            continue
                        assert ctx.value[0] != "none", (pid, role)  # a protocol with no model call sends nothing
                        assert _agrees(ctx.value, req, answer), (pid, model, role, ctx.value, req["prompt"])
                        checked += 1
                        if "answer_prompt_shown" in ctx.run:  # the count the checklist states, recomputed
                            shown[(pid, model)][0] += _text(answer["prompt"]).strip() in _text(req["prompt"])
                            shown[(pid, model)][1] += 1
                        if req["kind"] == "choice_logprobs" and "labels" in facts and "sent_labels" in facts["labels"].run:
                            sent = ", ".join(json.dumps(c) for c in req["params"]["choices"])
                            assert any(sent in c["text"] for c in lines), (pid, sent)
                    prov = json.loads(extras or "{}").get("provenance")
                    if prov and "provenance" in facts and isinstance(facts["provenance"].value, tuple):
                        assert facts["provenance"].value[0] == prov
                for (p, m), (hit, n) in shown.items():
                    want = (f"{m}: none of the {n} requests checked contains" if not hit else
                            f"{m}: {hit} of {n} requests checked contain")
                    assert any(c["text"].startswith(want) for c in lines), (p, want)
                if chat is None:
                    continue
                facts = prog.facts(chat)
                for key in ("provenance", "scored", "readout", "context", "normalisation"):
                    if key in facts:  # the declared sentence is what the checklist states
                        assert any(facts[key].text in c["text"] for c in lines), (pid, key)
                    else:
                        assert any(c["text"] == f"UNSPECIFIED: protocol '{pid}' ({o.ctor}) declares no {FACT_KEYS[key]}"
                                   for c in lines), (pid, key)
    assert checked or all(not json.loads(i).keys() - {"answer"} for i in recs["request_ids"])


def test_spec_facts_and_sources_agree_with_the_spec(run: Path) -> None:
    r = load_run(run)
    spec, claims = r.spec, _claims(run)
    for c in claims:
        for f in c["facts"]:
            if f.startswith("spec:") and c["kind"] == "flag" and "does not set" in c["text"]:
                obj, _, param = f[5:].rpartition(".")
                assert param not in {n for n, _ in spec.get(obj).param_spans}, c["text"]
            elif f.startswith("spec:") and c["file"] == "disclosure" and c["kind"] == "row":
                obj, _, axis = f[5:].rpartition(".")
                if obj in spec.objects and axis in type(spec.get(obj).value).model_fields:
                    v = getattr(spec.get(obj).value, axis)
                    if isinstance(v, list):  # the audit's models: each one named
                        assert all(str(x) in c["text"] for x in v), (f, c["text"])
                    else:
                        assert f"{axis}={'none' if v is None else v}" in c["text"], (f, c["text"])
            elif f.startswith("protocol:") and c["file"] == "disclosure":
                pid = f.split(":")[1]
                assert f"{pid}" in c["text"]
        m = re.search(r"set in the spec at ([^:]+):(\d+)", c["text"])
        if m:
            src = next(p for p in (run / "spec").rglob(m.group(1)))
            assert "vpr_threshold" in src.read_text(encoding="utf-8").splitlines()[int(m.group(2)) - 1]
        assert "appendix D.1" not in c["text"] or "0.80" in c["text"], c["text"]
