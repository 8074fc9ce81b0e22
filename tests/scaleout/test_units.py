"""The Ray executor's resource rules, from a spec (no Ray needed): GPUs per worker from the
model's engine, device and tensor_parallel; workers per model from the cluster's share."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.core.errors import RuntimeFailure
from auditlang.resolve import compile_spec
from auditlang.scaleout.rayexec import _replicas
from auditlang.scaleout.units import Unit, gpus_for

SPEC = """model big = vllm("org/big", tensor_parallel=2)
model small = vllm("org/small")
model gpu = hf("org/gpu", device=cuda)
model cpu = hf("org/cpu", device=cpu)
model auto = embedded("smollm2-135m-instruct")
model api = openai("gpt-x", base_url="http://localhost:8000/v1")
"""


@pytest.fixture
def spec(tmp_path: Path):
    p = tmp_path / "models.audit"
    p.write_text(SPEC, encoding="utf-8")
    return compile_spec(p)


def test_gpus_per_worker(spec) -> None:
    on_gpus = {m: gpus_for(spec, m, None, cluster_gpus=8) for m in ("big", "small", "gpu", "cpu", "auto", "api")}
    assert on_gpus == {"big": 2, "small": 1, "gpu": 1, "cpu": 0, "auto": 1, "api": 0}
    on_cpus = {m: gpus_for(spec, m, None, cluster_gpus=0) for m in ("big", "small", "cpu", "auto", "api")}
    assert on_cpus == {"big": 0, "small": 0, "cpu": 0, "auto": 0, "api": 0}
    assert gpus_for(spec, "big", "dryrun", cluster_gpus=8) == 0  # --engine dryrun loads no model


def test_workers_per_model() -> None:
    units = [Unit("a", i, 4, 1.0) for i in range(4)] + [Unit("b", i, 4, 2.0) for i in range(4)]
    assert _replicas(units, {"GPU": 8, "CPU": 64}) == {"a": 4, "b": 2}  # b's workers take 2 GPUs each
    assert _replicas(units, {"GPU": 2, "CPU": 64}) == {"a": 1, "b": 1}  # more workers than GPUs wait
    cpu_units = [Unit("c", i, 3, 0.0) for i in range(3)]
    assert _replicas(cpu_units, {"CPU": 2}) == {"c": 2}
    with pytest.raises(RuntimeFailure, match="needs 2 GPU"):
        _replicas(units, {"GPU": 1, "CPU": 64})
