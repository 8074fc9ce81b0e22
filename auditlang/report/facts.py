"""A protocol's declared facts (``Program.facts``, auditlang/protocols/facts.py) as the report
states them, per prompt form of the audit's models, plus the run facts a declaration asks for
(the label strings the journal's requests carried, the window sources, label coverage).

The report never decides what to say about a protocol from its name: it says what the program
declares, and ``UNSPECIFIED: protocol 'x' (ctor) declares no <fact>`` where it declares nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from auditlang.core.registry import REGISTRY
from auditlang.protocols.facts import FACT_KEYS, Fact
from auditlang.report import runfacts as R
import pandas as pd

from auditlang.report.rundata import JOURNAL, RECORDS, RunData
from auditlang.store.journal import Journal
from auditlang.protocols import program_for

UNSPECIFIED = "UNSPECIFIED"


def _join(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


@dataclass
class ProtocolFacts:
    """The facts of one protocol in one audit: ``by_form[chat] = {key: Fact}`` and the models of each form."""

    pid: str
    ctor: str
    by_form: dict[bool, dict[str, Fact]] = field(default_factory=dict)
    models: dict[bool, list[str]] = field(default_factory=dict)
    error: str | None = None

    def declared(self, key: str) -> bool:
        return bool(self.by_form) and all(key in f for f in self.by_form.values())

    def facts(self, key: str) -> list[tuple[list[str], Fact]]:
        """[(models, fact)] with the models that share one text grouped."""
        out: dict[str, tuple[list[str], Fact]] = {}
        for chat, facts in self.by_form.items():
            f = facts.get(key)
            if f is not None:
                got = out.setdefault(f.text, ([], f))
                got[0].extend(self.models.get(chat, []))
        return list(out.values())

    def text(self, key: str, *, forms: bool = True) -> str | None:
        """The fact's sentence; where the prompt forms differ, each with its models (``for m: ...``)."""
        got = self.facts(key)
        if not got:
            return None
        if len(got) == 1 or not forms:
            return got[0][1].text
        return "; ".join(f"{f.text} (for {_join(ms)})" for ms, f in got)

    def lines(self, key: str) -> list[str]:
        got = self.facts(key)
        if len(got) == 1:
            return [got[0][1].text]
        return [f"{_join(ms)}: {f.text}" for ms, f in got]

    def any(self, key: str) -> Fact | None:
        got = self.facts(key)
        return got[0][1] if got else None

    def missing(self, key: str) -> str:
        return f"{UNSPECIFIED}: protocol '{self.pid}' ({self.ctor}) declares no {FACT_KEYS[key]}"


def protocol_facts(rd: RunData, aid: str, pid: str) -> ProtocolFacts:
    """Build the protocol's program as the planner does and collect its facts for each prompt form
    (chat messages or plain text) the audit's models were given."""
    cache = rd.__dict__.setdefault("_protocol_facts", {})
    if (aid, pid) in cache:
        return cache[(aid, pid)]
    o = rd.spec.get(pid)
    pf = ProtocolFacts(pid, o.ctor)
    for mid, chat in R.chat_models(rd, aid).items():
        pf.models.setdefault(chat, []).append(mid)
    try:
        prog = program_for(o, rd.spec)
        for chat in pf.models:
            got = prog.facts(chat)
            pf.by_form[chat] = {k: f for k, f in (got or {}).items() if k in FACT_KEYS and isinstance(f, Fact)}
    except Exception as e:  # noqa: BLE001  (a plugin program that cannot describe itself declares nothing)
        pf.by_form, pf.error = {}, f"{type(e).__name__}: {e}"
    cache[(aid, pid)] = pf
    return pf


def program_declares(rd: RunData, pid: str, attr: str) -> Any:
    """A class-level declaration of protocol ``pid``'s program, read from its registry entry
    (``verbal_parse``: VPR applies; ``reliability_diagram``: how its confidence is drawn in one);
    None when ``pid`` names no registered protocol."""
    o = rd.spec.objects.get(pid)
    entry = REGISTRY.find("protocol", o.ctor) if o is not None else None
    try:
        return getattr(entry.load(), attr, None) if entry is not None else None
    except ImportError:
        return None


def sent_labels(rd: RunData, aid: str, pid: str) -> dict[str, tuple[str, ...]]:
    """model -> the label strings (``choices``) of the protocol's label requests as the journal
    stored them (the request role the program names as ``label_role``, else every
    ``choice_logprobs`` request of the protocol's records)."""
    path = rd.run_dir / RECORDS
    if not path.is_file() or not (rd.run_dir / JOURNAL).exists():
        return {}
    try:
        role = getattr(program_for(rd.spec.get(pid), rd.spec), "label_role", None)
    except Exception:  # noqa: BLE001  (as in protocol_facts)
        role = None
    try:
        df = pd.read_parquet(path, columns=["cell_id", "protocol", "model", "request_ids"])
    except (OSError, ValueError, KeyError):
        return {}
    rows = df[df["cell_id"].str.startswith(aid + "/") & (df["protocol"] == pid)]
    per_model: dict[str, list[str]] = {}
    for m, ids in zip(rows["model"], rows["request_ids"]):
        try:
            got = json.loads(ids) if isinstance(ids, str) else dict(ids or {})
        except ValueError:
            continue
        per_model.setdefault(str(m), []).extend(rid for r, rid in got.items() if role is None or r == role)
    out: dict[str, tuple[str, ...]] = {}
    with Journal(rd.run_dir) as j:
        for m, ids in per_model.items():
            for req in j.request_params(ids[:200]).values():
                choices = (req.get("params") or {}).get("choices")
                if req.get("kind") == "choice_logprobs" and choices:
                    out.setdefault(m, tuple(choices))
                    break
    return out


def _prompt_text(prompt: dict) -> str:
    if prompt.get("text") is not None:
        return prompt["text"]
    users = [m["content"] for m in prompt.get("messages") or [] if m.get("role") == "user"]
    return users[0] if users else ""


def answer_prompt_shown(rd: RunData, aid: str, pid: str) -> dict[str, tuple[int, int]]:
    """model -> (requests of the protocol that contain the variant's answer prompt text, requests),
    over its records' own requests (the roles besides the answer and the evaluators' ``x:y`` roles)."""
    path = rd.run_dir / RECORDS
    if not path.is_file() or not (rd.run_dir / JOURNAL).exists():
        return {}
    try:
        df = pd.read_parquet(path, columns=["cell_id", "protocol", "model", "request_ids"])
    except (OSError, ValueError, KeyError):
        return {}
    rows = df[df["cell_id"].str.startswith(aid + "/") & (df["protocol"] == pid)].drop_duplicates("request_ids")
    pairs: dict[str, list[tuple[str, str]]] = {}
    for m, ids in zip(rows["model"], rows["request_ids"]):
        got = json.loads(ids) if isinstance(ids, str) else {}
        own = [rid for r, rid in got.items() if r != "answer" and ":" not in r and isinstance(rid, str)]
        if got.get("answer") and own:
            pairs.setdefault(str(m), []).append((got["answer"], own[0]))
    out: dict[str, tuple[int, int]] = {}
    with Journal(rd.run_dir) as j:
        for m, ps in pairs.items():
            ps = ps[:200]
            reqs = j.request_params([x for p in ps for x in p])
            n = hit = 0
            for a, o in ps:
                if a in reqs and o in reqs:
                    n += 1
                    hit += _prompt_text(reqs[a]["prompt"]).strip() in _prompt_text(reqs[o]["prompt"])
            if n:
                out[m] = (hit, n)
    return out


def sent_labels_text(rd: RunData, aid: str, pid: str, name=str) -> str | None:
    """The label strings sent, per group of models (``name``: how a model is named)."""
    got = {name(m): ch for m, ch in sent_labels(rd, aid, pid).items()}
    if not got:
        return None
    forms: dict[tuple[str, ...], list[str]] = {}
    for m, ch in got.items():
        forms.setdefault(ch, []).append(m)
    return "; ".join(", ".join(json.dumps(c) for c in ch) + f" to {_join(ms)}" for ch, ms in forms.items())


def fact_params(pf: ProtocolFacts, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for _, f in pf.facts(key):
        out += [p for p in f.params if p not in out]
    return tuple(out)


def fact_runs(pf: ProtocolFacts, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for _, f in pf.facts(key):
        out += [r for r in f.run if r not in out]
    return tuple(out)


def context_value(pf: ProtocolFacts) -> dict[str, Any]:
    """model -> the declared ``context`` value ``(layout, "chat" | "text")`` (tests compare it with the requests)."""
    out: dict[str, Any] = {}
    for chat, facts in pf.by_form.items():
        f = facts.get("context")
        for m in pf.models.get(chat, []):
            out[m] = None if f is None else f.value
    return out


__all__ = ["ProtocolFacts", "context_value", "fact_params", "fact_runs", "program_declares", "protocol_facts", "sent_labels",
           "sent_labels_text"]
