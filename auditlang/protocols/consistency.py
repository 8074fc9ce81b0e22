"""Self-consistency confidence (study 003, App. D.3).

Stage 1 (role ``samples``): k independent responses to the same answer prompt, one
``generate`` request with ``n=k`` at ``temperature`` / ``top_p`` and the protocol's seed (003:
k=10, temperature 1.0, top_p 1.0, the answer prompt's own decoding).

Readout with ``reference=first_sample`` (003): ``c = Σ_{k=1..K} 1[â_k = â_1] / K`` -- the
agreement of the K extracted answers with the first sample's answer, the first sample counting
itself. The item is skipped (NaN, ``parsed=False``) when sample 1 has no extracted answer
(003: ``is_attempted=False``); a missing answer in a later sample stays in the denominator.
``reference=answer``: agreement of the K samples with the evaluator's answer of the greedy
generation, ``c = Σ_k 1[â_k = pred] / K``.

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
from auditlang.protocols.base import ItemCtx, Program, Readout, usable

Extract = Callable[[str], Any]
Same = Callable[[Any, Any], bool]


def default_extract(ctx: ItemCtx) -> Extract:
    """Letters for labelled items, first-line answers for free-form QA (see the module docstring)."""
    labels = ctx.valid_labels()
    if labels and ctx.task in ("multiple_choice", "classification"):
        from auditlang.evaluators.letters import extract_pred_letter

        def letter(text: str) -> Any:
            out = extract_pred_letter(text, labels)
            return out.value if out.ok else None

        return letter
    from auditlang.evaluators.string_match import extract_answer

    def first(text: str) -> Any:
        out = extract_answer(text, "first_line")
        return out.value if out.ok else None

    return first


def default_same(a: Any, b: Any) -> bool:
    """Equal after study 001 normalisation (strings) or equal (anything else); None never matches."""
    if a is None or b is None:
        return False
    if isinstance(a, str) and isinstance(b, str):
        from auditlang.evaluators.string_match import normalize_answer

        na, nb = normalize_answer(a), normalize_answer(b)
        return bool(na) and na == nb
    return a == b


def agreement(answers: list[Any], reference: Any, same: Same) -> float:
    """Fraction of ``answers`` equivalent to ``reference`` (NaN when the reference is missing)."""
    if reference is None or not answers:
        return math.nan
    return sum(1 for a in answers if same(a, reference)) / len(answers)


class SelfConsistencyProgram(Program):
    """``self_consistency(k, temperature, top_p, sample_top_k, seed, max_tokens, reference)``."""

    accepts_extract = True

    def stage1_roles(self) -> dict[str, str]:
        return {"samples": "generate"}

    def stage1(self, ctx: ItemCtx) -> dict[str, Request]:
        p = self.p
        seed = p.seed if p.seed is not None else ctx.seed
        return {"samples": Request.make(ctx.model.id, "generate", ctx.prompt(), seed=seed, n=p.k,
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
        model's candidate unspecified; this is the natural reading, ``c = Σ_k 1[â_k = s] / K``)."""
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
        """Agreement of the K extracted sample answers with ``ref`` (the first sample's answer
        when ``ref_kind`` is ``first_sample``); a missing sample stays in the denominator (003)."""
        kind = self.obj.ctor
        res = usable(results, "samples")
        if res is None or not res.samples:
            return Readout(math.nan, False, kind, extras={"reason": "no samples"})
        answers = [ext(s.text or "") for s in res.samples]
        answers += [None] * (self.p.k - len(answers))
        if ref_kind == "first_sample":
            ref = answers[0]
        else:
            ref = ref.strip() if isinstance(ref, str) else ref
            ref = ref if ref not in ("", None) else None
        extras = {"answers": answers, "reference": ref, "reference_kind": ref_kind, "k": len(answers)}
        if len(res.samples) != self.p.k:
            extras["samples_returned"] = len(res.samples)
        conf = agreement(answers, ref, same or default_same)
        if math.isnan(conf):
            extras.setdefault("reason", why_missing)
            return Readout(math.nan, False, kind, extras=extras)
        return Readout(conf, True, kind, extras=extras)
