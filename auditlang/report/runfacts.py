"""Facts of what was run, for sentences the methods paragraph and the checklist share: the
generation budgets of the planned requests, where a first-token protocol's logprob window came
from on the engine that ran it, how many answers start with a label, and how many token
confidences fell back to the window's most probable label (``label_source = window_argmax``).

Everything is read from the plan's requests, the engine fingerprints and the records; the engine's
calls are those :func:`auditlang.core.capabilities.engine_calls` says it makes.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pandas as pd

from auditlang.core.capabilities import call_shape, engine_calls
from auditlang.report.rundata import RunData
from auditlang.resolve.models import declared_model
from auditlang.resolve.schema import EMBEDDED_MODELS
from auditlang.store.rundir import RECORDS


def _requests(rd: RunData, aid: str, *, protocol: str | None = None, variant: str | None = None):
    """(model, {role: request}) of the audit's planned stage-1 test requests, per item."""
    for key, unit in getattr(rd.plan, "units", {}).items():
        if key[0] != aid or key[4] != "test" or (variant is not None and key[3] != variant):
            continue
        for pid, per_item in unit.stage1.items():
            if protocol is None or pid == protocol:
                for reqs in per_item:
                    yield key[1], reqs


def answer_budgets(rd: RunData, aid: str) -> Counter:
    """max_tokens of the audit's unique planned answer requests, counted (empty: not in the plan)."""
    return answer_budgets_of(rd, aid, None)


def answer_budgets_of(rd: RunData, aid: str, variant: str | None) -> Counter:
    """:func:`answer_budgets` of one variant's answers (all variants with None)."""
    got: Counter = Counter()
    seen: set[str] = set()
    for _, reqs in _requests(rd, aid, variant=variant):
        r = reqs.get("answer")
        if r is None or r.kind != "generate" or r.id in seen:
            continue
        seen.add(r.id)
        got[int(dict(r.params).get("max_tokens") or 0)] += 1
    return got


def budget_text(got: Counter) -> str | None:
    """'at most 16 new tokens (max_tokens=16)' for one budget; a breakdown for several."""
    if not got:
        return None
    if len(got) == 1:
        mt = next(iter(got))
        return f"at most {mt} new tokens (max_tokens={mt})"
    return "max_tokens " + ", ".join(f"{mt} ({n} requests)" for mt, n in sorted(got.items()))


def engine_of(rd: RunData, mid: str) -> tuple[str, bool]:
    """(engine that ran model ``mid``, whether a fingerprint says so); else the declared engine
    (or the run's --engine override)."""
    fp = rd.fingerprints.get(mid) or {}
    if fp.get("engine"):
        return str(fp["engine"]), True
    override = (rd.run_info or {}).get("engine_override")
    return (override or declared_model(rd.spec, mid)[0]), False


def _window_source(engine: str, ans: Any, first: Any) -> str:
    p = dict(first.params)
    shared = ans is not None and first.id == ans.id
    if first.kind == "generate":
        k = max(int(p.get("first_top_logprobs") or 0), int(p.get("top_logprobs") or 0))
        mt = p.get("max_tokens")
        if not shared:
            return f"a dedicated max_tokens={mt} call (top-{k} logprob window)"
        calls = engine_calls(engine, first.kind, call_shape(first.kind, p))
        if engine == "vllm" and len(calls) > 1:
            return (f"a separate one-token request (logprobs={k}) on the answer prompt, which the vllm engine sends "
                    f"beside the answer's own generation (max_tokens={mt})")
        return (f"the first generated position of the answer's own greedy generation (max_tokens={mt}; the "
                f"{engine} engine returns the top-{k} window at that position, no separate call)")
    calls = engine_calls(engine, first.kind, call_shape(first.kind, p))
    return f"a {first.kind} request ({'; '.join(calls)})"


def first_window_sources(rd: RunData, aid: str, pid: str) -> dict[str, list[str]]:
    """How the first-token window of protocol ``pid`` was obtained -> the models it holds for
    (a model whose engine is not fingerprinted is marked 'declared engine')."""
    per_model: dict[str, str] = {}
    for mid, reqs in _requests(rd, aid, protocol=pid):
        first = reqs.get("first")
        if first is None or mid in per_model:
            continue
        engine, ran = engine_of(rd, mid)
        per_model[mid] = _window_source(engine, reqs.get("answer"), first) + ("" if ran else " [declared engine; "
                                                                             "no fingerprint recorded]")
    out: dict[str, list[str]] = {}
    for mid, text in per_model.items():
        out.setdefault(text, []).append(mid)
    return out


def _label_start(text: str, labels: list[str]) -> bool:
    m = re.match(r"\s*([A-Za-z0-9]+)", text or "")
    return bool(m) and m.group(1) in labels


def label_start_share(rd: RunData, aid: str, pid: str) -> tuple[int, int] | None:
    """(answers whose text starts with a valid label as a whole word, answers) over the protocol's
    unique answers (model, dataset, variant, item), from records.parquet's generations; None when
    they or the labels are not there."""
    df = rd.records
    if df is None or not len(df):
        return None
    mine = df[(df["audit"] == aid) & (df["protocol"] == pid)]
    labels = next((list(ex["label_probs"]) for i in mine.index[:50] if (ex := rd.extras(i)).get("label_probs")), None)
    path = rd.run_dir / RECORDS
    if not labels or not path.is_file():
        return None
    try:
        gen = pd.read_parquet(path, columns=["cell_id", "protocol", "model", "dataset", "variant", "item_id",
                                             "generation", "status"])
    except (OSError, ValueError, KeyError):
        return None
    gen = gen[gen["cell_id"].str.startswith(aid + "/") & (gen["protocol"] == pid) & (gen["status"] == "ok")]
    gen = gen.drop_duplicates(["model", "dataset", "variant", "item_id"])
    if not len(gen):
        return None
    hit = sum(_label_start(str(g), labels) for g in gen["generation"].tolist())
    return hit, int(len(gen))


def argmax_rows(rd: RunData, aid: str, pid: str) -> tuple[int, int, int] | None:
    """(rows whose label is the window's argmax, rows with no valid label in the window, rows)
    of protocol ``pid``; None when the records carry no ``label_source``."""
    df = rd.records
    if df is None or not len(df):
        return None
    rows = df[(df["audit"] == aid) & (df["protocol"] == pid)]
    src = Counter(rd.extras(i).get("label_source") for i in rows.index)
    if not rows.shape[0] or set(src) == {None}:
        return None
    return src.get("window_argmax", 0), src.get("none", 0), int(rows.shape[0])


def embedded_source(fp: dict) -> str | None:
    """'a 4-bit Q4_1 GGUF quantisation of HuggingFaceTB/SmolLM2-135M-Instruct, de-quantised to float32'
    for an embedded model's fingerprint; None for other models."""
    if not isinstance(fp.get("embedded"), dict):
        return None
    info = EMBEDDED_MODELS.get(str(fp.get("model")))
    if not info or not info.get("gguf"):
        return None
    emb = fp["embedded"]
    return (f"a {info['bits']}-bit {info['gguf']} GGUF quantisation of {info['upstream']}, de-quantised to "
            f"{emb.get('dtype') or 'float32'}" + (f" and run in {fp['dtype']}" if fp.get("dtype") and
                                                  fp.get("dtype") != (emb.get("dtype") or "float32") else ""))


__all__ = ["answer_budgets", "answer_budgets_of", "argmax_rows", "budget_text", "embedded_source", "engine_of", "first_window_sources",
           "label_start_share"]
