"""'How to cite the setup': the ``\\input{}`` snippet and a one-paragraph methods text.

Every sentence is built from the same spec, plan and run facts as the reporting checklist and
names the checklist items that state it in full (``Sentence.items``), so an author can trace each
claim in the paragraph back to the checklist.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from auditlang.report.checklist import ITEMS, _metric_refs
from auditlang.report.comparisons.verbal import verbal_protocols
from auditlang.report.decoding import decoding_of
from auditlang.report.disclosure import AXES
from auditlang.report.latex import VERBATIM, breakable, verbatim_safe
from auditlang.report.paths import data_source
from auditlang.report.rundata import DEFAULT_EVALUATOR, RunData
from auditlang.score.cellmetrics import audit_bootstrap

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


def _protocol(rd: RunData, pid: str) -> str:
    o = rd.spec.get(pid)
    shown = [f"{ax}={getattr(o.value, ax)}" for ax, _ in AXES.get(o.ctor, [])[:3]
             if getattr(o.value, ax, None) is not None]
    return f"{pid} ({o.ctor}{'; ' + ', '.join(shown) if shown else ''})"


def methods_sentences(rd: RunData) -> list[Sentence]:
    out: list[Sentence] = []
    for aid in rd.audit_ids():
        a = rd.audit(aid)
        out.append(Sentence(f"Audit {aid} evaluates {_n(len(a.models), 'model')} ({_join(a.models)}) on "
                            f"{_n(len(a.datasets), 'dataset')} ({_join(a.datasets)}) under "
                            f"{_n(len(a.variants), 'prompt variant')} ({_join(a.variants)}).",
                            ["engines", "variants"], aid))
        out.append(Sentence(f"Confidence is elicited with {_n(len(a.protocols), 'protocol')}: "
                            f"{_join([_protocol(rd, p) for p in a.protocols])}.", list(PROTOCOL_ITEMS), aid))
        evs = [f"{e} ({rd.spec.get(e).ctor})" if e != DEFAULT_EVALUATOR else "the task's default evaluator"
               for e in rd.evaluators(aid)]
        out.append(Sentence(f"Answers are scored with {_join(evs)}.", ["evaluator"], aid))
        refs, _ = _metric_refs(rd, aid)
        out.append(Sentence(f"The metrics are {_join([r.label for r in refs])}.", ["ece"], aid))
        decs = {d.text() for v in a.variants if (d := decoding_of(rd.spec.get(v))) is not None}
        if len(decs) == 1:
            out.append(Sentence(f"Answers are decoded {next(iter(decs))}.", ["sampling"], aid))
        if verbal_protocols(rd, aid):
            out.append(Sentence(f"Verbal-confidence cells with a parse rate below {rd.vpr_threshold(aid):.2f} are "
                                "excluded.", ["vpr"], aid))
        B, seed, level = audit_bootstrap(rd.spec, aid)
        out.append(Sentence(f"Intervals are {level:.0%} percentile-bootstrap intervals over items "
                            f"(B={B}, seed {seed}).", ["seeds"], aid))
    ds = []
    for dsid, info in rd.plan.datasets.items():
        if info.get("available"):
            ds.append(f"{dsid} ({len(info.get('indices', []))} of {info.get('n_items')} items, seed {info.get('seed')})")
    if ds:
        out.append(Sentence(f"Items are drawn at random with fixed seeds: {_join(ds)}; the global seed is "
                            f"{rd.spec.settings.seed}.", ["seeds"]))
    sources = [data_source(dsid, info) for dsid, info in rd.plan.datasets.items() if info.get("available")]
    if any(sources):
        out.append(Sentence("Data sources: " + "; ".join(x for x in sources if x) + ".", ["seeds"]))
    return out


def methods_paragraph(sentences: list[Sentence]) -> str:
    return " ".join(s.text for s in sentences)


def traceability(sentences: list[Sentence]) -> list[str]:
    return [f"Sentence {i}: checklist {s.where()}" for i, s in enumerate(sentences, 1)]


def to_markdown(sentences: list[Sentence]) -> str:
    return "\n".join(["## How to cite the setup", "", "Paste into the paper (LaTeX):", "", "```latex",
                      INPUT_SNIPPET, "```", "", "Methods paragraph (`methods.tex`):", "",
                      "> " + methods_paragraph(sentences), "", "Where each sentence is stated in full:", ""]
                     + [f"- {t}" for t in traceability(sentences)]) + "\n"


def to_latex_fragment(sentences: list[Sentence]) -> str:
    """``methods.tex``: the paragraph alone, ready for ``\\input{}``."""
    return ("% Generated by auditlang; every sentence is traced to the reporting checklist.\n"
            "{\\emergencystretch=2em\n" + breakable(methods_paragraph(sentences)) + "\\par}\n")


def to_latex_section(sentences: list[Sentence]) -> str:

    return "\n".join(["\\section*{How to cite the setup}", "\\noindent Paste into the paper:",
                      VERBATIM, verbatim_safe(INPUT_SNIPPET),
                      "\\end{Verbatim}", "\\noindent Methods paragraph (methods.tex):\\par",
                      "\\begin{quote}\\emergencystretch=2em", breakable(methods_paragraph(sentences)), "\\end{quote}",
                      "\\noindent Where each sentence is stated in full:",
                      "\\begin{itemize}\\renewcommand{\\labelitemi}{\\ensuremath{\\bullet}}"]
                     + [f"\\item {breakable(t)}" for t in traceability(sentences)] + ["\\end{itemize}"]) + "\n"


def to_html(sentences: list[Sentence]) -> str:

    return ("<p>Paste into the paper:</p><pre>" + html.escape(INPUT_SNIPPET) + "</pre><p>Methods paragraph "
            "(<code>methods.tex</code>):</p><blockquote>" + html.escape(methods_paragraph(sentences)) +
            "</blockquote><p>Where each sentence is stated in full:</p><ul>" +
            "".join(f"<li>{html.escape(t)}</li>" for t in traceability(sentences)) + "</ul>")
