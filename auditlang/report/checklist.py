"""The reporting checklist, generated from spec + plan + run (never hand-filled).

Study 001 section 4.3 asks every calibration comparison to disclose C1 elicitation provenance,
C2 the scored answer, C3 the token-probability readout and C4 the conditioning context; study
000 adds the ECE estimator and binning, token normalisation and top-k coverage, the evaluator
rule, the verbal parse rate with its threshold, the elicitation phrasings and the variant set;
study 003 the accuracy gap between compared models; every study's decoding (002 A.4 greedy, 003
App. D.3 temperature 1.0, 004 App. A top_k 50), 003's chat-template options and, for comparisons
built on the cross stage, whose answers each unit scored. The checklist states each item per group of
cells (audit, then protocol), flags whatever the spec left at a default as UNSPECIFIED and adds
WARNING lines (e.g. a single elicitation phrasing).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from dataclasses import dataclass, field

import numpy as np

from auditlang.core.version import __version__
from auditlang.core.registry import REGISTRY
from auditlang.report import describe as D
from auditlang.report.comparisons import Comparison, vpr_summary
from auditlang.report.comparisons.verbal import verbal_protocols
from auditlang.report.comparisons.common import is_calibration
from auditlang.report import runfacts as R
from auditlang.report import facts as F
from auditlang.report.latex import VERBATIM, breakable, verbatim_safe
from auditlang.report.paths import data_file
from auditlang.report.safe_text import fence_for, md_line
from auditlang.report.rundata import JOURNAL, RECORDS, RunData
from auditlang.plan.limit import Limit
from auditlang.resolve.overrides import override_sentence
from auditlang.resolve.models import declared_model
from auditlang.resolve.spec import MetricRef
from auditlang.report.latex import document
from auditlang.store.journal import Journal
from auditlang.report.decoding import all_models, chat_template_options, is_chat, kwargs_text
from auditlang.score.cellmetrics import audit_bootstrap
from auditlang.score.cellmetrics import DEFAULT_METRICS
from auditlang.metrics.registry import validate_params
from auditlang.report.decoding import decoding_flags, decoding_of, planned_decoding, planned_text
from auditlang.report.cross_scoring import cross_uses
from auditlang.resolve.templates import compile_obj
from auditlang.prompts.render import TemplateError
from auditlang.report.comparisons.normshift import _coverage_flag
from auditlang.protocols import program_for

ITEMS: dict[str, str] = {
    "C1": "C1 elicitation provenance",
    "C2": "C2 scored answer",
    "C3": "C3 token-probability readout",
    "C4": "C4 conditioning context",
    "ece": "ECE estimator and binning",
    "norm": "Token-confidence normalisation and top-k label coverage",
    "evaluator": "Evaluator rule",
    "degenerate": "Degenerate answer sets (one prediction for every item, option lists written back)",
    "storage": "Raw generations storage",
    "access": "Network endpoints contacted and secrets read",
    "vpr": "Verbal parse rate, inclusion threshold and excluded cells",
    "phrasings": "Elicitation phrasings",
    "variants": "Variant set and spread",
    "accgap": "Accuracy gap and accuracy-controlled views",
    "templates": "Prompt templates with hashes",
    "seeds": "Seeds and sample indices",
    "engines": "Engine, version, dtype and model revision",
    "chat": "Chat-template options",
    "sampling": "Decoding and sampling settings (temperature, top_p, sampling top-k)",
    "cross": "Answers scored by another unit (cross stage)",
    "plugins": "Components from installed plugins",
    "fit": "Fitted on the dev split (thresholds and their correction, scalers, classifiers)",
    "errors": "Request errors (items missing from the metrics)",
}


@dataclass
class Entry:
    key: str
    lines: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (caption, verbatim text)
    table: tuple[list[str], list[list[str]]] | None = None  # per-cell detail: (columns, rows), first column X
    facts: dict[str, list[str]] = field(default_factory=dict)  # line or flag -> the facts it states (claims.json)

    def state(self, text: str, facts: list[str], flag: bool = False) -> None:
        """Add a line (or a flag) built from the named facts."""
        if flag:
            self.flag(text)
        else:
            self.lines.append(text)
        self.facts.setdefault(text, list(facts))

    @property
    def title(self) -> str:
        return ITEMS[self.key]

    def flag(self, text: str | None) -> None:
        if text and text not in self.flags:
            self.flags.append(text)


@dataclass
class Group:
    title: str
    entries: list[Entry] = field(default_factory=list)


@dataclass
class Checklist:
    title: str
    groups: list[Group] = field(default_factory=list)

    def flags(self) -> list[str]:
        return [f for g in self.groups for e in g.entries for f in e.flags]

    def claims(self) -> list[dict]:
        """Every statement of the checklist with the facts it was built from (report/claims.json): a
        protocol item's lines name the protocol's declared facts (``protocol:<id>:<key>``) and the run
        facts (``run:<name>``); every other line its checklist item (``checklist:<item>``)."""
        out = []
        for g in self.groups:
            for e in g.entries:
                for kind, texts in (("line", e.lines), ("flag", e.flags)):
                    out += [{"file": "checklist", "where": f"{g.title} > {e.title}", "kind": kind, "text": t,
                             "facts": e.facts.get(t) or [f"checklist:{e.key}"]} for t in texts]
        return out

    def summary_groups(self) -> list[tuple[str, list[tuple[str, list[str]]]]]:
        """[(kind, [(group > item, [flag text without its kind prefix])])]: UNSPECIFIED, then WARNING, then others."""
        _, flagged = self.summary()
        out: list[tuple[str, list[tuple[str, list[str]]]]] = []
        for kind in ("UNSPECIFIED", "WARNING", ""):
            by: dict[str, list[str]] = {}
            for where, f in flagged:
                k = next((x for x in ("UNSPECIFIED", "WARNING") if f.startswith(x)), "")
                if k == kind:
                    by.setdefault(where, []).append(f[len(kind) + 1:].strip() if kind else f)
            if by:
                out.append((kind or "other", list(by.items())))
        return out

    def summary(self) -> tuple[str, list[tuple[str, str]]]:
        """(counts line, every UNSPECIFIED / WARNING flag with the group and item that raise it)."""
        flagged = [(f"{g.title} > {e.title}", f) for g in self.groups for e in g.entries for f in e.flags]
        n_u = sum(1 for _, f in flagged if f.startswith("UNSPECIFIED"))
        n_w = sum(1 for _, f in flagged if f.startswith("WARNING"))
        n_items = sum(len(g.entries) for g in self.groups)
        return (f"{n_items} items in {len(self.groups)} groups; {n_u} UNSPECIFIED (a choice left to a default), "
                f"{n_w} WARNING (a design weaker than the studies recommend), {len(flagged) - n_u - n_w} other flags. "
                "Every flag is listed here; the groups below state each item in full.", flagged)

    # ------------------------------------------------------------ renderers
    def to_markdown(self) -> str:
        out = [f"# {self.title}", "", "Generated from the spec, the plan and the run; every UNSPECIFIED line is a "
               "choice the spec left to a default.", ""]
        counts, _ = self.summary()
        out += ["## Summary", "", counts, ""]
        for kind, items in self.summary_groups():
            out += [f"**{kind}**", ""] + [md_line(f"- {where}: " + " · ".join(fs)) for where, fs in items] + [""]
        for g in self.groups:
            out += [f"## {g.title}", ""]
            for e in g.entries:
                out += [f"### {e.title}", ""]
                out += [f"- {md_line(ln)}" for ln in e.lines]  # quoted text cannot start a line (safe_text.py)
                out += [f"- **{md_line(fl)}**" for fl in e.flags]
                if e.table:
                    cols, rows = e.table
                    out += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                    out += ["| " + " | ".join(md_line(c).replace("|", "\\|") for c in r) + " |" for r in rows]
                for cap, text in e.blocks:
                    fence = fence_for(text)  # longer than any backtick run inside: the text cannot close it
                    out += ["", f"{md_line(cap)}:", "", fence + "text", text, fence]
                out.append("")
        return "\n".join(out).rstrip() + "\n"

    def to_latex_body(self) -> str:
        """Sections and itemized lines that fit any article column: identifiers get break points,
        hashes are shortened with the full value in a footnote, verbatim blocks wrap (fvextra); set
        ragged-right in a group (a checklist of identifiers justifies badly), with a math bullet (the
        text bullet is a TS1 glyph: a bitmap Type 3 font where cm-super is not installed)."""
        out = ["\\begingroup\\raggedright\\emergencystretch=2em\\renewcommand{\\labelitemi}{\\ensuremath{\\bullet}}"]
        counts, _ = self.summary()
        out += ["\\section*{Summary}", breakable(counts) + "\\par", "{\\footnotesize"]
        for kind, items in self.summary_groups():
            out += [f"\\paragraph*{{{kind}}}", "\\begin{itemize}\\setlength{\\itemsep}{0pt}\\setlength{\\parsep}{0pt}"]
            out += [f"\\item \\textit{{{breakable(where)}}}: " + " $\\cdot$ ".join(breakable(f, footnote_hashes=True) for f in fs)
                    for where, fs in items]
            out.append("\\end{itemize}")
        out += ["\\par}", "\\clearpage"]
        for g in self.groups:
            out.append(f"\\section*{{{breakable(g.title)}}}")
            for e in g.entries:
                out.append(f"\\subsection*{{{breakable(e.title)}}}")
                if e.lines or e.flags:
                    out.append("\\begin{itemize}")
                    out += [f"\\item {breakable(ln, footnote_hashes=True)}" for ln in e.lines]
                    out += [f"\\item \\textbf{{{breakable(fl, footnote_hashes=True)}}}" for fl in e.flags]
                    out.append("\\end{itemize}")
                if e.table:
                    out += _latex_table(*e.table)
                for cap, text in e.blocks:
                    out += [f"\\noindent {breakable(cap, footnote_hashes=True)}:",
                            VERBATIM,
                            verbatim_safe(text), "\\end{Verbatim}"]
        out.append("\\par\\endgroup")
        return "\n".join(out) + "\n"

    def to_latex(self) -> str:

        return document(self.to_latex_body(), self.title)

    def to_html(self) -> str:
        counts, flagged = self.summary()
        out = [f"<h3>Summary</h3><p>{html.escape(counts)}</p><ul>"]
        out += [f'<li class="flag">{html.escape(f)} <small>({html.escape(where)})</small></li>' for where, f in flagged]
        out.append("</ul>")
        for g in self.groups:
            out.append(f"<h3>{html.escape(g.title)}</h3>")
            for e in g.entries:
                out.append(f'<div class="item" data-key="{e.key}"><h4>{html.escape(e.title)}</h4><ul>')
                out += [f"<li>{html.escape(ln)}</li>" for ln in e.lines]
                out += [f'<li class="flag">{html.escape(fl)}</li>' for fl in e.flags]
                out.append("</ul>")
                if e.table:
                    cols, rows = e.table
                    out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr></thead><tbody>"
                               + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
                               + "</tbody></table>")
                for cap, text in e.blocks:
                    out.append(f"<p>{html.escape(cap)}:</p><pre>{html.escape(text)}</pre>")
                out.append("</div>")
        return "\n".join(out)


TABLE_ROWS = 30  # rows per tabular (a tabular does not break across pages)


def _latex_table(cols: list[str], rows: list[list[str]]) -> list[str]:
    """Per-cell detail as booktabs tabulars of the column width, 30 rows each. Every column wraps
    (a status or "fitted on ..." text is as long as a cell id): the first column, the cell id, gets
    the widest share (tabularx ``\\hsize`` weights summing to the number of columns)."""
    n = len(cols)
    first, rest = 1 + 0.3 * (n - 1), 0.7
    col = "\\hsize={:.2f}\\hsize\\raggedright\\arraybackslash"
    spec = "@{}>{" + col.format(first) + "}X" + ("".join(">{" + col.format(rest) + "}X" for _ in range(n - 1))) + "@{}"
    out = []
    for start in range(0, max(len(rows), 1), TABLE_ROWS):
        out += ["\\par\\noindent{\\footnotesize", f"\\begin{{tabularx}}{{\\linewidth}}{{{spec}}}", "\\toprule",
                " & ".join(breakable(c) for c in cols) + " \\\\", "\\midrule"]
        out += [" & ".join(breakable(c) for c in r) + " \\\\" for r in rows[start:start + TABLE_ROWS]]
        out += ["\\bottomrule", "\\end{tabularx}}\\par\\smallskip"]
    return out


# ============================================================== building


def build_checklist(rd: RunData, comparisons: list[Comparison]) -> Checklist:
    cl = Checklist(f"Reporting checklist: {rd.spec.entry.name}")
    cl.groups.append(Group("Run", [_errors(rd), _storage(rd), _engines(rd), _access(rd), _chat(rd), _seeds(rd),
                                   _plugins(rd)]))
    for aid in rd.audit_ids():
        cl.groups.append(Group(f"Audit {aid}: shared by all cells", [
            _evaluators(rd, aid), _degenerate(rd, aid), _ece(rd, aid), _variants(rd, aid), _answer_sampling(rd, aid), _phrasings(rd, aid),
            _vpr(rd, aid), _accgap(rd, aid, comparisons), _cross(rd, aid, comparisons), _templates(rd, aid)]))
        for pid in rd.audit(aid).protocols:
            n_cells = sum(1 for c in rd.plan.cells if c.audit == aid and c.protocol == pid)
            ctor = rd.protocol_ctor(pid)
            cl.groups.append(Group(f"Audit {aid}, cells of protocol {pid} ({ctor}, {n_cells} cells)",
                                   _protocol_entries(rd, aid, pid) + [_protocol_sampling(rd, aid, pid),
                                                                      _dev_fit(rd, aid, pid)]))
    return cl


# -------------------------------------------------------------- run-level items


def _errors(rd: RunData) -> Entry:
    """Items missing because a request failed in the engine, per cell (never scored as wrong)."""
    e = Entry("errors")
    per_cell = rd.errors_by_cell()
    if not per_cell:
        e.lines.append("0 request errors: every item of every cell was answered")
        return e
    total = sum(n for n, _, _ in per_cell.values())
    e.lines.append(f"{total} items in {len(per_cell)} cells are missing because a request failed in the engine; they "
                   "are not scored (never counted as incorrect) and every metric uses the answered items only")
    for cid, (n_err, n_ok, first) in per_cell.items():
        e.lines.append(f"{cid}: n_error {n_err}, n answered {n_ok}; first error: {first}")
    e.flag(f"{D.WARNING}: {total} items are missing because their requests failed; rerun `auditc run` on this run "
           "directory to retry exactly those requests")
    return e


def _storage(rd: RunData) -> Entry:
    e = Entry("storage")
    e.lines.append("Files are named relative to the run directory; data files by name and sha256")
    rec = rd.run_dir / RECORDS
    mirror = rec.with_suffix(".jsonl")
    jr = rd.run_dir / JOURNAL
    if rec.exists():
        e.lines.append(f"Scored records (one row per cell x item, with the raw generation text): {RECORDS} "
                       f"({len(rd.records) + len(rd.failed)} rows, {len(rd.failed)} of them items missing for a failed "
                       f"request, column status); JSONL mirror: {mirror.name}{'' if mirror.exists() else ' (absent)'}")
    else:
        e.lines.append(f"not computable: no records table ({RECORDS}) in the run directory")
    if jr.exists():

        with Journal(rd.run_dir) as j:
            n = j.counts()
        e.lines.append(f"Every raw engine request and result (generations, logprob windows), keyed by request id and "
                       f"engine fingerprint: {JOURNAL} ({n.results} results, {n.errors} errors)")
        last = _last_run_line(rd.run_info)
        if last:
            e.lines.append(last)
    else:
        e.lines.append(f"not computable: no request journal ({JOURNAL}) in the run directory; raw generations beyond the records are not stored")
    return e


def _param_text(o) -> str:
    """The parameters a spec object sets, as the spec wrote them (``index=1``), or "its defaults"."""
    written = [f"{k}={getattr(o.value, k)!r}" for k in sorted(D.explicit(o)) if k != "seed"]
    return ", ".join(written) if written else "its default parameters"


def _last_run_line(info: dict) -> str:
    """What the last ``auditc run`` of this directory did with the requests (run.json ``last_run``):
    executed, found already stored, and of those how many were copied from the response cache."""
    t = info.get("last_run") or {}
    if not t:
        return ""
    text = f"Last run: {t.get('executed', 0)} requests executed, {t.get('cached', 0)} already stored"
    if t.get("from_cache"):
        text += (f" ({t['from_cache']} of them copied into {JOURNAL} from the response cache, `--cache`: "
                 "results an earlier run computed under the same engine fingerprint)")
    return text + f", {t.get('errors', 0)} errors"


def _executor_line(ex: dict) -> str:
    """Where the run executed (run.json ``executor``, written by the Ray driver)."""
    if ex.get("name") != "ray":
        return f"Executor: {ex.get('name')} (one process)"
    workers = ", ".join(f"{m} {n}" for m, n in (ex.get("workers") or {}).items())
    gpus = ", ".join(f"{m} {g:g}" for m, g in (ex.get("gpus") or {}).items())
    return (f"Executor: ray (Ray {ex.get('ray_version')}; {ex.get('units')} units: each model's items in "
            f"{ex.get('shards')} shards; workers per model {workers}; GPUs per worker {gpus})")


def _access(rd: RunData) -> Entry:
    """Hosts contacted and secrets read, and who allowed each (run.json ``access``; docs/security.md)."""
    e = Entry("access")
    access = rd.run_info.get("access")
    if access is None:
        e.lines.append("not recorded (run written before access was recorded)")
    for a in access or []:
        key = "Hub token" if a.get("kind", "model") != "model" else "API key"
        sec = ("" if not a["secret"] else f"; {key} read from ${a['secret']} (allowed by {a['secret_allowed_by']})"
               if a["secret_allowed_by"] else f"; no {key} sent (${a['secret']} not allowed or not set)")
        e.lines.append(f"{a.get('kind', 'model')} {a['model']}: {a['url']} (host {a['host']}, allowed by "
                       f"{a['host_allowed_by']})" + sec)
    if access == []:
        e.lines.append("no network endpoint contacted and no secret read (local engines only)")
    return e


def _plugins(rd: RunData) -> Entry:
    """Every component the spec uses that an installed plugin registered (docs/plugins.md),
    with the plugin's distribution and version."""
    e = Entry("plugins")
    kinds = {"protocol": "protocol", "evaluator": "evaluator", "perturbation": "perturbation", "compare": "comparison"}
    used = {(kinds[o.kind], o.ctor) for o in rd.spec.objects.values() if o.kind in kinds}
    used |= {("metric", m.name) for m in rd.spec.metrics.values()}
    for kind, name in sorted(used):
        entry = REGISTRY.find(kind, name)
        if entry is not None and entry.meta.get("plugin"):
            e.lines.append(f"{kind} `{name}`: from plugin {entry.meta['plugin']}")
    if not e.lines:
        e.lines.append("none: every component this spec uses is built into auditlang "
                       + (f"{__version__}" if __version__ else ""))
    loaded = ", ".join(f"{d} {v}" for d, v in sorted(REGISTRY.plugins.items()))
    if loaded:
        e.lines.append(f"Plugins installed when the report was written: {loaded}")
    return e


def _engines(rd: RunData) -> Entry:
    e = Entry("engines")
    e.lines.append(_executor_line(rd.run_info.get("executor") or {"name": "local"}))
    models = list(dict.fromkeys(m for aid in rd.audit_ids() for m in rd.audit(aid).models))
    for mid in models:
        o = rd.spec.get(mid)
        v = o.value
        engine, path, _ = declared_model(rd.spec, mid)
        fp = rd.fingerprints.get(mid)
        written = (f"{o.ctor}('{path}', dtype={v.dtype}" + (f", revision='{v.revision}'" if v.revision else "") + ")"
                   + (f" on engine {engine}" if o.ctor != engine else ""))
        declared = f"model {mid}: declared {written}"
        swap = getattr(rd.spec, "model_swaps", {}).get(mid)
        if swap:
            declared = (f"model {mid}: swapped on the command line (--swap-model {mid}={swap}; the spec file declares "
                        f"another model): {written}")
        overrides = [override_sentence(rec) for rec in getattr(rd.spec, "model_overrides", None) or [] if rec["model"] == mid]
        if overrides:
            declared += " (options overridden on the command line, below)"
        if fp is None:
            e.lines.append(declared + "; not computable: no engine fingerprint recorded for this model in journal.sqlite")
        else:
            versions = ", ".join(f"{k} {fp[k]}" for k in ("vllm", "transformers", "torch", "version", "llama_cpp")
                                 if fp.get(k))
            e.lines.append(f"{declared}; ran on engine {fp.get('engine')!r} ({versions or 'version not recorded'}), "
                           f"dtype {fp.get('dtype')!r}, " + (f"revision {fp['revision']!r}, " if fp.get("revision") else "")
                           + f"device {fp.get('device')!r}, "
                           f"weights sha256 {fp.get('weights_sha256')!r}, fingerprint {rd.fingerprint_hashes.get(mid)}"
                           + (f"; served at {fp['base_url']}" if fp.get("base_url") else "")
                           + _vllm_settings(fp) + _hf_settings(fp) + _embedded(fp))
        e.lines += overrides
        if v.revision is None and not (fp and fp.get("revision")):
            e.flag(f"{D.UNSPECIFIED}: model '{mid}' has no revision (neither in the spec nor in the engine fingerprint); "
                   "the weights are identified only by name" + (" and their sha256" if fp and fp.get("weights_sha256") else ""))
        elif v.revision is None:
            e.flag(f"{D.UNSPECIFIED}: model '{mid}' does not set revision in the spec; "
                   f"the engine resolved {fp.get('revision')!r}")
        if v.dtype == "auto":
            e.flag(f"{D.UNSPECIFIED}: model '{mid}' does not set dtype (auto); "
                   f"the engine chose {fp.get('dtype')!r}" if fp else f"{D.UNSPECIFIED}: model '{mid}' does not set dtype (auto)")
    return e


def _hf_settings(fp: dict) -> str:
    """hf settings that change how scores are computed (``compile=true``), as fingerprinted."""
    if fp.get("engine") != "hf" or not fp.get("compile"):
        return ""
    return (f"; hf scoring passes compiled ({fp['compile']}), rows padded on the "
            f"{fp.get('scoring_padding', 'left')}" + (" without an attention mask" if fp.get("scoring_padding") == "right" else ""))


def _vllm_settings(fp: dict) -> str:
    """vLLM settings that change how requests are computed, as the engine fingerprint recorded them."""
    if fp.get("engine") != "vllm":
        return ""
    parts = [f"model runner {fp['model_runner']}" if fp.get("model_runner") else None,
             f"enforce_eager {fp['enforce_eager']}" if "enforce_eager" in fp else None,
             ("prefix caching " + ("on (prompt prefills shared between requests)" if fp["prefix_caching"] else "off"))
             if "prefix_caching" in fp else None]
    return "; vLLM " + ", ".join(p for p in parts if p) if any(parts) else ""


def _embedded(fp: dict) -> str:
    emb = fp.get("embedded")
    if not isinstance(emb, dict):
        return ""
    src = R.embedded_source(fp)
    return ("; embedded package " + ", ".join(f"{k} {v}" for k, v in emb.items() if v is not None)
            + (f"; weights: {src}" if src else ""))


def _chat(rd: RunData) -> Entry:
    """Chat-template variables per model (003 App. C: Qwen3 enable_thinking, GPT-OSS reasoning_effort),
    as passed to the engine, and what the engine fingerprint recorded."""

    e = Entry("chat")
    for mid in all_models(rd):
        kw = chat_template_options(rd, mid)
        fp = rd.fingerprints.get(mid)
        if not is_chat(rd, mid):
            e.lines.append(f"model {mid}: not applicable: base model (raw prompts, no chat template)"
                           + (f"; the spec sets {kwargs_text(kw)}, which no chat template reads" if kw else ""))
            continue
        if not kw:
            e.lines.append(f"model {mid}: no chat-template options set (enable_thinking, reasoning_effort not passed): "
                           "the chat template's own defaults apply")
            continue
        line = f"model {mid}: chat-template options {kwargs_text(kw)} (passed to the engine as chat_template_kwargs)"
        if fp is None:
            line += "; not computable: no engine fingerprint recorded to confirm them"
        elif fp.get("chat_template_kwargs"):
            line += f"; the engine fingerprint records {kwargs_text(fp['chat_template_kwargs'])}"
            if dict(fp["chat_template_kwargs"]) != kw:
                e.flag(f"{D.WARNING}: model '{mid}': the engine fingerprint records chat-template options "
                       f"{kwargs_text(fp['chat_template_kwargs'])}, the spec sets {kwargs_text(kw)}")
        else:
            e.flag(f"{D.WARNING}: model '{mid}' sets chat-template options ({kwargs_text(kw)}) but its engine "
                   f"fingerprint ({fp.get('engine')!r}) records none; the engine may not have applied them")
        e.lines.append(line)
    return e


def _hub_identity(e: Entry, o, info: dict) -> None:
    """A Hub split: id, config, split, the revision pinned, the commit and hashes of the rows read;
    or, when its ``fallback=`` file was read instead, that file, its sha256 and why."""
    v = o.value
    head = (f"dataset {o.id}: Hugging Face Hub {v.id_!r}" + (f", config {v.config!r}" if v.config else "")
            + f", split {v.split!r}, revision {v.revision or 'not pinned'}")
    if info.get("source") == "fallback":
        e.lines.append(f"{head}; NOT READ: not available offline ({info.get('hub_unavailable')}); the fallback file "
                       f"{info.get('fallback_file')} (sha256 {info.get('sha256')}) was read instead, with its own "
                       "field mapping and the same sampling")
        e.flag(f"{D.WARNING}: dataset '{o.id}' was read from its fallback file {info.get('fallback_file')}, not from "
               f"Hub dataset {v.id_!r} split {v.split!r} that the spec names; the items may differ from the Hub's")
        return
    e.lines.append(head + (f"; commit {info.get('commit') or 'unknown'}, fingerprint {info.get('fingerprint')}, "
                           f"content sha256 {info.get('content_sha256')}" + (" (read offline from the local cache)"
                                                                             if info.get("offline") else "")
                           if info.get("available") else "; not loaded at plan time")
                   + ("; its fallback file was not read" if getattr(v, "fallback", None) and info.get("available")
                      else ""))
    if not v.revision:
        e.flag(f"{D.UNSPECIFIED}: dataset '{o.id}' does not pin revision= of Hub dataset {v.id_!r}; the data is "
               + (f"identified only by commit {info.get('commit') or 'unknown'} and content sha256 "
                  f"{info.get('content_sha256')}" if info.get("available") else "not identified"))


def _seeds(rd: RunData) -> Entry:
    e = Entry("seeds")
    spec = rd.spec
    settings = spec.of_kind("settings")
    e.lines.append(f"Global seed: {spec.settings.seed}")
    if not settings or "seed" not in D.explicit(next(iter(settings.values()))):
        e.flag(f"{D.UNSPECIFIED}: settings do not set seed; the default {spec.settings.seed} was used")
    for dsid, info in rd.plan.datasets.items():
        o = spec.get(dsid)
        if o.value.REMOTE:
            _hub_identity(e, o, info)
        if not info.get("available"):
            e.lines.append(f"dataset {dsid}: not computable: data not available at plan time "
                           f"(estimated n={info.get('n_sample')})")
            continue
        if info.get("source") == "fallback" and getattr(o.value, "fallback", None) in spec.objects:
            o = spec.get(o.value.fallback)  # its sampling was used (the hub's unless it set its own)
        idx = list(info.get("indices", []))
        digest = hashlib.sha256(json.dumps(idx).encode()).hexdigest()[:16]
        where = "fallback file" if info.get("source") == "fallback" else "source" if o.value.REMOTE else "file"
        e.lines.append(f"dataset {dsid}: {where} {data_file(info.get('path'), (rd.run_info.get('data') or {}).get(dsid))}, "
                       f"{_rows_text(info)}, {_draw_text(o, info, idx)}; dev items {info.get('n_dev', 0)}; "
                       f"indices sha256[:16] {digest} (of the JSON list of the sample indices below)")
        if info.get("limit") is not None:
            kept = Limit.parse(info["limit"]).phrase(len(idx), info.get("n_drawn"))
            e.lines.append(f"dataset {dsid}: run with --limit {info['limit']}: only {kept} were planned and scored")
            e.flag(f"{D.WARNING}: the run used --limit {info['limit']}: dataset '{dsid}' is cut to {kept}; "
                   "the numbers do not describe the declared sample")
        if info.get("filter"):
            e.lines.append(f"dataset {dsid} sample indices (positions among the {info.get('n_items')} filtered rows): "
                           f"{', '.join(str(i) for i in idx)}")
            e.lines.append(f"dataset {dsid} file rows of the sample (0-based, of the {info.get('n_source_rows')} rows "
                           f"in the file): {', '.join(str(i) for i in info.get('file_rows', []))}")
        else:
            e.lines.append(f"dataset {dsid} sample indices: {', '.join(str(i) for i in idx)}")
        if o.value.sample is not None and "seed" not in D.explicit(o):
            e.flag(D.unspecified(o, "seed", "sampling seed"))
    for mid in dict.fromkeys(m for aid in rd.audit_ids() for m in rd.audit(aid).models):
        mo = spec.get(mid)
        e.lines.append(f"model {mid}: generation seed {mo.value.seed if mo.value.seed is not None else spec.settings.seed}"
                       + ("" if mo.value.seed is not None else " (the global seed)"))
    if rd.plan_json.get("sampling_seeds"):  # issue 23: each sampled request's own seed
        e.lines.append(f"sampled requests: a seed per item and purpose, derived from the generation seed (or a "
                       f"protocol's seed): {rd.plan_json['sampling_seeds']}")
    for vid in dict.fromkeys(v for aid in rd.audit_ids() for v in rd.audit(aid).variants):
        v = spec.get(vid).value
        if v.fewshot:
            e.lines.append(f"variant {vid}: {v.fewshot}-shot examples drawn with seed "
                           f"{v.fewshot_seed if v.fewshot_seed is not None else spec.settings.seed}")
            if v.fewshot_seed is None:
                e.flag(f"{D.UNSPECIFIED}: variant '{vid}' does not set fewshot_seed; the global seed was used")
        for pid in v.perturb:
            po = spec.get(pid)
            draws = getattr(po.value, "draws", None)  # declared on the perturbation's Params
            if callable(draws) and not draws():
                e.lines.append(f"variant {vid}: perturbation {pid} ({po.ctor}) makes no random choice with "
                               f"{_param_text(po)} (declared by the perturbation), so no seed")
                continue
            e.lines.append(f"variant {vid}: perturbation {pid} ({po.ctor}) seed "
                           f"{po.value.seed if po.value.seed is not None else spec.settings.seed}")
            if po.value.seed is None:
                e.flag(f"{D.UNSPECIFIED}: perturbation '{pid}' sets no seed; the global seed was used")

    for aid in rd.audit_ids():
        B, seed, level = audit_bootstrap(spec, aid)
        e.lines.append(f"audit {aid}: percentile bootstrap B={B}, seed={seed}, level={level}")
        if not rd.audit(aid).bootstrap:
            e.flag(f"{D.UNSPECIFIED}: audit '{aid}' declares no bootstrap; B=1000, seed=42, level=0.95 were used")
        for cid in spec.of_kind("compare"):
            v = spec.get(cid).value
            r = getattr(v, "resamples", None)
            if getattr(v, "audit", None) == aid and r is not None and int(r) != int(B):
                e.lines.append(f"comparison {cid} (audit {aid}): its own resamples={r} (B={r}, seed={seed}), not the "
                               f"audit's B={B}")
    return e


def _rows_text(info: dict) -> str:
    """'2000 rows in the file, 486 kept by filter subject in [...]' (or '486 rows' without a filter)."""
    f = info.get("filter")
    if not f:
        return f"{info.get('n_items')} rows"
    return (f"{info.get('n_source_rows')} rows in the file, {info.get('n_items')} kept by filter {f['field']} in "
            f"[{', '.join(map(str, f['in']))}]")


def _draw_text(o, info: dict, idx: list[int]) -> str:
    """How the sample was drawn: all rows in file order, a stratified draw or a random draw."""
    v = o.value
    n_items = info.get("n_items")
    drawn = info.get("n_drawn") or len(idx)
    if getattr(v, "sample_per", None):
        per = ", ".join(f"{val} {n}" for val, n in zip(v.filter_in, v.sample_per))
        return (f"stratified sample of {drawn}: per {v.filter_field} value ({per}), random.Random({info.get('seed')})"
                ".sample within each value, all rows of a value that has no more than its size")
    if n_items is not None and drawn >= n_items:
        why = ("no sample size declared" if v.sample is None else
               f"the declared sample of {v.sample} covers every row")
        return f"all {n_items} rows in file order ({why}: no random draw)"
    over = f"the positions of the {n_items} filtered rows" if info.get("filter") else "row indices"
    return f"sample {drawn} drawn with random.Random({info.get('seed')}).sample over {over}"


# -------------------------------------------------------------- audit-level items


def _evaluators(rd: RunData, aid: str) -> Entry:
    e = Entry("evaluator")
    tasks = list(dict.fromkeys(rd.task(d) for d in rd.audit(aid).datasets))
    for eid in rd.evaluators(aid):
        for task in tasks:
            ctor, rule, flags = D.evaluator_rule(rd.spec, eid, task)
            e.lines.append(f"evaluator {eid} ({ctor}) on {task} datasets: {rule}")
            for fl in flags:
                e.flag(fl)
    return e


def _degenerate(rd: RunData, aid: str) -> Entry:
    """Answer sets whose parse rate says nothing: one prediction for every item, or the option
    list written back (``runfacts.degenerate_cells``, from the records)."""
    e = Entry("degenerate")
    lines = R.degenerate_lines(rd, aid)
    if not lines:
        e.lines.append(f"none: no answer set of {R.DEGENERATE_MIN_ITEMS} or more items predicts one label for every "
                       "item, and none writes back the option list in most generations")
        return e
    e.lines.append("an answer parse rate of 1.000 in these cells does not mean the model answered the items: every "
                   "answer parsed to the same label, or the model wrote back the options")
    for ln in lines:
        e.flag(f"{D.WARNING}: {ln}")
    return e


def _metric_refs(rd: RunData, aid: str) -> tuple[list[MetricRef], bool]:
    ids = rd.audit(aid).metrics
    if ids:
        return [rd.spec.metrics[m] for m in ids], True

    return list(DEFAULT_METRICS), False


def _ece(rd: RunData, aid: str) -> Entry:

    e = Entry("ece")
    refs, declared = _metric_refs(rd, aid)
    cal = [r for r in refs if is_calibration(r.name)]
    for r in cal:
        full = validate_params(r.name, dict(r.params))
        shown = ", ".join(f"{k}={v}" for k, v in full.items() if k != "missing")
        e.lines.append(f"{r.label}: {r.name} with {shown or 'no parameters'}")
        given = dict(r.params)
        for k in ("bins", "binning"):
            if k in full and k not in given:
                e.flag(f"{D.UNSPECIFIED}: metric {r.label} of audit '{aid}' does not set {k}; the default {full[k]!r} was used")
    if not cal:
        e.lines.append(f"audit {aid} computes no calibration-error metric (metrics: {', '.join(r.label for r in refs)})")
    if not declared:
        e.flag(f"{D.UNSPECIFIED}: audit '{aid}' declares no metrics; the defaults "
               f"{', '.join(r.label for r in refs)} were used")
    for cid, o in rd.spec.of_kind("compare").items():
        if o.value.audit == aid and "estimator" in o.value.DISCLOSES:
            ests = ([rd.spec.metrics[m].label for m in o.value.estimators_compared()]
                    or ["ece(bins=10, binning=equal_width) (default)"])
            e.lines.append(f"comparison {cid} compares estimators: {', '.join(ests)}")
    e.lines.append("Verbal ECE uses the rows whose confidence parsed; token ECE the rows with a token confidence "
                   "(missing ones are counted in metrics/cells.csv n_conf_missing).")
    return e


def _variants(rd: RunData, aid: str) -> Entry:
    e = Entry("variants")
    a = rd.audit(aid)
    for vid in a.variants:
        v = rd.spec.get(vid).value
        parts = [f"{f}={getattr(v, f)}" for f in ("template", "multiple_choice", "classification", "open_qa", "system")
                 if getattr(v, f)]
        if v.fewshot:
            parts.append(f"fewshot={v.fewshot}")
        if v.perturb:
            parts.append("perturb=[" + ", ".join(f"{p} ({rd.spec.get(p).ctor})" for p in v.perturb) + "]")
        if v.max_tokens:
            parts.append(f"max_tokens={v.max_tokens}")
        e.lines.append(f"variant {vid}: {', '.join(parts)}")
    if len(a.variants) < 2:
        e.flag(f"{D.WARNING}: audit '{aid}' uses a single prompt variant; prompt sensitivity is not measured")
        return e
    df = rd.cells
    if df.empty or "accuracy" not in df.columns:
        e.lines.append("not computable: spread needs per-cell accuracy (metrics/cells.csv has no accuracy column)")
        return e
    # the spread is over the variant set a spread comparison names (study 000 §3: the four
    # non-format_change variants), else over every variant of the audit
    spread_sets = [(cid, o.value.spread_variants()) for cid, o in rd.spec.of_kind("compare").items()
                   if o.value.audit == aid and o.value.spread_variants()]
    if spread_sets:
        cid, spread_vars = spread_sets[0]
        left = [v for v in a.variants if v not in spread_vars]
        e.lines.append(f"spread = max - min accuracy over the {len(spread_vars)} variants of comparison {cid} "
                       f"({', '.join(spread_vars)})" + (f"; not in the spread: {', '.join(left)}" if left else ""))
    else:
        spread_vars = list(a.variants)
        e.lines.append(f"spread = max - min accuracy over all {len(spread_vars)} variants of the audit "
                       "(no spread comparison names a variant set)")
    p0 = a.protocols[0]
    sub = df[(df["audit"] == aid) & (df["protocol"] == p0)]
    for (m, d, ev), g in sub.groupby(["model", "dataset", "evaluator"], sort=False):
        acc = dict(zip(g["variant"], g["accuracy"]))
        vals = [acc[v] for v in spread_vars if v in acc and not math.isnan(acc[v])]
        if len(vals) < 2:
            e.lines.append(f"{m} / {d} / {ev}: not computable: fewer than two variants with an accuracy")
            continue
        e.lines.append(f"{m} / {d} / {ev}: accuracy spread (max - min over {len(vals)} variants) "
                       f"{max(vals) - min(vals):.3f}; " + ", ".join(f"{v} {acc[v]:.3f}" for v in a.variants if v in acc))
    return e


def _answer_sampling(rd: RunData, aid: str) -> Entry:
    """Answer decoding per variant (shared by every protocol of a cell), from the spec and the plan."""

    e = Entry("sampling")
    for vid in rd.audit(aid).variants:
        o = rd.spec.get(vid)
        dec = decoding_of(o)
        text, agrees = planned_text(planned_decoding(rd, aid, variant=vid, roles=("answer",)), dec)
        budget = R.budget_text(R.answer_budgets_of(rd, aid, vid))
        e.lines.append(f"answers under variant {vid}: {dec.text()}" + (f", {budget}" if budget else "") + f"; {text}")
        if not agrees:
            e.flag(f"{D.WARNING}: the plan's answer requests under variant '{vid}' do not all decode as the spec says")
        for fl in decoding_flags(o, "answer decoding"):
            e.flag(fl)
    e.lines.append("each protocol's own generations (verbal follow-ups, sampled answers, probe replies) are stated "
                   "in its protocol group below")
    return e


def _cross(rd: RunData, aid: str, comparisons: list[Comparison] | None = None) -> Entry:
    """Answers a unit scored without generating them (CA, fixed-answer P-RB, A-STB / A-SST samples),
    and for study 002's sampled answers the share of items that qualify for A-STB / A-SST."""

    e = Entry("cross")
    uses = cross_uses(rd, aid)
    if not uses:
        e.lines.append(f"not applicable: no comparison of audit '{aid}' scores answers of other units")
    for u in uses:
        e.lines += u.lines
        for fl in u.flags:
            e.flag(fl)
    for c in comparisons or []:
        if c.audit == aid:
            e.lines += [f"comparison {c.name}: {s}" for s in c.cross]
    return e


def _phrasings(rd: RunData, aid: str) -> Entry:
    e = Entry("phrasings")
    # the protocols whose constructor declares the field holding the wording that elicits their
    # confidence (``PHRASING``, resolve/schema.py)
    verbal = [p for p in rd.audit(aid).protocols if getattr(type(rd.spec.get(p).value), "PHRASING", None)]
    if not verbal:
        e.lines.append(f"not applicable: audit '{aid}' elicits no verbal confidence")
        return e
    phr: dict[str, list[str]] = {}
    stated: list[str] = []  # those whose program declares a parser rule: the reply is read as a number
    for pid in verbal:
        o = rd.spec.get(pid)
        field_name = type(o.value).PHRASING
        tid = getattr(o.value, field_name, None)
        default = _default_template(rd, aid, pid) if tid is None else None
        if default is not None:
            tid = shown = default.text  # the program's declared default template, named with its hash
        else:
            if tid is None:
                e.flag(f"{D.UNSPECIFIED}: protocol '{pid}' sets no {field_name}; the protocol's built-in default text was used")
                tid = f"<built-in default of {o.ctor}>"
            shown = f"{field_name} {tid}"
        phr.setdefault(tid, []).append(pid)
        parser = F.protocol_facts(rd, aid, pid).any("parser")
        if parser is not None:
            stated.append(pid)
            # the parser's own rule as the program declares it, its scale-mismatch rule included
            # (issue 34 item 4; rate: cells column scale_mismatch_rate); a scale left at its default
            # is flagged in the protocol's own group (C3)
            e.lines.append(f"protocol {pid}: {shown}")
            e.lines.append(f"protocol {pid} reads: {parser.text}")
        else:
            e.lines.append(f"protocol {pid} ({o.ctor}): {shown}")
    e.lines.append(f"{len(phr)} distinct elicitation phrasing(s): {', '.join(phr)}")
    if stated and len({k for k, ps in phr.items() if any(p in stated for p in ps)}) == 1:
        e.flag(f"{D.WARNING}: audit '{aid}' elicits verbal confidence with one phrasing only; study 000 shows "
               "below-threshold cells and magnitudes shift with the phrasing (add a replication phrasing)")
    return e


def _vpr(rd: RunData, aid: str) -> Entry:
    e = Entry("vpr")
    s = vpr_summary(rd, aid)
    declared = rd.vpr_declared(aid)
    if declared:
        e.lines.append(f"Inclusion threshold: VPR >= {s.threshold:.2f} ({rd.vpr_source(aid)})")
    else:
        e.lines.append("Inclusion threshold: none (neither the audit nor the settings set vpr_threshold): every cell "
                       "enters ECE_verbal on its parsed rows; the VPR >= 0.80 rule is study 000's (appendix D.1) and is "
                       "applied only where a spec declares it")
    if not s.cells:
        e.lines.append("not applicable: no verbal-confidence cells in this audit")
        return e
    counts = R.conf_count_lines(rd, aid, {str(c) for c in rd.cells["cell_id"] if str(c).split("/")[4:5] and
                                          str(c).split("/")[4] in verbal_protocols(rd, aid)} if not rd.cells.empty else None)
    if counts:
        e.lines.append("the verbal metrics (ECE, Brier, AUROC, ...) of a cell are computed on its items whose verbal "
                       "confidence parsed (n_conf), not on all n: " + "; ".join(counts))
    for ln in R.example_value_lines(rd, aid):
        e.flag(f"{D.WARNING}: {ln}")
    if not declared:
        e.flag(f"{D.UNSPECIFIED}: neither audit '{aid}' nor settings set vpr_threshold; no cell is excluded for its "
               "verbal parse rate")
    e.table = (["cell: model / dataset / variant / protocol / evaluator", "VPR", "status"],
               [[f"{m} / {d} / {v} / {p} / {ev}", f"{vpr:.3f}",
                 ("excluded" if vpr < s.threshold else "included") if declared else "no threshold"]
                for (m, d, v, p, ev), vpr in s.cells.items()])
    if s.excluded:
        e.lines.append(f"{len(s.excluded)} of {len(s.cells)} cells excluded: " +
                       "; ".join(f"{' / '.join(k)} ({reason})" for k, _, reason in s.excluded))
    else:
        e.lines.append(f"no cell excluded ({len(s.cells)} cells)")
    return e


def _accgap(rd: RunData, aid: str, comparisons: list[Comparison]) -> Entry:
    e = Entry("accgap")
    a = rd.audit(aid)
    if len(a.models) < 2:
        e.lines.append(f"not applicable: audit '{aid}' has one model")
        return e
    df = rd.cells
    gaps: list[float] = []
    if df.empty or "accuracy" not in df.columns:
        e.lines.append("not computable: no per-cell accuracy")
    else:
        p0, ev0 = a.protocols[0], rd.evaluators(aid)[0]
        sub = df[(df["audit"] == aid) & (df["protocol"] == p0) & (df["evaluator"] == ev0)]
        for d in a.datasets:
            accs = {m: float(np.nanmean(sub[(sub["model"] == m) & (sub["dataset"] == d)]["accuracy"]))
                    for m in a.models if sub[(sub["model"] == m) & (sub["dataset"] == d)]["accuracy"].notna().any()}
            if len(accs) >= 2:
                hi, lo = max(accs, key=accs.get), min(accs, key=accs.get)
                gaps.append(accs[hi] - accs[lo])
                gap = (f"largest gap {accs[hi] - accs[lo]:.3f} ({hi} - {lo})" if accs[hi] > accs[lo] else
                       "no gap: every model has the same accuracy")
                none = [m for m in a.models if m not in accs]  # no accuracy at all: not part of the gap
                e.lines.append(f"{d}: accuracy (mean over variants, evaluator {ev0}) " +
                               ", ".join(f"{m} {x:.3f}" for m, x in accs.items()) + f"; {gap}"
                               + (f" (no accuracy for {', '.join(none)})" if none else ""))
    al = [c for c in comparisons if c.cid and rd.spec.get(c.cid).value.ACCURACY_CONTROLLED
          and aid in c.data.get("audits", [c.audit])]
    if not al and any(g > 0 for g in gaps):
        e.flag(f"{D.WARNING}: audit '{aid}' compares {len(a.models)} models of different accuracy without an "
               "accuracy-controlled view (declare `compare NAME = aligned(...)`); calibration rankings may reverse "
               "once accuracy is controlled (study 003)")
    elif not al and gaps:
        e.lines.append(f"no accuracy-controlled view declared; none is needed in this run: the {len(a.models)} models "
                       "have the same accuracy on every dataset")
    elif not al:
        e.flag(f"{D.WARNING}: audit '{aid}' compares {len(a.models)} models without an accuracy-controlled view, and "
               "their accuracy gap could not be computed (declare `compare NAME = aligned(...)`); calibration rankings "
               "may reverse once accuracy is controlled (study 003)")
    for c in al:
        e.lines += [f"comparison {c.name}: {s}" for s in c.summary]
        for metric, cnt in c.data.get("patterns", {}).items():
            total = sum(cnt.values())
            complete = sum(n for k, n in cnt.items() if "not computed" not in k)
            e.lines.append(f"comparison {c.name}, {metric}: accuracy-controlled views agree with raw in "
                           f"{cnt.get('none', 0)} of {complete} cases with every view computed ({total} cases in all); "
                           "reversal patterns: "
                           + (", ".join(f"{k} {n}" for k, n in sorted(cnt.items()) if k != "none") or "none"))
            if complete < total:
                e.flag(f"{D.WARNING}: comparison '{c.name}', {metric}: {total - complete} of {total} cases miss an "
                       "accuracy-controlled view that could not be computed; they are not counted as agreeing with raw")
        if "DA" not in c.data.get("views", ["DA"]):
            e.flag(f"{D.WARNING}: comparison '{c.name}' does not compute the Distribution-Aligned view, study 003's "
                   "recommended default (§6)")
    return e


def _default_template(rd: RunData, aid: str, pid: str):
    """The protocol's declared prompt fact when it names the stdlib default templates its program
    uses (``Fact.source``: name, hash, text), else None (a program that declares no default)."""
    got = F.protocol_facts(rd, aid, pid).any("prompt")
    return got if got is not None and got.source is not None else None


def _templates(rd: RunData, aid: str) -> Entry:

    e = Entry("templates")
    for tid, where in D.template_ids(rd, aid):
        try:
            ct = compile_obj(rd.spec, rd.spec.get(tid))
        except TemplateError as err:
            e.lines.append(f"template {tid} ({where}): not computable: {err}")
            continue
        src = rd.spec.get(tid).value.file or "inline"
        e.lines.append(f"template {tid} ({where}); source {src}; hash {ct.hash}")
        e.blocks.append((f"template {tid} (hash {ct.hash})", ct.source))
    listed: set[str] = set()
    for pid in rd.audit(aid).protocols:
        o = rd.spec.get(pid)
        for f, kind in type(o.value).REFS.items():
            if kind == "template" and getattr(o.value, f, None) is None and f in ("phrasing", "template"):
                default = _default_template(rd, aid, pid)
                if default is None:
                    what = f if f == "template" else f"{f} template"
                    e.flag(f"{D.UNSPECIFIED}: protocol '{pid}' sets no {what}; its text is the program's built-in "
                           "default and is not listed here")
                    continue
                e.lines.append(f"protocol {pid} sets no {f}: {default.text}")
                for name, digest, text in default.source:  # the program's declared defaults, listed as the spec's are
                    if name not in listed:
                        listed.add(name)
                        e.blocks.append((f"stdlib template {name} (hash {digest})", text))
    return e


# -------------------------------------------------------------- protocol-group items


def _coverage_lines(rd: RunData, aid: str, pid: str) -> list[str]:

    df = rd.rows(aid, protocol=pid, evaluator=rd.evaluators(aid)[0])
    if df.empty:
        return ["not computable: no records for this protocol"]
    per_cell = {}
    for cid, g in df.groupby("cell_id", sort=False):
        flags = [_coverage_flag(rd.extras(i)) for i in g.index]
        if any(f is None for f in flags):
            return ["not computable: records carry no label coverage (extras full_coverage / label_coverage)"]
        per_cell[cid] = float(np.mean(flags))
    allv = list(per_cell.values())
    full = sum(1 for v in allv if v == 1.0)
    worst = min(per_cell, key=per_cell.get)
    return [f"top-k label coverage: mean example-level coverage {np.mean(allv):.3f} over {len(allv)} cells; "
            f"{full} cells with full coverage; lowest {per_cell[worst]:.3f} ({worst})"]


def _protocol_sampling(rd: RunData, aid: str, pid: str) -> Entry:
    """Decoding of the protocol's own generations (its answers' decoding is in the audit group)."""

    e = Entry("sampling")
    o = rd.spec.get(pid)
    dec = decoding_of(o)
    if dec is None:
        e.lines.append(f"not applicable to {o.ctor}: its parameters set no decoding of its own calls (no temperature); "
                       "the answers' decoding is stated per variant above")
        return e
    what = getattr(type(o.value), "CALLS", None)  # the constructor's words for its own calls' outputs
    if what is None:
        e.flag(f"{D.UNSPECIFIED}: protocol '{pid}' ({o.ctor}) declares no name for its own calls (CALLS); "
               "they are called its calls below")
        what = "calls"
    mt = getattr(o.value, "max_tokens", None)
    e.lines.append(f"{what} of {pid} ({o.ctor}): {dec.text()}" + (f", at most {mt} new tokens (max_tokens={mt})"
                                                                    if mt else ""))
    if hasattr(o.value, "sampled_runs"):  # the protocol samples answers itself (k runs per item)
        seed = o.value.seed if o.value.seed is not None else "the model seed"
        text, agrees = planned_text(planned_decoding(rd, aid, protocol=pid, roles=("samples",)), dec)
        if o.value.reference == "first_sample":
            e.lines.append(f"k={o.value.k} runs per item: the scored answer (run 1) and k-1={o.value.k - 1} samples, "
                           f"seed {seed}; {text}")
            for vid in rd.audit(aid).variants:  # 003 App. D.3: all runs share the answer decoding
                vd = decoding_of(rd.spec.get(vid))
                if vd is None or vd.greedy or (vd.temperature, vd.top_p, vd.top_k) != (dec.temperature, dec.top_p, dec.top_k):
                    e.flag(f"{D.WARNING}: protocol '{pid}' scores the answer of variant '{vid}' as run 1, but that "
                           f"answer decodes as {vd.text() if vd else 'unknown'} while runs 2..k sample at "
                           f"{dec.text()}; study 003 App. D.3 draws all runs with the same decoding")
        else:
            e.lines.append(f"k={o.value.k} samples per item besides the scored answer, seed {seed}; {text}")
        if not agrees:
            e.flag(f"{D.WARNING}: the plan's sample requests of protocol '{pid}' do not all decode as the spec says")
    for fl in decoding_flags(o, what):
        e.flag(fl)
    return e


# checklist item -> the declared facts that state it (protocols/facts.py); the first is required
PROTOCOL_ITEM_FACTS: dict[str, tuple[str, ...]] = {
    "C1": ("provenance",), "C2": ("scored",), "C3": ("readout", "labels", "parser"), "C4": ("context", "prompt"),
    "norm": ("normalisation",),
}


def _run_fact_lines(rd: RunData, aid: str, pid: str, name: str) -> list[str]:
    """The run facts a declared fact asks for (``Fact.run``), read from the plan, journal and records."""
    if name == "label_start_share":
        share = R.label_start_share(rd, aid, pid)
        return [f"{share[0]} of {share[1]} answers ({share[0] / share[1]:.0%}) begin with a valid label as a whole "
                "word (after leading whitespace; records.parquet generation)"] if share else []
    if name == "window_source":
        sources = R.first_window_sources(rd, aid, pid)
        if not sources:
            return ["where the window came from is not computable: the plan holds no first-token requests here"]
        return [f"window read from {text}" + (f" (model{'s' if len(mids) > 1 else ''} {', '.join(mids)})"
                                              if len(sources) > 1 else "") for text, mids in sources.items()]
    if name == "argmax_rows":
        am = R.argmax_rows(rd, aid, pid)
        return [f"predicted label: the evaluator's answer when it is a valid label; otherwise the most probable valid "
                f"label in the window (extras label_source=window_argmax: {am[0]} of {am[2]} rows"
                + (f"; no valid label in the window, confidence missing: {am[1]} rows" if am[1] else "") + ")"] if am else []
    if name == "label_coverage":
        return _coverage_lines(rd, aid, pid)
    if name == "answer_prompt_shown":
        got = F.answer_prompt_shown(rd, aid, pid)
        if not got:
            return ["whether the variant's answer prompt is part of this prompt: not computable (no request of this "
                    "protocol is in the journal)"]
        return [f"{m}: none of the {n} requests checked contains the variant's answer prompt (its instruction is "
                "not sent; journal)" if not hit else
                f"{m}: {hit} of {n} requests checked contain the variant's answer prompt text (journal)"
                for m, (hit, n) in got.items()]
    if name == "sent_labels":
        text = F.sent_labels_text(rd, aid, pid)
        return [f"label strings sent (the requests' choices in the journal): {text}" if text else
                "label strings sent: not computable (no label request of this protocol is in the journal)"]
    return []


def _protocol_entries(rd: RunData, aid: str, pid: str) -> list[Entry]:
    """C1-C4 and normalisation, from the facts the protocol's program declares (``Program.facts``)
    and the run facts those declarations ask for; UNSPECIFIED where the program declares nothing."""
    o = rd.spec.get(pid)
    pf = F.protocol_facts(rd, aid, pid)
    out = []
    for item, keys in PROTOCOL_ITEM_FACTS.items():
        e = Entry(item)
        for n, key in enumerate(keys):
            fact = f"protocol:{pid}:{key}"
            if not pf.declared(key):
                if n == 0:
                    e.state(pf.missing(key) + (f" (its program raised {pf.error})" if pf.error else ""),
                            [f"{fact}:undeclared"], flag=True)
                continue
            for line in pf.lines(key):
                e.state(line, [fact])
            for run in F.fact_runs(pf, key):
                for line in _run_fact_lines(rd, aid, pid, run):
                    e.state(line, [fact, f"run:{run}"])
            for param in F.fact_params(pf, key):
                if param in type(o.value).model_fields and (text := D.unspecified(o, param)):
                    # the default's name (e.g. mode 'followup') is not a description: the line above,
                    # from the program's declaration, says what it builds
                    e.state(f"{text}, which builds what the line above states", [fact, f"spec:{pid}.{param}"],
                            flag=True)
        out.append(e)
    return out


def _needs_dev(rd: RunData, pid: str) -> bool:
    try:
        return bool(program_for(rd.spec.get(pid), rd.spec).needs_dev)
    except (KeyError, ValueError):
        return False


def _dev_fit(rd: RunData, aid: str, pid: str) -> Entry:
    """What each cell fitted on its dev split, read back from the records: study 004's thresholds
    (the fitted value, the one used and whether the §5.5 0.5 correction fired), Platt scalers'
    training size, Calib1's training size, and fit failures."""
    e = Entry("fit")
    if not _needs_dev(rd, pid):
        e.lines.append(f"not applicable to {rd.protocol_ctor(pid)}: the protocol declares no dev-split fit (needs_dev false), so no dev items were planned or fitted for it")
        return e
    cells = [c for c in rd.plan.cells if c.audit == aid and c.protocol == pid]
    n_fired = n_thr = 0
    rows: list[list[str]] = []

    def add(where: str, text: str) -> None:
        rows.append([where, text])

    for c in cells:
        df = rd.rows(aid, model=c.model, dataset=c.dataset, variant=c.variant, protocol=pid, evaluator=c.evaluator)
        where = f"{c.model} / {c.dataset} / {c.variant} / {c.evaluator}"
        if df.empty:
            add(where, "not computable: no records")
            continue
        x = rd.extras(int(df.index[0]))
        if x.get("fit_error"):
            add(where, f"nothing fitted ({x['fit_error']}); the cell has no confidences")
        elif "threshold" in x:
            n_thr += 1
            fired = bool(x.get("threshold_corrected"))
            n_fired += fired
            fitted = x.get("threshold_fitted")
            fitted_text = "not recorded" if fitted is None else f"{float(fitted):.4f}"
            add(where, f"threshold {float(x['threshold']):.4f} (fitted {fitted_text} on "
                           f"{x.get('threshold_dev_size', '?')} dev items; 0.5 correction "
                           f"{'fired' if fired else 'not fired'})")
        elif "base_confidence" in x or "n_train" in x:
            add(where, "fitted on the dev split" + (f" ({x['n_train']} items)" if "n_train" in x else "")
                           + (" (the fit did not converge)" if x.get("converged") is False else ""))
        elif df["confidence_parsed"].any():  # runs from before the fit size was recorded
            add(where, f"fitted on the dev split ({int(df['confidence_parsed'].sum())} of {len(df)} "
                           "items have a fitted confidence; the fit's size is not recorded in these records)")
        else:
            add(where, "not computable: the records carry no fitted parameters")
    if rows:
        e.table = (["cell: model / dataset / variant / evaluator", "fitted on the dev split"], rows)
    if n_thr:
        e.lines.append(f"0.5 threshold correction (study 004 §5.5) fired in {n_fired} of {n_thr} cells")
    return e


__all__ = ["ITEMS", "Checklist", "Entry", "Group", "build_checklist"]
