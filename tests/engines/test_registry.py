"""Engine registry: lazy loading, static capabilities, errors for unknown engines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.core.engine import Engine, EngineError, ModelConfig
from auditlang.engines.registry import ENGINE_CAPABILITIES, ENGINE_CLASSES, capabilities_for, load_engine, unsupported_kinds
from auditlang.core.requests import REQUEST_KINDS

ROOT = Path(__file__).resolve().parents[2]


def test_importing_registry_and_dryrun_imports_no_engine_stack():
    code = (
        "import sys; import auditlang.engines.registry as r, auditlang.engines.dryrun;"
        "from auditlang.core.engine import ModelConfig;"
        "r.load_engine(ModelConfig(name='m', engine='dryrun', path='x'));"
        "bad = [m for m in ('torch', 'transformers', 'vllm', 'openai', 'httpx') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_capabilities_table():
    assert set(ENGINE_CAPABILITIES) == set(ENGINE_CLASSES) == {"hf", "vllm", "openai", "dryrun"}
    assert ENGINE_CAPABILITIES["hf"] == ENGINE_CAPABILITIES["vllm"] == frozenset(REQUEST_KINDS)
    assert ENGINE_CAPABILITIES["openai"] == {"generate", "choice_logprobs"}
    assert unsupported_kinds("openai", {"generate", "hidden_states", "constrained_choice"}) == ["constrained_choice", "hidden_states"]
    assert unsupported_kinds("hf", set(REQUEST_KINDS)) == []
    assert ENGINE_CLASSES["vllm"] == ("auditlang.engines.vllm_engine", "VLLMEngine")
    assert ENGINE_CLASSES["openai"] == ("auditlang.engines.openai_engine", "OpenAIEngine")


def test_capabilities_for_a_declared_model():
    generic = ModelConfig(name="m", engine="openai", path="gpt", options={"base_url": "http://x"})
    served = ModelConfig(name="m", engine="openai", path="smol", options={"base_url": "http://x", "server": "vllm"})
    assert capabilities_for(generic) == ENGINE_CAPABILITIES["openai"]
    assert capabilities_for(served) == {"generate", "choice_logprobs", "continuation_logprobs", "constrained_choice"}
    assert capabilities_for(ModelConfig(name="m", engine="hf", path="x")) == frozenset(REQUEST_KINDS)


def test_unknown_engine_suggests_a_name():
    with pytest.raises(EngineError, match="unknown engine 'vlm'") as err:
        load_engine(ModelConfig(name="m", engine="vlm", path="x"))
    assert "did you mean 'vllm'" in err.value.hint
    with pytest.raises(EngineError):
        unsupported_kinds("nope", {"generate"})


def test_hf_engine_through_the_registry(smol):
    from auditlang.engines.hf import HFEngine

    assert isinstance(smol, HFEngine) and isinstance(smol, Engine)  # conftest loads it via load_engine
    assert smol.capabilities() == ENGINE_CAPABILITIES["hf"]


def test_dryrun_through_the_registry():
    from auditlang.engines.dryrun import DryRunEngine

    e = load_engine(ModelConfig(name="m", engine="dryrun", path="x"))
    assert isinstance(e, DryRunEngine) and isinstance(e, Engine)
    assert e.capabilities() == ENGINE_CAPABILITIES["dryrun"]
