"""Study 002's model-free confidence estimators: the random baseline (BL) and the auxiliary
calibration classifier Calib1.

``random_baseline(seed)`` -- 002 §5: "a random baseline (BL) that predicts uniform random
confidence". Each scored answer gets ``U(0, 1)`` drawn from a generator seeded with
(seed, dataset, variant, item id, answer text): no model call, reproducible, independent of the
model (002 Table 6 reports the same BL P-RB, 0.728, for all nine models) and different under
each prompt and for each sampled answer (BL's P-RB and A-STB are below 1).

``aux_classifier(features, dims, gamma, l2)`` -- 002 §5 "Calib1": an auxiliary classifier that
"uses the LLM input and responses as inputs and correctness of the responses as targets",
trained with focal loss on the training split (here the dev split: ``needs_dev``). Its input is
the rendered answer prompt and the answer (``prompt [SEP] answer``); the classifier is
:mod:`auditlang.metrics.aux_classifier` (002 does not name one: hashed n-gram features and a
logistic layer are auditlang's choice). ``read`` records the text; ``fit`` trains on the dev
rows; ``apply`` predicts the test confidence.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from auditlang.core.requests import Result
from auditlang.protocols.base import ItemCtx, Program, Readout
from auditlang.protocols.facts import Fact, na

SEP = " [SEP] "


def uniform_draw(*parts: Any) -> float:
    """A U(0, 1) value determined by ``parts`` (SHA-256 of their repr seeds numpy's PCG64)."""
    import numpy as np  # lazy: numpy at scoring only, so `auditc check` loads none

    key = hashlib.sha256(repr(parts).encode()).digest()
    return float(np.random.default_rng(int.from_bytes(key[:8], "little")).random())


class RandomBaselineProgram(Program):
    """``random_baseline(seed)``: 002's BL, see the module docstring."""

    def facts(self, chat: bool) -> dict[str, Fact]:
        seed = self.spec.seed(self.p.seed)
        what, none = "random_baseline", ("none", "none")
        return {"signal": Fact("random baseline"), "provenance": na(what, "no model call"),
                "scored": Fact("the model's own answer (the confidence ignores it)"),
                "readout": na(what, f"uniform random confidence U(0,1) per scored answer and prompt, seed {seed} "
                                    "(study 002 BL)"),
                "context": Fact(f"{'not applicable'} to {what}: no model call", value=none),
                "normalisation": na(what, "a random number"),
                "measure": Fact(f"a uniform random confidence per scored answer (seed {seed}; study 002's baseline)")}

    def answer_conditioned(self) -> bool:
        return True  # a supplied answer gets its own draw

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        seed = self.spec.seed(self.p.seed)
        c = uniform_draw(seed, ctx.dataset, ctx.variant, str(ctx.item.get("id")), answer_text or "")
        return Readout(c, True, self.obj.ctor, extras={"seed": seed})

    def read_candidate(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        return self.read(ctx, results, pred, answer_text)


class AuxClassifierProgram(Program):
    """``aux_classifier(...)``: 002's Calib1, see the module docstring."""

    def facts(self, chat: bool) -> dict[str, Fact]:
        p, what = self.p, "aux_classifier"
        return {"signal": Fact("auxiliary classifier"),
                "provenance": na(what, "an auxiliary classifier, no elicitation"),
                "scored": Fact("the model's own answer to the variant prompt, read with the rendered prompt"),
                "readout": Fact(f"{'not applicable'} to {what}: logistic classifier on hashed word uni/bigrams of "
                                f"prompt [SEP] answer (dims={p.dims}), focal loss gamma={p.gamma}, l2={p.l2}, fitted on "
                                "the dev split (study 002 Calib1; 002 names no classifier, this one is auditlang's "
                                "choice)", params=("gamma",)),
                "context": Fact(f"not applicable to {what}: no model call", value=("none", "none")),
                "normalisation": na(what, "a classifier's probability"),
                "measure": Fact(f"an auxiliary classifier's probability of correctness from the prompt and the answer "
                                f"(hashed n-grams, {p.dims} dimensions, focal loss gamma {p.gamma:g}; fitted on the "
                                "dev split)")}

    needs_dev = True

    def answer_conditioned(self) -> bool:
        return True  # the classifier reads the answer text: any supplied answer can be scored

    def read(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        return Readout(math.nan, True, self.obj.ctor, extras={"text": ctx.user_text + SEP + (answer_text or "").strip()})

    def read_candidate(self, ctx: ItemCtx, results: dict[str, Result], pred: Any, answer_text: str, **kw: Any) -> Readout:
        return self.read(ctx, results, pred, answer_text)

    def fit(self, dev_rows: list[dict[str, Any]]) -> dict[str, Any]:
        import numpy as np  # lazy: as in uniform_draw
        from auditlang.metrics.aux_classifier import fit_aux_classifier  # lazy: numpy/scipy fit on dev only

        texts, y = [], []
        for r in dev_rows:
            z = r.get("correct")
            if z is None or (isinstance(z, float) and math.isnan(z)) or "text" not in (r.get("extras") or {}):
                continue
            texts.append(r["extras"]["text"])
            y.append(int(bool(z)))
        if not texts:
            raise ValueError(f"protocol '{self.obj.id}': no dev item has a correctness label; nothing to fit")
        p = self.p
        clf = fit_aux_classifier(texts, y, dims=p.dims, gamma=p.gamma, l2=p.l2)
        nz = np.flatnonzero(clf.weights)
        return {"weights": {str(int(i)): float(clf.weights[i]) for i in nz}, "bias": clf.bias, "dims": clf.dims,
                "gamma": clf.gamma, "n_train": clf.n_train, "converged": clf.converged}

    def apply(self, fitted: dict[str, Any], readout: Readout) -> Readout:
        import numpy as np  # lazy: as in uniform_draw
        from auditlang.metrics.aux_classifier import AuxClassifier  # lazy: as for fit

        w = np.zeros(int(fitted["dims"]))
        for i, v in fitted["weights"].items():
            w[int(i)] = v
        clf = AuxClassifier(w, float(fitted["bias"]), int(fitted["dims"]), float(fitted["gamma"]),
                            int(fitted["n_train"]), bool(fitted["converged"]))
        text = readout.extras.get("text")
        if text is None:
            return Readout(math.nan, False, readout.kind, readout.abstain, dict(readout.extras))
        c = float(clf.predict([text])[0])
        extras = {k: v for k, v in readout.extras.items() if k != "text"}
        return Readout(c, True, readout.kind, readout.abstain, {**extras, "n_train": clf.n_train})
