"""How the vLLM engine core is started on a GPU: forked (vLLM's default, ~20 s faster on an H200)
unless this process may have touched CUDA before vLLM was imported (then spawned).

``_set_platform_env`` is called with a stand-in engine (GPU platform, no vLLM needed here); the
GPU path itself runs in tests/gpu and ``benchmarks/bench_vllm_gpu.py`` on the GPU machine.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from auditlang.engines import vllm_engine as ve

ENV = "VLLM_WORKER_MULTIPROC_METHOD"


def _gpu_engine(**opts):
    return SimpleNamespace(on_cpu=False, _opts=SimpleNamespace(in_process=None, **opts))


@pytest.fixture()
def torch_before(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)

    def set_(loaded: bool) -> None:
        monkeypatch.setattr(ve, "_TORCH_BEFORE_VLLM", [loaded])

    return set_


def test_vllm_imported_first_leaves_vllms_fork(torch_before, monkeypatch) -> None:
    import os

    torch_before(False)
    ve.VLLMEngine._set_platform_env(_gpu_engine())
    assert ENV not in os.environ


def test_torch_loaded_before_vllm_spawns(torch_before) -> None:
    import os

    torch_before(True)
    ve.VLLMEngine._set_platform_env(_gpu_engine())
    assert os.environ[ENV] == "spawn"


def test_the_users_choice_is_kept(torch_before, monkeypatch) -> None:
    import os

    monkeypatch.setenv(ENV, "fork")
    torch_before(True)
    ve.VLLMEngine._set_platform_env(_gpu_engine())
    assert os.environ[ENV] == "fork"


def test_import_vllm_records_whether_torch_came_first(monkeypatch) -> None:
    import sys

    monkeypatch.setattr(ve, "_TORCH_BEFORE_VLLM", [])
    monkeypatch.setitem(sys.modules, "vllm", None)  # import fails: recorded before the import
    with pytest.raises(ve.EngineError):
        ve.import_vllm()
    assert ve._TORCH_BEFORE_VLLM == ["torch" in sys.modules]


def test_vllm_and_triton_caches_live_in_auditlangs_cache(monkeypatch, tmp_path) -> None:
    """The warm-up's Triton kernels are found again by the next run: one folder for every run
    (a second run on a fresh H200 recompiled them for 17 s when vLLM chose the folder)."""
    import os

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    ve.VLLMEngine._set_env_before_import(_gpu_engine())
    assert os.environ["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm")
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "vllm" / "triton")


def test_a_users_triton_cache_is_kept(monkeypatch, tmp_path) -> None:
    import os

    monkeypatch.setenv("AUDITLANG_CACHE", str(tmp_path))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "mine"))
    ve.VLLMEngine._set_env_before_import(_gpu_engine())
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "mine")
