"""Verbalized confidence and P(True): the model is shown an answer and asked about it.

Prompt layouts (chosen from the parameters; docs/protocols.md shows each):

* ``followup`` -- [answer prompt, answer, follow-up text] via :meth:`ItemCtx.followup`
  (study 000 §3 and App. B.2: "a follow-up call" after "the model's own completed answer";
  study 002 §5 VC). Used when the phrasing template does not read the answer itself.
* ``single`` -- one user turn rendered from the template with ``generation`` and
  ``proposed_answer`` set to the answer (study 003 App. D.3, Tables 5-6: question +
  ``Proposed Answer: {full model_response}`` + elicitation; study 004 App. A.3, Table 5
  AskCal/MoreInfo/SelfRef: the guess fills ``Guess: {response1}``).
* ``prefill`` -- the verbalized prompt (``phrasing``, default the variant prompt) answered by
  an assistant prefill holding the answer (``prefill`` template with ``proposed_answer``), so
  the model writes only the probability (study 001 §3.3 supplied-answer diagnostic).
* ``joint`` -- study 001 §3.1 self condition: ``Guess:`` and ``Probability:`` in one
  generation; without ``phrasing`` the answer generation itself is parsed (the cell's variant
  is the verbalized prompt), with ``phrasing`` a separate stage-1 generation is made.

Provenance of the answer shown (study 001 C1, §3.3): ``self`` (the model's own generation,
stage 2), ``gold`` (the gold letter for multiple choice / classification, the gold text for
free-form QA), ``off_type`` (the gold answer text of another item of the same dataset whose
gold differs from this item's gold and aliases), ``plausible_wrong`` (a wrong option letter
for multiple choice; for free-form QA one of the item's ``incorrect_answers``, falling back to
off-type when it has none -- 001 uses off-type "only as a fallback"). Supplied answers need no
generation, so their requests are stage 1. Every random pick is seeded by
``random.Random("<provenance>|<model seed>|<dataset>|<item id>")``: all protocols of a spec see
the same supplied answer for an item. ``wrong_from=[models]`` takes the plausible-wrong answer
from another model's run instead (001 §3.3: "another model's incorrect guess for the same
question"): the first listed model other than the cell's own whose answer to the item is wrong
under the audit's first evaluator (its extracted answer is shown), else an off-type answer (001's
fallback); that request is built in the run's cross stage (auditlang/plan/crossdata.py).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from typing import Any

from auditlang.core.requests import Prompt, Request, Result
from auditlang.protocols.base import ItemCtx, Program, Readout, generated_text, invariant, usable
from auditlang.protocols.token import label_choices
from auditlang.protocols.facts import Fact, layout_context, na, template_fact
from auditlang.evaluators import VERBAL_PARSERS
from auditlang.evaluators.string_match import normalize_answer
from auditlang.data.loader import DataError, data_root_for, load_dataset
from auditlang.evaluators.string_match import extract_answer

ANSWER_VARS = ("generation", "proposed_answer")
POOL_KEY = "pool"  # ctx.extras[POOL_KEY]: items of the dataset, for off-type answers
WRONG_FROM_PREFIX = "wrong_from:"  # ctx.extras key prefix of the cross stage's wrong_from choice
_PROB_MARKER = re.compile(r"probability\s{0,3}:", re.IGNORECASE)


# ----------------------------------------------------------------------------- parsers


def verbal_parser(scale: str):
    """The score package's verbal parser for ``scale`` (``VERBAL_PARSERS`` registry)."""

    invariant(scale in VERBAL_PARSERS, f"no verbal parser for scale {scale!r}")  # tests: schema scales = parsers
    factory = VERBAL_PARSERS[scale]
    return factory() if isinstance(factory, type) else factory


def after_marker(text: str) -> str | None:
    """First non-empty line after the first ``Probability:`` (001 Tian et al. format), or None."""
    m = _PROB_MARKER.search(text)
    if m is None:
        return None
    return first_line(text[m.end():])


def first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip():
            return line.strip()
    return ""


# ----------------------------------------------------------------------------- supplied answers


def _rng(kind: str, ctx: ItemCtx) -> random.Random:
    return random.Random(f"{kind}|{ctx.seed}|{ctx.dataset}|{ctx.item.get('id')}")


def _norm(s: Any) -> str:

    return normalize_answer(str(s))


def off_type_answer(ctx: ItemCtx, pool: Sequence[dict[str, Any]]) -> str:
    """Gold answer text of another item whose gold differs from this item's gold and aliases."""
    own = {_norm(ctx.item.get("answer"))} | {_norm(a) for a in ctx.item.get("aliases") or []}
    rng = _rng("off_type", ctx)
    n = len(pool)
    for _ in range(200 if n > 1 else 0):
        other = pool[rng.randrange(n)]
        ans = other.get("answer")
        if other.get("id") == ctx.item.get("id") or ans is None or not _norm(ans) or _norm(ans) in own:
            continue
        return str(ans)
    raise ValueError(f"no off-type answer for item {ctx.item.get('id')!r} of dataset '{ctx.dataset}': "
                     "the dataset needs other items with a different gold answer")


def plausible_wrong_answer(ctx: ItemCtx, pool_fn) -> tuple[str, str]:
    """(answer, provenance used): a wrong option letter, an incorrect answer, or off-type."""
    rng = _rng("plausible_wrong", ctx)
    labels = ctx.valid_labels()
    gold = ctx.gold_answer()
    if ctx.task in ("multiple_choice", "classification") and labels and gold:
        wrong = [lab for lab in labels if lab != gold]
        if wrong:
            return rng.choice(wrong), "plausible_wrong"
    inc = [str(x) for x in ctx.item.get("incorrect_answers") or [] if str(x).strip()]
    if inc:
        return rng.choice(inc), "plausible_wrong"
    return off_type_answer(ctx, pool_fn(ctx)), "off_type"


class SuppliedAnswers:
    """Mixin: the answer a confidence prompt shows, by provenance (see the module docstring)."""

    p: Any
    spec: Any
    obj: Any

    def _check_provenance(self) -> None:
        invariant(not self.p.wrong_from or self.p.provenance == "plausible_wrong",  # E158
                  f"protocol '{self.obj.id}': wrong_from applies to provenance=plausible_wrong")

    def cross_supplied(self) -> bool:
        """True when the supplied answer is another model's wrong answer (``wrong_from``): the
        request is built in the run's cross stage, after the other models' answers exist."""
        return bool(self.p.wrong_from)

    def wrong_from_key(self) -> str:
        """``ctx.extras`` key of the cross stage's choice for this protocol: (answer, provenance
        used, model the answer came from or None)."""
        return f"{WRONG_FROM_PREFIX}{self.obj.id}"

    def cross_roles(self) -> dict[str, str]:
        """Names and kinds of the cross-stage requests (``wrong_from``), for plan-time counting."""
        return self.stage1_roles_supplied()

    def _pool(self, ctx: ItemCtx) -> Sequence[dict[str, Any]]:
        pool = ctx.extras.get(POOL_KEY)
        if pool:
            return pool
        cache = self.__dict__.setdefault("_pools", {})
        if ctx.dataset not in cache:

            try:
                cache[ctx.dataset] = load_dataset(self.spec, ctx.dataset, data_root_for(self.spec)).items
            except DataError as e:
                raise ValueError(f"protocol '{self.obj.id}': off-type answers need the items of dataset "
                                 f"'{ctx.dataset}' ({e})") from None
        return cache[ctx.dataset]

    def supplied(self, ctx: ItemCtx) -> tuple[str, str]:
        """(answer, provenance used) for a supplied provenance (not ``self``). With ``wrong_from``
        the cross stage has put its choice in ``ctx.extras`` (auditlang/plan/crossdata.py)."""
        prov = self.p.provenance
        if self.p.wrong_from:
            got = ctx.extras.get(self.wrong_from_key())
            if got is None:
                raise ValueError(f"internal: protocol '{self.obj.id}': the cross stage has not chosen the "
                                 f"supplied answer of item {ctx.item.get('id')!r}")
            return got[0], got[1]  # provenance "pending": another model's answer is not stored yet
        if prov == "gold":
            gold = ctx.gold_answer()
            if gold is None or not gold.strip():
                raise ValueError(f"protocol '{self.obj.id}': provenance=gold but item {ctx.item.get('id')!r} "
                                 f"of dataset '{ctx.dataset}' has no gold answer")
            return gold, "gold"
        if prov == "off_type":
            return off_type_answer(ctx, self._pool(ctx)), "off_type"
        if prov == "plausible_wrong":
            return plausible_wrong_answer(ctx, self._pool)
        raise ValueError(f"provenance {prov!r} is not a supplied answer")

    def own_answer(self, pred: Any, answer_text: str) -> str | None:
        """The model's answer as shown: the full generation, or the evaluator's answer."""
        if self.p.answer_form == "extracted":
            return pred.strip() if isinstance(pred, str) and pred.strip() else None
        return answer_text if answer_text.strip() else None


# ----------------------------------------------------------------------------- facts

SCALE_WORDS = {"decimal_01": "a decimal between 0 and 1", "percent_0_100": "a percentage from 0 to 100",
               "integer_0_100": "an integer from 0 to 100", "scale_0_10": "a number from 0 to 10",
               "linguistic": "a verbal expression of likelihood", "linguistic_mc": "a choice among likelihood phrases",
               "boxed_0_100": "a boxed number from 0 to 100"}
PROVENANCE_WORDS = {"gold": "the gold answer", "plausible_wrong": "a plausible wrong answer",
                    "off_type": "an off-type answer"}


class _Provenance(Fact):
    @property
    def value_text(self) -> str:
        return self.value[1]


def supplied_facts(prog) -> dict[str, Fact]:
    """Provenance (C1) and the scored answer (C2) of a program that shows an answer to the model."""
    p = prog.p
    prov = p.provenance
    own = "the model's own " + ("full answer" if p.answer_form == "full" else "extracted answer")
    about = own if prov == "self" else PROVENANCE_WORDS[prov]
    c1 = _Provenance(f"provenance={prov}" + (f" (wrong answers from model {', '.join(p.wrong_from)})" if p.wrong_from
                                            else "") + ("" if prov == "self" else " (supplied answer)"),
                     params=("provenance",), value=(prov, about))
    form = "full generation" if p.answer_form == "full" else "extracted answer"
    c2 = (Fact(f"the confidence refers to the model's {form} (answer_form={p.answer_form})", params=("answer_form",))
          if prov == "self" else Fact(f"the supplied answer ({prov})"))
    return {"provenance": c1, "scored": c2}


# ----------------------------------------------------------------------------- layouts


def uses_answer(tpl) -> bool:
    return bool(set(ANSWER_VARS) & set(tpl.variables))


def render_single(ctx: ItemCtx, tpl, answer: str) -> str:
    return tpl.render(ctx.template_context(generation=answer, proposed_answer=answer))


class VerbalProgram(SuppliedAnswers, Program):
    """``verbalized(scale, phrasing, parser, provenance, mode, max_tokens, prefill, answer_form)``."""
    reliability_diagram = "asked"

    verbal_parse = True

    def __init__(self, obj, spec) -> None:
        super().__init__(obj, spec)
        p = self.p
        self._check_provenance()
        self.phrasing = self.template(p.phrasing) if p.phrasing else None
        self.prefill_tpl = self.template(p.prefill) if p.prefill else None
        if p.mode == "joint":
            invariant(p.provenance == "self" and self.prefill_tpl is None,
                      f"protocol '{obj.id}': mode=joint takes no supplied answer and no prefill")
            self.layout = "joint_call" if self.phrasing is not None else "joint_answer"
        elif self.prefill_tpl is not None:
            self.layout = "prefill"
        else:
            invariant(self.phrasing is not None, f"protocol '{obj.id}': mode=followup needs phrasing=")
            self.layout = "single" if uses_answer(self.phrasing) else "followup"
        self.parser = verbal_parser(p.scale)

    def facts(self, chat: bool) -> dict[str, Fact]:
        p = self.p
        out = supplied_facts(self)
        out["signal"] = Fact("verbalized confidence")
        out["readout"] = na("verbalized", f"the confidence is a parsed number (scale {p.scale}, parser {p.parser})")
        out["parser"] = Fact(f"scale {p.scale}, parser {p.parser}: {self.parser.describe()}", params=("scale",),
                             value=p.scale)
        out["normalisation"] = na("verbalized", "the stated number is the confidence")
        ctx = layout_context(self.layout, chat, "the phrasing", self.phrasing, p.phrasing, prefill=p.prefill)
        out["context"] = Fact(ctx.text, params=("prefill",) if self.layout == "prefill" else ("mode",), value=ctx.value,
                              run=ctx.run, prose=ctx.prose)
        out["prompt"] = template_fact(self.phrasing, p.phrasing)
        out["measure"] = Fact(f"a stated confidence, {SCALE_WORDS.get(p.scale, f'on the {p.scale} scale')}, about "
                              f"{out['provenance'].value_text}")
        return out

    # ------------------------------------------------------------------ roles
    def _staged(self) -> int:
        """0: read from the answer; 1: stage 1; 2: stage 2 (own answer); 3: cross stage (wrong_from)."""
        if self.layout == "joint_answer":
            return 0
        if self.layout == "joint_call" or self.p.provenance != "self":
            return 3 if self.p.wrong_from else 1
        return 2

    def stage1_roles(self) -> dict[str, str]:
        return {"verbal": "generate"} if self._staged() == 1 else {}

    def stage1_roles_supplied(self) -> dict[str, str]:
        return {"verbal": "generate"}

    def supplied_requests(self, ctx: ItemCtx, answer: str) -> dict[str, Request]:
        """The request eliciting confidence in a supplied ``answer``."""
        return {"verbal": self._request(ctx, self.prompt_for(ctx, answer))}

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return {"verbal": "generate"} if self._staged() == 2 else {}

    def answer_conditioned(self) -> bool:
        return self._staged() == 2

    # ------------------------------------------------------------------ requests
    def prompt_for(self, ctx: ItemCtx, answer: str) -> Prompt:
        if self.layout == "prefill":
            user = ctx.render(self.phrasing) if self.phrasing else ctx.user_text
            slot = self.prefill_tpl.render(ctx.template_context(proposed_answer=answer.strip(), generation=answer))
            return ctx.prefilled(user, slot)
        if self.layout == "single":
            return ctx.prompt(render_single(ctx, self.phrasing, answer))
        return ctx.followup(answer, ctx.render(self.phrasing))

    def _request(self, ctx: ItemCtx, prompt: Prompt) -> Request:
        p = self.p
        seed = ctx.request_seed(p.temperature, "verbal")  # sampled: per item and purpose
        return Request.make(ctx.model.id, "generate", prompt, seed=seed, max_tokens=p.max_tokens,
                            temperature=p.temperature, top_p=p.top_p if p.temperature > 0 else None,
                            top_k=p.sample_top_k if p.temperature > 0 else None, top_logprobs=0)

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        if self._staged() != 1:
            return {}
        if self.layout == "joint_call":
            return {"verbal": self._request(ctx, ctx.prompt(ctx.render(self.phrasing)))}
        answer, _ = self.supplied(ctx)
        return {"verbal": self._request(ctx, self.prompt_for(ctx, answer))}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        if self._staged() != 2:
            return {}
        answer = self.own_answer(pred, generated_text(usable(results, "answer")))
        if answer is None:
            return {}
        return {"verbal": self._request(ctx, self.prompt_for(ctx, answer))}

    # ------------------------------------------------------------------ readout
    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        kind = self.obj.ctor
        extras: dict[str, Any] = {"layout": self.layout, "provenance": self.p.provenance, "scale": self.p.scale}
        if self.p.provenance != "self":
            extras["supplied"], extras["provenance_used"] = self.supplied(ctx)
            if self.p.wrong_from:
                extras["wrong_from_model"] = ctx.extras[self.wrong_from_key()][2]
        if self.layout == "joint_answer":
            text = answer_text
        else:
            res = usable(results, "verbal")
            if res is None:
                extras["reason"] = "no verbal result"
                return Readout(math.nan, False, kind, extras=extras)
            text = generated_text(res)
        extras["text"] = text
        if self.layout in ("joint_answer", "joint_call"):

            guess = extract_answer(text, "guess")
            extras["guess"] = guess.value if guess.ok else None
            segment = after_marker(text)
        elif self.layout == "prefill":
            segment = first_line(text)
        else:
            segment = text
        if segment is None:
            extras["rule"] = "no_probability_marker"
            return Readout(math.nan, False, kind, extras=extras)
        out = self.parser.parse(segment)
        extras["rule"] = out.rule
        if not out.ok or out.value is None:
            return Readout(math.nan, False, kind, extras=extras)
        return Readout(float(out.value), True, kind, extras=extras)


class PTrueProgram(SuppliedAnswers, Program):
    """``p_true(template, provenance, labels, normalise, top_k, answer_form)``.

    Study 003 App. D.3 (Table 6, binary verification): read the log-probability of token "A"
    (True) and exponentiate, **not** normalised against "B" (``normalise=false``; 003 requests
    ``logprobs=20`` and leaves A outside the top-20 unspecified -- a ``choice_logprobs`` request
    reads the full-vocabulary value, which equals 003's read whenever A is in the window).
    Study 002 §5 uses "the normalized probability of the True token": ``normalise=true`` gives
    P(true label) / Σ_labels P(label). Labels are scored as their first token after the prompt
    (``lead_space`` convention).
    """
    reliability_diagram = "asked"

    def __init__(self, obj, spec) -> None:
        super().__init__(obj, spec)
        p = self.p
        self._check_provenance()
        invariant(bool(p.template), f"protocol '{obj.id}': p_true needs template=")
        invariant(len(p.labels) >= 2 and len(set(p.labels)) == len(p.labels),
                  f"protocol '{obj.id}': labels must be at least two distinct strings")
        self.tpl = self.template(p.template)
        self.layout = "single" if uses_answer(self.tpl) else "followup"

    label_role = "p_true"  # the request whose ``choices`` are the label strings sent (report: sent_labels)

    def facts(self, chat: bool) -> dict[str, Fact]:
        p = self.p
        out = supplied_facts(self)
        out["signal"] = Fact("P(True)")
        first = f"the true label, the first of the spec's labels {json.dumps(list(p.labels))}"
        out["readout"] = Fact((f"probability of {first}, at the next token, normalised over all labels" if p.normalise
                               else f"raw probability of {first}, at the next token") + f" (top_k={p.top_k}; the "
                              "label strings as sent follow)",
                              params=("normalise",), value=p.normalise)
        out["labels"] = Fact("label strings scored as the first token after the prompt, each with a leading space "
                             "when the prompt ends in a non-space character and no chat generation prompt follows "
                             "(protocols/base.py lead_space)", run=("sent_labels",), value=tuple(p.labels))
        out["normalisation"] = Fact(f"normalise={str(p.normalise).lower()}: " + (
            "P(true label) / sum over the labels" if p.normalise else "the raw probability of the true label"),
            params=("normalise",))
        ctx = layout_context(self.layout, chat, "the template", self.tpl, p.template)
        out["context"] = ctx
        out["prompt"] = template_fact(self.tpl, p.template)
        norm = "normalised over the labels" if p.normalise else "unnormalised"
        out["measure"] = Fact(f"the probability of the true label, the first of the spec's labels {json.dumps(list(p.labels))} "
                              f"({norm}), for "
                              f"{out['provenance'].value_text}", run=("sent_labels",))
        return out

    def _staged(self) -> int:
        if self.p.provenance == "self":
            return 2
        return 3 if self.p.wrong_from else 1

    def stage1_roles(self) -> dict[str, str]:
        return {"p_true": "choice_logprobs"} if self._staged() == 1 else {}

    def stage1_roles_supplied(self) -> dict[str, str]:
        return {"p_true": "choice_logprobs"}

    def supplied_requests(self, ctx: ItemCtx, answer: str) -> dict[str, Request]:
        """The request scoring a supplied ``answer``."""
        return {"p_true": self._request(ctx, answer)}

    def roles2(self, ctx: ItemCtx) -> dict[str, str]:
        return {"p_true": "choice_logprobs"} if self._staged() == 2 else {}

    def answer_conditioned(self) -> bool:
        return self._staged() == 2

    def _request(self, ctx: ItemCtx, answer: str) -> Request:
        if self.layout == "single":
            prompt = ctx.prompt(render_single(ctx, self.tpl, answer))
        else:
            prompt = ctx.followup(answer, ctx.render(self.tpl))
        return Request.make(ctx.model.id, "choice_logprobs", prompt, seed=ctx.seed,
                            choices=label_choices(prompt, list(self.p.labels)), top_logprobs=self.p.top_k)

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        if self._staged() != 1:
            return {}
        return {"p_true": self._request(ctx, self.supplied(ctx)[0])}

    def stage2(self, ctx: ItemCtx, results: dict[str, Result], pred: Any) -> dict[str, Request]:
        if self._staged() != 2:
            return {}
        answer = self.own_answer(pred, generated_text(usable(results, "answer")))
        return {} if answer is None else {"p_true": self._request(ctx, answer)}

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str) -> Readout:
        kind = self.obj.ctor
        extras: dict[str, Any] = {"provenance": self.p.provenance, "normalise": self.p.normalise}
        if self.p.provenance != "self":
            extras["supplied"], extras["provenance_used"] = self.supplied(ctx)
            if self.p.wrong_from:
                extras["wrong_from_model"] = ctx.extras[self.wrong_from_key()][2]
        res = usable(results, "p_true")
        if res is None or not res.choice_logprobs:
            extras["reason"] = "no label logprobs"
            return Readout(math.nan, False, kind, extras=extras)
        by_label = {k.strip(): v for k, v in res.choice_logprobs.items()}
        missing = [lab for lab in self.p.labels if lab.strip() not in by_label]
        if missing:
            extras["reason"] = f"labels {missing} missing from the result"
            return Readout(math.nan, False, kind, extras=extras)
        probs = {lab: math.exp(by_label[lab.strip()]) for lab in self.p.labels}
        true_p = probs[self.p.labels[0]]
        total = sum(probs.values())
        extras.update(label_probs=probs, p_raw=true_p, p_norm=true_p / total if total > 0 else math.nan)
        conf = extras["p_norm"] if self.p.normalise else true_p
        return Readout(conf, not math.isnan(conf), kind, extras=extras)
