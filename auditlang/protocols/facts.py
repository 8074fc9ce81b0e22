"""What a confidence protocol declares about itself, for the report: one :class:`Fact` per key.

A program (built-in or plugin) returns its facts from :meth:`Program.facts` next to the requests
it builds, so the words a report prints about a protocol come from the code that decides what is
sent. ``report/`` renders these facts and the run's own (plan, journal, records) and never
branches on a protocol's name; a key a program does not declare is printed as
``UNSPECIFIED: protocol 'x' (ctor) declares no <fact>``.

Keys (checklist item in brackets): ``provenance`` (C1, where the answer the confidence is about
comes from), ``scored`` (C2), ``readout`` (C3), ``labels`` (C3, the label strings sent),
``context`` (C4, how the confidence question is sent: derived from the prompt layout the program
builds), ``normalisation``, ``prompt`` (template and hash), ``parser`` (scale and rule),
``signal`` (the family a disclosure table names) and ``measure`` (the methods paragraph's phrase).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

FACT_KEYS: dict[str, str] = {
    "provenance": "answer provenance", "scored": "scored-answer fact", "readout": "readout",
    "labels": "label form", "context": "conditioning context", "normalisation": "normalisation",
    "prompt": "prompt source", "parser": "parser rule", "signal": "confidence signal", "measure": "measure",
}

def doc_words(doc: str | None) -> str:
    """A component's one-line ``DOC`` as a clause of report text: its label before the first ": "
    dropped ("Study 004: ", "Example plugin: "), lower-case first letter, no final full stop."""
    words = (doc or "").strip().split(": ", 1)[-1].strip().rstrip(".")
    return words[:1].lower() + words[1:]


def sampling_terms(temperature: float, top_p: float | None, top_k: int | None) -> list[str]:
    """A sampled generation's decoding as report text names it: the temperature, then top-p and the
    sampling top-k only where they cut the distribution (top-p below 1, top-k set)."""
    terms = [f"temperature {temperature:g}"]
    terms += [f"top-p {top_p:g}"] if top_p is not None and top_p < 1 else []
    terms += [f"top-k {top_k}"] if top_k else []
    return terms


# ``Fact.run``: facts of the run the report adds to a declared fact (report/checklist.py RUN_FACTS)
RUN_FACT_NAMES = ("label_start_share", "window_source", "argmax_rows", "label_coverage", "sent_labels",
                  "answer_prompt_shown")


@dataclass(frozen=True)
class Fact:
    """One declared fact: the sentence, the parameters it states (flagged UNSPECIFIED when the spec
    left them at their default), run facts the report appends, and the machine-readable value the
    sentence states (tests compare it with the requests actually sent)."""

    text: str
    params: tuple[str, ...] = ()
    run: tuple[str, ...] = ()
    value: Any = None
    # (what every prompt form shares, what this form adds): lets a paragraph state the shared part once
    prose: tuple[str, str] | None = None
    # a prompt fact of default (stdlib) templates the spec did not name: ((name, hash, source text), ...),
    # so the checklist lists the text that was sent, as it lists the spec's own templates
    source: tuple[tuple[str, str, str], ...] | None = None


NOT_APPLICABLE = "not applicable"


def na(what: str, why: str) -> Fact:
    return Fact(f"{NOT_APPLICABLE} to {what}: {why}", value="none")


def template_fact(tpl, tid: str | None) -> Fact:
    """Where a prompt's text comes from: the spec's template object or a stdlib default, with its hash."""
    if tpl is None:
        return Fact(f"no template: the prompt is built from the {'variant prompt' if tid is None else tid}")
    where = f"template {tid}" if tid else f"the stdlib template {tpl.name} (the protocol's default)"
    return Fact(f"{where}, sha256 {tpl.hash}", value=tpl.hash, source=None if tid else ((tpl.name, tpl.hash, tpl.source),))


_ANSWER_VAR = re.compile(r"\{\{[^}]*\b(?:proposed_answer|generation)\b[^}]*\}\}")


_COMMENT = re.compile(r"\{#.*?#\}", re.S)  # a Jinja comment (a template's source note), never rendered
SLOT_CONTEXT = 48  # characters kept on each side of <answer> in a long line


def answer_slot(tpl) -> str:
    """The line of ``tpl`` that shows the answer (``{{ proposed_answer }}`` / ``{{ generation }}``), as
    rendered text around ``<answer>``: comments are not text (s004's templates name ``generation`` in
    their source note), and a long line keeps the words around the answer, cut at "…"."""
    for line in _COMMENT.sub("", tpl.inlined_source).splitlines():
        if _ANSWER_VAR.search(line):
            return _around(" ".join(_ANSWER_VAR.sub("<answer>", line, count=1).split()))
    return "<answer>"


def _around(text: str, keep: int = SLOT_CONTEXT) -> str:
    at = text.index("<answer>")
    before, after = text[:at], text[at + len("<answer>"):]
    if len(before) > keep:
        before = "… " + before[-keep:].split(" ", 1)[-1]
    if len(after) > keep:
        after = after[:keep].rsplit(" ", 1)[0] + " …"
    return before + "<answer>" + after


def layout_context(layout: str, chat: bool, what: str, tpl=None, tid: str | None = None,
                   prefill: str | None = None) -> Fact:
    """How a confidence question about an answer is sent, from the layout the program builds
    (``protocols/base.py`` ``ItemCtx.followup`` / ``prompt`` / ``prefilled``); ``value`` is
    ``(layout, "chat" | "text")``."""
    form = "chat" if chat else "text"
    name = tid or (tpl.name if tpl is not None else "the variant prompt")
    prose = None
    if layout == "followup":
        text = (f"a follow-up user turn: [user: the answer prompt, assistant: the answer, user: {what} {name}] "
                "(chat template)" if chat else
                f"one plain-text prompt: the answer prompt, the answer, a blank line and {what} {name} concatenated "
                "(no chat template)")
        prose = (f"asked after the model's answer with {what} {name}",
                 "a user turn after the assistant's answer, through the chat template" if chat else
                 f"the answer prompt, the answer, a blank line and {what} as one plain text")
    elif layout == "single":
        slot = answer_slot(tpl) if tpl is not None else "<answer>"
        common = f"one new prompt, {what} {name} rendered with the item and the answer (shown as \u201c{slot}\u201d)"
        form_text = "as a single user turn (chat template)" if chat else "as plain text (no chat template)"
        text = f"{common}, {form_text}, not a continuation of the answer's conversation"
        prose = (f"asked in {common}, not a continuation of the answer's conversation",
                 "a single user turn through the chat template" if chat else "plain text, without a chat template")
    elif layout == "prefill":
        text = (f"{'the prompt ' + name if tid else 'the variant prompt'} answered by the prefill {prefill}, which "
                "holds the answer; the model writes only the value ("
                + ("chat template: the prefill is the open assistant turn)" if chat else
                   "no chat template: prompt and prefill concatenated as plain text)"))
        prose = (f"asked with {'the prompt ' + name if tid else 'the variant prompt'} answered by the prefill {prefill}, which "
                 "holds the answer, so that the model writes only the value",
                 "the prefill as the open assistant turn of the chat template" if chat else
                 "prompt and prefill concatenated as plain text")
    elif layout == "joint_answer":
        text = "answer and confidence in one generation of the variant prompt (Guess:/Probability:)"
    elif layout == "joint_call":
        text = f"a separate generation of {what} {name} asking for the answer and the confidence together (Guess:/Probability:)"
    elif layout == "answer_prompt":
        text = "the variant's answer prompt itself, no confidence question"
    else:
        text = f"prompt layout {layout}"
    return Fact(text, value=(layout, form), run=("answer_prompt_shown",) if layout == "single" else (), prose=prose)


def label_form_text(v) -> str:
    """Which token form of an answer label a first-token readout scores (``label_form``)."""
    if v.label_form == "space":
        return 'label tokens with a leading space (" A")'
    if v.label_form == "bare":
        return 'label tokens without a leading space ("A")'
    if getattr(v, "window", "full") == "top_k":
        return 'both label-token forms (" A" and "A") summed'
    return 'the label-token form that follows the prompt (" A" after text, "A" after a chat prompt)'


__all__ = ["FACT_KEYS", "Fact", "RUN_FACT_NAMES", "answer_slot", "label_form_text", "layout_context", "na",
           "template_fact"]
