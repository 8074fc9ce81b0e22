"""Protocol-disclosure tables in the shape of study 001 Table 1.

Columns: Axis | Main setting | Alternative | Held fixed | Contrast. One table per audit, built
from its protocols (grouped by constructor; the main setting is the first protocol of each
constructor in audit order, or a protocol_grid's first configuration), its variants,
evaluators and estimators. An axis appears when the audit's protocols actually differ on it;
"Contrast" names the declared comparison that measures it, else the protocol pair.
"""

from __future__ import annotations

from typing import Any

from auditlang.report.rundata import RunData
from auditlang.report.tables import Table

AXES: dict[str, list[tuple[str, str]]] = {
    "token_prob": [("scored", "Token-prob. scored answer (C2)"), ("readout", "Token readout (C3)"),
                   ("context", "Conditioning context (C4)"), ("normalise", "Token normalisation"),
                   ("window", "Logprob window"), ("top_k", "Window size (top-k)"), ("prefix", "Verbal-prefix template"),
                   ("prefill", "Answer slot")],
    "verbalized": [("provenance", "Verb. answer provenance (C1)"), ("scale", "Verbal scale"),
                   ("phrasing", "Elicitation phrasing"), ("mode", "Elicitation mode"),
                   ("answer_form", "Answer shown to the follow-up"), ("wrong_from", "Source of wrong answers")],
    "p_true": [("provenance", "P(True) answer provenance (C1)"), ("normalise", "P(True) normalisation"),
               ("template", "P(True) template"), ("top_k", "Window size (top-k)")],
    "self_consistency": [("k", "Samples (k)"), ("temperature", "Sampling temperature"), ("reference", "Agreement reference")],
}

# (constructor, axis) -> how a named comparison of that kind measures the axis
CONTRASTS: dict[tuple[str, str], str] = {
    ("protocol_grid", "context"): "g_A vs g_B", ("protocol_grid", "readout"): "readout shift",
    ("protocol_grid", "scored"): "generated vs gold", ("norm_shift", "normalise"): "|ECE_raw - ECE_norm|",
    ("ece_gap", "provenance"): "supplied-answer",
}


def _val(v: Any) -> str:
    return "none" if v is None else str(v)


def _main_protocol(rd: RunData, aid: str, ctor: str, pids: list[str]) -> str:
    for cid, o in rd.spec.of_kind("compare").items():
        if o.value.audit == aid and o.ctor == "protocol_grid" and o.value.configs and o.value.configs[0] in pids:
            return o.value.configs[0]
    if ctor == "token_prob":
        for cid, o in rd.spec.of_kind("compare").items():
            if o.value.audit == aid and o.ctor == "norm_shift" and o.value.norm in pids:
                return o.value.norm
    return pids[0]


def _contrast(rd: RunData, aid: str, axis: str, pids: set[str]) -> str | None:
    for cid, o in rd.spec.of_kind("compare").items():
        if o.value.audit != aid:
            continue
        named = set()
        for f in ("configs", "raw", "norm", "verbal", "token"):
            x = getattr(o.value, f, None)
            named |= set(x) if isinstance(x, list) else ({x} if x else set())
        if (o.ctor, axis) in CONTRASTS and len(named & pids) >= 2:
            return f"{CONTRASTS[(o.ctor, axis)]} ({cid})"
        if len(named & pids) >= 2:
            return f"{o.ctor} ({cid})"
    return None


def disclosure_table(rd: RunData, aid: str) -> Table:
    a = rd.audit(aid)
    t = Table(f"disclosure_{aid}", f"Protocol axes and contrasts, audit {aid}",
              ["Axis", "Main setting", "Alternative", "Held fixed", "Contrast"])
    by_ctor: dict[str, list[str]] = {}
    for p in a.protocols:
        by_ctor.setdefault(rd.protocol_ctor(p), []).append(p)
    mains = []
    for ctor, pids in by_ctor.items():
        axes = AXES.get(ctor, [])
        main = _main_protocol(rd, aid, ctor, pids)
        mains.append(f"{main} ({ctor})")
        mv = rd.spec.get(main).value
        for axis, label in axes:
            alts: dict[str, list[str]] = {}
            for p in pids:
                pv = getattr(rd.spec.get(p).value, axis, None)
                if pv != getattr(mv, axis, None):
                    alts.setdefault(_val(pv), []).append(p)
            if not alts:
                continue
            alt_pids = {p for ps in alts.values() for p in ps}
            fixed = [f"{ax}={_val(getattr(mv, ax, None))}" for ax, _ in axes if ax != axis and all(
                getattr(rd.spec.get(p).value, ax, None) == getattr(mv, ax, None) for p in alt_pids)]
            contrast = _contrast(rd, aid, axis, alt_pids | {main}) or \
                "; ".join(f"{main} vs {p}" for p in sorted(alt_pids))
            t.add(label, f"{_val(getattr(mv, axis, None))} ({main})",
                  "; ".join(f"{v} ({', '.join(ps)})" for v, ps in alts.items()),
                  ", ".join(fixed) + ("; " if fixed else "") + "models, data", contrast)
    if "token_prob" in by_ctor and any(c in by_ctor for c in ("verbalized",)):
        t.add("Confidence signal", f"verbal ({', '.join(by_ctor['verbalized'])})", f"token ({', '.join(by_ctor['token_prob'])})",
              "answers, evaluators, models, data",
              next((f"ECE_gap ({cid})" for cid, o in rd.spec.of_kind("compare").items()
                    if o.value.audit == aid and o.ctor in ("ece_gap", "protocol_grid")), "verbal vs token ECE"))
    for cid, o in rd.spec.of_kind("compare").items():
        if o.value.audit == aid and o.ctor == "protocol_grid" and len(o.value.estimators) >= 2:
            labels = [rd.spec.metrics[m].label for m in o.value.estimators]
            t.add("Estimator", labels[0], "; ".join(labels[1:]), "scored answer, context, readout", f"g_A vs g_C ({cid})")
    if len(a.variants) > 1:
        sp = next((cid for cid, o in rd.spec.of_kind("compare").items()
                   if o.value.audit == aid and o.ctor in ("spread", "size_spread", "robustness", "consistency")), None)
        t.add("Prompt variant", a.variants[0], "; ".join(a.variants[1:]), "protocols, evaluators, models, data",
              f"{rd.spec.get(sp).ctor} ({sp})" if sp else "per-cell table")
    evs = rd.evaluators(aid)
    if len(evs) > 1:
        rep = next((cid for cid, o in rd.spec.of_kind("compare").items()
                    if o.value.audit == aid and o.ctor == "evaluator_repair"), None)
        t.add("Evaluator", evs[0], "; ".join(evs[1:]), "generations, protocols, models, data",
              f"evaluator repair ({rep})" if rep else "same generations re-scored")
    t.notes.append(f"Main setting: {', '.join(mains)}.")
    if not t.rows:
        t.notes.append(f"No protocol axis varies in audit {aid}: every cell uses the main setting.")
    return t


def disclosure_tables(rd: RunData) -> list[Table]:
    return [disclosure_table(rd, aid) for aid in rd.audit_ids()]
