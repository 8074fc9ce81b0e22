"""Self-consistency confidence (study 003, App. D.3).

``reference=first_sample`` (003): "we generate 10 independent responses for each question using
the same answer-generation prompt and decoding setup" and the confidence is
``c = Σ_{k=1..K} 1[â_k = â_1] / K``, the agreement of the K runs with the FIRST run. Run 1 is the
cell's scored answer (the answer request, sampled with the variant's decoding; 003's Tables
10-14 give one accuracy per model for all three methods, so the scored answer is shared): the
protocol draws the other K-1 runs (role ``samples``: one ``generate`` request with ``n=k-1`` at
``temperature`` / ``top_p``), K responses per item in all, not K+1. The samples' request seed is
``ItemCtx.sampling_seed("self_consistency", base=seed)`` (the protocol's seed, else the model's):
per item, and never the scored answer's (``"answer"``), so run 2 is not a copy of run 1. The
item is skipped (NaN, ``parsed=False``) when run 1 has no extracted answer (003:
``is_attempted=False``); a missing answer in a later run stays in the denominator.

``reference=answer``: the protocol draws K samples (``n=k``) and the confidence is their agreement
with the evaluator's answer of the scored generation, ``c = Σ_k 1[â_k = pred] / K`` (the scored
answer is not one of the K; study 002's sampled answers for A-STB / A-SST use this form).

Extraction and comparison: the runner passes the cell evaluator's extraction as
``read(..., extract=fn)`` (``fn(text) -> answer or None``) and optionally an equivalence
``same=fn(a, b) -> bool``. Without them: multiple choice / classification answers are
extracted with study 000's ``extract_pred_letter`` and compared as letters; free-form answers
are the first line with answer prefixes removed (``extract_answer(text, "first_line")``) and
compared after study 001's normalisation (``normalize_answer``) for equality.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from auditlang.core.requests import Request, Result
from auditlang.protocols.facts import Fact, na, sampling_terms
from auditlang.protocols.base import ItemCtx, Program, Readout, generated_text, usable
from auditlang.evaluators.letters import extract_pred_letter
from auditlang.evaluators.string_match import extract_answer
from auditlang.evaluators.string_match import normalize_answer

Extract = Callable[[str], Any]
Same = Callable[[Any, Any], bool]


def default_extract(ctx: ItemCtx) -> Extract:
    """Letters for labelled items, first-line answers for free-form QA (see the module docstring)."""
    labels = ctx.valid_labels()
    if labels and ctx.task in ("multiple_choice", "classification"):

        def letter(text: str) -> Any:
            out = extract_pred_letter(text, labels)
            return out.value if out.ok else None

        return letter

    def first(text: str) -> Any:
        out = extract_answer(text, "first_line")
        return out.value if out.ok else None

    return first


def default_same(a: Any, b: Any) -> bool:
    """Equal after study 001 normalisation (strings) or equal (anything else); None never matches."""
    if a is None or b is None:
        return False
    if isinstance(a, str) and isinstance(b, str):

        na, nb = normalize_answer(a), normalize_answer(b)
        return bool(na) and na == nb
    return a == b


def agreement(answers: list[Any], reference: Any, same: Same) -> float:
    """Fraction of ``answers`` equivalent to ``reference`` (NaN when the reference is missing)."""
    if reference is None or not answers:
        return math.nan
    return sum(1 for a in answers if same(a, reference)) / len(answers)


def _further(n: int) -> str:
    """Runs 2..n+1 of a first_sample protocol, as a sentence names them (k >= 2, so n >= 1)."""
    return "run 2 a further sample" if n == 1 else f"runs 2-{n + 1} being {n} further samples"


def _sampling(p) -> str:
    """The samples' decoding, as the report's decoding sentences name it (``sampling_terms``)."""
    return ", ".join(sampling_terms(p.temperature, p.top_p, p.sample_top_k))


class SelfConsistencyProgram(Program):
    """``self_consistency(k, temperature, top_p, sample_top_k, seed, max_tokens, reference)``."""

    accepts_extract = True

    def facts(self, chat: bool) -> dict[str, Fact]:
        p, what = self.p, "self_consistency"
        runs = (f"share of k={p.k} runs (temperature {p.temperature}, top_p {p.top_p}) that agree" if p.reference ==
                "first_sample" else f"share of k={p.k} samples (temperature {p.temperature}, top_p {p.top_p}) that agree")
        return {
            "signal": Fact("self-consistency"),
            "provenance": na(what, "no confidence prompt"),
            "scored": Fact("the scored answer is run 1 of the k runs; confidence = agreement with it (reference="
                           "first_sample, 003 App. D.3)" if p.reference == "first_sample" else
                           "agreement of k further samples with the scored answer (reference=answer)",
                           params=("reference",)),
            "readout": na(what, runs),
            "context": Fact("the variant prompt, sampled", value=("answer_prompt", "chat" if chat else "text")),
            "normalisation": na(what, "a share of agreeing runs"),
            # first_sample: the k runs include the scored answer itself (run 1), so only k-1 are sampled here
            "measure": Fact(f"the share of k={p.k} runs that agree with the scored answer, run 1 being the scored answer "
                            f"itself and {_further(p.k - 1)} ({_sampling(p)})"
                            if p.reference == "first_sample" else
                            f"the agreement of {p.k} further sampled answers ({_sampling(p)}) with the scored answer"),
        }

    def stage1_roles(self) -> dict[str, str]:
        return {"samples": "generate"}

    def sample_count(self) -> int:
        """Samples the protocol draws per item: K-1 when the scored answer is run 1
        (``reference=first_sample``), else K."""
        return self.p.k - 1 if self.p.reference == "first_sample" else self.p.k

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        p = self.p
        seed = ctx.request_seed(p.temperature, "self_consistency", base=p.seed)
        return {"samples": Request.make(ctx.model.id, "generate", ctx.prompt(), seed=seed, n=self.sample_count(),
                                        temperature=p.temperature, top_p=p.top_p, top_k=p.sample_top_k,
                                        max_tokens=p.max_tokens or ctx.answer_max_tokens, top_logprobs=0)}

    def answer_conditioned(self) -> bool:
        return True

    def candidate_requests(self, ctx: ItemCtx, results: dict[str, Result], answer_text: str, pred: Any) -> dict[str, Request]:
        return {}  # the model's own samples are compared with the candidate: nothing to run

    def read_candidate(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, *,
                       extract: Extract | None = None, same: Same | None = None) -> Readout:
        """A supplied candidate's confidence: the fraction of the model's K samples whose answer
        is equivalent to the candidate's (study 003 leaves how self-consistency scores another
        model's candidate unspecified; this is the natural reading, ``c = Σ_k 1[â_k = s] / K``).
        With ``reference=first_sample`` the K runs are the model's own scored answer and its K-1
        samples."""
        ext = extract or default_extract(ctx)
        ref = ext(answer_text) if pred is None else pred
        return self._agreement(ctx, results, ref, "candidate", ext, same, "the candidate has no extracted answer")

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, *,
             extract: Extract | None = None, same: Same | None = None) -> Readout:
        ref = None if self.p.reference == "first_sample" else pred  # first_sample: set from the answers
        return self._agreement(ctx, results, ref, self.p.reference, extract or default_extract(ctx), same,
                               "reference answer missing (not attempted)")

    def _agreement(self, ctx: ItemCtx, results: dict[str, Result], ref: Any, ref_kind: str, ext: Extract,
                   same: Same | None, why_missing: str) -> Readout:
        """Agreement of the K extracted runs with ``ref`` (run 1's answer when ``ref_kind`` is
        ``first_sample``); a missing run stays in the denominator (003)."""
        kind = self.obj.ctor
        res = usable(results, "samples")
        first = self.p.reference == "first_sample"
        if res is None or (not res.samples and not first):
            return Readout(math.nan, False, kind, extras={"reason": "no samples"})
        answers = [ext(s.text or "") for s in res.samples or ()]
        if first:  # run 1 is the scored answer, the protocol's samples are runs 2..K
            own = usable(results, "answer")
            if own is None:
                return Readout(math.nan, False, kind, extras={"reason": "no scored answer (run 1)"})
            answers = [ext(generated_text(own))] + answers
        answers += [None] * (self.p.k - len(answers))
        if ref_kind == "first_sample":
            ref = answers[0]
        else:
            ref = ref.strip() if isinstance(ref, str) else ref
            ref = ref if ref not in ("", None) else None
        extras = {"answers": answers, "reference": ref, "reference_kind": ref_kind, "k": len(answers)}
        if len(res.samples or ()) != self.sample_count():
            extras["samples_returned"] = len(res.samples or ())
        conf = agreement(answers, ref, same or default_same)
        if math.isnan(conf):
            extras.setdefault("reason", why_missing)
            return Readout(math.nan, False, kind, extras=extras)
        return Readout(conf, True, kind, extras=extras)
