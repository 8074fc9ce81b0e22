"""Protocol-disclosure tables in the shape of study 001 Table 1.

Columns: Axis | Main setting | Alternative | Held fixed | Contrast. One table per audit, built
from its protocols (grouped by constructor; the main setting is the first protocol of each
constructor in audit order, or a protocol_grid's first configuration), its variants,
evaluators and estimators. An axis appears when the audit's protocols actually differ on it;
"Contrast" names the declared comparison that measures it, else the protocol pair. Notes state
the decoding, chat-template options and cross-scored answers (auditlang/report/decoding.py,
cross_scoring.py).
"""

from __future__ import annotations

from typing import Any

from auditlang.report.rundata import RunData
from auditlang.report import facts as F
from auditlang.report import runfacts as R
from auditlang.report.tables import Table
from auditlang.report.cross_scoring import cross_uses
from auditlang.report.decoding import chat_template_options, decoding_of, kwargs_text
from auditlang.report.paths import data_source



def _val(v: Any) -> str:
    return "none" if v is None else str(v)


def applicable(v: Any, axis: str) -> bool:
    """Whether ``axis`` is a setting protocol value ``v`` actually uses (its schema declares it)."""
    return v.axis_applies(axis)


def _evaluator_shown(rd: RunData, eid: str) -> str:
    """An evaluator with its label token form where it has one (two loglik evaluators may differ only there)."""
    if eid not in rd.spec.objects or not hasattr(rd.spec.get(eid).value, "label_form"):
        return eid
    return f"{eid} (label_form={rd.spec.get(eid).value.label_form})"


def _compares(rd: RunData, aid: str) -> list[tuple[str, Any]]:
    """(compare id, its value) of the audit's comparisons, in declaration order."""
    return [(cid, o.value) for cid, o in rd.spec.of_kind("compare").items() if aid in o.value.all_audits()]


def _main_protocol(rd: RunData, aid: str, pids: list[str]) -> str:
    """The main setting of a protocol family: the one a comparison declares main (``main_protocol``),
    else the first in audit order."""
    return next((m for _, v in _compares(rd, aid) if (m := v.main_protocol()) in pids), pids[0])


def _measured_by(rd: RunData, aid: str, axis: str) -> str | None:
    """``<how> (<compare id>)`` of the first comparison that declares it measures ``axis`` (``DISCLOSES``)."""
    return next((f"{v.DISCLOSES[axis]} ({cid})" for cid, v in _compares(rd, aid) if axis in v.DISCLOSES), None)


def _orient(rd: RunData, aid: str, p: str, q: str, axes: list[str]) -> tuple[str, str, str | None]:
    """(main, alternative, contrast) for two protocols, following the comparison that names both."""
    order = list(rd.audit(aid).protocols)
    for cid, o in rd.spec.of_kind("compare").items():
        got = o.value.contrast(p, q, axes, order) if o.value.audit == aid else None
        if got is not None:  # the comparison declares that it contrasts them, and how
            main, alt, how = got
            return main, alt, f"{how or o.ctor} ({cid})"
    main, alt = sorted((p, q), key=order.index)
    return main, alt, None


def disclosure_table(rd: RunData, aid: str) -> Table:
    a = rd.audit(aid)
    t = Table(f"disclosure_{aid}", f"Protocol axes and contrasts, audit {aid}",
              ["Axis", "Main setting", "Alternative", "Held fixed", "Contrast"])
    by_ctor: dict[str, list[str]] = {}
    for p in a.protocols:
        by_ctor.setdefault(rd.protocol_ctor(p), []).append(p)
    mains = []
    for ctor, pids in by_ctor.items():
        axes = list(type(rd.spec.get(pids[0]).value).AXES)  # the constructor's declared axes
        parts = type(rd.spec.get(pids[0]).value).AXIS_PARTS
        labels = dict(axes)
        main = _main_protocol(rd, aid, pids)
        mains.append(f"{main} ({ctor})")

        def diff(p: str, q: str, axes: list[tuple[str, str]] = axes, parts: dict[str, str] = parts) -> list[str]:
            pv, qv = rd.spec.get(p).value, rd.spec.get(q).value
            out = [ax for ax, _ in axes if pv.axis_compared(qv, ax) and getattr(pv, ax, None) != getattr(qv, ax, None)]
            # an axis that changes with the one it is part of is disclosed with it
            return [ax for ax in out if parts.get(ax) not in out]

        pairs = [(p, q) for i, p in enumerate(pids) for q in pids[i + 1:] if diff(p, q)]
        single = [(p, q) for p, q in pairs if len(diff(p, q)) == 1]
        covered = {x for pq in single for x in pq}
        joint = []
        for x in pids:  # a protocol with no single-axis partner is disclosed against the main setting
            if x in covered or len(pids) < 2:
                continue
            partner = main if x != main else next(q for q in pids if q != main)
            pq = tuple(sorted((partner, x), key=pids.index))
            if pq not in joint and pq not in single and diff(*pq):
                joint.append(pq)
        rows = single + joint
        for p, q in rows:
            dax = diff(p, q)
            if not dax:
                continue
            m_id, alt_id, contrast = _orient(rd, aid, p, q, dax)
            mv, av = rd.spec.get(m_id).value, rd.spec.get(alt_id).value
            fixed = [f"{ax}={_val(getattr(mv, ax, None))}" for ax, _ in axes
                     if ax not in dax and parts.get(ax) not in dax and applicable(mv, ax)]
            t.state([f"spec:{x}.{ax}" for x in (m_id, alt_id) for ax in dax] + [f"spec:{m_id}.{ax}" for ax, _ in axes
                     if ax not in dax and parts.get(ax) not in dax and applicable(mv, ax)],
                    " + ".join(labels[ax] for ax in dax),
                  ", ".join(mv.axis_text(ax) for ax in dax) + f" ({m_id})",
                  ", ".join(av.axis_text(ax) for ax in dax) + f" ({alt_id})",
                  ", ".join(fixed) + ("; " if fixed else "") + "models, data",
                  contrast or f"{m_id} vs {alt_id}")
    signals = _signals(rd, aid, by_ctor)
    if len(signals) > 1:  # the main signal is the first protocol family in audit order, as the note says
        (main_sig, main_p), rest = signals[0], signals[1:]
        t.state([f"protocol:{p}:signal" for _, ps in signals for p in ps], "Confidence signal",
                f"{main_sig} ({', '.join(main_p)})",
              "; ".join(f"{sig} ({', '.join(ps)})" for sig, ps in rest), "answers, evaluators, models, data",
              _measured_by(rd, aid, "signal") or "per-cell table")
    if len(a.models) > 1:
        t.state([f"spec:{aid}.models"], "Model", a.models[0], "; ".join(a.models[1:]), _models_held(rd, aid),
              _measured_by(rd, aid, "model") or "per-cell table")
    for cid, v in _compares(rd, aid):
        if "estimator" in v.DISCLOSES and len(v.estimators_compared()) >= 2:
            labels = [rd.spec.metrics[m].label for m in v.estimators_compared()]
            t.add("Estimator", labels[0], "; ".join(labels[1:]), "scored answer, context, readout",
                  f"{v.DISCLOSES['estimator']} ({cid})")
    if len(a.variants) > 1:
        t.add("Prompt variant", a.variants[0], "; ".join(a.variants[1:]), "protocols, evaluators, models, data",
              _measured_by(rd, aid, "variant") or "per-cell table")
    evs = rd.evaluators(aid)
    if len(evs) > 1:
        shown = [_evaluator_shown(rd, e) for e in evs]
        t.add("Evaluator", shown[0], "; ".join(shown[1:]), "generations, protocols, models, data",
              _measured_by(rd, aid, "evaluator") or "same generations re-scored")
    _decoding_rows_and_notes(rd, aid, t)
    sources = [x for d in rd.audit(aid).datasets if (x := data_source(d, rd.plan.datasets.get(d, {})))]
    if sources:
        t.notes.append("Data: " + "; ".join(sources) + ".")
    t.notes.append(_main_note(mains, signals))
    t.notes.append(_errors_note(rd, aid))
    if not t.rows:
        t.notes.append(f"No protocol axis varies in audit {aid}: every cell uses the main setting.")
    return t


def _main_note(mains: list[str], signals: list[tuple[str, list[str]]]) -> str:
    """The note naming the main settings: one protocol family has one; several have one each, and the
    Confidence signal row's main is the signal of the audit's first protocol (``_signals``' order)."""
    if len(mains) < 2:
        return f"Main setting: {', '.join(mains)}."
    note = f"Main setting of each protocol family: {', '.join(mains)}"
    if len(signals) > 1:
        sig, ps = signals[0]
        note += f"; the main confidence signal is {sig} ({', '.join(ps)}), the signal of the audit's first protocol"
    return note + "."


def _models_held(rd: RunData, aid: str) -> str:
    """What the Model row holds fixed: the prompts, unless the models were given them in different
    forms (chat messages through a chat template for some, plain text for others; planned requests)."""
    chat = R.chat_models(rd, aid)
    if len(set(chat.values())) < 2:
        return "prompts, protocols, evaluators, data"
    yes, no = [m for m, c in chat.items() if c], [m for m, c in chat.items() if not c]
    return (f"prompt templates (rendered through the chat template for {', '.join(yes)}, as plain text for "
            f"{', '.join(no)}), protocols, evaluators, data")


def claims(tables: list[Table]) -> list[dict]:
    """The disclosure tables' rows and notes with the facts each is built from (report/claims.json)."""
    out = []
    for t in tables:
        for i, row in enumerate(t.rows):
            out.append({"file": "disclosure", "where": t.title, "kind": "row", "text": " | ".join(str(c) for c in row),
                        "facts": t.row_facts.get(i) or [f"disclosure:{row[0]}"]})
        out += [{"file": "disclosure", "where": t.title, "kind": "note", "text": n, "facts": ["disclosure:note"]}
                for n in t.all_notes()]
    return out


def _signals(rd: RunData, aid: str, by_ctor: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """[(confidence signal, protocols)] in audit order, the signal as each program declares it
    (its ``signal`` fact; UNSPECIFIED where it declares none)."""
    out: dict[str, list[str]] = {}
    for pids in by_ctor.values():
        for p in pids:
            pf = F.protocol_facts(rd, aid, p)
            sig = pf.text("signal", forms=False) or f"protocol {pf.ctor} (declares no signal)"
            out.setdefault(sig, []).append(p)
    return list(out.items())


def _errors_note(rd: RunData, aid: str) -> str:
    """Request errors of the audit's cells: items missing from the metrics, never scored as wrong."""
    per_cell = rd.errors_by_cell(aid)
    if not per_cell:
        return "Request errors: 0 request errors (every item of every cell answered)."
    return ("Request errors (items missing from the metrics, not scored): "
            + "; ".join(f"{cid}: n_error {n}, n answered {ok}" for cid, (n, ok, _) in per_cell.items()) + ".")


def _decoding_rows_and_notes(rd: RunData, aid: str, t: Table) -> None:
    """Decoding of answers and protocol calls, chat-template options and cross-scored answers, as
    notes under the table (an "Answer decoding" row when the variants decode differently)."""

    a = rd.audit(aid)

    # a setting left at its default is the checklist's UNSPECIFIED item (its summary), not a mark
    # in this paper table (issue 34 item 5)
    decs = {v: decoding_of(rd.spec.get(v)) for v in a.variants}
    if len(set(decs.values())) > 1:
        main = a.variants[0]
        t.add("Answer decoding", f"{decs[main].text()} ({main})",
              "; ".join(f"{decs[v].text()} ({v})" for v in a.variants[1:] if decs[v] != decs[main]),
              "prompts, protocols, evaluators, models, data", "per-cell table")
        t.notes.append("Answer decoding: " + "; ".join(f"{v}: {d.text()}" for v, d in decs.items())
                       + ".")
    elif decs:
        d = next(iter(decs.values()))
        t.notes.append(f"Answer decoding: {d.text()} under every variant.")
    own = [(p, decoding_of(rd.spec.get(p))) for p in a.protocols]
    own = [(p, d) for p, d in own if d is not None]
    if own:  # protocols that decode alike share one statement
        alike: dict[str, list[str]] = {}
        for p, d in own:
            alike.setdefault(d.text(), []).append(p)
        t.notes.append("Protocol calls: " + "; ".join(f"{', '.join(ps)}: {text}" for text, ps in alike.items()) + ".")
    chat = {m: kw for m in a.models if (kw := chat_template_options(rd, m))}
    if chat:
        t.notes.append("Chat-template options: " + "; ".join(f"{m}: {kwargs_text(kw)}" for m, kw in chat.items())
                       + (f"; not set for {', '.join(m for m in a.models if m not in chat)}"
                          if len(chat) < len(a.models) else "") + ".")
    for u in cross_uses(rd, aid):
        if u.note:
            t.notes.append("Cross-scored answers: " + u.note)


def disclosure_tables(rd: RunData) -> list[Table]:
    return [disclosure_table(rd, aid) for aid in rd.audit_ids()]
