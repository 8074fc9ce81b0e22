"""Token-probability confidence (studies 000 and 001), every axis explicit.

``readout=first_token`` (study 000, §3 and appendix A.2-A.3): a *dedicated* greedy call on the
variant prompt with ``max_tokens=1`` and a top-k logprob window (``window=top_k``; the paper
uses ``logprobs=200``), or the full-vocabulary logprobs of the label tokens
(``window=full``, a ``choice_logprobs`` request). With ℓ* the predicted label and L the valid
labels observed in the window:

    p_raw  = P(ℓ*)                    (000 A.3 eq. 1)
    p_norm = P(ℓ*) / Σ_{ℓ∈L} P(ℓ)     (000 A.3 eq. 2, the main ECE_token)

computed by :func:`auditlang.metrics.token.token_confidence` (labels missing from the window
carry zero mass). ℓ* is the evaluator's predicted label when it is a valid label (000 A.3:
"label_token_probs" shares its logic with ``extract_pred_letter``); otherwise -- e.g. a CoT
answer whose first character is not a letter, which 000 leaves unspecified -- it is the most
probable valid label in the window (``extras["label_source"] = "window_argmax"``), and NaN
when no valid label is in the window. For free-form QA (no labels) only ``normalise=raw`` is
meaningful: the confidence is the probability of the greedy first token.

``readout=T1 / T2`` (study 001, §3.1 and the C2-C4 checklist items of §4.3): teacher-forced
scoring (``continuation_logprobs``) of an answer string a_1..a_L under a context h:

    T1 = exp((1/L) Σ_i log p(a_i | h, a_<i))     T2 = p(a_1 | h)

``scored=generated`` scores the evaluator's extracted answer (stage 2, it needs the
generation); ``scored=gold`` scores the gold string (stage 1; 001 C2: "append the gold string
to the bare query and read its probability in one forward pass"). ``context=bare`` scores
after the answer prompt itself; ``context=verbal_prefix`` after the verbalized prompt
(``prefix`` template, default the variant prompt) with the answer in its ``Guess:`` slot
(``prefill`` template, default the literal ``Guess:``; 001 §3.2 configuration B, App. C).
Leading whitespace-only tokens of the continuation are not answer tokens and are skipped.

``source=generation`` (T1 / T2 with ``scored=generated, context=bare`` only): no request; the
readout uses the token logprobs the answer generation itself returned, over the whole generated
text (study 002 App. A.3: GPT-4o serves no input logprobs, so its Prob. is "based on the generated
output sequences"). It scores a supplied answer only when it is the model's own sampled
generation (002's A-STB / A-SST samples), whose token logprobs the cross stage passes along;
another model's or another prompt's answer gets NaN.
"""

from __future__ import annotations

import math
from typing import Any

from auditlang.core.requests import Prompt, Request, Result
from auditlang.protocols.base import OWN_GENERATION, ItemCtx, Program, Readout, invariant, lead_space, usable
from auditlang.protocols.facts import Fact, label_form_text, na

GUESS_SLOT = "Guess:"  # study 001 §3.3: the answer sits in the "Guess:" slot of the Tian et al. format


def first_token_window(res: Result | None, k: int | None = None) -> tuple[dict[str, float], str | None, float | None]:
    """(top-k window, greedy token, its logprob) of the first generated position of ``res``;
    ``k``: keep only the k most probable entries (a folded request may carry a wider window)."""
    if res is None or not res.samples or not res.samples[0].tokens:
        return {}, None, None
    tok = res.samples[0].tokens[0]
    top = tok.top if k is None or len(tok.top) <= k else dict(sorted(tok.top.items(), key=lambda kv: -kv[1])[:k])
    window = dict(top)
    if tok.token not in window:
        window[tok.token] = tok.logprob
    return window, tok.token, tok.logprob


def pick_label(pred: Any, labels: list[str], window: dict[str, float],
               probs: dict[str, float] | None = None) -> tuple[str | None, str]:
    """ℓ* and where it came from: the evaluator's label if valid, else the window's argmax label
    (``probs``: the window's ``label_probs``, when the caller has them)."""
    if isinstance(pred, str) and pred.strip() in labels:
        return pred.strip(), "evaluator"
    if probs is None:
        from auditlang.metrics.token import label_probs  # lazy: numpy at scoring only, so `auditc check` loads none

        probs = label_probs(window, labels)
    if not probs:
        return None, "none"
    best = max(probs.items(), key=lambda kv: (kv[1], -labels.index(kv[0])))
    return best[0], "window_argmax"


def label_choices(prompt: Prompt, labels: list[str], label_form: str = "auto") -> list[str]:
    """Label strings as the engine scores them after ``prompt``: ``auto`` follows ``lead_space``,
    ``space`` is always ``" A"``, ``bare`` always ``"A"``."""
    sp = {"space": " ", "bare": ""}.get(label_form, None)
    if sp is None:
        sp = lead_space(prompt)
    return [sp + lab for lab in labels]


def form_window(window: dict[str, float], label_form: str) -> dict[str, float]:
    """The top-k window restricted to one token form of the labels (``auto``: every form, which
    ``label_probs`` then sums): ``space`` keeps tokens ``" X"``, ``bare`` tokens ``"X"``."""
    if label_form == "space":
        return {k: v for k, v in window.items() if k[:1] == " " and k[1:] == k.strip()}
    if label_form == "bare":
        return {k: v for k, v in window.items() if k == k.strip()}
    return window


def first_token_readout(labels: list[str] | None, window: dict[str, float], pred: Any,
                        greedy: tuple[str | None, float | None], normalise: str, kind: str) -> Readout:
    """Confidence of study 000 A.3 eqs. 1-2 from one window (shared by TokProbProbe)."""
    if not labels:
        if normalise != "raw":
            return Readout(math.nan, False, kind, extras={"reason": "label-set normalisation needs option labels"})
        tok, lp = greedy
        if tok is None or lp is None:
            return Readout(math.nan, False, kind, extras={"reason": "no first token"})
        p = math.exp(lp)
        return Readout(p, True, kind, extras={"p_raw": p, "p_norm": math.nan, "token": tok})
    from auditlang.metrics.token import confidence_from_probs, label_probs  # lazy: as in pick_label

    probs = label_probs(window, labels)  # once: the label, the confidence and the extras read it
    star, source = pick_label(pred, labels, window, probs)
    tc = confidence_from_probs(probs, labels, star)
    conf = tc.raw if normalise == "raw" else tc.norm
    extras = {"p_raw": tc.raw, "p_norm": tc.norm, "label": star, "label_source": source,
              "labels_present": tc.labels_present, "full_coverage": tc.full_coverage,
              "label_probs": dict(probs)}
    return Readout(conf, not math.isnan(conf), kind, extras=extras)


class TokenProgram(Program):
    """``token_prob(readout, normalise, window, top_k, scored, context, prefix, prefill, max_tokens)``."""
    reliability_diagram = "token"

    def __init__(self, obj, spec) -> None:
        super().__init__(obj, spec)
        p = self.p
        if p.readout == "first_token":
            invariant(p.scored == "generated" and p.context == "bare",
                      f"protocol '{obj.id}': scored/context apply to readout=T1 or T2")
        else:
            invariant(p.context != "bare" or not (p.prefix or p.prefill),
                      f"protocol '{obj.id}': prefix/prefill are used only with context=verbal_prefix")
        invariant(p.source != "generation" or (p.readout != "first_token" and p.scored == "generated"
                                                and p.context == "bare"),
                  f"protocol '{obj.id}': source=generation needs readout=T1/T2, scored=generated, context=bare")

    def facts(self, chat: bool) -> dict[str, Fact]:
        return _token_facts(self, chat)

    # ------------------------------------------------------------------ roles
    def _score_role(self) -> dict[str, str]:
        return {"score": "continuation_logprobs"}

    def stage1_roles(self) -> dict[str, str]:
        p = self.p
        if p.readout == "first_token":
            return {"first": "generate"} if p.window == "top_k" else {"choice": "choice_logprobs"}
        return self._score_role() if p.scored == "gold" else {}

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        p = self.p
        teacher_forced = p.readout != "first_token" and p.scored == "generated" and p.source == "teacher_forced"
        return self._score_role() if teacher_forced else {}

    def answer_conditioned(self) -> bool:
        # source=generation scores a supplied answer only when it is the model's own sampled
        # generation (its token logprobs travel with it, role OWN_GENERATION); others get NaN
        return self.p.readout != "first_token" and self.p.scored == "generated"

    def read_candidate(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        if self.p.source != "generation":
            return super().read_candidate(ctx, results, pred, answer_text, **kw)
        own = usable(results, OWN_GENERATION)
        if own is None:
            return Readout(math.nan, False, self.obj.ctor, extras={
                "reason": "source=generation reads the generation's own token logprobs: it scores only the model's "
                          "own sampled answers, not another model's or another prompt's"})
        return self.read(ctx, {**results, "answer": own}, pred, answer_text)

    # ------------------------------------------------------------------ requests
    def _context_prompt(self, ctx: ItemCtx) -> Prompt:
        p = self.p
        if p.context == "bare":
            return ctx.prompt()
        user = ctx.user_text
        if p.prefix:
            user = ctx.render(self.template(p.prefix))
        slot = ctx.render(self.template(p.prefill)) if p.prefill else GUESS_SLOT
        return ctx.prefilled(user, slot)

    def _score_request(self, ctx: ItemCtx, answer: str) -> Request:
        prompt = self._context_prompt(ctx)
        return Request.make(ctx.model.id, "continuation_logprobs", prompt, seed=ctx.seed,
                            continuation=lead_space(prompt) + answer.strip())

    def first_window(self) -> int:
        """A one-token greedy call with a top-k window is the first decoding step of the greedy
        answer generation of the same prompt: the planner folds it into that request (which then
        carries ``first_top_logprobs``), so the engine runs one pass. Returns k, or 0."""
        p = self.p
        return p.top_k if p.readout == "first_token" and p.window == "top_k" and p.max_tokens == 1 else 0

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        p = self.p
        if p.readout == "first_token":
            if p.window == "top_k":
                if self.first_window() and ctx.extras.get("first_window", 0) >= p.top_k:
                    return {"first": ctx.answer_request()}  # folded (see first_window)
                return {"first": Request.make(ctx.model.id, "generate", ctx.prompt(), seed=ctx.seed,
                                              max_tokens=p.max_tokens, temperature=0.0, top_logprobs=p.top_k)}
            labels = ctx.valid_labels()
            if not labels:
                raise ValueError(f"protocol '{self.obj.id}': window=full scores the option labels, but item "
                                 f"{ctx.item.get('id')!r} of dataset '{ctx.dataset}' has no choices "
                                 "(hint: use readout=T1 or T2 for free-form QA)")
            prompt = ctx.prompt()
            return {"choice": Request.make(ctx.model.id, "choice_logprobs", prompt, seed=ctx.seed,
                                           choices=label_choices(prompt, labels, p.label_form), top_logprobs=p.top_k)}
        if p.scored == "gold":
            gold = ctx.gold_answer()
            if not gold or not gold.strip():
                raise ValueError(f"protocol '{self.obj.id}': scored=gold but item {ctx.item.get('id')!r} of "
                                 f"dataset '{ctx.dataset}' has no gold answer")
            return {"score": self._score_request(ctx, gold)}
        return {}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        p = self.p
        if p.readout == "first_token" or p.scored == "gold" or p.source == "generation":
            return {}
        if not isinstance(pred, str) or not pred.strip():
            return {}  # nothing extracted: no answer tokens to score (read() gives NaN)
        return {"score": self._score_request(ctx, pred)}

    # ------------------------------------------------------------------ readout
    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        p = self.p
        kind = self.obj.ctor
        if p.readout == "first_token":
            labels = ctx.valid_labels()
            if p.window == "top_k":
                res = usable(results, "first")
                if res is None:
                    return Readout(math.nan, False, kind, extras={"reason": "no first-token result"})
                window, tok, lp = first_token_window(res, p.top_k)
                window = form_window(window, p.label_form)
                out = first_token_readout(labels, window, pred, (tok, lp), p.normalise, kind)
                out.extras["window_size"] = len(window)
                return out
            res = usable(results, "choice")
            if res is None or not res.choice_logprobs:
                return Readout(math.nan, False, kind, extras={"reason": "no label logprobs"})
            window = {k.strip(): v for k, v in res.choice_logprobs.items()}
            return first_token_readout(labels, window, pred, (None, None), p.normalise, kind)
        if p.source == "generation":
            res = usable(results, "answer")
            if res is None or not res.samples or not res.samples[0].tokens:
                return Readout(math.nan, False, kind, extras={"reason": "the answer generation returned no token logprobs"})
            toks = list(res.samples[0].tokens)
        else:
            res = usable(results, "score")
            if res is None or not res.continuation:
                return Readout(math.nan, False, kind, extras={"reason": "no scored answer"})
            toks = list(res.continuation)
        while toks and not toks[0].token.strip():
            toks = toks[1:]
        if not toks:
            return Readout(math.nan, False, kind, extras={"reason": "answer has only whitespace tokens"})
        lps = [min(t.logprob, 0.0) for t in toks]
        from auditlang.metrics.token import span_confidence  # lazy: numpy at scoring only (see pick_label)

        conf = span_confidence(lps, p.readout)
        return Readout(conf, True, kind, extras={
            "readout": p.readout, "n_tokens": len(lps), "token_logprobs": lps,
            "tokens": [t.token for t in toks], "scored": p.scored, "context": p.context, "source": p.source,
        })


def _token_facts(self: TokenProgram, chat: bool) -> dict[str, Fact]:
    """The facts of a ``token_prob`` protocol (Program.facts), from its parameters."""
    p, what = self.p, "token_prob"
    out = {"provenance": na(what, "token probabilities involve no elicited or supplied answer"),
           "signal": Fact("token probability")}
    if p.readout == "first_token":
        win = f"window={p.window}" + (f", top_k={p.top_k}" if p.window == "top_k" else "")
        out["scored"] = Fact("readout=first_token: the valid labels' token probabilities at the first generated position "
                             "of the answer, whatever token the answer starts with (it need not be the answer letter)",
                             run=("label_start_share",))
        out["readout"] = Fact(f"first-token probability of the predicted label ({win})", params=("readout",),
                              run=("window_source", "argmax_rows"), value="first_token")
        out["labels"] = Fact(f"label token form: {label_form_text(p)} (label_form={p.label_form})",
                             value=p.label_form, run=("sent_labels",) if p.window == "full" else ())
        out["context"] = Fact("bare query: the variant prompt itself", value=("answer_prompt", "chat" if chat else "text"))
        out["normalisation"] = Fact(
            f"normalise={p.normalise}" + (" (p_norm = P(l*) / sum over valid labels in the window)" if p.normalise ==
                                          "label_set" else " (raw probability P(l*))") + f", {win}",
            params=("normalise",) + (("top_k",) if p.window == "top_k" else ()),
            run=("label_coverage",) if p.window == "top_k" else ())
        if p.window != "top_k":
            out["normalisation"] = Fact(out["normalisation"].text + "; full-vocabulary label logprobs: every valid label "
                                        "is scored (coverage complete by construction)", params=("normalise",))
        norm = "normalised over the valid labels" if p.normalise == "label_set" else "unnormalised"
        window = f"top-{p.top_k} logprob window" if p.window == "top_k" else "full-vocabulary label logprobs"
        out["measure"] = Fact(f"the first-token probability of the predicted label, {norm} ({window}; "
                              f"{label_form_text(p)})")
        return out
    if p.source == "generation":
        out["scored"] = Fact("scored=generated, source=generation: the whole generated answer, read from the token "
                             "logprobs the answer generation returned (no teacher forcing; study 002 App. A.3)")
    else:
        out["scored"] = Fact(f"scored={p.scored}: " + ("the evaluator's extracted answer from the model's generation, "
                             "teacher-forced" if p.scored == "generated" else "the gold answer string, teacher-forced (TF)"),
                             params=("scored",))
    out["readout"] = Fact({"T1": "T1 = exp(mean log p(a_i | h, a_<i)), the answer-span geometric mean",
                           "T2": "T2 = p(a_1 | h), the first answer token"}[p.readout], params=("readout",), value=p.readout)
    if p.context == "verbal_prefix":
        out["context"] = Fact(f"context=verbal_prefix; prefix template {p.prefix or '(the variant prompt)'}, answer slot "
                              f"{p.prefill or 'Guess:'} (an assistant prefill under a chat template, appended text "
                              "otherwise)", params=("context",), value=("prefill", "chat" if chat else "text"))
    else:
        out["context"] = Fact("context=bare: the bare answer prompt", params=("context",),
                              value=("answer_prompt", "chat" if chat else "text"))
    out["normalisation"] = na(f"token_prob with readout={p.readout}", "the answer span is scored by teacher forcing over "
                              "the full vocabulary (no label set, no top-k window)")
    span = ("geometric-mean token probability of the answer span (T1)" if p.readout == "T1"
            else "probability of the answer's first token (T2)")
    whose = "the gold answer" if p.scored == "gold" else "the model's extracted answer"
    ctx = "after a verbal-confidence prefix" if p.context == "verbal_prefix" else "after the bare question"
    how = "from the generation's own logprobs" if p.source == "generation" else "teacher-forced"
    out["measure"] = Fact(f"the {span} of {whose}, {how} {ctx}")
    return out

