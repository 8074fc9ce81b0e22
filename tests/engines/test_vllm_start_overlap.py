"""The vLLM engine start's overlap (issue 36, warm start): the tokenizer loads on a thread while
``LLM()`` waits for an out-of-process engine core, started only once vLLM has forked that core
(session 21), and the config is read from config.json without transformers.

A scripted ``vllm`` module stands in (no vLLM needed); the overlap is shown with events, not
timings: the scripted ``LLM()`` forks a child (the engine core's stand-in, which reports whether
the load had started when it was forked) and returns only once the tokenizer load has begun on
another thread.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import types
from pathlib import Path

import pytest

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.engines import vllm_engine as ve
from auditlang.engines import vllm_tokload
from auditlang.engines.vllm_tokload import TokenizerLoad, read_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "hidden_size": 64, "max_position_embeddings": 512, "torch_dtype": "bfloat16"}


def _ckpt(tmp_path: Path, cfg: dict | None = None) -> Path:
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA if cfg is None else cfg), encoding="utf-8")
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7]}), encoding="utf-8")
    return d


class _Tok:
    eos_token_id = 2


def _fork_child(probe) -> bool:
    """Fork; the child exits at once with probe()'s answer as its status. Returns the child's answer."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(1 if probe() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 1


@pytest.fixture()
def scripted(monkeypatch, tmp_path):
    """A GPU-platform ``vllm`` whose ``LLM()`` records the thread of the tokenizer load it saw."""
    log: dict = {"tok_started": threading.Event(), "llm_started": threading.Event()}

    class LLM:
        def __init__(self, **kw) -> None:
            log["llm_kw"] = kw
            if log.get("llm_fails"):
                raise RuntimeError("no GPU memory")
            log["llm_started"].set()
            if log.get("fork", True):  # vLLM forks its engine core here
                log["tok_started_before_fork"] = log["tok_started"].is_set()
                log["child_saw_load"] = _fork_child(lambda: log["tok_started"].is_set())
            if log.get("wait_for_tok", True):  # the core "starts" until the tokenizer began
                log["tok_seen_during_llm"] = log["tok_started"].wait(30)
            self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=512))

    vllm = types.ModuleType("vllm")
    vllm.__version__ = "0.26.0"  # type: ignore[attr-defined]
    vllm.LLM = LLM  # type: ignore[attr-defined]
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False, device_type="cuda")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    # the fork path: neither a spawn chosen by the environment nor the engine's own spawn rule (torch
    # imported before vLLM, as in the vLLM venv's test run, where a real vLLM ran earlier in the process)
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    monkeypatch.setattr(ve, "_TORCH_BEFORE_VLLM", [False])
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vc"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "tc"))

    def load_tokenizer(self, d):
        log["tok_thread"] = threading.current_thread().name
        log["tok_started"].set()
        log["llm_running_at_tok"] = log["llm_started"].wait(30)
        if log.get("tok_fails"):
            raise EngineError("no tokenizer here")
        return _Tok()

    monkeypatch.setattr(ve.VLLMEngine, "_load_tokenizer", load_tokenizer)
    # vllm_release.release: the engine cores left to exit (none here: as vLLM's own shutdown)
    monkeypatch.setattr(ve.vllm_release, "release", lambda *llms: log.setdefault("released", []).extend(llms) or 0)
    return log


def test_tokenizer_loads_beside_llm_once_the_core_has_forked(scripted, tmp_path) -> None:
    d = _ckpt(tmp_path)
    eng = ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(d)))
    assert scripted["tok_started_before_fork"] is False  # LLM()'s CPU-bound part ran without the thread
    assert scripted["child_saw_load"] is False  # the forked core inherits no started load
    assert scripted["tok_seen_during_llm"] and scripted["llm_running_at_tok"]  # both ran at once
    assert scripted["tok_thread"] == "auditlang-vllm-tokenizer"
    assert isinstance(eng.tokenizer, _Tok)
    assert eng.eos_ids == frozenset({2, 7})  # generation_config + the tokenizer's, after the join
    assert eng.dtype == "bfloat16" and eng._num_layers == 4  # from config.json, read before LLM()
    assert scripted["llm_kw"]["dtype"] == "bfloat16"


def test_a_spawned_core_starts_the_tokenizer_thread_at_once(scripted, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # a spawned child inherits nothing
    scripted["fork"] = False
    eng = ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(_ckpt(tmp_path))))
    assert scripted["tok_seen_during_llm"] and scripted["tok_thread"] == "auditlang-vllm-tokenizer"
    assert isinstance(eng.tokenizer, _Tok)


def test_no_fork_in_llm_loads_the_tokenizer_after_it_in_this_thread(scripted, tmp_path) -> None:
    scripted.update(fork=False, wait_for_tok=False)  # vLLM spawned after all: no fork hook fires
    eng = ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(_ckpt(tmp_path))))
    assert scripted["tok_thread"] == threading.current_thread().name
    assert isinstance(eng.tokenizer, _Tok) and eng.eos_ids == frozenset({2, 7})
    assert not vllm_tokload._PENDING


def test_a_failed_llm_leaves_no_load_waiting_for_a_fork(scripted, tmp_path) -> None:
    scripted["llm_fails"] = True
    with pytest.raises(EngineError, match="no GPU memory"):
        ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(_ckpt(tmp_path))))
    assert not vllm_tokload._PENDING and not scripted["tok_started"].is_set()
    _fork_child(lambda: False)  # a later fork starts nothing
    assert not scripted["tok_started"].is_set()


def test_in_process_core_loads_the_tokenizer_first_in_this_thread(scripted, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # LLM() runs the core here: nothing to wait beside
    scripted["llm_started"].set()  # the sequential load must not wait for LLM()
    eng = ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(_ckpt(tmp_path))))
    assert scripted["tok_thread"] == threading.current_thread().name
    assert isinstance(eng.tokenizer, _Tok)


def test_a_tokenizer_failure_beside_llm_is_the_engines_error_and_closes_the_core(scripted, tmp_path) -> None:
    scripted["tok_fails"] = True
    with pytest.raises(EngineError, match="no tokenizer here"):
        ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(_ckpt(tmp_path))))
    assert len(scripted["released"]) == 1  # the started LLM was handed to vllm_release


def test_config_json_is_read_directly_nested_text_config_too(tmp_path) -> None:
    calls = []
    cfg = read_config(_ckpt(tmp_path), lambda: calls.append(1))
    assert (cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.torch_dtype) == (4, 2, "bfloat16") and not calls
    nested = tmp_path / "n"
    nested.mkdir()
    (nested / "config.json").write_text(json.dumps({"text_config": {**LLAMA, "head_dim": 16}, "vision_config": {}}))
    c = read_config(nested, lambda: calls.append(1))
    assert c.text_config.head_dim == 16 and c.text_config.num_attention_heads == 8 and not calls


@pytest.mark.parametrize("text", ['{"hidden_size": 64}', "not json", None])
def test_config_falls_back_to_transformers_without_the_counts(tmp_path, text) -> None:
    d = tmp_path / "c"
    d.mkdir()
    if text is not None:
        (d / "config.json").write_text(text)
    assert read_config(d, lambda: "auto-config") == "auto-config"


def test_tokenizer_load_reraises_in_the_callers_thread() -> None:
    def boom():
        raise ValueError("bad")

    for beside in (True, False):
        load = TokenizerLoad(boom, beside=beside)
        assert load.beside is beside
        with pytest.raises(ValueError, match="bad"):
            load.get()
    assert TokenizerLoad(lambda: threading.current_thread().name, beside=True).get() == "auditlang-vllm-tokenizer"


def test_at_fork_load_starts_in_the_parent_after_a_fork_and_never_in_the_child() -> None:
    started = threading.Event()

    def load():
        started.set()
        return threading.current_thread().name

    load_ = TokenizerLoad(load, mode="at_fork")
    assert not started.is_set() and not load_.beside  # nothing runs before a fork
    assert _fork_child(lambda: bool(vllm_tokload._PENDING) or started.is_set()) is False
    assert load_.get() == "auditlang-vllm-tokenizer" and load_.beside
    with pytest.raises(ValueError, match="mode 'later'"):
        TokenizerLoad(load, mode="later")


def test_at_fork_load_without_a_fork_runs_in_get_and_reraises() -> None:
    def boom():
        raise ValueError("bad")

    assert TokenizerLoad(lambda: threading.current_thread().name, mode="at_fork").get() == threading.current_thread().name
    with pytest.raises(ValueError, match="bad"):
        TokenizerLoad(boom, mode="at_fork").get()
    assert not vllm_tokload._PENDING


# ----------------------------------------------------------------------------- the weight hash


@pytest.fixture()
def weights(scripted, tmp_path, monkeypatch):
    """A checkpoint with a weight file, a fresh hash cache, and the weight-hash child seen at the
    LLM stack's import (before ``LLM()`` forks the core)."""
    from auditlang.engines import weight_hash

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path / "cache"))
    d = _ckpt(tmp_path)
    (d / "model.safetensors").write_bytes(b"weights" * 1000)
    real = ve.VLLMEngine._import_llm_stack

    def seen(self, **kw):
        scripted["hash_child_at_import"] = self._weights_sha256.child
        return real(self, **kw)

    monkeypatch.setattr(ve.VLLMEngine, "_import_llm_stack", seen)
    return d, weight_hash


def test_the_weights_hash_in_a_child_from_before_the_vllm_import(scripted, weights, monkeypatch) -> None:
    import hashlib

    d, weight_hash = weights
    real_import = ve.import_vllm

    def seen_at_import():
        scripted["children_at_vllm_import"] = list(started)
        return real_import()

    started: list = []
    real_init = weight_hash.WeightHash.__init__

    def init(self, resolved):
        real_init(self, resolved)
        started.append(self.child)

    monkeypatch.setattr(weight_hash.WeightHash, "__init__", init)
    monkeypatch.setattr(ve, "import_vllm", seen_at_import)

    def never(path):
        raise AssertionError(f"{path} hashed in the engine's process")

    monkeypatch.setattr(weight_hash, "sha256_file", never)
    eng = ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(d)))
    child = scripted["hash_child_at_import"]
    assert child is not None and child.pid != os.getpid()
    assert scripted["children_at_vllm_import"] == [child]  # a checkpoint directory: hashing before `import vllm`
    digest = hashlib.sha256(b"weights" * 1000).hexdigest()
    assert eng._weights_sha256.get() == hashlib.sha256(b"model.safetensors\0" + digest.encode() + b"\n").hexdigest()


def test_a_missing_vllm_stops_the_weight_hash_child(scripted, weights, monkeypatch) -> None:
    d, weight_hash = weights
    monkeypatch.setattr(weight_hash, "_CHILD", "import time; time.sleep(120)")
    children: list = []
    real_init = weight_hash.WeightHash.__init__

    def init(self, resolved):
        real_init(self, resolved)
        children.append(self.child)

    def no_vllm():
        raise EngineError("the 'vllm' engine needs vLLM, which is not installed")

    monkeypatch.setattr(weight_hash.WeightHash, "__init__", init)
    monkeypatch.setattr(ve, "import_vllm", no_vllm)
    with pytest.raises(EngineError, match="needs vLLM"):
        ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(d)))
    assert len(children) == 1 and children[0].returncode is not None  # started early, then stopped


def test_a_failed_llm_stops_the_weight_hash_child(scripted, weights, monkeypatch) -> None:
    d, weight_hash = weights
    monkeypatch.setattr(weight_hash, "_CHILD", "import time; time.sleep(120)")
    scripted["llm_fails"] = True
    with pytest.raises(EngineError, match="no GPU memory"):
        ve.VLLMEngine(ModelConfig(name="m", engine="vllm", path=str(d)))
    child = scripted["hash_child_at_import"]
    assert child is not None and child.returncode is not None  # killed and reaped, not left hashing
