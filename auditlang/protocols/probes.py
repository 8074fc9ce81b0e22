"""Study 004 knowledge-gap probes, and Platt scaling of any protocol (study 002).

Study 004 §2.1 (methods after Feng et al. 2024b) and App. A.3 Table 5 (prompts):

* NOTA -- the choices plus "None of the above"; reject (abstain) iff the model picks it.
* MoreInfo -- after the guess: "Do you need more information ...? (Yes or No)"; reject iff Yes.
* SelfRef -- after the guess: "The above answer is: A. True B. False"; reject iff B / False.
* AskCal -- after the guess: "Provide the probability that your guess is correct ...";
  accept iff the parsed probability >= a threshold fitted on the dev split.
* TokProb -- the probability of the generated answer token; accept iff >= a dev threshold.
* Embedding -- a classifier on the LLM's hidden state (with its prediction) fitted on dev.

Thresholds (004 §2.1 "optimize a threshold to minimize misclassifications", §5.5 correction
rule) use :mod:`auditlang.metrics.thresholds`: an unreasonable fitted threshold (outside
[0.05, 0.95]) is replaced by 0.5 unless ``correction=false``.

Prompts: without ``template=`` the probes use the paper's stdlib templates
(``s004/mc/{nota,moreinfo,selfref,askcal}``), switching to the ``*_oneshot`` template when the
item carries a one-shot example (``oneshot`` field from the one-shot perturbation). Decoding
is greedy by default (``temperature=0``); 004 App. A samples with temperature 0.1, top_p 0.9,
top_k 50 (``temperature=0.1, top_p=0.9, sample_top_k=50``; ``sample_top_k`` becomes the
generate request's sampling ``top_k``).

Dev fitting (``needs_dev``): the runner reads every dev item of the cell like a test item,
scores correctness with the cell's evaluator, then calls ``fitted = program.fit(dev_rows)``
with ``dev_rows = [{"confidence": r.confidence, "correct": bool | None, "extras": r.extras}]``
once per (model, dataset, variant, protocol, evaluator) cell, stores ``fitted`` (JSON) and
maps every test readout through ``program.apply(fitted, readout)``.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from auditlang.core.requests import Prompt, Request, Result
from auditlang.prompts.render import CompiledTemplate, compile_stdlib_template, letters
from auditlang.protocols.base import ItemCtx, Program, Readout, generated_text, invariant, usable
from auditlang.protocols.token import first_token_readout, first_token_window
from auditlang.protocols.facts import Fact, doc_words, layout_context, na, template_fact
from auditlang.protocols.verbal import first_line, render_single, uses_answer, verbal_parser
from auditlang.evaluators.letters import extract_pred_letter

if TYPE_CHECKING:
    import numpy as np


@lru_cache(maxsize=64)
def stdlib_template(name: str) -> CompiledTemplate:
    return compile_stdlib_template(name)


# ----------------------------------------------------------------------------- answer parsers

_LEAD = r"^[\s\W_]*"
_AB_FIRST = re.compile(_LEAD + r"\(?([AB])(?![A-Za-z0-9])")
_TF_FIRST = re.compile(_LEAD + r"(true|false)(?![A-Za-z0-9])", re.IGNORECASE)
_AB_ANY = re.compile(r"(?<![A-Za-z0-9])([AB])(?![A-Za-z0-9])")
_TF_ANY = re.compile(r"(?<![A-Za-z0-9])(true|false)(?![A-Za-z0-9])", re.IGNORECASE)
_YN_FIRST = re.compile(_LEAD + r"(yes|no)(?![A-Za-z0-9])", re.IGNORECASE)


def parse_true_false(text: str) -> tuple[str | None, str]:
    """SelfRef reply -> ("A" true | "B" false | None, rule).

    ``first``: the reply starts (after whitespace/punctuation) with the letter A/B or the word
    True/False. ``unique``: otherwise, the reply mentions exactly one of them as a standalone
    letter or word. Anything else does not parse.
    """
    m = _AB_FIRST.match(text)
    if m:
        return m.group(1), "first"
    m = _TF_FIRST.match(text)
    if m:
        return ("A" if m.group(1).lower() == "true" else "B"), "first"
    found = {x for x in _AB_ANY.findall(text)}
    found |= {"A" if w.lower() == "true" else "B" for w in _TF_ANY.findall(text)}
    if len(found) == 1:
        return found.pop(), "unique"
    return None, "no_true_false" if not found else "ambiguous"


def parse_yes_no(text: str) -> tuple[str | None, str]:
    """MoreInfo reply -> ("yes" | "no" | None, rule): the first word after whitespace/punctuation."""
    m = _YN_FIRST.match(text)
    if m:
        return m.group(1).lower(), "first_word"
    return None, "no_yes_no"


# ----------------------------------------------------------------------------- prompted probes


DECISION_WORDS = "an abstention decision, not a confidence"  # how a decision-only probe's measure begins


class _PromptedProbe(Program):
    """A probe prompt from ``template=`` or the stdlib default (one-shot aware)."""

    DEFAULT: str = ""
    ROLE: str = ""

    def __init__(self, obj, spec) -> None:
        super().__init__(obj, spec)
        self.tpl = self.template(self.p.template) if self.p.template else None

    def template_for(self, ctx: ItemCtx) -> CompiledTemplate:
        if self.tpl is not None:
            return self.tpl
        return stdlib_template(self.DEFAULT + ("_oneshot" if ctx.item.get("oneshot") else ""))

    def _generate(self, ctx: ItemCtx, prompt: Prompt) -> Request:
        p = self.p
        seed = ctx.request_seed(p.temperature, self.ROLE)  # sampled: per item and purpose
        return Request.make(ctx.model.id, "generate", prompt, seed=seed, max_tokens=p.max_tokens,
                            temperature=p.temperature, top_p=p.top_p if p.temperature > 0 else None,
                            top_k=p.sample_top_k if p.temperature > 0 else None, top_logprobs=0)

    DECISION: str = ""  # how the reply decides (the program's read rule), for the report
    # what it measures, as a noun phrase of the methods paragraph (empty: its DOC after the label)
    MEASURE: str = ""
    # it gives a decision and no confidence: its measure starts with DECISION_WORDS, value "decision"
    DECISION_ONLY: bool = False

    def _prompt_template(self) -> CompiledTemplate:
        return self.tpl if self.tpl is not None else stdlib_template(self.DEFAULT)

    def _layout(self) -> str:
        return "new_prompt"

    def facts(self, chat: bool) -> dict[str, Fact]:
        what = self.obj.ctor
        tpl = self._prompt_template()
        prompt = template_fact(tpl, self.p.template)
        if self.tpl is None:
            one = stdlib_template(self.DEFAULT + "_oneshot")
            prompt = replace(prompt, text=prompt.text + f" (items with a one-shot example use its _oneshot form, sha256 "
                             f"{one.hash})", params=("template",), source=prompt.source + ((one.name, one.hash, one.source),))
        layout = self._layout()
        if layout == "new_prompt":
            ctx = Fact(f"one new prompt, the probe template {self.p.template or tpl.name} rendered with the item, "
                       + ("as a single user turn (chat template)" if chat else "as plain text (no chat template)"),
                       value=("single", "chat" if chat else "text"))
        else:
            ctx = layout_context(layout, chat, "the probe template", tpl, self.p.template)
        return {"signal": Fact(f"abstention probe ({what})"),
                "provenance": Fact("the model's own answer (provenance self)" if layout != "new_prompt" else
                                   f"not applicable to {what}: the probe shows no answer", value="self"),
                "scored": Fact("the model's own answer to the variant prompt"),
                "readout": Fact(f"not applicable to {what}: {self.DECISION}"),
                "context": ctx, "prompt": prompt,
                "normalisation": na(what, "a decision, not a probability"),
                "measure": Fact((f"{DECISION_WORDS}: " if self.DECISION_ONLY else "")
                                + f"{self.MEASURE or doc_words(type(self.p).DOC)} ({what}{self._measure_note()})",
                                value="decision" if self.DECISION_ONLY else None)}

    def _measure_note(self) -> str:
        """What the measure's parenthesis adds after the protocol's name (a threshold's rule)."""
        return ""

    def _reply(self, results: dict[str, Result]) -> str | None:
        res = usable(results, self.ROLE)
        return None if res is None else generated_text(res)


class _FollowupProbe(_PromptedProbe):
    """Two-stage probes: the probe prompt embeds the model's own guess (004 §2.1 "Prompting")."""

    def _layout(self) -> str:
        return "single" if uses_answer(self._prompt_template()) else "followup"

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return {self.ROLE: "generate"}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        answer = generated_text(usable(results, "answer"))
        if not answer.strip():
            return {}
        tpl = self.template_for(ctx)
        if uses_answer(tpl):
            prompt = ctx.prompt(render_single(ctx, tpl, answer))
        else:
            prompt = ctx.followup(answer, ctx.render(tpl))
        return {self.ROLE: self._generate(ctx, prompt)}


class NotaProgram(_PromptedProbe):
    """``nota(template, max_tokens, temperature, top_p)``: stage-1 role ``nota``.

    The NOTA prompt (default ``s004/mc/nota``) lists the choices plus a last option "None of the
    above" (letter n+1). The reply is read with study 000's ``extract_pred_letter`` over the
    n+1 letters; abstain iff it is the NOTA letter (004 §2.1). An unreadable reply did not pick
    NOTA, so it is accepted (``parsed=False`` counts it). NOTA gives no confidence (NaN).
    """

    DEFAULT = "s004/mc/nota"
    MEASURE = "the options gain a last option 'None of the above', and choosing it means abstain"
    DECISION_ONLY = True
    DECISION = "the reply's option letter is read (study 000's extract_pred_letter over the options and the added one); abstain iff it is the added 'None of the above' letter"
    ROLE = "nota"

    def stage1_roles(self) -> dict[str, str]:
        return {self.ROLE: "generate"}

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        if not ctx.valid_labels():
            raise ValueError(f"protocol '{self.obj.id}' (nota) needs multiple-choice items; item "
                             f"{ctx.item.get('id')!r} of dataset '{ctx.dataset}' has no choices")
        text = ctx.render(self.template_for(ctx))
        return {self.ROLE: self._generate(ctx, ctx.prompt(text))}

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:

        kind = self.obj.ctor
        labels = ctx.valid_labels() or []
        nota = letters(len(labels) + 1)[-1]
        reply = self._reply(results)
        if reply is None:
            return Readout(math.nan, False, kind, None, {"reason": "no NOTA result", "nota_label": nota})
        out = extract_pred_letter(reply, [*labels, nota])
        choice = out.value if out.ok else None
        return Readout(math.nan, out.ok, kind, choice == nota,
                       {"choice": choice, "nota_label": nota, "rule": out.rule, "text": reply})


class MoreInfoProgram(_FollowupProbe):
    """``more_info(template, ...)``: stage-2 role ``more_info``; abstain iff the reply is Yes.

    Default prompt ``s004/mc/moreinfo``. The reply's first word decides (``parse_yes_no``); an
    unreadable reply is not a Yes, so it is accepted (``parsed=False``).
    """

    DEFAULT = "s004/mc/moreinfo"
    MEASURE = "after its answer the model is asked whether it needs more information, and Yes means abstain"
    DECISION_ONLY = True
    DECISION = "the reply's first word is read as Yes or No; abstain iff Yes"
    ROLE = "more_info"

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        kind = self.obj.ctor
        reply = self._reply(results)
        if reply is None:
            return Readout(math.nan, False, kind, None, {"reason": "no MoreInfo result"})
        value, rule = parse_yes_no(reply)
        return Readout(math.nan, value is not None, kind, value == "yes", {"reply": value, "rule": rule, "text": reply})


class SelfRefProgram(_FollowupProbe):
    """``self_ref(template, ...)``: stage-2 role ``self_ref``; abstain iff the reply is B (False).

    Default prompt ``s004/mc/selfref``. Read with ``parse_true_false``; an unreadable reply is
    not a False, so it is accepted (``parsed=False``).
    """

    DEFAULT = "s004/mc/selfref"
    MEASURE = "after its answer the model is asked whether that answer is true or false, and False means abstain"
    DECISION_ONLY = True
    DECISION = "the reply is read as A (True) or B (False); abstain iff B"
    ROLE = "self_ref"

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        kind = self.obj.ctor
        reply = self._reply(results)
        if reply is None:
            return Readout(math.nan, False, kind, None, {"reason": "no SelfRef result"})
        value, rule = parse_true_false(reply)
        return Readout(math.nan, value is not None, kind, value == "B", {"reply": value, "rule": rule, "text": reply})


# ----------------------------------------------------------------------------- thresholded probes


class _Thresholded:
    """Dev-fitted accept/reject threshold (004 §2.1, §5.5) on ``Readout.confidence``."""

    needs_dev = True
    p: Any
    obj: Any

    def threshold_rule(self) -> str:
        """How the fitted threshold is used, as the methods paragraph states it: the 004 Sec. 5.5
        correction with the bounds and fallback ``fit`` applies, or the fitted value kept."""
        from auditlang.metrics.thresholds import DEFAULT_BOUNDS, FALLBACK_THRESHOLD  # lazy: numpy at scoring only

        if self.p.correction:
            lo, hi = DEFAULT_BOUNDS
            return f"a fitted threshold outside [{lo:g}, {hi:g}] is replaced by {FALLBACK_THRESHOLD:g}, 004 Sec. 5.5"
        return f"the fitted threshold is kept, without 004 Sec. 5.5's replacement by {FALLBACK_THRESHOLD:g}"

    def _measure_note(self) -> str:
        return f"; {self.threshold_rule()}"

    def fit(self, dev_rows: list[dict[str, Any]]) -> dict[str, Any]:
        from auditlang.metrics.thresholds import DEFAULT_BOUNDS, fit_threshold  # lazy: numpy fits at scoring only

        conf, corr = _dev_xy(self.obj.id, dev_rows)
        f = fit_threshold(conf, corr, bounds=DEFAULT_BOUNDS if self.p.correction else None)
        return {"threshold": f.threshold, "fitted": f.fitted, "corrected": f.corrected,
                "dev_errors": f.dev_errors, "dev_size": f.dev_size}

    def apply(self, fitted: dict[str, Any], readout: Readout) -> Readout:
        t = float(fitted["threshold"])
        c = readout.confidence
        abstain = None if math.isnan(c) else bool(c < t)
        # the fitted value and whether 004 §5.5's 0.5 correction replaced it, for the checklist
        fit = {"threshold": t, "threshold_fitted": fitted.get("fitted"), "threshold_corrected": fitted.get("corrected"),
               "threshold_dev_size": fitted.get("dev_size")}
        return Readout(c, readout.parsed, readout.kind, abstain, {**readout.extras, **fit})


def _label(z: Any) -> int | None:
    """A dev row's correctness as 0/1; None (or NaN, e.g. an undecided judge) is unknown."""
    if z is None or (isinstance(z, float) and math.isnan(z)):
        return None
    return int(bool(z))


def _dev_xy(pid: str, dev_rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np  # lazy: numpy at scoring only, so `auditc check` loads none
    conf, corr = [], []
    for r in dev_rows:
        c, z = r.get("confidence"), _label(r.get("correct"))
        if c is None or z is None or math.isnan(float(c)):
            continue
        conf.append(float(c))
        corr.append(z)
    if not conf:
        raise ValueError(f"protocol '{pid}': no dev item has both a confidence and a correctness label; "
                         "nothing to fit (check the dev split and the verbal parse rate)")
    return np.asarray(conf), np.asarray(corr)


class AskCalProgram(_Thresholded, _FollowupProbe):
    """``ask_cal(template, scale, correction, ...)``: stage-2 role ``ask_cal``.

    Default prompt ``s004/mc/askcal`` (ends with "Probability:"). The first non-empty line of the
    reply is parsed with the ``scale`` verbal parser; confidence = that value; ``apply``
    abstains iff it is below the dev threshold (unparsed: ``abstain=None``).
    """
    reliability_diagram = "asked"

    DEFAULT = "s004/mc/askcal"
    verbal_parse = True
    DECISION = "the first non-empty line of the reply is parsed as a number on the scale; abstain iff below the threshold fitted on the dev split"
    ROLE = "ask_cal"

    def __init__(self, obj, spec) -> None:
        super().__init__(obj, spec)
        self.parser = verbal_parser(self.p.scale)

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        kind = self.obj.ctor
        reply = self._reply(results)
        if reply is None:
            return Readout(math.nan, False, kind, None, {"reason": "no AskCal result"})
        out = self.parser.parse(first_line(reply))
        extras = {"rule": out.rule, "text": reply}
        if not out.ok or out.value is None:
            return Readout(math.nan, False, kind, None, extras)
        return Readout(float(out.value), True, kind, None, extras)


class TokProbProbeProgram(_Thresholded, Program):
    """``tok_prob_probe(top_k, correction)``: stage-1 role ``first`` (greedy, max_tokens=1,
    ``top_logprobs=top_k``); confidence = raw probability of the answer letter (000 A.3 eq. 1
    with ℓ* chosen as in ``token_prob``); abstain iff below the dev threshold."""
    reliability_diagram = "token"

    def facts(self, chat: bool) -> dict[str, Fact]:
        what, k = self.obj.ctor, self.p.top_k
        return {"signal": Fact("token probability (thresholded)"),
                "provenance": na(what, "token probabilities involve no elicited or supplied answer"),
                "scored": Fact("the model's own answer to the variant prompt"),
                "readout": Fact(f"probability of the answer token (top_k={k}), thresholded on the dev split"),
                "context": Fact("bare query: the variant prompt itself", value=("answer_prompt", "chat" if chat else "text")),
                "normalisation": Fact(f"raw probability of the answer token in a top-{k} window"),
                "measure": Fact(f"the raw first-token probability of the answer (top-{k} window), thresholded on the "
                                f"dev split ({self.threshold_rule()})")}

    def stage1_roles(self) -> dict[str, str]:
        return {"first": "generate"}

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        return {"first": Request.make(ctx.model.id, "generate", ctx.prompt(), seed=ctx.seed, max_tokens=1,
                                      temperature=0.0, top_logprobs=self.p.top_k)}

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        res = usable(results, "first")
        if res is None:
            return Readout(math.nan, False, self.obj.ctor, None, {"reason": "no first-token result"})
        window, tok, lp = first_token_window(res)
        return first_token_readout(ctx.valid_labels(), window, pred, (tok, lp), "raw", self.obj.ctor)


# ----------------------------------------------------------------------------- embedding probe


def fit_logistic(x: np.ndarray, y: np.ndarray, C: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, bool]:
    import numpy as np  # lazy: as in _dev_xy
    """L2 logistic regression on standardised features (sklearn's objective:
    ``||w||² / 2 + C Σ logloss``), L-BFGS-B from zero: deterministic, no random state.
    Returns (mean, scale, w, b, converged)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    d = z.shape[1]

    def obj(params: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = params[:d], params[d]
        s = z @ w + b
        loss = float(np.sum(np.logaddexp(0.0, s) - y * s))
        r = _expit(s) - y
        grad = np.concatenate([C * (z.T @ r) + w, [C * float(np.sum(r))]])
        return 0.5 * float(w @ w) + C * loss, grad

    from scipy import optimize  # lazy: scipy costs ~0.3 s at start-up

    res = optimize.minimize(obj, np.zeros(d + 1), jac=True, method="L-BFGS-B",
                            options={"maxiter": 5000, "ftol": 1e-12, "gtol": 1e-8})
    return mean, scale, res.x[:d], float(res.x[d]), bool(res.success)


class EmbeddingProgram(Program):
    """``embedding_probe(layer, C, seed, with_answer)``: hidden state -> P(correct).

    004 §2.1: a classifier "on the hidden states of the LLM in conjunction with the model's
    prediction" (layer and classifier unspecified). Here: the hidden state at ``layer`` of the
    last token of the answer prompt followed by the model's own answer (``with_answer=true``,
    stage-2 role ``hidden``; the answer is an assistant prefill for chat models, appended raw
    text for base models), or of the prompt alone (``with_answer=false``, stage-1). ``fit``
    trains an L2 logistic regression (``C``) on the dev hidden states vs correctness
    (deterministic; ``seed`` is unused); ``apply`` sets confidence = P(correct) and abstains
    iff it is below 0.5 (the classifier's "doesn't know").
    """

    needs_dev = True

    def facts(self, chat: bool) -> dict[str, Fact]:
        p, what = self.p, self.obj.ctor
        where = ("the answer prompt followed by the model's own answer (" + ("an assistant prefill)" if chat else
                 "appended text)") if p.with_answer else "the answer prompt alone")
        return {"signal": Fact("hidden-state probe"),
                "provenance": Fact("the model's own answer (provenance self)" if p.with_answer else
                                   f"not applicable to {what}: the probe reads the prompt alone", value="self"),
                "scored": Fact("the model's own answer to the variant prompt"),
                "readout": Fact(f"linear probe on hidden states of layer {p.layer} (with_answer={p.with_answer}), "
                                "fitted on dev"),
                "context": Fact(f"hidden state of the last token of {where}",
                                value=("prefill" if p.with_answer else "answer_prompt", "chat" if chat else "text")),
                "normalisation": na(what, "a classifier's probability"),
                "measure": Fact(f"a linear probe's probability of correctness from layer {p.layer}'s hidden state, "
                                "fitted on the dev split")}

    def _request(self, ctx: ItemCtx, prompt: Prompt) -> Request:
        return Request.make(ctx.model.id, "hidden_states", prompt, seed=ctx.seed, layer=self.p.layer)

    def stage1_roles(self) -> dict[str, str]:
        return {} if self.p.with_answer else {"hidden": "hidden_states"}

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return {"hidden": "hidden_states"} if self.p.with_answer else {}

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        return {} if self.p.with_answer else {"hidden": self._request(ctx, ctx.prompt())}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        if not self.p.with_answer:
            return {}
        answer = generated_text(usable(results, "answer"))
        if not answer:
            return {}
        return {"hidden": self._request(ctx, ctx.prompt(assistant_prefix=answer))}

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        res = usable(results, "hidden")
        if res is None or not res.hidden_state:
            return Readout(math.nan, False, self.obj.ctor, None, {"reason": "no hidden state"})
        return Readout(math.nan, True, self.obj.ctor, None, {"hidden": [float(v) for v in res.hidden_state]})

    def fit(self, dev_rows: list[dict[str, Any]]) -> dict[str, Any]:
        import numpy as np  # lazy: as in _dev_xy

        xs, ys = [], []
        for r in dev_rows:
            h, z = (r.get("extras") or {}).get("hidden"), _label(r.get("correct"))
            if h is None or z is None:
                continue
            xs.append(h)
            ys.append(z)
        pid = self.obj.id
        if not xs:
            raise ValueError(f"protocol '{pid}': no dev item has a hidden state and a correctness label")
        if len({len(h) for h in xs}) != 1:
            raise ValueError(f"protocol '{pid}': dev hidden states have different sizes")
        y = np.asarray(ys, dtype=float)
        if y.min() == y.max():
            raise ValueError(f"protocol '{pid}': the dev split has only {'correct' if y[0] else 'incorrect'} "
                             "answers; the probe needs both outcomes")
        mean, scale, w, b, ok = fit_logistic(np.asarray(xs, dtype=float), y, float(self.p.C))
        return {"mean": mean.tolist(), "scale": scale.tolist(), "coef": w.tolist(), "intercept": b,
                "n_train": len(ys), "converged": ok, "layer": self.p.layer, "C": float(self.p.C)}

    def apply(self, fitted: dict[str, Any], readout: Readout) -> Readout:
        import numpy as np  # lazy: as in _dev_xy

        h = readout.extras.get("hidden")
        extras = {k: v for k, v in readout.extras.items() if k != "hidden"}
        if h is None:
            return Readout(math.nan, False, readout.kind, None, extras)
        mean = np.asarray(fitted["mean"])
        if len(h) != mean.size:
            raise ValueError(f"protocol '{self.obj.id}': hidden state has {len(h)} values, the probe was "
                             f"fitted on {mean.size}")
        z = (np.asarray(h, dtype=float) - mean) / np.asarray(fitted["scale"])
        p = float(_expit(z @ np.asarray(fitted["coef"]) + float(fitted["intercept"])))
        fit = {"n_train": int(fitted["n_train"]), "converged": bool(fitted["converged"])}  # for the checklist
        return Readout(p, True, readout.kind, p < 0.5, {**extras, **fit})


# ----------------------------------------------------------------------------- Platt scaling


class PlattProgram(Program):
    """``platt(base, feature, loss)``: another protocol's confidence through Platt scaling.

    Study 002 §5 "PS": sigmoid(a·p + b) with (a, b) minimising the MSE against correctness on
    the training split (here the dev split), via :func:`auditlang.metrics.platt.fit_platt`
    (``feature=logit`` / ``loss=log`` give the classical variants). Requests and readout are the
    base protocol's; ``apply`` replaces the confidence and keeps it as ``extras["base_confidence"]``.
    """

    needs_dev = True
    wraps_param = "base"  # protocols/registry.py builds the base protocol's program

    def __init__(self, obj, spec, base: Program) -> None:
        super().__init__(obj, spec)
        base_obj = spec.get(self.p.base)
        invariant(base_obj.ctor != "platt", f"protocol '{obj.id}': platt over another platt protocol")
        self.base = base
        self.accepts_extract = self.base.accepts_extract
        invariant(not self.base.needs_dev, f"protocol '{obj.id}': base protocol '{base_obj.id}' is itself fitted")

    def facts(self, chat: bool) -> dict[str, Fact]:
        p = self.p
        base = self.base.facts(chat)
        out = {k: base[k] for k in ("provenance", "scored", "context", "labels", "prompt") if k in base}
        out["signal"] = Fact(f"Platt-scaled {base['signal'].text}" if "signal" in base else "Platt scaling")
        out["readout"] = Fact(f"Platt scaling of protocol {p.base} ({p.feature}, loss {p.loss}), fitted on the dev split")
        out["normalisation"] = na(self.obj.ctor, "a fitted sigmoid of the base confidence")
        out["measure"] = Fact(f"the confidence of protocol {p.base} through Platt scaling ({p.feature}, loss {p.loss}), "
                              "fitted on the dev split")
        return out

    def stage1_roles(self) -> dict[str, str]:
        return self.base.stage1_roles()

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        return self.base.stage1(ctx)

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return self.base.roles2(ctx)

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        return self.base.stage2(ctx, results, pred)

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        r = self.base.read(ctx, results, pred, answer_text, **kw)
        return Readout(r.confidence, r.parsed, self.obj.ctor, r.abstain, {**r.extras, "base_kind": r.kind})

    def answer_conditioned(self) -> bool:
        return self.base.answer_conditioned()

    def candidate_requests(self, ctx: ItemCtx, results: dict[str, Result], answer_text: str, pred: Any) -> dict[str, Request]:
        return self.base.candidate_requests(ctx, results, answer_text, pred)

    def read_candidate(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        r = self.base.read_candidate(ctx, results, pred, answer_text, **kw)
        return Readout(r.confidence, r.parsed, self.obj.ctor, r.abstain, {**r.extras, "base_kind": r.kind})

    def fit(self, dev_rows: list[dict[str, Any]]) -> dict[str, Any]:
        from auditlang.metrics.platt import fit_platt  # lazy: numpy fits at scoring only

        conf, corr = _dev_xy(self.obj.id, dev_rows)
        s = fit_platt(conf, corr, feature=self.p.feature, loss=self.p.loss)
        return {"a": s.a, "b": s.b, "feature": s.feature, "loss": s.loss, "n_train": s.n_train, "converged": s.converged}

    def apply(self, fitted: dict[str, Any], readout: Readout) -> Readout:
        from auditlang.metrics.platt import PlattScaler  # lazy: as for fit

        s = PlattScaler(float(fitted["a"]), float(fitted["b"]), fitted["feature"], fitted["loss"],
                        int(fitted["n_train"]), bool(fitted["converged"]))
        c = readout.confidence
        new = float(s.apply([c])[0]) if not math.isnan(c) else math.nan
        return Readout(new, readout.parsed, readout.kind, readout.abstain,
                       {**readout.extras, "base_confidence": c, "n_train": int(fitted["n_train"])})


def _expit(x: Any) -> Any:
    """scipy.special.expit without importing scipy (numerically stable logistic)."""
    import numpy as np  # lazy: as in _dev_xy

    x = np.asarray(x, dtype=float)
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1.0, e) / (1.0 + e)
