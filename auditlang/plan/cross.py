"""Which units score answers of other units (the run's cross stage), derived from the spec's
comparisons and from protocols with ``wrong_from=``; see auditlang/plan/crossdata.py for the stage
itself."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from auditlang.resolve.spec import Spec

UnitKey = tuple  # (audit, model, dataset, variant, split)


@dataclass(frozen=True)
class Source:
    """Where a target unit's candidate answers come from."""

    key: str  # "model:<id>" | "variant:<id>" | "samples:<protocol>"
    unit: UnitKey  # the unit whose generation(s) supply the answers
    samples: str | None = None  # the self_consistency protocol, for "samples:" sources
    grouping: str | None = None  # evaluator grouping the samples (llm_judge), for "samples:" sources
    # "wrong_from:<protocol>" sources (001 §3.3): the protocol whose supplied plausible-wrong answer
    # is another model's wrong answer, and the units of those models, in preference order
    protocol: str | None = None
    wrong_from: tuple = ()


def samples_key(samples: str, grouping: str | None) -> str:
    """Source key of sampled answers: ``samples:<protocol>``, plus ``@<grouping>`` when a judge
    groups them (two comparisons grouping the same samples differently stay apart)."""
    return f"samples:{samples}" + (f"@{grouping}" if grouping else "")


def cross_sources(spec: Spec, plan) -> dict[UnitKey, list[Source]]:
    """Target unit -> its sources, from the spec's comparisons (units absent from ``plan.units``
    -- a Plan, or anything with ``units`` -- are skipped)."""
    out: dict[UnitKey, list[Source]] = {}

    def add(target: UnitKey, src: Source) -> None:
        if target in plan.units and src.unit in plan.units and src not in out.setdefault(target, []):
            out[target].append(src)

    for comp in spec.of_kind("compare").values():
        c = comp.value
        if c.audit not in spec.objects:
            continue
        aid, a = c.audit, spec.get(c.audit).value
        if comp.ctor == "aligned" and "candidate" in c.views:
            for aid in (x for x in c.all_audits() if x in spec.objects):  # every pooled audit's pairs
                a = spec.get(aid).value
                pairs = [tuple(p) for p in c.pairs] or list(itertools.combinations(a.models, 2))
                for m1, m2 in pairs:
                    for d, v in itertools.product(a.datasets, a.variants):
                        add((aid, m1, d, v, "test"), Source(f"model:{m2}", (aid, m2, d, v, "test")))
                        add((aid, m2, d, v, "test"), Source(f"model:{m1}", (aid, m1, d, v, "test")))
        elif comp.ctor == "robustness":
            variants = list(c.variants) or list(a.variants)
            ref = variants[0]
            for m, d in itertools.product(a.models, a.datasets):
                if c.answer == "fixed":
                    for v in variants[1:]:
                        add((aid, m, d, v, "test"), Source(f"variant:{ref}", (aid, m, d, ref, "test")))
                if c.samples:
                    key = (aid, m, d, ref, "test")
                    add(key, Source(samples_key(c.samples, c.grouping), key, samples=c.samples, grouping=c.grouping))
    for aid, aobj in spec.of_kind("audit").items():
        a = aobj.value
        for pid in a.protocols:
            wf = getattr(spec.get(pid).value, "wrong_from", None) or [] if pid in spec.objects else []
            if not wf:
                continue
            for m, d, v in itertools.product(a.models, a.datasets, a.variants):
                target = (aid, m, d, v, "test")
                units = tuple((aid, w, d, v, "test") for w in wf if w != m and (aid, w, d, v, "test") in plan.units)
                add(target, Source(f"wrong_from:{pid}", target, protocol=pid, wrong_from=units))
    return out
