"""Import vLLM on a thread while ``auditc run`` compiles, plans and reads its data (issue 36).

``import vllm`` takes 9-10 s of a warm vLLM start on an H200; the CLI spends 1-2 s before the
first engine loads (plan, data, the run directory's inputs). :func:`start` begins the import on a
daemon thread as soon as the spec is compiled; the engine's own ``vllm_engine.import_vllm`` then
waits for it (:func:`wait`), takes whether torch came first from :func:`torch_before`, and imports
again (a no-op once it has finished, or the real error, with the install hint, if it failed).

Only when every model of the spec runs on vLLM: an hf model in the same run initialises CUDA in
torch, and vLLM must then spawn its engine core instead of forking it (``_set_platform_env``),
which it decides from whether torch came before vLLM. No thread when vLLM is not installed, when
vLLM is already imported, or when ``AUDITLANG_VLLM_PRELOAD=0``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from typing import Any

from auditlang.core.confine import cache_root

_THREADS: list[threading.Thread] = []
_TORCH_FIRST: list[bool] = []  # [whether torch was imported before the preload began importing vLLM]
ENV = "AUDITLANG_VLLM_PRELOAD"


def every_model_on_vllm(spec: Any, engine_override: str | None = None) -> bool:
    """Whether the spec declares models and all of them run on the vllm engine."""
    from auditlang.resolve.models import declared_model  # lazy: the CLI has it loaded; keeps this module light

    mids = list(spec.of_kind("model"))
    if not mids:
        return False
    if engine_override:
        return engine_override == "vllm"
    return all(declared_model(spec, mid)[0] == "vllm" for mid in mids)


def start(spec: Any, engine_override: str | None = None) -> bool:
    """Begin importing vLLM on a thread when the run will need it (see the module doc); whether
    a thread was started."""
    if os.environ.get(ENV, "1") == "0" or _THREADS or "vllm" in sys.modules:
        return False
    if not every_model_on_vllm(spec, engine_override) or importlib.util.find_spec("vllm") is None:
        return False
    set_cache_env()  # vLLM reads its cache folders at import: the ones the engine would set
    _TORCH_FIRST[:] = ["torch" in sys.modules]  # what the engine's import_vllm would have recorded

    t = threading.Thread(target=_import, name="auditlang-vllm-import", daemon=True)
    _THREADS.append(t)
    t.start()
    return True


def _import() -> None:
    try:
        import vllm  # noqa: F401  # lazy: vLLM only when a model runs
    except Exception:  # noqa: BLE001 - the engine imports again and reports the error itself
        pass


def set_cache_env() -> None:
    """``VLLM_CACHE_ROOT`` and ``TRITON_CACHE_DIR`` inside auditlang's cache dir, unless set
    (``VLLMEngine._set_env_before_import`` says why)."""
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_root() / "vllm"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(cache_root() / "vllm" / "triton"))


def torch_before(now: bool) -> bool:
    """Whether torch came before vLLM in this process: as it was when the preload began, else ``now``."""
    return _TORCH_FIRST[0] if _THREADS and _TORCH_FIRST else now


def wait() -> None:
    """Block until a started import has finished (no-op without one, or on the import thread)."""
    for t in _THREADS:
        if t is not threading.current_thread():
            t.join()
