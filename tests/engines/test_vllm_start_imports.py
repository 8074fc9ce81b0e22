"""The vLLM engine's start-up imports (issue 36, session 21): transformers' assisted-generation
helper is imported without scikit-learn before vLLM's entrypoint pulls in ``AutoTokenizer``, and
the entrypoint (``vllm.LLM``) is resolved before ``LLM()`` runs.

A scripted ``vllm`` package (a meta-path finder, so ``import vllm`` really executes module code)
records what was loaded at each step; transformers is the real one. In a fresh
interpreter, so that nothing of transformers, scikit-learn or vllm is loaded before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


CHILD = r'''
import importlib.abc, importlib.machinery, json, sys, types
seen = {}

class LLM:
    def __init__(self, **kw):
        seen["entrypoint_before_llm"] = "entrypoint" in seen
        raise RuntimeError("stop here: no GPU in this test")

def _vllm_getattr(name):
    if name == "LLM":
        seen["entrypoint"] = True
        seen["sklearn_at_entrypoint"] = "sklearn" in sys.modules
        return LLM
    raise AttributeError(name)

class Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        if module.__name__ == "vllm":
            seen["imported"] = True
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
seen["sklearn"] = "sklearn" in sys.modules
seen["candidate_generator"] = "transformers.generation.candidate_generator" in sys.modules
seen["tokenizer_modules"] = "transformers.models.auto.tokenization_auto" in sys.modules
print(json.dumps(seen))
'''


def test_stack_imports_without_sklearn_and_resolves_the_entrypoint_first(tmp_path: Path) -> None:
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
    assert seen["imported"] and seen["entrypoint_before_llm"]  # vllm.LLM resolved, then called
    assert "could not start" in seen["error"]  # the scripted LLM() failed as told
    assert seen["tokenizer_modules"] and seen["candidate_generator"]  # imported, in the main thread...
    assert seen["sklearn"] is False and seen["sklearn_at_entrypoint"] is False  # ...without scikit-learn
