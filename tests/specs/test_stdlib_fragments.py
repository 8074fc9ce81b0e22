"""The reusable stdlib fragments compile on their own, and every object in them is usable."""

from __future__ import annotations

import pytest
from spec_helpers import REPO, compiled

from auditlang.resolve.templates import compile_obj
from auditlang.protocols.registry import program_for

FRAGMENTS = ["protocols", "evaluators", "perturbations", "metrics", "s001", "s002", "s003", "s004"]


@pytest.mark.parametrize("name", FRAGMENTS)
def test_fragment_compiles_and_builds(name: str) -> None:
    spec = compiled(REPO / "stdlib" / f"{name}.audit")
    assert spec.objects or spec.metrics
    assert not spec.of_kind("audit"), "stdlib fragments declare objects, not audits"
    for obj in spec.objects.values():
        if obj.kind == "template":
            assert compile_obj(spec, obj).variables is not None  # the file exists and parses
        elif obj.kind == "protocol":
            assert program_for(obj, spec) is not None  # parameters are consistent for the program


def test_perturbation_seeds_follow_004() -> None:
    # 004 App. A.2: "We used three different random seeds (4, 44, 99)"
    spec = compiled(REPO / "stdlib" / "perturbations.audit")
    seeds: dict[str, set[int]] = {}
    for obj in spec.of_kind("perturbation").values():
        seeds.setdefault(obj.ctor, set()).add(obj.value.seed)
    assert seeds["space_insertion"] == seeds["option_shuffle"] == seeds["typo"] == {4, 44, 99}
    # Table 4: four fixed one-shot examples, one condition each (the same example for every item)
    shots = [o.value for o in spec.of_kind("perturbation").values() if o.ctor == "one_shot"]
    assert sorted(o.index for o in shots) == [0, 1, 2, 3] and all(o.seed is None for o in shots)


def test_s002_prompt_sets_are_complete() -> None:
    # 002 App. Tables 4-5: ten answer-elicitation prompts, seven confidence-elicitation prompts.
    spec = compiled(REPO / "stdlib" / "s002.audit")
    assert len(spec.of_kind("variant")) == 10
    vc = [o for o in spec.of_kind("protocol").values() if o.ctor == "verbalized"]
    assert len(vc) == 7
    assert {o.value.scale for o in vc} == {"decimal_01", "percent_0_100", "scale_0_10", "linguistic", "linguistic_mc"}
