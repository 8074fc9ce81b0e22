"""The example twins (examples/sNNN_twin.audit): small, runnable on CPU, faithful to their study spec."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from spec_helpers import REPO, SPECS, TWINS, compiled

from auditlang.plan.planner import build_plan

MAX_RUN_MINUTES = 5.0  # "at most a few minutes" of `auditc run` on the 2-core CPU machine


def _bench_plan():
    """benchmarks/bench_plan.py (not a package): its run-time estimate is the one the README reports."""
    if "bench_plan" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_plan", REPO / "benchmarks" / "bench_plan.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_plan"] = mod  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(mod)
    return sys.modules["bench_plan"]


@pytest.fixture(scope="module")
def twin_plans(shared_data: Path) -> dict:
    with pytest.MonkeyPatch.context() as mp:
        # the off-type answer pool of 001 (see conftest._pool_data_root)
        mp.setenv("AUDITLANG_DATA_ROOT", str(shared_data))
        return {study: build_plan(compiled(path), data_root=str(shared_data)) for study, path in TWINS.items()}


@pytest.mark.parametrize("study", sorted(TWINS))
def test_twin_plans_with_data_on_small_samples(study: str, twin_plans: dict) -> None:
    spec = compiled(TWINS[study])
    plan = twin_plans[study]
    assert not plan.estimated, plan.notes
    assert plan.cells
    for dsid, ds in spec.of_kind("dataset").items():
        assert ds.ctor == "jsonl", f"{study}: dataset {dsid} is not a local file"
        assert 20 <= ds.value.sample <= 60, f"{study}: dataset {dsid} samples {ds.value.sample}"
    assert {c.n_items for c in plan.cells} <= set(range(1, 61))
    models = spec.of_kind("model")
    assert {m.ctor for m in models.values()} == {"embedded"}
    assert {m.value.name for m in models.values()} == {"smollm2-135m-instruct", "gemma3-270m"}


@pytest.mark.parametrize("study", sorted(TWINS))
def test_twin_mirrors_its_study_spec(study: str) -> None:
    """Same data files, protocol and evaluator kinds, and comparison kinds as the full spec."""
    twin, full = compiled(TWINS[study]), compiled(SPECS[study])

    def kinds(spec, kind: str) -> set[str]:
        return {o.ctor for o in spec.of_kind(kind).values()}

    twin_files = {o.value.path for o in twin.of_kind("dataset").values()}
    full_files = {getattr(o.value, "path", None) for o in full.of_kind("dataset").values()}
    assert twin_files <= full_files
    assert kinds(twin, "compare") <= kinds(full, "compare")
    used = lambda spec, f: {x for a in spec.of_kind("audit").values() for x in getattr(a.value, f)}  # noqa: E731
    assert {twin.get(p).ctor for p in used(twin, "protocols")} <= {full.get(p).ctor for p in used(full, "protocols")}
    assert {twin.get(e).ctor for e in used(twin, "evaluators")} <= {full.get(e).ctor for e in used(full, "evaluators")}
    # the twin exercises every comparison kind of the study
    assert kinds(twin, "compare") == kinds(full, "compare")


@pytest.mark.parametrize("study", sorted(TWINS))
def test_twin_run_fits_a_few_cpu_minutes(study: str, twin_plans: dict) -> None:
    # Estimated from the plan's request counts (~15 prompts/s, ~250 generated tokens/s on 2 cores,
    # every generation at its full budget), not measured.
    bench = _bench_plan()
    seconds = bench.cpu_run_seconds(compiled(TWINS[study]), twin_plans[study])
    assert seconds is not None
    assert seconds <= MAX_RUN_MINUTES * 60, f"{study} twin: estimated {seconds / 60:.1f} min"


def test_twin_filters_follow_the_papers(twin_plans: dict) -> None:
    # 001 App. M Table 21: the four MMLU subjects; 003 App. D.2: MMLU-Pro CS, chemistry, physics.
    s001 = {ctx.item["subject"] for k, u in twin_plans["s001"].units.items() if k[2] == "mmlu4" for ctx in u.contexts}
    assert s001 <= {"high_school_physics", "philosophy", "high_school_government_and_politics", "miscellaneous"}
    s003 = {ctx.item["subject"] for k, u in twin_plans["s003"].units.items() if k[2] == "mmlu_pro" for ctx in u.contexts}
    assert s003 <= {"computer science", "chemistry", "physics"}
    # 002: PopQA test items from the 'test' subset, dev (PS fitting) from the 'dev' subset
    subsets = {(k[4], ctx.item.get("source_subset")) for k, u in twin_plans["s002"].units.items() if k[2] == "popqa"
               for ctx in u.contexts}
    assert subsets == {("test", "test"), ("dev", "dev")}
