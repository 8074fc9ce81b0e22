"""The vLLM engine's start-up imports (issue 36, session 21): the stack is imported with the cyclic
collector paused, never across ``LLM()`` (the engine core forks there and would inherit it
disabled), and transformers' assisted-generation helper is imported without scikit-learn before
vLLM's entrypoint pulls in ``AutoTokenizer``.

A scripted ``vllm`` package (a meta-path finder, so ``import vllm`` really executes module code)
records whether the collector ran at each step; transformers is the real one. In a fresh
interpreter, so that nothing of transformers, scikit-learn or vllm is loaded before.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.engines.gcpause import gc_paused

CHILD = r'''
import gc, importlib.abc, importlib.machinery, json, sys, types
seen = {}

class LLM:
    def __init__(self, **kw):
        seen["gc_in_llm"] = gc.isenabled()
        raise RuntimeError("stop here: no GPU in this test")

def _vllm_getattr(name):
    if name == "LLM":
        seen["gc_at_entrypoint"] = gc.isenabled()
        seen["sklearn_at_entrypoint"] = "sklearn" in sys.modules
        return LLM
    raise AttributeError(name)

class Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        if module.__name__ == "vllm":
            seen["gc_at_import"] = gc.isenabled()
            module.__version__ = "0.26.0"
            module.__path__ = []
            module.__getattr__ = _vllm_getattr
        else:
            module.current_platform = types.SimpleNamespace(is_cpu=lambda: False, device_type="cuda")

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in ("vllm", "vllm.platforms"):
            return importlib.machinery.ModuleSpec(name, Loader(), is_package=name == "vllm")
        return None

sys.meta_path.insert(0, Finder())
from auditlang.core.engine import EngineError, ModelConfig
from auditlang.engines import vllm_engine as ve
try:
    ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=sys.argv[1]))
except EngineError as e:
    seen["error"] = str(e)
seen["gc_after"] = gc.isenabled()
seen["sklearn"] = "sklearn" in sys.modules
seen["candidate_generator"] = "transformers.generation.candidate_generator" in sys.modules
seen["tokenizer_modules"] = "transformers.models.auto.tokenization_auto" in sys.modules
print(json.dumps(seen))
'''


def test_stack_imports_with_the_collector_paused_and_without_sklearn(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("sklearn")  # installed here: its absence after the start is the engine's doing
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                               "num_attention_heads": 4, "torch_dtype": "bfloat16"}))
    env = {**os.environ, "VLLM_CACHE_ROOT": str(tmp_path / "vc"), "TRITON_CACHE_DIR": str(tmp_path / "tc"),
           "OMP_NUM_THREADS": "1"}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    env.pop("VLLM_WORKER_MULTIPROC_METHOD", None)
    out = subprocess.run([sys.executable, "-c", CHILD, str(d)], capture_output=True, text=True, timeout=600, env=env,
                         check=False)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["gc_at_import"] is False and seen["gc_at_entrypoint"] is False  # paused for the imports
    assert seen["gc_in_llm"] is True and seen["gc_after"] is True  # never across LLM() (it forks the core)
    assert "could not start" in seen["error"]  # the scripted LLM() failed as told
    assert seen["tokenizer_modules"] and seen["candidate_generator"]  # imported, in the main thread...
    assert seen["sklearn"] is False and seen["sklearn_at_entrypoint"] is False  # ...without scikit-learn


def test_gc_paused_restores_the_collector_as_it_was() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it off: leaves it off
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("an import failed")
    assert gc.isenabled()
